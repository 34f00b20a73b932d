"""``bench tune``: an Optuna study (with pruning) of one algorithm on one env, tracked in MLflow.

Everything the user can get wrong (algorithm, env, sampler, pruner, search-space file, storage, tracking URI) is
checked before the first trial starts; see :mod:`lit_sb3.zoo.tuning` for the study itself.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import MAX_TRIALS, BenchError, check_count, finite_float
from lit_sb3.zoo.seed_batching import AUTO, parse_seed_batch

__all__ = ["add_parser", "run"]


#: the RL Zoo's ``train.py`` flags that ``bench tune`` names differently or does not need: flag -> what to give
ZOO_FLAGS = {
    "--optimize-hyperparameters": "bench tune always optimises: drop it",
    "-optimize": "bench tune always optimises: drop it",
    "--eval-freq": "give --n-evaluations N (evaluations per seed of a trial, its pruning points)",
    "--log-folder": "give --output FILE (the best trial's YAML) and --storage (the study)",
    "-f": "give --output FILE (the best trial's YAML) and --storage (the study)",
    "--optimization-log-path": "every trial is a run in MLflow (--tracking-uri, --experiment); the study is in --storage",
    "--tensorboard-log": "every trial is logged to MLflow (--tracking-uri, --experiment)",
    "-tb": "every trial is logged to MLflow (--tracking-uri, --experiment)",
    "--no-optim-plots": "the study's plots are logged to MLflow, never shown: drop it",
}


class _ZooFlag(argparse.Action):
    """A flag of the RL Zoo's ``train.py`` that ``bench tune`` names differently: refused by :func:`run` in one
    line naming ours."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        namespace.zoo_flag = f"{option_string} is the RL Zoo's flag: {ZOO_FLAGS[str(option_string)]}"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``tune``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    p = subparsers.add_parser("tune", help="tune the hyperparameters of one algorithm on one env with Optuna")
    from lit_sb3.algorithms.registry import ALGORITHMS

    p.add_argument("--algo", help=f"algorithm ({', '.join(ALGORITHMS)})")
    p.add_argument("--env", help="gymnasium env id")
    p.add_argument("--n-trials", "--max-total-trials", type=int, default=20, dest="n_trials",
                   help="finished (complete + pruned) trials the study should hold (the RL Zoo's --max-total-trials)")  # fmt: skip
    p.add_argument("--n-timesteps", type=int, help="env steps per seed of a trial (default: the zoo config's)")
    p.add_argument("--n-evaluations", type=int, default=10, help="periodic evaluations per seed (pruning points)")
    p.add_argument("--eval-episodes", type=int, default=5, help="deterministic episodes per evaluation")
    p.add_argument("--seeds-per-trial", type=int, default=1, help="seeds per trial; the objective is their mean")
    p.add_argument("--seed-batch", type=parse_seed_batch, default=AUTO, metavar="K|auto",
                   help="train up to K seeds of a trial together as one seed-batched model (default auto: K from the "
                   "measured efficiency table benchmarks/seed_batch.yml, at most --seeds-per-trial; 1: one after "
                   "the other)")  # fmt: skip
    p.add_argument("--sampler", default="tpe", help="tpe (default), random, cmaes, gp")
    p.add_argument("--pruner", default="median", help="median (default), halving, hyperband, none")
    p.add_argument("--n-startup-trials", type=int, default=5,
                   help="random trials before TPE/CMA-ES/GP; complete trials before the median pruner prunes")  # fmt: skip
    p.add_argument("--n-warmup-evaluations", type=int,
                   help="evaluations of a trial before the median pruner may prune it (default n_evaluations // 3)")  # fmt: skip
    p.add_argument("--storage", help="journal file path (default ./optuna/<study>.journal) or RDB URL")
    p.add_argument("--study-name", help="study name (default <algo>-<env>)")
    p.add_argument("--jobs", "--n-jobs", type=int, default=1, dest="jobs",
                   help="workers sharing the study, each a launcher unit (--n-jobs: the RL Zoo's name; 1, local: "
                   "this process)")  # fmt: skip
    p.add_argument("--launcher", choices=("local", "ray"), default="local",
                   help="local: worker processes (default); ray: Ray tasks (with --ray-address, on a cluster)")  # fmt: skip
    p.add_argument("--ray-address", metavar="auto|HOST:PORT", help="--launcher ray: the cluster (default: local Ray)")
    p.add_argument(
        "--cpus-per-job", type=finite_float, default=1.0, help="--launcher ray: CPUs of a worker (default 1)"
    )
    p.add_argument(
        "--gpus-per-job", type=finite_float, default=0.0, help="--launcher ray: GPUs of a worker (default 0)"
    )
    p.add_argument("--heartbeat-interval", type=int, default=30,
                   help="RDB storage: Optuna heartbeat seconds; a trial silent for 3x (at least 60 s) is re-run")  # fmt: skip
    p.add_argument("--trial-retries", type=int, default=2, help="times a lost worker's trial is re-run")
    p.add_argument("--timeout", type=finite_float, help="stop starting trials after this many seconds (per worker)")
    p.add_argument("--search-space", metavar="FILE", help="YAML file overriding/extending the built-in search space")
    p.add_argument("--seed", type=int, help="sampler seed (worker w uses seed + w)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow.db)")
    p.add_argument("--experiment", help="MLflow experiment (default tune-<study>)")
    p.add_argument("--objective", default="final",
                   help="final: mean over seeds of the final evaluation (default); last_mean: of the mean of the "
                        "last 3 evaluations")  # fmt: skip
    p.add_argument("--output", metavar="FILE", help="best trial as a zoo YAML (default next to the journal: "
                                                   "<study>_best.yml)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="torch device of the trials")
    p.add_argument("--progress-interval", type=float, default=None, metavar="SECONDS",
                   help="a progress line (trials, env steps, fps, ETA) every SECONDS (default 30, or "
                   "LIT_SB3_PROGRESS_SECONDS)")  # fmt: skip
    p.add_argument("--export-tuned-budget", action="store_true",
                   help="the exported YAML keeps the study's --n-timesteps (default: the zoo config's budget; the "
                   "budget tuned at is stated in its header)")  # fmt: skip
    p.add_argument("--show", action="store_true", help="print the study's best trials and exit (runs nothing)")
    p.add_argument("--top", type=int, default=10, help="trials shown by --show")
    for flag in ZOO_FLAGS:  # the zoo's names are refused with ours, not with "unrecognized arguments"
        p.add_argument(flag, nargs="?", action=_ZooFlag, help=argparse.SUPPRESS)
    p.set_defaults(func=run)
    return p


def _positive(name: str, value: int | float | None, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise BenchError(f"{name} must be >= {minimum}, got {value}")


def _output_path(args: argparse.Namespace, storage: str, study_name: str) -> Path:
    from lit_sb3.zoo.tuning.study import DEFAULT_STORAGE_DIR, is_journal

    if args.output:
        return Path(args.output)
    folder = Path(storage).parent if is_journal(storage) else Path(DEFAULT_STORAGE_DIR)
    return folder / f"{study_name}_best.yml"


def _show(args: argparse.Namespace) -> int:
    import optuna

    from lit_sb3.zoo.tracking import check_name
    from lit_sb3.zoo.tuning.export import print_best_trials
    from lit_sb3.zoo.tuning.study import default_study_name, open_storage, storage_spec

    if args.study_name is None and not (args.algo and args.env):
        raise BenchError("--show needs --study-name (or --algo and --env for the default name)")
    if args.study_name is not None:
        check_name(args.study_name, "--study-name")  # it names the journal file read
    name = args.study_name or default_study_name(args.algo.lower(), args.env)
    spec = storage_spec(args.storage, name)
    from lit_sb3.zoo.tuning.study import is_journal

    if is_journal(spec) and not Path(spec).exists():
        raise BenchError(f"no study storage at {spec} (give --storage)")
    storage = open_storage(spec)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        from lit_sb3.zoo.errors import did_you_mean

        names = optuna.get_all_study_names(storage)
        raise BenchError(f"no study '{name}' in {spec}{did_you_mean(name, names)}; studies: {', '.join(names) or 'none'}"
                         ) from None  # fmt: skip
    print_best_trials(study, top=args.top)
    return 0


def _check_space(algo: str, env_id: str, space: Any, base: Any) -> None:
    """Resolve the config of the space's first point, so a bad value fails now, not in every trial."""
    import optuna

    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.tuning.objective import override_text
    from lit_sb3.zoo.tuning.search_spaces import sample_params, to_hyperparameters

    point = {n: (s.choices[0] if s.type == "categorical" else s.low) for n, s in space.params.items()}
    sampled = sample_params(optuna.trial.FixedTrial(point), space)
    hp, _ = to_hyperparameters(algo, sampled, space.fixed, base.algo_kwargs, base.n_envs)
    resolve(algo, env_id, overrides={k: override_text(v) for k, v in hp.items()}, overrides_label=space.source)


def _fit_space(algo: str, env_id: str, space: Any, base: Any, eval_freq: int, budget: int) -> tuple[Any, list[str]]:
    """Keep sampled rollouts and warm-ups compatible with the evaluation grid; lines saying what changed.

    On-policy, one rollout (``n_steps x n_envs``) must fit between two requested evaluations, so each falls on
    its own rollout boundary after an update: ``n_steps`` choices (or its int range) are cut to
    ``n_steps x n_envs <= eval_freq``. Off-policy, ``learning_starts`` choices are cut to ``< eval_freq``.
    What cannot be cut (a fixed value, or no choice left) is an error naming the rollout size; what a cut
    space still cannot guarantee (a sampled ``train_freq`` with a large ``learning_starts``) fails that trial
    at once with the reason.
    """
    import dataclasses

    from lit_sb3.zoo.budget import ON_POLICY, exact_budget, first_update_step

    params, lines = dict(space.params), []

    def fixed(name: str, default: Any) -> Any:
        return space.fixed.get(name, default)

    if algo in ON_POLICY:
        envs_spec = params.get("n_envs")
        if envs_spec is not None:
            n_envs = int(max(envs_spec.choices) if envs_spec.choices else envs_spec.high)
        else:
            n_envs = int(fixed("n_envs", base.n_envs))
        spec = params.get("n_steps")
        if spec is None:
            n_steps = int(fixed("n_steps", base.algo_kwargs.get("n_steps", 2048)))
            exact_budget(algo, env_id, budget, n_steps * n_envs, n_steps)  # a budget below one rollout: error
            if n_steps * n_envs > eval_freq:
                raise BenchError(
                    f"one rollout (n_steps {n_steps} x n_envs {n_envs} = {n_steps * n_envs:,} env steps) is longer "
                    f"than the {eval_freq:,} env steps between two evaluations ({budget:,} / --n-evaluations): "
                    "give a larger --n-timesteps, fewer --n-evaluations or a smaller n_steps/n_envs"
                )
        elif spec.choices is not None:
            keep = tuple(c for c in spec.choices if int(c) * n_envs <= eval_freq)
            if not keep:
                smallest = min(int(c) for c in spec.choices)
                raise BenchError(
                    f"the smallest rollout of the search space (n_steps {smallest} x n_envs {n_envs} = "
                    f"{smallest * n_envs:,} env steps) is longer than the {eval_freq:,} env steps between two "
                    f"evaluations ({budget:,} / --n-evaluations): give a larger --n-timesteps or fewer --n-evaluations"
                )
            if keep != tuple(spec.choices):
                params["n_steps"] = dataclasses.replace(spec, choices=keep)
                lines.append(
                    f"search space adapted to the budget: n_steps {list(spec.choices)} -> {list(keep)} "
                    f"(a rollout n_steps x n_envs {n_envs} must fit in the {eval_freq:,} env steps between evaluations)"
                )
        else:
            high = min(int(spec.high), eval_freq // n_envs)
            if high < int(spec.low):
                raise BenchError(
                    f"the smallest rollout of the search space (n_steps {int(spec.low)} x n_envs {n_envs}) is "
                    f"longer than the {eval_freq:,} env steps between two evaluations"
                )
            if high != int(spec.high):
                params["n_steps"] = dataclasses.replace(spec, high=high)
                lines.append(f"search space adapted to the budget: n_steps <= {high} (was <= {int(spec.high)})")
        lines.append(
            f"budget: {budget:,} env steps per seed, rounded up by each trial to whole rollouts (at most "
            f"{budget + eval_freq - 1:,}); evaluations at the first rollout boundary at or after every "
            f"{eval_freq:,} env steps, after the update"
        )
    else:
        spec = params.get("learning_starts")
        if spec is not None and spec.choices is not None:
            keep = tuple(c for c in spec.choices if int(c) < eval_freq)
            if not keep:
                raise BenchError(
                    f"every learning_starts of the search space ({list(spec.choices)}) is >= the {eval_freq:,} env "
                    "steps before the first evaluation: give a larger --n-timesteps or fewer --n-evaluations"
                )
            if keep != tuple(spec.choices):
                params["learning_starts"] = dataclasses.replace(spec, choices=keep)
                lines.append(
                    f"search space adapted to the budget: learning_starts {list(spec.choices)} -> {list(keep)} "
                    f"(the first evaluation at {eval_freq:,} env steps must follow an update)"
                )
        elif spec is None:
            kwargs = {**base.algo_kwargs, **space.fixed}
            first = first_update_step(algo, kwargs, int(fixed("n_envs", base.n_envs)))
            if first > eval_freq and "train_freq" not in params:
                raise BenchError(
                    f"the first update comes after {first:,} env steps (learning_starts + 2 x train_freq x "
                    f"n_envs), after the first evaluation at {eval_freq:,}: give a larger --n-timesteps, fewer "
                    "--n-evaluations or a smaller learning_starts"
                )
        lines.append(f"budget: {budget:,} env steps per seed (exact); an evaluation every {eval_freq:,} env steps")
    return dataclasses.replace(space, params=params), lines


def run(args: argparse.Namespace) -> int:
    """Run (or resume) the study.

    Args:
        args: parsed arguments.
    """
    if getattr(args, "zoo_flag", None):
        raise BenchError(args.zoo_flag)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.show:
        return _show(args)
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.config.checks import check_device
    from lit_sb3.zoo.registry import check_algo, check_env_id, check_pair
    from lit_sb3.zoo.runner import metrics_flush_seconds
    from lit_sb3.zoo.tracking import DEFAULT_TRACKING_URI, check_name, open_tracking
    from lit_sb3.zoo.tuning.objective import OBJECTIVES, TuneSettings
    from lit_sb3.zoo.tuning.pruning import make_pruner
    from lit_sb3.zoo.tuning.search_spaces import load_search_space, space_to_jsonable
    from lit_sb3.zoo.tuning.study import (
        default_study_name,
        finished_count,
        load_or_create_study,
        make_sampler,
        open_storage,
        storage_spec,
    )

    if not args.algo or not args.env:
        raise BenchError("--algo and --env are required (or --show)")
    from lit_sb3.zoo.progress import progress_interval

    interval = progress_interval(args.progress_interval)  # a bad value fails before any work
    for flag, name in (("--study-name", args.study_name), ("--experiment", args.experiment)):
        if name is not None:
            check_name(name, flag)  # they name files and folders: refused before anything is opened
    metrics_flush_seconds()  # a bad LIT_SB3_METRICS_FLUSH_SECONDS fails here, not in every trial
    if args.search_space is not None:  # before anything else: /dev/zero or a sparse 1.5 GB file is refused unread
        from lit_sb3.zoo.config.loading import check_yaml_file

        check_yaml_file(args.search_space, f"--search-space {args.search_space}", "search space file")
    if (why := check_device(args.device)) is not None:
        raise BenchError(f"--device: {why}")
    algo = check_algo(args.algo)
    env_id = check_env_id(args.env)
    reason = check_pair(algo, env_id)
    if reason is not None:
        raise BenchError(reason)
    for name in ("n_trials", "n_timesteps", "n_evaluations", "eval_episodes", "seeds_per_trial", "jobs"):
        _positive("--" + name.replace("_", "-"), getattr(args, name))
    check_count("--n-trials", args.n_trials, maximum=MAX_TRIALS)  # bounded before the study or its seeds exist
    check_count("--seeds-per-trial", args.seeds_per_trial)
    if args.seed_batch != AUTO:
        check_count("--seed-batch", args.seed_batch)
    _positive("--heartbeat-interval", args.heartbeat_interval)
    _positive("--trial-retries", args.trial_retries, 0)
    _positive("--n-startup-trials", args.n_startup_trials, 0)
    _positive("--n-warmup-evaluations", args.n_warmup_evaluations, 0)
    if args.timeout is not None and args.timeout <= 0:
        raise BenchError(f"--timeout must be > 0, got {args.timeout}")
    if args.seed is not None and not 0 <= args.seed <= 2**32 - 1:
        raise BenchError(f"--seed must be in [0, {2**32 - 1}] (numpy's seed range), got {args.seed}")
    if args.objective not in OBJECTIVES:
        from lit_sb3.zoo.errors import did_you_mean

        raise BenchError(f"unknown objective '{args.objective}'{did_you_mean(args.objective, OBJECTIVES)}; "
                         f"known: {', '.join(OBJECTIVES)}")  # fmt: skip
    make_sampler(args.sampler, seed=args.seed, n_startup_trials=args.n_startup_trials)
    make_pruner(args.pruner, n_startup_trials=1, n_warmup_steps=0, eval_freq=1, max_resource=2)
    base = resolve(algo, env_id)
    from lit_sb3.zoo.config.env_fit import check_config_on_env

    check_config_on_env(base)
    n_timesteps = args.n_timesteps or base.n_timesteps
    if not n_timesteps:
        raise BenchError(f"no budget for {algo} on {env_id}: the zoo config sets no n_timesteps; give --n-timesteps")
    if args.n_evaluations > n_timesteps:
        raise BenchError(f"--n-evaluations ({args.n_evaluations}) must be <= the budget ({n_timesteps})")
    eval_freq = max(1, n_timesteps // args.n_evaluations)
    warmup = args.n_evaluations // 3 if args.n_warmup_evaluations is None else args.n_warmup_evaluations
    warmup_steps = warmup * eval_freq + 1 if warmup else 0  # evaluation warmup + 1 is the first that may prune
    space = load_search_space(algo, args.search_space)
    space, budget_lines = _fit_space(algo, env_id, space, base, eval_freq, int(n_timesteps))
    _check_space(algo, env_id, space, base)

    seed_batch_line = None
    if args.seed_batch == AUTO:
        from lit_sb3.zoo.seed_batching import choose_k

        args.seed_batch, why = choose_k(algo, env_id, args.seeds_per_trial)
        seed_batch_line = f"--seed-batch auto: {args.seeds_per_trial} seed(s) per trial, K={args.seed_batch} ({why})"
    study_name = args.study_name or default_study_name(algo, env_id)
    storage = storage_spec(args.storage, study_name)
    if args.launcher == "ray":
        from lit_sb3.zoo.tuning.workers import check_ray_tuning

        check_ray_tuning(storage, args.ray_address)
    opened = open_storage(storage)
    tracking = open_tracking(args.tracking_uri or DEFAULT_TRACKING_URI, args.experiment or f"tune-{study_name}")
    settings = TuneSettings(
        algo=algo, env_id=env_id, study_name=study_name, storage=storage, n_trials=args.n_trials,
        n_timesteps=int(n_timesteps), eval_freq=eval_freq, eval_episodes=args.eval_episodes,
        seeds_per_trial=args.seeds_per_trial, objective=args.objective, space=space_to_jsonable(space),
        sampler=args.sampler.lower(), pruner=args.pruner.lower(), n_startup_trials=args.n_startup_trials,
        n_warmup_steps=warmup_steps, seed=args.seed, timeout=args.timeout, tracking=tracking.target,
        parent_run_id=None, device=args.device, n_evaluations=args.n_evaluations, seed_batch=args.seed_batch,
    )  # fmt: skip
    study = load_or_create_study(settings, storage=opened)
    done = finished_count(study)
    output = _output_path(args, storage, study_name)
    print(f"study {study_name} ({algo} on {env_id}): {done} finished trial(s) of {args.n_trials}; storage {storage}; "
          f"{n_timesteps} env steps x {args.seeds_per_trial} seed(s) per trial, {args.n_evaluations} evaluations "
          f"per seed (every {eval_freq} steps)", flush=True)  # fmt: skip
    for line in budget_lines:
        print(line, flush=True)
    if seed_batch_line is not None:
        print(seed_batch_line, flush=True)
    if done >= args.n_trials:
        print("nothing to run: the study already holds the requested number of trials")
        return _finish(study, output, None, None, storage=storage, tuned_budget=args.export_tuned_budget)

    tags = {"lit_sb3.study_name": study_name, "lit_sb3.sampler": settings.sampler, "lit_sb3.pruner": settings.pruner,
            "lit_sb3.algo": algo, "lit_sb3.env": env_id, "lit_sb3.optuna_storage": storage}  # fmt: skip
    from lit_sb3.zoo.cli import command_line

    command = command_line(args)
    params = {"n_trials": args.n_trials, "n_timesteps": n_timesteps, "eval_freq": eval_freq,
              "eval_episodes": args.eval_episodes, "seeds_per_trial": args.seeds_per_trial,
              "objective": args.objective, "n_startup_trials": args.n_startup_trials, "n_warmup_steps": warmup_steps,
              "jobs": args.jobs, "search_space": args.search_space or "built-in", "seed": args.seed}  # fmt: skip
    parent_id = tracking.create_parent_run(command, params, run_name=f"study-{study_name}", run_type="study", tags=tags)
    tracking.log_dict(parent_id, settings.space, "search_space.json")
    settings = TuneSettings(**{**settings.__dict__, "parent_run_id": parent_id})
    t0 = time.monotonic()
    status = "FINISHED"
    try:
        from lit_sb3.zoo.tuning.progress import StudyProgress
        from lit_sb3.zoo.tuning.workers import tune_worker, worker_tasks

        steps = int(n_timesteps) * args.seeds_per_trial
        with StudyProgress(storage, study_name, args.n_trials, steps, args.jobs, interval):
            if args.launcher == "local" and args.jobs == 1:  # one worker: this process, no unit to launch
                code = tune_worker(settings, 0, args.heartbeat_interval, args.trial_retries)
            else:
                from lit_sb3.zoo import pipeline

                tasks = worker_tasks(settings, args.jobs, args.heartbeat_interval, args.trial_retries)
                code = pipeline.run_tasks(pipeline.make_launcher(args, show_output=True), tasks)
    except BaseException:
        status = "KILLED"
        tracking.end_run(parent_id, status)
        raise
    wall = time.monotonic() - t0
    study = load_or_create_study(settings, storage=opened)
    return _finish(study, output, (tracking, parent_id), wall, code, storage=storage,
                   tuned_budget=args.export_tuned_budget)  # fmt: skip


def _finish(study: Any, output: Path, mlflow_run: tuple[Any, str] | None, wall: float | None, code: int = 0, *,
            storage: str = "", tuned_budget: bool = False) -> int:  # fmt: skip
    """Summary, figures, export, end of the study run (``mlflow_run``: the
    :class:`~lit_sb3.zoo.tracking.Tracking` and the study's run id), then where to look and what to run next."""
    from optuna.trial import TrialState

    from lit_sb3.zoo.tuning.export import log_study_figures, write_best_yaml

    trials = study.get_trials(deepcopy=False)
    counts = {s: sum(t.state == s for t in trials) for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    line = (f"study {study.study_name}: {len(trials)} trials: {counts[TrialState.COMPLETE]} complete, "
            f"{counts[TrialState.PRUNED]} pruned, {counts[TrialState.FAIL]} failed")  # fmt: skip
    if wall is not None:
        line += f" ({wall:.1f} s this run)"
    print(line, flush=True)
    path = None
    if counts[TrialState.COMPLETE]:
        best = study.best_trial
        path = write_best_yaml(study, output, tuned_budget)
        print(f"best trial {best.number}: value {best.value:.6g}; zoo config written to {path}", flush=True)
    else:
        print("no complete trial: nothing exported")
    if mlflow_run is not None:
        store, run_id = mlflow_run
        try:
            log_study_figures(study, store, run_id)
            metrics = {"study/n_complete": counts[TrialState.COMPLETE], "study/n_pruned": counts[TrialState.PRUNED],
                       "study/n_failed": counts[TrialState.FAIL]}  # fmt: skip
            if counts[TrialState.COMPLETE]:
                metrics["study/best_value"] = study.best_value
                store.set_tags(run_id, {"lit_sb3.best_trial": study.best_trial.number})
            if wall is not None:
                metrics["time/wall_seconds"] = wall
            store.log_metrics(run_id, metrics)
            if path is not None:
                store.log_artifact(run_id, path)
        finally:
            store.end_run(run_id, "FINISHED" if code == 0 else "FAILED")
        from lit_sb3.zoo.tracking.links import study_hint

        print(study_hint(store.target.uri, store.target.experiment_id, run_id), flush=True)
    from lit_sb3.zoo.tuning.study import dashboard_command

    if storage:
        print(f"study in optuna-dashboard: {dashboard_command(storage)}", flush=True)
    if path is not None:
        attrs = study.user_attrs
        print(f"next: bench run --algos {attrs.get('algo')} --envs {shlex.quote(str(attrs.get('env_id')))} --config "
              f"{shlex.quote(str(path))} --seeds 5   (the tuned config on 5 seeds, tracked in MLflow)", flush=True)  # fmt: skip
    return code
