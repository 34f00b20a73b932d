"""The seed dimension of a model: what an algorithm family needs to train K > 1 seeds as one LightningModule.

What it offers (read this to give an algorithm family batching; the off-policy family is the worked example):

* :class:`SeedDimensionMixin` — put it before :class:`~lit_sb3.algorithms.base.BaseAlgorithm` in a family's bases
  (``class OffPolicyAlgorithm(SeedDimensionMixin, BaseAlgorithm)``). At K = 1 (every model not built by
  :func:`~lit_sb3.algorithms.seeds.SeedBatch`) each of its methods is the base class's, untouched. At K > 1
  (:meth:`set_seeds`, called by ``SeedBatch``):

  - the K *members* are ordinary single-seed models built exactly as the separate runs
    (``algorithm(policy, seed=s_i, **kwargs)``); each gets its own VecEnv (``RLEnvDataModule(train_env=[...])``)
    and its ``_setup_model`` (seeding python/numpy/torch, the action space and the env, then building the
    networks), so the initial weights are exactly the separate runs'. :meth:`_stack_members` then stacks their
    policies (:func:`~lit_sb3.policies.seed_stack.stack_module`) into the model's one policy and rebuilds the
    policy's optimisers over the stacked parameters (:func:`~lit_sb3.optim.build_optimizer`);
  - per seed: envs (:attr:`envs`), VecNormalize statistics, episode statistics, episode counts and logging
    (``seed{i}/<SB3 key>``, dumped when that seed's episode count hits the log interval, routed by
    :class:`~lit_sb3.loggers.SeedRoutingLogger`), random streams (:attr:`seed_generators`: seed i's
    ``torch.Generator`` starts from the global torch state its separate run has after building its networks),
    failure masking (:meth:`fail_seed`: a non-finite loss noted by :meth:`_check_finite`, env data, actions);
  - :meth:`member` writes seed i's stacked weights, optimiser state and counters into member i and returns it;
  - archives and checkpoints: ``save`` writes the stacked tensors plus the seeds and their counters
    (:meth:`_seed_save_data`), ``load`` rebuilds the K seeds (:meth:`_restore_seeds`); a Lightning checkpoint adds
    each seed's random streams, envs, episode state and failures (:meth:`on_save_checkpoint`), restored exactly when
    the resumed fit starts (:meth:`_apply_pending_rl_state`).

  A family's one collection loop serves K >= 1 seeds: it steps the envs through :meth:`_step_envs` (K = 1: the
  env's own ``step``) and counts episodes through :meth:`_update_seed_info` and :meth:`_count_episode`, and stores
  into its storage with a leading K (see ``off_policy.py``); an algorithm writes its update once with per-seed
  reductions (:mod:`lit_sb3.policies.seed_stack`).

Tensor convention: at K = 1 the update's tensors are the single-seed ones (no leading dim: every network kind
runs unchanged and bitwise as before); at K > 1 they are ``[K, batch, ...]``. Update code is written to hold for
both: reductions through ``seed_mean``/``seed_mse``/..., concatenations and feature reductions on ``dim=-1``,
per-seed scalars broadcast with ``reshape(-1, 1, 1)``.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th

from lit_sb3.policies.seed_stack import ParamLink, stack_module
from lit_sb3.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

__all__ = ["SeedDimensionMixin"]

# the most seeds an archive may declare (each is a model built before the archive's tensors are checked)
MAX_ARCHIVE_SEEDS = 1024


def _copy_obs(obs: np.ndarray | dict[str, np.ndarray]) -> Any:
    """A copy of observations (an array, or a dict of arrays for Dict spaces)."""
    if isinstance(obs, dict):
        return {key: np.array(value, copy=True) for key, value in obs.items()}
    return np.array(obs, copy=True)


def _obs_at(obs: np.ndarray | dict[str, np.ndarray], index: Any) -> Any:
    """``obs[index]`` (per key for Dict observations)."""
    return {key: value[index] for key, value in obs.items()} if isinstance(obs, dict) else obs[index]


def _set_obs(obs: np.ndarray | dict[str, np.ndarray], index: Any, value: Any) -> None:
    """``obs[index] = value`` (per key for Dict observations)."""
    if isinstance(obs, dict):
        for key in obs:
            obs[key][index] = value[key]
    else:
        obs[index] = value


def _all_finite(obs: np.ndarray | dict[str, np.ndarray], index: Any = slice(None)) -> bool:
    """Whether ``obs[index]`` (every key's, for Dict observations) is finite."""
    values = obs.values() if isinstance(obs, dict) else [obs]
    return all(np.isfinite(value[index]).all() for value in values)


class _SeedState:
    """Everything a K-seed model keeps per seed (held as ``model._seed_state``; None at K = 1)."""

    def __init__(self, seeds: list[int], members: list[BaseAlgorithm]) -> None:
        self.members = members
        self.envs: list[VecEnv] = []
        self.normalizers: list[VecNormalize | None] = []
        self.links: list[ParamLink] = []
        self.frozen: dict[int, list[th.Tensor]] = {}
        self.ep_info_buffers: list[deque] = []
        self.ep_success_buffers: list[deque] = []
        self.episode_nums = [0] * len(seeds)
        # key -> (value: [K] tensor/list or one value for every seed, env step, per-seed record sequence numbers)
        self.log_buffer: dict[str, tuple[Any, int, np.ndarray]] = {}
        self.record_seq = 0
        self.dumped_seq = [0] * len(seeds)
        self.nonfinite: dict[str, th.Tensor] = {}
        self.generators: list[th.Generator] | None = None
        # seed i's numpy stream: the global one its separate run seeds with np.random.seed(seed) (epsilon-greedy)
        self.np_rngs = [np.random.RandomState(seed) for seed in seeds]
        # during an update that only some seeds take (their own schedules): [K] bool of those seeds (on the
        # model's device, and on the host: update_seeds)
        self.update_mask: th.Tensor | None = None
        self.update_seeds: np.ndarray | None = None
        self.built = False


class SeedDimensionMixin:
    """K > 1 seeds in one model (see the module docstring); every method is the base class's at K = 1."""

    _seed_state: _SeedState | None = None

    # ------------------------------------------------------------------
    # Asking for K seeds
    # ------------------------------------------------------------------

    def set_seeds(self, seeds: Sequence[int], policy: Any, kwargs: dict[str, Any]) -> None:
        """Make this model train ``seeds`` (K > 1) — what :func:`~lit_sb3.algorithms.seeds.SeedBatch` does.

        Args:
            seeds: distinct integer seeds (this model was built with ``seed=seeds[0]``).
            policy: the policy alias or class the model was built with.
            kwargs: the other constructor arguments (each member gets its own deep copy: an action noise object
                is never shared between seeds).
        """
        if self.policy_ready:  # type: ignore[attr-defined]
            raise RuntimeError("set_seeds must be called before the networks are built.")
        self._check_seed_batchable()
        # the members: ordinary single-seed models (validating every argument now, before any work)
        cls = type(self)
        members = [cls(policy, seed=int(s), **copy.deepcopy(kwargs)) for s in seeds]
        self._seeds = [int(s) for s in seeds]
        self._seed_state = _SeedState(self._seeds, members)
        self.failed = {}

    def _check_seed_batchable(self) -> None:
        """Hook: raise ``NotImplementedError`` naming an option this family cannot batch over K > 1 seeds yet."""

    @property
    def seed_generators(self) -> list[th.Generator] | None:
        """Seed i's own torch random stream (K > 1), None at K = 1 (torch's global generator)."""
        state = self._seed_state
        return None if state is None else state.generators

    @property
    def envs(self) -> list[VecEnv]:
        """One training VecEnv per seed (K > 1); ``[env]`` at K = 1."""
        state = self._seed_state
        if state is None:
            return [] if self.env is None else [self.env]  # type: ignore[attr-defined]
        return state.envs

    @property
    def policy_ready(self) -> bool:
        state = self._seed_state
        if state is None:
            return super().policy_ready  # type: ignore[misc]
        return state.built

    # ------------------------------------------------------------------
    # Envs and networks
    # ------------------------------------------------------------------

    def _init_env_metadata(self, env: Any, *args: Any, **kwargs: Any) -> None:
        state = self._seed_state
        if state is None:
            return super()._init_env_metadata(env, *args, **kwargs)  # type: ignore[misc]
        k = len(state.members)
        envs = list(env) if isinstance(env, (list, tuple)) else None
        if envs is None or len(envs) != k:
            got = f"{len(envs)} envs" if envs is not None else type(env).__name__
            raise ValueError(
                f"{type(self).__name__} of {k} seeds needs one env per seed (RLEnvDataModule(train_env=[...])), "
                f"got {got}."
            )
        for member, member_env in zip(state.members, envs):
            member._init_env_metadata(member_env)
        first = state.members[0]
        for i, member in enumerate(state.members[1:], 1):
            if member.observation_space != first.observation_space or member.action_space != first.action_space:
                raise ValueError(
                    f"the seeds' envs must have the same spaces: seed index {i} has {member.observation_space} / "
                    f"{member.action_space}, seed index 0 {first.observation_space} / {first.action_space}."
                )
            if member.n_envs != first.n_envs:
                raise ValueError(f"the seeds' envs must have as many sub-envs: {member.n_envs} != {first.n_envs}.")
        if state.envs and any(a is not b for a, b in zip(state.envs, (m.env for m in state.members))):
            self._last_obs = None  # type: ignore[attr-defined]
        state.envs = [m.env for m in state.members]  # type: ignore[misc]
        state.normalizers = [unwrap_vec_normalize(e) for e in state.envs]
        self.env = None  # type: ignore[attr-defined]
        self._vec_normalize_env = None  # type: ignore[attr-defined]
        self.observation_space = first.observation_space  # type: ignore[attr-defined]
        self.action_space = first.action_space  # type: ignore[attr-defined]
        self.n_envs = first.n_envs  # type: ignore[attr-defined]

    def set_env(self, env: Any, force_reset: bool = True) -> None:
        state = self._seed_state
        if state is None:
            return super().set_env(env, force_reset)  # type: ignore[misc]
        if state.built:  # the networks exist (trained or loaded): the new envs must have their spaces
            for i, seed_env in enumerate(env if isinstance(env, (list, tuple)) else []):
                spaces = (getattr(seed_env, "observation_space", None), getattr(seed_env, "action_space", None))
                if spaces[0] is not None and spaces != (self.observation_space, self.action_space):  # type: ignore[attr-defined]
                    raise ValueError(
                        f"the env of seed index {i} has the spaces {spaces[0]} / {spaces[1]}, the model "
                        f"{self.observation_space} / {self.action_space}."  # type: ignore[attr-defined]
                    )
        self._init_env_metadata(env)
        if not state.built:
            self._setup_model()  # type: ignore[attr-defined]
        if force_reset:
            self._last_obs = None  # type: ignore[attr-defined]

    def get_env(self) -> Any:
        return None if self._seed_state is not None else super().get_env()  # type: ignore[misc]

    def _setup_member(self, member: BaseAlgorithm) -> None:
        """Hook: build member's networks as its separate run would (``member._setup_model()``)."""
        member._setup_model()

    def _stack_members(self) -> None:
        """Build each member as its separate run would, keep each seed's torch random stream, then stack the
        members' policies into this model's policy and rebuild its optimisers over the stacked parameters."""
        state = self._seed_state
        assert state is not None
        generators = []
        for member in state.members:
            if getattr(member, "observation_space", None) is None:  # loaded from an archive without envs
                member.observation_space, member.action_space = self.observation_space, self.action_space  # type: ignore[attr-defined]
                member.n_envs = self.n_envs  # type: ignore[attr-defined]
            if not member.policy_ready:
                self._setup_member(member)
            # the global torch state the separate run has now: the start of seed i's own stream
            generator = th.Generator(device="cpu")
            generator.set_state(th.random.get_rng_state())
            generators.append(generator)
        device = self.device  # type: ignore[attr-defined]
        if device.type != "cpu":  # a device stream per seed (equal in distribution to the separate runs')
            generators = [th.Generator(device=device) for _ in state.members]
            for generator, seed in zip(generators, self.seeds):  # type: ignore[attr-defined]
                generator.manual_seed(int(seed))
        state.generators = generators
        policies = [m.policy for m in state.members]
        stacked, links = stack_module(policies)
        self.policy = stacked.to(device)  # type: ignore[attr-defined]
        state.links = links
        self._restack_optimizers(policies[0], stacked, self._seeds_sit_out())
        self._set_seed_generators(state.generators)
        state.built = True

    def _seeds_sit_out(self) -> bool:
        """Hook: whether a live seed can sit out an update (its own update schedule): per-seed optimisers."""
        return False

    def _set_seed_generators(self, generators: list[th.Generator] | None) -> None:
        """Give every action distribution of the policy the seeds' random streams."""
        for module in self.policy.modules():  # type: ignore[attr-defined]
            distribution = getattr(module, "action_dist", None)
            if distribution is not None and hasattr(distribution, "seed_generators"):
                distribution.seed_generators = generators

    def _restack_optimizers(self, single: th.nn.Module, stacked: th.nn.Module, seeds_sit_out: bool = False) -> None:
        """Replace every optimiser of the stacked policy (copies of member 0's) by one of the same class and
        hyperparameters over the stacked parameters of the same names."""
        from lit_sb3.optim import build_optimizer

        names = {id(p): name for name, p in single.named_parameters()}
        stacked_params = dict(stacked.named_parameters())
        single_modules = dict(single.named_modules())
        for path, module in stacked.named_modules():
            optimizer = getattr(single_modules.get(path), "optimizer", None)
            if not isinstance(optimizer, th.optim.Optimizer):
                continue
            groups = []
            for group in optimizer.param_groups:
                params = [stacked_params[names[id(p)]] for p in group["params"]]
                groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": params})
            defaults = {k: v for k, v in optimizer.defaults.items() if k != "lr"}
            module.optimizer = build_optimizer(
                type(optimizer),
                groups,
                optimizer.defaults["lr"],
                defaults,
                self.n_seeds,
                seeds_sit_out,  # type: ignore[attr-defined]
            )

    # ------------------------------------------------------------------
    # Members
    # ------------------------------------------------------------------

    @property
    def members(self) -> list[BaseAlgorithm]:
        """The K single-seed models (``[self]`` at K = 1); :meth:`member` syncs one before returning it."""
        state = self._seed_state
        return [self] if state is None else state.members  # type: ignore[list-item]

    def member(self, i: int) -> BaseAlgorithm:
        state = self._seed_state
        if state is None:
            return super().member(i)  # type: ignore[misc]
        self._check_seed_index(i)  # type: ignore[attr-defined]
        if not state.built:
            raise RuntimeError("the model has no networks yet: train it (fit) or attach envs (set_env) first.")
        member = state.members[i]
        for link in state.links:
            link.write_member(i)
        self._write_member_optimizers(i, member)
        self._sync_member_state(i, member)
        member.num_timesteps = self.num_timesteps  # type: ignore[attr-defined]
        member._total_timesteps = self._total_timesteps  # type: ignore[attr-defined]
        member._episode_num = state.episode_nums[i]
        n_updates = self._n_updates  # type: ignore[attr-defined]
        member._n_updates = int(n_updates[i]) if isinstance(n_updates, np.ndarray) else n_updates
        member._current_progress_remaining = self._current_progress_remaining  # type: ignore[attr-defined]
        return member

    def _write_member_optimizers(self, i: int, member: BaseAlgorithm) -> None:
        """Copy seed i's slices of the optimiser states (Adam moments and step) into member i's optimisers."""
        state = self._seed_state
        assert state is not None
        links = {id(link.stacked): link for link in state.links}
        owners = {
            id(q): opt for opt in member._optimizers_to_save().values() for g in opt.param_groups for q in g["params"]
        }
        for optimizer in self._optimizers_to_save().values():  # type: ignore[attr-defined]
            for group in optimizer.param_groups:
                for p in group["params"]:
                    link, opt_state = links.get(id(p)), optimizer.state.get(p)
                    if link is None or not opt_state:
                        continue
                    q = link.member_tensors[i]
                    target = owners.get(id(q))
                    if target is None:
                        continue
                    target.state[q] = {
                        key: value[i].reshape(()).clone()  # a per-seed optimiser's step counts
                        if key == "step" and isinstance(value, th.Tensor) and value.dim() == 1
                        else link.seed_slice(i, value).to(q.device).clone()
                        if isinstance(value, th.Tensor) and value.shape == p.shape
                        else value.clone()
                        if isinstance(value, th.Tensor)
                        else value
                        for key, value in opt_state.items()
                    }

    def _live_part(self, param: th.Tensor, value: th.Tensor, failed: Any) -> th.Tensor:
        """K > 1: the rows of ``value`` (shaped like the stacked ``param``) of the seeds not in ``failed``, in the
        layout :meth:`ParamLink.seed_slice` reads (the leading dimension in K blocks)."""
        state = self._seed_state
        dead = {int(i) for i in failed}
        if state is None or not dead or not any(link.stacked is param for link in state.links):
            return super()._live_part(param, value, failed)  # type: ignore[misc]
        k = self.n_seeds  # type: ignore[attr-defined]
        return value.detach().reshape(k, -1)[[i for i in range(k) if i not in dead]]

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Hook: copy other per-seed state (exploration, noise) into member i."""

    # ------------------------------------------------------------------
    # Failure masking
    # ------------------------------------------------------------------

    def fail_seed(self, i: int, reason: str) -> None:
        state = self._seed_state
        was_failed = i in self.failed  # type: ignore[attr-defined]
        super().fail_seed(i, reason)  # type: ignore[misc]
        if state is not None and state.built and not was_failed:
            state.frozen[int(i)] = [link.stacked.detach().clone() for link in state.links]

    def _active_mask(self, due: np.ndarray | None = None) -> th.Tensor | None:
        """``[K]`` bool of the seeds that take this update: live, and not sitting it out (None when every seed
        takes it: no masking work).

        Args:
            due: only these seeds (a host ``[K]`` bool, from :meth:`_due`): a step that seeds on their own update
                counts take at different updates (TD3's and CrossQ's delayed actor step).
        """
        state = self._seed_state
        update = None if state is None else state.update_mask
        if not self.failed and update is None and due is None:  # type: ignore[attr-defined]
            return None
        mask = th.ones(self.n_seeds, dtype=th.bool) if due is None else th.as_tensor(due, dtype=th.bool)  # type: ignore[attr-defined]
        for i in self.failed:  # type: ignore[attr-defined]
            mask[i] = False
        mask = mask.to(self.device)  # type: ignore[attr-defined]
        return mask if update is None else mask & update

    def _updating_seeds(self) -> np.ndarray | None:
        """Host ``[K]`` bool of the seeds taking the current update while others sit it out (their own update
        schedules), None when every seed takes it (or K = 1)."""
        state = self._seed_state
        return None if state is None else state.update_seeds

    def _due(self, every: int) -> tuple[bool, np.ndarray | None]:
        """Whether a step taken every ``every`` updates (TD3's and CrossQ's ``policy_delay``) is due at this update
        (``_n_updates`` already counts it), and which seeds take it: None (every seed that takes the update), or,
        when seeds keep their own update counts (``train_freq`` in episodes, ``_n_updates`` a ``[K]`` array), the
        host ``[K]`` bool of the seeds taking this update whose own count is a multiple of ``every`` (each seed's
        delayed steps follow its separate run's count).

        Args:
            every: the period in updates.
        """
        n_updates = self._n_updates  # type: ignore[attr-defined]
        if not isinstance(n_updates, np.ndarray):
            return n_updates % every == 0, None
        due = n_updates % every == 0
        state = self._seed_state
        if state is not None and state.update_seeds is not None:
            due &= state.update_seeds
        return bool(due.any()), due

    def _restore_failed(self) -> None:
        """Undo any optimiser movement of the masked seeds (Adam moves a parameter even with a zero gradient)."""
        state = self._seed_state
        if state is None or not state.frozen:
            return
        k = self.n_seeds  # type: ignore[attr-defined]
        with th.no_grad():
            for i, frozen in state.frozen.items():
                for link, value in zip(state.links, frozen):
                    link.stacked.view(k, -1)[i].copy_(value.view(k, -1)[i])

    def _check_finite(self, name: str, per_seed: th.Tensor) -> None:
        """Note the seeds whose values (``[steps, K]`` or ``[K]``) are not all finite; they are masked at the next
        :meth:`_apply_finite_checks` (one device sync per ``training_step``, not per update). Nothing at K = 1.

        Args:
            name: what the values are (``"critic loss"``), for the failure reason.
            per_seed: the values, seed last.
        """
        state = self._seed_state
        if state is None:
            return
        bad = ~th.isfinite(per_seed.detach().reshape(-1, self.n_seeds)).all(0)  # type: ignore[attr-defined]
        previous = state.nonfinite.get(name)
        state.nonfinite[name] = bad if previous is None else previous | bad

    def _apply_finite_checks(self) -> None:
        """Mask the seeds noted by :meth:`_check_finite` (reason: ``diverged: non-finite <name> at step N``)."""
        state = self._seed_state
        if state is None or not state.nonfinite:
            return
        names = list(state.nonfinite)
        flags = th.stack([state.nonfinite[name] for name in names]).cpu().tolist()
        state.nonfinite = {}
        for name, row in zip(names, flags):
            for i, bad in enumerate(row):
                if bad and i not in self.failed:  # type: ignore[attr-defined]
                    self.fail_seed(i, f"diverged: non-finite {name} at step {self.num_timesteps}")  # type: ignore[attr-defined]

    # ------------------------------------------------------------------
    # Fit set-up and per-seed episodes
    # ------------------------------------------------------------------

    def setup_fit(self, env: Any, context: Any) -> Any:
        if self._seed_state is not None and len(self.failed) == self.n_seeds:  # type: ignore[attr-defined]
            raise RuntimeError(f"every seed of the model has failed: {self.failed}")  # type: ignore[attr-defined]
        return super().setup_fit(env, context)  # type: ignore[misc]

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: Any = None,
        run_name: str = "run",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> tuple[int, Any]:
        if self._seed_state is None:
            return super()._setup_learn(total_timesteps, callback, run_name, reset_num_timesteps, progress_bar)  # type: ignore[misc]
        self.start_time = time.time_ns()
        if reset_num_timesteps:
            self.num_timesteps = 0
        else:
            total_timesteps += self.num_timesteps  # type: ignore[attr-defined]
        self._total_timesteps = total_timesteps
        self._num_timesteps_at_start = self.num_timesteps  # type: ignore[attr-defined]
        self._reset_seed_episodes(reset_num_timesteps)
        self._freeze_failed()
        return total_timesteps, self._init_callback(callback, progress_bar)  # type: ignore[attr-defined]

    def _freeze_failed(self) -> None:
        """Seeds masked before the networks trained (a pruner, a guard) keep their current values from now on."""
        state = self._seed_state
        assert state is not None
        for i in self.failed:  # type: ignore[attr-defined]
            state.frozen.setdefault(i, [link.stacked.detach().clone() for link in state.links])

    def _reset_seed_episodes(self, reset_num_timesteps: bool) -> None:
        """Per-seed episode buffers and counts (K > 1), and the first observations ``[K, n_envs, ...]``."""
        state = self._seed_state
        assert state is not None
        window = self.stats_window_size  # type: ignore[attr-defined]
        if not state.ep_info_buffers or reset_num_timesteps:
            state.ep_info_buffers = [deque(maxlen=window) for _ in state.members]
            state.ep_success_buffers = [deque(maxlen=window) for _ in state.members]
        self.ep_info_buffer, self.ep_success_buffer = state.ep_info_buffers[0], state.ep_success_buffers[0]
        if reset_num_timesteps:
            state.episode_nums = [0] * len(state.members)
        if reset_num_timesteps or self._last_obs is None:  # type: ignore[attr-defined]
            observations = [env.reset() for env in state.envs]
            if isinstance(observations[0], dict):  # Dict observations: one [K, n_envs, ...] array per key
                if any(vn is not None for vn in state.normalizers):
                    raise NotImplementedError(
                        "K > 1 seeds with Dict observations and VecNormalize are not batched yet (K = 1 works)."
                    )
                self._last_obs = {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}
            else:
                self._last_obs = np.stack(observations)
            self._last_episode_starts = np.ones((len(state.members), self.n_envs), dtype=bool)  # type: ignore[attr-defined]
            normalizers = state.normalizers
            if any(vn is not None for vn in normalizers):
                self._last_original_obs = np.stack(
                    [vn.get_original_obs() if vn is not None else o for vn, o in zip(normalizers, self._last_obs)]
                )
            else:
                self._last_original_obs = None

    def _step_envs(self, env: VecEnv | None, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, list[Any]]:
        """One env step of every live seed: K = 1 ``env.step(actions)`` (SB3's, exceptions and all); K > 1 each
        live seed's VecEnv with ``actions[i]``: observations ``[K, n_envs, ...]``, rewards and dones ``[K, n_envs]``
        and each seed's infos. A seed whose env raises, or returns a non-finite reward or observation, is failed and
        its step undone (it keeps its last observation; its env steps no more).

        Args:
            env: the training VecEnv (K = 1; None for K > 1).
            actions: the actions sent to the envs (``[K, n_envs, ...]`` for K > 1).
        """
        if self.n_seeds == 1:
            assert env is not None
            return env.step(actions)
        assert self._last_obs is not None
        k, n_envs = self.n_seeds, self.n_envs
        new_obs = _copy_obs(self._last_obs)
        rewards = np.zeros((k, n_envs), dtype=np.float32)
        dones = np.zeros((k, n_envs), dtype=bool)
        infos: list[list[dict[str, Any]]] = [[{} for _ in range(n_envs)] for _ in range(k)]
        envs = self.envs
        live = self.active_seeds
        for i in live:
            step = self._step_seed_env(i, envs[i], actions[i], self.num_timesteps + n_envs)
            if step is None:  # the env raised: seed i failed alone and keeps its last observation
                continue
            obs_i, rewards[i], dones[i], infos[i] = step
            _set_obs(new_obs, i, obs_i)
        if not (np.isfinite(rewards).all() and _all_finite(new_obs)):  # one check for all seeds
            for i in live:
                bad_reward = not np.isfinite(rewards[i]).all()
                if bad_reward or not _all_finite(new_obs, i):
                    what = "reward" if bad_reward else "observation"
                    self.fail_seed(i, f"diverged: non-finite {what} from the env at step {self.num_timesteps + n_envs}")
                    _set_obs(new_obs, i, _obs_at(self._last_obs, i))
                    rewards[i], dones[i] = 0.0, False
                    infos[i] = [{} for _ in range(n_envs)]
        return new_obs, rewards, dones, infos

    def _update_seed_info(self, infos: list[Any], dones: np.ndarray) -> None:
        """Episode statistics of this step: K = 1 SB3's ``_update_info_buffer``; K > 1 each live seed's own.

        Args:
            infos: the step's infos (K > 1: one list per seed).
            dones: the step's dones (K > 1: ``[K, n_envs]``).
        """
        if self.n_seeds == 1:
            self._update_info_buffer(infos, dones)
            return
        for i in self.active_seeds:
            self._update_seed_info_buffers(i, infos[i], dones[i])

    def _update_seed_info_buffers(self, i: int, infos: list[dict[str, Any]], dones: np.ndarray) -> None:
        state = self._seed_state
        assert state is not None
        for idx, info in enumerate(infos):
            episode = info.get("episode")
            if episode is not None:
                state.ep_info_buffers[i].append(episode)
            success = info.get("is_success")
            if success is not None and dones[idx]:
                state.ep_success_buffers[i].append(success)

    @property
    def _ep_info_buffers(self) -> list[deque]:
        """Each seed's episode statistics (``[ep_info_buffer]`` at K = 1)."""
        state = self._seed_state
        return [self.ep_info_buffer] if state is None else state.ep_info_buffers  # type: ignore[list-item]

    @property
    def _ep_success_buffers(self) -> list[deque]:
        """Each seed's episode successes (``[ep_success_buffer]`` at K = 1)."""
        state = self._seed_state
        return [self.ep_success_buffer] if state is None else state.ep_success_buffers  # type: ignore[list-item]

    def _count_episode(self, i: int) -> int:
        """Count one more finished episode of seed index i; returns its episode count (SB3's ``_episode_num``).

        Args:
            i: seed index.
        """
        state = self._seed_state
        if state is None:
            self._episode_num += 1  # type: ignore[attr-defined]
            return self._episode_num  # type: ignore[attr-defined]
        state.episode_nums[i] += 1
        return state.episode_nums[i]

    # ------------------------------------------------------------------
    # Per-seed logging
    # ------------------------------------------------------------------

    def record(
        self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None, *, seeds: np.ndarray | None = None
    ) -> None:
        """Buffer a metric. K > 1: a ``[K]`` tensor (or length-K list) is one value per seed, anything else the
        same value for every seed; each seed logs it as ``seed{i}/<key>``.

        Args:
            key: the SB3 key (``train/actor_loss``).
            value: the value(s).
            exclude: output formats to skip (K = 1).
            seeds: K > 1: the seeds (host ``[K]`` bool) whose value this is; the others keep their last one. None:
                the seeds taking the current update (all outside an update some seeds sit out).
        """
        state = self._seed_state
        if state is None:
            return super().record(key, value, exclude)  # type: ignore[misc]
        state.record_seq += 1
        k = len(state.members)
        seqs = np.full(k, state.record_seq)
        previous = state.log_buffer.get(key)
        taking = seeds if seeds is not None else state.update_seeds
        if taking is None and state.update_mask is not None:
            taking = state.update_mask.cpu().numpy()
        if taking is not None:
            # an update some seeds sat out: they keep their last value (and its sequence number, so it is not resent)
            if previous is not None:
                seqs = np.where(taking, seqs, previous[2])
                value = [self._seed_value(value if t else previous[0], i) for i, t in enumerate(taking)]
            else:
                seqs = np.where(taking, seqs, 0)
        state.log_buffer[key] = (value, self.num_timesteps, seqs)  # type: ignore[attr-defined]

    def _record_due_steps(self, key: str, values: list[th.Tensor], dues: list[np.ndarray]) -> None:
        """Record each seed's mean of per-step ``[K]`` values over the steps it took (a delayed step that seeds on
        their own update counts take at different updates); a seed that took none keeps its last value, as its
        separate run records nothing.

        Args:
            key: the SB3 key.
            values: one ``[K]`` tensor per step taken by any seed.
            dues: for each of those steps, the host ``[K]`` bool of the seeds that took it (:meth:`_due`).
        """
        taken = np.stack(dues)  # [steps, K]
        stacked = th.stack(values)
        took = th.as_tensor(taken, device=stacked.device)
        sums = th.where(took, stacked, th.zeros_like(stacked)).sum(0)
        counts = th.as_tensor(np.maximum(taken.sum(0), 1), dtype=stacked.dtype, device=stacked.device)
        self.record(key, sums / counts, seeds=taken.any(0))

    def _seed_value(self, value: Any, i: int) -> Any:
        k = self.n_seeds  # type: ignore[attr-defined]
        if isinstance(value, th.Tensor) and value.dim() > 0 and value.shape[0] == k:
            return value[i]
        if isinstance(value, (list, tuple, np.ndarray)) and len(value) == k:
            return value[i]
        return value

    def dump_seed_logs(self, i: int, metrics: dict[str, Any], console: bool = True) -> None:
        """Send seed index i's ``metrics`` and its values recorded since its last dump, as ``seed{i}/<key>``.

        Args:
            i: seed index.
            metrics: seed i's rollout/time metrics.
            console: print the dump with ``verbose >= 1`` (not for the flush at the end of a fit).
        """
        state = self._seed_state
        assert state is not None
        last = state.dumped_seq[i]
        state.dumped_seq[i] = state.record_seq
        prefix = f"seed{i}/"
        for key, (value, at, seqs) in state.log_buffer.items():
            if seqs[i] > last:
                self._log_buffer[prefix + key] = (self._seed_value(value, i), at, ())  # type: ignore[attr-defined]
        super().log_metrics({prefix + k: v for k, v in metrics.items()}, console=console)  # type: ignore[misc]

    def flush_logs(self) -> None:
        state = self._seed_state
        if state is None:
            return super().flush_logs()  # type: ignore[misc]
        for i in self.active_seeds:  # type: ignore[attr-defined]
            self.dump_seed_logs(i, {}, console=False)
        state.log_buffer = {}
        if self._log_buffer:  # type: ignore[attr-defined]
            super().log_metrics({}, console=False)  # type: ignore[misc]

    def hyperparameters_for_logging(self) -> dict[str, Any]:
        """K > 1: each member's hyperparameters as ``seed{i}/<name>`` (:class:`~lit_sb3.loggers.SeedRoutingLogger`
        gives logger i exactly those of the separate run), plus ``seeds``."""
        state = self._seed_state
        if state is None:
            return super().hyperparameters_for_logging()  # type: ignore[misc]
        params: dict[str, Any] = {"seeds": str(self.seeds), "algo": type(self).__name__}  # type: ignore[attr-defined]
        for i, member in enumerate(state.members):
            for key, value in member.hyperparameters_for_logging().items():
                params[f"seed{i}/{key}"] = value
        return params

    # ------------------------------------------------------------------
    # Archives: all K seeds in one (the stacked tensors, the seeds and their counters in data.json)
    # ------------------------------------------------------------------

    def _seed_save_data(self) -> dict[str, Any]:
        """K > 1: the seeds, each seed's episode count and the failed seeds (the archive's tensors are the stacked
        networks and optimisers, the counters the lockstep ones; ``_n_updates`` a list when seeds update alone)."""
        state = self._seed_state
        if state is None:
            return super()._seed_save_data()  # type: ignore[misc]
        return {
            "seeds": list(self.seeds),  # type: ignore[attr-defined]
            "seed_state": {
                "episode_nums": [int(n) for n in state.episode_nums],
                "failed": {str(i): reason for i, reason in self.failed.items()},  # type: ignore[attr-defined]
            },
        }

    def _restore_seeds(self, data: dict[str, Any], params: dict[str, Any], where: str) -> None:
        """Make this freshly built model the archive's K seeds (before :meth:`load` builds the stacked networks).

        Args:
            data: the archive's ``data.json``.
            params: the decoded constructor arguments (``policy``, ``seed``, ``device``, ...).
            where: the file name, for messages.
        """
        from lit_sb3.algorithms.seeds import check_seeds
        from lit_sb3.utils.serialization import BadFileError

        if "seeds" not in data:
            return
        try:
            if not isinstance(data["seeds"], list) or len(data["seeds"]) > MAX_ARCHIVE_SEEDS:
                raise ValueError(f"seeds must be a list of 2 to {MAX_ARCHIVE_SEEDS} integers")
            seeds = check_seeds(data["seeds"])
            if len(seeds) < 2 or seeds[0] != params.get("seed"):
                raise ValueError(f"seeds {seeds} do not match the stored seed {params.get('seed')!r}")
            seed_state = data["seed_state"]
            episode_nums = [int(n) for n in seed_state["episode_nums"]]
            failed = {int(i): str(reason) for i, reason in seed_state["failed"].items()}
            if len(episode_nums) != len(seeds) or any(not 0 <= i < len(seeds) for i in failed):
                raise ValueError(f"seed_state does not hold {len(seeds)} seeds")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BadFileError(f"{where}: bad seeds in data.json: {' '.join(str(exc).split())}") from None
        kwargs = {k: v for k, v in params.items() if k not in ("policy", "seed")}
        self.set_seeds(seeds, params["policy"], kwargs)
        assert self._seed_state is not None
        self._seed_state.episode_nums = episode_nums
        self.failed = failed

    # ------------------------------------------------------------------
    # Lightning checkpoints: every seed's state, for an exact resume
    # ------------------------------------------------------------------

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """K > 1: the model's checkpoint state (lockstep counters, last observations ``[K, ...]``, global RNGs,
        the replay storage with its K dimension) plus each seed's own under ``lit_sb3_seeds``."""
        from lit_sb3.algorithms.base import _to_checkpoint_safe
        from lit_sb3.core.noise import noise_to_dict
        from lit_sb3.utils.env_state import capture_vec_env_state

        super().on_save_checkpoint(checkpoint)  # type: ignore[misc]
        state = self._seed_state
        if state is None:
            return
        members = state.members
        seeds = {
            "seeds": list(self.seeds),  # type: ignore[attr-defined]
            "failed": [[int(i), reason] for i, reason in self.failed.items()],  # type: ignore[attr-defined]
            "frozen": [[int(i), list(values)] for i, values in state.frozen.items()],
            "episode_nums": [int(n) for n in state.episode_nums],
            "ep_info_buffers": [[dict(info) for info in buffer] for buffer in state.ep_info_buffers],
            "ep_success_buffers": [[bool(x) for x in buffer] for buffer in state.ep_success_buffers],
            "generators": [g.get_state() for g in state.generators or []],
            "np_rngs": [_random_state_to_safe(rng.get_state()) for rng in state.np_rngs],
            "action_spaces": [m.action_space.np_random.bit_generator.state for m in members],
            "action_noise": [
                noise_to_dict(noise) if noise is not None else None
                for noise in (getattr(m, "action_noise", None) for m in members)
            ],
            "vec_normalize": [vn.state_dict() if vn is not None else None for vn in state.normalizers],
            "env_state": [capture_vec_env_state(env) for env in state.envs],
            "seed_cycles": getattr(self, "_seed_cycles", None),
        }
        checkpoint["lit_sb3_seeds"] = _to_checkpoint_safe(seeds)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)  # type: ignore[misc]  # K, tensors and optimiser states checked
        if self._seed_state is None:
            return
        saved = checkpoint["lit_sb3_seeds"]  # a dict of K seeds: the base class's check
        if list(saved["seeds"]) != list(self.seeds):  # type: ignore[attr-defined]
            from lit_sb3.algorithms.base import _checkpoint_where
            from lit_sb3.utils.serialization import BadFileError

            raise BadFileError(
                f"{_checkpoint_where(self)}: the checkpoint holds the seeds {saved['seeds']}, this "
                f"{type(self).__name__} trains {self.seeds}: resume a model from a checkpoint of the same seeds"  # type: ignore[attr-defined]
            )
        self._pending_seed_state = saved

    def _apply_pending_rl_state(self) -> None:
        """Restore the checkpoint's lockstep state (base class), then each seed's (after the envs were reset)."""
        from lit_sb3.core.noise import noise_from_dict
        from lit_sb3.utils.env_state import restore_vec_env_state

        state, pending = self._seed_state, getattr(self, "_pending_rl_state", None)
        saved = getattr(self, "_pending_seed_state", None)
        if state is None or pending is None or saved is None:
            return super()._apply_pending_rl_state()  # type: ignore[misc]
        n_updates = pending["n_updates"]
        pending["n_updates"] = 0
        super()._apply_pending_rl_state()  # type: ignore[misc]
        self._pending_seed_state = None
        if isinstance(n_updates, th.Tensor) and n_updates.dim() > 0:
            self._n_updates = n_updates.numpy().astype(np.int64)
        else:
            self._n_updates = int(n_updates)
        self.failed = {int(i): str(reason) for i, reason in saved["failed"]}
        state.frozen = {int(i): [v.to(self.device) for v in values] for i, values in saved["frozen"]}  # type: ignore[attr-defined]
        state.episode_nums = [int(n) for n in saved["episode_nums"]]
        window = self.stats_window_size  # type: ignore[attr-defined]
        state.ep_info_buffers = [deque(buffer, maxlen=window) for buffer in saved["ep_info_buffers"]]
        state.ep_success_buffers = [deque(buffer, maxlen=window) for buffer in saved["ep_success_buffers"]]
        self.ep_info_buffer, self.ep_success_buffer = state.ep_info_buffers[0], state.ep_success_buffers[0]
        if state.generators is not None:
            for generator, rng_state in zip(state.generators, saved["generators"], strict=True):
                generator.set_state(rng_state)
        for rng, rng_state in zip(state.np_rngs, saved["np_rngs"], strict=True):
            rng.set_state(_random_state_from_safe(rng_state))
        for member, space_state, noise in zip(
            state.members, saved["action_spaces"], saved["action_noise"], strict=True
        ):
            member.action_space.np_random.bit_generator.state = space_state
            if noise is not None:
                member.action_noise = noise_from_dict(noise)  # type: ignore[attr-defined]
        for vn, vn_state in zip(state.normalizers, saved["vec_normalize"], strict=True):
            if vn is not None and vn_state is not None:
                vn.load_state_dict(vn_state)
        for env, env_state in zip(state.envs, saved["env_state"], strict=True):
            restore_vec_env_state(env, env_state)
        if saved["seed_cycles"] is not None:
            self._seed_cycles = saved["seed_cycles"].numpy().astype(np.int64)

    def predict_stacked(self, observation: Any, deterministic: bool = True) -> np.ndarray:
        """Actions ``[K, n_envs, ...]`` of all K seeds for observations ``[K, n_envs, ...]`` in one call of the
        stacked policy (no member is extracted): what ``member(i).predict(observation[i], deterministic)`` returns
        for each seed, up to float reassociation (one ``baddbmm`` for K seeds against each seed's ``addmm``). For
        policies without recurrent state or action masks (their callers check).

        Args:
            observation: the K seeds' batches of observations (a dict of such arrays for dict spaces).
            deterministic: the mode instead of a sample.
        """
        from gymnasium import spaces

        from lit_sb3.algorithms.on_policy import obs_as_tensor

        policy = self.policy  # type: ignore[attr-defined]
        if policy.training:
            policy.set_training_mode(False)
        with th.inference_mode():
            actions_t = policy._predict(obs_as_tensor(observation, self.device), deterministic=deterministic)  # type: ignore[attr-defined]
        if actions_t.dtype in (th.bfloat16, th.float16):
            actions_t = actions_t.float()
        action_space = self.action_space  # type: ignore[attr-defined]
        first = observation[next(iter(observation))] if isinstance(observation, dict) else observation
        actions = actions_t.cpu().numpy().reshape((first.shape[0], first.shape[1], *action_space.shape))
        if isinstance(action_space, spaces.Box):
            if policy.squash_output:
                actions = policy.unscale_action(actions)
            else:
                actions = np.clip(actions, action_space.low, action_space.high)
        return actions

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[Any, Any]:
        """K > 1: ``observation`` is ``[K, ...]`` (one observation or batch per seed); actions ``[K, ...]``; a
        recurrent policy's ``state`` and ``episode_start`` are one per seed (``state[i]`` as ``member(i).predict``
        takes and returns it), and the new states come back as a list of K (None for a policy without state)."""
        if self._seed_state is None:
            return super().predict(observation, state, episode_start, deterministic)  # type: ignore[misc]
        results = [
            self.member(i).predict(
                observation[i],
                None if state is None else state[i],
                None if episode_start is None else episode_start[i],
                deterministic,
            )
            for i in range(self.n_seeds)  # type: ignore[attr-defined]
        ]
        states = [result[1] for result in results]
        return np.stack([result[0] for result in results]), None if all(s is None for s in states) else states


def _random_state_to_safe(state: tuple[Any, ...]) -> list[Any]:
    """A ``RandomState.get_state()`` tuple as plain values (loads with ``torch.load(weights_only=True)``)."""
    name, key, pos, has_gauss, cached = state
    return [name, key.astype(np.int64).tolist(), int(pos), int(has_gauss), float(cached)]


def _random_state_from_safe(state: list[Any]) -> tuple[Any, ...]:
    name, key, pos, has_gauss, cached = state
    return (name, np.asarray(key, dtype=np.uint32), int(pos), int(has_gauss), float(cached))
