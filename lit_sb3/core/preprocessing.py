"""Observation/action space helpers and observation preprocessing (as SB3 does it)."""

from __future__ import annotations

import warnings

import numpy as np
import torch as th
from gymnasium import spaces
from torch.nn import functional as F

__all__ = [
    "check_for_nested_spaces",
    "get_action_dim",
    "get_device",
    "get_flattened_obs_dim",
    "get_obs_shape",
    "is_image_space",
    "is_image_space_channels_first",
    "maybe_transpose",
    "preprocess_obs",
]


def get_device(device: th.device | str = "auto") -> th.device:
    """Resolve ``"auto"`` to CUDA when available, else CPU."""
    if device == "auto":
        device = "cuda" if th.cuda.is_available() else "cpu"
    device = th.device(device)
    if device.type == "cuda" and not th.cuda.is_available():
        return th.device("cpu")
    return device


def is_image_space_channels_first(observation_space: spaces.Box) -> bool:
    """Guess whether an image space is channel-first (smallest dimension first)."""
    smallest = int(np.argmin(observation_space.shape))
    if smallest == 1:
        warnings.warn(
            "Treating image space as channels-last, while second dimension was smallest of the three.", stacklevel=2
        )
    return smallest == 0


def is_image_space(
    observation_space: spaces.Space, check_channels: bool = False, normalized_image: bool = False
) -> bool:
    """A 3-D uint8 Box with values in [0, 255] (any 3-D Box if ``normalized_image``)."""
    check_dtype = check_bounds = not normalized_image
    if isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 3:
        if check_dtype and observation_space.dtype != np.uint8:
            return False
        incorrect_bounds = np.any(observation_space.low != 0) or np.any(observation_space.high != 255)
        if check_bounds and incorrect_bounds:
            return False
        if not check_channels:
            return True
        n_channels = (
            observation_space.shape[0]
            if is_image_space_channels_first(observation_space)
            else observation_space.shape[-1]
        )
        return n_channels in [1, 3, 4]
    return False


def maybe_transpose(observation: np.ndarray, observation_space: spaces.Space) -> np.ndarray:
    """Transpose an HxWxC image (or a batch of them) to channel-first when that matches the space."""
    if is_image_space(observation_space):
        shape = observation_space.shape
        if not (observation.shape == shape or observation.shape[1:] == shape):
            axes = (2, 0, 1) if observation.ndim == 3 else (0, 3, 1, 2)
            transposed = np.transpose(observation, axes)
            if transposed.shape == shape or transposed.shape[1:] == shape:
                observation = transposed
    return observation


def preprocess_obs(obs, observation_space: spaces.Space, normalize_images: bool = True):
    """Cast/normalise a batch of observations for the network.

    Images are scaled to [0, 1]; Discrete and MultiDiscrete become one-hot; MultiBinary becomes float.

    Args:
        obs: a tensor (or dict of tensors) with a leading batch dimension.
        observation_space: the space they come from.
        normalize_images: divide uint8 images by 255.
    """
    if isinstance(observation_space, spaces.Dict):
        assert isinstance(obs, dict), f"Expected dict, got {type(obs)}"
        return {
            key: preprocess_obs(_obs, observation_space[key], normalize_images=normalize_images)
            for key, _obs in obs.items()
        }
    assert isinstance(obs, th.Tensor), f"Expecting a torch Tensor, but got {type(obs)}"
    if isinstance(observation_space, spaces.Box):
        if normalize_images and is_image_space(observation_space):
            return obs.float() / 255.0
        return obs.float()
    if isinstance(observation_space, spaces.Discrete):
        return F.one_hot(obs.long().reshape(-1), num_classes=int(observation_space.n)).float()
    if isinstance(observation_space, spaces.MultiDiscrete):
        obs = obs.long().reshape(-1, len(observation_space.nvec))
        return th.cat(
            [F.one_hot(obs[:, i], num_classes=int(n)).float() for i, n in enumerate(observation_space.nvec)],
            dim=-1,
        )
    if isinstance(observation_space, spaces.MultiBinary):
        return obs.float()
    raise NotImplementedError(f"Preprocessing not implemented for {observation_space}")


def get_obs_shape(observation_space: spaces.Space) -> tuple[int, ...] | dict[str, tuple[int, ...]]:
    """Shape of one observation as stored in buffers."""
    if isinstance(observation_space, spaces.Box):
        return observation_space.shape
    if isinstance(observation_space, spaces.Discrete):
        return (1,)
    if isinstance(observation_space, spaces.MultiDiscrete):
        return (len(observation_space.nvec),)
    if isinstance(observation_space, spaces.MultiBinary):
        return observation_space.shape
    if isinstance(observation_space, spaces.Dict):
        return {key: get_obs_shape(subspace) for key, subspace in observation_space.spaces.items()}  # type: ignore[misc]
    raise NotImplementedError(f"{observation_space} observation space is not supported")


def get_flattened_obs_dim(observation_space: spaces.Space) -> int:
    """Size of the flat (one-hot for discrete) observation vector."""
    if isinstance(observation_space, spaces.MultiDiscrete):
        return int(sum(observation_space.nvec))
    return int(spaces.utils.flatdim(observation_space))


def get_action_dim(action_space: spaces.Space) -> int:
    """Dimension of the action vector stored in buffers."""
    if isinstance(action_space, spaces.Box):
        return int(np.prod(action_space.shape))
    if isinstance(action_space, spaces.Discrete):
        return 1
    if isinstance(action_space, spaces.MultiDiscrete):
        return len(action_space.nvec)
    if isinstance(action_space, spaces.MultiBinary):
        assert isinstance(action_space.n, int), "Multi-dimensional MultiBinary action space is not supported."
        return int(action_space.n)
    raise NotImplementedError(f"{action_space} action space is not supported")


def check_for_nested_spaces(obs_space: spaces.Space) -> None:
    """Reject Dict/Tuple spaces nested inside Dict/Tuple spaces."""
    if isinstance(obs_space, (spaces.Dict, spaces.Tuple)):
        sub_spaces = obs_space.spaces.values() if isinstance(obs_space, spaces.Dict) else obs_space.spaces
        for sub_space in sub_spaces:
            if isinstance(sub_space, (spaces.Dict, spaces.Tuple)):
                raise NotImplementedError(
                    "Nested observation spaces are not supported (Tuple/Dict space inside Tuple/Dict space)."
                )
