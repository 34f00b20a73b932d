"""The divergence guard of a job: a Lightning logger that fails the job on the first non-finite value."""

from __future__ import annotations

import math
from typing import Any

from lightning.pytorch.loggers.logger import Logger

from lit_sb3.zoo.worker.protocol import DivergenceError

__all__ = ["DivergenceGuard"]


class DivergenceGuard(Logger):
    """Raises :class:`~lit_sb3.zoo.worker.protocol.DivergenceError` on any non-finite logged value (losses,
    ``rollout/*``, ``eval/*``), so a diverged job ends FAILED with the key and step instead of training on."""

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
