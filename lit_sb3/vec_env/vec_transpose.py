"""VecTransposeImage: HxWxC images to CxHxW (what PyTorch convolutions expect)."""

from __future__ import annotations

from copy import deepcopy

import numpy as np
from gymnasium import spaces

from lit_sb3.core.preprocessing import is_image_space, is_image_space_channels_first
from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvStepReturn, VecEnvWrapper

__all__ = ["VecTransposeImage"]


class VecTransposeImage(VecEnvWrapper):
    """Re-order image channels from HxWxC to CxHxW (for a Box image space or the image keys of a Dict space).

    Args:
        venv: the vectorized environment to wrap.
        skip: do nothing (the channel-order heuristic can be wrong, see SB3 issue #671).
    """

    def __init__(self, venv: VecEnv, skip: bool = False) -> None:
        if not (is_image_space(venv.observation_space) or isinstance(venv.observation_space, spaces.Dict)):
            raise ValueError(
                "VecTransposeImage needs an image observation space (uint8 Box of shape HxWxC with bounds [0, 255]) "
                f"or a Dict space, got {venv.observation_space}."
            )
        self.skip = skip
        self.image_space_keys: list[str] = []
        if skip:
            super().__init__(venv)
            return
        if isinstance(venv.observation_space, spaces.Dict):
            observation_space = deepcopy(venv.observation_space)
            for key, space in observation_space.spaces.items():
                if is_image_space(space):
                    self.image_space_keys.append(key)
                    observation_space.spaces[key] = self.transpose_space(space, key)  # type: ignore[arg-type]
        else:
            observation_space = self.transpose_space(venv.observation_space)  # type: ignore[assignment, arg-type]
        super().__init__(venv, observation_space=observation_space)

    @staticmethod
    def transpose_space(observation_space: spaces.Box, key: str = "") -> spaces.Box:
        """The channel-first version of a channel-last image space.

        Args:
            observation_space: an HxWxC image space.
            key: its key in a Dict space (for error messages).
        """
        if not is_image_space(observation_space):
            raise ValueError(f"The observation space {key} must be an image, got {observation_space}.")
        if is_image_space_channels_first(observation_space):
            raise ValueError(
                f"The observation space {key} must follow the channel last convention (HxWxC), "
                f"got shape {observation_space.shape}."
            )
        height, width, channels = observation_space.shape
        return spaces.Box(low=0, high=255, shape=(channels, height, width), dtype=observation_space.dtype)  # type: ignore[arg-type]

    @staticmethod
    def transpose_image(image: np.ndarray) -> np.ndarray:
        """Transpose one HxWxC image or a batch NxHxWxC to channel-first."""
        if len(image.shape) == 3:
            return np.transpose(image, (2, 0, 1))
        return np.transpose(image, (0, 3, 1, 2))

    def transpose_observations(self, observations: np.ndarray | dict) -> np.ndarray | dict:
        """Transposed observations (new dict for Dict observations; the input is not modified)."""
        if self.skip:
            return observations
        if isinstance(observations, dict):
            observations = dict(observations)
            for k in self.image_space_keys:
                observations[k] = self.transpose_image(observations[k])
            return observations
        return self.transpose_image(observations)

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        for idx in np.flatnonzero(dones):
            if "terminal_observation" in infos[idx]:
                infos[idx]["terminal_observation"] = self.transpose_observations(infos[idx]["terminal_observation"])
        assert isinstance(observations, (np.ndarray, dict))
        return self.transpose_observations(observations), rewards, dones, infos

    def reset(self) -> np.ndarray | dict:
        """Reset all environments; returns channel-first observations."""
        observations = self.venv.reset()
        assert isinstance(observations, (np.ndarray, dict))
        return self.transpose_observations(observations)

    def close(self) -> None:
        self.venv.close()
