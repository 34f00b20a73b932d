"""Progress display of ``bench run``: a rich live table on a terminal, plain lines otherwise.

An overall line says how many jobs are done, running, queued and failed, the env steps done of the grid's
total, the elapsed time and an ETA. The ETA comes from the env steps per second measured inside the running jobs
(:class:`~lit_sb3.zoo.runner.JobProgress`, training time only), never from the elapsed time, which includes the
workers' start-up: the remaining budget of every running and queued job is laid out over the worker slots at the
jobs' own rates (a queued job at the mean rate of the jobs of its algorithm, else of all jobs, plus the start-up
time measured so far). The table below it shows per job its status (``starting`` from its process start to its
first progress report), env steps, fps, the return of its last training episode, its last evaluation, its time
and a note (failure reason); running jobs first, then failed, the last finished ones and the next queued ones.

On a terminal the table is redrawn every second from :meth:`GridProgress.start` on, so the elapsed time ticks while
the workers start. When the output is not a terminal (CI, ``| tee``, ``nohup``, Slurm), one line is printed when a
job starts, one when it ends, and a progress line every ``interval`` seconds (default
:data:`DEFAULT_INTERVAL_S`) with the overall counts, each running job's env steps and fps, and the ETA.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.launchers.base import JobDone, JobStarted, LaunchEvent
from lit_sb3.zoo.runner import JobProgress

__all__ = ["DEFAULT_INTERVAL_S", "GridProgress", "progress_interval", "schedule_eta"]

_MAX_DONE_ROWS = 8
_MAX_QUEUED_ROWS = 8
_MAX_LINE_JOBS = 8

DEFAULT_INTERVAL_S = 30.0
"""Seconds between two progress lines when the output is not a terminal."""


def progress_interval(value: float | None) -> float:
    """The progress-line cadence: ``value`` (``--progress-interval``), else ``LIT_SB3_PROGRESS_SECONDS``, else
    :data:`DEFAULT_INTERVAL_S`; a one-line :class:`BenchError` unless it is a number > 0.

    Args:
        value: seconds from the command line (None: not given).
    """
    source = "--progress-interval"
    if value is None:
        text = os.environ.get("LIT_SB3_PROGRESS_SECONDS")
        if text is None or not text.strip():
            return DEFAULT_INTERVAL_S
        source = "LIT_SB3_PROGRESS_SECONDS"
        try:
            value = float(text)
        except ValueError:
            raise BenchError(f"{source} must be a number of seconds > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise BenchError(f"{source} must be a number of seconds > 0, got {value:g}")
    return float(value)


@dataclass
class _Row:
    name: str
    algo: str = ""
    status: str = "queued"
    steps: int = 0
    total: int = 0
    fps: float = math.nan
    last_return: float = math.nan
    last_eval: float = math.nan
    started: float = 0.0
    first_report: float = 0.0
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


def schedule_eta(running: Sequence[float], queued: Sequence[float], slots: int) -> float:
    """Seconds until the last job ends when ``queued`` jobs wait for the first free of ``slots`` worker slots.

    Args:
        running: seconds left of each running job (each holds a slot).
        queued: seconds each queued job will take, in launch order.
        slots: worker slots (at least the number of running jobs is assumed).
    """
    free = sorted(list(running) + [0.0] * max(0, slots - len(running)))
    for seconds in queued:
        free[0] += seconds
        free.sort()
    return max(free, default=0.0)


class GridProgress:
    """Shows the state of a grid while the launcher's events come in.

    Args:
        total: number of jobs to run.
        file: where to write (default stdout).
        live: force the live table on/off (default: on when ``file`` is a terminal).
        jobs: the jobs to run, in launch order (listed as queued until they start; their budgets make the
            env-step total and the ETA).
        workers: worker slots (for the ETA; default: the number of CPUs).
        interval: seconds between progress lines without a terminal (default :data:`DEFAULT_INTERVAL_S`).
        title: first words of the live table's title.
    """

    def __init__(self, total: int, file: IO[str] | None = None, live: bool | None = None,
                 jobs: Sequence[Any] = (), workers: int | None = None, interval: float | None = None,
                 title: str = "bench run") -> None:  # fmt: skip
        from rich.console import Console

        self.file = file or sys.stdout
        # live=True draws as on a terminal whatever the file is (a pseudo-terminal the caller knows of, a test)
        self.console = Console(file=self.file, highlight=False, force_terminal=True if live else None)
        self.live_mode = self.console.is_terminal if live is None else live
        self.total = total
        self.workers = workers or os.cpu_count() or 1
        self.interval = DEFAULT_INTERVAL_S if interval is None else float(interval)
        self.title = title
        self.rows: dict[str, _Row] = {}
        self.order: list[str] = []
        for spec in jobs:
            self.rows[spec.job_id] = _Row(spec.name, spec.algo, "queued", total=spec.n_timesteps)
            self.order.append(spec.job_id)
        self.done = self.failed = 0
        self.state = ""
        self._lock = threading.RLock()
        self._live: Any = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False
        self.t0 = time.monotonic()

    # --- life cycle ---------------------------------------------------------------------------------------
    def start(self, state: str = "") -> GridProgress:
        """Start showing now (idempotent): the live table redrawn every second, or the progress-line ticker.

        Args:
            state: what the grid is doing before any job runs (e.g. ``starting workers``).
        """
        with self._lock:
            if state:
                self.state = state
            if self._started:
                return self
            self._started = True
            self.t0 = time.monotonic()
        if self.live_mode:
            from rich.live import Live

            self._live = Live(get_renderable=self._table, console=self.console, refresh_per_second=1,
                              transient=False)  # fmt: skip
            self._live.start()
        else:
            self._ticker = threading.Thread(target=self._tick, name="bench-progress", daemon=True)
            self._ticker.start()
        atexit.register(self.stop)
        return self

    def stop(self, clear: bool = False) -> None:
        """Stop showing (idempotent): the last table stays on screen unless ``clear``.

        Args:
            clear: erase the live table (nothing ran: the lines printed above it say why).
        """
        self._stop.set()
        live, self._live = self._live, None
        if live is not None:
            live.transient = clear
            if not clear:
                live.refresh()
            live.stop()
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=5)

    def __enter__(self) -> GridProgress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def phase(self, state: str) -> None:
        """Say what the grid is doing while no job reports (shown until the first job starts).

        Args:
            state: e.g. ``starting workers``.
        """
        with self._lock:
            self.state = state
        if not self.live_mode and self._started:
            self._line(f"{state}...")

    def set_jobs(self, jobs: Sequence[Any], state: str = "") -> None:
        """Replace the jobs to run (before any starts: e.g. once those already finished are known).

        Args:
            jobs: the jobs, in launch order.
            state: the new state (:meth:`phase`).
        """
        with self._lock:
            self.total = len(jobs)
            self.rows = {spec.job_id: _Row(spec.name, spec.algo, "queued", total=spec.n_timesteps) for spec in jobs}
            self.order = list(self.rows)
        if state:
            self.phase(state)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._line(self.status_line())

    # --- counts -------------------------------------------------------------------------------------------
    @property
    def running(self) -> int:
        """Jobs started and not ended."""
        return sum(1 for r in self.rows.values() if r.status in ("running", "starting"))

    @property
    def queued(self) -> int:
        """Jobs not started yet."""
        return max(0, self.total - self.done - self.running)

    def eta(self) -> float:
        """Seconds left, from the env steps per second measured inside the jobs (NaN before any job reported a
        rate; 0 when every job is done)."""
        if self.total and self.done >= self.total:
            return 0.0
        rows = list(self.rows.values())
        measured = [r for r in rows if r.status != "queued" and math.isfinite(r.fps) and r.fps > 0]
        if not measured:
            return math.nan
        mean_all = sum(r.fps for r in measured) / len(measured)
        by_algo: dict[str, list[float]] = {}
        for r in measured:
            by_algo.setdefault(r.algo, []).append(r.fps)
        startups = [r.first_report - r.started for r in rows if r.first_report and r.started]
        startup = sum(startups) / len(startups) if startups else 0.0

        def rate(r: _Row) -> float:
            same = by_algo.get(r.algo)
            return sum(same) / len(same) if same else mean_all

        now = time.monotonic()
        running = []
        for r in rows:
            if r.status == "running" and math.isfinite(r.fps) and r.fps > 0:
                running.append(max(0, r.total - r.steps) / r.fps)
            elif r.status in ("running", "starting"):
                running.append(max(0.0, startup - (now - r.started)) + r.total / rate(r))
        queued = [startup + r.total / rate(r) for k in self.order if (r := self.rows[k]).status == "queued"]
        return schedule_eta(running, queued, max(self.workers, len(running)))

    def overall(self) -> str:
        """One line: jobs done/running/queued/failed, env steps done of the total, elapsed, ETA."""
        with self._lock:
            total_steps = sum(r.total for r in self.rows.values())
            # a finished job counts its whole budget (a pruned or failed one ends early: its budget is done with)
            done_steps = sum(r.total if r.status not in ("running", "starting", "queued") else r.steps
                             for r in self.rows.values())  # fmt: skip
            elapsed = time.monotonic() - self.t0
            eta = self.eta()
            pct = f" ({100.0 * done_steps / total_steps:.0f} %)" if total_steps else ""
            state = f" | {self.state}" if self.state and not self.done and not self.running else ""
            return (
                f"jobs: {self.done}/{self.total} done, {self.running} running, {self.queued} queued, {self.failed} "
                f"failed | env steps: {done_steps:,}/{total_steps:,}{pct} | elapsed {_duration(elapsed)} | ETA "
                f"{_duration(eta)}{state}"
            )

    def status_line(self) -> str:
        """The periodic progress line: :meth:`overall` and each running job's env steps and fps."""
        with self._lock:
            parts = []
            active = [k for k in self.order if self.rows[k].status in ("running", "starting")]
            for key in active[:_MAX_LINE_JOBS]:
                r = self.rows[key]
                if r.status == "starting":
                    parts.append(f"{r.name} starting ({_duration(time.monotonic() - r.started)})")
                else:
                    parts.append(f"{r.name} {r.steps:,}/{r.total:,} at {_num(r.fps, '{:,.0f}')} fps")
            if len(active) > _MAX_LINE_JOBS:
                parts.append(f"{len(active) - _MAX_LINE_JOBS} more")
            stamp = time.strftime("%H:%M:%S")
            return f"[{stamp}] {self.overall()}" + (f" | {'; '.join(parts)}" if parts else "")

    # --- events -------------------------------------------------------------------------------------------
    def handle(self, event: LaunchEvent) -> None:
        """Take one launcher event.

        Args:
            event: :class:`JobStarted`, :class:`JobProgress` or :class:`JobDone`.
        """
        with self._lock:
            self._handle(event)

    def _handle(self, event: LaunchEvent) -> None:
        if isinstance(event, JobStarted):
            spec = event.spec
            row = _Row(spec.name, spec.algo, "starting", total=spec.n_timesteps, started=time.monotonic())
            if spec.job_id not in self.rows:
                self.order.append(spec.job_id)
            self.rows[spec.job_id] = row
            if not self.live_mode:
                self._line(f"start  {spec.name}  (job {spec.job_id}, {self.running} running)")
        elif isinstance(event, JobProgress):
            row = self.rows.get(event.job_id)
            if row is None or row.status not in ("running", "starting"):
                return
            if row.status == "starting":
                row.status, row.first_report = "running", time.monotonic()
            row.steps, row.total, row.fps = event.env_steps, event.total, event.fps
            row.last_return, row.last_eval = event.last_return, event.last_eval
        elif isinstance(event, JobDone):
            res = event.result
            row = self.rows.setdefault(event.spec.job_id, _Row(event.spec.name, event.spec.algo))
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

    def _line(self, text: str) -> None:
        with self._lock:
            self.console.print(text, markup=False, soft_wrap=True)
            self.file.flush()

    def _table(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            table = Table(title=f"{self.title} | {self.overall()}", title_justify="left", expand=False)
            for name, justify in (("job", "left"), ("status", "left"), ("env steps", "right"), ("fps", "right"),
                                  ("last return", "right"), ("last eval", "right"), ("time", "right"),
                                  ("note", "left")):  # fmt: skip
                table.add_column(name, justify=justify)  # type: ignore[arg-type]
            running = [k for k in self.order if self.rows[k].status in ("running", "starting")]
            queued = [k for k in self.order if self.rows[k].status == "queued"]
            ended = [k for k in self.order if self.rows[k].status not in ("running", "starting", "queued")]
            failed = [k for k in ended if self.rows[k].status != "FINISHED"]
            recent = [k for k in ended if k not in failed][-_MAX_DONE_ROWS:]
            now = time.monotonic()
            for key in [*running, *failed, *recent, *queued[:_MAX_QUEUED_ROWS]]:
                r = self.rows[key]
                colour = {"running": "cyan", "starting": "yellow", "FINISHED": "green", "queued": "dim"}.get(
                    r.status, "red"
                )
                elapsed = (r.ended or now) - r.started if r.started else math.nan
                note = r.note or ("process started, building env and model" if r.status == "starting" else "")
                table.add_row(
                    Text(r.name), Text(r.status.lower(), style=colour), f"{r.steps:,}/{r.total:,}",
                    _num(r.fps, "{:.0f}"), _num(r.last_return, "{:.1f}"), _num(r.last_eval, "{:.1f}"),
                    _duration(elapsed), Text(note[:60]),
                )  # fmt: skip
            if len(queued) > _MAX_QUEUED_ROWS:
                table.add_row(Text(f"... {len(queued) - _MAX_QUEUED_ROWS} more queued", style="dim"), *[""] * 7)
            return table
