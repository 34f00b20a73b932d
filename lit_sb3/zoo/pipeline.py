"""The suite's one pipeline: plan, claim, launch and summarise a grid of jobs.

``bench run`` (:mod:`lit_sb3.zoo.commands.run`) and ``bench run --until-verdict`` (:mod:`lit_sb3.zoo.waves`) go
through these steps, in this order (``bench tune`` launches its workers through :func:`make_launcher` and
:func:`run_tasks`, each claiming its trials' slots with :class:`TrialSlotLock`):

- :func:`plan`: every argument checked, the grid expanded into jobs (:func:`lit_sb3.zoo.jobs.plan_grid`), before
  anything is created;
- :func:`claim`: the tracking store's stale runs of a dead invocation KILLED, the jobs another live invocation
  runs set aside;
- :func:`seed_batch_units` and :func:`print_estimate`: the jobs to run grouped into launcher units, with what they
  will cost here;
- :func:`open_grid_run`, :func:`launch` (the units through a launcher of :mod:`lit_sb3.zoo.launchers`, local or
  Ray, with the live progress) and :func:`summarise` (the grid run ended with its summary, the summary printed).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from lit_sb3.zoo.errors import MAX_SEEDS, BenchError, check_count
from lit_sb3.zoo.seed_batching import AUTO

__all__ = [
    "MAX_SEED",
    "Plan",
    "RunBook",
    "TrialSlotLock",
    "claim",
    "largest_batch",
    "launch",
    "make_launcher",
    "open_grid_run",
    "plan",
    "print_estimate",
    "print_plan",
    "print_summary",
    "run_tasks",
    "seed_batch_units",
    "summarise",
    "wide_console",
]

#: a job's seed seeds numpy, whose seeds are 32-bit; a grid of more seeds than this is a typo
MAX_SEED = 2**32 - 1


class Plan(NamedTuple):
    """A checked grid.

    Args:
        jobs: the jobs, each once (``--until-verdict``: each pair's job of seed 0).
        skipped: pairs that cannot run (with their reasons).
        experiment: the MLflow experiment.
        notes: lines to print under the banner once the plan is accepted.
    """

    jobs: list[Any]
    skipped: list[Any]
    experiment: str
    notes: list[str]


# ---------------------------------------------------------------------------------------------------------
# plan
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


def _launcher_options(args: argparse.Namespace, show_output: bool = False) -> dict[str, Any]:
    """The Ray launcher's options (``--ray-address``, ``--cpus-per-job``, ``--gpus-per-job``; the workers' output
    printed here or not); none for local."""
    if args.launcher != "ray":
        return {}
    return {"address": args.ray_address, "cpus_per_job": args.cpus_per_job, "gpus_per_job": args.gpus_per_job,
            "log_to_driver": show_output}  # fmt: skip


def plan(args: argparse.Namespace) -> Plan:
    """Check every argument and expand the grid into jobs; nothing is created (a bad input is a
    :class:`~lit_sb3.zoo.errors.BenchError`).

    Args:
        args: parsed ``bench run`` arguments.
    """
    from lit_sb3.zoo.commands.show_config import parse_overrides
    from lit_sb3.zoo.config.loading import check_yaml_file
    from lit_sb3.zoo.extras import check_env_extras, check_extra
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.plan_cache import PlanCache
    from lit_sb3.zoo.suites import default_budgets, expand_algos, expand_envs
    from lit_sb3.zoo.waves import check_arguments

    for path in args.config:  # before anything else: /dev/zero or a sparse 1.5 GB file is refused unread
        check_yaml_file(path, f"--config {path}", "config file")
    algos = expand_algos(args.algos)
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
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BenchError("--device cuda: no CUDA device is available here; use --device cpu or auto")
    impls, eval_seed_offset = _impls(args)
    from lit_sb3.zoo.tracking import default_experiment_name, metrics_flush_seconds

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
    cache.flush()
    return Plan(unique, list(skipped), args.experiment or default_experiment_name(args.envs), notes)


def print_plan(jobs: Sequence[Any], skipped: Sequence[Any], finished: set[str], experiment: str, uri: str) -> None:
    """``--dry-run``: the jobs as a table, each with what a run would do with it, and the budget.

    Args:
        jobs: the grid's jobs.
        skipped: pairs that cannot run.
        finished: ids of the jobs already FINISHED.
        experiment: the experiment.
        uri: the tracking URI.
    """
    from rich.table import Table
    from rich.text import Text

    console = wide_console()
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


# ---------------------------------------------------------------------------------------------------------
# claim
# ---------------------------------------------------------------------------------------------------------
def claim(tracking: Any, skipped: Sequence[Any], jobs: Sequence[Any]) -> dict[str, str]:
    """Before running: say which pairs are skipped, mark the runs of a dead ``bench run`` KILLED (they run again)
    and return the jobs of this grid that another live ``bench run`` is running now (job id -> its process); the
    other invocation's jobs outside this grid are none of its business (two grids may share an experiment).

    Args:
        tracking: the experiment's tracking session.
        skipped: pairs that cannot run.
        jobs: this invocation's jobs.
    """
    for pair in skipped:
        print(f"skipped {pair.algo} on {pair.env_id}: {pair.reason}")
    n_stale, active = tracking.mark_stale()
    if n_stale:
        print(f"marked {n_stale} stale running job(s) KILLED (their bench run is gone); running them again")
    return {j.job_id: active[j.job_id] for j in jobs if j.job_id in active}


# ---------------------------------------------------------------------------------------------------------
# units and their cost
# ---------------------------------------------------------------------------------------------------------
def seed_batch_units(todo: Sequence[Any], size: int | str, workers: int | None = None) -> list[Any]:
    """The jobs to run grouped into seed batches (:func:`~lit_sb3.zoo.jobs.seed_batches`), with one line saying
    how many (``auto``: :func:`~lit_sb3.zoo.seed_batching.auto_seed_batches`, one line per algo x env saying which
    K and why).

    Args:
        todo: the jobs to run.
        size: ``--seed-batch`` (an integer >= 1 or ``"auto"``).
        workers: parallel worker slots (``--jobs``; default: the number of CPUs), for ``auto``.
    """
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


def largest_batch(args: argparse.Namespace, units: Sequence[Sequence[Any]]) -> int:
    """The most seeds a unit trains together: ``--seed-batch K``, or with ``auto`` (K chosen per algo x env) the
    largest unit's size; what the estimate and the progress take as K.

    Args:
        args: parsed arguments.
        units: the jobs in seed batches.
    """
    return int(args.seed_batch) if args.seed_batch != AUTO else max(map(len, units), default=1)


def print_estimate(args: argparse.Namespace, tracking: Any, jobs: Sequence[Any], todo: Sequence[Any],
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
    from lit_sb3.zoo.cost import plan_lines

    workers = args.jobs or os.cpu_count() or 1
    runs = tracking.timed_job_runs(sorted({j.algo for j in jobs}))
    lines, costs = plan_lines(jobs, todo, units, largest_batch(args, units), workers, runs, args.launcher,
                              until_verdict)  # fmt: skip
    for line in lines:
        print(line, flush=True)
    return costs


# ---------------------------------------------------------------------------------------------------------
# launch
# ---------------------------------------------------------------------------------------------------------
def make_launcher(args: argparse.Namespace, timeout: float | None = None, show_output: bool = False) -> Any:
    """The launcher of ``--launcher`` with its options (``--jobs``, ``--start-method``, Ray's).

    Args:
        args: parsed arguments.
        timeout: seconds a job may run (``bench run --timeout``; None: no limit).
        show_output: Ray: print the workers' output here (``bench tune``'s trial lines).
    """
    from lit_sb3.zoo.launchers import get_launcher

    return get_launcher(args.launcher, max_workers=args.jobs, timeout=timeout,
                        start_method=getattr(args, "start_method", None), **_launcher_options(args, show_output))  # fmt: skip


class RunBook:
    """Creates job runs under the grid run, ends those a worker could not
    (:class:`lit_sb3.zoo.launchers.base.RunBook`).

    Args:
        tracking: the experiment's tracking session.
        parent_run_id: the grid run.
    """

    def __init__(self, tracking: Any, parent_run_id: str) -> None:
        from lit_sb3.zoo.tracking import run_environment_tags

        self.tracking = tracking
        self.parent_run_id = parent_run_id
        self.env_tags = run_environment_tags()

    def start(self, spec: Any) -> str:
        """Create the job's run; its id."""
        return self.tracking.create_job_run(spec, self.parent_run_id, self.env_tags)

    def fail(self, run_id: str, reason: str, status: str = "FAILED", log_text: str | None = None) -> None:
        """End a run whose worker could not."""
        self.tracking.fail_run(run_id, reason, status=status, traceback_text=log_text)

    def status(self, run_id: str) -> str:
        """The run's status."""
        return self.tracking.run_status(run_id)


def open_grid_run(args: argparse.Namespace, tracking: Any, prefix: str,
                  tags: dict[str, str] | None = None) -> tuple[str, str]:  # fmt: skip
    """Create the invocation's grid run (params: the options given; the command line derived from the parser);
    its id and the command line.

    Args:
        args: parsed arguments.
        tracking: the experiment's tracking session.
        prefix: the run name's, before the date (``grid``, ``verdict``).
        tags: more tags.
    """
    from lit_sb3.zoo.cli import command_line

    params = {k: v for k, v in vars(args).items() if k not in ("func", "command") and v not in (None, [], False)}
    command = command_line(args)
    parent_id = tracking.create_parent_run(command, params, run_name=f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}",
                                           tags=tags)  # fmt: skip
    return parent_id, command


def launch(launcher: Any, units: Sequence[Any], tracking: Any, parent_id: str, progress: Any) -> Iterator[Any]:
    """Run the units through the launcher, each job's run under the grid run, the events shown by ``progress``
    (a :class:`~lit_sb3.zoo.progress.GridProgress`, started and stopped here); yields each job's result as it ends.

    Args:
        launcher: a :class:`~lit_sb3.zoo.launchers.base.Launcher`.
        units: the jobs in seed batches.
        tracking: the experiment's tracking session.
        parent_id: the grid run.
        progress: the live display.
    """
    from lit_sb3.zoo.launchers.base import JobDone

    with progress:
        for event in launcher.submit(units, tracking.target, RunBook(tracking, parent_id)):
            progress.handle(event)
            if isinstance(event, JobDone):
                yield event.result


def run_tasks(launcher: Any, tasks: Sequence[Any]) -> int:
    """Run tasks (``bench tune``'s workers) through the launcher, one unit each; 0 when every one returned 0, else
    1 (a task that did not return is said in one line).

    Args:
        launcher: a :class:`~lit_sb3.zoo.launchers.base.Launcher`.
        tasks: :class:`~lit_sb3.zoo.launchers.base.Task` units.
    """
    from lit_sb3.zoo.launchers.base import TaskDone

    codes = []
    for event in launcher.submit(tasks, None, None):
        if isinstance(event, TaskDone):
            if event.reason is not None:
                print(f"{event.task.name} failed: {event.reason}", flush=True)
            codes.append(event.code)
    return 0 if len(codes) == len(tasks) and all(code == 0 for code in codes) else 1


# ---------------------------------------------------------------------------------------------------------
# claim (bench tune): a trial slot
# ---------------------------------------------------------------------------------------------------------
class TrialSlotLock:
    """A lock shared by every worker of one study (``bench tune``'s trial slots), held from "how many trials are
    left?" until the trial this worker then starts exists (RUNNING, so the others count it): two workers can no
    longer both take the last slot and run the study over, resumed studies included. PostgreSQL: an advisory lock
    (``pg_advisory_lock``); MySQL: ``GET_LOCK``; a journal file or a sqlite file (one machine): ``flock`` on
    ``<storage file>.lock``.

    Why not Optuna's own API: ``MaxTrialsCallback(n_trials, states=...)`` runs after a trial has ended and stops
    the study then; it reserves nothing, so it cannot hold back a worker's first trial, and two workers that count
    at the same moment both start one (N workers ran a study up to N - 1 trials over; 4 COMPLETE of 3 requested
    was seen under load). The storages pop a WAITING trial atomically, but ``study.ask``/``optimize`` create a new
    trial when none is waiting, so there is no public "take a slot or stop" either: deciding and creating the
    trial under one lock is what keeps the count.

    Args:
        spec: the storage spec.
        study_name: the study name (the lock's key).
    """

    def __init__(self, spec: str, study_name: str) -> None:
        import hashlib

        from lit_sb3.zoo.tuning.study import is_journal

        self.spec, self.name = spec, f"lit_sb3-tune-{study_name}"
        self.key = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:8], "big") & (2**63 - 1)
        self._engine: Any = None
        self._held: Any = None
        if is_journal(spec) or spec.startswith("sqlite:///"):
            self.path: str | None = (spec if is_journal(spec) else spec[len("sqlite:///") :].split("?")[0]) + ".lock"
        else:
            self.path = None
            if spec.startswith(("postgresql", "postgres", "mysql")):
                import sqlalchemy
                from sqlalchemy.pool import NullPool

                self._engine = sqlalchemy.create_engine(spec, poolclass=NullPool)

    def acquire(self) -> None:
        """Block until this worker holds the lock."""
        if self.path is not None:
            import fcntl

            handle = open(self.path, "a")  # noqa: SIM115 - held until release()
            fcntl.flock(handle, fcntl.LOCK_EX)
            self._held = handle
        elif self._engine is not None:
            import sqlalchemy

            conn = self._engine.connect()
            if self._engine.dialect.name == "mysql":
                conn.execute(sqlalchemy.text("SELECT GET_LOCK(:n, -1)"), {"n": self.name})
            else:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.key})
            self._held = conn

    def release(self) -> None:
        """Let the next worker in (idempotent)."""
        held, self._held = self._held, None
        if held is None:
            return
        with contextlib.suppress(Exception):
            if self.path is not None:
                import fcntl

                fcntl.flock(held, fcntl.LOCK_UN)
            else:
                import sqlalchemy

                if self._engine.dialect.name == "mysql":
                    held.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:n)"), {"n": self.name})
                else:
                    held.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
        held.close()


# ---------------------------------------------------------------------------------------------------------
# summarise
# ---------------------------------------------------------------------------------------------------------
def wide_console() -> Any:
    """A rich console on stdout at least 120 columns wide: a table fits whole also when the output is not a
    terminal (a log, a pipe), where rich would otherwise squeeze it into 80 columns."""
    from rich.console import Console

    return Console(file=sys.stdout, highlight=False, width=max(120, Console(file=sys.stdout).width))


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


def summarise(tracking: Any, parent_id: str, header: str, results: Sequence[Any], skipped: Sequence[Any],
              status: str, job_ids: Iterable[str], n_done_before: int = 0) -> None:  # fmt: skip
    """End the grid run with its summary (``summary.json``, ``summary.md``: ``header``, then a row per job).

    Args:
        tracking: the experiment's tracking session.
        parent_id: the grid run.
        header: the summary's Markdown above the table.
        results: the jobs' results.
        skipped: pairs that could not run.
        status: the grid run's status.
        job_ids: the jobs of the grid (its summary metrics count their FINISHED runs).
        n_done_before: jobs already finished before this invocation.
    """
    rows, markdown = _summary(results, skipped, n_done_before)
    tracking.end_parent_run(parent_id, rows, status, header + markdown, job_ids=job_ids)


def print_summary(results: Sequence[Any], skipped: Sequence[Any], n_done_before: int, n_active: int) -> None:
    """The jobs' results as a terminal table and one line of counts.

    Args:
        results: the jobs' results.
        skipped: pairs that could not run.
        n_done_before: jobs already finished before this invocation.
        n_active: jobs left to another live invocation.
    """
    from rich.table import Table
    from rich.text import Text

    console = wide_console()
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
