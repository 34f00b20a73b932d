"""Ray launcher: every job of a grid is a Ray task, on a local Ray instance or on a cluster.

Same job ids, tracking, evaluation, resume and failure semantics as the local launcher
(:mod:`~lit_sb3.zoo.launchers.local`); Ray is the scheduler, nothing is home-made:

- each unit (a seed batch of K >= 1 jobs, ``bench run --seed-batch K``; a single job is a batch of one) is one
  ``ray.remote(num_cpus=--cpus-per-job, num_gpus=--gpus-per-job, max_retries=N, retry_exceptions=False)`` task
  running :func:`lit_sb3.zoo.runner.run_jobs` (:func:`ray_jobs`): Ray re-runs a unit whose worker process or node
  is lost (system failures), never one whose own code raised (``run_jobs`` records that FAILED with its
  traceback, as locally); each of its jobs claims its own run and yields its own events;
- at most ``max_workers`` jobs are in flight (``--jobs``, default: the cluster's CPUs / ``--cpus-per-job``), and
  each job's MLflow run is created by this (driver) process when the job is submitted, as locally;
- a retried attempt finds that an earlier attempt already claimed the run (tag ``lit_sb3.attempt``): it marks
  every still-RUNNING run of the job under the same grid run KILLED ("Ray worker lost") and logs to a new run,
  so the job ends with exactly one FINISHED run and the report, which reads FINISHED runs only, sees it once;
- ``--timeout`` counts from the moment a worker starts the job (a job waiting for resources, for a Ray worker
  process to start or for its imports, which a fresh worker pays as the local launcher's forkserver does once,
  is not timed out): the worker reports it through the progress queue and records it on the
  job's run (tag ``lit_sb3.attempt_started``), which the driver reads when the queue is down or late; it is
  enforced with ``ray.cancel(force=True)`` (the worker process is killed); the job is recorded FAILED
  ``timeout after N s``; a job whose retries are exhausted is FAILED with Ray's error;
- progress snapshots travel through a :class:`ray.util.queue.Queue` (an actor holding no CPU);
- workers need no shared disk: they log metrics and upload artifacts through the tracking URI (an ``http://``
  ``mlflow server`` with ``--artifacts-destination`` on a cluster; a ``sqlite:///`` store on one machine);
- a :class:`~lit_sb3.zoo.launchers.base.Task` (a ``bench tune`` worker) is a task with the same resources and
  retries (:func:`ray_task`), its return value its exit status.

Without an address a local Ray instance is started (``ray.init(num_cpus=...)``) and shut down at the end; a Ray
already initialised in this process (a test's cluster) is used as it is. Ray is the optional extra
``lit_sb3[ray]`` and is imported by this module's functions only.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from lit_sb3.zoo.errors import BenchError
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
from lit_sb3.zoo.tracking import TrackingTarget
from lit_sb3.zoo.tracking.mlflow_compat import parent_run_id

__all__ = [
    "RayLauncher",
    "import_ray",
    "check_ray_address",
    "connect_ray",
    "ray_jobs",
    "ray_task",
    "ATTEMPT_TAG",
    "DEFAULT_MAX_RETRIES",
]

ATTEMPT_TAG = "lit_sb3.attempt"
#: the wall-clock time (``time.time()``) at which a worker started the attempt: a job's timeout counts from it
STARTED_TAG = "lit_sb3.attempt_started"
DEFAULT_MAX_RETRIES = 3
_WAIT_S = 0.5
#: seconds between two looks at the runs of jobs whose start the progress queue did not report
_START_POLL_S = 2.0


def import_ray() -> Any:
    """``import ray``, or a one-line :class:`BenchError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise BenchError("--launcher ray needs Ray: install lit_sb3[ray] (pip install 'lit_sb3[ray]')") from None
    return ray


def check_ray_address(address: str | None, timeout_s: float = 5.0) -> None:
    """Open and close a TCP connection to ``HOST:PORT`` (or ``ray://HOST:PORT``), else a one-line BenchError;
    nothing for None (a local instance) or ``auto``.

    ``ray.init(address=...)`` retries an unreachable GCS for minutes before it fails; this fails in seconds.

    Args:
        address: the cluster address.
        timeout_s: connection timeout.
    """
    if not address or address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BenchError(f"--ray-address must be auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BenchError(f"cannot reach the Ray cluster at {address!r}: {reason}") from None


def connect_ray(address: str | None, num_cpus: int | None = None, log_to_driver: bool = False) -> bool:
    """Connect to a Ray cluster (``address``: ``auto`` or ``HOST:PORT``) or start a local instance.

    Returns whether this call started Ray (and so should shut it down); a Ray already initialised in this
    process is used as it is.

    Args:
        address: cluster address (None: start a local instance).
        num_cpus: CPUs of a local instance (None: all).
        log_to_driver: print the workers' output here.
    """
    ray = import_ray()
    check_ray_address(address)
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"log_to_driver": log_to_driver, "configure_logging": False}
    if address:
        kwargs["address"] = address
    else:
        kwargs.update(num_cpus=num_cpus, include_dashboard=False)
    try:
        ray.init(**kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure to connect is the user's address or setup
        text = " ".join(str(exc).split())[:300]
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        raise BenchError(f"cannot start or reach {where}: {type(exc).__name__}: {text}") from exc
    return True


# ---------------------------------------------------------------------------------------------------------
# worker side (a Ray task)
# ---------------------------------------------------------------------------------------------------------
def _send(queue: Any, item: tuple[Any, ...]) -> None:
    """Put ``item`` on the progress queue; progress is best effort (a full or gone queue is ignored)."""
    if queue is None:
        return
    with contextlib.suppress(Exception):
        queue.put_nowait(item)


def claim_run(spec: JobSpec, target: TrackingTarget, run_id: str) -> str:
    """The run this attempt logs to: ``run_id`` on the first attempt; on a Ray retry (an earlier attempt
    claimed it and its worker was lost) the job's RUNNING runs are marked KILLED and a new run is created.

    Args:
        spec: the job.
        target: where to log.
        run_id: the run the launcher created for the job.
    """
    from lit_sb3.zoo.tracking import connect, run_environment_tags

    started = f"{time.time():.3f}"  # the job's start, for its timeout (before the tracking calls below)
    store = connect(target)
    run = store.get_run(run_id)
    me = f"{socket.gethostname()}:{os.getpid()}"
    if ATTEMPT_TAG not in run.data.tags and run.info.status == "RUNNING":
        store.set_tags(run_id, {ATTEMPT_TAG: f"1 {me}", STARTED_TAG: started})
        return run_id
    parent_id = parent_run_id(run)
    attempt = 1
    for old in store.job_attempts(spec.job_id, parent_id):
        with contextlib.suppress(ValueError, IndexError):
            attempt = max(attempt, int(old.data.tags.get(ATTEMPT_TAG, "1").split()[0]))
        if old.info.status == "RUNNING":
            store.fail_run(old.info.run_id, "killed: its Ray worker was lost; Ray retried the job", "KILLED")
    return store.create_job_run(
        spec, parent_id, run_environment_tags(), tags={ATTEMPT_TAG: f"{attempt + 1} {me}", STARTED_TAG: started}
    )


def ray_jobs(spec_jsons: list[str], target: TrackingTarget, run_ids: list[str], queue: Any) -> list[dict[str, Any]]:
    """Body of the Ray task of a unit (a seed batch of one or more jobs): each job claims its run, then they train
    together (:func:`lit_sb3.zoo.runner.run_jobs`); returns the result dicts, in order.

    Args:
        spec_jsons: the jobs (:meth:`JobSpec.to_json`).
        target: where to log.
        run_ids: their runs created by the launcher.
        queue: the progress queue (None: no progress).
    """
    import lit_sb3.zoo.launchers.preload  # noqa: F401 - the worker's start-up (imports), before the job's start
    from lit_sb3.zoo.runner import run_jobs

    specs = [JobSpec.from_json(text) for text in spec_jsons]
    run_ids = [claim_run(spec, target, run_id) for spec, run_id in zip(specs, run_ids)]
    for spec, run_id in zip(specs, run_ids):
        _send(queue, ("started", spec.job_id, run_id, time.time()))

    def progress(p: JobProgress) -> None:
        _send(queue, ("progress", asdict(p)))

    return [r.to_dict() for r in run_jobs(specs, target, run_ids=run_ids, progress=progress)]


def ray_task(task: Task) -> int:
    """Body of the Ray task of a :class:`~lit_sb3.zoo.launchers.base.Task`: its call; the exit status.

    Args:
        task: the task.
    """
    return int(task.fn(*task.args))


# ---------------------------------------------------------------------------------------------------------
# driver side
# ---------------------------------------------------------------------------------------------------------
@dataclass
class _InFlight:
    specs: list[JobSpec]
    run_ids: list[str]
    ref: Any
    submitted: float
    started: float | None = None
    cancelled: str | None = None
    start_checked: float = 0.0
    task: Task | None = None

    @property
    def key(self) -> str:
        return self.task.name if self.task is not None else self.specs[0].job_id


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


class RayLauncher(Launcher):
    """Runs each job as a Ray task (see the module docstring).

    Args:
        max_workers: jobs in flight (None: the cluster's CPUs // ``cpus_per_job``, GPUs // ``gpus_per_job``).
        timeout: seconds a job may run before it is cancelled and recorded FAILED (None: no limit).
        start_method: ignored (accepted so the CLI can pass the local launcher's options).
        address: Ray cluster address, ``auto`` or ``HOST:PORT`` (None: start a local Ray instance).
        cpus_per_job: Ray ``num_cpus`` of a job.
        gpus_per_job: Ray ``num_gpus`` of a job (fractions share a GPU).
        max_retries: times Ray re-runs a job whose worker or node is lost.
        num_cpus: CPUs of a local Ray instance (None: ``max_workers * cpus_per_job``, else all).
        log_to_driver: print the workers' output here (a task's lines; jobs write theirs to their runs).
    """

    def __init__(self, max_workers: int | None = None, timeout: float | None = None, start_method: str | None = None,
                 address: str | None = None, cpus_per_job: float = 1.0, gpus_per_job: float = 0.0,
                 max_retries: int = DEFAULT_MAX_RETRIES, num_cpus: int | None = None,
                 log_to_driver: bool = False) -> None:  # fmt: skip
        import_ray()
        if cpus_per_job <= 0:
            raise BenchError(f"--cpus-per-job must be > 0, got {cpus_per_job:g}")
        if gpus_per_job < 0:
            raise BenchError(f"--gpus-per-job must be >= 0, got {gpus_per_job:g}")
        if max_retries < 0:
            raise BenchError(f"max_retries must be >= 0, got {max_retries}")
        self._max_workers = int(max_workers) if max_workers else None
        self.timeout = float(timeout) if timeout else None
        self.address = address or None
        self.cpus_per_job = float(cpus_per_job)
        self.gpus_per_job = float(gpus_per_job)
        self.max_retries = int(max_retries)
        self.num_cpus = num_cpus
        self.log_to_driver = log_to_driver
        self._owns_ray = False
        self._connected = False
        self._running: dict[str, _InFlight] = {}
        self._runbook: RunBook | None = None
        self._target: TrackingTarget | None = None
        self._queue: Any = None
        self._queue_ok = True
        self.init_seconds = math.nan

    # -- connection ----------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Start or reach Ray (once); ``init_seconds`` is what it took."""
        if self._connected:
            return
        t0 = time.monotonic()
        local_cpus = self.num_cpus
        if local_cpus is None and self.address is None and self._max_workers is not None:
            local_cpus = max(1, math.ceil(self._max_workers * self.cpus_per_job))
        self._owns_ray = connect_ray(self.address, num_cpus=local_cpus, log_to_driver=self.log_to_driver)
        self.init_seconds = time.monotonic() - t0
        self._connected = True

    @property
    def max_workers(self) -> int:
        """Jobs in flight: ``--jobs``, else what the cluster's resources hold (connects to Ray)."""
        if self._max_workers is None:
            import ray

            self.connect()
            res = ray.cluster_resources()
            slots = int(res.get("CPU", 0) // self.cpus_per_job)
            if self.gpus_per_job > 0:
                slots = min(slots, int(res.get("GPU", 0) // self.gpus_per_job))
            if slots < 1:
                need = f"{self.cpus_per_job:g} CPU" + (f" and {self.gpus_per_job:g} GPU" if self.gpus_per_job else "")
                raise BenchError(f"the Ray cluster cannot hold one job ({need}); it has {dict(res)}")
            self._max_workers = slots
        return self._max_workers

    # -- running -------------------------------------------------------------------------------------------
    def submit(self, jobs: Sequence[JobUnit], target: TrackingTarget | None,
               runbook: RunBook | None) -> Iterator[LaunchEvent]:  # fmt: skip
        """Run ``jobs`` as Ray tasks (see :class:`~lit_sb3.zoo.launchers.base.Launcher`).

        Args:
            jobs: the jobs, seed batches (a batch is one task) and tasks.
            target: where the workers log (None: tasks only).
            runbook: creates/ends the runs (None: tasks only).
        """
        import ray
        from ray.util.queue import Queue

        self.connect()
        slots = self.max_workers
        self._runbook, self._target = runbook, target
        remote, task_remote = ray.remote(ray_jobs), ray.remote(ray_task)
        options = {"num_cpus": self.cpus_per_job, "num_gpus": self.gpus_per_job, "max_retries": self.max_retries,
                   "retry_exceptions": False}  # fmt: skip
        self._queue = Queue(actor_options={"num_cpus": 0})
        pending = deque(job_units(jobs))
        try:
            while pending or self._running:
                while pending and len(self._running) < slots:
                    unit = pending.popleft()
                    if isinstance(unit, Task):
                        ref = task_remote.options(name=f"bench-{unit.name}", **options).remote(unit)
                        job = _InFlight([], [], ref, time.monotonic(), task=unit)
                        self._running[job.key] = job
                        continue
                    specs = unit
                    assert runbook is not None and target is not None, "jobs need a tracking target and a runbook"
                    run_ids = [runbook.start(spec) for spec in specs]
                    name = specs[0].name if len(specs) == 1 else f"{specs[0].name}+{len(specs) - 1}"
                    ref = remote.options(name=f"bench-{name}", **options).remote(
                        [s.to_json() for s in specs], target, run_ids, self._queue
                    )
                    job = _InFlight(specs, run_ids, ref, time.monotonic())
                    self._running[job.key] = job
                    for spec, run_id in zip(specs, run_ids):
                        yield JobStarted(spec, run_id)
                yield from self._wait_round()
        finally:
            self.close()

    def _drain_queue(self) -> Iterator[JobProgress]:
        while True:
            try:
                items = self._queue.get_nowait_batch(self._queue.qsize())
            except Exception:  # noqa: BLE001 - progress is best effort; timeouts then count from submission
                self._queue_ok = False
                return
            if not items:
                return
            for item in items:
                if item[0] == "progress":
                    yield JobProgress(**item[1])
                elif item[0] == "started":
                    for job in self._running.values():
                        if item[1] in (ids := [s.job_id for s in job.specs]):
                            job.run_ids[ids.index(item[1])] = item[2]
                            job.started = job.started or time.monotonic()

    def _wait_round(self) -> Iterator[LaunchEvent]:
        import ray

        refs = [job.ref for job in self._running.values()]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=_WAIT_S)
        yield from self._drain_queue()
        done = set(ready)
        for job in list(self._running.values()):
            if job.ref in done:
                yield from self._finish(job)
            elif self.timeout is not None and job.cancelled is None and job.task is None:
                if job.started is None and (not self._queue_ok or time.monotonic() - job.submitted > self.timeout):
                    job.started = self._recorded_start(job)  # the progress queue is down or late: ask the run
                since = job.started  # never the submission: Ray worker start-up and queueing are not the job's
                if since is not None and time.monotonic() - since > self.timeout:
                    job.cancelled = f"timeout after {self.timeout:g} s"
                    with contextlib.suppress(Exception):
                        ray.cancel(job.ref, force=True)

    def _recorded_start(self, job: _InFlight) -> float | None:
        """When the job's worker started it (``STARTED_TAG`` on its latest attempt's run), on this process's
        monotonic clock; None while no worker has started it. Looked up at most every ``_START_POLL_S``."""
        now = time.monotonic()
        if self._target is None or self._target.experiment_id is None or now - job.start_checked < _START_POLL_S:
            return None
        job.start_checked = now
        with contextlib.suppress(Exception):  # best effort: the next round looks again
            from lit_sb3.zoo.tracking import connect

            store = connect(self._target)
            run = store.get_run(job.run_ids[0])
            runs = store.job_attempts(job.specs[0].job_id, parent_run_id(run)) or [run]
            stamps = [float(r.data.tags[STARTED_TAG]) for r in runs if STARTED_TAG in r.data.tags]
            if stamps:
                return now - max(0.0, time.time() - max(stamps))
        return None

    def _finish(self, job: _InFlight) -> Iterator[JobDone | TaskDone]:
        import ray

        self._running.pop(job.key, None)
        if job.task is not None:
            try:
                yield TaskDone(job.task, int(ray.get(job.ref)))
            except ray.exceptions.RayError as exc:  # it raised, or its worker was lost more than max_retries
                yield TaskDone(job.task, 1, _first_line(exc))
            return
        wall = time.monotonic() - (job.started or job.submitted)
        try:
            value = ray.get(job.ref)
            results = [result_from_dict(d) for d in value]
            if job.cancelled is None:
                for spec, result in zip(job.specs, results):
                    yield JobDone(spec, result)
                return
            reason = job.cancelled  # it ended just as it was cancelled: the timeout wins, as locally
        except ray.exceptions.TaskCancelledError:
            reason = job.cancelled or "cancelled"
        except ray.exceptions.RayTaskError as exc:  # the task's own code raised outside run_job
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            reason = job.cancelled or _first_line(cause)
        except ray.exceptions.RayError as exc:  # worker/node lost more often than max_retries, OOM-killed, ...
            reason = job.cancelled or f"Ray worker lost ({self.max_retries} retries used): {_first_line(exc)}"
        for spec, run_id in zip(job.specs, job.run_ids):
            latest = self._end_open_runs(spec, run_id, reason, "FAILED")
            yield JobDone(spec, JobResult(spec.job_id, spec.name, "FAILED", run_id=latest, wall_seconds=wall,
                                          failure_reason=reason))  # fmt: skip

    def _end_open_runs(self, spec: JobSpec, run_id: str, reason: str, status: str) -> str:
        """End every RUNNING run of the job (the launcher's and any retry's); returns the latest run id.

        Args:
            spec: the job.
            run_id: its run as last known.
            reason: the failure reason.
            status: ``FAILED`` or ``KILLED``.
        """
        assert self._runbook is not None
        latest = run_id
        ids = [run_id]
        if self._target is not None and self._target.experiment_id is not None:
            with contextlib.suppress(Exception):
                from lit_sb3.zoo.tracking import connect

                store = connect(self._target)
                parent = parent_run_id(store.get_run(run_id))
                runs = store.job_attempts(spec.job_id, parent)
                runs.sort(key=lambda r: r.info.start_time or 0)
                ids = [r.info.run_id for r in runs if r.info.status == "RUNNING"]
                if runs:
                    latest = runs[-1].info.run_id
        for open_id in ids:
            with contextlib.suppress(Exception):
                if self._runbook.status(open_id) == "RUNNING":
                    self._runbook.fail(open_id, reason, status)
        return latest

    def close(self) -> None:
        """Cancel every job still in flight and record it KILLED; shut down a Ray this launcher started."""
        ray = import_ray()
        for job in list(self._running.values()):
            with contextlib.suppress(Exception):
                ray.cancel(job.ref, force=True)
        for job in list(self._running.values()):
            self._running.pop(job.key, None)
            with contextlib.suppress(Exception):
                ray.wait([job.ref], timeout=10)
            for spec, run_id in zip(job.specs, job.run_ids):
                with contextlib.suppress(Exception):
                    self._end_open_runs(spec, run_id, "killed: bench run was interrupted", "KILLED")
        if self._queue is not None:
            with contextlib.suppress(Exception):
                self._queue.shutdown()
            self._queue = None
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False
            self._connected = False
