"""The seed dimension of a model: the per-seed state of a model that trains K > 1 seeds (:class:`SeedState`).

A model of K > 1 seeds (built by :func:`~lit_sb3.algorithms.seeds.SeedBatch`, which calls
:meth:`~lit_sb3.algorithms.base.BaseAlgorithm.set_seeds`) holds one :class:`SeedState` as ``model._seed_state``; a
single-seed model holds None and its code is SB3's. The base class and the families ask the state where K > 1
differs (``if self._seed_state is not None: ...``):

- the K *members* are ordinary single-seed models built exactly as the separate runs
  (``algorithm(policy, seed=s_i, **kwargs)``); each gets its own VecEnv (``RLEnvDataModule(train_env=[...])``) and
  its ``_setup_model`` (seeding python/numpy/torch, the action space and the env, then building the networks), so
  the initial weights are exactly the separate runs'. :meth:`SeedState.stack_members` then stacks their policies
  (:func:`~lit_sb3.policies.seed_stack.stack_module`) into the model's one policy, rebuilds the policy's
  optimisers over the stacked parameters (:func:`~lit_sb3.optim.build_optimizer`) and lets go of the members'
  copies of the weights: the stacked ones are the only copy until a member is asked for;
- per seed: envs, VecNormalize statistics, episode statistics, episode counts and logging (``seed{i}/<SB3 key>``,
  dumped when that seed's episode count hits the log interval, routed by :class:`~lit_sb3.loggers.SeedRoutingLogger`),
  random streams (:attr:`SeedState.generators`: seed i's ``torch.Generator`` starts from the global torch state its
  separate run has after building its networks), failure masking (:meth:`SeedState.freeze`, non-finite values noted
  by :meth:`SeedState.check_finite`, env data, actions);
- :meth:`SeedState.member` writes seed i's stacked weights, optimiser state and counters into member i (its own
  tensors are made on its first use; until then a member's tensors hold no weights);
- archives and checkpoints: ``save`` writes the stacked tensors plus the seeds and their counters
  (:meth:`SeedState.save_data`), ``load`` rebuilds the K seeds (:func:`seeds_from_archive`); a Lightning checkpoint
  adds each seed's random streams, envs, episode state and failures (:meth:`SeedState.checkpoint_state`), restored
  exactly when the resumed fit starts (:meth:`SeedState.apply_checkpoint`).

A family's one collection loop serves K >= 1 seeds: it steps the envs through ``model._step_envs`` (K = 1: the env's
own ``step``), counts episodes through ``model._update_seed_info`` and ``model._count_episode``, and stores into its
storage with a leading K (see ``off_policy.py``); an algorithm writes its update once with per-seed reductions
(:mod:`lit_sb3.policies.seed_stack`).

Tensor convention: at K = 1 the update's tensors are the single-seed ones (no leading dim: every network kind
runs unchanged and bitwise as before); at K > 1 they are ``[K, batch, ...]``. Update code is written to hold for
both: reductions through ``seed_mean``/``seed_mse``/..., concatenations and feature reductions on ``dim=-1``,
per-seed scalars broadcast with ``reshape(-1, 1, 1)``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th

from lit_sb3.policies.seed_stack import ParamLink, stack_module
from lit_sb3.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

__all__ = ["SeedState", "predict_stacked", "seeds_from_archive"]

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


class SeedState:
    """Everything a K-seed model keeps per seed, and what it does differently from a single seed.

    Args:
        model: the K-seed model that holds this state (as ``model._seed_state``).
        members: the K single-seed models, built as the separate runs.
    """

    def __init__(self, model: BaseAlgorithm, members: list[BaseAlgorithm]) -> None:
        k = len(members)
        self.model = model
        self.members = members
        self.envs: list[VecEnv] = []
        self.normalizers: list[VecNormalize | None] = []
        self.links: list[ParamLink] = []
        self.frozen: dict[int, list[th.Tensor]] = {}
        self.ep_info_buffers: list[deque] = []
        self.ep_success_buffers: list[deque] = []
        self.episode_nums = [0] * k
        # key -> (value: [K] tensor/list or one value for every seed, env step, per-seed record sequence numbers)
        self.log_buffer: dict[str, tuple[Any, int, np.ndarray]] = {}
        self.record_seq = 0
        self.dumped_seq = [0] * k
        self.nonfinite: dict[str, th.Tensor] = {}
        self.generators: list[th.Generator] | None = None
        # seed i's numpy stream: the global one its separate run seeds with np.random.seed(seed) (epsilon-greedy)
        self.np_rngs = [np.random.RandomState(m.seed) for m in members]
        # during an update that only some seeds take (their own schedules): [K] bool of those seeds (on the
        # model's device, and on the host: update_seeds)
        self.update_mask: th.Tensor | None = None
        self.update_seeds: np.ndarray | None = None
        self.built = False
        # the seeds whose member holds its own copy of the stacked tensors (made by member(i), on demand)
        self.made: set[int] = set()
        # a loaded Lightning checkpoint's per-seed state, applied when the resumed fit starts
        self.pending: dict[str, Any] | None = None

    # ------------------------------------------------------------------
    # Envs and networks
    # ------------------------------------------------------------------

    def attach_envs(self, env: Any) -> None:
        """Give each member its seed's env (one per seed, same spaces and sub-env counts); the model keeps the
        common spaces and no env of its own.

        Args:
            env: a list of K envs (ids, gym envs, callables or VecEnvs).
        """
        model, k = self.model, len(self.members)
        envs = list(env) if isinstance(env, (list, tuple)) else None
        if envs is None or len(envs) != k:
            got = f"{len(envs)} envs" if envs is not None else type(env).__name__
            raise ValueError(
                f"{type(model).__name__} of {k} seeds needs one env per seed (RLEnvDataModule(train_env=[...])), "
                f"got {got}."
            )
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
        member_envs = [m.env for m in self.members]
        if self.envs and any(a is not b for a, b in zip(self.envs, member_envs)):
            model._last_obs = None
        self.envs = member_envs
        self.normalizers = [unwrap_vec_normalize(e) for e in self.envs]
        model.env = None
        model._vec_normalize_env = None
        model.observation_space = first.observation_space
        model.action_space = first.action_space
        model.n_envs = first.n_envs

    def set_env(self, env: Any, force_reset: bool) -> None:
        """Attach one env per seed (their spaces must be the networks' once those exist); builds the networks
        when they do not exist yet.

        Args:
            env: a list of K envs.
            force_reset: start from a reset of the new envs.
        """
        model = self.model
        if self.built:  # the networks exist (trained or loaded): the new envs must have their spaces
            for i, seed_env in enumerate(env if isinstance(env, (list, tuple)) else []):
                spaces = (getattr(seed_env, "observation_space", None), getattr(seed_env, "action_space", None))
                if spaces[0] is not None and spaces != (model.observation_space, model.action_space):
                    raise ValueError(
                        f"the env of seed index {i} has the spaces {spaces[0]} / {spaces[1]}, the model "
                        f"{model.observation_space} / {model.action_space}."
                    )
        self.attach_envs(env)
        if not self.built:
            model._setup_model()
        if force_reset:
            model._last_obs = None

    def stack_members(self) -> None:
        """Build each member as its separate run would, keep each seed's torch random stream, then stack the
        members' policies into the model's policy and rebuild its optimisers over the stacked parameters."""
        model = self.model
        generators = []
        for member in self.members:
            if getattr(member, "observation_space", None) is None:  # loaded from an archive without envs
                member.observation_space, member.action_space = model.observation_space, model.action_space
                member.n_envs = model.n_envs
            if not member.policy_ready:
                model._setup_member(member)
            # the global torch state the separate run has now: the start of seed i's own stream
            generator = th.Generator(device="cpu")
            generator.set_state(th.random.get_rng_state())
            generators.append(generator)
        device = model.device
        if device.type != "cpu":  # a device stream per seed (equal in distribution to the separate runs')
            generators = [th.Generator(device=device) for _ in self.members]
            for generator, seed in zip(generators, model.seeds):
                generator.manual_seed(int(seed))  # type: ignore[arg-type]
        self.generators = generators
        policies = [m.policy for m in self.members]
        stacked, self.links = stack_module(policies)
        model.policy = stacked.to(device)
        self._restack_optimizers(policies[0], model.policy, model._seeds_sit_out())
        for module in model.policy.modules():  # every action distribution draws from the seeds' streams
            distribution = getattr(module, "action_dist", None)
            if distribution is not None and hasattr(distribution, "seed_generators"):
                distribution.seed_generators = generators
        for link in self.links:  # one copy of the weights lives, the stacked one: member(i) makes seed i's own
            for tensor in link.member_tensors:
                tensor.data = tensor.new_zeros(()).expand(tensor.shape)
        self.built = True

    def _restack_optimizers(self, single: th.nn.Module, stacked: th.nn.Module, seeds_sit_out: bool) -> None:
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
                type(optimizer), groups, optimizer.defaults["lr"], defaults, len(self.members), seeds_sit_out
            )

    # ------------------------------------------------------------------
    # Members
    # ------------------------------------------------------------------

    def member(self, i: int, optimizers: bool = True) -> BaseAlgorithm:
        """Member i with seed i's current weights, counters and other per-seed state written into it.

        Args:
            i: seed index (checked by the caller).
            optimizers: write seed i's optimiser state too (inference needs none).
        """
        model = self.model
        if not self.built:
            raise RuntimeError("the model has no networks yet: train it (fit) or attach envs (set_env) first.")
        member = self.members[i]
        if i not in self.made:  # seed i's own tensors, made on its first use
            for link in self.links:
                target = link.member_tensors[i]
                target.data = th.empty(target.shape, dtype=target.dtype, device=target.device)
            self.made.add(i)
        for link in self.links:
            link.write_member(i)
        if optimizers:
            self._write_member_optimizers(i, member)
        model._sync_member_state(i, member)
        member.num_timesteps = model.num_timesteps
        member._total_timesteps = model._total_timesteps
        member._episode_num = self.episode_nums[i]
        n_updates = model._n_updates
        member._n_updates = int(n_updates[i]) if isinstance(n_updates, np.ndarray) else n_updates
        member._current_progress_remaining = model._current_progress_remaining
        return member

    def _write_member_optimizers(self, i: int, member: BaseAlgorithm) -> None:
        """Copy seed i's slices of the optimiser states (Adam moments and step) into member i's optimisers."""
        links = {id(link.stacked): link for link in self.links}
        owners = {
            id(q): opt for opt in member._optimizers_to_save().values() for g in opt.param_groups for q in g["params"]
        }
        for optimizer in self.model._optimizers_to_save().values():
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

    def live_part(self, param: th.Tensor, value: th.Tensor, dead: set[int]) -> th.Tensor | None:
        """The rows of ``value`` (shaped like the stacked ``param``) of the seeds not in ``dead``, in the layout
        :meth:`ParamLink.seed_slice` reads (the leading dimension in K blocks); None when ``param`` is not stacked.

        Args:
            param: a parameter of the model.
            value: a tensor shaped like it (an optimiser moment).
            dead: the failed seed indices (not empty).
        """
        if not any(link.stacked is param for link in self.links):
            return None
        k = len(self.members)
        return value.detach().reshape(k, -1)[[i for i in range(k) if i not in dead]]

    # ------------------------------------------------------------------
    # Failure masking
    # ------------------------------------------------------------------

    def freeze(self, i: int) -> None:
        """Keep seed index i's current stacked values (a seed just failed): :meth:`restore_failed` puts them back
        after every optimiser step."""
        if self.built:
            self.frozen[int(i)] = [link.stacked.detach().clone() for link in self.links]

    def restore_failed(self) -> None:
        """Undo any optimiser movement of the masked seeds (Adam moves a parameter even with a zero gradient)."""
        if not self.frozen:
            return
        k = len(self.members)
        with th.no_grad():
            for i, frozen in self.frozen.items():
                for link, value in zip(self.links, frozen):
                    link.stacked.view(k, -1)[i].copy_(value.view(k, -1)[i])

    def check_finite(self, name: str, per_seed: th.Tensor) -> None:
        """Note the seeds whose values (``[steps, K]`` or ``[K]``) are not all finite; they are masked at the next
        :meth:`apply_finite_checks` (one device sync per ``training_step``, not per update).

        Args:
            name: what the values are (``"critic loss"``), for the failure reason.
            per_seed: the values, seed last.
        """
        bad = ~th.isfinite(per_seed.detach().reshape(-1, len(self.members))).all(0)
        previous = self.nonfinite.get(name)
        self.nonfinite[name] = bad if previous is None else previous | bad

    def apply_finite_checks(self) -> None:
        """Mask the seeds noted by :meth:`check_finite` (reason: ``diverged: non-finite <name> at step N``)."""
        if not self.nonfinite:
            return
        model = self.model
        names = list(self.nonfinite)
        flags = th.stack([self.nonfinite[name] for name in names]).cpu().tolist()
        self.nonfinite = {}
        for name, row in zip(names, flags):
            for i, bad in enumerate(row):
                if bad and i not in model.failed:
                    model.fail_seed(i, f"diverged: non-finite {name} at step {model.num_timesteps}")

    # ------------------------------------------------------------------
    # Fit set-up and per-seed episodes
    # ------------------------------------------------------------------

    def reset_episodes(self, reset_num_timesteps: bool) -> None:
        """At the start of a fit: each seed's episode buffers and counts (reset, or kept when training continues),
        the first observations ``[K, n_envs, ...]`` and, for the seeds masked before the networks trained (a
        pruner, a guard), their values kept from now on.

        Args:
            reset_num_timesteps: the fit starts afresh (False: it continues the last one).
        """
        model, k = self.model, len(self.members)
        for i in model.failed:
            self.frozen.setdefault(i, [link.stacked.detach().clone() for link in self.links])
        window = model.stats_window_size
        if not self.ep_info_buffers or reset_num_timesteps:
            self.ep_info_buffers = [deque(maxlen=window) for _ in range(k)]
            self.ep_success_buffers = [deque(maxlen=window) for _ in range(k)]
        model.ep_info_buffer, model.ep_success_buffer = self.ep_info_buffers[0], self.ep_success_buffers[0]
        if reset_num_timesteps:
            self.episode_nums = [0] * k
        if reset_num_timesteps or model._last_obs is None:
            observations = [env.reset() for env in self.envs]
            if isinstance(observations[0], dict):  # Dict observations: one [K, n_envs, ...] array per key
                if any(vn is not None for vn in self.normalizers):
                    raise NotImplementedError(
                        "K > 1 seeds with Dict observations and VecNormalize are not batched yet (K = 1 works)."
                    )
                model._last_obs = {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}
            else:
                model._last_obs = np.stack(observations)
            model._last_episode_starts = np.ones((k, model.n_envs), dtype=bool)
            if any(vn is not None for vn in self.normalizers):
                model._last_original_obs = np.stack(
                    [vn.get_original_obs() if vn is not None else o for vn, o in zip(self.normalizers, model._last_obs)]
                )
            else:
                model._last_original_obs = None

    def step_envs(self, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, list[Any]]:
        """One env step of every live seed, each seed's VecEnv with ``actions[i]``: observations
        ``[K, n_envs, ...]``, rewards and dones ``[K, n_envs]`` and each seed's infos. A seed whose env raises, or
        returns a non-finite reward or observation, is failed and its step undone (it keeps its last observation;
        its env steps no more).

        Args:
            actions: the actions sent to the envs, ``[K, n_envs, ...]``.
        """
        model = self.model
        last_obs = model._last_obs
        assert last_obs is not None
        k, n_envs, at = len(self.members), model.n_envs, model.num_timesteps + model.n_envs
        new_obs = _copy_obs(last_obs)
        rewards = np.zeros((k, n_envs), dtype=np.float32)
        dones = np.zeros((k, n_envs), dtype=bool)
        infos: list[list[dict[str, Any]]] = [[{} for _ in range(n_envs)] for _ in range(k)]
        live = model.active_seeds
        for i in live:
            step = model._step_seed_env(i, self.envs[i], actions[i], at)
            if step is None:  # the env raised: seed i failed alone and keeps its last observation
                continue
            obs_i, rewards[i], dones[i], infos[i] = step
            _set_obs(new_obs, i, obs_i)
        if not (np.isfinite(rewards).all() and _all_finite(new_obs)):  # one check for all seeds
            for i in live:
                bad_reward = not np.isfinite(rewards[i]).all()
                if bad_reward or not _all_finite(new_obs, i):
                    what = "reward" if bad_reward else "observation"
                    model.fail_seed(i, f"diverged: non-finite {what} from the env at step {at}")
                    _set_obs(new_obs, i, _obs_at(last_obs, i))
                    rewards[i], dones[i] = 0.0, False
                    infos[i] = [{} for _ in range(n_envs)]
        return new_obs, rewards, dones, infos

    def update_info(self, infos: list[Any], dones: np.ndarray) -> None:
        """Each live seed's episode statistics of this step.

        Args:
            infos: one list of infos per seed.
            dones: ``[K, n_envs]``.
        """
        for i in self.model.active_seeds:
            for idx, info in enumerate(infos[i]):
                episode = info.get("episode")
                if episode is not None:
                    self.ep_info_buffers[i].append(episode)
                success = info.get("is_success")
                if success is not None and dones[i][idx]:
                    self.ep_success_buffers[i].append(success)

    # ------------------------------------------------------------------
    # Per-seed logging
    # ------------------------------------------------------------------

    def record(self, key: str, value: Any, seeds: np.ndarray | None) -> None:
        """Buffer a metric: a ``[K]`` tensor (or length-K list) is one value per seed, anything else the same value
        for every seed; each seed logs it as ``seed{i}/<key>``.

        Args:
            key: the SB3 key.
            value: the value(s).
            seeds: the seeds (host ``[K]`` bool) whose value this is; the others keep their last one. None: the
                seeds taking the current update (all outside an update some seeds sit out).
        """
        self.record_seq += 1
        seqs = np.full(len(self.members), self.record_seq)
        previous = self.log_buffer.get(key)
        taking = seeds if seeds is not None else self.update_seeds
        if taking is None and self.update_mask is not None:
            taking = self.update_mask.cpu().numpy()
        if taking is not None:
            # an update some seeds sat out: they keep their last value (and its sequence number, so it is not resent)
            if previous is not None:
                seqs = np.where(taking, seqs, previous[2])
                value = [self._seed_value(value if t else previous[0], i) for i, t in enumerate(taking)]
            else:
                seqs = np.where(taking, seqs, 0)
        self.log_buffer[key] = (value, self.model.num_timesteps, seqs)

    def record_due_steps(self, key: str, values: list[th.Tensor], dues: list[np.ndarray]) -> None:
        """Record each seed's mean of per-step ``[K]`` values over the steps it took (a delayed step that seeds on
        their own update counts take at different updates); a seed that took none keeps its last value, as its
        separate run records nothing.

        Args:
            key: the SB3 key.
            values: one ``[K]`` tensor per step taken by any seed.
            dues: for each of those steps, the host ``[K]`` bool of the seeds that took it.
        """
        taken = np.stack(dues)  # [steps, K]
        stacked = th.stack(values)
        took = th.as_tensor(taken, device=stacked.device)
        sums = th.where(took, stacked, th.zeros_like(stacked)).sum(0)
        counts = th.as_tensor(np.maximum(taken.sum(0), 1), dtype=stacked.dtype, device=stacked.device)
        self.record(key, sums / counts, seeds=taken.any(0))

    def _seed_value(self, value: Any, i: int) -> Any:
        k = len(self.members)
        if isinstance(value, th.Tensor) and value.dim() > 0 and value.shape[0] == k:
            return value[i]
        if isinstance(value, (list, tuple, np.ndarray)) and len(value) == k:
            return value[i]
        return value

    def dump_logs(self, i: int, metrics: dict[str, Any], console: bool = True) -> None:
        """Send seed index i's ``metrics`` and its values recorded since its last dump, as ``seed{i}/<key>``.

        Args:
            i: seed index.
            metrics: seed i's rollout/time metrics.
            console: print the dump with ``verbose >= 1`` (not for the flush at the end of a fit).
        """
        model = self.model
        last = self.dumped_seq[i]
        self.dumped_seq[i] = self.record_seq
        prefix = f"seed{i}/"
        for key, (value, at, seqs) in self.log_buffer.items():
            if seqs[i] > last:
                model._log_buffer[prefix + key] = (self._seed_value(value, i), at, ())
        model.log_metrics({prefix + k: v for k, v in metrics.items()}, console=console)

    def flush_logs(self) -> None:
        """Send every live seed's values recorded since its last dump, and whatever else is buffered."""
        model = self.model
        for i in model.active_seeds:
            self.dump_logs(i, {}, console=False)
        self.log_buffer = {}
        if model._log_buffer:
            model.log_metrics({}, console=False)

    def hyperparameters(self) -> dict[str, Any]:
        """Each member's hyperparameters as ``seed{i}/<name>`` (:class:`~lit_sb3.loggers.SeedRoutingLogger` gives
        logger i exactly those of the separate run), plus ``seeds``."""
        params: dict[str, Any] = {"seeds": str(self.model.seeds), "algo": type(self.model).__name__}
        for i, member in enumerate(self.members):
            for key, value in member.hyperparameters_for_logging().items():
                params[f"seed{i}/{key}"] = value
        return params

    # ------------------------------------------------------------------
    # Archives and Lightning checkpoints
    # ------------------------------------------------------------------

    def save_data(self) -> dict[str, Any]:
        """The seeds, each seed's episode count and the failed seeds (the archive's tensors are the stacked
        networks and optimisers, the counters the lockstep ones; ``_n_updates`` a list when seeds update alone)."""
        return {
            "seeds": list(self.model.seeds),
            "seed_state": {
                "episode_nums": [int(n) for n in self.episode_nums],
                "failed": {str(i): reason for i, reason in self.model.failed.items()},
            },
        }

    def checkpoint_state(self) -> dict[str, Any]:
        """Each seed's state for a Lightning checkpoint (``lit_sb3_seeds``): failures, episode state, random
        streams, exploration noise, VecNormalize statistics and envs."""
        from lit_sb3.algorithms.base import _to_checkpoint_safe
        from lit_sb3.core.noise import noise_to_dict
        from lit_sb3.utils.env_state import capture_vec_env_state

        model, members = self.model, self.members
        seeds = {
            "seeds": list(model.seeds),
            "failed": [[int(i), reason] for i, reason in model.failed.items()],
            "frozen": [[int(i), list(values)] for i, values in self.frozen.items()],
            "episode_nums": [int(n) for n in self.episode_nums],
            "ep_info_buffers": [[dict(info) for info in buffer] for buffer in self.ep_info_buffers],
            "ep_success_buffers": [[bool(x) for x in buffer] for buffer in self.ep_success_buffers],
            "generators": [g.get_state() for g in self.generators or []],
            "np_rngs": [_random_state_to_safe(rng.get_state()) for rng in self.np_rngs],
            "action_spaces": [m.action_space.np_random.bit_generator.state for m in members],
            "action_noise": [
                noise_to_dict(noise) if noise is not None else None
                for noise in (getattr(m, "action_noise", None) for m in members)
            ],
            "vec_normalize": [vn.state_dict() if vn is not None else None for vn in self.normalizers],
            "env_state": [capture_vec_env_state(env) for env in self.envs],
            "seed_cycles": getattr(model, "_seed_cycles", None),
        }
        return _to_checkpoint_safe(seeds)

    def load_checkpoint(self, checkpoint: dict[str, Any], where: str) -> None:
        """Keep the checkpoint's per-seed state for :meth:`apply_checkpoint` (the base class checked K, tensors and
        optimiser states); its seeds must be the model's.

        Args:
            checkpoint: the loaded Lightning checkpoint.
            where: the file, for messages.
        """
        from lit_sb3.utils.serialization import BadFileError

        model = self.model
        saved = checkpoint["lit_sb3_seeds"]  # a dict of K seeds: the base class's check
        if list(saved["seeds"]) != list(model.seeds):
            raise BadFileError(
                f"{where}: the checkpoint holds the seeds {saved['seeds']}, this {type(model).__name__} trains "
                f"{model.seeds}: resume a model from a checkpoint of the same seeds"
            )
        self.pending = saved

    def apply_checkpoint(self) -> None:
        """Restore each seed's checkpointed state (after the envs were reset and the model's own state restored)."""
        from lit_sb3.core.noise import noise_from_dict
        from lit_sb3.utils.env_state import restore_vec_env_state

        saved, model = self.pending, self.model
        if saved is None:
            return
        self.pending = None
        model.failed = {int(i): str(reason) for i, reason in saved["failed"]}
        self.frozen = {int(i): [v.to(model.device) for v in values] for i, values in saved["frozen"]}
        self.episode_nums = [int(n) for n in saved["episode_nums"]]
        window = model.stats_window_size
        self.ep_info_buffers = [deque(buffer, maxlen=window) for buffer in saved["ep_info_buffers"]]
        self.ep_success_buffers = [deque(buffer, maxlen=window) for buffer in saved["ep_success_buffers"]]
        model.ep_info_buffer, model.ep_success_buffer = self.ep_info_buffers[0], self.ep_success_buffers[0]
        if self.generators is not None:
            for generator, rng_state in zip(self.generators, saved["generators"], strict=True):
                generator.set_state(rng_state)
        for rng, rng_state in zip(self.np_rngs, saved["np_rngs"], strict=True):
            rng.set_state(_random_state_from_safe(rng_state))
        for member, space_state, noise in zip(self.members, saved["action_spaces"], saved["action_noise"], strict=True):
            member.action_space.np_random.bit_generator.state = space_state
            if noise is not None:
                member.action_noise = noise_from_dict(noise)
        for vn, vn_state in zip(self.normalizers, saved["vec_normalize"], strict=True):
            if vn is not None and vn_state is not None:
                vn.load_state_dict(vn_state)
        for env, env_state in zip(self.envs, saved["env_state"], strict=True):
            restore_vec_env_state(env, env_state)
        if saved["seed_cycles"] is not None:
            model._seed_cycles = saved["seed_cycles"].numpy().astype(np.int64)

    # ------------------------------------------------------------------
    # Inference
    # ------------------------------------------------------------------

    def predict(
        self, observation: Any, state: Any, episode_start: np.ndarray | None, deterministic: bool
    ) -> tuple[Any, Any]:
        """``observation`` is ``[K, ...]`` (one observation or batch per seed); actions ``[K, ...]``; a recurrent
        policy's ``state`` and ``episode_start`` are one per seed (``state[i]`` as ``member(i).predict`` takes and
        returns it), and the new states come back as a list of K (None for a policy without state). Each member
        gets its seed's weights, not its optimiser state."""
        results = [
            self.member(i, optimizers=False).predict(
                observation[i],
                None if state is None else state[i],
                None if episode_start is None else episode_start[i],
                deterministic,
            )
            for i in range(len(self.members))
        ]
        states = [result[1] for result in results]
        return np.stack([result[0] for result in results]), None if all(s is None for s in states) else states


def seeds_from_archive(data: dict[str, Any], params: dict[str, Any], where: str) -> tuple[list[int], list[int], dict]:
    """The seeds an archive's ``data.json`` declares, checked: the seeds, each seed's episode count and the failed
    seeds (a one-line :class:`BadFileError` naming the file otherwise).

    Args:
        data: the archive's ``data.json`` (with ``seeds``).
        params: the decoded constructor arguments (``seed`` must be the first seed).
        where: the file name, for messages.
    """
    from lit_sb3.algorithms.seeds import check_seeds
    from lit_sb3.utils.serialization import BadFileError

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
    return seeds, episode_nums, failed


def predict_stacked(model: BaseAlgorithm, observation: Any, deterministic: bool = True) -> np.ndarray:
    """Actions ``[K, n_envs, ...]`` of all K seeds of ``model`` for observations ``[K, n_envs, ...]`` in one call of
    the stacked policy (no member is extracted): what ``member(i).predict(observation[i], deterministic)`` returns
    for each seed, up to float reassociation (one ``baddbmm`` for K seeds against each seed's ``addmm``). For
    policies without recurrent state or action masks (their callers check).

    Args:
        model: the K-seed model.
        observation: the K seeds' batches of observations (a dict of such arrays for dict spaces).
        deterministic: the mode instead of a sample.
    """
    from gymnasium import spaces

    from lit_sb3.algorithms.on_policy import obs_as_tensor

    policy = model.policy
    if policy.training:
        policy.set_training_mode(False)
    with th.inference_mode():
        actions_t = policy._predict(obs_as_tensor(observation, model.device), deterministic=deterministic)
    if actions_t.dtype in (th.bfloat16, th.float16):
        actions_t = actions_t.float()
    action_space = model.action_space
    first = observation[next(iter(observation))] if isinstance(observation, dict) else observation
    actions = actions_t.cpu().numpy().reshape((first.shape[0], first.shape[1], *action_space.shape))
    if isinstance(action_space, spaces.Box):
        if policy.squash_output:
            actions = policy.unscale_action(actions)
        else:
            actions = np.clip(actions, action_space.low, action_space.high)
    return actions


def _random_state_to_safe(state: tuple[Any, ...]) -> list[Any]:
    """A ``RandomState.get_state()`` tuple as plain values (loads with ``torch.load(weights_only=True)``)."""
    name, key, pos, has_gauss, cached = state
    return [name, key.astype(np.int64).tolist(), int(pos), int(has_gauss), float(cached)]


def _random_state_from_safe(state: list[Any]) -> tuple[Any, ...]:
    name, key, pos, has_gauss, cached = state
    return (name, np.asarray(key, dtype=np.uint32), int(pos), int(has_gauss), float(cached))
