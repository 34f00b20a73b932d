"""``bench run``: train algos x envs x seeds in parallel local processes, tracked in MLflow, resumable.

Everything is validated before any job starts (algos, envs and suites with suggestions, config files with
file:line, hyperparameter keys with the allowed names, the tracking URI); an (algo, env) pair whose action
space the algorithm cannot handle is skipped with one line, and it is an error only when nothing is left.
Re-running the same command skips the jobs already FINISHED in the experiment, marks stale RUNNING ones
KILLED and runs them (and the failed ones) again. Exit status: 0 when every job finished, 1 when some
failed, 2 for bad input, 130 when interrupted. The steps (plan, claim, launch, summarise) are
:mod:`lit_sb3.zoo.pipeline`'s, shared with ``--until-verdict``.
"""

from __future__ import annotations

import argparse
from typing import Any

from lit_sb3.zoo import pipeline
from lit_sb3.zoo.errors import finite_float
from lit_sb3.zoo.seed_batching import AUTO, parse_seed_batch

__all__ = ["add_parser", "run"]


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
        # notes: printed under the banner once the plan is accepted
        jobs, skipped, experiment, notes = pipeline.plan(args)
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
        # started as soon as there is work: the job processes' imports (torch, Lightning, MLflow, once in the
        # forkserver) overlap with MLflow's import and the store's set-up below (a no-op rerun has returned above)
        launcher = pipeline.make_launcher(args, args.timeout)
        launcher.warm_up()
    tracking = open_tracking(uri, experiment, create=not args.dry_run)
    if finished is None:
        finished = tracking.finished_job_ids()
    if args.dry_run:
        pipeline.print_plan(jobs, skipped, finished, experiment, uri)
        todo = [j for j in jobs if j.job_id not in finished]
        pipeline.print_estimate(args, tracking, jobs, todo, pipeline.seed_batch_units(todo, args.seed_batch, args.jobs))
        return 0
    active = pipeline.claim(tracking, skipped, jobs)
    todo = [j for j in jobs if j.job_id not in finished and j.job_id not in active]
    n_done_before = sum(j.job_id in finished for j in jobs)
    if active:
        print(f"{len(active)} job(s) are running in another bench run right now; not starting them here")
    if not todo:
        progress.stop(clear=True)
        print(f"nothing to do: all {len(jobs)} jobs already finished in experiment '{experiment}' ({uri})")
        return 0
    units = pipeline.seed_batch_units(todo, args.seed_batch, args.jobs)
    costs = pipeline.print_estimate(args, tracking, jobs, todo, units)
    # the largest K the units were given (with --seed-batch auto, K is chosen per algo x env)
    progress.set_jobs(todo, "starting workers", units=units, costs=costs,
                      seed_batch=pipeline.largest_batch(args, units))  # fmt: skip
    if launcher is None:
        launcher = pipeline.make_launcher(args, args.timeout)
    workers = getattr(launcher, "max_workers", "?")  # a Ray launcher connects here: failing now creates no run
    parent_id, command = pipeline.open_grid_run(args, tracking, "grid")
    print(f"running {len(todo)} job(s) ({n_done_before} already finished) with {workers} worker(s); "
          f"experiment '{experiment}' at {uri}, grid run {parent_id}", flush=True)  # fmt: skip
    results: list[Any] = []
    status = "KILLED"
    try:
        for result in pipeline.launch(launcher, units, tracking, parent_id, progress):
            results.append(result)  # one by one: an interruption's summary has those that ended
        status = "FINISHED" if all(r.status == "FINISHED" for r in results) else "FAILED"
    finally:
        pipeline.summarise(tracking, parent_id, f"# bench run summary\n\n`{command}`\n\n", results, skipped, status,
                           [j.job_id for j in jobs], n_done_before)  # fmt: skip
    pipeline.print_summary(results, skipped, n_done_before, len(active))
    from lit_sb3.zoo.tracking.links import results_hint

    print(results_hint(uri, experiment, tracking.target.experiment_id, grid_run_id=parent_id), flush=True)
    return 0 if status == "FINISHED" else 1
