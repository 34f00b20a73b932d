"""The launcher interface: ``submit(jobs, target, runbook)`` yields events while the jobs run.

A launcher owns scheduling and process life (timeouts, crashes); the :class:`RunBook` owns the tracking
records (child runs). Each job yields one :class:`JobStarted`, any number of
:class:`~lit_sb3.zoo.runner.JobProgress` snapshots, then exactly one :class:`JobDone`.

An entry of ``jobs`` is a seed batch (a list of jobs, see :func:`~lit_sb3.zoo.jobs.seed_batches`) or a
:class:`~lit_sb3.zoo.jobs.JobSpec` (a batch of one): each runs as one unit (one process, one Ray task) through
:func:`lit_sb3.zoo.runner.run_jobs` and yields the events of each of its jobs. An entry may also be a
:class:`Task` (a ``bench tune`` worker): a call run as one unit the same way, which keeps its own records and
yields one :class:`TaskDone`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union

from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.runner import JobProgress, JobResult
from lit_sb3.zoo.tracking import TrackingTarget

__all__ = ["RunBook", "JobStarted", "JobDone", "Task", "TaskDone", "LaunchEvent", "Launcher", "JobUnit", "job_units"]


class RunBook(Protocol):
    """Creates and ends the tracking runs of jobs, on the launcher's side."""

    def start(self, spec: JobSpec) -> str:
        """Create the job's run (RUNNING, with tags and params) and return its id."""
        ...

    def fail(self, run_id: str, reason: str, status: str = "FAILED", log_text: str | None = None) -> None:
        """End a run whose worker could not (crash, timeout, interruption); ``log_text`` is its output."""
        ...

    def status(self, run_id: str) -> str:
        """The run's current status."""
        ...


@dataclass(frozen=True)
class JobStarted:
    """A job's process started.

    Args:
        spec: the job.
        run_id: its run.
    """

    spec: JobSpec
    run_id: str


@dataclass(frozen=True)
class JobDone:
    """A job ended (any status).

    Args:
        spec: the job.
        result: what happened.
    """

    spec: JobSpec
    result: JobResult


@dataclass(frozen=True)
class Task:
    """A unit that is a call, not jobs: ``fn(*args)`` in the unit's process (its output to the terminal), its
    return value the exit status. It creates no run and reports no progress, and the launcher's ``timeout`` does
    not apply (a task keeps its own time limit); a crash, a lost Ray worker (retried) or an interruption are the
    launcher's as for jobs.

    Args:
        name: the unit's name (its process's, its Ray task's).
        fn: a module-level function (pickled to the unit's process).
        args: its arguments.
    """

    name: str
    fn: Callable[..., int]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class TaskDone:
    """A task ended.

    Args:
        task: the task.
        code: its exit status (0: it ended well).
        reason: why it failed, when it did not return (crash, lost worker).
    """

    task: Task
    code: int
    reason: str | None = None


LaunchEvent = Union[JobStarted, JobProgress, JobDone, TaskDone]

JobUnit = Union[JobSpec, Sequence[JobSpec], Task]
"""What a launcher runs as one unit: a job, a seed batch of jobs, or a task."""


def job_units(jobs: Sequence[JobUnit]) -> list[list[JobSpec] | Task]:
    """Every entry of ``jobs`` as a list of jobs (a single job: a list of one) or a task.

    Args:
        jobs: jobs, seed batches and tasks.
    """
    return [[job] if isinstance(job, JobSpec) else job if isinstance(job, Task) else list(job) for job in jobs]


class Launcher(ABC):
    """Runs jobs and reports what happens."""

    @abstractmethod
    def submit(self, jobs: Sequence[JobUnit], target: TrackingTarget | None,
               runbook: RunBook | None) -> Iterator[LaunchEvent]:  # fmt: skip
        """Run ``jobs``; yield events until every job is done.

        Args:
            jobs: the jobs (or seed batches of jobs, or tasks), in order.
            target: where the workers log (None: tasks only).
            runbook: creates/ends the runs (None: tasks only).
        """

    def close(self) -> None:
        """Stop whatever still runs (called on interruption); the default does nothing."""
