"""What a grid will cost before it runs: wall time on this machine, from measured env-steps/s.

A job's time is modelled in the phases that run at different speeds: the worker's start-up, the off-policy
warm-up (``learning_starts`` env steps of random actions, no update), the training steps with updates, and the
evaluations (``eval_episodes`` deterministic episodes at each evaluation point and at the end, each episode at most
the env's time limit). Each phase's rate comes from the finished runs in the tracking store for the same algorithm
and env family (their ``time/*`` metrics, :func:`rates_from_runs`) where there are any, else from the table shipped
with the suite (``benchmarks/rates.yml``, measured by ``benchmarks/bench_rates.py`` on the machine it names), and
the estimate says which. A seed batch of K seeds trains them in one process (:func:`unit_seconds`, with the
seed-batching speed-up measured by ``benchmarks/bench_seed_batch.py``); units are laid out over the worker slots
(:func:`schedule_eta`). :class:`~lit_sb3.zoo.progress.GridProgress` starts its ETA from these estimates and
replaces each phase's rate by the one measured inside the running jobs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "Estimate",
    "JobCost",
    "Rates",
    "TIME_METRICS",
    "duration",
    "env_family",
    "estimate_grid",
    "job_cost",
    "job_costs",
    "load_rates",
    "n_evaluations",
    "plan_lines",
    "rates_from_runs",
    "schedule_eta",
    "seed_batch_speedup",
    "unit_seconds",
    "until_verdict_seconds",
    "warmup_steps",
]

#: ``time/*`` metrics a finished job logs (``lit_sb3.zoo.runner.finish_job``) that the rates are read from
TIME_METRICS = ("time/total_timesteps", "time/wall_seconds", "time/fps", "time/train_seconds", "time/eval_seconds",
                "time/eval_steps", "time/warmup_seconds", "time/warmup_steps", "time/startup_seconds",
                "time/seed_batch")  # fmt: skip

#: entry-point module prefixes -> env family (the suites' names)
_FAMILIES = (
    ("gymnasium.envs.mujoco", "mujoco"),
    ("gymnasium.envs.classic_control", "classic"),
    ("gymnasium.envs.box2d", "box2d"),
    ("ale_py", "atari"),
    ("shimmy.atari", "atari"),
    ("lit_sb3.envs", "lit_sb3"),
)


@dataclass(frozen=True)
class Rates:
    """Measured speeds of one algorithm on one env family, one seed in one process on one core.

    Args:
        update_fps: training env steps per second once updates run (evaluations excluded).
        warmup_fps: env steps per second before ``learning_starts`` (off-policy; random actions, no update).
        eval_fps: evaluation env steps per second.
        startup_s: seconds of a job outside training and evaluation (process, env and model set-up, artifacts).
        source: where the numbers come from (said next to the estimate).
    """

    update_fps: float
    warmup_fps: float
    eval_fps: float
    startup_s: float
    source: str


@dataclass(frozen=True)
class JobCost:
    """The phases of one job and the rates they are estimated at.

    Args:
        train_steps: the training budget (env steps).
        warmup_steps: steps of it before the first update (0 on-policy).
        n_evals: evaluations (periodic and final).
        eval_steps_per_eval: env steps of one evaluation (episodes x the env's time limit: an upper bound).
        rates: the rates.
    """

    train_steps: int
    warmup_steps: int
    n_evals: int
    eval_steps_per_eval: float
    rates: Rates

    @property
    def eval_steps(self) -> float:
        """Env steps of all its evaluations."""
        return self.n_evals * self.eval_steps_per_eval

    def train_seconds(self) -> float:
        """Seconds of training (warm-up and updates) of one seed alone."""
        warm = min(self.warmup_steps, self.train_steps)
        return warm / self.rates.warmup_fps + (self.train_steps - warm) / self.rates.update_fps

    def eval_seconds(self) -> float:
        """Seconds of its evaluations."""
        return self.eval_steps / self.rates.eval_fps

    def seconds(self) -> float:
        """Seconds of the job alone in its process."""
        return self.rates.startup_s + self.train_seconds() + self.eval_seconds()


# ---------------------------------------------------------------------------------------------------------
# the rates
# ---------------------------------------------------------------------------------------------------------
def env_family(env_id: str) -> str:
    """The env family of ``env_id`` (``mujoco``, ``classic``, ``box2d``, ``atari``, ``lit_sb3``, else
    ``other``), from its registered entry point (nothing is imported or made).

    Args:
        env_id: gymnasium env id (``module:Env-v0`` allowed).
    """
    import gymnasium as gym

    spec = gym.registry.get(env_id.rpartition(":")[2])
    entry = spec.entry_point if spec is not None else None
    text = entry if isinstance(entry, str) else f"{getattr(entry, '__module__', '')}:"
    for prefix, family in _FAMILIES:
        if text.startswith(prefix):
            return family
    return "other"


@functools.lru_cache(maxsize=1)
def load_rates() -> dict[str, Any]:
    """The shipped table (``benchmarks/rates.yml``): ``{"machine": str, "rates": {algo: {family: {...}}}}``."""
    import yaml

    from lit_sb3.zoo.data import data_path

    with open(data_path("rates.yml")) as fh:
        data = yaml.safe_load(fh)
    return data


def _table_rates(algo: str, family: str) -> Rates | None:
    table = load_rates()
    by_family = table.get("rates", {}).get(algo)
    if not by_family:
        return None
    where = f"the shipped table ({table.get('machine', 'machine not named')})"
    if family in by_family:
        return Rates(**by_family[family], source=f"{where}: {algo} on {family}")
    other = "classic" if "classic" in by_family else next(iter(by_family))
    return Rates(**by_family[other], source=f"{where}: {algo} on {other}, no {family} row")


@functools.cache
def seed_batch_speedup(algo: str, k: int) -> float:
    """How much faster K seeds train in one seed-batched process than one after another: the ratio measured at
    the table's K (``benchmarks/seed_batch.yml``, the one table ``--seed-batch auto`` also decides from; the
    algorithm's best family row, as auto uses for a family without a row), linear in K from 1 at K = 1, capped at
    the measured K's. An algorithm without a row: 1 (no speed-up assumed).

    Args:
        algo: algorithm.
        k: seeds in the batch.
    """
    from lit_sb3.zoo.seed_batching import load_table, lookup

    row, _ = lookup(algo, None, load_table())
    if row is None or row.k <= 1:
        return 1.0
    return 1.0 + (row.ratio - 1.0) * (min(max(k, 1), row.k) - 1) / (row.k - 1)


def rates_from_runs(runs: Iterable[Mapping[str, Any]], algo: str, family: str) -> Rates | None:
    """Rates of ``algo`` on ``family`` from finished runs (medians over runs), or None when none has the
    ``time/*`` metrics.

    Args:
        runs: ``{"algo", "env", "metrics": {...}}`` of FINISHED job runs (:data:`TIME_METRICS`).
        algo: algorithm.
        family: env family.
    """
    update, warm, evals, start = [], [], [], []
    n = 0
    for run in runs:
        m = run["metrics"]
        if run["algo"] != algo or env_family(run["env"]) != family or "time/train_seconds" not in m:
            continue
        k = max(1.0, float(m.get("time/seed_batch", 1.0)))
        speedup = seed_batch_speedup(algo, int(k))
        steps = float(m.get("time/total_timesteps", 0.0))
        w_steps, w_s = float(m.get("time/warmup_steps", 0.0)), float(m.get("time/warmup_seconds", 0.0))
        upd_s = float(m["time/train_seconds"]) - w_s  # the batch's seconds (K seeds step together)
        if steps - w_steps > 0 and upd_s > 0:  # K seeds' steps in the batch's seconds, as one seed alone
            update.append(k * (steps - w_steps) / upd_s / speedup)
        if w_steps > 0 and w_s > 0:
            warm.append(k * w_steps / w_s)
        if float(m.get("time/eval_seconds", 0.0)) > 0:
            evals.append(float(m.get("time/eval_steps", 0.0)) / float(m["time/eval_seconds"]))
        if "time/startup_seconds" in m:
            start.append(float(m["time/startup_seconds"]))
        n += 1
    if not update:
        return None
    table = _table_rates(algo, family)
    up = _median(update)
    return Rates(
        update_fps=up,
        warmup_fps=_median(warm) if warm else (table.warmup_fps if table else up),
        eval_fps=_median(evals) if evals else (table.eval_fps if table else up),
        startup_s=_median(start) if start else (table.startup_s if table else 0.0),
        source=f"{n} finished run(s) of {algo} on {family} in the store",
    )


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


# ---------------------------------------------------------------------------------------------------------
# jobs, units, grids
# ---------------------------------------------------------------------------------------------------------
def warmup_steps(algo: str, algo_kwargs: Mapping[str, Any]) -> int:
    """Env steps before an off-policy algorithm's first update (``learning_starts``, its default when not set);
    0 for algorithms without a warm-up.

    Args:
        algo: algorithm.
        algo_kwargs: the resolved constructor arguments.
    """
    from lit_sb3.zoo.registry import algo_defaults

    if "learning_starts" in algo_kwargs:
        return int(algo_kwargs["learning_starts"])
    return int(algo_defaults(algo).get("learning_starts", 0) or 0)


def n_evaluations(n_timesteps: int, eval_freq: int) -> int:
    """Evaluations of a job: one at each multiple of ``eval_freq`` within the budget, and a final one unless the
    last falls on the end.

    Args:
        n_timesteps: budget.
        eval_freq: env steps between evaluations.
    """
    return n_timesteps // eval_freq + (1 if n_timesteps % eval_freq else 0)


def job_cost(spec: Any, rates: Rates) -> JobCost:
    """The phases of job ``spec`` at ``rates``.

    Args:
        spec: a :class:`~lit_sb3.zoo.jobs.JobSpec`.
        rates: its rates.
    """
    from lit_sb3.zoo.jobs import _max_episode_steps

    length = _max_episode_steps(spec.env_id) or 1000
    kwargs = spec.config.get("algo_kwargs", {}) if isinstance(spec.config, Mapping) else {}
    return JobCost(int(spec.n_timesteps), warmup_steps(spec.algo, kwargs), n_evaluations(spec.n_timesteps, spec.eval_freq),
                   float(spec.eval_episodes * length), rates)  # fmt: skip


def unit_seconds(costs: Sequence[JobCost], k: int, algo: str) -> float:
    """Seconds of one unit of ``len(costs)`` seeds trained together in one process as a seed batch of ``k``
    (the planner's chosen ``--seed-batch``): one start-up, the seeds' training at the batch's speed-up, their
    evaluations one seed after another.

    Args:
        costs: the unit's jobs.
        k: seeds per batch (the unit holds at most ``k``).
        algo: their algorithm (its seed-batching speed-up).
    """
    if not costs:
        return 0.0
    n = len(costs)
    train = sum(c.train_seconds() for c in costs) / seed_batch_speedup(algo, min(n, k))
    return costs[0].rates.startup_s + train + sum(c.eval_seconds() for c in costs)


def schedule_eta(running: Sequence[float], queued: Sequence[float], slots: int) -> float:
    """Seconds until the last job ends when ``queued`` jobs wait for the first free of ``slots`` worker slots.

    Args:
        running: seconds left of each running job (each holds a slot).
        queued: seconds each queued job will take, in launch order.
        slots: worker slots (at least the number of running jobs is assumed).
    """
    free = sorted(list(running) + [0.0] * max(0, slots - len(running)))
    for seconds in queued:
        free[0] += seconds
        free.sort()
    return max(free, default=0.0)


@dataclass(frozen=True)
class Estimate:
    """A grid's estimated cost.

    Args:
        seconds: wall seconds on ``workers`` slots.
        cpu_seconds: the units' seconds summed (one slot each).
        train_steps: training env steps.
        eval_steps: evaluation env steps (an upper bound: every episode at the time limit).
    """

    seconds: float
    cpu_seconds: float
    train_steps: int
    eval_steps: float


def job_costs(jobs: Sequence[Any], runs: Iterable[Mapping[str, Any]] = ()) -> tuple[dict[str, JobCost], dict[str, str]]:
    """Each job's :class:`JobCost` and, per ``algo on family``, where its rates come from.

    Args:
        jobs: the jobs (:class:`~lit_sb3.zoo.jobs.JobSpec`).
        runs: finished job runs of the store (:func:`rates_from_runs`).
    """
    runs = list(runs)
    rates: dict[tuple[str, str], Rates] = {}
    costs: dict[str, JobCost] = {}
    for job in jobs:
        key = (job.algo, env_family(job.env_id))
        if key not in rates:
            found = rates_from_runs(runs, *key) or _table_rates(*key)
            rates[key] = found if found is not None else _fallback(key[0])
        costs[job.job_id] = job_cost(job, rates[key])
    sources = {f"{a} on {f}": r.source for (a, f), r in rates.items()}
    return costs, sources


def _fallback(algo: str) -> Rates:
    """An algorithm the table has no row for: the slowest row of the table (an estimate on the safe side), or
    unknown (NaN) rates when the table is empty."""
    rows = [Rates(**row, source="") for fams in load_rates().get("rates", {}).values() for row in fams.values()]
    if not rows:
        return Rates(math.nan, math.nan, math.nan, math.nan, source=f"no measured rate for {algo}")
    slow = min(rows, key=lambda r: r.update_fps)
    return replace(slow, source=f"no measured rate for {algo}: the table's slowest row")


def estimate_grid(units: Sequence[Sequence[Any]], workers: int, k: int, costs: Mapping[str, JobCost]) -> Estimate:
    """The wall time of ``units`` (seed batches of at most ``k``, :func:`~lit_sb3.zoo.jobs.seed_batches`) laid
    out over ``workers`` slots in launch order.

    Args:
        units: the units to run.
        workers: parallel slots.
        k: ``--seed-batch``.
        costs: job id -> its :class:`JobCost` (:func:`job_costs`).
    """
    seconds = [unit_seconds([costs[j.job_id] for j in unit], k, unit[0].algo) for unit in units if unit]
    jobs = [costs[j.job_id] for unit in units for j in unit]
    return Estimate(
        seconds=schedule_eta([], seconds, max(1, workers)),
        cpu_seconds=sum(seconds),
        train_steps=sum(c.train_steps for c in jobs),
        eval_steps=sum(c.eval_steps for c in jobs),
    )


def duration(seconds: float) -> str:
    """``42 s``, ``3m05s``, ``1h02m``, ``2d03h``.

    Args:
        seconds: a duration.
    """
    if not math.isfinite(seconds):
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


# ---------------------------------------------------------------------------------------------------------
# what the plan says
# ---------------------------------------------------------------------------------------------------------
def _per_pair_seconds(costs: Mapping[str, JobCost], jobs: Sequence[Any], n_seeds: int, k: int) -> list[float]:
    """Seconds of each (algo, env)'s units with ``n_seeds`` seeds in seed batches of ``k`` (one unit list)."""
    first: dict[tuple[str, str], Any] = {}
    for job in jobs:
        first.setdefault((job.algo, job.env_id), job)
    out: list[float] = []
    for (algo, _env), job in first.items():
        n_units = -(-n_seeds // k)
        for u in range(n_units):
            size = n_seeds // n_units + (u < n_seeds % n_units)
            out.append(unit_seconds([costs[job.job_id]] * size, k, algo))
    return out


def until_verdict_seconds(costs: Mapping[str, JobCost], jobs: Sequence[Any], k: int, workers: int,
                          min_seeds: int = 5, max_seeds: int = 10, wave: int = 1) -> tuple[float, float]:  # fmt: skip
    """``(best, worst)`` wall seconds of ``--until-verdict`` over the pairs of ``jobs``: every comparison settled
    after the first wave of ``min_seeds``, or every one open to ``max_seeds`` (the waves run one after another).

    Args:
        costs: job id -> its cost (each pair's first job stands for its seeds).
        jobs: the grid's jobs.
        k: seeds per batch.
        workers: parallel slots.
        min_seeds: seeds of the first wave.
        max_seeds: most seeds per algo x env.
        wave: seeds per later wave.
    """
    best = schedule_eta([], _per_pair_seconds(costs, jobs, min_seeds, k), workers)
    full, rest = divmod(max(0, max_seeds - min_seeds), wave)  # the later waves: `full` alike, then one of `rest`
    worst = best
    if full:
        worst += full * schedule_eta([], _per_pair_seconds(costs, jobs, wave, k), workers)
    if rest:
        worst += schedule_eta([], _per_pair_seconds(costs, jobs, rest, k), workers)
    return best, worst


def plan_lines(jobs: Sequence[Any], todo: Sequence[Any], units: Sequence[Sequence[Any]], k: int, workers: int,
               runs: Iterable[Mapping[str, Any]] = (), launcher: str = "local",
               until_verdict: bool = False) -> tuple[list[str], dict[str, JobCost]]:  # fmt: skip
    """The lines a plan prints about its cost (and, for a comparison with too few seeds for a verdict, what
    ``--until-verdict`` would cost instead), and each job's :class:`JobCost` (the progress display's prior).

    Args:
        jobs: every job of the grid.
        todo: those to run.
        units: ``todo`` in seed batches (:func:`~lit_sb3.zoo.jobs.seed_batches` with ``k``).
        k: ``--seed-batch``.
        workers: parallel slots (``--jobs``).
        runs: finished runs of the store (:meth:`~lit_sb3.zoo.tracking.store.Tracking.timed_job_runs`).
        launcher: ``local`` or ``ray`` (named in the line).
        until_verdict: the grid is ``--until-verdict``'s (no warning; ``todo`` is its first wave).
    """
    costs, sources = job_costs(jobs, runs)
    est = estimate_grid(units, workers, k, costs)
    if not math.isfinite(est.seconds):
        unknown = [what for what, src in sources.items() if src.startswith("no measured rate")]
        return [f"estimate: none (no measured rate for {', '.join(unknown)}: neither a finished run in the store "
                "nor a row of benchmarks/rates.yml)"], costs  # fmt: skip
    lines = [
        f"estimate: about {duration(est.seconds)} of wall time on this machine ({launcher}, {workers} worker(s)"
        + (f", seed batches of up to {k}" if k > 1 else "") + f"): {est.train_steps:,} training + up to "
        f"{int(est.eval_steps):,} evaluation env steps, {duration(est.cpu_seconds)} of worker time"
    ]  # fmt: skip
    lines += [f"  rates of {what}: {src}" for what, src in sources.items()]
    algos = list(dict.fromkeys(j.algo for j in jobs))
    seeds: dict[tuple[str, str], int] = {}
    for job in jobs:
        seeds[(job.algo, job.env_id)] = seeds.get((job.algo, job.env_id), 0) + 1
    from lit_sb3.zoo.report.build import MIN_RUNS

    fewest = min(seeds.values(), default=0)
    if not until_verdict and len(algos) >= 2 and fewest < MIN_RUNS:
        best, worst = until_verdict_seconds(costs, jobs, k, workers)
        lines.append(
            f"warning: {fewest} seed(s) per algo x env cannot give a verdict: a comparison needs >= {MIN_RUNS} seeds "
            f"per algorithm and env (--seeds {MIN_RUNS}); --until-verdict instead (5 to 10 seeds in waves, stops "
            f"when every comparison is settled) would take about {duration(best)} to {duration(worst)} here"
        )  # fmt: skip
    return lines, costs
