"""Progress display of ``bench run``: a rich live table on a terminal, plain lines otherwise.

An overall line says how many jobs are done, running, queued and failed, the env steps done of the grid's
total, the elapsed time and an ETA (the remaining env steps at the grid's throughput so far). The table
below it shows per job its status, env steps, fps, the return of its last training episode, its last
evaluation, its time and a note (failure reason); running jobs first, then failed, the last finished ones
and the next queued ones. When stdout is not a terminal (CI, ``| tee``), one line is printed when a job
starts and one (with the overall line) when it ends.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from lit_sb3.zoo.launchers.base import JobDone, JobStarted, LaunchEvent
from lit_sb3.zoo.runner import JobProgress

__all__ = ["GridProgress"]

_MAX_DONE_ROWS = 8
_MAX_QUEUED_ROWS = 8


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


def _duration(seconds: float) -> str:
    """``42 s``, ``3m05s``, ``1h02m``."""
    if not math.isfinite(seconds):
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class GridProgress:
    """Shows the state of a grid while the launcher's events come in.

    Args:
        total: number of jobs to run.
        file: where to write (default stdout).
        live: force the live table on/off (default: on when ``file`` is a terminal).
        jobs: the jobs to run, in launch order (listed as queued until they start; their budgets make the
            env-step total and the ETA).
    """

    def __init__(self, total: int, file: IO[str] | None = None, live: bool | None = None,
                 jobs: Sequence[Any] = ()) -> None:  # fmt: skip
        from rich.console import Console

        self.file = file or sys.stdout
        self.console = Console(file=self.file, highlight=False)
        self.live_mode = self.console.is_terminal if live is None else live
        self.total = total
        self.rows: dict[str, _Row] = {}
        self.order: list[str] = []
        for spec in jobs:
            self.rows[spec.job_id] = _Row(spec.name, "queued", total=spec.n_timesteps)
            self.order.append(spec.job_id)
        self.done = self.failed = 0
        self._live: Any = None
        self._last_refresh = 0.0
        self.t0 = time.monotonic()

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

    @property
    def queued(self) -> int:
        """Jobs not started yet."""
        return max(0, self.total - self.done - self.running)

    def overall(self) -> str:
        """One line: jobs done/running/queued/failed, env steps done of the total, elapsed, ETA."""
        total_steps = sum(r.total for r in self.rows.values())
        # a finished job counts its whole budget (a pruned or failed one ends early: its budget is done with)
        done_steps = sum(r.total if r.status not in ("running", "queued") else r.steps for r in self.rows.values())
        elapsed = time.monotonic() - self.t0
        rate = done_steps / elapsed if elapsed > 0 else 0.0
        eta = (total_steps - done_steps) / rate if rate > 0 and total_steps else math.nan
        if self.done >= self.total:
            eta = 0.0
        pct = f" ({100.0 * done_steps / total_steps:.0f} %)" if total_steps else ""
        return (
            f"jobs: {self.done}/{self.total} done, {self.running} running, {self.queued} queued, {self.failed} failed"
            f" | env steps: {done_steps:,}/{total_steps:,}{pct} | elapsed {_duration(elapsed)} | ETA {_duration(eta)}"
        )

    def handle(self, event: LaunchEvent) -> None:
        """Take one launcher event.

        Args:
            event: :class:`JobStarted`, :class:`JobProgress` or :class:`JobDone`.
        """
        if isinstance(event, JobStarted):
            row = _Row(event.spec.name, "running", total=event.spec.n_timesteps, started=time.monotonic())
            if event.spec.job_id not in self.rows:
                self.order.append(event.spec.job_id)
            self.rows[event.spec.job_id] = row
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
                self._line("         " + self.overall())
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

        table = Table(title=f"bench run | {self.overall()}", title_justify="left", expand=False)
        for name, justify in (("job", "left"), ("status", "left"), ("env steps", "right"), ("fps", "right"),
                              ("last return", "right"), ("last eval", "right"), ("time", "right"),
                              ("note", "left")):  # fmt: skip
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        running = [k for k in self.order if self.rows[k].status == "running"]
        queued = [k for k in self.order if self.rows[k].status == "queued"]
        ended = [k for k in self.order if self.rows[k].status not in ("running", "queued")]
        failed = [k for k in ended if self.rows[k].status != "FINISHED"]
        recent = [k for k in ended if k not in failed][-_MAX_DONE_ROWS:]
        now = time.monotonic()
        for key in [*running, *failed, *recent, *queued[:_MAX_QUEUED_ROWS]]:
            r = self.rows[key]
            colour = {"running": "cyan", "FINISHED": "green", "queued": "dim"}.get(r.status, "red")
            elapsed = (r.ended or now) - r.started if r.started else math.nan
            table.add_row(
                Text(r.name), Text(r.status.lower(), style=colour), f"{r.steps:,}/{r.total:,}", _num(r.fps, "{:.0f}"),
                _num(r.last_return, "{:.1f}"), _num(r.last_eval, "{:.1f}"), _duration(elapsed), Text(r.note[:60]),
            )  # fmt: skip
        if len(queued) > _MAX_QUEUED_ROWS:
            table.add_row(Text(f"... {len(queued) - _MAX_QUEUED_ROWS} more queued", style="dim"), *[""] * 7)
        return table
