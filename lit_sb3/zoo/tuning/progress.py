"""Progress lines of ``bench tune``: every ``interval`` seconds (``--progress-interval``, 30 by default) one line
with the trials finished (complete, pruned, failed) and running, the env steps done of the study's budget, each
running trial's env steps and env steps per second, and an ETA, so a study followed through a log file (pipe,
``nohup``, CI, Slurm) never goes silent between two trial lines.

The line is read from the study's storage (a separate handle, in a thread), so it covers every worker process. A
running trial's env steps are its last reported evaluation step (Optuna's intermediate values are reported at
env steps) and its rate is that step over the trial's time so far; the ETA is the budget left at the mean rate
of the trials measured so far times the number of workers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import sys
import threading
import time
from typing import IO, Any

from lit_sb3.zoo.cost import duration

__all__ = ["StudyProgress"]

_MAX_LINE_TRIALS = 8


class StudyProgress:
    """Prints a study's progress line every ``interval`` seconds while it runs.

    Args:
        storage: the storage spec (:func:`lit_sb3.zoo.tuning.study.storage_spec`).
        study_name: the study.
        n_trials: finished trials the study should hold.
        steps_per_trial: env steps of one trial (budget x seeds per trial).
        workers: trials run at once.
        interval: seconds between lines.
        file: where to write (default stdout).
    """

    def __init__(self, storage: str, study_name: str, n_trials: int, steps_per_trial: int, workers: int,
                 interval: float, file: IO[str] | None = None) -> None:  # fmt: skip
        self.storage = storage
        self.study_name = study_name
        self.n_trials = n_trials
        self.steps_per_trial = steps_per_trial
        self.workers = max(1, workers)
        self.interval = interval
        self.file = file or sys.stdout
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._study: Any = None

    def start(self) -> StudyProgress:
        """Start the ticker thread."""
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bench-tune-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop it (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StudyProgress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # a storage being written to: the next tick reads it again
                self.file.write(self.line() + "\n")
                self.file.flush()

    def _trials(self) -> list[Any]:
        if self._study is None:
            import optuna

            from lit_sb3.zoo.tuning.study import open_storage

            self._study = optuna.load_study(study_name=self.study_name, storage=open_storage(self.storage))
        return self._study.get_trials(deepcopy=False)

    def line(self) -> str:
        """The progress line, read from the storage now."""
        from optuna.trial import TrialState

        trials = self._trials()
        now = dt.datetime.now()
        count = {s: sum(t.state == s for t in trials) for s in (TrialState.COMPLETE, TrialState.PRUNED,
                                                                TrialState.FAIL, TrialState.RUNNING)}  # fmt: skip
        finished = count[TrialState.COMPLETE] + count[TrialState.PRUNED]
        done_steps, rates, parts = 0, [], []
        for t in trials:
            steps = max(t.intermediate_values, default=0)
            seconds = ((t.datetime_complete or now) - t.datetime_start).total_seconds() if t.datetime_start else 0.0
            if t.state == TrialState.RUNNING:  # a trial counts within its budget (rollouts round it up)
                done_steps += min(steps, self.steps_per_trial)
                rate = steps / seconds if steps and seconds > 0 else math.nan
                if len(parts) < _MAX_LINE_TRIALS:
                    fps = "-" if math.isnan(rate) else f"{rate:,.0f}"
                    shown = min(steps, self.steps_per_trial)
                    parts.append(f"trial {t.number} {shown:,}/{self.steps_per_trial:,} at {fps} fps")
            else:
                used = int(t.user_attrs.get("env_steps", self.steps_per_trial if t.state == TrialState.COMPLETE else 0))
                done_steps += min(used, self.steps_per_trial)
                rate = used / seconds if used and seconds > 0 else math.nan
            if math.isfinite(rate):
                rates.append(rate)
        total = self.n_trials * self.steps_per_trial
        left = max(0, total - done_steps)
        eta = left / (sum(rates) / len(rates) * self.workers) if rates else math.nan
        if finished >= self.n_trials:
            eta = 0.0
        head = (
            f"[{time.strftime('%H:%M:%S')}] trials: {finished}/{self.n_trials} finished ({count[TrialState.COMPLETE]} "
            f"complete, {count[TrialState.PRUNED]} pruned), {count[TrialState.FAIL]} failed, "
            f"{count[TrialState.RUNNING]} running | env steps: {done_steps:,}/{total:,} | elapsed "
            f"{duration(time.monotonic() - self.t0)} | ETA {duration(eta)}"
        )
        return head + (f" | {'; '.join(parts)}" if parts else "")
