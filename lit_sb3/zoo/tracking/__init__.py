"""The suite's one gateway to MLflow: every run of ``bench run``, ``bench tune`` and ``bench report`` is
created, tagged, logged to, queried and ended through this package, and no other module of ``lit_sb3``
imports ``mlflow`` (``tests/test_tracking.py`` checks it).

- :mod:`~lit_sb3.zoo.tracking.store`: :class:`Tracking`, the store and experiment: generic run operations
  (create, tag, log params/metrics/artifacts, search, end) and the suite's run layout (grid, job, resume);
- :mod:`~lit_sb3.zoo.tracking.open`: opening a store for a grid or study, in a worker, or for reading;
- :mod:`~lit_sb3.zoo.tracking.logger`: the job's Lightning logger (``MLFlowLogger`` subclass, batched sends;
  imports Lightning, so the worker imports it, never the CLI);
- :mod:`~lit_sb3.zoo.tracking.names`: names that become paths, params as plain text;
- :mod:`~lit_sb3.zoo.tracking.host`: hosts, processes, versions.

Importing this package is light: mlflow is imported inside functions only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tracking.host import fail_fast, pid_alive, process_tag, run_environment_tags, sqlite_path
from lit_sb3.zoo.tracking.names import (
    check_name,
    default_artifact_location,
    default_experiment_name,
    flatten_params,
    folder_name,
    job_params,
    readable,
    report_folder,
)
from lit_sb3.zoo.tracking.open import connect, open_reader, open_tracking, quiet_mlflow, warm_imports
from lit_sb3.zoo.tracking.store import (
    DEFAULT_TRACKING_URI,
    FAILURE_TAG,
    PROC_TAG,
    RUN_TYPE,
    Tracking,
    TrackingTarget,
    sqlite_finished_job_ids,
)

__all__ = [
    "DEFAULT_TRACKING_URI",
    "FAILURE_TAG",
    "METRICS_FLUSH_SECONDS",
    "PROC_TAG",
    "RUN_TYPE",
    "Tracking",
    "TrackingTarget",
    "check_name",
    "connect",
    "default_artifact_location",
    "default_experiment_name",
    "fail_fast",
    "flatten_params",
    "folder_name",
    "job_params",
    "job_logger",
    "metrics_flush_seconds",
    "open_reader",
    "open_tracking",
    "pid_alive",
    "readable",
    "report_folder",
    "run_environment_tags",
    "sqlite_finished_job_ids",
    "sqlite_path",
    "process_tag",
    "quiet_mlflow",
    "warm_imports",
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


def job_logger(  # noqa: ANN201 - the return type imports Lightning
    target: TrackingTarget, run_id: str, flush_seconds: float | None = None, logged: Iterable[str] = ()
):
    """The job's Lightning logger (:class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`) on its child run.

    Args:
        target: the tracking store and experiment.
        run_id: the job's child run.
        flush_seconds: wall seconds between sends (0: one send per ``log_metrics`` call, as Lightning; None:
            :func:`metrics_flush_seconds`).
        logged: param keys the run already has (the model's arguments are added for the others).
    """
    from lit_sb3.zoo.tracking.logger import JobMLFlowLogger

    seconds = metrics_flush_seconds() if flush_seconds is None else flush_seconds
    return JobMLFlowLogger(target, run_id, seconds, logged)
