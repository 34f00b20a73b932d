"""Replay buffer for Dict observation spaces (one storage tensor per key)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import DTypeLike

from lit_sb3.buffers.base import storage_obs_dtype
from lit_sb3.buffers.replay import ReplayBuffer

__all__ = ["DictReplayBuffer"]


class DictReplayBuffer(ReplayBuffer):
    """Replay buffer for ``spaces.Dict`` observations (see :class:`ReplayBuffer`): observations, next observations
    and samples are ``{key: tensor}`` dicts.

    Args:
        buffer_size: maximum number of transitions (shared by all envs).
        observation_space: a Dict observation space (not nested).
        action_space: action space.
        device: torch device of the samples.
        n_envs: number of parallel environments.
        optimize_memory_usage: not supported (as in SB3); must be False.
        handle_timeout_termination: treat ``"TimeLimit.truncated"`` as a timeout, not a termination.
        obs_dtype: storage dtype for the floating-point keys (a single dtype), or a ``{key: dtype}`` dict;
            default: each key's dtype with float64 -> float32.
        storage_device: device holding the storage.
    """

    observation_space: spaces.Dict

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        obs_dtype: DTypeLike | dict[str, DTypeLike] | None = None,
        storage_device: th.device | str = "cpu",
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(
                f"DictReplayBuffer needs a Dict observation space, got {type(observation_space).__name__}; "
                "use ReplayBuffer for other spaces."
            )
        if optimize_memory_usage:
            raise ValueError("DictReplayBuffer does not support optimize_memory_usage=True; use False.")
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            optimize_memory_usage=False,
            handle_timeout_termination=handle_timeout_termination,
            obs_dtype=obs_dtype,  # type: ignore[arg-type]
            storage_device=storage_device,
        )

    def _init_obs_dtype(self, obs_dtype: DTypeLike | dict[str, DTypeLike] | None) -> None:
        keys = list(self.observation_space.spaces)
        if isinstance(obs_dtype, dict):
            unknown = set(obs_dtype) - set(keys)
            if unknown:
                raise ValueError(f"obs_dtype has keys {sorted(unknown)} not in the observation space; allowed: {keys}")
            per_key = {k: obs_dtype.get(k) for k in keys}
        else:
            per_key = {
                k: obs_dtype if np.issubdtype(np.dtype(self.observation_space[k].dtype), np.floating) else None
                for k in keys
            }
        self.obs_dtype: Any = {k: storage_obs_dtype(self.observation_space[k], per_key[k]) for k in keys}
