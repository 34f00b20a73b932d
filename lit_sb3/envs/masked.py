"""Envs with invalid actions, for MaskablePPO: each exposes ``action_masks()`` (True: allowed).

* :class:`InvalidActionEnvDiscrete` (``InvalidActionDiscrete-v0``): sb3-contrib's test-env idea. The observation
  is a target in ``0..dim-1``; the reward is 1 when the action equals it. At every step all but
  ``dim - n_invalid_actions`` actions are invalid (the target is always valid); an invalid action ends the
  episode. Without masks a policy cannot tell which actions are invalid and must find the target among ``dim``;
  with them, among a few.
* :class:`TicTacToeEnv` (``TicTacToe-v0``): tic-tac-toe against a uniformly random opponent; occupied cells are
  invalid moves (playing one loses the game). Reward +1 win, -1 loss, 0 draw.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["InvalidActionEnvDiscrete", "TicTacToeEnv", "register_masked_envs"]


class InvalidActionEnvDiscrete(gym.Env):
    """Identity task with random invalid actions.

    Args:
        dim: number of actions (and of targets).
        ep_length: steps per episode.
        n_invalid_actions: actions invalid at each step (the target never is).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, dim: int = 40, ep_length: int = 50, n_invalid_actions: int = 36) -> None:
        if not 0 <= n_invalid_actions < dim:
            raise ValueError(f"n_invalid_actions must be in [0, dim), got {n_invalid_actions} with dim={dim}")
        self.dim, self.ep_length, self.n_invalid_actions = dim, ep_length, n_invalid_actions
        self.observation_space = spaces.Discrete(dim)
        self.action_space = spaces.Discrete(dim)
        self.state = 0
        self.current_step = 0
        self._mask = np.ones(dim, dtype=bool)

    def _new_state(self) -> int:
        self.state = int(self.np_random.integers(self.dim))
        others = np.delete(np.arange(self.dim), self.state)
        invalid = self.np_random.choice(others, size=self.n_invalid_actions, replace=False)
        self._mask = np.ones(self.dim, dtype=bool)
        self._mask[invalid] = False
        return self.state

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.current_step = 0
        return self._new_state(), {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        action = int(action)
        invalid = not self._mask[action]
        reward = 1.0 if action == self.state else 0.0
        self.current_step += 1
        terminated = invalid
        truncated = not terminated and self.current_step >= self.ep_length
        return self._new_state(), reward, terminated, truncated, {"invalid_action": invalid}

    def action_masks(self) -> np.ndarray:
        """The actions valid now (True)."""
        return self._mask.copy()


# the eight lines of a 3x3 board
_LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]])


class TicTacToeEnv(gym.Env):
    """Tic-tac-toe as the first player against a uniformly random opponent.

    Observation: the 9 cells (0 empty, 1 the agent's, 2 the opponent's). Action: the cell to play.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.MultiDiscrete([3] * 9)
        self.action_space = spaces.Discrete(9)
        self.board = np.zeros(9, dtype=np.int64)

    @staticmethod
    def _wins(board: np.ndarray, player: int) -> bool:
        return bool((board[_LINES] == player).all(axis=1).any())

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.board = np.zeros(9, dtype=np.int64)
        return self.board.copy(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        action = int(action)
        if self.board[action] != 0:
            return self.board.copy(), -1.0, True, False, {"invalid_action": True}
        self.board[action] = 1
        if self._wins(self.board, 1):
            return self.board.copy(), 1.0, True, False, {}
        empty = np.flatnonzero(self.board == 0)
        if len(empty) == 0:
            return self.board.copy(), 0.0, True, False, {}
        self.board[self.np_random.choice(empty)] = 2
        if self._wins(self.board, 2):
            return self.board.copy(), -1.0, True, False, {}
        if not (self.board == 0).any():
            return self.board.copy(), 0.0, True, False, {}
        return self.board.copy(), 0.0, False, False, {}

    def action_masks(self) -> np.ndarray:
        """The empty cells (True)."""
        return self.board == 0


def register_masked_envs() -> None:
    """Register ``InvalidActionDiscrete-v0`` and ``TicTacToe-v0`` (idempotent)."""
    if "InvalidActionDiscrete-v0" not in gym.registry:
        gym.register(id="InvalidActionDiscrete-v0", entry_point=InvalidActionEnvDiscrete)
    if "TicTacToe-v0" not in gym.registry:
        gym.register(id="TicTacToe-v0", entry_point=TicTacToeEnv)
