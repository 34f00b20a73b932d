"""Replay buffer returning n-step returns, computed at sample time in torch (SB3 2.x semantics)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th

from lit_sb3.buffers.replay import ReplayBuffer

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
    ``rewards + (1 - dones) * discounts * Q(next_observations)`` (computed by
    :meth:`~lit_sb3.buffers.seed_replay.SeedReplayBuffer.gather`).

    Args:
        *args: :class:`ReplayBuffer` arguments.
        n_steps: maximum number of steps accumulated (>= 1).
        gamma: discount factor.
        **kwargs: :class:`ReplayBuffer` keyword arguments (``optimize_memory_usage`` is not supported).
    """

    def __init__(self, *args: Any, n_steps: int = 3, gamma: float = 0.99, **kwargs: Any) -> None:
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.n_steps = int(n_steps)
        self.gamma = float(gamma)
        super().__init__(*args, **kwargs)

    def _storage_options(self) -> dict[str, Any]:
        if self.optimize_memory_usage:
            raise NotImplementedError("NStepReplayBuffer doesn't support optimize_memory_usage=True")
        return {"n_steps": self.n_steps, "gamma": self.gamma}

    def _to_samples(self, data: Any, env: VecNormalize | None) -> Any:
        samples = super()._to_samples(data, env)
        if samples.discounts is None:  # n_steps=1: the storage's 1-step samples, with SB3's discounts (gamma)
            samples = samples._replace(discounts=th.full_like(samples.rewards, self.gamma))
        return samples

    def _init_kwargs(self) -> dict[str, Any]:
        return {**super()._init_kwargs(), "n_steps": self.n_steps, "gamma": self.gamma}
