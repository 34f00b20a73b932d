"""Progress display of ``bench run``: a rich live table on a terminal, plain lines otherwise.

The table shows how many jobs are done, running and failed, and per job its env steps, fps, the return of
its last training episode and its last evaluation. When stdout is not a terminal (CI, ``| tee``), one line
is printed when a job starts and one when it ends.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import IO, Any

from lit_sb3.zoo.launchers.base import JobDone, JobStarted, LaunchEvent
from lit_sb3.zoo.runner import JobProgress

__all__ = ["GridProgress"]

_MAX_DONE_ROWS = 8


@dataclass
class _Row:
    name: str
    status: str = "queued"
    steps: int = 0
    total: int = 0
    fps: float = math.nan
    last_return: float = math.nan
    last_eval: float = math.nan
    started: float = 0.0
    ended: float = 0.0
    note: str = ""


def _num(value: float, fmt: str = "{:.1f}") -> str:
    return "-" if value is None or not math.isfinite(value) else fmt.format(value)


class GridProgress:
    """Shows the state of a grid while the launcher's events come in.

    Args:
        total: number of jobs to run.
        file: where to write (default stdout).
        live: force the live table on/off (default: on when ``file`` is a terminal).
    """

    def __init__(self, total: int, file: IO[str] | None = None, live: bool | None = None) -> None:
        from rich.console import Console

        self.file = file or sys.stdout
        self.console = Console(file=self.file, highlight=False)
        self.live_mode = self.console.is_terminal if live is None else live
        self.total = total
        self.rows: dict[str, _Row] = {}
        self.order: list[str] = []
        self.done = self.failed = 0
        self._live: Any = None
        self._last_refresh = 0.0

    def __enter__(self) -> GridProgress:
        if self.live_mode:
            from rich.live import Live

            self._live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(None, None, None)
            self._live = None

    @property
    def running(self) -> int:
        """Jobs started and not ended."""
        return sum(1 for r in self.rows.values() if r.status == "running")

    def handle(self, event: LaunchEvent) -> None:
        """Take one launcher event.

        Args:
            event: :class:`JobStarted`, :class:`JobProgress` or :class:`JobDone`.
        """
        if isinstance(event, JobStarted):
            row = _Row(event.spec.name, "running", total=event.spec.n_timesteps, started=time.monotonic())
            self.rows[event.spec.job_id] = row
            self.order.append(event.spec.job_id)
            if not self.live_mode:
                self._line(f"start  {event.spec.name}  (job {event.spec.job_id}, {self.running} running)")
        elif isinstance(event, JobProgress):
            row = self.rows.get(event.job_id)
            if row is None:
                return
            row.steps, row.total, row.fps = event.env_steps, event.total, event.fps
            row.last_return, row.last_eval = event.last_return, event.last_eval
        elif isinstance(event, JobDone):
            res = event.result
            row = self.rows.setdefault(event.spec.job_id, _Row(event.spec.name))
            row.status, row.ended = res.status, time.monotonic()
            row.steps = res.env_steps or row.steps
            if math.isfinite(res.fps):
                row.fps = res.fps
            if math.isfinite(res.score):
                row.last_eval = res.score
            row.note = res.failure_reason or ("stopped early" if res.stopped_early else "")
            self.done += 1
            self.failed += res.status != "FINISHED"
            if not self.live_mode:
                what = f"score {_num(res.score, '{:.2f}')}" if res.status == "FINISHED" else (res.failure_reason or "")
                self._line(
                    f"{res.status.lower():8s} [{self.done}/{self.total}] {res.name}  {what}  "
                    f"({res.env_steps} steps, {_num(res.fps, '{:.0f}')} fps, {res.wall_seconds:.1f} s)"
                )
        if self._live is not None:
            now = time.monotonic()
            if not isinstance(event, JobProgress) or now - self._last_refresh > 0.25:
                self._last_refresh = now
                self._live.update(self._table())

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False, soft_wrap=True)

    def _table(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"bench run: {self.done}/{self.total} done, {self.running} running, {self.failed} failed",
                      title_justify="left", expand=False)  # fmt: skip
        for name, justify in (("job", "left"), ("status", "left"), ("env steps", "right"), ("fps", "right"),
                              ("last return", "right"), ("last eval", "right"), ("time", "right"), ("", "left")):  # fmt: skip
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        running = [k for k in self.order if self.rows[k].status == "running"]
        ended = [k for k in self.order if self.rows[k].status not in ("running", "queued")]
        failed = [k for k in ended if self.rows[k].status != "FINISHED"]
        recent = [k for k in ended if k not in failed][-_MAX_DONE_ROWS:]
        now = time.monotonic()
        for key in [*running, *failed, *recent]:
            r = self.rows[key]
            colour = {"running": "cyan", "FINISHED": "green"}.get(r.status, "red")
            elapsed = (r.ended or now) - r.started if r.started else 0.0
            table.add_row(
                Text(r.name), Text(r.status.lower(), style=colour), f"{r.steps:,}/{r.total:,}", _num(r.fps, "{:.0f}"),
                _num(r.last_return, "{:.1f}"), _num(r.last_eval, "{:.1f}"), f"{elapsed:.0f} s", Text(r.note[:60]),
            )  # fmt: skip
        return table
