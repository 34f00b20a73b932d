"""Run a seed batch: K jobs that differ only by their seed, trained together by one
:func:`~lit_sb3.algorithms.seeds.SeedBatch` in one process (``bench run --seed-batch K``).

For the user nothing changes: each seed keeps its own MLflow child run (created by the launcher as for a single
job, same params and tags), its metrics with env steps (the batch logs ``seed{i}/<key>``;
:class:`~lit_sb3.loggers.SeedRoutingLogger` forwards them to seed ``i``'s
:class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`), its periodic and final evaluations (the callbacks of
:mod:`lit_sb3.zoo.worker.callbacks`, bound to a view of seed ``i``: ``batch.member(i)`` evaluated on seed
``i``'s eval env), its artifacts (``model.zip`` from ``batch.member(i).save``, loadable by the single-seed
class) and its final status. The shared parts of :func:`lit_sb3.zoo.runner.run_job` (final evaluation,
artifacts, failure records) are reused, not copied.

Failure isolation: a seed whose reward or logged value becomes NaN/inf (the checks of a single job) or that
the batch masks itself (``batch.failed``: a non-finite loss) is masked with ``batch.fail_seed`` and its run
ended FAILED at once with its one-line reason and ``traceback.txt``; the other seeds go on and end FINISHED.
An exception that escapes the batch's training (an env that raises) fails every seed still running, as it
would fail a single job. An evaluation hook returning ``False`` (a pruned ``bench tune`` trial) stops the
whole batch. A config the batched algorithm does not support (it raises ``NotImplementedError`` when built:
``use_sde``, HER, a CNN, ...) is found before any training: the seeds then run one after the other in this
process (:func:`~lit_sb3.zoo.runner.run_job`), with one line in the job log.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers.logger import Logger

from lit_sb3.callbacks import BaseCallback
from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.tracking import TrackingTarget
from lit_sb3.zoo.worker.protocol import DivergenceError, EvaluationHook, JobProgress, JobResult

__all__ = ["run_batch", "batch_refusal", "has_batched_version"]


def has_batched_version(algo: str) -> bool:
    """Whether the algorithm called ``algo`` has a seed-batched version (``SeedBatch(cls, ...)`` works).

    Args:
        algo: algorithm name.
    """
    from lit_sb3.algorithms.seeds import supports_seed_batch
    from lit_sb3.zoo.registry import get_algo_class

    return supports_seed_batch(get_algo_class(algo))


def batch_refusal(job: JobSpec) -> str | None:
    """Why ``job`` cannot be part of a seed batch (one line), or None when it can.

    Args:
        job: the job.
    """
    if not has_batched_version(job.algo):
        return f"{job.algo} has no seed-batched version"
    if job.config.get("callback"):
        return f"{job.algo} on {job.env_id}: the config's callbacks run per job"
    return None


# ---------------------------------------------------------------------------------------------------------
# one seed of the batch, as its callbacks and its run see it
# ---------------------------------------------------------------------------------------------------------
class _SeedView:
    """Seed ``index`` of the batch, seen as a single model by the job callbacks: env steps, train env and its
    VecNormalize, episode statistics, metric logging (to the seed's loggers) and ``predict`` (of
    ``batch.member(index)``, extracted once per env step, i.e. once per evaluation).

    Args:
        batch: the seed batch.
        index: the seed's index in the batch.
        train_env: the seed's train env.
        logger: the seed's loggers (:class:`_SeedLogger`).
    """

    def __init__(self, batch: Any, index: int, train_env: Any, logger: _SeedLogger) -> None:
        from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm

        self.batch = batch
        self.index = index
        self.train_env = train_env
        self.logger = logger
        cls = type(batch)
        if issubclass(cls, OnPolicyAlgorithm):
            self.rollout_buffer = None  # the job callbacks evaluate on-policy models at rollout boundaries
        self.supports_action_masks = bool(getattr(cls, "supports_action_masks", False))
        self._member: Any = None
        self._member_step = -1

    @property
    def num_timesteps(self) -> int:
        return int(self.batch.num_timesteps)

    @property
    def ep_info_buffer(self) -> Any:
        return self.batch._ep_info_buffers[self.index]  # the seed's episode statistics

    def get_env(self) -> Any:
        return self.train_env

    def get_vec_normalize_env(self) -> Any:
        from lit_sb3.vec_env import unwrap_vec_normalize

        return unwrap_vec_normalize(self.train_env)

    def member(self) -> Any:
        """``batch.member(index)`` at the current env step."""
        if self._member is None or self._member_step != self.num_timesteps:
            self._member, self._member_step = self.batch.member(self.index), self.num_timesteps
        return self._member

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        return self.member().predict(*args, **kwargs)

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self.logger.log_metrics(metrics, self.num_timesteps if step is None else step)


class _SeedLogger(Logger):
    """The loggers of one seed as one Lightning logger: its MLflow logger, then the divergence guard of a single
    job, which here masks the seed instead of raising. Nothing is logged once the seed has ended.

    Args:
        mlflow_logger: the seed's :class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger` (None: no tracking).
        on_diverged: called with the :class:`DivergenceError` and its traceback text.
    """

    def __init__(self, mlflow_logger: Any, on_diverged: Callable[[DivergenceError, str], None]) -> None:
        from lit_sb3.zoo.worker.guards import DivergenceGuard

        super().__init__()
        self.mlflow_logger = mlflow_logger
        self.guard = DivergenceGuard()
        self.on_diverged = on_diverged
        self.closed = False

    @property
    def name(self) -> str:
        return "seed"

    @property
    def version(self) -> str:
        return "0"

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        if self.mlflow_logger is not None and not self.closed:  # the seed's own, as its separate run logs them
            self.mlflow_logger.log_hyperparams({k: v for k, v in dict(params).items() if k != "seeds"})

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self.closed:
            return
        if self.mlflow_logger is not None:
            self.mlflow_logger.log_metrics(metrics, step)
        try:
            self.guard.log_metrics(metrics, step)
        except DivergenceError as exc:
            self.on_diverged(exc, traceback.format_exc())

    def flush(self) -> None:
        if self.mlflow_logger is not None:
            self.mlflow_logger.flush()

    def finalize(self, status: str = "success") -> None:
        if not self.closed:
            self.flush()


class _Seed:
    """Everything of one seed: job, run, result, envs, loggers, callbacks, and whether it has ended."""

    def __init__(self, index: int, spec: JobSpec, run_id: str | None) -> None:
        self.index = index
        self.spec = spec
        self.result = JobResult(spec.job_id, spec.name, "FAILED", run_id=run_id)
        self.train_env: Any = None
        self.eval_env: Any = None
        self.mlflow_logger: Any = None
        self.logger: Any = None
        self.view: _SeedView | None = None
        self.callbacks: tuple[Any, Any, Any] | None = None  # (eval, hook, progress)
        self.video_dir: Path | None = None  # --record-final: where the eval env records the final evaluation
        self.ended = False

    def recording(self) -> tuple[Any, Path] | None:
        """``(recording eval env, its folder)`` for :func:`~lit_sb3.zoo.runner.finish_job`, or None."""
        return (self.eval_env, self.video_dir) if self.video_dir is not None else None

    @property
    def top_callbacks(self) -> list[Any]:
        """The callbacks the trainer would call for a single job: progress, then evaluation (which calls the
        hook callback after each evaluation)."""
        if self.callbacks is None:
            return []
        eval_cb, _, progress_cb = self.callbacks
        return [progress_cb, eval_cb]


# ---------------------------------------------------------------------------------------------------------
# the callbacks of every seed, driven by the batch's one callback
# ---------------------------------------------------------------------------------------------------------
class _BatchJobCallback(BaseCallback):
    """The SB3-style callback of the batch's trainer: runs each running seed's job callbacks (progress and its
    NaN-reward check, evaluation, hooks) on that seed's view, with that seed's part of the step's locals; a seed
    whose reward is NaN/inf, or that the batch masked, is failed alone; a hook's ``False`` stops the batch.

    Args:
        seeds: the seeds.
        fail: ``fail(seed, reason, traceback_text)`` masks a seed and ends its run.
    """

    def __init__(self, seeds: list[_Seed], fail: Callable[[_Seed, str, str], None]) -> None:
        super().__init__()
        self.seeds = seeds
        self.fail = fail

    def _init_callback(self) -> None:
        for seed in self.seeds:
            for cb in seed.top_callbacks:
                cb.init_callback(seed.view)

    def running(self) -> list[_Seed]:
        """The seeds still training (those the batch masked since the last call are failed first)."""
        failed = self.model.failed
        for seed in self.seeds:
            if not seed.ended and seed.index in failed:
                self.fail(seed, failed[seed.index], "")
        return [s for s in self.seeds if not s.ended]

    def _each(self, call: Callable[[Any], Any], with_locals: bool = False) -> bool:
        keep = True
        for seed in self.running():
            local = _seed_locals(self.locals, seed.index, len(self.seeds)) if with_locals else None
            try:
                for cb in seed.top_callbacks:
                    if local is not None:
                        cb.locals = local
                    keep = call(cb) is not False and keep
            except DivergenceError as exc:
                self.fail(seed, str(exc), traceback.format_exc())
        self.running()
        return keep

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        pass  # each seed gets its part in _on_step

    def _on_training_start(self) -> None:
        self._each(lambda cb: cb.on_training_start({}, self.globals))

    def _on_rollout_start(self) -> None:
        self._each(lambda cb: cb.on_rollout_start())

    def _on_step(self) -> bool:
        keep = self._each(lambda cb: cb.on_step(), with_locals=True)
        return keep and bool(self.running())

    def _on_rollout_end(self) -> None:
        self._each(lambda cb: cb.on_rollout_end())

    def _on_training_end(self) -> None:
        self._each(lambda cb: cb.on_training_end())


def _seed_locals(locals_: dict[str, Any], index: int, n_seeds: int) -> dict[str, Any]:
    """Seed ``index``'s part of the batch's step locals: the values with one entry per seed."""
    out: dict[str, Any] = {}
    for key, value in locals_.items():
        if isinstance(value, (list, tuple)) and len(value) == n_seeds:
            out[key] = value[index]
    return out


# ---------------------------------------------------------------------------------------------------------
# the batched job
# ---------------------------------------------------------------------------------------------------------
def run_batch(
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
) -> list[JobResult]:
    """Train, evaluate and record a seed batch in the calling process; returns one result per job, in order.

    Args:
        specs: the jobs: same algo, env, resolved config, budget and evaluation protocol; different seeds.
        tracking: where to log.
        run_ids: their child runs, created beforehand (the launchers do that); None: created here (children of
            ``parent_run_id``).
        parent_run_id: parent of the runs created here.
        on_evaluation: hook(s) ``(step, mean_reward) -> bool | None`` after each evaluation of each seed
            (``False`` stops the whole batch: every seed's run ends with ``stopped_status``).
        seed_hooks: more hooks per seed index (``bench tune``: the trial's reporter on the last seed).
        progress: receives :class:`JobProgress` snapshots of each seed.
        on_result: called once per job as soon as it ends (a failed seed before the others).
        stopped_status: final status of the runs when a hook stopped the batch.
    """
    import torch

    from lit_sb3.zoo.runner import _accelerator, _recording_eval_env, finish_job, log_interval, record_failure
    from lit_sb3.zoo.tracking import connect, run_environment_tags

    specs = list(specs)
    _check_batch(specs)
    t_start = time.monotonic()
    torch.set_num_threads(max(1, int(specs[0].torch_threads)))
    hooks: list[EvaluationHook] = (
        [] if on_evaluation is None else list(on_evaluation) if isinstance(on_evaluation, Sequence) else [on_evaluation]
    )
    store = connect(tracking)
    if run_ids is None:
        tags = run_environment_tags()
        run_ids = [store.create_job_run(spec, parent_run_id, tags) for spec in specs]
    seeds = [_Seed(i, spec, run_id) for i, (spec, run_id) in enumerate(zip(specs, run_ids))]
    batch: Any = None
    unbatched: str | None = None

    def report(seed: _Seed) -> None:
        seed.ended = True
        if seed.logger is not None:
            seed.logger.closed = True
        if on_result is not None:
            on_result(seed.result)

    def fail(seed: _Seed, reason: str, traceback_text: str) -> None:
        """Mask the seed in the batch and end its run FAILED with ``reason`` (the others go on)."""
        if seed.ended:
            return
        if batch is not None and seed.index not in batch.failed:
            batch.fail_seed(seed.index, reason)
        steps = int(batch.num_timesteps) if batch is not None else 0
        text = traceback_text or (
            f"seed {seed.spec.seed} (index {seed.index} of a seed batch of {len(seeds)}) was masked out by the "
            f"batch at env step {steps}: {reason}\n(no Python exception: the batch found it; the other seeds went on)\n"
        )
        error = DivergenceError(reason, steps, float("nan"))
        record_failure(error, seed.result, store, seed.mlflow_logger, t_start, steps, text, reason=reason)
        report(seed)

    try:
        from lit_sb3 import RLEnvDataModule, RLTrainer
        from lit_sb3.algorithms.seeds import SeedBatch
        from lit_sb3.loggers import SeedRoutingLogger
        from lit_sb3.zoo.tracking import job_logger, job_params
        from lit_sb3.zoo.worker.callbacks import job_callbacks
        from lit_sb3.zoo.worker.envs import build_env, model_arguments

        for seed in seeds:
            seed.train_env = build_env(seed.spec)
            if seed.spec.record_final:  # the evaluation at the end of the budget is recorded, as for a single job
                seed.video_dir = Path(tempfile.mkdtemp(prefix=f"bench-video-{seed.spec.job_id}-"))
                seed.eval_env = _recording_eval_env(
                    seed.spec,
                    seed.video_dir,
                    lambda s=seed: s.view is not None and s.view.num_timesteps >= s.spec.n_timesteps,
                )
            else:
                seed.eval_env = build_env(seed.spec, evaluation=True)
        cls, policy, kwargs = model_arguments(specs[0], seeds[0].train_env.action_space)
        kwargs.pop("seed")
        try:
            batch = SeedBatch(cls, seeds=[s.spec.seed for s in seeds], policy=policy, **kwargs)
            batch.set_env([s.train_env for s in seeds])  # stacks the networks now: what cannot be batched fails here
        except NotImplementedError as exc:  # e.g. use_sde, HER, a CNN: the seeds run one by one instead
            raise _CannotBatch(" ".join(str(exc).split())) from exc
        for seed in seeds:
            seed.mlflow_logger = job_logger(tracking, seed.result.run_id, logged=job_params(seed.spec))
            seed.logger = _SeedLogger(seed.mlflow_logger, lambda exc, text, seed=seed: fail(seed, str(exc), text))
            seed.view = _SeedView(batch, seed.index, seed.train_env, seed.logger)
            own = list(seed_hooks[seed.index]) if seed_hooks is not None else []
            seed.callbacks = job_callbacks(
                seed.spec.job_id, seed.spec.n_timesteps, seed.eval_env, seed.spec.eval_episodes,
                seed.spec.eval_freq, [*hooks, *own], progress,
            )  # fmt: skip
        with tempfile.TemporaryDirectory(prefix=f"bench-batch-{specs[0].job_id}-") as tmp:
            trainer = RLTrainer(
                max_steps=specs[0].n_timesteps,
                log_every_n_steps=log_interval(specs[0], batch.members[0], seeds[0].train_env.num_envs),
                rl_callback=[_BatchJobCallback(seeds, fail)],
                logger=[SeedRoutingLogger([s.logger for s in seeds])],
                default_root_dir=tmp,
                accelerator=_accelerator(specs[0].device),
                devices=1,
                enable_checkpointing=False,
                enable_progress_bar=False,
            )
            t_fit = time.monotonic()
            trainer.fit(batch, datamodule=RLEnvDataModule(train_env=[s.train_env for s in seeds]))
            fit_seconds = max(time.monotonic() - t_fit, 1e-9)
            for seed in seeds:
                if not seed.ended and seed.index in batch.failed:
                    fail(seed, batch.failed[seed.index], "")
            if any(s.callbacks is not None and s.callbacks[1].stopped for s in seeds):
                for seed in seeds:  # a hook stopped the batch: every seed stopped there (its last evaluation)
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
                               fit_seconds=fit_seconds, stopped_status=stopped_status, video=seed.recording())  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - this seed fails, the others are still recorded
                    record_failure(exc, seed.result, store, seed.mlflow_logger, t_start, seed.view.num_timesteps)
                report(seed)
    except _CannotBatch as exc:
        unbatched = str(exc)
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then re-raised if not an Exception
        text = traceback.format_exc()
        steps = int(getattr(batch, "num_timesteps", 0) or 0)
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
    if unbatched is not None:
        from lit_sb3.zoo.runner import run_job

        print(f"seed batch of {len(seeds)}: {unbatched}; its seeds run one after the other", flush=True)
        for seed in seeds:
            own = list(seed_hooks[seed.index]) if seed_hooks is not None else []
            seed.result = run_job(seed.spec, tracking, run_id=seed.result.run_id, on_evaluation=[*hooks, *own],
                                  progress=progress, stopped_status=stopped_status)  # fmt: skip
            report(seed)
    return [seed.result for seed in seeds]


class _CannotBatch(Exception):
    """The seed-batched algorithm does not support this config (raised before any training)."""


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
