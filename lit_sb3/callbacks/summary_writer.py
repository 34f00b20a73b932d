"""Bridges the algorithm's buffered scalars and hyperparameters to Lightning's loggers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback

__all__ = ["SummaryWriterCallback"]


class SummaryWriterCallback(Callback):
    """Send hyperparameters at the start of ``fit`` and flush buffered scalars at its end.

    During training the algorithm buffers scalars (``model.record``) and sends them to every logger in
    ``trainer.loggers`` once per log interval, each at the env step it was recorded; this callback logs the
    model's constructor parameters once (for TensorBoard also as an HParams session, so that the HParams tab
    lists the run, with every scalar of the run as a metric, and as ``hparams.yaml``) and makes sure that nothing
    buffered is lost when ``fit`` ends.
    """

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not getattr(trainer, "enable_autolog_hparams", True):  # Trainer(enable_autolog_hparams=False)
            return
        params = pl_module.hyperparameters_for_logging() if hasattr(pl_module, "hyperparameters_for_logging") else {}
        for logger in trainer.loggers:
            logger.log_hyperparams(params)
            if type(logger).__name__ == "TensorBoardLogger":
                _write_tensorboard_hparams(logger, params)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if hasattr(pl_module, "flush_logs"):
            pl_module.flush_logs()
        for logger in trainer.loggers:
            logger.save()


def _write_tensorboard_hparams(logger: Any, params: dict[str, Any]) -> None:
    """The HParams session of the run (without an experiment summary, TensorBoard takes every scalar of the run
    as a metric) and ``hparams.yaml`` (Lightning writes it only once, before the model's parameters are known)."""
    from lightning.pytorch.core.saving import save_hparams_to_yaml
    from torch.utils.tensorboard.summary import hparams

    values = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in params.items()}
    _, session_start, _ = hparams(values, {})
    from lit_sb3.lightning_compat import tensorboard_file_writer

    tensorboard_file_writer(logger).add_summary(session_start)  # reopened when a previous fit closed it
    log_dir = Path(logger.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    save_hparams_to_yaml(log_dir / "hparams.yaml", logger.hparams)
