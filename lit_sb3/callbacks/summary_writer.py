"""Bridges the algorithm's buffered scalars to Lightning's loggers."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback

__all__ = ["SummaryWriterCallback"]


class SummaryWriterCallback(Callback):
    """Send hyperparameters at the start of ``fit`` and flush buffered scalars at its end.

    During training the algorithm buffers scalars (``model.record``) and sends them to every logger in
    ``trainer.loggers`` once per log interval with ``step = num_timesteps``; this callback makes sure that the
    hyperparameters are logged once and that nothing buffered is lost when ``fit`` ends.
    """

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        params = pl_module.hyperparameters_for_logging() if hasattr(pl_module, "hyperparameters_for_logging") else {}
        for logger in trainer.loggers:
            logger.log_hyperparams(params)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if hasattr(pl_module, "flush_logs"):
            pl_module.flush_logs()
        for logger in trainer.loggers:
            logger.save()
