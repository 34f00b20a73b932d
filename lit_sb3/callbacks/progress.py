"""A progress bar that counts env steps against the RL budget (rich)."""

from __future__ import annotations

from lit_sb3.callbacks.base import BaseCallback

__all__ = ["ProgressBarCallback"]


class ProgressBarCallback(BaseCallback):
    """Show ``num_timesteps / total_timesteps`` with rich, updated at most ~10 times per second."""

    def __init__(self) -> None:
        super().__init__()
        self._progress = None
        self._task = None

    def _on_training_start(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        assert self.model is not None
        total = self.model._total_timesteps
        self._progress = Progress(
            TextColumn("env steps"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            refresh_per_second=10,
        )
        self._progress.start()
        self._task = self._progress.add_task("train", total=total, completed=self.model.num_timesteps)

    def _on_step(self) -> bool:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.num_timesteps)  # type: ignore[arg-type]
        return True

    def _on_training_end(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.num_timesteps)  # type: ignore[arg-type]
            self._progress.stop()
            self._progress = None
