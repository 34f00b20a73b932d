"""VecFrameStack: stack the last ``n_stack`` observations (Box or Dict spaces)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvWrapper
from lit_sb3.vec_env.stacked_observations import StackedObservations

__all__ = ["VecFrameStack"]


class VecFrameStack(VecEnvWrapper):
    """Frame stacking for vectorized environments (designed for images, works for any Box/Dict).

    Args:
        venv: the vectorized environment to wrap.
        n_stack: number of frames to stack.
        channels_order: ``"first"``/``"last"`` stacking axis, ``None`` to detect it for images (default last),
            or a dict key -> order for Dict spaces.
    """

    def __init__(self, venv: VecEnv, n_stack: int, channels_order: str | Mapping[str, str] | None = None) -> None:
        if not isinstance(venv.observation_space, (spaces.Box, spaces.Dict)):
            raise TypeError(
                "VecFrameStack only works with gym.spaces.Box and gym.spaces.Dict observation spaces, "
                f"got {venv.observation_space}."
            )
        self.stacked_obs = StackedObservations(venv.num_envs, n_stack, venv.observation_space, channels_order)
        super().__init__(venv, observation_space=self.stacked_obs.stacked_observation_space)

    def step_wait(self) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        observations, rewards, dones, infos = self.venv.step_wait()
        observations, infos = self.stacked_obs.update(observations, dones, infos)  # type: ignore[arg-type]
        return observations, rewards, dones, infos

    def reset(self) -> np.ndarray | dict[str, np.ndarray]:
        """Reset all environments; the stacks hold zeros and the first observation."""
        observation = self.venv.reset()
        return self.stacked_obs.reset(observation)  # type: ignore[arg-type]
