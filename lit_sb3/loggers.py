"""Lightning loggers the library offers.

* :class:`SeedRoutingLogger` — gives each seed of a K-seed model its own logger: the model logs seed index i's
  metrics as ``seed{i}/<SB3 key>`` (K > 1; a single seed logs its keys unprefixed), and this logger forwards them to
  ``per_seed_loggers[i]`` as ``<SB3 key>``, so logger i receives exactly what the separate run of seed i would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lightning.pytorch.loggers import Logger

__all__ = ["SeedRoutingLogger"]

_SEED_KEY = re.compile(r"^seed(\d+)/(.+)$")


class SeedRoutingLogger(Logger):
    """A Lightning logger that gives each seed of a batch its own logger: ``seed{i}/<key>`` metrics go to
    ``per_seed_loggers[i]`` as ``<key>`` (same step), ``seed{i}/<name>`` hyperparameters likewise, other
    hyperparameters to every logger; batch-wide metrics (no ``seed{i}/`` prefix) go to ``batch_logger`` if any.

    Args:
        per_seed_loggers: one Lightning logger per seed index (TensorBoard, CSV, MLflow child runs, ...).
        batch_logger: where batch-wide metrics go (None: dropped).
    """

    def __init__(self, per_seed_loggers: Sequence[Logger], batch_logger: Logger | None = None) -> None:
        super().__init__()
        if not per_seed_loggers:
            raise ValueError("SeedRoutingLogger needs one logger per seed, got none.")
        self.per_seed_loggers = list(per_seed_loggers)
        self.batch_logger = batch_logger

    @property
    def name(self) -> str:
        return "seed_routing"

    @property
    def version(self) -> str:
        return "0"

    def _split(self, values: dict[str, Any]) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
        per_seed: dict[int, dict[str, Any]] = {}
        rest: dict[str, Any] = {}
        for key, value in values.items():
            match = _SEED_KEY.match(key)
            index = int(match.group(1)) if match else -1
            if match and index < len(self.per_seed_loggers):
                per_seed.setdefault(index, {})[match.group(2)] = value
            else:
                rest[key] = value
        return per_seed, rest

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        per_seed, rest = self._split(metrics)
        for i, values in per_seed.items():
            self.per_seed_loggers[i].log_metrics(values, step=step)
        if rest and self.batch_logger is not None:
            self.batch_logger.log_metrics(rest, step=step)

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        from lit_sb3.callbacks.summary_writer import _write_tensorboard_hparams

        params = dict(params) if isinstance(params, dict) else vars(params)
        per_seed, rest = self._split(params)
        for i, logger in enumerate(self.per_seed_loggers):
            values = {**rest, **per_seed.get(i, {})}
            logger.log_hyperparams(values)
            if type(logger).__name__ == "TensorBoardLogger":
                _write_tensorboard_hparams(logger, values)
        if self.batch_logger is not None:
            self.batch_logger.log_hyperparams(rest)

    def save(self) -> None:
        for logger in self._all():
            logger.save()

    def finalize(self, status: str) -> None:
        for logger in self._all():
            logger.finalize(status)

    def _all(self) -> list[Logger]:
        return self.per_seed_loggers + ([self.batch_logger] if self.batch_logger is not None else [])
