"""The logger of one seed of a job: its MLflow logger behind a divergence guard.

Every seed of a job (a single job is a batch of one seed) logs through its own :class:`SeedLogger`: the
metrics the model sends for it (``seed{i}/<key>`` routed by ``lit_sb3.SeedRoutingLogger``, or the plain keys of
a single model) go to the seed's MLflow run, and the first non-finite value (a loss, ``rollout/*``, ``eval/*``)
hands a :class:`~lit_sb3.zoo.worker.protocol.DivergenceError` to ``on_failed``, which fails that seed alone; so
does an exception from the seed's own MLflow logger (its store refusing a write): that seed fails with its reason,
the other seeds' loggers go on.
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
        on_failed: ``on_failed(exc, traceback_text)``, called with the :class:`DivergenceError` of a non-finite
            value or the exception the MLflow logger raised.
        logged_through: ``{key: env step}`` already in the seed's run (a seed rerun alone after its batch
            raised): a metric is sent only past that step, so no point of the run is recorded twice.
    """

    def __init__(self, mlflow_logger: Any, on_failed: Callable[[Exception, str], None],
                 logged_through: dict[str, int] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.mlflow_logger = mlflow_logger
        self.on_failed = on_failed
        self.last: dict[str, float] = {}
        self.logged_through = dict(logged_through or {})
        self.last_step: dict[str, int] = {}  # the env step each key was last logged at
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
            try:
                self.mlflow_logger.log_hyperparams({k: v for k, v in params.items() if k != "seeds"})
            except Exception as exc:  # noqa: BLE001 - this seed's store refused: this seed fails
                self.on_failed(exc, traceback.format_exc())

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self.closed:
            return
        at = int(step or 0)
        if self.mlflow_logger is not None:
            new = {k: v for k, v in metrics.items() if at > self.logged_through.get(k, -1)}
            try:
                if new:
                    self.mlflow_logger.log_metrics(new, step)
            except Exception as exc:  # noqa: BLE001 - this seed's store refused: this seed fails
                self.on_failed(exc, traceback.format_exc())
                return
        self.last.update(metrics)
        self.last_step.update(dict.fromkeys(metrics, at))
        bad = next(((k, v) for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)), None)
        if bad is not None:  # the seed's traceback.txt: where the value was logged from
            exc = DivergenceError(bad[0], at, bad[1])
            self.on_failed(exc, "".join(traceback.format_stack()[:-1]) + f"DivergenceError: {exc}\n")

    def flush(self) -> None:
        if self.mlflow_logger is not None:
            self.mlflow_logger.flush()

    def finalize(self, status: str = "success") -> None:
        if not self.closed:
            self.flush()
