"""The logger of one seed of a job: its MLflow logger behind a divergence guard.

Every seed of a job (a single job is a batch of one seed) logs through its own :class:`SeedLogger`: the
metrics the model sends for it (``seed{i}/<key>`` routed by ``lit_sb3.SeedRoutingLogger``, or the plain keys of
a single model) go to the seed's MLflow run, and the first non-finite value (a loss, ``rollout/*``, ``eval/*``)
hands a :class:`~lit_sb3.zoo.worker.protocol.DivergenceError` to ``on_diverged``, which fails that seed alone.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable
from typing import Any

from lightning.pytorch.loggers.logger import Logger

from lit_sb3.zoo.worker.protocol import DivergenceError

__all__ = ["SeedLogger"]


class SeedLogger(Logger):
    """One seed's Lightning logger: its MLflow logger (if any), the divergence guard, and the last value of each
    key (the progress snapshots read ``rollout/ep_rew_mean`` from it). Nothing is logged once the seed has ended.

    Args:
        mlflow_logger: the seed's :class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger` (None: no tracking).
        on_diverged: called with the :class:`DivergenceError` and its traceback text.
    """

    def __init__(self, mlflow_logger: Any, on_diverged: Callable[[DivergenceError, str], None]) -> None:
        super().__init__()
        self.mlflow_logger = mlflow_logger
        self.on_diverged = on_diverged
        self.last: dict[str, float] = {}
        self.closed = False

    @property
    def name(self) -> str:
        return "seed"

    @property
    def version(self) -> str:
        return "0"

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        params = dict(params) if isinstance(params, dict) else vars(params)
        if self.mlflow_logger is not None and not self.closed:  # the seed's own, as its separate run logs them
            self.mlflow_logger.log_hyperparams({k: v for k, v in params.items() if k != "seeds"})

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self.closed:
            return
        if self.mlflow_logger is not None:
            self.mlflow_logger.log_metrics(metrics, step)
        self.last.update(metrics)
        bad = next(((k, v) for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)), None)
        if bad is not None:  # the seed's traceback.txt: where the value was logged from
            exc = DivergenceError(bad[0], int(step or 0), bad[1])
            self.on_diverged(exc, "".join(traceback.format_stack()[:-1]) + f"DivergenceError: {exc}\n")

    def flush(self) -> None:
        if self.mlflow_logger is not None:
            self.mlflow_logger.flush()

    def finalize(self, status: str = "success") -> None:
        if not self.closed:
            self.flush()
