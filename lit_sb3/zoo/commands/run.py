"""``bench run``: train algos x envs x seeds in parallel local processes, tracked in MLflow, resumable.

Everything is validated before any job starts (algos, envs and suites with suggestions, config files with
file:line, hyperparameter keys with the allowed names, the tracking URI); an (algo, env) pair whose action
space the algorithm cannot handle is skipped with one line, and it is an error only when nothing is left.
Re-running the same command skips the jobs already FINISHED in the experiment, marks stale RUNNING ones
KILLED and runs them (and the failed ones) again. Exit status: 0 when every job finished, 1 when some
failed, 2 for bad input, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

from lit_sb3.zoo.errors import MAX_SEEDS, BenchError, check_count, finite_float
from lit_sb3.zoo.seed_batching import AUTO, parse_seed_batch

__all__ = ["add_parser", "run"]

#: a job's seed seeds numpy, whose seeds are 32-bit; a grid of more seeds than this is a typo
MAX_SEED = 2**32 - 1


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``run``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    p = subparsers.add_parser(
        "run", help="train a grid of algos x envs x seeds in parallel, tracked in MLflow (resumable)",
        description="Train every algo on every env with every seed, one process per job, tracked in MLflow. "
        "Re-running the same command resumes: finished jobs are skipped.",
    )  # fmt: skip
    from lit_sb3.algorithms.registry import ALGORITHMS

    p.add_argument("--algos", required=True, help=f"comma-separated algorithms, or all: {', '.join(ALGORITHMS)}")
    p.add_argument("--envs", required=True, help="comma-separated env ids and suites (e.g. mujoco,CartPole-v1)")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=None, metavar="N", help="seeds 0..N-1 (default 1)")
    seeds.add_argument("--seed-list", default=None, metavar="S,S,...", help="explicit seeds, e.g. 0,1,2")
    p.add_argument("--n-timesteps", type=int, default=None, metavar="N",
                   help="env-step budget of every job (default: the configs', then the suite's)")  # fmt: skip
    p.add_argument("--eval-freq", type=int, default=None, metavar="N",
                   help="evaluate every N env steps (default: budget/20, fewer evaluations where evaluating would "
                   "cost over 1/4 of the budget)")  # fmt: skip
    p.add_argument("--eval-episodes", type=int, default=None, metavar="N",
                   help="episodes per evaluation (default 10, fewer where evaluating would cost over 1/4 of the "
                   "budget)")  # fmt: skip
    p.add_argument("--eval-seed-offset", type=int, default=None, metavar="N",
                   help="seed the evaluation env with the run's seed + N (default 10000; 0, the RL Zoo's, when "
                   "--impl includes sb3)")  # fmt: skip
    p.add_argument("--impl", default="lit_sb3", metavar="IMPL[,IMPL]",
                   help="who trains each job: lit_sb3 (default), sb3 (SB3/sb3-contrib through rl_zoo3's train, "
                   "the [reference] extra), or lit_sb3,sb3 for both side by side; same configs, seeds, budget and "
                   "evaluation")  # fmt: skip
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="parallel jobs (default: number of CPUs)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="device of every job (default cpu)")
    p.add_argument("--timeout", type=finite_float, default=None, metavar="SECONDS",
                   help="kill a job (with --seed-batch: its seed batch, one process) after this long")  # fmt: skip
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow.db)")
    p.add_argument("--experiment", default=None, help="MLflow experiment (default bench-<envs>)")
    p.add_argument("--config", action="append", default=[], metavar="FILE",
                   help="extra zoo-format YAML file (repeatable; later files win)")  # fmt: skip
    p.add_argument("--hyperparams", nargs="+", default=[], metavar="KEY=VALUE",
                   help="overrides for every job, e.g. learning_rate=1e-3 'policy_kwargs=dict(net_arch=[64, 64])'")  # fmt: skip
    p.add_argument(
        "--log-interval",
        type=int,
        default=None,
        metavar="N",
        help="dump the logged scalars every N iterations (on-policy) / episodes (off-policy); default: "
        "on-policy every ~1,024 env steps, off-policy every 4 episodes (SB3's)",
    )
    p.add_argument("--torch-threads", type=int, default=1, metavar="N", help="torch threads per job (default 1)")
    p.add_argument("--seed-batch", type=parse_seed_batch, default=AUTO, metavar="K|auto",
                   help="train up to K unfinished seeds of one algo x env together, as one seed-batched model in one "
                   "process (one --jobs slot, one Ray task); each seed keeps its own run; a config the library cannot "
                   "batch runs its K seeds one after the other there. Default auto: K per algo and env family from "
                   "the measured efficiency table (benchmarks/seed_batch.yml), said in the plan; 1: a process per "
                   "seed")  # fmt: skip
    p.add_argument("--launcher", default="local", help="where jobs run: local (default) or ray")
    p.add_argument("--ray-address", default=None, metavar="auto|HOST:PORT",
                   help="--launcher ray: the Ray cluster to use (default: start a local Ray instance)")  # fmt: skip
    p.add_argument(
        "--cpus-per-job", type=finite_float, default=1.0, metavar="N", help="--launcher ray: CPUs of a job (default 1)"
    )
    p.add_argument(
        "--gpus-per-job", type=finite_float, default=0.0, metavar="X", help="--launcher ray: GPUs of a job (default 0)"
    )
    p.add_argument("--start-method", choices=("forkserver", "spawn"), default=None,
                   help="how job processes start (default forkserver where available: imports are paid once)")  # fmt: skip
    p.add_argument("--record-final", action="store_true",
                   help="record the final evaluation of each job as an mp4 artifact (videos/; the video extra)")  # fmt: skip
    p.add_argument("--progress-interval", type=float, default=None, metavar="SECONDS",
                   help="without a terminal (pipe, nohup, CI): a progress line every SECONDS (default 30, or "
                   "LIT_SB3_PROGRESS_SECONDS)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    from lit_sb3.zoo.waves import add_arguments

    add_arguments(p)  # --until-verdict and its options
    p.set_defaults(func=run)
    return p


# ---------------------------------------------------------------------------------------------------------
# planning
# ---------------------------------------------------------------------------------------------------------
def _seeds(args: argparse.Namespace) -> list[int]:
    if getattr(args, "until_verdict", False):
        # seeds 0..max-seeds-1 in waves: each pair is planned once, with seed 0; a wave makes its seeds' jobs when
        # it starts (lit_sb3.zoo.waves), so nothing planned grows with --max-seeds
        return [0]
    if args.seed_list is not None:
        out = []
        for part in args.seed_list.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                out.append(int(part))
            except ValueError as exc:
                raise BenchError(f"--seed-list: expected integers separated by commas, got {part!r}") from exc
            if len(out) > MAX_SEEDS:
                raise BenchError(f"--seed-list: more than {MAX_SEEDS:,} seeds")
        if not out:
            raise BenchError("--seed-list: no seed given")
        seen: set[int] = set()
        for seed in out:
            if seed in seen:
                raise BenchError(f"--seed-list: seed {seed} is given twice; each seed runs once, list it once")
            seen.add(seed)
        bad = [seed for seed in out if not 0 <= seed <= MAX_SEED]
        if bad:
            raise BenchError(f"--seed-list: seed {bad[0]} is out of range; seeds must be in [0, {MAX_SEED}]")
        return out
    n = 1 if args.seeds is None else args.seeds
    if n < 1:
        raise BenchError(f"--seeds must be >= 1, got {n}")
    if n > MAX_SEEDS:
        raise BenchError(f"--seeds must be <= {MAX_SEEDS:,} (seeds 0..N-1), got {n}")
    return list(range(n))


def _check_device(device: str) -> None:
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BenchError("--device cuda: no CUDA device is available here; use --device cpu or auto")


def _plan(args: argparse.Namespace) -> tuple[list[Any], list[Any], str, list[str]]:
    from lit_sb3.zoo.commands.show_config import parse_overrides
    from lit_sb3.zoo.config.loading import check_yaml_file
    from lit_sb3.zoo.extras import check_env_extras, check_extra
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.plan_cache import PlanCache
    from lit_sb3.zoo.suites import default_budgets, expand_algos, expand_envs

    for path in args.config:  # before anything else: /dev/zero or a sparse 1.5 GB file is refused unread
        check_yaml_file(path, f"--config {path}", "config file")
    algos = expand_algos(args.algos)
    from lit_sb3.zoo.waves import check_arguments

    check_arguments(args, algos)  # --until-verdict's options: one line before any planning
    check_env_extras(args.envs)  # a missing extra (box2d, atari) is one line naming it, before any env is made
    if args.record_final:
        check_extra("video", "--record-final")
    envs = expand_envs(args.envs)
    seeds = _seeds(args)
    if args.jobs is not None and args.jobs < 1:
        raise BenchError(f"--jobs must be >= 1, got {args.jobs}")
    if args.timeout is not None and args.timeout <= 0:
        raise BenchError(f"--timeout must be > 0, got {args.timeout:g}")
    if args.seed_batch != AUTO:
        check_count("--seed-batch", args.seed_batch)
    check_count("--jobs", args.jobs, maximum=4096)
    if args.launcher != "local":
        from lit_sb3.zoo.launchers import get_launcher

        get_launcher(args.launcher, **_launcher_options(args))
        if args.launcher == "ray":
            from lit_sb3.zoo.launchers.ray_launcher import check_ray_address

            check_ray_address(args.ray_address)  # seconds, where ray.init would retry for minutes
    _check_device(args.device)
    impls, eval_seed_offset = _impls(args)
    from lit_sb3.zoo.tracking import metrics_flush_seconds

    metrics_flush_seconds()  # a bad LIT_SB3_METRICS_FLUSH_SECONDS fails here, not in every job
    overrides = parse_overrides(args.hyperparams)
    notes: list[str] = []
    cache = PlanCache(args.config, overrides, args.n_timesteps, defer=True)  # recorded once the plan is accepted
    jobs, skipped = plan_grid(
        algos, envs, seeds, n_timesteps=args.n_timesteps, eval_freq=args.eval_freq,
        eval_episodes=args.eval_episodes, config_files=args.config, overrides=overrides, device=args.device,
        torch_threads=args.torch_threads, default_budgets=default_budgets(args.envs), log_interval=args.log_interval,
        notes=notes, cache=cache, record_final=args.record_final, impls=impls, eval_seed_offset=eval_seed_offset,
    )  # fmt: skip
    from lit_sb3.zoo.env_warnings import drain

    # what the env families said while planning made their envs: said once, with the notes, above the display
    notes += [f"note (from building the envs): {line}" for line in drain()]
    if not jobs:
        reasons = "; ".join(s.reason for s in skipped) or "empty grid"
        raise BenchError(f"nothing to run: {reasons}")
    unique = list({j.job_id: j for j in jobs}.values())
    experiment = args.experiment or _default_experiment(args.envs)
    cache.flush()
    return unique, skipped, experiment, notes


def largest_batch(args: argparse.Namespace, units: Sequence[Sequence[Any]]) -> int:
    """The most seeds a unit trains together: ``--seed-batch K``, or with ``auto`` (K chosen per algo x env) the
    largest unit's size; what the estimate and the progress take as K.

    Args:
        args: parsed arguments.
        units: the jobs in seed batches.
    """
    return int(args.seed_batch) if args.seed_batch != AUTO else max(map(len, units), default=1)


def _impls(args: argparse.Namespace) -> tuple[list[str], int]:
    """``--impl`` as a list (checked, the reference extra looked up when sb3 is asked) and the evaluation env's
    seed offset: the RL Zoo seeds its evaluation env with the run's seed, so a grid with the sb3 side evaluates both
    sides that way (offset 0), and another offset is refused there."""
    from lit_sb3.zoo.errors import did_you_mean
    from lit_sb3.zoo.jobs import DEFAULT_EVAL_SEED_OFFSET, IMPLS

    impls = [part.strip() for part in str(args.impl).split(",") if part.strip()]
    for impl in impls:
        if impl not in IMPLS:
            raise BenchError(f"--impl: unknown implementation {impl!r}{did_you_mean(impl, IMPLS)}; allowed: "
                             f"{', '.join(IMPLS)}")  # fmt: skip
    if not impls:
        raise BenchError(f"--impl: no implementation given; allowed: {', '.join(IMPLS)}")
    offset = args.eval_seed_offset
    if offset is not None and not 0 <= offset <= 2**31:
        raise BenchError(f"--eval-seed-offset must be in [0, 2**31], got {offset}")
    if "sb3" in impls:
        from lit_sb3.zoo.reference import check_reference_installed

        check_reference_installed()
        if getattr(args, "until_verdict", False):
            raise BenchError("--impl sb3 with --until-verdict is not supported; run the grid, then bench report")
        if offset not in (None, 0):
            raise BenchError(f"--eval-seed-offset {offset} with --impl sb3: the RL Zoo seeds its evaluation env with "
                             "the run's seed; leave it out (0)")  # fmt: skip
        offset = 0
    return list(dict.fromkeys(impls)), DEFAULT_EVAL_SEED_OFFSET if offset is None else int(offset)


def _seed_batch_units(todo: Sequence[Any], size: int | str, workers: int | None = None) -> list[Any]:
    """The jobs to run grouped into seed batches (:func:`~lit_sb3.zoo.jobs.seed_batches`), with one line saying
    how many (``auto``: :func:`~lit_sb3.zoo.seed_batching.auto_seed_batches`, one line per algo x env saying which
    K and why).

    Args:
        todo: the jobs to run.
        size: ``--seed-batch`` (an integer >= 1 or ``"auto"``).
        workers: parallel worker slots (``--jobs``; default: the number of CPUs), for ``auto``.
    """
    import os

    from lit_sb3.zoo.jobs import seed_batches

    if size == AUTO:
        from lit_sb3.zoo.seed_batching import auto_seed_batches

        units, lines = auto_seed_batches(todo, workers or os.cpu_count() or 1)
        for line in lines:
            print(line, flush=True)
    else:
        units = seed_batches(todo, int(size))
    n_batches = sum(len(u) > 1 for u in units)
    if n_batches:
        n_seeds = sum(len(u) for u in units if len(u) > 1)
        print(f"--seed-batch {size}: {n_seeds} job(s) in {n_batches} seed batch(es), {len(units)} unit(s) to run",
              flush=True)  # fmt: skip
    return units


def _claim_store(tracking: Any, skipped: Sequence[Any]) -> dict[str, str]:
    """Before running: say which pairs are skipped, mark the runs of a dead ``bench run`` KILLED (they run again)
    and return the jobs another live ``bench run`` is running now (job id -> its process).

    Args:
        tracking: the experiment's tracking session.
        skipped: pairs that cannot run.
    """
    for pair in skipped:
        print(f"skipped {pair.algo} on {pair.env_id}: {pair.reason}")
    n_stale, active = tracking.mark_stale()
    if n_stale:
        print(f"marked {n_stale} stale running job(s) KILLED (their bench run is gone); running them again")
    return active


def _print_estimate(args: argparse.Namespace, tracking: Any, jobs: Sequence[Any], todo: Sequence[Any],
                    units: Sequence[Any], until_verdict: bool = False) -> dict[str, Any]:  # fmt: skip
    """Print what the grid will cost here (:func:`lit_sb3.zoo.cost.plan_lines`); each job's cost (the ETA's
    prior).

    Args:
        args: parsed arguments (``--jobs``, ``--seed-batch``, ``--launcher``).
        tracking: the experiment's tracking session (finished runs give the rates).
        jobs: every job of the grid.
        todo: those to run.
        units: ``todo`` in seed batches.
        until_verdict: the grid is ``--until-verdict``'s.
    """
    import os

    from lit_sb3.zoo.cost import plan_lines

    workers = args.jobs or os.cpu_count() or 1
    runs = tracking.timed_job_runs(sorted({j.algo for j in jobs}))
    lines, costs = plan_lines(jobs, todo, units, largest_batch(args, units), workers, runs, args.launcher,
                              until_verdict)  # fmt: skip
    for line in lines:
        print(line, flush=True)
    return costs


def _launcher_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Ray launcher's options (``--ray-address``, ``--cpus-per-job``, ``--gpus-per-job``); none for local."""
    if args.launcher != "ray":
        return {}
    return {"address": args.ray_address, "cpus_per_job": args.cpus_per_job, "gpus_per_job": args.gpus_per_job}


def _default_experiment(envs: str) -> str:
    from lit_sb3.zoo.tracking import default_experiment_name

    return default_experiment_name(envs)


# ---------------------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------------------
def _print_plan(jobs: Sequence[Any], skipped: Sequence[Any], finished: set[str], experiment: str, uri: str) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=sys.stdout, highlight=False, width=max(120, Console(file=sys.stdout).width))
    table = Table(title=f"plan: {len(jobs)} jobs -> experiment '{experiment}' at {uri}", title_justify="left")
    for col in ("job", "job id", "env steps", "eval every", "episodes", "action"):
        table.add_column(col, justify="right" if col in ("env steps", "eval every", "episodes") else "left")
    for job in jobs:
        action = "skip (finished)" if job.job_id in finished else "run"
        table.add_row(
            Text(job.name), job.job_id, f"{job.n_timesteps:,}", f"{job.eval_freq:,}", str(job.eval_episodes), action
        )
    console.print(table)
    for pair in skipped:
        console.print(Text(f"skipped {pair.algo} on {pair.env_id}: {pair.reason}"))
    todo = [j for j in jobs if j.job_id not in finished]
    console.print(Text(
        f"total budget: {sum(j.n_timesteps for j in todo):,} env steps in {len(todo)} jobs to run "
        f"({len(jobs) - len(todo)} already finished, {len(skipped)} pairs skipped; "
        f"{sum(j.n_timesteps for j in jobs):,} env steps in the whole grid)"
    ))  # fmt: skip


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else fmt.format(value)


def _summary(results: Sequence[Any], skipped: Sequence[Any], n_done_before: int) -> tuple[list[dict[str, Any]], str]:
    rows = []
    lines = [
        "| job | job id | status | score | fps | wall time (s) | env steps | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        row = {
            "job": res.name, "job_id": res.job_id, "status": res.status, "score": res.to_dict()["score"],
            "fps": res.to_dict()["fps"], "wall_seconds": round(res.wall_seconds, 2), "env_steps": res.env_steps,
            "run_id": res.run_id, "reason": res.failure_reason,
        }  # fmt: skip
        rows.append(row)
        reason = (res.failure_reason or "").replace("|", "/")
        lines.append(f"| {res.name} | {res.job_id} | {res.status} | {_fmt(res.score, '{:.2f}')} | {_fmt(res.fps, '{:.0f}')} "
                     f"| {res.wall_seconds:.1f} | {res.env_steps} | {reason} |")  # fmt: skip
    for pair in skipped:
        lines.append(f"| {pair.algo}/{pair.env_id} | - | SKIPPED | - | - | - | - | {pair.reason} |")
    if n_done_before:
        lines.append(f"\n{n_done_before} job(s) had already finished in this experiment and were skipped.")
    return rows, "\n".join(lines) + "\n"


def _print_summary(results: Sequence[Any], skipped: Sequence[Any], n_done_before: int, n_active: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=sys.stdout, highlight=False, width=max(120, Console(file=sys.stdout).width))
    table = Table(title="summary", title_justify="left")
    for col in ("job", "status", "score", "fps", "wall time", "env steps", "reason"):
        table.add_column(col, justify="right" if col in ("score", "fps", "wall time", "env steps") else "left")
    for res in results:
        colour = "green" if res.status == "FINISHED" else "red"
        table.add_row(Text(res.name), Text(res.status, style=colour), _fmt(res.score, "{:.2f}"), _fmt(res.fps, "{:.0f}"),
                      f"{res.wall_seconds:.1f} s", f"{res.env_steps:,}", Text(res.failure_reason or ""))  # fmt: skip
    console.print(table)
    n_ok = sum(r.status == "FINISHED" for r in results)
    parts = [f"{n_ok} finished", f"{len(results) - n_ok} failed",
             f"{n_done_before} skipped (already finished)", f"{len(skipped)} pairs skipped"]  # fmt: skip
    if n_active:
        parts.append(f"{n_active} running in another bench run")
    console.print(Text(", ".join(parts)))


# ---------------------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------------------
class _RunBook:
    """Creates job runs under the grid run, ends those a worker could not."""

    def __init__(self, tracking: Any, parent_run_id: str) -> None:
        from lit_sb3.zoo.tracking import run_environment_tags

        self.tracking = tracking
        self.parent_run_id = parent_run_id
        self.env_tags = run_environment_tags()

    def start(self, spec: Any) -> str:
        return self.tracking.create_job_run(spec, self.parent_run_id, self.env_tags)

    def fail(self, run_id: str, reason: str, status: str = "FAILED", log_text: str | None = None) -> None:
        self.tracking.fail_run(run_id, reason, status=status, traceback_text=log_text)

    def status(self, run_id: str) -> str:
        return self.tracking.run_status(run_id)


def run(args: argparse.Namespace) -> int:
    """Plan, validate, run, summarise, with the progress display (not for ``--dry-run``) shown from the planning on
    and stopped on every way out.

    Args:
        args: parsed arguments.
    """
    from lit_sb3.zoo.progress import GridProgress, progress_interval

    progress = GridProgress(0, workers=args.jobs, interval=progress_interval(args.progress_interval))
    try:
        return _run(args, progress)
    finally:
        progress.stop()


def _run(args: argparse.Namespace, progress: Any) -> int:
    import os

    from lit_sb3.zoo.tracking import DEFAULT_TRACKING_URI, default_experiment_name

    uri = args.tracking_uri or DEFAULT_TRACKING_URI
    from lit_sb3.zoo.tracking import check_name, open_tracking

    if args.experiment is not None:
        check_name(args.experiment, "--experiment")  # it names folders (artifacts, reports): refused first
    launcher = None
    if not args.dry_run:  # on a terminal, the live table at once (planning, store, workers); erased on a refusal
        progress.start("planning")
    try:
        jobs, skipped, experiment, notes = _plan(args)  # notes: printed under the banner once the plan is accepted
    except BaseException:
        progress.stop(clear=True)
        raise
    # after the planning: a refused command prints its one line and nothing before it
    seeds = args.seed_list or (f"{args.seeds} seed(s)" if args.seeds else "1 seed")
    if getattr(args, "until_verdict", False):
        seeds = "seeds in waves until a verdict"
    print(f"bench run: algos {args.algos} x envs {args.envs} x {seeds}; {args.jobs or os.cpu_count()} worker(s); "
          f"experiment '{args.experiment or default_experiment_name(args.envs)}' at {uri}",
          flush=True)  # fmt: skip
    for line in notes:  # on-policy budgets rounded up to whole rollouts; each pair's evaluation protocol
        print(line if line.startswith(("evaluation: ", "note ")) else f"budget: {line}", flush=True)
    if getattr(args, "until_verdict", False):  # waves of seeds until each comparison is settled
        from lit_sb3.zoo.waves import run_until_verdict

        progress.stop(clear=True)  # each wave shows its own progress
        return run_until_verdict(args, jobs, skipped, experiment, uri)
    from lit_sb3.zoo.tracking import sqlite_finished_job_ids

    # "which jobs already finished?", asked once: of a sqlite store by one read-only query, without importing MLflow
    # (a rerun with nothing to do ends here; stale RUNNING runs are then left for the next invocation with work to
    # do), else by MLflow's client once the store is open
    finished = sqlite_finished_job_ids(uri, experiment)
    if not args.dry_run and finished is not None and all(j.job_id in finished for j in jobs):
        progress.stop(clear=True)
        for pair in skipped:
            print(f"skipped {pair.algo} on {pair.env_id}: {pair.reason}")
        print(f"nothing to do: all {len(jobs)} jobs already finished in experiment '{experiment}' ({uri})")
        return 0
    progress.set_jobs(jobs, "opening the store")
    if args.launcher == "local" and not args.dry_run:
        from lit_sb3.zoo.launchers.local import LocalLauncher

        # started as soon as there is work: the job processes' imports (torch, Lightning, MLflow, once in the
        # forkserver) overlap with MLflow's import and the store's set-up below (a no-op rerun has returned above)
        launcher = LocalLauncher(max_workers=args.jobs, timeout=args.timeout, start_method=args.start_method)
        launcher.warm_up()
    tracking = open_tracking(uri, experiment, create=not args.dry_run)
    if finished is None:
        finished = tracking.finished_job_ids()
    if args.dry_run:
        _print_plan(jobs, skipped, finished, experiment, uri)
        todo = [j for j in jobs if j.job_id not in finished]
        _print_estimate(args, tracking, jobs, todo, _seed_batch_units(todo, args.seed_batch, args.jobs))
        return 0
    active = _claim_store(tracking, skipped)
    todo = [j for j in jobs if j.job_id not in finished and j.job_id not in active]
    n_done_before = sum(j.job_id in finished for j in jobs)
    if active:
        print(f"{len(active)} job(s) are running in another bench run right now; not starting them here")
    if not todo:
        progress.stop(clear=True)
        print(f"nothing to do: all {len(jobs)} jobs already finished in experiment '{experiment}' ({uri})")
        return 0
    units = _seed_batch_units(todo, args.seed_batch, args.jobs)
    costs = _print_estimate(args, tracking, jobs, todo, units)
    # the largest K the units were given (with --seed-batch auto, K is chosen per algo x env)
    progress.set_jobs(todo, "starting workers", units=units, costs=costs, seed_batch=largest_batch(args, units))
    from lit_sb3.zoo.launchers import get_launcher

    if launcher is None:
        launcher = get_launcher(args.launcher, max_workers=args.jobs, timeout=args.timeout, start_method=args.start_method,
                                **_launcher_options(args))  # fmt: skip
    workers = getattr(launcher, "max_workers", "?")  # a Ray launcher connects here: failing now creates no run
    params = {k: v for k, v in vars(args).items() if k not in ("func", "command") and v not in (None, [], False)}
    from lit_sb3.zoo.cli import command_line

    command = command_line(args)
    parent_id = tracking.create_parent_run(command, params, run_name=f"grid-{time.strftime('%Y%m%d-%H%M%S')}")
    print(f"running {len(todo)} job(s) ({n_done_before} already finished) with {workers} worker(s); "
          f"experiment '{experiment}' at {uri}, grid run {parent_id}", flush=True)  # fmt: skip
    results: list[Any] = []
    status = "KILLED"
    try:
        from lit_sb3.zoo.launchers.base import JobDone

        with progress:
            for event in launcher.submit(units, tracking.target, _RunBook(tracking, parent_id)):
                progress.handle(event)
                if isinstance(event, JobDone):
                    results.append(event.result)
        status = "FINISHED" if all(r.status == "FINISHED" for r in results) else "FAILED"
    finally:
        rows, markdown = _summary(results, skipped, n_done_before)
        header = f"# bench run summary\n\n`{command}`\n\n"
        tracking.end_parent_run(parent_id, rows, status, header + markdown, job_ids=[j.job_id for j in jobs])
    _print_summary(results, skipped, n_done_before, len(active))
    from lit_sb3.zoo.tracking.links import results_hint

    print(results_hint(uri, experiment, tracking.target.experiment_id, grid_run_id=parent_id), flush=True)
    return 0 if status == "FINISHED" else 1
