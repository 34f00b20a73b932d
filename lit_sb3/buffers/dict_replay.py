"""Replay buffer for Dict observation spaces (one storage tensor per key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import DTypeLike

from lit_sb3.buffers.base import storage_obs_dtype
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.types import DictReplayBufferSamples

if TYPE_CHECKING:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = ["DictReplayBuffer"]


class DictReplayBuffer(ReplayBuffer):
    """Replay buffer for ``spaces.Dict`` observations (see :class:`ReplayBuffer`).

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
    obs_shape: dict[str, tuple[int, ...]]  # type: ignore[assignment]
    observations: dict[str, th.Tensor]  # type: ignore[assignment]
    next_observations: dict[str, th.Tensor]  # type: ignore[assignment]

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

    # storage ------------------------------------------------------------

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
        self.obs_dtype = {k: storage_obs_dtype(self.observation_space[k], per_key[k]) for k in keys}  # type: ignore[assignment]

    def _allocate_observations(self) -> None:
        self.observations = {k: self._zeros(shape, self.obs_dtype[k]) for k, shape in self.obs_shape.items()}  # type: ignore[index]
        self.next_observations = {k: self._zeros(shape, self.obs_dtype[k]) for k, shape in self.obs_shape.items()}  # type: ignore[index]

    def _refresh_views(self) -> None:
        self._obs_np = {k: self._np_view(t) for k, t in self.observations.items()}  # type: ignore[assignment]
        self._next_obs_np = {k: self._np_view(t) for k, t in self.next_observations.items()}  # type: ignore[assignment]
        self._np = {name: self._np_view(getattr(self, name)) for name in ("actions", "rewards", "dones", "timeouts")}

    def _storage_tensors(self) -> dict[str, th.Tensor]:
        tensors = {f"observations/{k}": t for k, t in self.observations.items()}
        tensors.update({f"next_observations/{k}": t for k, t in self.next_observations.items()})
        tensors.update(
            {"actions": self.actions, "rewards": self.rewards, "dones": self.dones, "timeouts": self.timeouts}
        )
        return tensors

    def _obs_slot_nbytes(self) -> int:
        return 2 * sum(int(np.prod(shape)) * self.obs_dtype[k].itemsize for k, shape in self.obs_shape.items())  # type: ignore[index]

    def _obs_dtype_json(self) -> Any:
        return {k: d.name for k, d in self.obs_dtype.items()}  # type: ignore[union-attr]

    # adding -------------------------------------------------------------

    def _add_observations(self, obs: dict[str, np.ndarray], next_obs: dict[str, np.ndarray]) -> None:  # type: ignore[override]
        for key, space in self.observation_space.spaces.items():
            o, no = np.asarray(obs[key]), np.asarray(next_obs[key])
            if isinstance(space, spaces.Discrete):
                o = o.reshape((self.n_envs, *self.obs_shape[key]))
                no = no.reshape((self.n_envs, *self.obs_shape[key]))
            self._write(self.observations[key], self._obs_np[key], self.pos, o)  # type: ignore[index]
            self._write(self.next_observations[key], self._next_obs_np[key], self.pos, no)  # type: ignore[index]

    def add(  # type: ignore[override]
        self,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one transition of every env (see :meth:`ReplayBuffer.add`; observations are dicts)."""
        super().add(obs, next_obs, action, reward, done, infos)  # type: ignore[arg-type]

    # sampling -----------------------------------------------------------

    def _gather_obs(  # type: ignore[override]
        self, flat_idx: th.Tensor, next_flat_idx: th.Tensor | None = None
    ) -> tuple[dict[str, th.Tensor], dict[str, th.Tensor]]:
        nxt = flat_idx if next_flat_idx is None else next_flat_idx
        obs = {k: self._gather(t, flat_idx) for k, t in self.observations.items()}
        next_obs = {k: self._gather(t, nxt) for k, t in self.next_observations.items()}
        return obs, next_obs

    def _normalize_obs_tensor(  # type: ignore[override]
        self, obs: dict[str, th.Tensor], env: VecNormalize | None
    ) -> dict[str, th.Tensor]:
        if env is None:
            return obs
        normalized = env.normalize_obs({k: t.cpu().numpy() for k, t in obs.items()})
        result = {}
        for k, arr in normalized.items():  # type: ignore[union-attr]
            arr = np.asarray(arr)
            if arr.dtype == np.float64 and self.obs_dtype[k] != np.float64:  # type: ignore[index]
                arr = arr.astype(np.float32)
            result[k] = th.from_numpy(np.ascontiguousarray(arr))
        return result

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> DictReplayBufferSamples:  # type: ignore[override]
        """Sample ``batch_size`` transitions uniformly (see :meth:`ReplayBuffer.sample`)."""
        return super().sample(batch_size, env=env)  # type: ignore[return-value]

    def _get_samples(  # type: ignore[override]
        self, batch_inds: th.Tensor | np.ndarray, env: VecNormalize | None = None
    ) -> DictReplayBufferSamples:
        batch_inds = th.as_tensor(batch_inds, dtype=th.long, device=self.storage_device)
        flat_idx = batch_inds * self.n_envs + self._env_indices(batch_inds.shape[0])
        obs, next_obs = self._gather_obs(flat_idx)
        obs = self._normalize_obs_tensor(obs, env)
        next_obs = self._normalize_obs_tensor(next_obs, env)
        return DictReplayBufferSamples(
            observations={k: self._to_device(v) for k, v in obs.items()},
            actions=self._to_device(self._gather(self.actions, flat_idx)),
            next_observations={k: self._to_device(v) for k, v in next_obs.items()},
            dones=self._to_device(self._dones_without_timeouts(flat_idx).unsqueeze(1)),
            rewards=self._to_device(
                self._normalize_reward_tensor(self._gather(self.rewards, flat_idx).unsqueeze(1), env)
            ),
        )
