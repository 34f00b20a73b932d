"""The suite's one gateway to MLflow: every run of ``bench run``, ``bench tune`` and ``bench report`` is
created, tagged, logged to, queried and ended through this package, and no other module of ``lit_sb3``
imports ``mlflow`` (``tests/test_tracking.py`` checks it).

- :mod:`~lit_sb3.zoo.tracking.store`: the store, the experiment, parent/child runs, resume bookkeeping;
- :mod:`~lit_sb3.zoo.tracking.logger`: the job's Lightning logger (``MLFlowLogger`` subclass, batched sends;
  imports Lightning, so the worker imports it, never the CLI).

Importing this package is light: mlflow is imported inside functions only.
"""

from __future__ import annotations

import math
import os

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tracking.store import (
    DEFAULT_TRACKING_URI,
    FAILURE_TAG,
    PROC_TAG,
    RUN_TYPE,
    Tracking,
    TrackingTarget,
    _process_tag,
    _quiet_mlflow,
    connect,
    default_artifact_location,
    default_experiment_name,
    fail_fast,
    flatten_params,
    open_tracking,
    pid_alive,
    run_environment_tags,
    sqlite_path,
)

__all__ = [
    "DEFAULT_TRACKING_URI",
    "FAILURE_TAG",
    "METRICS_FLUSH_SECONDS",
    "PROC_TAG",
    "RUN_TYPE",
    "Tracking",
    "TrackingTarget",
    "connect",
    "default_artifact_location",
    "default_experiment_name",
    "fail_fast",
    "flatten_params",
    "job_logger",
    "metrics_flush_seconds",
    "open_tracking",
    "pid_alive",
    "run_environment_tags",
    "sqlite_path",
    "_process_tag",
    "_quiet_mlflow",
]

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


def job_logger(target: TrackingTarget, run_id: str, flush_seconds: float | None = None):  # noqa: ANN201
    """The job's Lightning logger (:class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`) on its child run.

    Args:
        target: the tracking store and experiment.
        run_id: the job's child run.
        flush_seconds: wall seconds between sends (0: one send per ``log_metrics`` call, as Lightning; None:
            :func:`metrics_flush_seconds`).
    """
    from lit_sb3.zoo.tracking.logger import JobMLFlowLogger

    return JobMLFlowLogger(target, run_id, metrics_flush_seconds() if flush_seconds is None else flush_seconds)
