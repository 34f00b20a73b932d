"""``bench run --until-verdict``: a grid run in waves of seeds until every comparison is settled.

The first wave runs seeds ``0..min_seeds-1`` of every (algo, env); after each wave the decisions of every
(algo pair, env) and of each pair's aggregate over the envs are replayed from the FINISHED runs' scores in
seed order (:func:`lit_sb3.zoo.stats.sequential.decide`: a group-sequential permutation test with alpha
spending and Holm over the family, and an anytime-valid confidence sequence for equivalence). An (algo, env)
gets the next wave (``--wave`` more seeds) while any comparison it belongs to is open, until ``--max-seeds``.

The plan is lazy: each (algo, env) is planned once (its job with seed 0, config resolved and checked), and a
wave makes its seeds' jobs from it when it starts (:func:`wave_jobs`); the dry-run's waves and estimates are
computed from counts. Nothing planned grows with ``--max-seeds``.

It is a normal ``bench run``: the jobs of a wave go through the same launcher (local or Ray; a wave of one
(algo, env) is one seed batch with ``--seed-batch``), each seed is its own job run under the invocation's parent
run, and a rerun of the same command skips the FINISHED jobs. Since the decisions are a deterministic function
of the scores in seed order and the waves are fixed by the plan, a rerun after a kill replays the same
decisions and continues where the sequence stopped. Each look's decisions are logged on the parent run (params:
the plan; metrics at step = seeds per algorithm; artifacts ``sequential/look_<k>.json`` and
``sequential/decisions.json``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Sequence
from typing import Any

from lit_sb3.zoo.errors import BenchError, check_count

__all__ = ["add_arguments", "check_arguments", "plan_of", "run_until_verdict", "wave_jobs", "PLAN_TAG"]

PLAN_TAG = "lit_sb3.sequential_plan"
"""Tag of a sequential grid run: the plan as JSON (``bench report`` replays the decisions with it)."""

_FLAGS = ("min_seeds", "max_seeds", "wave", "equivalence_margin", "alpha", "spending")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--until-verdict`` and its options to ``bench run``.

    Args:
        p: the ``run`` parser.
    """
    g = p.add_argument_group("sequential comparison (--until-verdict)")
    g.add_argument("--until-verdict", action="store_true",
                   help="run seeds in waves until every (algo pair, env) and each pair's aggregate is settled "
                   "(credibly better, credibly equivalent) or --max-seeds is reached; needs >= 2 algorithms")  # fmt: skip
    g.add_argument("--min-seeds", type=int, default=None, metavar="N", help="seeds of the first wave (default 5)")
    g.add_argument("--max-seeds", type=int, default=None, metavar="N", help="most seeds per algo x env (default 10)")
    g.add_argument("--wave", type=int, default=None, metavar="N", help="seeds added by each later wave (default 1)")
    g.add_argument("--equivalence-margin", type=float, default=None, metavar="M",
                   help="credibly equivalent when P(X > Y) lies inside 0.5 +- M, M in (0, 0.5) (default 0.1)")  # fmt: skip
    g.add_argument("--alpha", type=float, default=None, metavar="A",
                   help="family-wise level of a false 'credibly better' over all looks and comparisons (default 0.05)")  # fmt: skip
    g.add_argument("--spending", default=None, metavar="NAME",
                   help="alpha-spending function over the looks: pocock (default: spends more at the early looks, "
                   "where seeds are saved) or obrien-fleming (keeps almost all of alpha for the last look)")  # fmt: skip


_DEFAULTS = {"min_seeds": 5, "max_seeds": 10, "wave": 1, "equivalence_margin": 0.1, "alpha": 0.05, "spending": "pocock"}


def check_arguments(args: argparse.Namespace, algos: Sequence[str]) -> None:
    """One-line errors for bad combinations, before any planning; fills in the defaults.

    Args:
        args: parsed ``bench run`` arguments.
        algos: the expanded algorithms.
    """
    if not getattr(args, "until_verdict", False):
        given = [f"--{k.replace('_', '-')}" for k in _FLAGS if getattr(args, k, None) is not None]
        if given:
            raise BenchError(f"{', '.join(given)} only apply with --until-verdict (add it, or drop them)")
        return
    for key, value in _DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("min_seeds", "max_seeds", "wave"):  # bounded before the plan (its looks, the jobs) is built
        check_count(f"--{key.replace('_', '-')}", getattr(args, key))
    if args.seeds is not None or args.seed_list is not None:
        raise BenchError(
            "--until-verdict chooses the seeds itself (0..--max-seeds-1, in waves); drop --seeds/--seed-list"
        )
    if len(algos) < 2:
        raise BenchError(f"--until-verdict compares algorithms: give at least 2 in --algos, got {', '.join(algos)}")
    plan_of(args)


def plan_of(args: argparse.Namespace) -> Any:
    """The :class:`~lit_sb3.zoo.stats.sequential.SequentialPlan` of the arguments (a one-line error if bad).

    Args:
        args: parsed ``bench run`` arguments (``check_arguments`` filled the defaults).
    """
    from lit_sb3.zoo.stats.sequential import SequentialPlan

    try:
        return SequentialPlan(args.min_seeds, args.max_seeds, args.wave, args.alpha, args.equivalence_margin,
                              args.spending)  # fmt: skip
    except ValueError as exc:
        raise BenchError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------------------------------------
def _order(jobs: Sequence[Any]) -> tuple[list[str], list[str]]:
    algos = list(dict.fromkeys(j.algo for j in jobs))
    envs = list(dict.fromkeys(j.env_id for j in jobs))
    return algos, envs


def wave_jobs(planned: Sequence[Any], seeds: range, finished: set[str] = frozenset(),
              pairs: set[tuple[str, str]] | None = None) -> list[Any]:  # fmt: skip
    """The jobs of the seeds ``seeds`` of each planned (algo, env) not yet FINISHED, in plan order, made now.

    Args:
        planned: each (algo, env, impl)'s planned job (seed 0).
        seeds: the wave's seeds.
        finished: ids of the jobs already FINISHED (left out).
        pairs: only these ``(algo, env)`` (None: all).
    """
    out = []
    for job in planned:
        if pairs is None or (job.algo, job.env_id) in pairs:
            out += [j for j in (job.with_seed(s) for s in seeds) if j.job_id not in finished]
    return out


DRY_RUN_WAVES = 10
"""``--dry-run`` lists this many waves one by one; the later ones (all of one size but the last) in one line."""


def print_plan(plan: Any, planned: Sequence[Any], finished: set[str]) -> None:
    """``--dry-run``: the waves, the comparisons and the worst-case (and best-case) seeds and env steps, from
    counts (the jobs of the waves listed one by one are made to count those already finished).

    Args:
        plan: the sequential plan.
        planned: each (algo, env, impl)'s planned job (seed 0).
        finished: ids of the jobs already FINISHED.
    """
    algos, envs = _order(planned)
    pairs = list(itertools.combinations(sorted(algos), 2))  # X before Y in name order, as in the report
    n_comp = len(pairs) * (len(envs) + (len(envs) > 1))
    print(f"sequential plan: {plan.describe()}")
    print(
        f"comparisons: {n_comp} ({len(pairs)} pair(s) x {len(envs)} env(s)"
        + (" + aggregates)" if len(envs) > 1 else ")")
    )
    per_seed = sum(j.n_timesteps for j in planned)
    n_looks = plan.n_looks
    listed = n_looks if n_looks <= DRY_RUN_WAVES + 1 else DRY_RUN_WAVES
    for k in range(listed):
        seeds = plan.wave_seeds(k)
        done = len(seeds) * len(planned) - len(wave_jobs(planned, seeds, finished))
        print(f"  wave {k + 1}: seeds {seeds.start}..{seeds.stop - 1} ({len(seeds)} per algo x env), look at "
              f"{plan.look(k)} seeds; at most {len(seeds) * len(planned)} jobs, {per_seed * len(seeds):,} env steps"
              + (f" ({done} already finished)" if done else ""))  # fmt: skip
    if listed < n_looks:
        first, last = plan.wave_seeds(listed), plan.wave_seeds(n_looks - 1)
        print(f"  waves {listed + 1}..{n_looks}: seeds {first.start}..{last.stop - 1}, {plan.wave} per algo x env "
              f"each (the last {len(last)}); at most {len(first) * len(planned)} jobs, "
              f"{per_seed * len(first):,} env steps each")  # fmt: skip
    print(f"worst case (every comparison open to --max-seeds {plan.max_seeds}): {len(planned) * plan.max_seeds} "
          f"jobs, {per_seed * plan.max_seeds:,} env steps; best case (all settled at --min-seeds {plan.min_seeds}): "
          f"{len(planned) * plan.min_seeds} jobs, {per_seed * plan.min_seeds:,} env steps")  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# the waves
# ---------------------------------------------------------------------------------------------------------
def _scores(tracking: Any, planned: Sequence[Any], max_seeds: int,
            seen: set[str]) -> dict[tuple[str, str], list[float]]:  # fmt: skip
    """``(algo, env) -> final scores in seed order`` from the FINISHED runs of each planned pair's seeds 0, 1, ...
    (up to the first seed without one, at most ``max_seeds``); the job ids found are added to ``seen``."""
    got: dict[str, float] = {}
    for run in tracking.job_runs():
        score = run.data.metrics.get("final/mean_reward")
        if run.info.status == "FINISHED" and score is not None:
            got[run.data.tags.get("lit_sb3.job_id", "")] = float(score)
    out: dict[tuple[str, str], list[float]] = {}
    for job in planned:
        values = out.setdefault((job.algo, job.env_id), [])
        while len(values) < max_seeds:  # seeds are 0..max-1: stop at the first gap
            job_id = job.with_seed(len(values)).job_id
            if job_id not in got:
                break
            values.append(got[job_id])
            seen.add(job_id)
    return out


_OUTCOME = {"x_better": "{x} credibly better", "y_better": "{y} credibly better", "equivalent": "equivalent",
            "open": "open"}  # fmt: skip


def _line(c: Any) -> str:
    lk = c.looks[-1]
    what = _OUTCOME[c.outcome].format(x=c.x, y=c.y)
    return (f"  {c.x} vs {c.y} on {c.env}: P({c.x} > {c.y}) = {lk.point:.3f}, confidence sequence "
            f"[{lk.low:.3f}, {lk.high:.3f}], "
            f"repeated p = {lk.p_value:.3g}, {lk.n} seeds -> {what}")  # fmt: skip


def _look_record(family: Sequence[Any], k: int, n: int) -> dict[str, Any]:
    return {"look": k + 1, "seeds": n, "comparisons": [c.as_dict() for c in family]}


def _metrics(family: Sequence[Any], k: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in family:
        if len(c.looks) <= k:
            continue
        lk = c.looks[k]
        name = f"{c.x} vs {c.y} {c.env}"
        out[f"verdict/poi {name}"] = lk.point
        out[f"verdict/poi_low {name}"] = lk.low
        out[f"verdict/poi_high {name}"] = lk.high
        out[f"verdict/p_value {name}"] = lk.p_value
    out["verdict/open"] = float(sum(c.outcome == "open" or (c.settled_at or 0) > k for c in family))
    return out


def run_until_verdict(
    args: argparse.Namespace, jobs: Sequence[Any], skipped: Sequence[Any], experiment: str, uri: str
) -> int:  # fmt: skip
    """Run the waves (see the module docstring); returns the exit status (0, or 1 when jobs failed).

    Args:
        args: parsed ``bench run`` arguments.
        jobs: each (algo, env, impl)'s planned job, seed 0 (:func:`lit_sb3.zoo.pipeline.plan`); the waves
            make their seeds' jobs from them.
        skipped: pairs that cannot run.
        experiment: the experiment.
        uri: tracking URI.
    """
    from lit_sb3.zoo import pipeline
    from lit_sb3.zoo.stats.sequential import decide
    from lit_sb3.zoo.tracking import open_tracking

    plan = plan_of(args)
    algos, envs = _order(jobs)
    pairs = list(itertools.combinations(sorted(algos), 2))  # X before Y in name order, as in the report
    tracking = open_tracking(uri, experiment, create=not args.dry_run)
    finished = tracking.finished_job_ids()
    if args.dry_run:
        print_plan(plan, jobs, finished)
        first = wave_jobs(jobs, plan.wave_seeds(0), finished)
        units = pipeline.seed_batch_units(first, args.seed_batch)
        _print_until_verdict_estimate(args, tracking, jobs, first, units, plan)
        return 0
    active = pipeline.claim(tracking, skipped, jobs)
    if active:
        raise BenchError(f"{len(active)} job(s) of this grid are running in another bench run; wait for it")
    launcher = pipeline.make_launcher(args, args.timeout)
    rule = {k: v for k, v in plan.as_dict().items() if k != "looks"}  # a tag is short; the looks follow from it
    parent_id, command = pipeline.open_grid_run(args, tracking, "verdict", tags={PLAN_TAG: json.dumps(rule)})
    tracking.log_dict(parent_id, plan.as_dict(), "sequential/plan.json")
    print(f"sequential grid run {parent_id}: {plan.describe()}", flush=True)
    results: list[Any] = []
    seen: set[str] = set()  # the sequence's jobs FINISHED so far (the grid's metrics count them)
    status, logged, family = "KILLED", 0, []
    try:
        while True:
            family = decide(_scores(tracking, jobs, plan.max_seeds, seen), pairs, envs, plan)
            n_looks = max((len(c.looks) for c in family), default=0)
            for k in range(logged, n_looks):  # each look's decisions, once per invocation (a rerun replays them)
                n = plan.look(k)
                print(f"look {k + 1} ({n} seeds per algo x env):", flush=True)
                for c in family:
                    if len(c.looks) > k and (c.settled_at is None or c.settled_at >= k):
                        print(_line(_at(c, k)), flush=True)
                tracking.log_metrics(parent_id, _metrics(family, k), step=n)
                tracking.log_dict(parent_id, _look_record([_at(c, k) for c in family], k, n),
                                  f"sequential/look_{k + 1}.json")  # fmt: skip
            logged = n_looks
            open_ = [c for c in family if c.outcome == "open"]
            if not open_ or n_looks == plan.n_looks:
                status = "FINISHED"
                break
            needed = {(a, e) for c in open_ for a in (c.x, c.y) for e in c.envs}
            seeds = plan.wave_seeds(n_looks)
            finished = tracking.finished_job_ids()
            wave = wave_jobs(jobs, seeds, finished, needed)
            if not wave:  # the wave's runs are there but a score is missing (a FINISHED run without a score)
                raise BenchError(f"wave {n_looks + 1}: every job finished but some score is missing; see the job runs")
            print(f"wave {n_looks + 1}: seeds {seeds.start}..{seeds.stop - 1} of {len(needed)} algo x env, "
                  f"{len(wave)} job(s)", flush=True)  # fmt: skip
            wave_results = _run_wave(launcher, tracking, parent_id, wave, args)
            results += wave_results
            if any(r.status != "FINISHED" for r in wave_results):
                status = "FAILED"
                print(f"wave {n_looks + 1}: some jobs failed; the sequence stops here (rerun to retry them)")
                break
    finally:
        decisions = [c.as_dict() for c in family]
        header = f"# bench run summary\n\n`{command}`\n\n{plan.describe()}\n\n{_decisions_md(family)}\n"
        if family:
            tracking.log_dict(parent_id, {"plan": plan.as_dict(), "comparisons": decisions},
                              "sequential/decisions.json")  # fmt: skip
        pipeline.summarise(tracking, parent_id, header, results, skipped, status, seen)
    pipeline.print_summary(results, skipped, 0, 0)
    _print_decisions(family)
    from lit_sb3.zoo.tracking.links import results_hint

    print(results_hint(uri, experiment, tracking.target.experiment_id, grid_run_id=parent_id), flush=True)
    return 0 if status == "FINISHED" else 1


def _print_decisions(family: Sequence[Any]) -> None:
    """The decisions as a terminal table (the summary's Markdown columns), each one's reason for stopping on a line
    below it: the table then fits 120 columns whole, also when the output is not a terminal (a log, a pipe), where
    rich would otherwise squeeze it into 80 and cut the env names and numbers."""
    from rich.table import Table
    from rich.text import Text

    from lit_sb3.zoo.pipeline import wide_console

    console = wide_console()
    table = Table(title="decisions", title_justify="left")
    for col in ("X", "Y", "env", "seeds", "P(X > Y)", "conf. sequence", "repeated p", "outcome"):
        table.add_column(col, justify="right" if col in ("seeds", "P(X > Y)", "repeated p") else "left", no_wrap=True)
    reasons = []
    for c in family:
        if not c.looks:
            continue
        lk = c.looks[-1]
        table.add_row(c.x, c.y, Text(c.env), str(lk.n), f"{lk.point:.3f}", f"[{lk.low:.3f}, {lk.high:.3f}]",
                      f"{lk.p_value:.3g}", Text(_OUTCOME[c.outcome].format(x=c.x, y=c.y)))  # fmt: skip
        reasons.append(f"  {c.x} vs {c.y} on {c.env}: stopped because {c.reason}")
    console.print(table)
    for line in reasons:
        console.print(Text(line), soft_wrap=True)


def _print_until_verdict_estimate(args: argparse.Namespace, tracking: Any, jobs: Sequence[Any], first: Sequence[Any],
                                  units: Sequence[Any], plan: Any) -> None:  # fmt: skip
    """``--dry-run``: the first wave's estimate and the whole sequence's best and worst wall time."""
    import os

    from lit_sb3.zoo.cost import duration, job_costs, until_verdict_seconds
    from lit_sb3.zoo.pipeline import largest_batch, print_estimate

    print_estimate(args, tracking, [*jobs, *first], first, units, until_verdict=True)
    costs, _ = job_costs(jobs, tracking.timed_job_runs(sorted({j.algo for j in jobs})))
    best, worst = until_verdict_seconds(costs, jobs, largest_batch(args, units), args.jobs or os.cpu_count() or 1,
                                        plan.min_seeds, plan.max_seeds, plan.wave)  # fmt: skip
    print(
        f"estimate of the sequence: about {duration(best)} if every comparison settles at {plan.min_seeds} seeds, "
        f"{duration(worst)} if every one stays open to {plan.max_seeds}"
    )


def _at(c: Any, k: int) -> Any:
    """The comparison as it stood after look ``k`` (its looks up to k; open if it settled later)."""
    import dataclasses

    looks = c.looks[: k + 1]
    if c.settled_at is not None and c.settled_at <= k:
        return dataclasses.replace(c, looks=looks)
    return dataclasses.replace(c, looks=looks, outcome="open", settled_at=None, reason=f"open after look {k + 1}")


def _decisions_md(family: Sequence[Any]) -> str:
    lines = ["| X | Y | env | seeds | P(X > Y) | confidence sequence | repeated p | outcome | why it stopped |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in family:
        if not c.looks:
            continue
        lk = c.looks[-1]
        what = _OUTCOME[c.outcome].format(x=c.x, y=c.y)
        lines.append(f"| {c.x} | {c.y} | {c.env} | {lk.n} | {lk.point:.3f} | [{lk.low:.3f}, {lk.high:.3f}] | "
                     f"{lk.p_value:.3g} | {what} | {c.reason} |")  # fmt: skip
    return "\n".join(lines)


def _run_wave(launcher: Any, tracking: Any, parent_id: str, wave: Sequence[Any], args: argparse.Namespace) -> list[Any]:
    """Run one wave's jobs through the launcher (the same path as a plain ``bench run``); their results."""
    from lit_sb3.zoo.cost import job_costs
    from lit_sb3.zoo.pipeline import largest_batch, launch, seed_batch_units
    from lit_sb3.zoo.progress import GridProgress, progress_interval

    units = seed_batch_units(wave, args.seed_batch)
    costs, _ = job_costs(wave, tracking.timed_job_runs(sorted({j.algo for j in wave})))  # the ETA's estimate
    progress = GridProgress(len(wave), jobs=wave, file=sys.stdout, workers=args.jobs,
                            interval=progress_interval(args.progress_interval), units=units, costs=costs,
                            seed_batch=largest_batch(args, units))  # fmt: skip
    return list(launch(launcher, units, tracking, parent_id, progress))
