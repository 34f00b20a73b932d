"""The one place that reaches into Lightning's private members (and a private method Lightning itself uses).

RL runs Lightning's loop in a way it does not offer publicly (a ``training_step`` is a whole collect/update cycle
whose ``global_step`` must advance by one; checkpoints that monitor an evaluation save after a training step).
Each private use is one function here, with why it is needed, so that a Lightning upgrade is checked in one file:
``tests/test_lightning_features.py`` and ``tests/test_resume.py`` exercise every function, and ``scripts/test.sh``
runs them against the lowest Lightning that ``pyproject.toml`` allows too.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = [
    "attached_trainer",
    "checkpoint_every_n_train_steps",
    "checkpoint_has_own_cadence",
    "count_completed_cycle",
    "runs_under_fabric",
    "save_monitored_checkpoint",
    "set_reported_device",
    "tensorboard_file_writer",
]


def attached_trainer(module: Any) -> Any:
    """The trainer a LightningModule is attached to, or None.

    ``LightningModule.trainer`` raises when the module is used outside a fit (``predict``, ``learn`` set-up, an
    evaluation); ``_trainer`` is the attribute behind it, None when unattached.

    Args:
        module: a LightningModule.
    """
    return module._trainer


def set_reported_device(module: Any, device: Any) -> None:
    """Make ``module.device`` report ``device`` before Lightning places the module (SB3's ``model.device`` is the
    requested device from the constructor on; the networks are built there).

    ``LightningModule.device`` reads ``_device``, which Lightning sets itself when it moves the module (``.to``,
    the strategy's ``model_to_device``); nothing is moved here.

    Args:
        module: a LightningModule.
        device: a ``torch.device``.
    """
    module._device = device


def runs_under_fabric(module: Any) -> bool:
    """Whether the module is driven by Lightning Fabric (``_fabric`` is set by ``Fabric.setup``; no public
    accessor), where ``manual_backward`` must be used.

    Args:
        module: a LightningModule.
    """
    return getattr(module, "_fabric", None) is not None


def count_completed_cycle(trainer: Any) -> None:
    """Advance ``trainer.global_step`` by one completed collect/update cycle.

    Under manual optimisation ``global_step`` is the fit loop's count of optimizer steps
    (``fit_loop.epoch_loop.manual_optimization.optim_step_progress``, a loop internal). An RL cycle makes any
    number of optimizer steps (none during the warm-up), so the trainer counts cycles itself: one ready and
    completed step per cycle, which is also what Lightning's checkpoints save and restore.

    Args:
        trainer: the running trainer.
    """
    progress = trainer.fit_loop.epoch_loop.manual_optimization.optim_step_progress
    progress.increment_ready()
    progress.increment_completed()


def checkpoint_every_n_train_steps(callback: ModelCheckpoint) -> int:
    """``ModelCheckpoint(every_n_train_steps=N)``'s N (0 when unset): kept only as ``_every_n_train_steps``.
    The trainer ends its ``training_step`` on those multiples so that the saves land on them.

    Args:
        callback: a ModelCheckpoint.
    """
    return int(callback._every_n_train_steps)


def checkpoint_has_own_cadence(callback: ModelCheckpoint) -> bool:
    """Whether a ModelCheckpoint saves on a step or time cadence of its own (``_every_n_train_steps`` /
    ``_train_time_interval``, no public accessor) rather than after evaluations.

    Args:
        callback: a ModelCheckpoint.
    """
    return callback._every_n_train_steps >= 1 or callback._train_time_interval is not None


def save_monitored_checkpoint(callback: ModelCheckpoint, trainer: Any) -> None:
    """Let a ModelCheckpoint that monitors a metric save its top-k (and ``last``) now, as it does after
    Lightning's validation loop (``on_validation_end`` runs the same three private methods); an RL evaluation
    runs inside a ``training_step``, where Lightning offers no public trigger.

    Args:
        callback: a ModelCheckpoint with a ``monitor``.
        trainer: the running trainer.
    """
    candidates = callback._monitor_candidates(trainer)
    if callback.monitor in candidates:
        callback._save_topk_checkpoint(trainer, candidates)
        callback._save_last_checkpoint(trainer, candidates)


def tensorboard_file_writer(logger: Any) -> Any:
    """The event-file writer of a TensorBoardLogger, reopened if a previous fit's end closed it.

    torch's ``SummaryWriter._get_file_writer`` (what Lightning's own ``TensorBoardLogger.log_hyperparams`` calls)
    recreates the writer that ``close()`` dropped; ``file_writer`` would be None after a first fit.

    Args:
        logger: a TensorBoardLogger.
    """
    return logger.experiment._get_file_writer()
