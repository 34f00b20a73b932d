"""Jobs of a ``bench run`` grid: plain, JSON-serialisable descriptions with a stable id, and the planner.

A :class:`JobSpec` says everything a worker needs to train one (algo, env, seed) run: the resolved
hyperparameters, the env-step budget, the evaluation protocol, the device and the number of torch threads.
Its ``job_id`` is the first 16 hex digits of the sha256 of the canonical JSON of those fields, so the same
command line (with the same configs) gives the same ids: that is how a re-run finds what already finished.

``JobSpec.config`` stores the :class:`~lit_sb3.zoo.config.ResolvedConfig` losslessly (classes as
``{"__class__": path}``, schedules as ``{"__schedule__": {...}}``, tuples as ``{"__tuple__": [...]}``) so the
worker rebuilds the exact objects with :meth:`JobSpec.resolved_config`; only whitelisted classes (those a
config may name) are accepted back, nothing is evaluated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from lit_sb3.zoo.errors import BenchError

if TYPE_CHECKING:
    from lit_sb3.zoo.config import ResolvedConfig
    from lit_sb3.zoo.plan_cache import PlanCache

__all__ = [
    "JobSpec",
    "SkippedPair",
    "plan_grid",
    "seed_batches",
    "default_eval_protocol",
    "eval_protocol_line",
    "encode_value",
    "decode_value",
]

#: evaluations per run when ``--eval-freq`` is not given (plus the final one)
DEFAULT_EVALUATIONS = 20
DEFAULT_EVAL_EPISODES = 10
#: the implementation of a job unless told otherwise (``bench run --impl``)
DEFAULT_IMPL = "lit_sb3"
IMPLS = ("lit_sb3", "sb3")
#: the evaluation env of a job is seeded with ``seed + DEFAULT_EVAL_SEED_OFFSET`` unless told otherwise
DEFAULT_EVAL_SEED_OFFSET = 10_000

_CONFIG_FIELDS = (
    "policy", "n_envs", "normalize", "normalize_kwargs", "env_wrapper", "vec_env_wrapper", "frame_stack",
    "callback", "env_kwargs", "eval_env_kwargs", "monitor_kwargs", "algo_kwargs",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# lossless JSON form of resolved values
# ---------------------------------------------------------------------------------------------------------
def encode_value(value: Any) -> Any:
    """JSON form of a resolved config value: the library's one codec (:mod:`lit_sb3.utils.serialization`), the
    same form model archives use, so job ids made before the codecs were merged are unchanged.

    Args:
        value: a value of a :class:`~lit_sb3.zoo.config.ResolvedConfig` field.
    """
    from lit_sb3.utils.serialization import encode_value as encode

    try:
        return encode(value)
    except TypeError as exc:
        raise BenchError(f"cannot describe the hyperparameter value {value!r} as JSON: {exc}") from None


def decode_value(data: Any) -> Any:
    """Inverse of :func:`encode_value` (classes only from the one whitelist).

    Args:
        data: JSON data made by :func:`encode_value`.
    """
    from lit_sb3.utils.serialization import decode_value as decode

    try:
        return decode(data)
    except (ValueError, TypeError) as exc:
        raise BenchError(f"job description: {' '.join(str(exc).split())}") from None


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# ---------------------------------------------------------------------------------------------------------
# job description
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """One training run of a grid, as plain data.

    Args:
        algo: algorithm name (``ppo``, ``sac``, ...).
        env_id: gymnasium env id (``"module:Env-v0"`` ids allowed).
        seed: random seed of the run.
        n_timesteps: env-step budget.
        config: the resolved hyperparameters in lossless JSON form (see :func:`encode_value`).
        eval_freq: evaluate every ``eval_freq`` total env steps (over all sub-envs).
        eval_episodes: deterministic episodes per evaluation.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        torch_threads: ``torch.set_num_threads`` in the worker.
        config_hash: ``ResolvedConfig.config_hash()``.
        log_interval: SB3's ``log_interval`` (iterations on-policy, episodes off-policy) between two dumps of
            the logged scalars; None: :func:`lit_sb3.zoo.runner.log_interval` picks it. Not part of the job id:
            it changes what is recorded, not the training.
        record_final: record the final evaluation's episodes as an mp4 artifact (``videos/``); not part of the
            job id either.
        requested_timesteps: the budget asked for (``--n-timesteps``, the config's or the suite's) before
            :func:`lit_sb3.zoo.budget.exact_budget` rounded it to ``n_timesteps``; not part of the job id.
        impl: the implementation that trains it: ``"lit_sb3"`` (this library) or ``"sb3"`` (SB3/sb3-contrib
            through rl_zoo3's ``train``, :mod:`lit_sb3.zoo.reference`); part of the job id when not lit_sb3.
        eval_seed_offset: the evaluation env is seeded with ``seed + eval_seed_offset`` (the RL Zoo seeds it with
            the run's seed: 0); part of the job id when not the default.
        zoo_entry: ``impl="sb3"``: the zoo-format entry (raw YAML values, layers merged as :func:`resolve` merges
            them) that rl_zoo3 reads; derived from the same files as ``config``, so not part of the job id.
    """

    algo: str
    env_id: str
    seed: int
    n_timesteps: int
    config: dict[str, Any]
    eval_freq: int
    eval_episodes: int = DEFAULT_EVAL_EPISODES
    device: str = "cpu"
    torch_threads: int = 1
    config_hash: str = field(default="", compare=False)
    log_interval: int | None = field(default=None, compare=False)
    record_final: bool = field(default=False, compare=False)
    requested_timesteps: int | None = field(default=None, compare=False)
    impl: str = DEFAULT_IMPL
    eval_seed_offset: int = DEFAULT_EVAL_SEED_OFFSET
    zoo_entry: dict[str, Any] | None = field(default=None, compare=False)

    def identity(self) -> dict[str, Any]:
        """The fields the job id is computed from (``impl`` and ``eval_seed_offset`` only when they differ from
        their defaults, so the ids of earlier grids are unchanged)."""
        extra: dict[str, Any] = {}
        if self.impl != DEFAULT_IMPL:
            extra["impl"] = self.impl
        if self.eval_seed_offset != DEFAULT_EVAL_SEED_OFFSET:
            extra["eval_seed_offset"] = self.eval_seed_offset
        return {
            **extra,
            "algo": self.algo,
            "env_id": self.env_id,
            "seed": self.seed,
            "n_timesteps": self.n_timesteps,
            "config": self.config,
            "eval_freq": self.eval_freq,
            "eval_episodes": self.eval_episodes,
            "device": self.device,
            "torch_threads": self.torch_threads,
        }

    @property
    def job_id(self) -> str:
        """Stable id: 16 hex digits of the sha256 of the canonical JSON of :meth:`identity`."""
        return hashlib.sha256(_canonical(self.identity()).encode("utf-8")).hexdigest()[:16]

    @property
    def params(self) -> dict[str, Any]:
        """The resolved hyperparameters in display form (``ResolvedConfig.to_jsonable()``, for MLflow), derived
        from :attr:`config`: the job carries its config in one form only."""
        return self.resolved_config().to_jsonable()

    @property
    def name(self) -> str:
        """Short display name, e.g. ``ppo/CartPole-v1/s0`` (``sb3:ppo/CartPole-v1/s0`` for the reference side)."""
        prefix = "" if self.impl == DEFAULT_IMPL else f"{self.impl}:"
        return f"{prefix}{self.algo}/{self.env_id}/s{self.seed}"

    def to_json(self) -> str:
        """The job as a JSON string (:meth:`from_json` reads it back)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        """Rebuild a job from :meth:`to_json`.

        Args:
            text: the JSON string.
        """
        data = json.loads(text)
        data.pop("params", None)  # written by versions that carried a display copy of the config
        return cls(**data)

    def with_seed(self, seed: int) -> JobSpec:
        """This job with another seed (its id is that seed's job's): how ``--until-verdict`` makes a wave's jobs
        from each pair's planned job when the wave starts.

        Args:
            seed: the seed.
        """
        import dataclasses

        return dataclasses.replace(self, seed=int(seed))

    def with_render_mode(self, render_mode: str) -> JobSpec:
        """This job with ``render_mode`` added to its env kwargs (train and eval), e.g. ``"rgb_array"`` for videos:
        for building envs only (its ``job_id`` differs from this job's).

        Args:
            render_mode: gymnasium render mode.
        """
        import dataclasses

        config = dict(self.config)
        for key in ("env_kwargs", "eval_env_kwargs"):
            kwargs = decode_value(config.get(key))
            if kwargs is not None or key == "env_kwargs":
                config[key] = encode_value({**(kwargs or {}), "render_mode": render_mode})
        return dataclasses.replace(self, config=config)

    def resolved_config(self) -> ResolvedConfig:
        """The :class:`~lit_sb3.zoo.config.ResolvedConfig` with real objects (classes, schedules)."""
        from lit_sb3.zoo.config import ResolvedConfig

        values = {k: decode_value(v) for k, v in self.config.items()}
        for key in ("env_wrapper", "vec_env_wrapper", "callback"):
            values[key] = [(str(name), dict(kwargs)) for name, kwargs in values.get(key) or []]
        return ResolvedConfig(algo=self.algo, env_id=self.env_id, n_timesteps=self.n_timesteps, **values)


@dataclass(frozen=True)
class SkippedPair:
    """An (algo, env) pair that cannot run, and why.

    Args:
        algo: algorithm name.
        env_id: env id.
        reason: one line.
    """

    algo: str
    env_id: str
    reason: str


EVAL_COST_FRACTION = 0.25
"""The default protocol's evaluation env steps are at most this fraction of the training budget."""


def eval_protocol_line(algo: str, env_id: str, budget: int, eval_freq: int, episodes: int,
                       max_episode_steps: int | None) -> str:  # fmt: skip
    """One line stating a pair's evaluation protocol and its worst-case cost against the budget.

    Args:
        algo: algorithm name.
        env_id: env id.
        budget: the training budget.
        eval_freq: env steps between evaluations.
        episodes: episodes per evaluation.
        max_episode_steps: the env's time limit (None: unknown).
    """
    n_evals = max(1, budget // eval_freq)
    cost = ""
    if max_episode_steps:
        worst = n_evals * episodes * max_episode_steps
        cost = f", at most {worst:,} env steps ({100.0 * worst / budget:.0f} % of the {budget:,}-step budget)"
    return (f"evaluation: {algo} on {env_id}: every {eval_freq:,} env steps ({n_evals} evaluations) x {episodes} "
            f"episode{'s' if episodes != 1 else ''}{cost}; --eval-freq/--eval-episodes override")  # fmt: skip


def default_eval_protocol(n_timesteps: int, max_episode_steps: int | None) -> tuple[int, int]:
    """``(eval_freq, eval_episodes)`` of the default protocol: :data:`DEFAULT_EVALUATIONS` evaluations of
    :data:`DEFAULT_EVAL_EPISODES` episodes, scaled down when their worst case (every episode as long as the env's
    time limit) would cost more than :data:`EVAL_COST_FRACTION` of the budget: episodes first (down to 5), then
    evaluations (down to 5), then episodes again (down to 1). Measured before: 60,311 env steps of evaluation for
    a 20,224-step PPO CartPole run (20 x 10 episodes of up to 500 steps); now 5 x 2.

    Args:
        n_timesteps: the budget.
        max_episode_steps: the env's time limit (None: unknown; the unscaled default).
    """
    evaluations, episodes = DEFAULT_EVALUATIONS, DEFAULT_EVAL_EPISODES
    if max_episode_steps:
        allowed = int(n_timesteps * EVAL_COST_FRACTION) // int(max_episode_steps)  # episodes in the worst case
        if evaluations * episodes > allowed:
            episodes = min(DEFAULT_EVAL_EPISODES, max(5, allowed // DEFAULT_EVALUATIONS))
            evaluations = min(DEFAULT_EVALUATIONS, max(5, allowed // episodes))
            if evaluations * episodes > allowed:
                episodes = max(1, allowed // evaluations)
    return max(1, n_timesteps // evaluations), episodes


def _max_episode_steps(env_id: str) -> int | None:
    """The registered time limit of ``env_id`` (None: none, or not registered)."""
    import gymnasium as gym

    spec = gym.registry.get(env_id.rpartition(":")[2])
    return int(spec.max_episode_steps) if spec is not None and spec.max_episode_steps else None


def _plan_pair(algo: str, env_id: str, n_timesteps: int | None, config_files: Sequence[str],
               overrides: Mapping[str, str] | None, default_budget: int | None,
               overrides_label: str = "--hyperparams", builtin: bool = True) -> dict[str, Any]:  # fmt: skip
    """The outcome of planning one pair: ``{"skip": reason}`` or its encoded config, config hash, budget and
    budget note (the form :class:`~lit_sb3.zoo.plan_cache.PlanCache` records). ``builtin=False`` reads only
    ``config_files`` (an imported RL Zoo run's own ``config.yml``)."""
    from lit_sb3.zoo.budget import exact_budget, rollout_size
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.config.env_fit import check_config_on_env
    from lit_sb3.zoo.registry import check_pair

    reason = check_pair(algo, env_id)
    if reason is not None:
        return {"skip": reason}
    cfg = resolve(algo, env_id, config_files=config_files, overrides=overrides, overrides_label=overrides_label,
                  builtin=builtin)  # fmt: skip
    check_config_on_env(cfg)  # env_kwargs, wrappers and policy against the env itself, before any job
    # a suite's budget beats the n_timesteps of a zoo file's `default` entry (the zoo's 1e6 for any env)
    from_default = cfg.provenance.get("n_timesteps", "").endswith(":default")
    budget = n_timesteps or (None if from_default else cfg.n_timesteps) or default_budget or cfg.n_timesteps
    if not budget:
        raise BenchError(f"no budget for {algo} on {env_id}: the configs set no n_timesteps; give --n-timesteps")
    rollout = rollout_size(algo, cfg.algo_kwargs, cfg.n_envs)
    n_steps = int(cfg.algo_kwargs.get("n_steps", 0) or 0) if rollout else 0
    requested = int(budget)
    budget, note = exact_budget(algo, env_id, requested, rollout, n_steps or (rollout or 0) // cfg.n_envs)
    config = {name: encode_value(getattr(cfg, name)) for name in _CONFIG_FIELDS}
    return {"config": config, "config_hash": cfg.config_hash(), "budget": int(budget), "note": note,
            "requested": requested}  # fmt: skip


def plan_grid(
    algos: Sequence[str],
    envs: Sequence[str],
    seeds: Iterable[int],
    n_timesteps: int | None = None,
    eval_freq: int | None = None,
    eval_episodes: int | None = None,
    config_files: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    device: str = "cpu",
    *,
    torch_threads: int = 1,
    default_budgets: Mapping[str, int] | None = None,
    log_interval: int | None = None,
    notes: list[str] | None = None,
    cache: PlanCache | None = None,
    overrides_label: str = "--hyperparams",
    record_final: bool = False,
    impls: Sequence[str] = (DEFAULT_IMPL,),
    eval_seed_offset: int = DEFAULT_EVAL_SEED_OFFSET,
) -> tuple[list[JobSpec], list[SkippedPair]]:
    """Expand algos x envs x seeds into jobs; pairs that cannot run are returned with their reason.

    Every config is resolved here, so a bad file, key or value raises a :class:`BenchError` before any job
    starts. The budget of a job is ``n_timesteps`` if given, else the config's ``n_timesteps``, else the
    suite's default for the env (``default_budgets``); none of them is an error.

    Args:
        algos: algorithm names (checked).
        envs: env ids (checked by the caller; ``"module:Env-v0"`` allowed).
        seeds: seeds; every pair runs each.
        n_timesteps: budget for every job (overrides the configs).
        eval_freq: env steps between evaluations (default: :func:`default_eval_protocol`).
        eval_episodes: episodes per evaluation (default: :func:`default_eval_protocol`).
        config_files: extra zoo-format YAML files.
        overrides: ``--hyperparams`` ``key -> value text``.
        device: device of every job.
        torch_threads: torch threads per job.
        default_budgets: per-env budgets from the suites.
        log_interval: ``--log-interval`` of every job (None: chosen per job by the runner).
        notes: receives one line per algo x env whose budget was rounded (on-policy: up to whole rollouts,
            see :func:`lit_sb3.zoo.budget.exact_budget`; a budget below one rollout is an error).
        cache: replays the recorded outcome of a pair planned before with the same inputs and records new
            ones (:class:`~lit_sb3.zoo.plan_cache.PlanCache`, made with the same ``config_files``, ``overrides``
            and ``n_timesteps``): a rerun then plans without importing torch or Lightning.
        overrides_label: where ``overrides`` came from, in error messages (``bench tune``: its search space).
        record_final: every job records its final evaluation (``bench run --record-final``).
        impls: the implementations each (algo, env, seed) runs with (``bench run --impl``): ``lit_sb3`` and/or
            ``sb3`` (SB3/sb3-contrib through rl_zoo3, :mod:`lit_sb3.zoo.reference`), same config and protocol.
        eval_seed_offset: the evaluation env's seed is the run's seed plus this (``--eval-seed-offset``).
    """
    seeds = list(seeds)
    bad_impls = [impl for impl in impls if impl not in IMPLS]
    if bad_impls or not impls:
        raise BenchError(f"--impl: unknown implementation {bad_impls[0] if bad_impls else '(none)'!r}; "
                         f"allowed: {', '.join(IMPLS)}")  # fmt: skip
    if eval_seed_offset < 0:
        raise BenchError(f"--eval-seed-offset must be >= 0, got {eval_seed_offset}")
    if not seeds:
        raise BenchError("no seed given")
    if n_timesteps is not None and n_timesteps < 1:
        raise BenchError(f"--n-timesteps must be >= 1, got {n_timesteps}")
    if eval_freq is not None and eval_freq < 1:
        raise BenchError(f"--eval-freq must be >= 1, got {eval_freq}")
    if eval_episodes is not None and eval_episodes < 1:
        raise BenchError(f"--eval-episodes must be >= 1, got {eval_episodes}")
    if torch_threads < 1:
        raise BenchError(f"--torch-threads must be >= 1, got {torch_threads}")
    if log_interval is not None and log_interval < 1:
        raise BenchError(f"--log-interval must be >= 1, got {log_interval}")
    budgets = dict(default_budgets or {})
    jobs: list[JobSpec] = []
    skipped: list[SkippedPair] = []
    for algo in algos:
        for env_id in envs:
            outcome = cache.get(algo, env_id, budgets.get(env_id)) if cache is not None else None
            if outcome is None:
                outcome = _plan_pair(
                    algo, env_id, n_timesteps, config_files, overrides, budgets.get(env_id), overrides_label
                )
                if cache is not None:
                    cache.put(algo, env_id, budgets.get(env_id), outcome)
            if "skip" in outcome:
                skipped.append(SkippedPair(algo, env_id, outcome["skip"]))
                continue
            if outcome["note"] is not None and notes is not None:
                notes.append(outcome["note"])
            budget = int(outcome["budget"])
            freq, episodes = default_eval_protocol(budget, _max_episode_steps(env_id))
            freq, episodes = eval_freq or freq, eval_episodes or episodes
            if notes is not None:
                notes.append(eval_protocol_line(algo, env_id, budget, freq, episodes, _max_episode_steps(env_id)))
            for impl in impls:
                zoo_entry = None
                if impl != DEFAULT_IMPL:
                    from lit_sb3.zoo.reference.entry import zoo_entry as reference_entry

                    zoo_entry = reference_entry(algo, env_id, config_files, overrides)
                for seed in seeds:
                    jobs.append(
                        JobSpec(
                            algo=algo,
                            env_id=env_id,
                            seed=int(seed),
                            n_timesteps=budget,
                            config=outcome["config"],
                            eval_freq=int(freq),
                            eval_episodes=int(episodes),
                            device=device,
                            torch_threads=int(torch_threads),
                            config_hash=outcome["config_hash"],
                            log_interval=log_interval,
                            record_final=record_final,
                            requested_timesteps=int(outcome.get("requested", budget)),
                            impl=impl,
                            eval_seed_offset=int(eval_seed_offset),
                            zoo_entry=zoo_entry,
                        )
                    )
    return jobs, skipped


def seed_batches(jobs: Sequence[JobSpec], size: int) -> list[list[JobSpec]]:
    """Group the jobs that differ only by their seed (same algo, env, resolved config, budget, evaluation,
    device) into as few seed batches of at most ``size`` jobs as possible, of balanced sizes (5 seeds by 4: 3 + 2),
    each run as one unit by :func:`lit_sb3.zoo.runner.run_jobs` (a single job is a batch of one). Each job keeps its
    own id, so a batch holds only the jobs given (a re-run passes the unfinished ones).

    Args:
        jobs: the jobs to run, in order (a batch takes the place of its first job).
        size: the most seeds per batch (``--seed-batch``; 1: every job alone).
    """
    if size < 1:
        raise BenchError(f"--seed-batch must be >= 1, got {size}")
    groups: dict[str, list[JobSpec]] = {}
    for job in jobs:
        identity = {k: v for k, v in job.identity().items() if k != "seed"}
        groups.setdefault(_canonical({**identity, "log_interval": job.log_interval}), []).append(job)
    units: list[list[JobSpec]] = []
    for group in groups.values():  # in the order of their first jobs
        if group[0].impl != DEFAULT_IMPL:  # the reference side trains each seed in its own rl_zoo3 process
            units.extend([job] for job in group)
            continue
        n_units = -(-len(group) // size)  # as few batches as ``size`` allows, of balanced sizes (5 by 4: 3 + 2)
        start = 0
        for u in range(n_units):
            end = start + len(group) // n_units + (u < len(group) % n_units)
            units.append(group[start:end])
            start = end
    return units
