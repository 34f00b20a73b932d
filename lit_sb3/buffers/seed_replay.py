"""Replay storage of K seeds: :class:`SeedReplayBuffer`, ``[K, buffer_size, n_envs, ...]`` on the model's device.

Used by the off-policy algorithms when they train K > 1 seeds (a single seed uses
:class:`~lit_sb3.buffers.replay.ReplayBuffer` as before). The K transitions of one env step are written with one
write per field (one packed host->device copy off the CPU); each seed samples its own minibatch from its own slice
with its own ``torch.Generator`` (:func:`~lit_sb3.policies.seed_stack.seed_randint`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.buffers.base import check_declared_buffer, numpy_to_torch_dtype, storage_obs_dtype
from lit_sb3.core.preprocessing import get_action_dim, get_obs_shape
from lit_sb3.core.types import ReplayBufferSamples
from lit_sb3.policies.seed_stack import seed_randint

__all__ = ["SeedReplayBuffer"]


class SeedReplayBuffer:
    """K replay buffers as one stacked storage ``[K, buffer_size, n_envs, ...]`` on one device; all seeds write
    the same slot (they move in lockstep), each samples its own indices from its own random stream.

    Args:
        n_seeds: K.
        buffer_size: capacity per seed (divided by ``n_envs`` as in ``ReplayBuffer``).
        observation_space: the observation space.
        action_space: the action space.
        n_envs: sub-envs per seed.
        device: where the storage lives (the model's device: no host round trip when sampling).
        handle_timeout_termination: a timeout is not a terminal state.
        n_steps: n-step returns (> 1: as :class:`~lit_sb3.buffers.nstep_replay.NStepReplayBuffer` computes them).
        gamma: discount factor of the n-step returns.
    """

    def __init__(
        self,
        n_seeds: int,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        n_envs: int,
        device: th.device,
        handle_timeout_termination: bool = True,
        n_steps: int = 1,
        gamma: float = 0.99,
    ) -> None:
        check_declared_buffer(buffer_size * n_seeds, observation_space, action_space)
        self.n_steps, self.gamma = int(n_steps), float(gamma)
        self.n_seeds, self.n_envs = n_seeds, n_envs
        self.buffer_size = max(buffer_size // n_envs, 1)
        self.handle_timeout_termination = handle_timeout_termination
        self.device = device
        self.pos, self.full = 0, False
        self._obs_shape = get_obs_shape(observation_space)
        self._obs_dtype = numpy_to_torch_dtype(storage_obs_dtype(observation_space, None))
        self._action_dtype = th.float32 if isinstance(action_space, spaces.Box) else th.int64
        self._action_dim = get_action_dim(action_space)
        # allocated as it fills (doubling up to buffer_size): a 1M-transition buffer of a 20k-step run holds 20k
        self.capacity = 0
        # off the CPU, each step's transitions go to the device as one packed copy (when float32 holds them exactly)
        self.pack_transfers = device.type != "cpu" and self._obs_dtype == th.float32
        self._allocate(min(self.buffer_size, self.INITIAL_CAPACITY))
        self._seed_index = th.arange(n_seeds, device=device).unsqueeze(1)

    INITIAL_CAPACITY = 4096
    FIELDS = ("observations", "next_observations", "actions", "rewards", "dones")
    _STORED = (*FIELDS, "timeouts")

    def _allocate(self, capacity: int) -> None:
        """(Re)allocate the storage for ``capacity`` slots, keeping what is stored."""
        lead = (self.n_seeds, capacity, self.n_envs)
        shapes = {
            "observations": ((*lead, *self._obs_shape), self._obs_dtype),
            "next_observations": ((*lead, *self._obs_shape), self._obs_dtype),
            "actions": ((*lead, self._action_dim), self._action_dtype),
            "rewards": (lead, th.float32),
            "dones": (lead, th.float32),  # terminal (timeouts removed)
            "timeouts": (lead, th.float32),  # episode ends by a time limit (they end n-step windows too)
        }
        for name, (shape, dtype) in shapes.items():
            new = th.zeros(shape, dtype=dtype, device=self.device)
            if self.capacity:
                new[:, : self.capacity].copy_(getattr(self, name))
            setattr(self, name, new)
        self.capacity = capacity
        self._refresh_views()

    def _refresh_views(self) -> None:
        cpu = self.device.type == "cpu"
        self._np_views = [getattr(self, name).numpy() for name in self._STORED] if cpu else None

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        timeouts: np.ndarray | None = None,
    ) -> None:
        """Write one step of every seed (``[K, n_envs, ...]`` arrays) at the current slot.

        Args:
            obs: observations.
            next_obs: next observations (terminal observations where an episode ended).
            actions: actions (scaled to [-1, 1] for Box spaces).
            rewards: rewards.
            dones: terminal flags, 1 only for true terminations (not timeouts).
            timeouts: episode ends by a time limit (None: none).
        """
        pos = self.pos
        if pos == self.capacity:
            self._allocate(min(self.buffer_size, 2 * self.capacity))
        fields = [getattr(self, name) for name in self._STORED]
        values = [obs, next_obs, actions, rewards, dones, np.zeros_like(dones) if timeouts is None else timeouts]
        if self.pack_transfers:
            # one host->device copy for the K transitions (float32 is exact for the stored actions and flags)
            k, n = self.n_seeds, self.n_envs
            packed = np.concatenate([np.asarray(v, dtype=np.float32).reshape(k, n, -1) for v in values], axis=-1)
            device_values = th.from_numpy(packed).to(self.device).split([f[0, 0, 0].numel() for f in fields], -1)
            for tensor, value in zip(fields, device_values):
                tensor[:, pos].copy_(value.reshape(tensor[:, pos].shape))
        elif self._np_views is not None:  # numpy views of the CPU storage: the cheapest writes
            for array, value in zip(self._np_views, values):
                view = array[:, pos]
                view[...] = np.reshape(value, view.shape)
        else:
            for tensor, value in zip(fields, values):
                tensor[:, pos].copy_(th.as_tensor(value, dtype=tensor.dtype).reshape(tensor[:, pos].shape))
        self.pos = (pos + 1) % self.buffer_size
        self.full = self.full or self.pos == 0

    def to(self, device: th.device) -> None:
        """Move the storage to ``device``."""
        for name in (*self._STORED, "_seed_index"):
            setattr(self, name, getattr(self, name).to(device))
        self.device = device
        self.pack_transfers = device.type != "cpu" and self._obs_dtype == th.float32
        self._refresh_views()

    def state_dict(self) -> dict[str, th.Tensor | int | bool]:
        """What is stored (the filled slots of every field, on the CPU) and the write position: a Lightning
        checkpoint's copy of the storage (tensors only, so it loads with ``torch.load(weights_only=True)``)."""
        used = self.size()
        state: dict[str, th.Tensor | int | bool] = {"pos": self.pos, "full": self.full}
        for name in self._STORED:
            state[name] = getattr(self, name)[:, :used].cpu()
        return state

    def load_state_dict(self, state: dict[str, th.Tensor | int | bool]) -> None:
        """Restore :meth:`state_dict` into this (same K, sizes and spaces) storage; a mismatch is a one-line
        ``ValueError`` raised before anything is allocated.

        Args:
            state: what :meth:`state_dict` returned.
        """
        pos, full = int(state["pos"]), bool(state["full"])
        used = self.buffer_size if full else pos
        if not 0 <= pos < self.buffer_size:
            raise ValueError(f"replay storage position {pos} (full={full}) does not fit a buffer of {self.buffer_size}")
        for name in self._STORED:
            value, current = state[name], getattr(self, name)
            expected = (self.n_seeds, used, *current.shape[2:])
            if not isinstance(value, th.Tensor) or tuple(value.shape) != expected or value.dtype != current.dtype:
                got = tuple(value.shape) if isinstance(value, th.Tensor) else type(value).__name__
                raise ValueError(f"replay storage {name} has shape {got}, this model's seeds store {expected}")
        capacity = self.capacity
        while capacity < used:
            capacity = min(capacity * 2, self.buffer_size)
        if capacity != self.capacity:
            self._allocate(capacity)
        for name in self._STORED:
            getattr(self, name)[:, :used].copy_(state[name])  # type: ignore[arg-type]
        self.pos, self.full = pos, full

    def size(self) -> int:
        """Transitions stored per seed and sub-env."""
        return self.buffer_size if self.full else self.pos

    def sample(
        self,
        batch_size: int,
        generators: Sequence[th.Generator],
        normalize_rewards: Callable[[th.Tensor], th.Tensor] | None = None,
    ) -> ReplayBufferSamples:
        """``batch_size`` transitions per seed, seed i's uniform indices (slot, then sub-env) drawn from
        ``generators[i]`` in the order :class:`~lit_sb3.buffers.replay.ReplayBuffer` draws them from torch's global
        generator (so seed i samples what its separate run samples). The fields are seed-major: observations
        ``[K, B, ...]``, actions ``[K, B, A]``, rewards and dones ``[K, B, 1]`` (dones without timeouts).

        Args:
            batch_size: minibatch size per seed.
            generators: one generator per seed.
            normalize_rewards: n-step returns: maps the stored rewards of the windows ``[K, B, n_steps]`` to the
                normalised ones before they are summed (each seed's VecNormalize, as ``NStepReplayBuffer`` does for
                one seed); None: the stored rewards.
        """
        k, upper = self.n_seeds, self.size()
        if upper == 0:
            raise RuntimeError("the replay storage is empty: collect transitions before sampling.")
        device = next(g for g in generators if g is not None).device
        slots = seed_randint(upper, (batch_size,), generators, device).to(self.device)
        if self.n_envs > 1:
            envs = seed_randint(self.n_envs, (batch_size,), generators, device).to(self.device)
        else:
            envs = th.zeros_like(slots)
        flat = slots * self.n_envs + envs
        # one index into the flattened [K * capacity * n_envs] storage: index_select is cheaper than 2-d indexing
        offset = self._seed_index * (self.capacity * self.n_envs)
        index = (flat + offset).reshape(-1)

        def take(tensor: th.Tensor, at: th.Tensor = index) -> th.Tensor:
            return tensor.flatten(0, 2).index_select(0, at).view(k, -1, *tensor.shape[3:])

        if self.n_steps == 1:
            return ReplayBufferSamples(
                observations=take(self.observations),
                actions=take(self.actions),
                next_observations=take(self.next_observations),
                dones=take(self.dones).unsqueeze(-1),
                rewards=take(self.rewards).unsqueeze(-1),
            )
        # n-step returns (NStepReplayBuffer's rule): the window of k <= n_steps transitions stops at the first
        # termination or timeout and at the newest transition; reward sum_j gamma^j r_{i+j}, discount gamma^k
        steps = th.arange(self.n_steps, device=self.device)
        window = (slots.unsqueeze(-1) + steps) % self.buffer_size  # [K, B, n]
        # (slots past the newest are never used; clamped so that a growing storage is not read past its capacity)
        seq = window.clamp(max=self.capacity - 1) * self.n_envs + envs.unsqueeze(-1)
        seq_index = (seq + offset.unsqueeze(-1)).reshape(-1)
        rewards_seq = take(self.rewards, seq_index).view(k, batch_size, self.n_steps)
        if normalize_rewards is not None:
            rewards_seq = normalize_rewards(rewards_seq)
        ends = (take(self.dones, seq_index) > 0) | (take(self.timeouts, seq_index) > 0)
        stop = ends.view(k, batch_size, self.n_steps) | (window == (self.pos - 1) % self.buffer_size)
        first_stop = stop.to(th.uint8).argmax(dim=-1)
        last_step = th.where(stop.any(dim=-1), first_stop, th.full_like(first_stop, self.n_steps - 1))  # [K, B]
        mask = steps <= last_step.unsqueeze(-1)
        step_discounts = th.pow(self.gamma, steps.to(th.float64)).to(th.float32)
        returns = (rewards_seq * step_discounts * mask).sum(dim=-1, keepdim=True)
        discounts = th.pow(self.gamma, (last_step + 1).to(th.float64)).to(th.float32).unsqueeze(-1)
        last = (((slots + last_step) % self.buffer_size) * self.n_envs + envs + offset).reshape(-1)
        return ReplayBufferSamples(
            observations=take(self.observations),
            actions=take(self.actions),
            next_observations=take(self.next_observations, last),
            dones=take(self.dones, last).unsqueeze(-1),
            rewards=returns,
            discounts=discounts,
        )
