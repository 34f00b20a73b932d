"""SeedBatch: K seeds of one algorithm trained by one LightningModule, networks stacked along a seed dimension.

Each seed is first built as the ordinary single-seed model would be (``SAC(..., seed=s)`` attached to its own env,
whose ``_setup_model`` seeds python/numpy/torch, the action space and the env, then builds the networks): so the
initial parameters are exactly those of the separate run. The seeds' MLPs are then stacked into
:class:`~lit_sb3.policies.torch_layers.EnsembleLinear` layers (one ``baddbmm`` per layer for all seeds; the
choice against ``torch.func`` vmap is measured in ``docs/seed_batching.md``) and trained with one optimiser
step for all seeds: Adam is elementwise, so a step over stacked parameters is K separate steps.

What stays per seed: env(s), replay storage and sampling, exploration, the entropy coefficient, gradient-norm
clipping (:func:`clip_grad_norm_per_seed`), episode statistics and every logged metric (``seed{i}/<SB3 key>``,
routed to per-seed loggers by :class:`SeedRoutingLogger`). A seed can be masked out (:meth:`SeedBatch.fail_seed`,
automatically on a non-finite reward, observation or loss): its parameters stop moving, the others go on.

Seed *index* ``i`` (the position in ``batch.seeds``) names a seed everywhere: ``member(i)``, ``failed[i]``,
``fail_seed(i, ...)``, ``seed{i}/...`` metric keys.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch as th

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.fit_context import FitContext
from lit_sb3.algorithms.seeds import check_seeds
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.types import GymEnv
from lit_sb3.loggers import SeedRoutingLogger
from lit_sb3.policies.seed_stack import ParamLink, clip_grad_norm_per_seed, stack_sequential
from lit_sb3.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

__all__ = [
    "ParamLink",
    "SeedBatchModule",
    "SeedRoutingLogger",
    "clip_grad_norm_per_seed",
    "stack_sequential",
]


class _EverySeed:
    """A recorded value that each seed logs (same value for all)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


# ----------------------------------------------------------------------
# The batch
# ----------------------------------------------------------------------


class SeedBatchModule(BaseAlgorithm):
    """K seeds of one algorithm as one LightningModule: ``SeedBatch(SAC, seeds=[0, 1, 2, 3], policy="MlpPolicy",
    **sac_kwargs)``, trained by ``RLTrainer(max_steps=N).fit(batch, datamodule=RLEnvDataModule(train_env=venvs))``
    with one VecEnv per seed (``max_steps``: env steps per seed, exact as in the single runs).

    ``SeedBatch(algo, ...)`` returns the batched class registered for ``algo`` (``SeedBatchSAC`` for SAC, ...).

    Args:
        algorithm: the single-seed class (SAC, TD3, DDPG, DQN, ...).
        seeds: the seeds, one per member (distinct integers).
        policy: the policy alias or class, as for ``algorithm``.
        kwargs: ``algorithm``'s constructor arguments (the same for every seed; ``seed`` is not one of them).

    Attributes:
        seeds: the seeds; seed *index* ``i`` is the position in this list.
        n_seeds: K.
        num_timesteps: env steps per seed (all seeds move in lockstep).
        failed: ``{i: reason}`` of the seeds masked out.
    """

    algorithm: ClassVar[type[BaseAlgorithm]]
    _registry: ClassVar[dict[type[BaseAlgorithm], type[SeedBatchModule]]] = {}
    _PLAIN_HOT_ATTRIBUTES: ClassVar[frozenset[str]] = BaseAlgorithm._PLAIN_HOT_ATTRIBUTES | {"_record_seq"}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        algorithm = cls.__dict__.get("algorithm")
        if algorithm is not None:
            SeedBatchModule._registry[algorithm] = cls

    def __init__(
        self,
        algorithm: type[BaseAlgorithm],
        seeds: Sequence[int],
        policy: Any = "MlpPolicy",
        device: th.device | str = "auto",
        **kwargs: Any,
    ) -> None:
        seeds = check_seeds(seeds)
        if "seed" in kwargs:
            raise TypeError("SeedBatch takes seeds=[...], not seed= (each member gets its own seed).")
        if algorithm is not type(self).algorithm:
            raise ValueError(f"{type(self).__name__} batches {type(self).algorithm.__name__}, not {algorithm!r}.")
        # the members: ordinary single-seed models (validating every argument now, before any work)
        # (each with its own copy of the arguments: an action noise object must not be shared between seeds)
        members = [algorithm(policy, seed=int(s), device=device, **copy.deepcopy(kwargs)) for s in seeds]
        first = members[0]
        super().__init__(
            policy=first.policy_class,
            learning_rate=first.learning_rate,
            policy_kwargs=first.policy_kwargs,
            stats_window_size=first.stats_window_size,
            verbose=first.verbose,
            device=device,
            support_multi_env=True,
            seed=None,
        )
        object.__setattr__(self, "_members", members)  # not submodules: their tensors are linked, not trained
        self.policy_alias = first.policy_alias
        self._seeds = [int(s) for s in seeds]
        self.envs: list[VecEnv] = []
        self._normalizers: list[VecNormalize | None] = []
        self._links: list[ParamLink] = []
        self._frozen: dict[int, list[th.Tensor]] = {}
        self._ep_info_buffers: list[deque] = []
        self._ep_success_buffers: list[deque] = []
        self._episode_nums = [0] * self.n_seeds
        # (seed-indexed) record buffer: key -> (value [K] or scalar, env step, record sequence number)
        self._seed_log_buffer: dict[str, tuple[Any, int, int]] = {}
        self._record_seq = 0
        self._dumped_seq = [0] * self.n_seeds
        self._built = False
        self._input_dtype = th.float32
        self._nonfinite: dict[str, th.Tensor] = {}

    # ------------------------------------------------------------------
    # Members and stacking
    # ------------------------------------------------------------------

    @property
    def members(self) -> list[BaseAlgorithm]:
        """The K single-seed models (their tensors hold the initial weights until :meth:`member` syncs them)."""
        return self._members  # type: ignore[attr-defined]

    @property
    def policy_ready(self) -> bool:
        return self._built

    def _match_input_dtype(self) -> None:
        """Inputs are cast to the stacked networks' dtype (``precision="64-true"``) where they are built."""
        self._input_dtype = next(self.parameters()).dtype

    def _check_envs(self, env: Any) -> list[VecEnv]:
        envs = list(env) if isinstance(env, (list, tuple)) else None
        if envs is None or len(envs) != self.n_seeds:
            got = f"{len(envs)} envs" if envs is not None else type(env).__name__
            raise ValueError(
                f"{type(self).__name__} needs one env per seed ({self.n_seeds}: RLEnvDataModule(train_env=[...])), "
                f"got {got}."
            )
        return envs

    def _init_env_metadata(self, env: Any, *args: Any, **kwargs: Any) -> None:
        """Attach one env per seed to the members (each checked by its member) and keep them in :attr:`envs`."""
        envs = self._check_envs(env)
        for member, member_env in zip(self.members, envs):
            member._init_env_metadata(member_env)
        first = self.members[0]
        for i, member in enumerate(self.members[1:], 1):
            if member.observation_space != first.observation_space or member.action_space != first.action_space:
                raise ValueError(
                    f"the seeds' envs must have the same spaces: seed index {i} has {member.observation_space} / "
                    f"{member.action_space}, seed index 0 {first.observation_space} / {first.action_space}."
                )
            if member.n_envs != first.n_envs:
                raise ValueError(f"the seeds' envs must have as many sub-envs: {member.n_envs} != {first.n_envs}.")
        self.envs = [m.env for m in self.members]  # type: ignore[misc]
        self._normalizers = [unwrap_vec_normalize(e) for e in self.envs]
        self.env = None
        self.observation_space = first.observation_space
        self.action_space = first.action_space
        self.n_envs = first.n_envs

    def set_env(self, env: Any, force_reset: bool = True) -> None:
        """Attach one env per seed and build the stacked networks (once).

        Args:
            env: a list of K VecEnvs (or env specs), seed index i's first.
            force_reset: discard the last observations.
        """
        self._init_env_metadata(env)
        if not self._built:
            self._setup_model()
        if force_reset:
            self._last_obs = None

    def get_env(self) -> None:
        """A batch has no single env: see :attr:`envs`."""
        return None

    def _setup_model(self) -> None:
        """Build each member as its separate run would (seeding everything), then stack them."""
        for member in self.members:
            if not member.policy_ready:
                member._setup_model()
        self._setup_lr_schedule()
        self._build_batch()
        self._finish_build()

    def _finish_build(self) -> None:
        """The stacked networks exist: seeds masked before (a pruner, a guard) are frozen from now on."""
        self._built = True
        for i in self.failed:
            self._frozen.setdefault(i, [link.stacked.detach().clone() for link in self._links])
        self._active_mask = self._make_active_mask()

    def _build_batch(self) -> None:
        """Subclasses: stack the members' networks (keep the links in ``self._links``), make the optimisers."""
        raise NotImplementedError

    def member(self, i: int) -> BaseAlgorithm:
        """Seed index ``i`` as an ordinary single-seed model with its current weights (and its env's VecNormalize),
        for ``evaluate_policy``, ``predict`` or ``save`` (loadable by the single-seed class).

        Args:
            i: seed index (position in :attr:`seeds`).
        """
        self._check_seed_index(i)
        if not self._built:
            raise RuntimeError("the batch has no networks yet: train it (fit) or attach envs (set_env) first.")
        member = self.members[i]
        for link in self._links:
            link.write_member(i)
        self._write_member_optimizers(i, member)
        self._sync_member_state(i, member)
        member.num_timesteps = self.num_timesteps
        member._total_timesteps = self._total_timesteps
        member._episode_num = self._episode_nums[i]
        member._current_progress_remaining = self._current_progress_remaining
        return member

    def _batch_optimizers(self) -> list[th.optim.Optimizer]:
        """The optimisers over the stacked parameters (subclasses' ``configure_optimizers``)."""
        optimizers = self.configure_optimizers()
        return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]

    def _write_member_optimizers(self, i: int, member: BaseAlgorithm) -> None:
        """Copy seed i's slices of the optimiser states (Adam moments and step) into member i's optimisers, so that
        a saved member continues training as the separate run would."""
        links = {id(link.stacked): link for link in self._links}
        owners = {
            id(q): opt for opt in member._optimizers_to_save().values() for g in opt.param_groups for q in g["params"]
        }
        for optimizer in self._batch_optimizers():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    link, state = links.get(id(p)), optimizer.state.get(p)
                    if link is None or not state:
                        continue
                    q = link.member_tensors[i]
                    target = owners.get(id(q))
                    if target is None:
                        continue
                    target.state[q] = {
                        key: link.seed_slice(i, value).to(q.device).clone()
                        if isinstance(value, th.Tensor) and value.shape == p.shape
                        else value.clone()
                        if isinstance(value, th.Tensor)
                        else value
                        for key, value in state.items()
                    }

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Hook: copy other per-seed state (counters, exploration rate) into member i."""

    # ------------------------------------------------------------------
    # Failure masking
    # ------------------------------------------------------------------

    def fail_seed(self, i: int, reason: str) -> None:
        """Mask seed index ``i`` out: its parameters stop moving, its env stops stepping, the others go on; when
        every seed has failed, the fit ends.

        Args:
            i: seed index.
            reason: one line saying why (kept in :attr:`failed`; the first reason wins).
        """
        self._check_seed_index(i)
        if i in self.failed:
            return
        self.failed[int(i)] = " ".join(str(reason).split())
        if self._built:
            self._frozen[int(i)] = [link.stacked.detach().clone() for link in self._links]
            self._active_mask = self._make_active_mask()
        if self.verbose >= 1:
            print(f"seed index {i} (seed {self.seeds[i]}) masked out: {self.failed[i]}")
        if not self.active_seeds:
            self._stop_requested = True

    def _make_active_mask(self) -> th.Tensor:
        mask = th.ones(self.n_seeds, dtype=th.bool)
        for i in self.failed:
            mask[i] = False
        return mask.to(self.device)

    def _restore_failed(self) -> None:
        """Undo any optimiser movement of the masked seeds (Adam moves a parameter even with a zero gradient)."""
        if not self._frozen:
            return
        k = self.n_seeds
        with th.no_grad():
            for i, frozen in self._frozen.items():
                for link, value in zip(self._links, frozen):
                    link.stacked.view(k, -1)[i].copy_(value.view(k, -1)[i])

    def _masked_sum(self, per_seed: th.Tensor) -> th.Tensor:
        """Sum of per-seed losses ``[K]`` over the active seeds (each seed's gradient is its own loss's)."""
        if not self.failed:
            return per_seed.sum()
        return th.where(self._active_mask, per_seed, th.zeros_like(per_seed)).sum()

    def _check_finite(self, name: str, per_seed: th.Tensor) -> None:
        """Note the seeds whose ``per_seed`` values (``[steps, K]`` or ``[K]``) are not all finite; they are masked
        at the next :meth:`_apply_finite_checks` (one device sync per ``training_step``, not per update).

        Args:
            name: what the values are (``"critic loss"``), for the failure reason.
            per_seed: the values, seed last.
        """
        bad = ~th.isfinite(per_seed.detach().reshape(-1, self.n_seeds)).all(0)
        previous = self._nonfinite.get(name)
        self._nonfinite[name] = bad if previous is None else previous | bad

    def _apply_finite_checks(self) -> None:
        """Mask the seeds noted by :meth:`_check_finite` (reason: ``diverged: non-finite <name> at step N``)."""
        if not self._nonfinite:
            return
        names = list(self._nonfinite)
        flags = th.stack([self._nonfinite[name] for name in names]).cpu().tolist()
        self._nonfinite = {}
        for name, row in zip(names, flags):
            for i, bad in enumerate(row):
                if bad and i not in self.failed:
                    self.fail_seed(i, f"diverged: non-finite {name} at step {self.num_timesteps}")

    # ------------------------------------------------------------------
    # Fit set-up
    # ------------------------------------------------------------------

    def setup_fit(self, env: GymEnv | str, context: FitContext) -> BaseCallback:
        if len(self.failed) == self.n_seeds:
            raise RuntimeError(f"every seed of the batch has failed: {self.failed}")
        return super().setup_fit(env, context)

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: Any = None,
        run_name: str = "run",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        self.start_time = time.time_ns()
        window = self.stats_window_size
        if not self._ep_info_buffers or reset_num_timesteps:
            self._ep_info_buffers = [deque(maxlen=window) for _ in range(self.n_seeds)]
            self._ep_success_buffers = [deque(maxlen=window) for _ in range(self.n_seeds)]
        self.ep_info_buffer, self.ep_success_buffer = self._ep_info_buffers[0], self._ep_success_buffers[0]
        if reset_num_timesteps:
            self.num_timesteps = 0
            self._episode_nums = [0] * self.n_seeds
        else:
            total_timesteps += self.num_timesteps
        self._total_timesteps = total_timesteps
        self._num_timesteps_at_start = self.num_timesteps
        if reset_num_timesteps or self._last_obs is None:
            self._last_obs = self._stack_obs([env.reset() for env in self.envs])
            self._last_episode_starts = np.ones((self.n_seeds, self.n_envs), dtype=bool)
            if self._vec_normalizes_any():
                self._last_original_obs = self._stack_obs(
                    [
                        vn.get_original_obs() if vn is not None else o
                        for vn, o in zip(self._vec_normalizes(), self._last_obs)
                    ]
                )
        self._active_mask = self._make_active_mask()
        return total_timesteps, self._init_callback(callback, progress_bar)

    def _vec_normalizes(self) -> list[VecNormalize | None]:
        """Each seed's VecNormalize (or None), found when the envs were attached."""
        return self._normalizers

    def _vec_normalizes_any(self) -> bool:
        return any(vn is not None for vn in self._vec_normalizes())

    @staticmethod
    def _stack_obs(observations: Sequence[Any]) -> np.ndarray:
        if isinstance(observations[0], dict):
            raise NotImplementedError("seed batching does not support Dict observations yet.")
        return np.stack(observations)

    def _update_info_buffers(self, i: int, infos: list[dict[str, Any]], dones: np.ndarray) -> None:
        for idx, info in enumerate(infos):
            episode = info.get("episode")
            if episode is not None:
                self._ep_info_buffers[i].append(episode)
            success = info.get("is_success")
            if success is not None and dones[idx]:
                self._ep_success_buffers[i].append(success)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["lit_sb3_seed_batch"] = {"num_timesteps": int(self.num_timesteps), "failed": dict(self.failed)}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        raise NotImplementedError(
            "resuming a seed batch from a Lightning checkpoint is not supported: rerun the unfinished seeds "
            "(member(i).save gives each seed's model)."
        )

    # ------------------------------------------------------------------
    # Per-seed logging
    # ------------------------------------------------------------------

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        """Buffer a metric: a ``[K]`` tensor (or a length-K list) is one value per seed, logged as
        ``seed{i}/<key>``; anything else is one batch-wide value (logged unprefixed).

        Args:
            key: the SB3 key (``train/actor_loss``).
            value: ``[K]`` values or a scalar.
            exclude: unused (kept for the signature).
        """
        self._record_seq += 1
        self._seed_log_buffer[key] = (value, self.num_timesteps, self._record_seq)

    def record_every_seed(self, key: str, value: Any) -> None:
        """Buffer one value that every seed logs under its own ``seed{i}/<key>`` (``train/n_updates``, ...).

        Args:
            key: the SB3 key.
            value: the value shared by all seeds.
        """
        self.record(key, _EverySeed(value))

    def _update_learning_rate(self, optimizers: Any) -> None:
        """Set every optimiser's learning rate from the schedule (the same for all seeds) and record it per seed."""
        lr = self.lr_schedule(self._current_progress_remaining)
        self.record_every_seed("train/learning_rate", lr)
        for optimizer in [optimizers] if isinstance(optimizers, th.optim.Optimizer) else optimizers:
            for group in optimizer.param_groups:
                group["lr"] = lr

    def _per_seed(self, value: Any, i: int) -> Any:
        if isinstance(value, _EverySeed):
            return value.value
        if isinstance(value, th.Tensor) and value.dim() > 0 and value.shape[0] == self.n_seeds:
            return value[i]
        if isinstance(value, (list, tuple, np.ndarray)) and len(value) == self.n_seeds:
            return value[i]
        return None

    def dump_seed_logs(self, i: int, metrics: dict[str, Any]) -> None:
        """Send seed index i's ``metrics`` (at the current step) and its buffered values recorded since its last
        dump, as ``seed{i}/<key>``.

        Args:
            i: seed index.
            metrics: seed i's rollout/time metrics.
        """
        last = self._dumped_seq[i]
        self._dumped_seq[i] = self._record_seq
        prefix = f"seed{i}/"
        for key, (value, at, seq) in self._seed_log_buffer.items():
            if seq > last:
                part = self._per_seed(value, i)
                if part is not None:
                    self._log_buffer[prefix + key] = (part, at, ())
        super().log_metrics({prefix + k: v for k, v in metrics.items()})

    def flush_logs(self) -> None:
        """Send whatever is still buffered, per seed (active seeds) and batch-wide."""
        for i in self.active_seeds:
            self.dump_seed_logs(i, {})
        for key, (value, at, _) in self._seed_log_buffer.items():
            if self._per_seed(value, 0) is None:
                self._log_buffer[key] = (value, at, ())
        self._seed_log_buffer = {}
        if self._log_buffer:
            super().log_metrics({})

    def hyperparameters_for_logging(self) -> dict[str, Any]:
        """Each member's hyperparameters as ``seed{i}/<name>`` (:class:`SeedRoutingLogger` gives logger i exactly
        those of the separate run), plus the batch's ``seeds``."""
        params: dict[str, Any] = {"seeds": str(self.seeds), "algo": f"SeedBatch[{type(self).algorithm.__name__}]"}
        for i, member in enumerate(self.members):
            for key, value in member.hyperparameters_for_logging().items():
                params[f"seed{i}/{key}"] = value
        return params

    def _constructor_params(self) -> dict[str, Any]:
        return self.members[0]._constructor_params()

    def save(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "save each seed on its own: batch.member(i).save(path) (loadable by the single class)."
        )

    @classmethod
    def load(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a seed batch is saved per seed: load each with the single-seed class's load().")

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, None]:
        """Actions of every seed: ``observation`` is ``[K, ...]`` (one observation or batch per seed).

        Args:
            observation: per-seed observations, seed-major.
            state: unused.
            episode_start: unused.
            deterministic: the mode instead of a sample.
        """
        if not self._built:
            raise RuntimeError(f"{type(self).__name__} has no networks yet: train it (fit) first.")
        actions = [self.member(i).predict(observation[i], deterministic=deterministic)[0] for i in range(self.n_seeds)]
        return np.stack(actions), None
