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

from lit_sb3.zoo.cost import JobCost, duration, schedule_eta, seed_batch_speedup, unit_seconds
from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.launchers.base import JobDone, JobStarted, LaunchEvent
from lit_sb3.zoo.runner import JobProgress

__all__ = ["DEFAULT_INTERVAL_S", "GridProgress", "progress_interval", "schedule_eta"]

_unit_seconds = unit_seconds

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
    snap: JobProgress | None = None
    unit: int = -1
    env: str = ""
    episodes: int = 0


def _num(value: float, fmt: str = "{:.1f}") -> str:
    return "-" if value is None or not math.isfinite(value) else fmt.format(value)


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
        units: the jobs' seed batches (lists of jobs; default: each job alone); a unit holds one worker slot.
        costs: job id -> its estimated phases (:func:`lit_sb3.zoo.cost.plan_lines`). With them the env-step total
            counts the evaluations, and the ETA models each job's start-up, warm-up, updates and evaluations,
            each at its measured rate once the jobs report one (the estimate's before).
        seed_batch: ``--seed-batch`` (the units' speed-up).
        clock: the time source (``time.monotonic``; a replay passes its own).
    """

    def __init__(self, total: int, file: IO[str] | None = None, live: bool | None = None,
                 jobs: Sequence[Any] = (), workers: int | None = None, interval: float | None = None,
                 title: str = "bench run", units: Sequence[Sequence[Any]] | None = None,
                 costs: dict[str, JobCost] | None = None, seed_batch: int = 1,
                 clock: Any = time.monotonic) -> None:  # fmt: skip
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
        self.clock = clock
        self.costs: dict[str, JobCost] = {}
        self.units: list[list[str]] = []
        self.seed_batch = seed_batch
        self._set_rows(jobs, units, costs)
        self.done = self.failed = 0
        self.state = ""
        self._lock = threading.RLock()
        self._live: Any = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False
        self.t0 = self.clock()

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
            self.t0 = self.clock()
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

    def set_jobs(self, jobs: Sequence[Any], state: str = "", units: Sequence[Sequence[Any]] | None = None,
                 costs: dict[str, JobCost] | None = None, seed_batch: int | None = None) -> None:  # fmt: skip
        """Replace the jobs to run (before any starts: e.g. once those already finished are known).

        Args:
            jobs: the jobs, in launch order.
            state: the new state (:meth:`phase`).
            units: their seed batches (default: each job alone).
            costs: their estimated phases (see the class).
            seed_batch: ``--seed-batch``.
        """
        with self._lock:
            self.total = len(jobs)
            if seed_batch is not None:
                self.seed_batch = seed_batch
            self._set_rows(jobs, units, costs)
        if state:
            self.phase(state)

    def _set_rows(self, jobs: Sequence[Any], units: Sequence[Sequence[Any]] | None,
                  costs: dict[str, JobCost] | None) -> None:  # fmt: skip
        self.rows = {spec.job_id: _Row(spec.name, spec.algo, "queued", total=spec.n_timesteps,
                                       env=getattr(spec, "env_id", ""), episodes=getattr(spec, "eval_episodes", 0))
                     for spec in jobs}  # fmt: skip
        self.order = list(self.rows)
        self.costs = dict(costs or {})
        groups = [list(u) for u in units] if units is not None else [[spec] for spec in jobs]
        self.units = [[spec.job_id for spec in unit] for unit in groups if unit]
        for i, unit in enumerate(self.units):
            for key in unit:
                if key in self.rows:
                    self.rows[key].unit = i

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
        """Seconds left (0 when every job is done; NaN while nothing is known: no estimate and no rate yet).

        With the jobs' estimated phases (``costs``): each unit's start-up, warm-up, update steps and
        evaluations, at the rates measured inside the running jobs where they report one (the estimate's
        otherwise; a queued unit at the rates measured for its algorithm), laid out over the worker slots.
        Without them: each job's remaining budget at the env steps per second it reports.
        """
        if self.total and self.done >= self.total:
            return 0.0
        if self.costs and all(k in self.costs for k in self.rows):
            return self._phase_eta()
        return self._rate_eta()

    def _rate_eta(self) -> float:
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

        now = self.clock()
        running = []
        for r in rows:
            if r.status == "running" and math.isfinite(r.fps) and r.fps > 0:
                running.append(max(0, r.total - r.steps) / r.fps)
            elif r.status in ("running", "starting"):
                running.append(max(0.0, startup - (now - r.started)) + r.total / rate(r))
        queued = [startup + r.total / rate(r) for k in self.order if (r := self.rows[k]).status == "queued"]
        return schedule_eta(running, queued, max(self.workers, len(running)))

    def _measured(self) -> dict[str, dict[str, float]]:
        """Per algorithm, the phases' rates measured so far, as one seed alone (``update_fps``, ``warmup_fps``,
        ``eval_fps``, ``startup_s``); under ``""``, per ``eval <env> <episodes>``: env steps per evaluation; under
        ``" machine"``, per phase, the measured rates over the estimate's (for algorithms not measured yet)."""
        acc: dict[str, dict[str, list[float]]] = {}
        for r in self.rows.values():
            snap = r.snap
            m = acc.setdefault(r.algo, {})
            if r.first_report and r.started:
                m.setdefault("startup_s", []).append(r.first_report - r.started)
            if snap is None or not math.isfinite(snap.elapsed):
                continue
            k = max(1, snap.batch)
            speedup = seed_batch_speedup(r.algo, k)
            train_s = snap.elapsed - snap.eval_seconds
            warm = min(snap.warmup_steps, snap.total)
            if warm and snap.env_steps < warm and train_s > 0.5:
                m.setdefault("warmup_fps", []).append(k * snap.env_steps / train_s / speedup)
            elif warm and math.isfinite(snap.warmup_seconds) and snap.warmup_seconds > 0:
                m.setdefault("warmup_fps", []).append(k * warm / snap.warmup_seconds / speedup)
            upd_s = train_s - (snap.warmup_seconds if warm and math.isfinite(snap.warmup_seconds) else 0.0)
            if snap.env_steps > warm and upd_s > 0.5:
                m.setdefault("update_fps", []).append(k * (snap.env_steps - warm) / upd_s / speedup)
            if snap.n_evals and snap.eval_seconds > 0:
                m.setdefault("eval_fps", []).append(k * snap.eval_steps / snap.eval_seconds)
                per = acc.setdefault("", {})  # steps per evaluation depend on the env and the episodes
                per.setdefault(f"eval {r.env} {r.episodes}", []).append(snap.eval_steps / snap.n_evals)
        out = {a: {name: sum(v) / len(v) for name, v in d.items()} for a, d in acc.items()}
        # jobs that report no phases (a reference job's progress is read from its log folder): once one has
        # finished, its wall time over its estimate scales its algorithm's estimated rates (all phases alike)
        whole: dict[str, list[float]] = {}
        for key, r in self.rows.items():
            if (
                r.status == "FINISHED"
                and key in self.costs
                and r.ended > r.started
                and (r.snap is None or not math.isfinite(r.snap.elapsed))
            ):
                whole.setdefault(r.algo, []).append(self.costs[key].seconds() / (r.ended - r.started))
        for algo, ratios_ in whole.items():
            if not {"update_fps", "warmup_fps", "eval_fps"} & set(out.get(algo, {})):
                prior = next(c.rates for k, c in self.costs.items() if k in self.rows and self.rows[k].algo == algo)
                scale = sum(ratios_) / len(ratios_)
                out.setdefault(algo, {}).update({n: getattr(prior, n) * scale
                                                 for n in ("update_fps", "warmup_fps", "eval_fps")})  # fmt: skip
        # how much faster or slower this machine runs now than the estimate said, per phase, over the algorithms
        # measured: an algorithm with no measurement yet is scaled by it (a busy machine slows every job)
        priors = {self.rows[k].algo: c.rates for k, c in self.costs.items() if k in self.rows}
        ratios: dict[str, list[float]] = {}
        for algo, got in out.items():
            prior = priors.get(algo)
            for name in ("update_fps", "warmup_fps", "eval_fps"):
                if prior is not None and name in got and getattr(prior, name) > 0:
                    ratios.setdefault(name, []).append(got[name] / getattr(prior, name))
        out[" machine"] = {name: sum(v) / len(v) for name, v in ratios.items()}
        return out

    def _corrected(self, key: str, measured: dict[str, dict[str, float]]) -> JobCost:
        """Job ``key``'s estimated phases with its algorithm's measured rates in place of the estimate's."""
        from dataclasses import replace

        cost, r = self.costs[key], self.rows[key]
        got = measured.get(r.algo, {})
        machine = measured.get(" machine", {})
        new = {n: got[n] if n in got else getattr(cost.rates, n) * machine[n]
               for n in ("update_fps", "warmup_fps", "eval_fps") if n in got or n in machine}  # fmt: skip
        startups = [m["startup_s"] for a, m in measured.items() if "startup_s" in m]
        if "startup_s" in got or startups:  # start-up is the machine's more than the algorithm's
            new["startup_s"] = got.get("startup_s", sum(startups) / len(startups) if startups else 0.0)
        rates = replace(cost.rates, **new)
        per_eval = measured.get("", {}).get(f"eval {r.env} {r.episodes}", cost.eval_steps_per_eval)
        return replace(cost, rates=rates, eval_steps_per_eval=per_eval)

    def _phase_eta(self) -> float:
        measured = self._measured()
        now = self.clock()
        running: list[float] = []
        queued: list[float] = []
        for unit in self.units:
            rows = [self.rows[k] for k in unit if k in self.rows]
            active = [r for r in rows if r.status in ("running", "starting")]
            if not active and all(r.status == "queued" for r in rows):
                costs = [self._corrected(k, measured) for k in unit]
                queued.append(_unit_seconds(costs, min(len(costs), self.seed_batch), rows[0].algo))
                continue
            if not active:
                continue
            train_left, eval_left, start_left = 0.0, 0.0, 0.0
            for key in unit:
                r = self.rows[key]
                if r.status not in ("running", "starting"):
                    continue
                cost = self._corrected(key, measured)
                k = min(len(unit), self.seed_batch) if r.snap is None else max(1, r.snap.batch)
                speedup = seed_batch_speedup(r.algo, k)
                snap = r.snap
                steps = snap.env_steps if snap is not None else 0
                n_evals = snap.n_evals if snap is not None else 0
                warm = min(cost.warmup_steps, cost.train_steps)
                own_warm = cost.rates.warmup_fps
                own_update = cost.rates.update_fps
                if snap is not None and math.isfinite(snap.elapsed):  # this job's own rates where it has them
                    train_s = snap.elapsed - snap.eval_seconds
                    done_warm = math.isfinite(snap.warmup_seconds) and snap.warmup_seconds > 0
                    if warm and steps < warm and train_s > 0.5 and steps:
                        own_warm = k * steps / train_s / speedup
                    upd_s = train_s - (snap.warmup_seconds if warm and done_warm else 0.0)
                    if steps > warm and upd_s > 0.5:
                        own_update = k * (steps - warm) / upd_s / speedup
                left_warm = max(0, warm - steps)
                left_update = max(0, cost.train_steps - max(steps, warm))
                # the batch's seeds step together: K seeds' steps at the batch's speed-up over one seed alone
                train = (left_warm / own_warm + left_update / own_update) * k / speedup
                train_left = max(train_left, train)
                evals = max(0, cost.n_evals - n_evals) * cost.eval_steps_per_eval / cost.rates.eval_fps
                eval_left += evals
                if r.status == "starting":
                    start_left = max(start_left, max(0.0, cost.rates.startup_s - (now - r.started)))
            running.append(start_left + train_left + eval_left)
        return schedule_eta(running, queued, max(self.workers, len(running)))

    def eval_totals(self) -> tuple[int, int]:
        """``(done, total)`` evaluation env steps (0, 0 without estimated phases): the evaluations done, and
        each job's remaining evaluations at its measured (else estimated) steps per evaluation."""
        if not self.costs:
            return 0, 0
        measured = self._measured()
        done = total = 0.0
        for key, r in self.rows.items():
            if key not in self.costs:
                continue
            cost = self._corrected(key, measured)
            snap = r.snap
            n = snap.n_evals if snap is not None else 0
            got = snap.eval_steps if snap is not None else 0
            if r.status in ("running", "starting", "queued"):
                done += got
                total += got + max(0, cost.n_evals - n) * (got / n if n else cost.eval_steps_per_eval)
            else:
                done += got
                total += got
        return int(done), int(total)

    def overall(self) -> str:
        """One line: jobs done/running/queued/failed, env steps done of the total, elapsed, ETA."""
        with self._lock:
            total_steps = sum(r.total for r in self.rows.values())
            # a finished job counts its whole budget (a pruned or failed one ends early: its budget is done with)
            done_steps = sum(r.total if r.status not in ("running", "starting", "queued") else r.steps
                             for r in self.rows.values())  # fmt: skip
            eval_done, eval_total = self.eval_totals()
            done_steps, total_steps = done_steps + eval_done, total_steps + eval_total
            elapsed = self.clock() - self.t0
            eta = self.eta()
            pct = f" ({100.0 * done_steps / total_steps:.0f} %)" if total_steps else ""
            if eval_total:
                pct += " incl. evaluation"
            state = f" | {self.state}" if self.state and not self.done and not self.running else ""
            return (
                f"jobs: {self.done}/{self.total} done, {self.running} running, {self.queued} queued, {self.failed} "
                f"failed | env steps: {done_steps:,}/{total_steps:,}{pct} | elapsed {duration(elapsed)} | ETA "
                f"{duration(eta)}{state}"
            )

    def status_line(self) -> str:
        """The periodic progress line: :meth:`overall` and each running job's env steps and fps."""
        with self._lock:
            parts = []
            active = [k for k in self.order if self.rows[k].status in ("running", "starting")]
            for key in active[:_MAX_LINE_JOBS]:
                r = self.rows[key]
                if r.status == "starting":
                    parts.append(f"{r.name} starting ({duration(self.clock() - r.started)})")
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
            row = _Row(spec.name, spec.algo, "starting", total=spec.n_timesteps, started=self.clock(),
                       env=spec.env_id, episodes=spec.eval_episodes)  # fmt: skip
            if spec.job_id not in self.rows:
                self.order.append(spec.job_id)
                self.units.append([spec.job_id])
                row.unit = len(self.units) - 1
            else:
                row.unit = self.rows[spec.job_id].unit
            self.rows[spec.job_id] = row
            if not self.live_mode:
                self._line(f"start  {spec.name}  (job {spec.job_id}, {self.running} running)")
        elif isinstance(event, JobProgress):
            row = self.rows.get(event.job_id)
            if row is None or row.status not in ("running", "starting"):
                return
            if row.status == "starting":
                row.status, row.first_report = "running", self.clock()
            row.steps, row.total, row.fps = event.env_steps, event.total, event.fps
            row.snap = event
            row.last_return, row.last_eval = event.last_return, event.last_eval
        elif isinstance(event, JobDone):
            res = event.result
            row = self.rows.setdefault(event.spec.job_id, _Row(event.spec.name, event.spec.algo))
            row.status, row.ended = res.status, self.clock()
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
            now = self.clock()
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
                    duration(elapsed), Text(note[:60]),
                )  # fmt: skip
            if len(queued) > _MAX_QUEUED_ROWS:
                table.add_row(Text(f"... {len(queued) - _MAX_QUEUED_ROWS} more queued", style="dim"), *[""] * 7)
            return table
