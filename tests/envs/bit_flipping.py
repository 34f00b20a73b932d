"""Bit flipping env: a tiny goal-conditioned env to test HER (SB3's ``BitFlippingEnv`` semantics)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from gymnasium import Env, spaces
from gymnasium.envs.registration import EnvSpec

__all__ = ["BitFlippingEnv"]


class BitFlippingEnv(Env):
    """Flip bits until the state equals the goal (all ones).

    Observations are goal Dicts (``observation``, ``achieved_goal``, ``desired_goal``); the reward is 0 when
    the goal is reached and -1 otherwise; the episode terminates on success and is truncated after
    ``max_steps`` steps.

    Args:
        n_bits: number of bits.
        continuous: Box actions in [-1, 1]^n_bits (bit i flips when action[i] > 0) instead of Discrete(n_bits).
        max_steps: steps before truncation (default ``n_bits``).
        discrete_obs_space: observations are the integer encoding of the bits (Discrete(2**n_bits)).
        image_obs_space: observations are uint8 greyscale images holding the bits (0 or 255).
        channel_first: image layout (1, 36, 36) if True, else (36, 36, 1).
        render_mode: "human" prints the state, "rgb_array" returns it.
    """

    spec = EnvSpec("BitFlippingEnv-v0", "no-entry-point")
    state: np.ndarray

    def __init__(
        self,
        n_bits: int = 10,
        continuous: bool = False,
        max_steps: int | None = None,
        discrete_obs_space: bool = False,
        image_obs_space: bool = False,
        channel_first: bool = True,
        render_mode: str = "human",
    ) -> None:
        super().__init__()
        if discrete_obs_space and image_obs_space:
            raise ValueError("Cannot use both discrete and image observation spaces")
        self.render_mode = render_mode
        self.n_bits = n_bits
        self.image_shape = (1, 36, 36) if channel_first else (36, 36, 1)
        self.continuous = continuous
        self.discrete_obs_space = discrete_obs_space
        self.image_obs_space = image_obs_space
        self.observation_space = self._make_observation_space(n_bits)
        # internal state space (always bits)
        self._obs_space = spaces.MultiBinary(n_bits)
        if continuous:
            self.action_space = spaces.Box(-1, 1, shape=(n_bits,), dtype=np.float32)
        else:
            self.action_space = spaces.Discrete(n_bits)
        self.desired_goal = np.ones((n_bits,), dtype=np.int8)
        self.max_steps = n_bits if max_steps is None else max_steps
        self.current_step = 0
        self.state = np.zeros(n_bits, dtype=np.int8)

    def _make_observation_space(self, n_bits: int) -> spaces.Dict:
        if self.discrete_obs_space:
            sub: spaces.Space = spaces.Discrete(2**n_bits)
            return spaces.Dict(
                {
                    "observation": sub,
                    "achieved_goal": spaces.Discrete(2**n_bits),
                    "desired_goal": spaces.Discrete(2**n_bits),
                }
            )
        if self.image_obs_space:
            return spaces.Dict(
                {
                    k: spaces.Box(0, 255, shape=self.image_shape, dtype=np.uint8)
                    for k in ("observation", "achieved_goal", "desired_goal")
                }
            )
        return spaces.Dict({k: spaces.MultiBinary(n_bits) for k in ("observation", "achieved_goal", "desired_goal")})

    def seed(self, seed: int) -> None:
        """Seed the sampling of initial states."""
        self._obs_space.seed(seed)

    def convert_if_needed(self, state: np.ndarray) -> int | np.ndarray:
        """Bits -> the observation format of this env (int, image or bits)."""
        if self.discrete_obs_space:
            bits = state.astype(np.int64)
            return int(np.sum(bits * (2 ** np.arange(len(bits)))))
        if self.image_obs_space:
            size = int(np.prod(self.image_shape))
            image = np.concatenate((state.astype(np.uint8) * 255, np.zeros(size - len(state), dtype=np.uint8)))
            return image.reshape(self.image_shape).astype(np.uint8)
        return state

    def convert_to_bit_vector(self, state: int | np.ndarray, batch_size: int) -> np.ndarray:
        """Observation format -> bits, shape ``(batch_size, n_bits)``."""
        if isinstance(state, (int, np.integer)):
            bit_vector = np.array(state).reshape(batch_size, -1)
            return ((bit_vector & (1 << np.arange(self.n_bits))) > 0).astype(int)
        if self.image_obs_space:
            return np.asarray(state).reshape(batch_size, -1)[:, : self.n_bits] / 255
        return np.array(state).reshape(batch_size, -1)

    def _get_obs(self) -> dict[str, int | np.ndarray]:
        return OrderedDict(
            [
                ("observation", self.convert_if_needed(self.state.copy())),
                ("achieved_goal", self.convert_if_needed(self.state.copy())),
                ("desired_goal", self.convert_if_needed(self.desired_goal.copy())),
            ]
        )

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, int | np.ndarray], dict]:
        if seed is not None:
            self._obs_space.seed(seed)
        self.current_step = 0
        self.state = self._obs_space.sample()
        return self._get_obs(), {}

    def step(self, action: np.ndarray | int) -> tuple[dict[str, int | np.ndarray], float, bool, bool, dict[str, Any]]:
        if self.continuous:
            flip = np.asarray(action) > 0
            self.state[flip] = 1 - self.state[flip]
        else:
            self.state[int(action)] = 1 - self.state[int(action)]
        obs = self._get_obs()
        reward = float(np.asarray(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None)).item())
        terminated = reward == 0
        self.current_step += 1
        truncated = self.current_step >= self.max_steps
        return obs, reward, terminated, truncated, {"is_success": terminated}

    def compute_reward(self, achieved_goal: int | np.ndarray, desired_goal: int | np.ndarray, _info: Any) -> np.ndarray:
        """Vectorised reward: 0 where the goals are equal, -1 elsewhere (float32, one per row)."""
        if isinstance(achieved_goal, (int, np.integer)):
            batch_size = 1
        elif self.image_obs_space:
            batch_size = achieved_goal.shape[0] if len(achieved_goal.shape) > 3 else 1
        else:
            batch_size = achieved_goal.shape[0] if len(achieved_goal.shape) > 1 else 1
        desired = self.convert_to_bit_vector(desired_goal, batch_size)
        achieved = self.convert_to_bit_vector(achieved_goal, batch_size)
        distance = np.linalg.norm(achieved.astype(np.float64) - desired.astype(np.float64), axis=-1)
        return -(distance > 0).astype(np.float32)

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode == "rgb_array":
            return self.state.copy()
        print(self.state)
        return None

    def close(self) -> None:
        pass
