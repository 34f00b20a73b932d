"""Rollout buffers of on-policy algorithms (PPO, A2C): one rollout, GAE, shuffled minibatches.

A buffer holds the rollouts of ``n_seeds`` seeds (K, seed batching) with ``n_envs`` envs each as ``K * n_envs``
columns, seed-major: GAE runs per column, so each seed's advantages are its own buffer's; at K = 1 the buffer is
exactly the single-seed one. :meth:`RolloutBuffer.get_seeds` yields minibatches with a leading seed dimension
(``[K, batch, ...]``), each seed shuffled by its own random stream.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.buffers.base import BaseBuffer
from lit_sb3.core.types import DictRolloutBufferSamples, RolloutBufferSamples

if TYPE_CHECKING:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = ["DictRolloutBuffer", "RolloutBuffer"]


class RolloutBuffer(BaseBuffer):
    """Stores one rollout of ``buffer_size`` steps per env collected with the current policy.

    Data are written as numpy arrays while collecting; ``get()`` converts the whole flattened rollout
    to tensors on ``device`` once and yields shuffled minibatches by indexing those tensors.

    Args:
        buffer_size: number of steps per env in a rollout (``n_steps``).
        observation_space: observation space.
        action_space: action space.
        device: torch device of the samples.
        gae_lambda: GAE lambda (1 gives the Monte-Carlo advantage with bootstrap).
        gamma: discount factor.
        n_envs: number of parallel environments (per seed).
        n_seeds: number of seeds K (their columns are stored side by side, seed-major).
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    episode_starts: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
        n_seeds: int = 1,
    ) -> None:
        if isinstance(n_seeds, bool) or not isinstance(n_seeds, (int, np.integer)) or n_seeds <= 0:
            raise ValueError(f"n_seeds must be a positive integer, got {n_seeds!r}")
        self.n_seeds = int(n_seeds)
        self.envs_per_seed = int(n_envs)
        # n_envs: the columns (K * envs per seed)
        super().__init__(buffer_size, observation_space, action_space, device, n_envs=int(n_envs) * self.n_seeds)
        self.gae_lambda = gae_lambda
        self.gamma = gamma
        self.generator_ready = False
        self._flat: dict[str, th.Tensor | dict[str, th.Tensor]] = {}
        self.reset()

    def _reset_common(self) -> None:
        shape = (self.buffer_size, self.n_envs)
        self.actions = np.zeros((*shape, self.action_dim), dtype=self.action_space.dtype)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.returns = np.zeros(shape, dtype=np.float32)
        self.episode_starts = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.log_probs = np.zeros(shape, dtype=np.float32)
        self.advantages = np.zeros(shape, dtype=np.float32)
        self.generator_ready = False
        self._flat = {}

    def reset(self) -> None:
        """Empty the buffer (arrays are re-allocated, cached tensors dropped)."""
        self.observations = np.zeros(
            (self.buffer_size, self.n_envs, *self.obs_shape), dtype=self.observation_space.dtype
        )
        self._reset_common()
        super().reset()

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        """Compute GAE(lambda) advantages and lambda-returns (``returns = advantages + values``).

        Each column (a seed's env) is its own recursion, so a seed's advantages are those of its own buffer.

        Args:
            last_values: value estimate of the observation after the last step, one per env (``[K, n_envs]`` or
                flat, seed-major).
            dones: whether the last step of each env ended its episode (same layout).
        """
        last_vals = last_values.detach().cpu().numpy().astype(np.float32).reshape(-1)
        next_non_terminal_last = 1.0 - np.asarray(dones).astype(np.float32).reshape(-1)
        gamma, lam = self.gamma, self.gae_lambda
        last_gae_lam = np.zeros(self.n_envs, dtype=np.float32)
        for step in reversed(range(self.buffer_size)):
            if step == self.buffer_size - 1:
                next_non_terminal = next_non_terminal_last
                next_values = last_vals
            else:
                next_non_terminal = 1.0 - self.episode_starts[step + 1]
                next_values = self.values[step + 1]
            delta = self.rewards[step] + gamma * next_values * next_non_terminal - self.values[step]
            last_gae_lam = delta + gamma * lam * next_non_terminal * last_gae_lam
            self.advantages[step] = last_gae_lam
        self.returns = self.advantages + self.values
        self._flat = {}

    def _check_not_full(self) -> None:
        if self.pos >= self.buffer_size:
            raise RuntimeError(
                f"{type(self).__name__} is full ({self.buffer_size} steps per env): call reset() before adding more."
            )

    def _store_common(
        self, action: np.ndarray, reward: np.ndarray, episode_start: np.ndarray, value: th.Tensor, log_prob: th.Tensor
    ) -> None:
        # Reshape to handle multi-dim and discrete action spaces
        self.actions[self.pos] = np.asarray(action).reshape((self.n_envs, self.action_dim))
        self.rewards[self.pos] = np.asarray(reward).reshape(self.n_envs)
        self.episode_starts[self.pos] = np.asarray(episode_start).reshape(self.n_envs)
        self.values[self.pos] = value.detach().cpu().numpy().reshape(self.n_envs)
        self.log_probs[self.pos] = log_prob.detach().cpu().numpy().reshape(self.n_envs)
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        episode_start: np.ndarray,
        value: th.Tensor,
        log_prob: th.Tensor,
    ) -> None:
        """Store one step of every env.

        Args:
            obs: observations, leading dim ``n_envs`` (or ``[K, n_envs]``).
            action: actions taken.
            reward: rewards received.
            episode_start: whether ``obs`` is the first observation of an episode.
            value: value estimates of ``obs`` under the current policy.
            log_prob: log-probabilities of ``action`` under the current policy.
        """
        self._check_not_full()
        # [n_envs, ...] (or [K, n_envs, ...]: every seed's envs) -> one row per column; Discrete: [n_envs] -> [n_envs, 1]
        self.observations[self.pos] = np.asarray(obs).reshape((self.n_envs, *self.obs_shape))
        self._store_common(action, reward, episode_start, value, log_prob)

    def _flat_tensor(self, arr: np.ndarray, dtype: th.dtype | None = None) -> th.Tensor:
        tensor = th.from_numpy(np.ascontiguousarray(self.swap_and_flatten(arr)))
        return tensor.to(device=self.device, dtype=dtype or tensor.dtype)

    def _flat_observations(self) -> th.Tensor | dict[str, th.Tensor]:
        return self._flat_tensor(self.observations)

    def _prepare_tensors(self) -> None:
        """Convert the whole rollout to flattened tensors on ``device`` (once per rollout)."""
        self._flat = {
            "observations": self._flat_observations(),
            # float32 actions as SB3 (its policies cast back to long for discrete spaces)
            "actions": self._flat_tensor(self.actions, th.float32),
            "values": self._flat_tensor(self.values).flatten(),
            "log_probs": self._flat_tensor(self.log_probs).flatten(),
            "advantages": self._flat_tensor(self.advantages).flatten(),
            "returns": self._flat_tensor(self.returns).flatten(),
        }

    def get(self, batch_size: int | None = None) -> Generator[RolloutBufferSamples, None, None]:
        """Yield shuffled minibatches covering the whole rollout once.

        Args:
            batch_size: minibatch size (None: the whole rollout in one batch). The last minibatch
                is smaller when ``batch_size`` does not divide ``buffer_size * n_envs``.
        """
        if not self.full:
            raise RuntimeError(
                f"RolloutBuffer.get() needs a full rollout ({self.buffer_size} steps), only {self.pos} were added."
            )
        if not self._flat:
            self._prepare_tensors()
        self.generator_ready = True
        total = self.buffer_size * self.n_envs
        if batch_size is None:
            batch_size = total
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size}")
        indices = th.randperm(total, device=self.device)
        start_idx = 0
        while start_idx < total:
            yield self._get_samples(indices[start_idx : start_idx + batch_size])
            start_idx += batch_size

    def get_seeds(
        self, batch_size: int | None = None, generators: Sequence[th.Generator] | None = None
    ) -> Generator[Any, None, None]:
        """Yield minibatches of every seed at once, each field ``[K, batch, ...]`` (one pass over the rollout).

        Seed k's minibatches are those of its own buffer shuffled by its own stream: its samples are the
        ``k``-th block of the flattened rollout (columns are seed-major, flattening is env-major), indexed by a
        permutation drawn from ``generators[k]``. At K = 1 without generators the permutation comes from torch's
        global generator, as :meth:`get`'s (the single-seed run's draw).

        Args:
            batch_size: minibatch size per seed (None: the whole rollout in one batch).
            generators: one torch generator per seed (required for K > 1); a None entry: a seed sitting out, which
                draws nothing (its samples come in order).
        """
        if not self.full:
            raise RuntimeError(
                f"{type(self).__name__}.get_seeds() needs a full rollout ({self.buffer_size} steps), only "
                f"{self.pos} were added."
            )
        if not self._flat:
            self._prepare_tensors()
        self.generator_ready = True
        K = self.n_seeds
        per_seed = self.buffer_size * self.envs_per_seed
        if batch_size is None:
            batch_size = per_seed
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size}")
        if generators is None:
            if K != 1:
                raise ValueError(f"get_seeds() needs one generator per seed for {K} seeds.")
            indices = th.randperm(per_seed, device=self.device).unsqueeze(0)
        else:
            if len(generators) != K:
                raise ValueError(f"get_seeds() needs one generator per seed: {K} seeds, {len(generators)} given.")
            indices = th.stack(
                [
                    th.randperm(per_seed, generator=g, device=self.device)
                    if g is not None
                    else th.arange(per_seed, device=self.device)
                    for g in generators
                ]
            )
        for start in range(0, per_seed, batch_size):
            yield self.seed_samples(indices[:, start : start + batch_size])

    def seed_samples(self, indices: th.Tensor) -> Any:
        """The samples at ``indices[k]`` of each seed k's own rollout (positions in its buffer's flattened order),
        each field ``[K, n, ...]``.

        Args:
            indices: ``[K, n]`` positions in ``[0, n_steps * n_envs)``.
        """
        per_seed = self.buffer_size * self.envs_per_seed
        offsets = th.arange(self.n_seeds, device=indices.device).unsqueeze(1) * per_seed
        samples = self._get_samples((indices + offsets).reshape(-1))
        return type(samples)(*(_split_seeds(field, self.n_seeds) for field in samples))

    def seed_slice(self, arr: np.ndarray, k: int) -> np.ndarray:
        """Seed ``k``'s columns of a ``[n_steps, K * n_envs, ...]`` array (its own buffer's array).

        Args:
            arr: a stored array (``values``, ``returns``, ...).
            k: seed index.
        """
        return arr[:, k * self.envs_per_seed : (k + 1) * self.envs_per_seed]

    def _get_samples(self, batch_inds: th.Tensor | np.ndarray, env: VecNormalize | None = None) -> RolloutBufferSamples:
        if not self._flat:
            self._prepare_tensors()
        idx = th.as_tensor(batch_inds, device=self.device)
        flat = self._flat
        return RolloutBufferSamples(
            observations=flat["observations"][idx],  # type: ignore[index]
            actions=flat["actions"][idx],  # type: ignore[index]
            old_values=flat["values"][idx],  # type: ignore[index]
            old_log_prob=flat["log_probs"][idx],  # type: ignore[index]
            advantages=flat["advantages"][idx],  # type: ignore[index]
            returns=flat["returns"][idx],  # type: ignore[index]
        )


def _split_seeds(field: Any, n_seeds: int) -> Any:
    """A sample field ``[K * batch, ...]`` (seed-major) as ``[K, batch, ...]`` (dicts key by key)."""
    if isinstance(field, dict):
        return {key: _split_seeds(value, n_seeds) for key, value in field.items()}
    return field.reshape(n_seeds, -1, *field.shape[1:])


class DictRolloutBuffer(RolloutBuffer):
    """Rollout buffer for Dict observation spaces (one array per key).

    Args:
        buffer_size: number of steps per env in a rollout.
        observation_space: a ``spaces.Dict`` observation space.
        action_space: action space.
        device: torch device of the samples.
        gae_lambda: GAE lambda.
        gamma: discount factor.
        n_envs: number of parallel environments (per seed).
        n_seeds: number of seeds K.
    """

    observation_space: spaces.Dict
    obs_shape: dict[str, tuple[int, ...]]  # type: ignore[assignment]
    observations: dict[str, np.ndarray]  # type: ignore[assignment]

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
        n_seeds: int = 1,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(
                f"DictRolloutBuffer needs a Dict observation space, got {type(observation_space).__name__}; "
                "use RolloutBuffer for other spaces."
            )
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs, n_seeds)

    def reset(self) -> None:
        """Empty the buffer."""
        self.observations = {
            key: np.zeros((self.buffer_size, self.n_envs, *shape), dtype=self.observation_space[key].dtype)
            for key, shape in self.obs_shape.items()
        }
        self._reset_common()
        BaseBuffer.reset(self)

    def add(  # type: ignore[override]
        self,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        episode_start: np.ndarray,
        value: th.Tensor,
        log_prob: th.Tensor,
    ) -> None:
        """Store one step of every env (see :meth:`RolloutBuffer.add`; ``obs`` is a dict of arrays)."""
        self._check_not_full()
        for key in self.observations:
            self.observations[key][self.pos] = np.asarray(obs[key]).reshape((self.n_envs, *self.obs_shape[key]))
        self._store_common(action, reward, episode_start, value, log_prob)

    def _flat_observations(self) -> dict[str, th.Tensor]:  # type: ignore[override]
        return {key: self._flat_tensor(arr) for key, arr in self.observations.items()}

    def get(  # type: ignore[override]
        self, batch_size: int | None = None
    ) -> Generator[DictRolloutBufferSamples, None, None]:
        """Yield shuffled minibatches of Dict observations (see :meth:`RolloutBuffer.get`)."""
        yield from super().get(batch_size)  # type: ignore[misc]

    def _get_samples(  # type: ignore[override]
        self, batch_inds: th.Tensor | np.ndarray, env: VecNormalize | None = None
    ) -> DictRolloutBufferSamples:
        if not self._flat:
            self._prepare_tensors()
        idx = th.as_tensor(batch_inds, device=self.device)
        flat = self._flat
        return DictRolloutBufferSamples(
            observations={key: obs[idx] for key, obs in flat["observations"].items()},  # type: ignore[union-attr]
            actions=flat["actions"][idx],  # type: ignore[index]
            old_values=flat["values"][idx],  # type: ignore[index]
            old_log_prob=flat["log_probs"][idx],  # type: ignore[index]
            advantages=flat["advantages"][idx],  # type: ignore[index]
            returns=flat["returns"][idx],  # type: ignore[index]
        )
