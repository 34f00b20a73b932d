"""Run jobs inside a worker process, each recorded in its own MLflow run: THE job path of the suite.

Every unit a launcher runs (a local process, a Ray task) and every group of a ``bench tune`` trial's seeds is a
seed batch of K >= 1 jobs that differ only by their seed, and :func:`run_jobs` runs it; K = 1 is a single job
(:func:`run_job` is that call). One model trains the K seeds (K = 1: the algorithm class itself; K > 1:
``lit_sb3.SeedBatch``, networks stacked along the seeds) with :class:`~lit_sb3.RLTrainer`, and each seed keeps
what a separate run has: its train env and its eval env (same wrappers; VecNormalize statistics synced before each
evaluation, rewards not normalised), its MLflow child run (:class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`:
metrics sent in one ``log_batch`` every :data:`~lit_sb3.zoo.tracking.METRICS_FLUSH_SECONDS` and at the end; for
K > 1 the model's ``seed{i}/<key>`` metrics are routed there by ``lit_sb3.SeedRoutingLogger``), its divergence
guard (:mod:`~lit_sb3.zoo.worker.guards`), its evaluation, hook and progress callbacks
(:mod:`~lit_sb3.zoo.worker.callbacks`, bound to a :class:`~lit_sb3.zoo.worker.callbacks.SeedView` of seed ``i``:
``model.member(i)`` evaluated on seed ``i``'s eval env), its artifacts and its final status.

At the first env step at or past each multiple of ``eval_freq`` (total env steps over all sub-envs)
``eval_episodes`` deterministic episodes are run and ``eval/mean_reward``/``eval/std_reward`` logged at ``step = env
steps``. At the end a seed's score is its final evaluation (``final/mean_reward``), then the resolved config, the
model zip (``model.member(i).save``: loadable by the single-seed class), the VecNormalize statistics and
``evaluations.csv`` are uploaded and its run is ended FINISHED.

Failures: a seed whose reward, loss or logged value becomes NaN/inf, whose env raises, whose own callbacks
(evaluation, hooks, progress) or logger raise, or that the model masks itself (``model.failed``), is failed alone
(``model.fail_seed``; a single model stops): its run ends FAILED at once with ``lit_sb3.failure_reason`` and
``traceback.txt``, the other seeds go on. An exception that escapes a K > 1 model's fit (its update or its stacked
forward: one computation for every seed, which cannot name the seed it came from; e.g. the memory of the stacked
tensors, an operation the stacked layers do not support) fails no seed: the seeds the model had already failed are recorded, the others'
runs keep what they logged, and each is trained again alone, one after the other, from the start on its own run
(tagged :data:`BATCH_RAISED_TAG`), logging only past the points its run already holds. A seed alone is its
separate run, so its outcome is its separate run's, and a seed whose own run raises fails alone with its reason.
This repeats each rerun seed's env steps up to the failure once (the records are not repeated): resuming it
where it was would need its whole training state taken out of the stacked model (its replay storage, random
stream, last observations), which the library does not offer. A single model's exception fails its run.
A config that cannot be trained as one K-seed model (the library refuses it
when the model is built, :func:`_build_model`; or the config's ``callback:`` entries, which run on one model per
seed) is found before any training: its seeds then run here as batches of one, one after the
other, with one line in the job log. Each seed's run is tagged :data:`SEED_BATCH_TAG` with the number of seeds its
model trained together.

Evaluation hooks (used by ``bench tune`` for pruning)
-----------------------------------------------------
``run_jobs(..., on_evaluation=hook_or_hooks)`` calls every hook after each periodic evaluation of each seed as
``hook(step, mean_reward)`` where ``step`` is the env-step count (``seed_hooks[i]``: more hooks for seed ``i``).
A hook that returns ``False`` stops the model cleanly (every seed): training ends at that step, no further
evaluation is made (the score is that evaluation), the artifacts are still saved, the runs get the tag
``lit_sb3.stopped_early=true`` and end with ``stopped_status`` (``FINISHED`` unless the caller says e.g.
``KILLED`` for a pruned trial). Returning ``None``/``True`` continues. An exception raised by a hook fails that
seed's run (``callback raised at step N: ...``), the other seeds go on. :class:`JobResult` reports
``stopped_early`` and the env steps actually used (``env_steps``)::

    def prune(step: int, mean_reward: float) -> bool:
        trial.report(mean_reward, step)
        return not trial.should_prune()

    result = run_job(spec, tracking, on_evaluation=prune, stopped_status="KILLED")
    if result.stopped_early: ...

``progress`` (optional) receives :class:`JobProgress` snapshots of each seed about once a second and after every
evaluation; the local launcher forwards them to the parent's live table.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.tracking import TrackingTarget, metrics_flush_seconds
from lit_sb3.zoo.worker.envs import build_env, build_model, import_path, model_arguments
from lit_sb3.zoo.worker.protocol import (
    DivergenceError,
    EvaluationHook,
    JobProgress,
    JobResult,
    failure_reason,
    result_from_dict,
)

__all__ = [
    "DivergenceError",
    "EvaluationHook",
    "JobProgress",
    "JobResult",
    "build_env",
    "build_model",
    "finish_job",
    "log_interval",
    "metrics_flush_seconds",
    "record_failure",
    "result_from_dict",
    "run_job",
    "run_jobs",
    "SEED_BATCH_TAG",
    "BATCH_RAISED_TAG",
]

SEED_BATCH_TAG = "lit_sb3.seed_batch"
"""Tag of each seed's run: how many seeds its model trained together (1: alone, as a single job)."""

BATCH_RAISED_TAG = "lit_sb3.seed_batch_raised"
"""Tag of a seed's run that its seed batch's model raised in, the seed then rerun alone: the batch's reason."""

AUTO_LOG_ENV_STEPS = 1024
"""On-policy jobs dump their scalars every ceil(1024 / (n_steps * n_envs)) iterations unless told otherwise."""


def log_interval(spec: JobSpec, model: Any, n_envs: int) -> int | None:
    """The job's log interval: ``spec.log_interval`` if set; else, on-policy, the fewest iterations that span
    :data:`AUTO_LOG_ENV_STEPS` env steps; else None (the algorithm's default: SB3's 4 episodes off-policy).

    An on-policy dump is 16 metric rows and MLflow's sqlite store spends ~0.18 ms per row, so SB3's one dump per
    iteration costs a PPO CartPole job (256 env steps per iteration, ~2,500 env steps/s) 3-4 % of its wall time
    even with batched sends; one dump per 1,024 env steps costs ~1 %, and a 100k-step run still has ~100 points
    per curve (``benchmarks/bench_grid.py``).

    Args:
        spec: the job.
        model: the algorithm (on-policy ones have ``n_steps``).
        n_envs: sub-envs of the train env.
    """
    from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm

    if spec.log_interval is not None:
        return spec.log_interval
    if isinstance(model, OnPolicyAlgorithm):
        return max(1, math.ceil(AUTO_LOG_ENV_STEPS / (model.n_steps * n_envs)))
    return None


# ---------------------------------------------------------------------------------------------------------
# the job
# ---------------------------------------------------------------------------------------------------------
def _accelerator(device: str) -> str:
    return {"cpu": "cpu", "cuda": "gpu"}.get(device.split(":")[0], "auto")


def _write_artifacts(folder: Path, spec: JobSpec, model: Any, rows: list[tuple[int, float, float, float]]) -> None:
    cfg = spec.resolved_config()
    config = {"job_id": spec.job_id, "job": json.loads(spec.to_json()), "resolved": cfg.to_jsonable()}
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    try:
        import yaml

        (folder / "config.yml").write_text(yaml.safe_dump({spec.env_id: config["resolved"]}, sort_keys=False))
    except Exception:  # noqa: BLE001 - the YAML copy is a convenience
        pass
    model.save(folder / "model.zip")
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is not None:
        vec_normalize.save(folder / "vecnormalize.json")
    with open(folder / "evaluations.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["step", "mean_reward", "std_reward", "mean_ep_length"])
        writer.writerows(rows)


class _Seed:
    """Everything of one seed of the model: job, run, result, hooks, envs, loggers, callbacks, whether it ended.

    Args:
        index: the seed's index in the model.
        spec: its job.
        run_id: its run (None: no tracking).
        hooks: its evaluation hooks.
        logged_through: ``{metric key: env step}`` its run already holds (a seed rerun alone after its seed
            batch's model raised: those points are not sent again).
        logged_params: param keys its run already holds (idem).
    """

    def __init__(self, index: int, spec: JobSpec, run_id: str | None, hooks: Sequence[EvaluationHook],
                 logged_through: dict[str, int] | None = None, logged_params: Sequence[str] = ()) -> None:  # fmt: skip
        self.index = index
        self.spec = spec
        self.hooks = list(hooks)
        self.logged_through = dict(logged_through or {})
        self.logged_params = list(logged_params)
        self.result = JobResult(spec.job_id, spec.name, "FAILED", run_id=run_id)
        self.train_env: Any = None
        self.eval_env: Any = None
        self.mlflow_logger: Any = None
        self.logger: Any = None  # its SeedLogger
        self.view: Any = None  # its SeedView
        self.callbacks: tuple[Any, Any, Any] | None = None  # (eval, hook, progress)
        self.video_dir: Path | None = None  # --record-final: where the eval env records the final evaluation
        self.ended = False

    def recording(self) -> tuple[Any, Path] | None:
        """``(recording eval env, its folder)`` for :func:`finish_job`, or None."""
        return (self.eval_env, self.video_dir) if self.video_dir is not None else None

    def alone(self) -> _Seed:
        """This seed as a batch of one on the same run, keeping what the run already holds (rerun after its seed
        batch's model raised)."""
        through = dict(self.logger.last_step) if self.logger is not None else {}
        params = sorted(self.mlflow_logger.logged) if self.mlflow_logger is not None else []
        return _Seed(0, self.spec, self.result.run_id, self.hooks, through, params)


@dataclass(frozen=True)
class _BatchRaised:
    """A seed batch's model (K > 1) raised during its fit, not in a seed's own env, callbacks or logger (those fail
    their seed alone): its update or its stacked forward, which computes every seed at once and cannot name one.

    Args:
        reason: the one-line reason.
        steps: the model's env steps then.
        traceback_text: its traceback (printed to the job log).
    """

    reason: str
    steps: int
    traceback_text: str


def run_jobs(
    specs: Sequence[JobSpec],
    tracking: TrackingTarget,
    *,
    run_ids: Sequence[str] | None = None,
    parent_run_id: str | None = None,
    on_evaluation: EvaluationHook | Sequence[EvaluationHook] | None = None,
    seed_hooks: Sequence[Sequence[EvaluationHook]] | None = None,
    progress: Callable[[JobProgress], None] | None = None,
    on_result: Callable[[JobResult], None] | None = None,
    stopped_status: str = "FINISHED",
    use_mlflow: bool = True,
) -> list[JobResult]:
    """Train, evaluate and record a seed batch of K >= 1 jobs in the calling process (the launcher gives it a
    fresh one); returns one result per job, in order.

    Args:
        specs: the jobs: same algo, env, resolved config, budget and evaluation protocol; different seeds.
        tracking: where to log.
        run_ids: their child runs, created beforehand with their tags and params (the launchers do that in the
            parent process); None: created here (children of ``parent_run_id``).
        parent_run_id: parent of the runs created here.
        on_evaluation: hook(s) ``(step, mean_reward) -> bool | None`` after each evaluation of each seed
            (``False`` stops the model: every seed's run ends with ``stopped_status``).
        seed_hooks: more hooks per seed index (``bench tune``: the trial's reporter on the last seed).
        progress: receives :class:`JobProgress` snapshots of each seed.
        on_result: called once per job as soon as it ends (a failed seed before the others).
        stopped_status: final status of the runs when a hook stopped the model.
        use_mlflow: log to MLflow (False: nothing is recorded; for benchmarks of the tracking overhead).
    """
    specs = list(specs)
    reference = bool(specs) and specs[0].impl != "lit_sb3"  # the reference side: rl_zoo3, a child process per job
    if not reference:
        _check_batch(specs)
    store = None
    if use_mlflow:
        from lit_sb3.zoo.tracking import connect, run_environment_tags

        store = connect(tracking)
        if run_ids is None:
            tags = run_environment_tags()
            run_ids = [store.create_job_run(spec, parent_run_id, tags) for spec in specs]
    ids = list(run_ids) if run_ids is not None else [None] * len(specs)
    if reference:
        from lit_sb3.zoo.reference.job import run_reference_jobs

        return run_reference_jobs(specs, store, ids, progress=progress, on_result=on_result)
    import torch

    torch.set_num_threads(max(1, int(specs[0].torch_threads)))
    hooks: list[EvaluationHook] = (
        [] if on_evaluation is None else list(on_evaluation) if isinstance(on_evaluation, Sequence) else [on_evaluation]
    )
    own = [list(h) for h in seed_hooks] if seed_hooks is not None else [[] for _ in specs]
    seeds = [_Seed(i, spec, run_id, [*hooks, *own[i]]) for i, (spec, run_id) in enumerate(zip(specs, ids))]
    outcome = _train(seeds, tracking, store, progress, on_result, stopped_status)
    if isinstance(outcome, str):  # nothing trained yet: the same path, one seed at a time
        print(f"seed batch of {len(seeds)}: {outcome}; its seeds run as batches of one, one after the other",
              flush=True)  # fmt: skip
        seeds = [_Seed(0, seed.spec, seed.result.run_id, seed.hooks) for seed in seeds]
        for seed in seeds:
            _train([seed], tracking, store, progress, on_result, stopped_status)
    elif isinstance(outcome, _BatchRaised):  # the seeds still running are rerun alone: each is its separate run
        running = [seed for seed in seeds if not seed.ended]
        print(f"seed batch of {len(seeds)}: its model raised at env step {outcome.steps} ({outcome.reason}); its "
              f"{len(running)} running seed(s) run again alone, one after the other, from the start (their runs "
              "keep what the batch logged; a seed whose own run raises fails alone)", flush=True)  # fmt: skip
        print(outcome.traceback_text, end="", flush=True)
        for seed in running:
            alone = seed.alone()
            if store is not None:
                store.set_tags(alone.result.run_id, {BATCH_RAISED_TAG: outcome.reason})
            _train([alone], tracking, store, progress, on_result, stopped_status)
            seeds[seed.index] = alone
    return [seed.result for seed in seeds]


def run_job(
    spec: JobSpec,
    tracking: TrackingTarget,
    *,
    run_id: str | None = None,
    parent_run_id: str | None = None,
    on_evaluation: EvaluationHook | Sequence[EvaluationHook] | None = None,
    progress: Callable[[JobProgress], None] | None = None,
    stopped_status: str = "FINISHED",
    use_mlflow: bool = True,
) -> JobResult:
    """:func:`run_jobs` of one job (a batch of one seed); see there for the arguments.

    Args:
        spec: the job.
        tracking: where to log.
        run_id: its child run, created beforehand (None: created here).
        parent_run_id: parent of the run created here.
        on_evaluation: evaluation hook(s).
        progress: receives :class:`JobProgress` snapshots.
        stopped_status: final status of a run stopped by a hook.
        use_mlflow: log to MLflow.
    """
    (result,) = run_jobs([spec], tracking, run_ids=None if run_id is None else [run_id], parent_run_id=parent_run_id,
                         on_evaluation=on_evaluation, progress=progress, stopped_status=stopped_status,
                         use_mlflow=use_mlflow)  # fmt: skip
    return result


def _batch_refusal(spec: JobSpec) -> str | None:
    """Why the suite cannot train several seeds of ``spec``'s config as one model (None: it can; whether the
    library can is its own check, ``NotImplementedError`` when the model is built)."""
    if spec.config.get("callback"):
        return f"{spec.algo} on {spec.env_id}: the config's callbacks run on one model per seed"
    return None


def _build_model(seeds: Sequence[_Seed]) -> Any:
    """The model of the seeds: the algorithm class itself for one seed, else ``SeedBatch(cls, seeds=...)`` with
    its networks built now. What the library cannot batch is refused here, before training, as
    ``NotImplementedError``: the factory's ``ValueError`` for an algorithm that cannot train K > 1 seeds (it names
    the ones that can), the model's own ``NotImplementedError`` for an option or layer it cannot batch yet.

    Args:
        seeds: the seeds, their train envs built.
    """
    spec, action_space = seeds[0].spec, seeds[0].train_env.action_space
    if len(seeds) == 1:
        return build_model(spec, action_space)
    from lit_sb3 import SeedBatch

    cls, policy, kwargs = model_arguments(spec, action_space)
    kwargs.pop("seed")
    try:
        model = SeedBatch(cls, seeds=[s.spec.seed for s in seeds], policy=policy, **kwargs)
    except ValueError as exc:  # the seeds are checked (_check_batch) and the arguments were resolved at planning
        raise NotImplementedError(str(exc)) from exc
    model.set_env([s.train_env for s in seeds])
    return model


def _train(seeds: list[_Seed], tracking: TrackingTarget, store: Any, progress: Callable[[JobProgress], None] | None,
           on_result: Callable[[JobResult], None] | None, stopped_status: str) -> str | _BatchRaised | None:  # fmt: skip
    """Train the seeds as one model and record each; returns why they cannot be one model (nothing was trained
    or recorded then; only for K > 1), or :class:`_BatchRaised` when a K > 1 model raised during its fit (the
    seeds it had failed are recorded; the others' runs are left running, what they logged sent), else None once
    every seed's run has ended."""
    t_start, cpu_start = time.monotonic(), time.process_time()
    age = process_age()  # the process's start before this call (spawn, imports): part of the job's start-up
    model: Any = None
    fitting = False

    def report(seed: _Seed) -> None:
        seed.ended = True
        if seed.logger is not None:
            seed.logger.closed = True
        if on_result is not None:
            on_result(seed.result)

    def fail(index: int, reason: str, traceback_text: str) -> None:
        """Mask the seed in the model and end its run FAILED with ``reason`` (the others go on)."""
        seed = seeds[index]
        if seed.ended:
            return
        if model is not None and index not in model.failed:
            model.fail_seed(index, reason)
        steps = int(model.num_timesteps) if model is not None else 0
        text = traceback_text or (
            f"seed {seed.spec.seed} (index {index} of a seed batch of {len(seeds)}) was masked out by the model at "
            f"env step {steps}: {reason}\n(no Python exception: the model found it; the other seeds went on)\n"
        )
        error = DivergenceError(reason, steps, float("nan"))
        record_failure(error, seed.result, store, seed.mlflow_logger, t_start, steps, text, reason=reason)
        report(seed)

    try:
        from lit_sb3 import RLEnvDataModule, RLTrainer, SeedRoutingLogger
        from lit_sb3.zoo.cost import warmup_steps
        from lit_sb3.zoo.worker.callbacks import EvalClock, SeedsCallback, SeedView, job_callbacks
        from lit_sb3.zoo.worker.guards import SeedLogger

        spec = seeds[0].spec
        if len(seeds) > 1 and (refusal := _batch_refusal(spec)) is not None:
            return refusal
        for seed in seeds:
            seed.train_env = build_env(seed.spec)
            if seed.spec.record_final:  # the evaluation at the end of the budget is recorded
                seed.video_dir = Path(tempfile.mkdtemp(prefix=f"bench-video-{seed.spec.job_id}-"))
                seed.eval_env = _recording_eval_env(
                    seed.spec, seed.video_dir,
                    lambda s=seed: s.view is not None and s.view.num_timesteps >= s.spec.n_timesteps,
                )  # fmt: skip
            else:
                seed.eval_env = build_env(seed.spec, evaluation=True)
        try:
            model = _build_model(seeds)
        except NotImplementedError as exc:
            if len(seeds) == 1:
                raise
            return " ".join(str(exc).split())
        clock = EvalClock(len(seeds))  # the seeds' evaluations share the process's training time
        warmup = warmup_steps(spec.algo, spec.config.get("algo_kwargs") or {})
        for seed in seeds:
            if store is not None:
                from lit_sb3.zoo.tracking import job_logger, job_params

                store.set_tags(seed.result.run_id, {SEED_BATCH_TAG: str(len(seeds))})
                seed.mlflow_logger = job_logger(tracking, seed.result.run_id,
                                                logged=[*job_params(seed.spec), *seed.logged_params])  # fmt: skip
            seed.logger = SeedLogger(seed.mlflow_logger,
                                     lambda exc, text, i=seed.index: fail(i, _logger_reason(exc), text),
                                     seed.logged_through)  # fmt: skip
            seed.view = SeedView(model, seed.index, seed.train_env, seed.logger)
            seed.callbacks = job_callbacks(
                seed.spec.job_id, seed.spec.n_timesteps, seed.eval_env, seed.spec.eval_episodes,
                seed.spec.eval_freq, seed.hooks, progress, warmup, clock,
            )  # fmt: skip
        driver = SeedsCallback(
            [(s.index, s.view, [s.callbacks[2], s.callbacks[0]]) for s in seeds],  # progress, then evaluation
            lambda index: seeds[index].ended, fail,
        )  # fmt: skip
        # a single model logs its plain keys to its seed's logger; a seed batch logs seed{i}/<key>, routed
        logger = seeds[0].logger if len(seeds) == 1 else SeedRoutingLogger([s.logger for s in seeds])
        cfg_callbacks = [import_path(path)(**kwargs) for path, kwargs in spec.resolved_config().callback]
        with tempfile.TemporaryDirectory(prefix=f"bench-{spec.job_id}-") as tmp:
            trainer = RLTrainer(
                max_steps=spec.n_timesteps,
                log_every_n_steps=log_interval(spec, model.member(0), seeds[0].train_env.num_envs),
                rl_callback=[driver, *cfg_callbacks],  # config callbacks: only on a batch of one (_batch_refusal)
                logger=[logger],
                default_root_dir=tmp,
                accelerator=_accelerator(spec.device),
                devices=1,
                enable_checkpointing=False,
                enable_progress_bar=False,
            )
            train_env = seeds[0].train_env if len(seeds) == 1 else [s.train_env for s in seeds]
            t_fit = time.monotonic()
            fitting = True
            trainer.fit(model, datamodule=RLEnvDataModule(train_env=train_env))
            fitting = False
            fit_seconds = max(time.monotonic() - t_fit, 1e-9)
            train_seconds = fit_seconds - clock.seconds
            for seed in seeds:
                if not seed.ended and seed.index in model.failed:
                    fail(seed.index, model.failed[seed.index], "")
            if any(s.callbacks is not None and s.callbacks[1].stopped for s in seeds):
                for seed in seeds:  # a hook stopped the model: every seed stopped there (its last evaluation)
                    if seed.callbacks is not None:
                        seed.callbacks[1].stopped = True
            for seed in seeds:
                if seed.ended:
                    continue
                assert seed.callbacks is not None and seed.view is not None
                eval_cb, hook_cb, _ = seed.callbacks
                try:
                    finish_job(seed.spec, seed.view.member(), eval_cb, hook_cb, [seed.logger], seed.result,
                               store=store, mlflow_logger=seed.mlflow_logger, folder=Path(tmp), t_start=t_start,
                               cpu_start=cpu_start,
                               fit_seconds=fit_seconds, stopped_status=stopped_status, video=seed.recording(),
                               train_seconds=train_seconds, progress_cb=seed.callbacks[2],
                               process_seconds=age)  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - this seed fails, the others are still recorded
                    record_failure(exc, seed.result, store, seed.mlflow_logger, t_start, seed.view.num_timesteps)
                report(seed)
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then re-raised if not an Exception
        text = traceback.format_exc()
        steps = int(getattr(model, "num_timesteps", 0) or 0)
        if fitting and len(seeds) > 1 and isinstance(exc, Exception):
            for seed in seeds:  # what the model had found is those seeds' own failure
                if not seed.ended and seed.index in model.failed:
                    fail(seed.index, model.failed[seed.index], "")
            for seed in seeds:  # what the others logged stays in their runs (their reruns continue past it)
                if not seed.ended and seed.mlflow_logger is not None:
                    with contextlib.suppress(Exception):
                        seed.mlflow_logger.flush()
            return _BatchRaised(failure_reason(exc), steps, text)
        for seed in seeds:
            if not seed.ended:
                record_failure(exc, seed.result, store, seed.mlflow_logger, t_start, steps, text)
                report(seed)
        if not isinstance(exc, Exception):
            raise
    finally:
        for seed in seeds:
            for env in (seed.train_env, seed.eval_env):
                if env is not None:
                    with contextlib.suppress(Exception):
                        env.close()
            if seed.video_dir is not None:
                shutil.rmtree(seed.video_dir, ignore_errors=True)
    return None


def _logger_reason(exc: Exception) -> str:
    """A seed logger's failure: its divergence, or ``logging raised: <Type: message>``."""
    return str(exc) if isinstance(exc, DivergenceError) else f"logging raised: {failure_reason(exc)}"


def _check_batch(specs: Sequence[JobSpec]) -> None:
    """The jobs of a batch must differ by their seed only."""
    if not specs:
        raise ValueError("a seed batch needs at least one job")
    first = {k: v for k, v in specs[0].identity().items() if k != "seed"}
    for spec in specs[1:]:
        if {k: v for k, v in spec.identity().items() if k != "seed"} != first:
            raise ValueError(f"{spec.name} differs from {specs[0].name} by more than its seed: not one seed batch")
    if len({s.seed for s in specs}) != len(specs):
        raise ValueError("a seed batch has the same seed twice")


def _recording_eval_env(spec: JobSpec, folder: Path, start: Callable[[], bool]) -> Any:
    """The job's eval env rendering ``rgb_array`` frames, wrapped in a
    :class:`~lit_sb3.vec_env.VecVideoRecorder` that writes ``final-<job id>.mp4`` in ``folder`` from the first
    evaluation for which ``start()`` is true.

    Args:
        spec: the job.
        folder: where the mp4 goes.
        start: when to start recording.
    """
    from lit_sb3.vec_env.vec_video_recorder import VecVideoRecorder, configure_headless_rendering

    configure_headless_rendering()  # before the env (MuJoCo, pygame) is made
    env = build_env(spec.with_render_mode("rgb_array"), evaluation=True)
    return VecVideoRecorder(env, folder / f"final-{spec.job_id}.mp4", start_trigger=start)


def finish_job(spec: JobSpec, model: Any, eval_cb: Any, hook_cb: Any, loggers: Sequence[Any], result: JobResult, *,
               store: Any, mlflow_logger: Any, folder: Path, t_start: float, fit_seconds: float,
               cpu_start: float | None = None,
               stopped_status: str = "FINISHED", video: tuple[Any, Path] | None = None,
               train_seconds: float | None = None, progress_cb: Any = None,
               process_seconds: float = 0.0) -> None:  # fmt: skip
    """After a job's training: the final evaluation (unless the last periodic one was at the end, or a hook
    stopped the run: its score is the evaluation that stopped it), the ``final/*`` and ``time/*`` metrics, the
    artifacts, and the run ended FINISHED (or ``stopped_status``); fills ``result`` (one seed of :func:`run_jobs`).

    Args:
        spec: the job.
        model: its trained model (``num_timesteps``, ``save``, ``get_vec_normalize_env``).
        eval_cb: its :class:`~lit_sb3.zoo.worker.callbacks.JobEvalCallback`.
        hook_cb: its :class:`~lit_sb3.zoo.worker.callbacks.HookCallback`.
        loggers: receive the final metrics.
        result: filled in.
        store: the tracking store (None: nothing recorded).
        mlflow_logger: flushed before the artifacts (None: none).
        folder: a temporary folder for the artifacts.
        t_start: ``time.monotonic()`` when the job started.
        fit_seconds: wall seconds of ``trainer.fit``.
        cpu_start: ``time.process_time()`` when the job started: ``time/cpu_seconds`` is the process's CPU time
            since (a seed batch's K seeds share it, as they share ``time/wall_seconds``).
        stopped_status: final status of a run stopped by a hook.
        video: ``(recording eval env, its folder)`` of ``--record-final``: the mp4 is logged under ``videos/``.
        train_seconds: seconds of ``trainer.fit`` not spent evaluating (every seed of a seed batch); with
            ``progress_cb`` (its :class:`~lit_sb3.zoo.worker.callbacks.ProgressCallback`: the warm-up's seconds),
            the ``time/*`` metrics the cost estimates read (:mod:`lit_sb3.zoo.cost`) are logged.
        progress_cb: see ``train_seconds``.
        process_seconds: how long the process had run when the job started (counted in its start-up).
    """
    result.stopped_early = bool(hook_cb.stopped)
    eval_before = eval_cb.eval_seconds
    if (eval_cb.last_eval_step != model.num_timesteps and not hook_cb.stopped) or not hook_cb.rows:
        eval_cb.num_timesteps = model.num_timesteps
        eval_cb.evaluate()
        hook_cb.num_timesteps = model.num_timesteps
        hook_cb.record()
    step, mean, std, _ = hook_cb.rows[-1]
    wall = time.monotonic() - t_start
    result.score, result.score_std, result.env_steps = mean, std, int(model.num_timesteps)
    result.wall_seconds = wall
    result.fps = float(model.num_timesteps / fit_seconds)  # training incl. periodic evaluations
    result.evaluations = [(r[0], r[1]) for r in hook_cb.rows]
    final = {
        "final/mean_reward": mean,
        "final/std_reward": std,
        "time/wall_seconds": wall,
        "time/fps": result.fps,
        "time/total_timesteps": float(model.num_timesteps),
    }
    if cpu_start is not None:
        final["time/cpu_seconds"] = time.process_time() - cpu_start
    if train_seconds is not None and progress_cb is not None:  # the phases' seconds (lit_sb3.zoo.cost reads them)
        final.update({
            "time/train_seconds": train_seconds, "time/eval_seconds": eval_cb.eval_seconds,
            "time/eval_steps": float(eval_cb.eval_steps), "time/seed_batch": float(eval_cb.clock.batch),
            "time/startup_seconds": process_seconds
            + max(0.0, wall - fit_seconds - (eval_cb.eval_seconds - eval_before)),
        })  # fmt: skip
        if progress_cb.warmup_steps and math.isfinite(progress_cb.warmup_seconds):
            final["time/warmup_steps"] = float(progress_cb.warmup_steps)
            final["time/warmup_seconds"] = progress_cb.warmup_seconds
    for logger in loggers:
        logger.log_metrics(final, step=int(model.num_timesteps))
    if mlflow_logger is not None:
        mlflow_logger.flush()
    if store is not None:
        artifacts = folder / f"artifacts-{spec.job_id}"
        artifacts.mkdir()
        _write_artifacts(artifacts, spec, model, hook_cb.rows)
        store.log_artifacts(result.run_id, artifacts)
        if video is not None:
            recorder, video_dir = video
            recorder.close_video()
            if recorder.n_frames:
                store.log_artifacts(result.run_id, video_dir, "videos")
        if result.stopped_early:
            store.set_tags(result.run_id, {"lit_sb3.stopped_early": "true"})
    result.status = stopped_status if result.stopped_early else "FINISHED"
    if store is not None:
        store.end_run(result.run_id, result.status)


def process_age() -> float:
    """Seconds since this process started (Linux ``/proc``; 0 where it cannot be read)."""
    import os

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time in clock ticks after boot
        return max(0.0, float(Path("/proc/uptime").read_text().split()[0]) - started)
    except (OSError, ValueError, IndexError):
        return 0.0


def record_failure(exc: BaseException, result: JobResult, store: Any, mlflow_logger: Any, t_start: float,
                   env_steps: int, traceback_text: str | None = None, reason: str | None = None) -> None:  # fmt: skip
    """Record a job that raised: ``result`` FAILED (KILLED for a non-``Exception``) with its one-line reason,
    what was logged before kept, and the run ended with ``lit_sb3.failure_reason`` and ``traceback.txt``.

    Args:
        exc: what was raised.
        result: filled in.
        store: the tracking store (None: nothing recorded).
        mlflow_logger: flushed first (None: none).
        t_start: ``time.monotonic()`` when the job started.
        env_steps: env steps done.
        traceback_text: the traceback (default: the one being handled).
        reason: the one-line reason (default: from ``exc``).
    """
    killed = not isinstance(exc, Exception)
    result.status = "KILLED" if killed else "FAILED"
    result.failure_reason = reason or ("interrupted" if killed else failure_reason(exc))
    result.wall_seconds = time.monotonic() - t_start
    result.env_steps = env_steps
    if store is not None:
        if mlflow_logger is not None:
            with contextlib.suppress(Exception):  # recording the failure matters more
                mlflow_logger.flush()  # what was logged before the failure is kept
        with contextlib.suppress(Exception):  # the launcher ends the run if this fails
            text = traceback.format_exc() if traceback_text is None else traceback_text
            store.fail_run(result.run_id, result.failure_reason, result.status, text)
