"""Run one :class:`~lit_sb3.zoo.jobs.JobSpec` inside a worker process and record it in its MLflow run.

:func:`run_job` builds the train env and a separate eval env (same wrappers; VecNormalize statistics synced
before each evaluation, rewards not normalised), the model from the algo class and the resolved
hyperparameters, and trains it with :class:`~lit_sb3.RLTrainer` whose loggers are Lightning's
``MLFlowLogger`` attached to the job's child run (metrics sent in one ``log_batch`` every
:data:`METRICS_FLUSH_SECONDS` and at the end of training) and a divergence guard.

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

import csv
import json
import math
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.tracking import FAILURE_TAG, TrackingTarget

__all__ = [
    "DivergenceError",
    "EvaluationHook",
    "JobProgress",
    "JobResult",
    "log_interval",
    "run_job",
    "build_env",
    "build_model",
]


class DivergenceError(RuntimeError):
    """A loss, logged value or reward became NaN/inf.

    Args:
        key: the metric (``train/value_loss``, ``rollout/reward``, ...).
        step: env steps when it was seen.
        value: the value.
    """

    def __init__(self, key: str, step: int, value: float) -> None:
        super().__init__(f"diverged: {key} = {value} at step {step}")
        self.key = key
        self.step = step
        self.value = value


class EvaluationHook(Protocol):
    """Called after each periodic evaluation; return ``False`` to stop the run cleanly."""

    def __call__(self, step: int, mean_reward: float) -> bool | None: ...


@dataclass
class JobProgress:
    """A progress snapshot of a running job.

    Args:
        job_id: the job.
        env_steps: env steps so far.
        total: the budget.
        fps: env steps per second since the start of training.
        last_return: return of the last finished training episode (NaN before the first).
        last_eval: last evaluation mean reward (NaN before the first).
    """

    job_id: str
    env_steps: int
    total: int
    fps: float
    last_return: float = math.nan
    last_eval: float = math.nan


@dataclass
class JobResult:
    """What happened to a job.

    Args:
        job_id: the job.
        name: display name.
        status: ``FINISHED``, ``FAILED``, ``KILLED`` or ``SKIPPED``.
        run_id: its MLflow run.
        score: final evaluation mean reward (NaN if none).
        score_std: final evaluation std.
        env_steps: env steps used.
        wall_seconds: wall time of the job.
        fps: env steps per second of training.
        stopped_early: an evaluation hook stopped it.
        failure_reason: one line, for FAILED/KILLED.
        evaluations: ``(step, mean_reward)`` of every evaluation.
    """

    job_id: str
    name: str
    status: str
    run_id: str | None = None
    score: float = math.nan
    score_std: float = math.nan
    env_steps: int = 0
    wall_seconds: float = 0.0
    fps: float = math.nan
    stopped_early: bool = False
    failure_reason: str | None = None
    evaluations: list[tuple[int, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN -> None)."""
        data = asdict(self)
        for key in ("score", "score_std", "fps"):
            if isinstance(data[key], float) and not math.isfinite(data[key]):
                data[key] = None
        return data


# ---------------------------------------------------------------------------------------------------------
# loggers and callbacks
# ---------------------------------------------------------------------------------------------------------
METRICS_FLUSH_SECONDS = 15.0
"""Default wall seconds between two ``log_batch`` calls of a job's metrics (one sqlite transaction costs
~20 ms plus ~0.18 ms per metric); the environment variable ``LIT_SB3_METRICS_FLUSH_SECONDS`` overrides it
(e.g. ``1`` to watch curves grow live in ``mlflow ui``)."""


def metrics_flush_seconds() -> float:
    """``LIT_SB3_METRICS_FLUSH_SECONDS`` if set (a number >= 0), else :data:`METRICS_FLUSH_SECONDS`."""
    text = os.environ.get("LIT_SB3_METRICS_FLUSH_SECONDS", "").strip()
    if not text:
        return METRICS_FLUSH_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise BenchError(f"LIT_SB3_METRICS_FLUSH_SECONDS must be a number of seconds >= 0, got {text!r}")
    return value


def _job_mlflow_logger(target: TrackingTarget, run_id: str, flush_seconds: float | None = None) -> Any:
    """Lightning's MLFlowLogger attached to the job run, batching metrics over time.

    Lightning's ``MLFlowLogger.log_metrics`` makes one ``log_batch`` (one tracking-store transaction: ~20 ms
    plus ~0.18 ms per metric on sqlite) per log interval, 6-17 % of a PPO CartPole job that dumps every 256 env
    steps. This logger
    keeps every metric with its step and timestamp and sends them in ``log_batch`` calls of at most 1,000
    (MLflow's limit) when ``flush_seconds`` have passed since the last send, and when the trainer ends (success
    or failure: Lightning calls ``finalize``), so nothing logged is lost and the store holds the same history.
    It neither ends the run (the job does, after the final evaluation and the artifacts) nor clashes with our
    params (the model's arguments go under ``model.``).

    Args:
        target: the tracking store and experiment.
        run_id: the job's child run.
        flush_seconds: wall seconds between sends (0: one send per ``log_metrics`` call, as Lightning; None:
            :func:`metrics_flush_seconds`).
    """
    import re

    from lightning.pytorch.loggers import MLFlowLogger
    from mlflow.entities import Metric

    if flush_seconds is None:
        flush_seconds = metrics_flush_seconds()

    class JobMLFlowLogger(MLFlowLogger):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pending: list[Metric] = []
            self._last_send = time.monotonic()

        def log_hyperparams(self, params: Any) -> None:
            super().log_hyperparams({f"model.{k}": v for k, v in dict(params).items()})

        def log_metrics(self, metrics: Any, step: int | None = None) -> None:
            stamp, step = int(time.time() * 1000), int(step or 0)
            for key, value in metrics.items():
                if not isinstance(value, str):  # Lightning drops strings too; same key rule as Lightning's
                    self._pending.append(Metric(re.sub("[^a-zA-Z0-9_/. -]+", "", key), float(value), stamp, step))
            if time.monotonic() - self._last_send >= flush_seconds:
                self.flush()

        def flush(self) -> None:
            """Send every pending metric now."""
            while self._pending:
                self.experiment.log_batch(run_id=self.run_id, metrics=self._pending[:1000])
                del self._pending[:1000]
            self._last_send = time.monotonic()

        def finalize(self, status: str = "success") -> None:
            self.flush()

    return JobMLFlowLogger(experiment_name=target.experiment, tracking_uri=target.uri, run_id=run_id,
                           artifact_location=target.artifact_location)  # fmt: skip


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


def _guard_logger() -> Any:
    """A Lightning logger that raises :class:`DivergenceError` on any non-finite logged value."""
    from lightning.pytorch.loggers.logger import Logger

    class DivergenceGuard(Logger):
        @property
        def name(self) -> str:
            return "divergence_guard"

        @property
        def version(self) -> str:
            return "0"

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            return None

        def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
            for key, value in metrics.items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise DivergenceError(key, int(step or 0), value)

    return DivergenceGuard()


def _callbacks(spec: JobSpec, eval_env: Any, hooks: Sequence[EvaluationHook],
               progress: Callable[[JobProgress], None] | None) -> tuple[Any, Any, Any]:  # fmt: skip
    """(eval callback, hook callback, progress callback) — SB3-style callbacks."""
    import numpy as np

    from lit_sb3.callbacks import BaseCallback, EvalCallback

    class HookCallback(BaseCallback):
        """After each evaluation: record the curve, report progress, call the hooks."""

        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[int, float, float, float]] = []
            self.stopped = False

        def record(self) -> None:
            parent = self.parent
            mean = float(parent.last_mean_reward)
            std = float(np.std(parent.last_rewards)) if getattr(parent, "last_rewards", None) else math.nan
            length = float(np.mean(parent.last_lengths)) if getattr(parent, "last_lengths", None) else math.nan
            self.rows.append((int(self.num_timesteps), mean, std, length))
            progress_cb.report(force=True)

        def _on_step(self) -> bool:
            self.record()
            step, mean = self.rows[-1][0], self.rows[-1][1]
            keep = True
            for hook in hooks:
                if hook(step, mean) is False:
                    keep = False
            if not keep:
                self.stopped = True
            return keep

    class JobEvalCallback(EvalCallback):
        """Evaluates at the first env step at or past each multiple of ``eval_freq`` total env steps (exact
        when ``n_envs`` divides it); keeps the last episode returns."""

        next_eval = spec.eval_freq

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            while self.next_eval <= self.num_timesteps:
                self.next_eval += spec.eval_freq
            self.evaluate()
            return self._on_event()

        def evaluate(self) -> tuple[float, float]:
            from lit_sb3.core.evaluation import evaluate_policy
            from lit_sb3.vec_env import sync_envs_normalization

            assert self.model is not None
            if self.model.get_vec_normalize_env() is not None:
                sync_envs_normalization(self.training_env, self.eval_env)
            rewards, lengths = evaluate_policy(
                self.model, self.eval_env, n_eval_episodes=self.n_eval_episodes, deterministic=True,
                return_episode_rewards=True, warn=False,
                use_masking=bool(getattr(self.model, "supports_action_masks", False)),
            )  # fmt: skip
            self.last_rewards, self.last_lengths = list(rewards), list(lengths)  # type: ignore[arg-type]
            mean, std = float(np.mean(rewards)), float(np.std(rewards))
            self.last_mean_reward = mean
            self.last_eval_step = self.num_timesteps
            metrics = {"eval/mean_reward": mean, "eval/std_reward": std, "eval/mean_ep_length": float(np.mean(lengths))}
            self.model.log_metrics(metrics, step=self.num_timesteps)
            return mean, std

    class ProgressCallback(BaseCallback):
        """Progress snapshots about once a second; NaN/inf rewards raise :class:`DivergenceError`."""

        def __init__(self) -> None:
            super().__init__()
            self.last_sent = 0.0
            self.t0 = time.monotonic()

        def _on_training_start(self) -> None:
            self.t0 = time.monotonic()

        def report(self, force: bool = False) -> None:
            now = time.monotonic()
            if progress is None or (not force and now - self.last_sent < 1.0):
                return
            self.last_sent = now
            model = self.model
            assert model is not None
            buf = model.ep_info_buffer
            last_return = float(buf[-1]["r"]) if buf else math.nan
            steps = int(model.num_timesteps)
            progress(JobProgress(spec.job_id, steps, spec.n_timesteps, steps / max(now - self.t0, 1e-9),
                                 last_return, float(eval_cb.last_mean_reward) if eval_cb.last_eval_step else math.nan))  # fmt: skip

        def _on_step(self) -> bool:
            rewards = self.locals.get("rewards")
            if rewards is not None and not np.all(np.isfinite(rewards)):
                bad = float(np.asarray(rewards)[~np.isfinite(rewards)][0])
                raise DivergenceError("rollout/reward", int(self.num_timesteps), bad)
            if self.n_calls % 32 == 0:
                self.report()
            return True

    hook_cb = HookCallback()
    eval_cb = JobEvalCallback(
        eval_env, callback_after_eval=hook_cb, n_eval_episodes=spec.eval_episodes, eval_freq=spec.eval_freq,
        verbose=0, warn=False,
    )  # fmt: skip
    eval_cb.last_eval_step = 0
    progress_cb = ProgressCallback()
    return eval_cb, hook_cb, progress_cb


# ---------------------------------------------------------------------------------------------------------
# envs and model
# ---------------------------------------------------------------------------------------------------------
def _import_path(path: str) -> Any:
    import importlib

    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def build_env(spec: JobSpec, *, evaluation: bool = False) -> Any:
    """The train (or eval) VecEnv of a job, wrapped as the zoo does: env wrappers, VecEnv wrappers,
    VecNormalize (eval: frozen, rewards not normalised), VecFrameStack.

    Args:
        spec: the job.
        evaluation: build the single-env evaluation env (seed ``seed + 10_000``).
    """
    from lit_sb3.vec_env import VecFrameStack, VecNormalize, make_vec_env
    from lit_sb3.zoo.wrappers import make_env_wrapper

    cfg = spec.resolved_config()
    wrapper = make_env_wrapper(cfg.env_wrapper) if cfg.env_wrapper else None
    env_kwargs = cfg.eval_env_kwargs if evaluation and cfg.eval_env_kwargs is not None else cfg.env_kwargs
    env = make_vec_env(
        cfg.env_id, n_envs=1 if evaluation else cfg.n_envs, seed=spec.seed + (10_000 if evaluation else 0),
        wrapper_class=wrapper, env_kwargs=dict(env_kwargs or {}), monitor_kwargs=dict(cfg.monitor_kwargs or {}),
    )  # fmt: skip
    for path, kwargs in cfg.vec_env_wrapper:
        if path.rsplit(".", 1)[-1] == "VecNormalize":
            continue  # normalisation is handled below (normalize: ...)
        env = _import_path(path)(env, **kwargs)
    if cfg.normalize:
        kwargs = dict(cfg.normalize_kwargs)
        if evaluation:
            kwargs.update(training=False, norm_reward=False)
        env = VecNormalize(env, **kwargs)
    if cfg.frame_stack:
        env = VecFrameStack(env, cfg.frame_stack)
    return env


def build_model(spec: JobSpec, action_space: Any) -> Any:
    """The algorithm object of a job (action noise built for the action space's size).

    Args:
        spec: the job.
        action_space: the train env's action space.
    """
    from lit_sb3.zoo.config import build_action_noise
    from lit_sb3.zoo.registry import get_algo_class

    cfg = spec.resolved_config()
    kwargs = dict(cfg.algo_kwargs)
    noise = kwargs.pop("action_noise", None)
    if noise is not None:
        kwargs["action_noise"] = build_action_noise(noise, int(action_space.shape[0]))
    kwargs.update(seed=spec.seed, device=spec.device, verbose=0)
    return get_algo_class(spec.algo)(cfg.policy, **kwargs)


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
    client = None
    if use_mlflow:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=tracking.uri)
        if run_id is None:
            from lit_sb3.zoo.tracking import Tracking, run_environment_tags

            run_id = Tracking(client, tracking).create_job_run(spec, parent_run_id, run_environment_tags())
    result = JobResult(spec.job_id, spec.name, "FAILED", run_id=run_id)
    train_env = eval_env = None
    model = None
    mlflow_logger = None
    try:
        from lit_sb3 import RLEnvDataModule, RLTrainer

        train_env = build_env(spec)
        eval_env = build_env(spec, evaluation=True)
        model = build_model(spec, train_env.action_space)
        eval_cb, hook_cb, progress_cb = _callbacks(spec, eval_env, hooks, progress)
        cfg = spec.resolved_config()
        cfg_callbacks = [_import_path(path)(**kwargs) for path, kwargs in cfg.callback]
        if use_mlflow:
            mlflow_logger = _job_mlflow_logger(tracking, run_id)
        loggers = ([mlflow_logger] if mlflow_logger is not None else []) + [_guard_logger()]
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
            result.stopped_early = bool(hook_cb.stopped)
            if eval_cb.last_eval_step != model.num_timesteps or not hook_cb.rows:
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
            for logger in trainer.loggers:
                logger.log_metrics(final, step=int(model.num_timesteps))
            if mlflow_logger is not None:
                mlflow_logger.flush()
            if client is not None:
                folder = Path(tmp) / "artifacts"
                folder.mkdir()
                _write_artifacts(folder, spec, model, hook_cb.rows)
                client.log_artifacts(run_id, str(folder))
                if result.stopped_early:
                    client.set_tag(run_id, "lit_sb3.stopped_early", "true")
            result.status = stopped_status if result.stopped_early else "FINISHED"
            if client is not None:
                client.set_terminated(run_id, result.status)
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then re-raised if not an Exception
        killed = not isinstance(exc, Exception)
        result.status = "KILLED" if killed else "FAILED"
        result.failure_reason = "interrupted" if killed else _reason(exc)
        result.wall_seconds = time.monotonic() - t_start
        result.env_steps = int(getattr(model, "num_timesteps", 0) or 0)
        if client is not None:
            if mlflow_logger is not None:
                try:
                    mlflow_logger.flush()  # what was logged before the failure is kept
                except Exception:  # noqa: BLE001 - recording the failure matters more
                    pass
            try:
                client.set_tag(run_id, FAILURE_TAG, result.failure_reason)
                client.log_text(run_id, traceback.format_exc(), "traceback.txt")
                client.set_terminated(run_id, result.status)
            except Exception:  # noqa: BLE001 - the launcher ends the run if this fails
                pass
        if killed:
            raise
    finally:
        for env in (train_env, eval_env):
            if env is not None:
                try:
                    env.close()
                except Exception:  # noqa: BLE001
                    pass
    return result


def _reason(exc: BaseException) -> str:
    """One line: ``diverged: ...`` for divergence, else ``Type: message`` (first line)."""
    if isinstance(exc, DivergenceError):
        return str(exc)
    cause = exc
    text = str(cause).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(cause).__name__}: {line}"[:500] if line else type(cause).__name__


def result_from_dict(data: dict[str, Any]) -> JobResult:
    """Rebuild a :class:`JobResult` from :meth:`JobResult.to_dict`.

    Args:
        data: the dict.
    """
    data = dict(data)
    for key in ("score", "score_std", "fps"):
        if data.get(key) is None:
            data[key] = math.nan
    data["evaluations"] = [tuple(e) for e in data.get("evaluations", [])]
    return JobResult(**data)
