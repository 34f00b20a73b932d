"""What a job reports to its launcher and to the caller of :func:`~lit_sb3.zoo.runner.run_job` (light: no
torch, no Lightning, no MLflow)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

__all__ = ["DivergenceError", "EvaluationHook", "JobProgress", "JobResult", "failure_reason", "result_from_dict"]


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
        last_return: mean return of the recent training episodes (``rollout/ep_rew_mean`` as last logged; NaN
            before the first).
        last_eval: last evaluation mean reward (NaN before the first).
        elapsed: seconds since the start of training (its process's: a seed batch's seeds share it).
        eval_seconds: seconds of it spent evaluating (every seed of the process).
        eval_steps: env steps of this seed's evaluations so far.
        n_evals: this seed's evaluations so far.
        warmup_steps: env steps before the first update (off-policy ``learning_starts``; 0: none).
        warmup_seconds: training seconds the warm-up took (NaN until it is over).
        batch: seeds trained together in the process.
    """

    job_id: str
    env_steps: int
    total: int
    fps: float
    last_return: float = math.nan
    last_eval: float = math.nan
    elapsed: float = math.nan
    eval_seconds: float = 0.0
    eval_steps: int = 0
    n_evals: int = 0
    warmup_steps: int = 0
    warmup_seconds: float = math.nan
    batch: int = 1


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


def failure_reason(exc: BaseException) -> str:
    """The one-line reason a run records for ``exc``: ``diverged: ...`` for divergence, else ``Type: message``
    (its first line, at most 500 characters).

    Args:
        exc: what was raised.
    """
    if isinstance(exc, DivergenceError):
        return str(exc)
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}"[:500] if line else type(exc).__name__
