"""Seed-batched off-policy training (collection, per-seed replay storage, per-seed logging): the part shared by
the batched SAC, TD3/DDPG and DQN.

One collect/update cycle steps every active seed's VecEnv once (the batch acts for all seeds with one forward
pass), stores the K transitions with one write per field into a stacked ``[K, buffer_size, n_envs, ...]``
storage on the model's device, and after ``train_freq`` steps runs ``gradient_steps`` batched updates, each seed
sampling its own minibatch from its own slice. ``num_timesteps`` counts env steps per seed; the budget is exact.
"""

from __future__ import annotations

import copy
import sys
import time
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.off_policy import OffPolicyAlgorithm
from lit_sb3.algorithms.seed_batch.base import SeedBatchModule
from lit_sb3.buffers.base import check_declared_buffer, numpy_to_torch_dtype, storage_obs_dtype
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.noise import ActionNoise, VectorizedActionNoise
from lit_sb3.core.preprocessing import get_action_dim, get_obs_shape
from lit_sb3.core.types import TrainFreq, TrainFrequencyUnit
from lit_sb3.utils.math import safe_mean

__all__ = ["OffPolicySeedBatch", "SeedBatchSamples", "SeedReplayStorage"]


class SeedBatchSamples(NamedTuple):
    """One minibatch per seed, seed-major: observations ``[K, B, ...]``, actions ``[K, B, A]``, rewards and
    dones ``[K, B, 1]`` (dones without timeouts)."""

    observations: th.Tensor
    actions: th.Tensor
    next_observations: th.Tensor
    dones: th.Tensor
    rewards: th.Tensor


class SeedReplayStorage:
    """K replay buffers as one stacked storage ``[K, buffer_size, n_envs, ...]`` on one device; all seeds write
    the same slot (they move in lockstep), each samples its own indices.

    Args:
        n_seeds: K.
        buffer_size: capacity per seed (divided by ``n_envs`` as in ``ReplayBuffer``).
        observation_space: the observation space.
        action_space: the action space.
        n_envs: sub-envs per seed.
        device: where the storage lives (the model's device: no host round trip when sampling).
        handle_timeout_termination: a timeout is not a terminal state.
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
    ) -> None:
        check_declared_buffer(buffer_size * n_seeds, observation_space, action_space)
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

    def _allocate(self, capacity: int) -> None:
        """(Re)allocate the storage for ``capacity`` slots, keeping what is stored."""
        lead = (self.n_seeds, capacity, self.n_envs)
        shapes = {
            "observations": ((*lead, *self._obs_shape), self._obs_dtype),
            "next_observations": ((*lead, *self._obs_shape), self._obs_dtype),
            "actions": ((*lead, self._action_dim), self._action_dtype),
            "rewards": (lead, th.float32),
            "dones": (lead, th.float32),  # terminal (timeouts removed)
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
        self._np_views = [getattr(self, name).numpy() for name in self.FIELDS] if cpu else None

    def add(
        self, obs: np.ndarray, next_obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, dones: np.ndarray
    ) -> None:
        """Write one step of every seed (``[K, n_envs, ...]`` arrays) at the current slot.

        Args:
            obs: observations.
            next_obs: next observations (terminal observations where an episode ended).
            actions: actions (scaled to [-1, 1] for Box spaces).
            rewards: rewards.
            dones: terminal flags, 1 only for true terminations (not timeouts).
        """
        pos = self.pos
        if pos == self.capacity:
            self._allocate(min(self.buffer_size, 2 * self.capacity))
        fields = [self.observations, self.next_observations, self.actions, self.rewards, self.dones]
        values = [obs, next_obs, actions, rewards, dones]
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
        for name in (*self.FIELDS, "_seed_index"):
            setattr(self, name, getattr(self, name).to(device))
        self.device = device
        self.pack_transfers = device.type != "cpu" and self._obs_dtype == th.float32
        self._refresh_views()

    def size(self) -> int:
        """Transitions stored per seed and sub-env."""
        return self.buffer_size if self.full else self.pos

    def sample(self, batch_size: int, generator: th.Generator | None = None) -> SeedBatchSamples:
        """``batch_size`` transitions per seed, each seed with its own uniform indices (slot and sub-env).

        Args:
            batch_size: minibatch size per seed.
            generator: the random generator (on the storage's device).
        """
        k, upper = self.n_seeds, self.size()
        if upper == 0:
            raise RuntimeError("the replay storage is empty: collect transitions before sampling.")
        slots = th.randint(0, upper, (k, batch_size), device=self.device, generator=generator)
        if self.n_envs > 1:
            envs = th.randint(0, self.n_envs, (k, batch_size), device=self.device, generator=generator)
            flat = slots * self.n_envs + envs
        else:
            flat = slots
        # one index into the flattened [K * capacity * n_envs] storage: index_select is cheaper than 2-d indexing
        index = (flat + self._seed_index * (self.capacity * self.n_envs)).reshape(-1)

        def take(tensor: th.Tensor) -> th.Tensor:
            return tensor.flatten(0, 2).index_select(0, index).view(k, batch_size, *tensor.shape[3:])

        return SeedBatchSamples(
            observations=take(self.observations),
            actions=take(self.actions),
            next_observations=take(self.next_observations),
            dones=take(self.dones).unsqueeze(-1),
            rewards=take(self.rewards).unsqueeze(-1),
        )


class OffPolicySeedBatch(SeedBatchModule):
    """The collection/update loop of the batched off-policy algorithms (see the module docstring).

    Subclasses implement ``_build_batch`` (stack the members' networks, make the optimisers),
    ``_policy_actions(obs)`` (``[K, n_envs, ...]`` observations -> actions to store) and ``train``.
    """

    min_env_steps_per_training_step: ClassVar[int] = 32
    _PLAIN_HOT_ATTRIBUTES: ClassVar[frozenset[str]] = SeedBatchModule._PLAIN_HOT_ATTRIBUTES | {
        "_cycle_open",
        "_cycle_steps",
    }
    members: list[OffPolicyAlgorithm]  # type: ignore[assignment]

    def __init__(
        self, algorithm: type[OffPolicyAlgorithm], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any
    ) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        first = self.members[0]
        unsupported = {
            "train_freq in episodes (seeds end episodes at different steps)": isinstance(first.train_freq, TrainFreq)
            and first.train_freq.unit == TrainFrequencyUnit.EPISODE,
            "replay_buffer_class": first.replay_buffer_class is not None,
            "optimize_memory_usage": first.optimize_memory_usage,
            "n_steps > 1": first.n_steps > 1,
            "use_sde": first.use_sde,
        }
        bad = [name for name, flag in unsupported.items() if flag]
        if bad:
            raise NotImplementedError(f"seed batching of {algorithm.__name__} does not support {', '.join(bad)} yet.")
        unknown = set(first.replay_buffer_kwargs) - {"handle_timeout_termination"}
        if unknown:
            raise NotImplementedError(f"seed batching does not support replay_buffer_kwargs {sorted(unknown)} yet.")
        for name in ("buffer_size", "batch_size", "learning_starts", "tau", "gamma", "train_freq", "gradient_steps"):
            setattr(self, name, getattr(first, name))
        self.replay_buffer = None
        self.storage: SeedReplayStorage | None = None
        self._cycle_open, self._cycle_steps = False, 0
        self._generator: th.Generator | None = None
        self._action_spaces: list[spaces.Space] = []
        self._noises: list[ActionNoise | None] = [m.action_noise for m in self.members]

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _setup_model(self) -> None:
        for member in self.members:
            if not member.policy_ready:
                # the batch stores the transitions (stacked storage): the member gets a 1-slot placeholder
                member.replay_buffer = ReplayBuffer(1, member.observation_space, member.action_space, device="cpu")
                member._setup_model()
                member.replay_buffer = None
        # each member's action space was seeded with its seed by its _setup_model (warm-up actions)
        self._action_spaces = [m.action_space for m in self.members]
        first = self.members[0]
        self.storage = SeedReplayStorage(
            self.n_seeds,
            first.buffer_size,
            first.observation_space,
            first.action_space,
            first.n_envs,
            self.device,
            handle_timeout_termination=first.replay_buffer_kwargs.get("handle_timeout_termination", True),
        )
        # one generator for the minibatch indices, seeded from the seeds (the single runs draw from torch's
        # global generator; batched and separate runs agree in distribution, not draw by draw)
        self._generator = th.Generator(device=self.device)
        self._generator.manual_seed(int(np.random.SeedSequence(self.seeds).generate_state(1)[0]))
        self._setup_lr_schedule()
        self._build_batch()
        self._finish_build()

    def _on_device_ready(self) -> None:
        storage = self.storage
        if storage is not None and storage.device != self.device:
            storage.to(self.device)
            self._generator = th.Generator(device=self.device)
            self._generator.manual_seed(int(np.random.SeedSequence(self.seeds).generate_state(1)[0]))
        self._active_mask = self._make_active_mask()

    def _setup_learn(self, total_timesteps: int, *args: Any, **kwargs: Any) -> Any:
        reset = kwargs.get("reset_num_timesteps", args[2] if len(args) > 2 else True)
        if reset:
            self._cycle_open, self._cycle_steps = False, 0
        if self.n_envs > 1:
            self._noises = [
                VectorizedActionNoise(n, self.n_envs)
                if n is not None and not isinstance(n, VectorizedActionNoise)
                else n
                for n in self._noises
            ]
        return super()._setup_learn(total_timesteps, *args, **kwargs)

    @property
    def _default_log_every_n_steps(self) -> int:
        return 4

    def configure_optimizers(self) -> list[th.optim.Optimizer]:
        return list(self._optimizers().values())

    def _optimizers(self) -> dict[str, th.optim.Optimizer]:
        raise NotImplementedError

    def on_train_start(self) -> None:
        super().on_train_start()
        plugin = getattr(self.trainer, "precision_plugin", None)
        if getattr(plugin, "scaler", None) is not None:
            raise ValueError(f"{type(self).__name__} does not support precision {self.trainer.precision!r}.")

    # ------------------------------------------------------------------
    # The loop
    # ------------------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """Collect/update cycles (``train_freq`` lockstep env steps, then ``gradient_steps`` batched updates) until
        ``min_env_steps_per_training_step`` env steps, the budget, a stop or a step boundary."""
        del batch, batch_idx
        self._run_cycles()
        self._apply_finite_checks()
        self._restore_failed()

    def _run_cycles(self) -> None:
        assert isinstance(self.train_freq, TrainFreq)
        single_cycle = self.fit_context is not None and self.fit_context.single_cycle
        collected = 0
        while True:
            steps, stop = self._collect(self.train_freq.frequency)
            if stop:
                self._stop_requested = True
                return None
            if self._cycle_open:
                return None
            collected += steps * self.n_envs
            if self.num_timesteps > 0 and (self.num_timesteps > self.learning_starts or single_cycle):
                gradient_steps = self.gradient_steps if self.gradient_steps >= 0 else steps * self.n_envs
                if gradient_steps > 0:
                    self.train(gradient_steps=gradient_steps, batch_size=self.batch_size)
                    self._restore_failed()
            self._end_cycle()
            if self._stop_requested or self._should_end_training_step(collected):
                return None

    def _collect(self, n_steps: int) -> tuple[int, bool]:
        """Step every active seed's env up to ``n_steps`` times; returns (steps of this cycle, stop requested)."""
        callback = self._rl_callback
        assert callback is not None and self.storage is not None
        context = self.fit_context
        cadences = () if context is None else context.env_step_cadences
        if self._cycle_open:
            steps = self._cycle_steps
            self._cycle_open = False
        else:
            steps = 0
            callback.on_rollout_start()
        n_envs = self.n_envs
        while steps < n_steps:
            actions, buffer_actions = self._sample_actions()
            self.num_timesteps += n_envs
            self._step_envs(actions, buffer_actions)
            steps += 1
            budget_reached = self._has_reached_rl_budget()
            callback.update_locals(locals())
            if not callback.on_step() and not budget_reached:
                return steps, True
            self._update_current_progress_remaining(self.num_timesteps, self._total_timesteps)
            self._on_step()
            if self._stop_requested:
                return steps, True
            if cadences and context.crossed_env_step_boundary(self.num_timesteps - n_envs, self.num_timesteps):
                context.request_boundary()
            if budget_reached or (context is not None and context.boundary_requested):
                if steps < n_steps:
                    self._cycle_open, self._cycle_steps = True, steps
                    return steps, False
                break
        callback.on_rollout_end()
        return steps, False

    def _sample_actions(self) -> tuple[np.ndarray, np.ndarray]:
        """Actions to take and to store for every seed ``[K, n_envs, ...]``: uniform random (each seed's own
        seeded action space) during the warm-up, else the batched policy's, plus each seed's action noise."""
        box = isinstance(self.action_space, spaces.Box)
        if self.num_timesteps < self.learning_starts:
            unscaled = np.stack(
                [np.array([space.sample() for _ in range(self.n_envs)]) for space in self._action_spaces]
            )
            if not box:
                return unscaled, unscaled
            scaled = self.members[0].policy.scale_action(unscaled)
        else:
            scaled = self._policy_actions(self._last_obs)  # type: ignore[arg-type]
            if not box:
                return scaled, scaled
        noises = self._noises
        if any(n is not None for n in noises):
            scaled = np.stack([np.clip(a + n(), -1, 1) if n is not None else a for a, n in zip(scaled, noises)]).astype(
                scaled.dtype, copy=False
            )
        return self.members[0].policy.unscale_action(scaled), scaled

    def _step_envs(self, actions: np.ndarray, buffer_actions: np.ndarray) -> None:
        """Step each active seed's env, check its rewards/observations, store all K transitions at once."""
        last_obs = self._last_obs
        assert last_obs is not None and self.storage is not None
        new_obs = last_obs.copy()
        next_obs = last_obs.copy()
        original_obs = self._last_original_obs if self._last_original_obs is not None else last_obs
        next_original = original_obs.copy()
        rewards = np.zeros((self.n_seeds, self.n_envs), dtype=np.float32)
        dones = np.zeros((self.n_seeds, self.n_envs), dtype=np.float32)
        stored_obs = original_obs
        normalizers = self._vec_normalizes()
        if isinstance(self.action_space, spaces.Box):
            finite = np.isfinite(buffer_actions.reshape(self.n_seeds, -1)).all(1)
            if not finite.all():  # a seed's networks diverged: name the loss that did it when there is one
                self._apply_finite_checks()
                for i in np.flatnonzero(~finite):
                    if int(i) not in self.failed:
                        self.fail_seed(int(i), f"diverged: non-finite action at step {self.num_timesteps}")
        stepped = []
        for i in self.active_seeds:
            obs_i, reward_i, done_i, infos = self.envs[i].step(actions[i])
            vec_normalize = normalizers[i]
            if vec_normalize is not None:
                raw_obs, raw_reward = vec_normalize.get_original_obs(), vec_normalize.get_original_reward()
            else:
                raw_obs, raw_reward = obs_i, reward_i
            new_obs[i] = obs_i
            next_original[i] = next_obs[i] = raw_obs
            rewards[i] = raw_reward
            if done_i.any():
                dones[i] = done_i
                for j in np.flatnonzero(done_i):
                    terminal = infos[j].get("terminal_observation")
                    if terminal is not None:
                        next_obs[i, j] = (
                            vec_normalize.unnormalize_obs(terminal) if vec_normalize is not None else terminal
                        )
                    if self.storage.handle_timeout_termination and infos[j].get("TimeLimit.truncated", False):
                        dones[i, j] = 0.0  # a timeout is not a terminal state
                    if self._noises[i] is not None:
                        self._noises[i].reset(**({"indices": [int(j)]} if self.n_envs > 1 else {}))
            stepped.append((i, infos, done_i))
        # non-finite rewards or observations from an env: that seed is masked before anything is stored
        k = self.n_seeds
        bad_reward = ~np.isfinite(rewards).all(1)
        bad_obs = ~np.isfinite(next_obs.reshape(k, -1)).all(1)
        for i, infos, done_i in stepped:
            if bad_reward[i] or bad_obs[i]:
                what = "reward" if bad_reward[i] else "observation"
                self.fail_seed(i, f"diverged: non-finite {what} from the env at step {self.num_timesteps}")
                continue
            self._update_info_buffers(i, infos, done_i)
            for _ in range(int(done_i.sum())):
                self._episode_nums[i] += 1
                if self._log_interval and self._episode_nums[i] % self._log_interval == 0:
                    self._dump_seed(i)
        self.storage.add(stored_obs, next_obs, buffer_actions, rewards, dones)
        self._last_obs = new_obs
        if self._last_original_obs is not None:
            self._last_original_obs = next_original

    def _on_step(self) -> None:
        """Hook after each lockstep env step (DQN: exploration rate and target updates)."""

    def _dump_seed(self, i: int) -> None:
        """Seed index i's time/rollout metrics and its buffered train metrics (the single run's ``dump_logs``)."""
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, sys.float_info.epsilon)
        metrics: dict[str, Any] = {
            "time/episodes": self._episode_nums[i],
            "time/fps": int((self.num_timesteps - self._num_timesteps_at_start) / time_elapsed),
            "time/time_elapsed": int(time_elapsed),
            "time/total_timesteps": self.num_timesteps,
        }
        infos = self._ep_info_buffers[i]
        if infos:
            metrics["rollout/ep_rew_mean"] = safe_mean([info["r"] for info in infos])
            metrics["rollout/ep_len_mean"] = safe_mean([info["l"] for info in infos])
        if self._ep_success_buffers[i]:
            metrics["rollout/success_rate"] = safe_mean(self._ep_success_buffers[i])
        self.dump_seed_logs(i, metrics)

    def _sample(self, batch_size: int) -> Any:
        """Each seed's minibatch (observations and rewards normalised by each seed's VecNormalize, if any)."""
        assert self.storage is not None
        data = self.storage.sample(batch_size, self._generator)
        normalizers = self._vec_normalizes()
        if not any(vn is not None for vn in normalizers):
            return data
        obs, next_obs, rewards = (
            data.observations.cpu().numpy(),
            data.next_observations.cpu().numpy(),
            data.rewards.cpu().numpy(),
        )
        for i, vn in enumerate(normalizers):
            if vn is not None:
                obs[i], next_obs[i] = vn.normalize_obs(obs[i]), vn.normalize_obs(next_obs[i])
                rewards[i] = vn.normalize_reward(rewards[i])
        dev = self.device
        return data._replace(
            observations=th.as_tensor(obs, device=dev),
            next_observations=th.as_tensor(next_obs, device=dev),
            rewards=th.as_tensor(rewards, device=dev),
        )

    def _obs_tensor(self, obs: np.ndarray) -> th.Tensor:
        """``[K, n, ...]`` observations as the networks' float input ``[K, n, features]``."""
        return th.as_tensor(obs, device=self.device).flatten(2).to(self._input_dtype)

    def replay_buffer_of(self, i: int) -> ReplayBuffer:
        """Seed index i's transitions as an ordinary :class:`ReplayBuffer` (e.g. ``m = batch.member(i);
        m.replay_buffer = batch.replay_buffer_of(i)`` to continue that seed alone; timeouts are already folded into
        the stored dones).

        Args:
            i: seed index.
        """
        self._check_seed_index(i)
        storage, first = self.storage, self.members[i]
        if storage is None:
            raise RuntimeError("the batch has no replay storage yet: train it (fit) or attach envs (set_env) first.")
        buffer = ReplayBuffer(
            first.buffer_size,
            first.observation_space,
            first.action_space,
            device=self.device,
            n_envs=self.n_envs,
            handle_timeout_termination=False,
        )
        size = min(storage.capacity, buffer.buffer_size)
        with th.no_grad():
            for name in SeedReplayStorage.FIELDS:
                target = getattr(buffer, name)
                target[:size].copy_(getattr(storage, name)[i, :size].reshape(target[:size].shape))
        buffer.pos, buffer.full = storage.pos, storage.full
        return buffer

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        member._n_updates = self._n_updates
        member.action_noise = copy.deepcopy(self._noises[i])
