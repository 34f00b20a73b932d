"""Replay buffer returning n-step returns, computed at sample time in torch (SB3 2.x semantics)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th

from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.types import ReplayBufferSamples

if TYPE_CHECKING:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = ["NStepReplayBuffer"]


class NStepReplayBuffer(ReplayBuffer):
    """Replay buffer whose samples carry n-step returns.

    Transitions are stored one step at a time as in :class:`ReplayBuffer`. For a sampled transition ``i``
    (of one env) the reward is ``r_i + gamma r_{i+1} + ... + gamma^(k-1) r_{i+k-1}`` where the window of
    ``k <= n_steps`` transitions stops at the first termination or truncation, and never goes past the newest
    transition (the write head). ``next_observations`` is the next observation of the last transition used,
    ``dones`` its termination flag (timeouts excluded) and ``discounts = gamma ** k``, so the target is
    ``rewards + (1 - dones) * discounts * Q(next_observations)``.

    Args:
        *args: :class:`ReplayBuffer` arguments.
        n_steps: maximum number of steps accumulated (>= 1).
        gamma: discount factor.
        **kwargs: :class:`ReplayBuffer` keyword arguments (``optimize_memory_usage`` is not supported).
    """

    def __init__(self, *args: Any, n_steps: int = 3, gamma: float = 0.99, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.n_steps = int(n_steps)
        self.gamma = float(gamma)
        if self.optimize_memory_usage:
            raise NotImplementedError("NStepReplayBuffer doesn't support optimize_memory_usage=True")

    def _init_kwargs(self) -> dict[str, Any]:
        return {**super()._init_kwargs(), "n_steps": self.n_steps, "gamma": self.gamma}

    def _get_samples(self, batch_inds: th.Tensor | np.ndarray, env: VecNormalize | None = None) -> ReplayBufferSamples:
        dev = self.storage_device
        batch_inds = th.as_tensor(batch_inds, dtype=th.long, device=dev)
        env_inds = self._env_indices(batch_inds.shape[0])
        steps = th.arange(self.n_steps, device=dev)
        indices = (batch_inds[:, None] + steps) % self.buffer_size  # [batch, n]
        flat_seq = indices * self.n_envs + env_inds[:, None]

        rewards_seq = self._flat(self.rewards)[flat_seq]  # [batch, n]
        rewards_seq = self._normalize_reward_tensor(rewards_seq, env).to(dev)
        dones_seq = self._flat(self.dones)[flat_seq] > 0
        timeouts_seq = self._flat(self.timeouts)[flat_seq] > 0
        # the newest transition ends every window: what follows it is older data or not written yet
        newest = (self.pos - 1) % self.buffer_size
        stop = dones_seq | timeouts_seq | (indices == newest)
        has_stop = stop.any(dim=1)
        first_stop = stop.to(th.uint8).argmax(dim=1)  # first True
        last_step = th.where(has_stop, first_stop, th.full_like(first_stop, self.n_steps - 1))  # [batch]

        mask = steps[None, :] <= last_step[:, None]
        step_discounts = th.pow(self.gamma, steps.to(th.float64)).to(th.float32)
        n_step_returns = (rewards_seq * step_discounts * mask).sum(dim=1, keepdim=True)
        target_discounts = th.pow(self.gamma, (last_step + 1).to(th.float64)).to(th.float32).unsqueeze(1)

        last_flat = ((batch_inds + last_step) % self.buffer_size) * self.n_envs + env_inds
        flat_idx = batch_inds * self.n_envs + env_inds
        obs, next_obs = self._gather_obs(flat_idx, last_flat)
        final_dones = self._dones_without_timeouts(last_flat).unsqueeze(1)

        return ReplayBufferSamples(
            observations=self._to_device(self._normalize_obs_tensor(obs, env)),
            actions=self._to_device(self._gather(self.actions, flat_idx)),
            next_observations=self._to_device(self._normalize_obs_tensor(next_obs, env)),
            dones=self._to_device(final_dones),
            rewards=self._to_device(n_step_returns),
            discounts=self._to_device(target_discounts),
        )
