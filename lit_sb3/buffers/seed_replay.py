"""Replay storage of K >= 1 seeds: :class:`SeedReplayBuffer`, ``[K, buffer_size, n_envs, ...]`` tensors.

The one implementation of the replay rules: the storage layout (float64 observations as float32, Dict observations
one tensor per key), ``optimize_memory_usage`` (the next observation read from the following slot), time-outs (a
truncation ends an episode but is no terminal state), n-step returns and Hindsight Experience Replay (one
:class:`~lit_sb3.buffers.her_episodes.HerEpisodes` per seed). The single-seed, SB3-compatible buffers
(:class:`~lit_sb3.buffers.replay.ReplayBuffer` and its subclasses) hold one with K = 1 and draw their indices from
torch's global stream (HER: numpy's), as SB3's buffers draw from numpy's; the off-policy algorithms training K > 1
seeds hold one on the model's device, seed i drawing from its own ``torch.Generator``
(:func:`~lit_sb3.policies.seed_stack.seed_randint`) and HER's numpy ``RandomState``. The K transitions of one env step
are written with one write per field (one packed host->device copy off the CPU).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import DTypeLike

from lit_sb3.buffers.base import check_declared_buffer, numpy_to_torch_dtype, storage_action_dtype, storage_obs_dtype
from lit_sb3.buffers.her_episodes import STRATEGIES, HerEpisodes, her_rewards, infos_json_default
from lit_sb3.core.preprocessing import get_action_dim, get_obs_shape
from lit_sb3.core.types import DictReplayBufferSamples, ReplayBufferSamples
from lit_sb3.policies.seed_stack import seed_randint

__all__ = ["SeedReplayBuffer"]

_OBS = ("observations", "next_observations")


def _nested_shape(value: list, depth: int) -> tuple[int, ...]:
    """The shape of ``depth`` levels of nested lists (``()`` when they are ragged or not lists of dicts)."""
    shape, level = [], [value]
    for _ in range(depth):
        if not all(isinstance(item, list) for item in level) or len({len(item) for item in level}) != 1:
            return ()
        shape.append(len(level[0]))
        level = [child for item in level for child in item]
    return tuple(shape) if all(isinstance(item, dict) for item in level) else ()


class SeedReplayBuffer:
    """K replay buffers as one stacked storage ``[K, buffer_size, n_envs, ...]`` on one device; all seeds write
    the same slot (they move in lockstep), each samples its own indices from its own random stream.

    Stored as SB3 stores them: ``dones`` are the episode ends, ``timeouts`` the truncations among them (zeros
    without ``handle_timeout_termination``); a sample's ``dones`` are the terminations only.

    Args:
        n_seeds: K.
        buffer_size: capacity per seed (divided by ``n_envs`` as in ``ReplayBuffer``).
        observation_space: the observation space (a Dict space: one storage per key).
        action_space: the action space.
        n_envs: sub-envs per seed.
        device: where the storage lives.
        handle_timeout_termination: a timeout is not a terminal state.
        n_steps: n-step returns (> 1: each sample's reward sums up to ``n_steps`` discounted rewards).
        gamma: discount factor of the n-step returns.
        optimize_memory_usage: no next-observation storage: the next observation of slot t is the observation
            written at slot t + 1.
        goal_selection_strategy: HER (``"future"``, ``"final"`` or ``"episode"``; None: no relabelling).
        n_sampled_goal: HER: virtual transitions per real one.
        copy_info_dict: HER: keep the info dicts for ``compute_reward``.
        obs_dtype: storage dtype of the observations (a ``{key: dtype}`` dict for Dict spaces; None: the space's,
            float64 as float32).
        grow: allocate as it fills (doubling up to ``buffer_size``) rather than at once.
    """

    INITIAL_CAPACITY = 4096

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
        optimize_memory_usage: bool = False,
        goal_selection_strategy: str | None = None,
        n_sampled_goal: int = 4,
        copy_info_dict: bool = False,
        obs_dtype: DTypeLike | dict[str, DTypeLike] | None = None,
        grow: bool = True,
    ) -> None:
        check_declared_buffer(buffer_size * n_seeds, observation_space, action_space)
        dict_obs = isinstance(observation_space, spaces.Dict)
        if optimize_memory_usage and (n_steps > 1 or dict_obs or goal_selection_strategy is not None):
            raise ValueError("optimize_memory_usage=True is for 1-step returns of non-Dict observations only.")
        if goal_selection_strategy is not None and goal_selection_strategy not in STRATEGIES:
            raise ValueError(
                f"Invalid goal selection strategy {goal_selection_strategy!r}; allowed: {list(STRATEGIES)}"
            )
        self.n_steps, self.gamma = int(n_steps), float(gamma)
        self.n_seeds, self.n_envs = n_seeds, n_envs
        self.buffer_size = max(buffer_size // n_envs, 1)
        self.handle_timeout_termination = handle_timeout_termination
        self.optimize_memory_usage = optimize_memory_usage
        self.device = device
        self.pos, self.full = 0, False
        # field name -> (shape of one transition of one env, dtype); Dict observations: "observations/<key>"
        obs_spaces = observation_space.spaces if dict_obs else {"": observation_space}
        obs_dtypes = obs_dtype if isinstance(obs_dtype, dict) else dict.fromkeys(obs_spaces, obs_dtype)
        self._obs_keys = list(observation_space.spaces) if dict_obs else None
        self._layout: dict[str, tuple[tuple[int, ...], th.dtype]] = {}
        for prefix in _OBS[: 1 if optimize_memory_usage else 2]:
            for key, space in obs_spaces.items():
                dtype = numpy_to_torch_dtype(storage_obs_dtype(space, obs_dtypes.get(key)))
                self._layout[f"{prefix}/{key}" if dict_obs else prefix] = (tuple(get_obs_shape(space)), dtype)  # type: ignore[arg-type]
        action_dtype = numpy_to_torch_dtype(storage_action_dtype(action_space.dtype))
        self._layout["actions"] = ((get_action_dim(action_space),), action_dtype)
        for name in ("rewards", "dones", "timeouts"):
            self._layout[name] = ((), th.float32)
        self._fields: dict[str, th.Tensor] = {}
        # HER: each seed's episode bookkeeping over its slice (and its info dicts), its own goal relabelling
        self.goal_selection_strategy = goal_selection_strategy
        self.n_sampled_goal = int(n_sampled_goal)
        self.her_ratio = 1 - (1.0 / (self.n_sampled_goal + 1))
        self.her = (
            [HerEpisodes(self.buffer_size, n_envs) for _ in range(n_seeds)]
            if goal_selection_strategy is not None
            else None
        )
        self.infos: np.ndarray | None = None
        if self.her is not None and copy_info_dict:
            self.infos = np.empty((n_seeds, self.buffer_size, n_envs), dtype=object)
            for index in np.ndindex(self.infos.shape):
                self.infos[index] = {}
        # growing: a 1M-transition buffer of a 20k-step run holds 20k
        self.capacity = 0
        self._allocate(min(self.buffer_size, self.INITIAL_CAPACITY) if grow else self.buffer_size)
        # off the CPU, each step's transitions go to the device as one packed copy (when float32 holds them exactly)
        self.pack_transfers = self._can_pack(device)
        self._seed_index = th.arange(n_seeds, device=device).unsqueeze(1)

    def _can_pack(self, device: th.device) -> bool:
        obs_dtypes = [dtype for name, (_, dtype) in self._layout.items() if name.startswith(_OBS)]
        return device.type != "cpu" and all(dtype == th.float32 for dtype in obs_dtypes)

    def _group(self, prefix: str) -> Any:
        """A stored observation field: a tensor, or a ``{key: tensor}`` dict for Dict observations."""
        if self._obs_keys is None:
            return self._fields.get(prefix)
        if f"{prefix}/{self._obs_keys[0]}" not in self._fields:
            return None
        return {key: self._fields[f"{prefix}/{key}"] for key in self._obs_keys}

    @property
    def observations(self) -> Any:
        """``[K, capacity, n_envs, ...]`` observations (a dict of them per key for Dict observations)."""
        return self._group("observations")

    @property
    def next_observations(self) -> Any:
        """Next observations as :attr:`observations` (None with ``optimize_memory_usage``)."""
        return self._group("next_observations")

    @property
    def actions(self) -> th.Tensor:
        return self._fields["actions"]

    @property
    def rewards(self) -> th.Tensor:
        return self._fields["rewards"]

    @property
    def dones(self) -> th.Tensor:
        return self._fields["dones"]

    @property
    def timeouts(self) -> th.Tensor:
        return self._fields["timeouts"]

    def nbytes_per_transition(self) -> int:
        """Bytes of storage per transition of one seed and env."""
        return sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in self._layout.values())

    def _allocate(self, capacity: int) -> None:
        """(Re)allocate the storage for ``capacity`` slots, keeping what is stored."""
        lead = (self.n_seeds, capacity, self.n_envs)
        for name, (shape, dtype) in self._layout.items():
            new = th.zeros((*lead, *shape), dtype=dtype, device=self.device)
            if self.capacity:
                new[:, : self.capacity].copy_(self._fields[name])
            self._fields[name] = new
        self.capacity = capacity
        self._refresh_views()

    def _reserve(self, slots: int) -> None:
        """Grow (doubling) until ``slots`` slots exist."""
        capacity = self.capacity
        while capacity < slots:
            capacity = min(capacity * 2, self.buffer_size)
        if capacity != self.capacity:
            self._allocate(capacity)

    def _refresh_views(self) -> None:
        """The numpy views of a CPU storage (the cheapest writes) and each field's ``[K * capacity * n_envs, ...]``
        view (gathers)."""
        self._np_views: list[tuple[np.ndarray, tuple[int, ...]]] | None = None
        if self.device.type == "cpu":  # slot-major views and the shape of one slot, in the order add writes them
            self._np_views = [(t.numpy().swapaxes(0, 1), (t.shape[0], *t.shape[2:])) for t in self._fields.values()]
        self._flat = {name: tensor.flatten(0, 2) for name, tensor in self._fields.items()}

    def _values(self, obs: Any, next_obs: Any, others: list[Any]) -> list[Any]:
        """The values to write, in the order of the stored fields."""
        values = []
        for prefix, value in zip(_OBS, (obs, next_obs)):
            if prefix == "next_observations" and self.optimize_memory_usage:
                continue
            values += [value[key] for key in self._obs_keys] if self._obs_keys is not None else [value]
        return values + others

    def add(
        self,
        obs: Any,
        next_obs: Any,
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        timeouts: np.ndarray | None = None,
        infos: Sequence[Sequence[dict[str, Any]]] | None = None,
    ) -> None:
        """Write one step of every seed (``[K, n_envs, ...]`` arrays, dicts of them for Dict observations) at the
        current slot.

        Args:
            obs: observations.
            next_obs: next observations (terminal observations where an episode ended).
            actions: actions (scaled to [-1, 1] for Box spaces).
            rewards: rewards.
            dones: episode ends (terminations and truncations).
            timeouts: the truncations (None: none; ignored without ``handle_timeout_termination``).
            infos: each seed's step infos ``[K][n_envs]`` (HER with ``copy_info_dict``: kept for ``compute_reward``).
        """
        pos = self.pos
        # optimize_memory_usage writes the next observation into the following slot: it must exist
        self._reserve(pos + 2 if self.optimize_memory_usage and pos + 1 < self.buffer_size else pos + 1)
        if timeouts is None or not self.handle_timeout_termination:
            timeouts = np.zeros(np.shape(dones), dtype=np.float32)
        if self.her is not None:
            for episodes in self.her:
                episodes.start_slot(pos)
            if self.infos is not None and infos is not None:
                for i, seed_infos in enumerate(infos):
                    for j, info in enumerate(seed_infos):
                        self.infos[i, pos, j] = info
        values = self._values(obs, next_obs, [actions, rewards, dones, timeouts])
        if self._np_views is not None:  # numpy views of the CPU storage: the cheapest writes
            for (array, shape), value in zip(self._np_views, values):
                array[pos] = np.asarray(value).reshape(shape)
        elif self.pack_transfers:
            # one host->device copy for the K transitions (float32 is exact for the stored actions and flags)
            self._write_device(values, pos)
        else:
            for tensor, value in zip(self._fields.values(), values):
                tensor[:, pos].copy_(th.as_tensor(np.asarray(value)).reshape(tensor[:, pos].shape), non_blocking=True)
        if self.optimize_memory_usage:  # the next observations go into the following slot's observations
            row, observations = (pos + 1) % self.buffer_size, self._fields["observations"]
            if self._np_views is not None:
                array, shape = self._np_views[0]
                array[row] = np.asarray(next_obs).reshape(shape)
            else:
                observations[:, row].copy_(th.as_tensor(np.asarray(next_obs)).reshape(observations[:, row].shape))
        self.pos = (pos + 1) % self.buffer_size
        self.full = self.full or self.pos == 0
        if self.her is not None:  # an episode ends with a termination or a timeout
            ended = (np.asarray(dones) > 0) | (np.asarray(timeouts) > 0)
            for i, j in zip(*np.nonzero(ended.reshape(self.n_seeds, self.n_envs))):
                self.her[i].end_episode(int(j), self.pos)

    def _write_device(self, values: list[Any], row: int) -> None:
        """Write ``values`` (in the order of the stored fields) at slot ``row`` of a device storage with one packed
        host->device copy."""
        k, n, fields = self.n_seeds, self.n_envs, list(self._fields.values())
        packed = np.concatenate([np.asarray(v, dtype=np.float32).reshape(k, n, -1) for v in values], axis=-1)
        device_values = th.from_numpy(packed).to(self.device).split([f[0, 0, 0].numel() for f in fields], -1)
        for tensor, value in zip(fields, device_values):
            tensor[:, row].copy_(value.reshape(tensor[:, row].shape))

    def truncate_last_trajectory(self) -> None:
        """Mark the newest transition of every seed and sub-env as an episode end (``optimize_memory_usage``: its
        next observation is overwritten by the next write), as ``OffPolicyAlgorithm._setup_learn`` does."""
        self.dones[:, (self.pos - 1) % self.buffer_size] = 1.0

    def to(self, device: th.device) -> None:
        """Move the storage to ``device``."""
        self._fields = {name: tensor.to(device) for name, tensor in self._fields.items()}
        self._seed_index = self._seed_index.to(device)
        self.device = device
        self.pack_transfers = self._can_pack(device)
        self._refresh_views()

    def _rows(self, pos: int, full: bool) -> int:
        """Slots holding data at write position ``pos``: ``optimize_memory_usage`` also keeps the newest next
        observation at ``pos``."""
        if full:
            return self.buffer_size
        return min(pos + 1, self.buffer_size) if self.optimize_memory_usage and pos else pos

    def state_dict(self) -> dict[str, Any]:
        """What is stored (the filled slots of every field, on the CPU), the write position and HER's episode
        bookkeeping: a Lightning checkpoint's copy of the storage (tensors and plain values only, so it loads with
        ``torch.load(weights_only=True)``; HER's info dicts as JSON text, as ``HerReplayBuffer`` saves them)."""
        used = self._rows(self.pos, self.full)
        state: dict[str, Any] = {"pos": self.pos, "full": self.full}
        for name, tensor in self._fields.items():
            state[name] = tensor[:, :used].cpu()
        if self.her is not None:  # (slots past the written ones hold no episode)
            for name in ("ep_start", "ep_length", "current_ep_start"):
                arrays = [episodes.state()[name] for episodes in self.her]
                state[f"her/{name}"] = th.from_numpy(np.stack([a if a.ndim == 1 else a[:used] for a in arrays]))
        if self.infos is not None:  # as HerReplayBuffer saves them: JSON text (numpy values as lists)
            try:
                state["her/infos"] = json.dumps(self.infos[:, :used].tolist(), default=infos_json_default)
            except (TypeError, ValueError) as exc:
                warnings.warn(
                    f"the HER info dicts are not JSON-serialisable ({exc}); they are not saved.", stacklevel=2
                )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into this (same K, sizes and spaces) storage; a mismatch is a one-line
        ``ValueError`` raised before anything is allocated.

        Args:
            state: what :meth:`state_dict` returned.
        """
        pos, full = int(state["pos"]), bool(state["full"])
        if not 0 <= pos < self.buffer_size:
            raise ValueError(f"replay storage position {pos} (full={full}) does not fit a buffer of {self.buffer_size}")
        used = self._rows(pos, full)
        expected_shapes = {name: (self.n_seeds, used, *t.shape[2:]) for name, t in self._fields.items()}
        dtypes = {name: t.dtype for name, t in self._fields.items()}
        if self.her is not None:
            grid = (self.n_seeds, used, self.n_envs)
            for name, shape in (("ep_start", grid), ("ep_length", grid), ("current_ep_start", grid[::2])):
                expected_shapes[f"her/{name}"], dtypes[f"her/{name}"] = shape, th.int64
        for name, expected in expected_shapes.items():
            value = state.get(name)
            if not isinstance(value, th.Tensor) or tuple(value.shape) != expected or value.dtype != dtypes[name]:
                got = tuple(value.shape) if isinstance(value, th.Tensor) else type(value).__name__
                raise ValueError(f"replay storage {name} has shape {got}, this model's seeds store {expected}")
        infos = None
        if self.infos is not None and used > 0 and state.get("her/infos") is not None:
            from lit_sb3.utils.files import load_json

            infos = load_json(str(state["her/infos"]), "", "replay storage her/infos")
            shape = (self.n_seeds, used, self.n_envs)
            if (_nested_shape(infos, 3) if isinstance(infos, list) else ()) != shape:
                raise ValueError(f"replay storage her/infos does not hold {shape} info dicts")
        self._reserve(used)
        for name, tensor in self._fields.items():
            tensor[:, :used].copy_(state[name])
        if self.her is not None:
            for i, episodes in enumerate(self.her):
                for name, array in episodes.state().items():
                    saved = state[f"her/{name}"][i].numpy()
                    array[: len(saved)] = saved
        if infos is not None and self.infos is not None:
            for index in np.ndindex(len(infos), used, self.n_envs):
                self.infos[index] = infos[index[0]][index[1]][index[2]]
        self.pos, self.full = pos, full

    def take_seed(self, source: SeedReplayBuffer, i: int) -> None:
        """Hold seed ``i`` of ``source`` (a storage of the same sizes and spaces; this one holds one seed).

        Args:
            source: the K-seed storage.
            i: the seed index.
        """
        used = source._rows(source.pos, source.full)
        self._reserve(used)
        for name, tensor in self._fields.items():
            tensor[0, :used].copy_(source._fields[name][i, :used])
        if self.her is not None and source.her is not None:
            for name, array in self.her[0].state().items():
                array[...] = source.her[i].state()[name]
        if self.infos is not None and source.infos is not None:
            self.infos[0] = source.infos[i]
        self.pos, self.full = source.pos, source.full

    def size(self) -> int:
        """Transitions stored per seed and sub-env."""
        return self.buffer_size if self.full else self.pos

    def _flat_index(self, slots: th.Tensor, envs: th.Tensor) -> th.Tensor:
        """``[K, B]`` slots and sub-envs -> indices into the flattened ``[K * capacity * n_envs]`` storage."""
        index = slots * self.n_envs + envs
        if self.n_seeds > 1:
            index = index + self._seed_index * (self.capacity * self.n_envs)
        return index.reshape(-1)

    def _take(self, name: str, index: th.Tensor, seed_major: bool = True) -> th.Tensor:
        """Rows ``index`` of field ``name``: ``[K, B, ...]`` (``seed_major``), else ``[K * B, ...]``."""
        flat = self._flat[name]
        rows = flat.index_select(0, index)
        return rows.view(self.n_seeds, -1, *flat.shape[1:]) if seed_major else rows

    def _take_obs(self, prefix: str, index: th.Tensor, seed_major: bool = True) -> Any:
        if self.optimize_memory_usage and prefix == "next_observations":
            prefix = "observations"  # index points at the following slot
        if self._obs_keys is None:
            return self._take(prefix, index, seed_major)
        return {key: self._take(f"{prefix}/{key}", index, seed_major) for key in self._obs_keys}

    def _terminal(self, index: th.Tensor, seed_major: bool = True) -> th.Tensor:
        """The dones at ``index`` without the timeouts, ``[K, B, 1]`` (``seed_major``) or ``[K * B, 1]``."""
        dones = self._take("dones", index, seed_major)
        if self.handle_timeout_termination:
            dones = dones * (1.0 - self._take("timeouts", index, seed_major))
        return dones.unsqueeze(-1)

    def draw_slots(
        self, batch_size: int, generators: Sequence[th.Generator | None] | None, device: th.device
    ) -> th.Tensor:
        """Each seed's ``batch_size`` uniform transition slots ``[K, B]`` (not the slot ``pos`` of a full
        ``optimize_memory_usage`` storage: it holds the newest next observation).

        Args:
            batch_size: slots per seed.
            generators: one torch generator per seed (None: torch's global one, K = 1).
            device: where the draw is made.
        """
        if self.optimize_memory_usage and self.full:
            slots = seed_randint(self.buffer_size, (batch_size,), generators, device, low=1).to(self.device) + self.pos
            slots = slots % self.buffer_size
        else:
            slots = seed_randint(self.size(), (batch_size,), generators, device).to(self.device)
        return slots.view(self.n_seeds, batch_size)

    def sample(
        self,
        batch_size: int,
        generators: Sequence[th.Generator | None],
        rngs: Sequence[Any] | None = None,
        envs: Sequence[Any] | None = None,
        normalize_rewards: Callable[[th.Tensor], th.Tensor] | None = None,
    ) -> ReplayBufferSamples | DictReplayBufferSamples:
        """``batch_size`` transitions per seed, seed i's uniform indices (slot, then sub-env) drawn from
        ``generators[i]`` in the order :class:`~lit_sb3.buffers.replay.ReplayBuffer` draws them from torch's global
        generator (so seed i samples what its separate run samples); see :meth:`gather`.

        Args:
            batch_size: minibatch size per seed.
            generators: one torch generator per seed (None: the seed sits this update out).
            rngs: HER: one numpy ``RandomState`` per seed (see :meth:`sample_her`).
            envs: HER: one VecEnv per seed (its ``compute_reward``).
            normalize_rewards: see :meth:`gather`.
        """
        if self.size() == 0:
            raise RuntimeError("the replay storage is empty: collect transitions before sampling.")
        if self.her is not None:
            assert rngs is not None and envs is not None
            return self.sample_her(batch_size, rngs, envs, normalize_rewards)
        device = next(g for g in generators if g is not None).device
        slots = self.draw_slots(batch_size, generators, device)
        if self.n_envs > 1:
            envs_t = seed_randint(self.n_envs, (batch_size,), generators, device).to(self.device)
        else:
            envs_t = th.zeros_like(slots)
        return self.gather(slots, envs_t, normalize_rewards)

    def gather(
        self,
        slots: th.Tensor,
        envs: th.Tensor,
        normalize_rewards: Callable[[th.Tensor], th.Tensor] | None = None,
        seed_major: bool = True,
    ) -> ReplayBufferSamples | DictReplayBufferSamples:
        """The transitions starting at ``[K, B]`` slots and sub-envs, seed-major: observations ``[K, B, ...]``
        (per key for Dict observations), actions ``[K, B, A]``, rewards, dones (without timeouts) and n-step
        discounts ``[K, B, 1]``.

        With ``n_steps > 1`` the window of ``k <= n_steps`` transitions stops at the first termination or timeout
        and at the newest transition (the write head); the reward is ``sum_j gamma^j r_{i+j}``, the next
        observation and done those of the window's last transition, the discount ``gamma^k``.

        Args:
            slots: the transitions' slots.
            envs: their sub-envs.
            normalize_rewards: maps stored rewards (``[K, B]``, the windows ``[K, B, n_steps]``) to the normalised
                ones, before a window is summed (None: the stored rewards).
            seed_major: False (one seed): every field without the seed dimension, ``[B, ...]`` (the single-seed
                buffers' samples, with no view per field to drop it).
        """
        assert seed_major or self.n_seeds == 1
        k, batch_size = slots.shape
        index = self._flat_index(slots, envs)
        samples = DictReplayBufferSamples if self._obs_keys is not None else ReplayBufferSamples
        if self.n_steps == 1:
            next_index = self._flat_index((slots + 1) % self.buffer_size, envs) if self.optimize_memory_usage else index
            rewards = self._take("rewards", index, seed_major)
            return samples(
                observations=self._take_obs("observations", index, seed_major),
                actions=self._take("actions", index, seed_major),
                next_observations=self._take_obs("next_observations", next_index, seed_major),
                dones=self._terminal(index, seed_major),
                rewards=(rewards if normalize_rewards is None else normalize_rewards(rewards)).unsqueeze(-1),
            )
        steps = th.arange(self.n_steps, device=self.device)
        window = (slots.unsqueeze(-1) + steps) % self.buffer_size  # [K, B, n]
        # (slots past the newest are never used; clamped so that a growing storage is not read past its capacity)
        offset = self._seed_index * (self.capacity * self.n_envs)
        seq = window.clamp(max=self.capacity - 1) * self.n_envs + envs.unsqueeze(-1)
        seq_index = (seq + offset.unsqueeze(-1)).reshape(-1)
        rewards_seq = self._take("rewards", seq_index).view(k, batch_size, self.n_steps)
        if normalize_rewards is not None:
            rewards_seq = normalize_rewards(rewards_seq).to(self.device)
        ends = (self._take("dones", seq_index) > 0) | (self._take("timeouts", seq_index) > 0)
        stop = ends.view(k, batch_size, self.n_steps) | (window == (self.pos - 1) % self.buffer_size)
        first_stop = stop.to(th.uint8).argmax(dim=-1)
        last_step = th.where(stop.any(dim=-1), first_stop, th.full_like(first_stop, self.n_steps - 1))  # [K, B]
        mask = steps <= last_step.unsqueeze(-1)
        step_discounts = th.pow(self.gamma, steps.to(th.float64)).to(th.float32)
        returns = (rewards_seq * step_discounts * mask).sum(dim=-1, keepdim=True)
        discounts = th.pow(self.gamma, (last_step + 1).to(th.float64)).to(th.float32).unsqueeze(-1)
        last = self._flat_index((slots + last_step) % self.buffer_size, envs)
        return samples(
            observations=self._take_obs("observations", index, seed_major),
            actions=self._take("actions", index, seed_major),
            next_observations=self._take_obs("next_observations", last, seed_major),
            dones=self._terminal(last, seed_major),
            rewards=returns if seed_major else returns[0],
            discounts=discounts if seed_major else discounts[0],
        )

    def sample_her(
        self,
        batch_size: int,
        rngs: Sequence[Any],
        envs: Sequence[Any],
        normalize_rewards: Callable[[th.Tensor], th.Tensor] | None = None,
    ) -> DictReplayBufferSamples:
        """HER minibatches: seed i's transitions and new goals drawn by its :class:`HerEpisodes` from ``rngs[i]``
        (real transitions first, then virtual ones whose desired goal is an achieved goal of the same episode and
        whose reward is recomputed by ``envs[i]``'s ``compute_reward``).

        Args:
            batch_size: minibatch size per seed.
            rngs: one random stream per seed (``np.random`` or a ``RandomState``; None: the seed sits out or has
                failed, it draws nothing).
            envs: one VecEnv per seed.
            normalize_rewards: maps the rewards ``[K, B]`` to the normalised ones (None: as stored or recomputed).
        """
        assert self.her is not None and self.goal_selection_strategy is not None and self._obs_keys is not None
        k, upper = self.n_seeds, self.size()
        slots = np.zeros((k, batch_size), dtype=np.int64)
        env_idx = np.zeros((k, batch_size), dtype=np.int64)
        draws = []
        for i, rng in enumerate(rngs):
            if rng is None:  # a seed sitting out or failed: draws nothing, its minibatch is unused
                draws.append(None)
                continue
            draw = self.her[i].draw(batch_size, upper, self.her_ratio, self.goal_selection_strategy, rng)
            slots[i], env_idx[i] = draw.slots, draw.envs
            draws.append(draw)
        to = self.device
        index = self._flat_index(th.as_tensor(slots, device=to), th.as_tensor(env_idx, device=to))
        obs = self._take_obs("observations", index)
        next_obs = self._take_obs("next_observations", index)
        rewards = self._take("rewards", index)
        for i, draw in enumerate(draws):
            if draw is None or draw.n_real == batch_size:
                continue
            n_real, virtual_e = draw.n_real, draw.envs[draw.n_real :]
            goal_index = th.as_tensor(draw.goal_slots * self.n_envs + virtual_e, device=to)
            field = self._fields["next_observations/achieved_goal"][i].flatten(0, 1)
            new_goals = field.index_select(0, goal_index)
            # the desired goal of the next observation must be the same new goal
            obs["desired_goal"][i, n_real:] = new_goals
            next_obs["desired_goal"][i, n_real:] = new_goals
            infos = self.infos[i, draw.slots[n_real:], virtual_e] if self.infos is not None else None
            achieved = next_obs["achieved_goal"][i, n_real:].cpu().numpy()
            values = her_rewards(envs[i], achieved, new_goals.cpu().numpy(), infos)
            rewards[i, n_real:] = th.from_numpy(values).to(to)
        return DictReplayBufferSamples(
            observations=obs,
            actions=self._take("actions", index),
            next_observations=next_obs,
            dones=self._terminal(index),
            rewards=(rewards if normalize_rewards is None else normalize_rewards(rewards)).unsqueeze(-1),
        )
