"""Run one :class:`~lit_sb3.zoo.jobs.JobSpec` inside a worker process and record it in its MLflow run.

:func:`run_job` builds the train env and a separate eval env (same wrappers; VecNormalize statistics synced
before each evaluation, rewards not normalised), the model from the algo class and the resolved
hyperparameters, and trains it with :class:`~lit_sb3.RLTrainer` whose loggers are Lightning's
``MLFlowLogger`` attached to the job's child run (:class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`:
metrics sent in one ``log_batch`` every :data:`~lit_sb3.zoo.tracking.METRICS_FLUSH_SECONDS` and at the end of
training) and a divergence guard (:mod:`~lit_sb3.zoo.worker.guards`); the callbacks are in
:mod:`~lit_sb3.zoo.worker.callbacks`, the envs and the model come from :mod:`~lit_sb3.zoo.worker.envs`.

At the first env step at or past each multiple of ``eval_freq`` (total env steps over all sub-envs)
``eval_episodes`` deterministic episodes are run and ``eval/mean_reward``/``eval/std_reward`` logged at ``step = env steps``.
At the end the score is the final evaluation (``final/mean_reward``), then the resolved config, the model
zip, the VecNormalize statistics and ``evaluations.csv`` are uploaded and the run is ended FINISHED.
A NaN/inf loss, logged value or reward raises :class:`DivergenceError`; any exception ends the run FAILED
with ``lit_sb3.failure_reason`` and ``traceback.txt``.

Evaluation hooks (used by ``bench tune`` for pruning)
-----------------------------------------------------
``run_job(..., on_evaluation=hook_or_hooks)`` calls every hook after each periodic evaluation as
``hook(step, mean_reward)`` where ``step`` is the env-step count. A hook that returns ``False`` stops the
run cleanly: training ends at that step, no further evaluation is made (the score is that evaluation), the
artifacts are still saved, the run gets the tag ``lit_sb3.stopped_early=true`` and ends with
``stopped_status`` (``FINISHED`` unless the caller says e.g. ``KILLED`` for a pruned trial). Returning
``None``/``True`` continues. An exception raised by a hook fails the run like any other error.
:class:`JobResult` reports ``stopped_early`` and the env steps actually used (``env_steps``)::

    def prune(step: int, mean_reward: float) -> bool:
        trial.report(mean_reward, step)
        return not trial.should_prune()

    result = run_job(spec, tracking, on_evaluation=prune, stopped_status="KILLED")
    if result.stopped_early: ...

``progress`` (optional) receives :class:`JobProgress` snapshots about once a second and after every
evaluation; the local launcher forwards them to the parent's live table.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.tracking import TrackingTarget, metrics_flush_seconds
from lit_sb3.zoo.worker.envs import build_env, build_model, import_path
from lit_sb3.zoo.worker.protocol import DivergenceError, EvaluationHook, JobProgress, JobResult, result_from_dict

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
]

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


def run_job(
    spec: JobSpec,
    tracking: TrackingTarget,
    *,
    run_id: str | None = None,
    parent_run_id: str | None = None,
    extra_callbacks: Sequence[Any] = (),
    on_evaluation: EvaluationHook | Sequence[EvaluationHook] | None = None,
    progress: Callable[[JobProgress], None] | None = None,
    stopped_status: str = "FINISHED",
    use_mlflow: bool = True,
) -> JobResult:
    """Train, evaluate and record one job (in the calling process; the launcher gives it a fresh one).

    Args:
        spec: the job.
        tracking: where to log.
        run_id: the job's child run, created beforehand with its tags and params (the launchers do that in
            the parent process); None: created here (child of ``parent_run_id`` when given).
        parent_run_id: parent of the run created here.
        extra_callbacks: more SB3-style callbacks for the run.
        on_evaluation: hook(s) ``(step, mean_reward) -> bool | None`` after each evaluation (False stops).
        progress: receives :class:`JobProgress` snapshots.
        stopped_status: final status of a run stopped by a hook.
        use_mlflow: log to MLflow (False: nothing is recorded; for benchmarks of the tracking overhead).
    """
    import torch

    t_start = time.monotonic()
    torch.set_num_threads(max(1, int(spec.torch_threads)))
    hooks: list[EvaluationHook] = (
        [] if on_evaluation is None else list(on_evaluation) if isinstance(on_evaluation, Sequence) else [on_evaluation]
    )
    store = None
    if use_mlflow:
        from lit_sb3.zoo.tracking import connect, run_environment_tags

        store = connect(tracking)
        if run_id is None:
            run_id = store.create_job_run(spec, parent_run_id, run_environment_tags())
    result = JobResult(spec.job_id, spec.name, "FAILED", run_id=run_id)
    train_env = eval_env = None
    model = None
    mlflow_logger = None
    video_dir = Path(tempfile.mkdtemp(prefix=f"bench-video-{spec.job_id}-")) if spec.record_final else None
    try:
        from lit_sb3 import RLEnvDataModule, RLTrainer
        from lit_sb3.zoo.worker.callbacks import job_callbacks
        from lit_sb3.zoo.worker.guards import DivergenceGuard

        train_env = build_env(spec)
        if video_dir is None:
            eval_env = build_env(spec, evaluation=True)
        else:  # the evaluation at the end of the budget is recorded (--record-final)
            eval_env = _recording_eval_env(spec, video_dir, lambda: model.num_timesteps >= spec.n_timesteps)
        model = build_model(spec, train_env.action_space)
        eval_cb, hook_cb, progress_cb = job_callbacks(
            spec.job_id, spec.n_timesteps, eval_env, spec.eval_episodes, spec.eval_freq, hooks, progress
        )
        cfg = spec.resolved_config()
        cfg_callbacks = [import_path(path)(**kwargs) for path, kwargs in cfg.callback]
        if store is not None:
            from lit_sb3.zoo.tracking import job_logger, job_params

            mlflow_logger = job_logger(tracking, run_id, logged=job_params(spec))
        loggers = ([mlflow_logger] if mlflow_logger is not None else []) + [DivergenceGuard()]
        with tempfile.TemporaryDirectory(prefix=f"bench-{spec.job_id}-") as tmp:
            trainer = RLTrainer(
                max_steps=spec.n_timesteps,
                log_every_n_steps=log_interval(spec, model, train_env.num_envs),
                rl_callback=[progress_cb, eval_cb, *cfg_callbacks, *extra_callbacks],
                logger=loggers,
                default_root_dir=tmp,
                accelerator=_accelerator(spec.device),
                devices=1,
                enable_checkpointing=False,
                enable_progress_bar=False,
            )
            t_fit = time.monotonic()
            trainer.fit(model, datamodule=RLEnvDataModule(train_env=train_env))
            fit_seconds = max(time.monotonic() - t_fit, 1e-9)
            finish_job(spec, model, eval_cb, hook_cb, trainer.loggers, result, store=store, mlflow_logger=mlflow_logger,
                       folder=Path(tmp), t_start=t_start, fit_seconds=fit_seconds, stopped_status=stopped_status,
                       video=(eval_env, video_dir) if video_dir is not None else None)  # fmt: skip
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then re-raised if not an Exception
        record_failure(exc, result, store, mlflow_logger, t_start, int(getattr(model, "num_timesteps", 0) or 0))
        if not isinstance(exc, Exception):
            raise
    finally:
        for env in (train_env, eval_env):
            if env is not None:
                try:
                    env.close()
                except Exception:  # noqa: BLE001
                    pass
        if video_dir is not None:
            import shutil

            shutil.rmtree(video_dir, ignore_errors=True)
    return result


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
               stopped_status: str = "FINISHED", video: tuple[Any, Path] | None = None) -> None:  # fmt: skip
    """After a job's training: the final evaluation (unless the last periodic one was at the end, or a hook
    stopped the run: its score is the evaluation that stopped it), the ``final/*`` and ``time/*`` metrics, the
    artifacts, and the run ended FINISHED (or ``stopped_status``); fills ``result``. Shared by :func:`run_job`
    and the seed-batched jobs (:mod:`lit_sb3.zoo.worker.batch`, with one seed's model and callbacks).

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
        stopped_status: final status of a run stopped by a hook.
        video: ``(recording eval env, its folder)`` of ``--record-final``: the mp4 is logged under ``videos/``.
    """
    result.stopped_early = bool(hook_cb.stopped)
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
    result.failure_reason = reason or ("interrupted" if killed else _reason(exc))
    result.wall_seconds = time.monotonic() - t_start
    result.env_steps = env_steps
    if store is not None:
        if mlflow_logger is not None:
            with contextlib.suppress(Exception):  # recording the failure matters more
                mlflow_logger.flush()  # what was logged before the failure is kept
        with contextlib.suppress(Exception):  # the launcher ends the run if this fails
            text = traceback.format_exc() if traceback_text is None else traceback_text
            store.fail_run(result.run_id, result.failure_reason, result.status, text)


def _reason(exc: BaseException) -> str:
    """One line: ``diverged: ...`` for divergence, else ``Type: message`` (first line)."""
    if isinstance(exc, DivergenceError):
        return str(exc)
    cause = exc
    text = str(cause).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(cause).__name__}: {line}"[:500] if line else type(cause).__name__
