"""Local launcher: one fresh process per job, ``--jobs`` at a time, with timeouts and crash isolation.

- Start method ``forkserver`` (default on Linux): a clean single-threaded server process, started once per
  ``bench run`` with torch/Lightning/MLflow imported (:mod:`~lit_sb3.zoo.launchers.preload`), forks a new
  process for every job; nothing of the parent's state (threads, open DB connections) reaches the jobs.
  ``spawn`` starts each job from a bare interpreter (10-30 s of imports per job on a loaded 2-core machine).
- A job that raises is recorded by the worker itself (FAILED + traceback); one whose process dies
  (segfault, ``os._exit``) or outlives ``timeout`` is killed (its whole process group) and recorded FAILED
  by the parent with the exit code or ``timeout after N s``; its output log becomes ``traceback.txt``.
- Workers die with the parent: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux plus a watchdog thread that
  polls the parent pid, so a SIGKILLed ``bench run`` never finishes jobs behind the next run's back.
- Each worker writes its stdout/stderr (C level included) to a log file, not to the terminal, and sends
  progress and its result over its own pipe (a crashed worker cannot corrupt a queue shared with others).
- Every unit is a seed batch of K >= 1 jobs (``bench run --seed-batch K``; a single job is a batch of one) and
  runs in one process (one of the ``--jobs`` slots) through :func:`lit_sb3.zoo.runner.run_jobs`; each of its jobs
  has its own run, events and result (sent as soon as that seed ends), and a crash or timeout of the process
  fails the seeds that had not ended.
- A :class:`~lit_sb3.zoo.launchers.base.Task` (a ``bench tune`` worker) runs in a process of its own the same
  way (a slot, its process group, death with the parent), with its output on the terminal; its return value is its
  exit status.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.launchers.base import (
    JobDone,
    JobStarted,
    JobUnit,
    Launcher,
    LaunchEvent,
    RunBook,
    Task,
    TaskDone,
    job_units,
)
from lit_sb3.zoo.runner import JobProgress, JobResult, result_from_dict
from lit_sb3.zoo.tracking import TrackingTarget, pid_alive

__all__ = ["LocalLauncher", "default_start_method"]

_PR_SET_PDEATHSIG = 1
_LOG_TAIL = 20_000


def default_start_method() -> str:
    """``forkserver`` where available (Linux, macOS), else ``spawn``."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


_LOG_PREFIX = "bench-logs-"


def _new_log_dir(keep: bool) -> Path:
    """A fresh temp folder for this ``bench run``'s job logs, ``bench-logs-<pid>-*``.

    A ``bench run`` that was SIGKILLed could not remove its folder; the folders of such runs (pid gone, same
    user) are removed here first. Kept folders (``keep``) are named ``bench-logs-kept-*`` and never removed.

    Args:
        keep: the logs outlive this run.
    """
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob(f"{_LOG_PREFIX}*-*"):
        pid = old.name[len(_LOG_PREFIX) :].split("-", 1)[0]
        with contextlib.suppress(OSError):
            mine = not hasattr(os, "getuid") or old.stat().st_uid == os.getuid()
            if pid.isdigit() and old.is_dir() and mine and not pid_alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{_LOG_PREFIX}kept-" if keep else f"{_LOG_PREFIX}{os.getpid()}-"))


# ---------------------------------------------------------------------------------------------------------
# worker side
# ---------------------------------------------------------------------------------------------------------
def _die_with_parent(bench_pid: int) -> None:
    """SIGKILL this process when the ``bench run`` process (or the direct parent) goes away."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    ppid = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != ppid or not pid_alive(bench_pid):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.5)

    if os.getppid() != ppid or not pid_alive(bench_pid):
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="bench-parent-watchdog", daemon=True).start()


def _enter_unit(bench_pid: int, cwd: str, environ: dict[str, str], log_path: str | None) -> None:
    """Set up a unit's process: it dies with ``bench``, has its own process group, leaves Ctrl-C to the parent,
    writes its output to ``log_path`` (None: where the parent's goes) and has the parent's folder and environment."""
    _die_with_parent(bench_pid)
    with contextlib.suppress(OSError):
        os.setpgrp()  # its own process group: a timeout kills the job's subprocesses too
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if log_path is not None:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    faulthandler.enable()
    os.chdir(cwd)
    for key in set(os.environ) - set(environ):
        os.environ.pop(key, None)
    os.environ.update(environ)


def _task_main(task: Task, conn: Connection, bench_pid: int, cwd: str, environ: dict[str, str]) -> None:
    """Entry point of a task's process: its return value goes back as its exit status."""
    _enter_unit(bench_pid, cwd, environ, None)
    try:
        conn.send(("exit", int(task.fn(*task.args))))
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()


def _worker_main(spec_jsons: list[str], target: TrackingTarget, run_ids: list[str], conn: Connection, bench_pid: int,
                 cwd: str, environ: dict[str, str], log_path: str) -> None:  # fmt: skip
    """Entry point of a job process (a seed batch of one or more jobs)."""
    _enter_unit(bench_pid, cwd, environ, log_path)
    from lit_sb3.zoo.runner import run_jobs

    specs = [JobSpec.from_json(text) for text in spec_jsons]

    def send(item: tuple[str, Any]) -> None:
        try:
            conn.send(item)
        except (BrokenPipeError, EOFError, ConnectionResetError):
            # the parent `bench run` is gone: die with it and leave the run RUNNING, so that the next
            # `bench run` marks it KILLED and runs the job again (recording it FAILED here would blame the job)
            os.kill(os.getpid(), signal.SIGKILL)

    def progress(p: JobProgress) -> None:
        send(("progress", asdict(p)))

    def report(result: JobResult) -> None:
        send(("result", result.to_dict()))

    try:
        run_jobs(specs, target, run_ids=run_ids, progress=progress, on_result=report)
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()


# ---------------------------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------------------------
@dataclass
class _Running:
    specs: list[JobSpec]
    run_ids: list[str]
    process: Any
    conn: Connection
    started: float
    log_path: Path | None
    results: dict[str, JobResult] = field(default_factory=dict)
    conn_open: bool = True
    task: Task | None = None
    code: int | None = None  # a task's exit status, once it sent it

    @property
    def key(self) -> str:
        return self.task.name if self.task is not None else self.specs[0].job_id


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _LOG_TAIL))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


class LocalLauncher(Launcher):
    """Runs each job in a fresh local process, ``max_workers`` at a time.

    Args:
        max_workers: parallel jobs (default ``os.cpu_count()``).
        timeout: seconds a job may run before it is killed and recorded FAILED (None: no limit).
        start_method: ``forkserver`` (default where available) or ``spawn``.
        keep_logs: keep the per-job output logs in ``log_dir`` (``bench-logs-kept-*``) after the grid ends.
    """

    def __init__(self, max_workers: int | None = None, timeout: float | None = None, start_method: str | None = None,
                 keep_logs: bool = False) -> None:  # fmt: skip
        self.max_workers = max(1, int(max_workers or os.cpu_count() or 1))
        self.timeout = float(timeout) if timeout else None
        self.start_method = start_method or default_start_method()
        if self.start_method not in ("forkserver", "spawn"):
            raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {self.start_method!r}")
        self.keep_logs = keep_logs
        self.log_dir: Path | None = None
        self._running: dict[str, _Running] = {}
        self._runbook: RunBook | None = None

    def _context(self) -> Any:
        ctx = mp.get_context(self.start_method)
        if self.start_method == "forkserver":
            ctx.set_forkserver_preload(["lit_sb3.zoo.launchers.preload"])
        return ctx

    def warm_up(self) -> None:
        """Start the forkserver now, so that its imports overlap with the parent's planning."""
        if self.start_method == "forkserver":
            from multiprocessing import forkserver

            self._context()
            forkserver.ensure_running()

    def submit(self, jobs: Sequence[JobUnit], target: TrackingTarget | None,
               runbook: RunBook | None) -> Iterator[LaunchEvent]:  # fmt: skip
        """Run ``jobs`` (see :class:`~lit_sb3.zoo.launchers.base.Launcher`).

        Args:
            jobs: the jobs, seed batches and tasks.
            target: where the workers log (None: tasks only).
            runbook: creates/ends the runs (None: tasks only).
        """
        ctx = self._context()
        self._runbook = runbook
        self.log_dir = _new_log_dir(self.keep_logs)
        pending = deque(job_units(jobs))
        environ = dict(os.environ)
        try:
            while pending or self._running:
                while pending and len(self._running) < self.max_workers:
                    unit = pending.popleft()
                    if isinstance(unit, Task):
                        self._start_task(ctx, unit, environ)
                        continue
                    specs = unit
                    assert runbook is not None and target is not None, "jobs need a tracking target and a runbook"
                    run_ids = [runbook.start(spec) for spec in specs]
                    log_path = self.log_dir / f"{specs[0].job_id}.log"
                    reader, writer = ctx.Pipe(duplex=False)
                    name = specs[0].name if len(specs) == 1 else f"{specs[0].name}+{len(specs) - 1}"
                    process = ctx.Process(
                        target=_worker_main,
                        args=([s.to_json() for s in specs], target, run_ids, writer, os.getpid(), os.getcwd(), environ,
                              str(log_path)),
                        name=f"bench-{name}",
                    )  # fmt: skip
                    process.start()
                    writer.close()
                    job = _Running(specs, run_ids, process, reader, time.monotonic(), log_path)
                    self._running[job.key] = job
                    for spec, run_id in zip(specs, run_ids):
                        yield JobStarted(spec, run_id)
                yield from self._wait_round()
        finally:
            self.close()
            if not self.keep_logs and self.log_dir is not None:
                shutil.rmtree(self.log_dir, ignore_errors=True)

    def _start_task(self, ctx: Any, task: Task, environ: dict[str, str]) -> None:
        reader, writer = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_task_main, args=(task, writer, os.getpid(), os.getcwd(), environ),
                              name=f"bench-{task.name}")  # fmt: skip
        process.start()
        writer.close()
        job = _Running([], [], process, reader, time.monotonic(), None, task=task)
        self._running[job.key] = job

    def _wait_round(self) -> Iterator[LaunchEvent]:
        now = time.monotonic()
        wait_s = 1.0
        if self.timeout is not None:
            for job in self._running.values():
                if job.task is None:
                    wait_s = min(wait_s, max(0.0, job.started + self.timeout - now))
        handles: list[Any] = []
        for job in self._running.values():
            handles.append(job.process.sentinel)
            if job.conn_open:
                handles.append(job.conn)
        wait(handles, timeout=max(wait_s, 0.01))
        for job in list(self._running.values()):
            yield from self._drain(job)
            if not job.process.is_alive():
                job.process.join()
                yield from self._drain(job, until_eof=True)
                yield from self._finish(job, None)
            elif self.timeout is not None and job.task is None and time.monotonic() - job.started > self.timeout:
                self._kill(job)
                yield from self._drain(job, until_eof=True)
                yield from self._finish(job, f"timeout after {self.timeout:g} s")

    def _drain(self, job: _Running, until_eof: bool = False) -> Iterator[JobProgress | JobDone]:
        """Read what the unit's process sent: progress, results, a task's exit status."""
        while job.conn_open:
            try:
                if not job.conn.poll(0):
                    if not until_eof:
                        return
                    if not job.conn.poll(0.5):
                        return
                kind, payload = job.conn.recv()
            except (EOFError, OSError):
                job.conn_open = False
                job.conn.close()
                return
            if kind == "exit":
                job.code = int(payload)
            elif kind == "progress":
                yield JobProgress(**payload)
            elif kind == "result":  # a job (or one seed of a batch) ended and recorded itself
                result = result_from_dict(payload)
                spec = next((s for s in job.specs if s.job_id == result.job_id), None)
                if spec is not None and result.job_id not in job.results:
                    job.results[result.job_id] = result
                    yield JobDone(spec, result)

    def _kill(self, job: _Running) -> None:
        pid = job.process.pid
        with contextlib.suppress(OSError):
            if pid is not None and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            job.process.kill()
        job.process.join(timeout=10)

    def _finish(self, job: _Running, timeout_reason: str | None) -> Iterator[JobDone | TaskDone]:
        """The unit's process ended: its jobs that did not report a result are recorded FAILED; a task that did not
        send its exit status failed."""
        self._running.pop(job.key, None)
        if job.conn_open:
            job.conn.close()
            job.conn_open = False
        wall = time.monotonic() - job.started
        self._cleanup_group(job)
        missing = [(s, r) for s, r in zip(job.specs, job.run_ids) if s.job_id not in job.results]
        if job.task is None and not missing:  # the worker recorded every job (even failures)
            return
        if job.task is not None and job.code is not None:
            yield TaskDone(job.task, job.code)
            return
        code = job.process.exitcode
        if timeout_reason is not None:
            reason = timeout_reason
        elif code is not None and code < 0:
            reason = f"process died: {_signal_name(code)} (exit code {code})"
        else:
            reason = f"process exited with code {code} before reporting a result"
        if job.task is not None:
            yield TaskDone(job.task, 1, reason)
            return
        assert self._runbook is not None and job.log_path is not None
        log = _log_tail(job.log_path)
        for spec, run_id in missing:
            with contextlib.suppress(Exception):
                self._runbook.fail(run_id, reason, "FAILED", log)
            yield JobDone(spec, JobResult(spec.job_id, spec.name, "FAILED", run_id=run_id, wall_seconds=wall,
                                          failure_reason=reason))  # fmt: skip

    @staticmethod
    def _cleanup_group(job: _Running) -> None:
        """Kill what the job left behind in its process group (e.g. SubprocVecEnv workers)."""
        pid = job.process.pid
        with contextlib.suppress(OSError):
            if pid is not None:
                os.killpg(pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill every running job and record it KILLED (used on Ctrl-C and errors)."""
        for job in list(self._running.values()):
            self._kill(job)
            self._running.pop(job.key, None)
            if self._runbook is not None:
                for spec, run_id in zip(job.specs, job.run_ids):
                    if spec.job_id not in job.results:
                        with contextlib.suppress(Exception):
                            self._runbook.fail(run_id, "killed: bench run was interrupted", "KILLED")
