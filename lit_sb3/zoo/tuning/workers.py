"""The trial workers of ``bench tune``: one body (:func:`tune_worker`) that a launcher runs as a unit
(:class:`~lit_sb3.zoo.launchers.base.Task`): a spawned process of the local launcher, or a Ray task
(``num_cpus``/``num_gpus`` per worker, ``max_retries`` for a lost worker or node, ``retry_exceptions=False``).

Each of the ``--jobs`` workers runs trials of the study until it holds ``n_trials`` finished (COMPLETE + PRUNED)
trials. On a cluster the storage must be an RDB every node reaches (PostgreSQL); an RDB is opened with Optuna's
heartbeat::

    RDBStorage(url, heartbeat_interval=h, grace_period=max(3 h, 60 s),
               heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=--trial-retries))

(``failed_trial_callback`` and ``RetryFailedTrialCallback`` before Optuna 4.9)
so the trial of a worker that died stops beating, is marked FAIL by the next worker that looks
(``optuna.storages.fail_stale_trials``) and re-enqueued with the same parameters (a new trial number: numbers
never repeat); its MLflow runs are marked KILLED (tag ``lit_sb3.trial_state=lost``). A trial records the process
that runs it (``lit_sb3.process``): a worker on the same host fails a trial whose process is gone at once
(:func:`fail_dead_trials`; the only way on a journal file, which has no heartbeat), so the grace period can be
long enough (60 s at least) that a live trial on a loaded machine, late with a few beats, is never failed under
its worker (whose ``tell`` Optuna would then refuse).

A worker starts a new trial only while finished + running + waiting trials are fewer than ``n_trials``, deciding
and creating the trial under the study's :class:`~lit_sb3.zoo.pipeline.TrialSlotLock` (so the study never runs
over), runs a waiting (retried) trial first, and otherwise polls until the others' trials end or go stale: a lost
trial is never left RUNNING while a worker is alive.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tuning.objective import TuneSettings

__all__ = [
    "LostTrialCallback",
    "check_ray_tuning",
    "fail_dead_trials",
    "grace_period",
    "open_heartbeat_storage",
    "print_trial",
    "tune_worker",
    "worker_tasks",
]

DEFAULT_HEARTBEAT_S = 30
DEFAULT_TRIAL_RETRIES = 2
#: the least seconds without a heartbeat before Optuna fails a trial as lost: a live trial on a loaded machine
#: can miss a few beats, and failing it while it runs kills the worker that runs it (its tell is refused)
MIN_GRACE_S = 60
#: trial user attribute: ``host:pid:start`` of the process running the trial (lost trials on this host are found
#: at once, whatever the grace period)
PROCESS_ATTR = "lit_sb3.process"


class LostTrialCallback:
    """Optuna ``heartbeat_stale_trial_callback``: end the MLflow runs of a trial whose worker was lost (KILLED),
    then let ``RetryHeartbeatStaleTrialCallback`` (``RetryFailedTrialCallback`` before Optuna 4.9) re-enqueue it.

    Args:
        tracking_uri: the MLflow tracking URI.
        max_retry: times one trial is re-run.
    """

    def __init__(self, tracking_uri: str, max_retry: int) -> None:
        import optuna.storages

        retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
        self.tracking_uri = tracking_uri
        with warnings.catch_warnings():  # experimental in Optuna; a user of bench tune has nothing to do about it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.retry = (retry or optuna.storages.RetryFailedTrialCallback)(max_retry=max_retry)

    def __call__(self, study: Any, trial: Any) -> None:
        """End the trial's runs, re-enqueue it.

        Args:
            study: the study.
            trial: the stale trial (already FAIL).
        """
        run_id = trial.user_attrs.get("mlflow_run_id")
        if run_id:
            with contextlib.suppress(Exception):
                from lit_sb3.zoo.tracking import TrackingTarget, connect

                store = connect(TrackingTarget(self.tracking_uri, ""))
                run = store.get_run(run_id)
                store.use_run_experiment(run)
                store.kill_open_children(run_id)
                if run.info.status == "RUNNING":
                    store.set_tags(run_id, {"lit_sb3.trial_state": "lost"})
                    store.fail_run(run_id, "killed: its worker was lost (no heartbeat); trial re-enqueued", "KILLED")
        self.retry(study, trial)


def grace_period(heartbeat_interval: int) -> int:
    """Seconds without a heartbeat after which a trial counts as lost: 3 beats, at least :data:`MIN_GRACE_S`.

    Args:
        heartbeat_interval: seconds between heartbeats.
    """
    return max(3 * heartbeat_interval, MIN_GRACE_S)


def fail_dead_trials(study: Any, callback: Any) -> list[int]:
    """Fail at once the RUNNING trials whose process (:data:`PROCESS_ATTR`) ran on this host and is gone, and
    hand each to ``callback`` (as Optuna's stale-trial callback); trials of other hosts wait for the heartbeat.

    Args:
        study: the study.
        callback: ``callback(study, frozen_trial)`` for each trial failed here.

    Returns:
        The numbers of the trials failed here.
    """
    import socket

    from optuna.trial import TrialState

    from lit_sb3.zoo.tracking import process_tag
    from lit_sb3.zoo.tracking.host import process_alive

    failed, me = [], process_tag()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        tag = trial.user_attrs.get(PROCESS_ATTR)
        if not tag or tag == me or tag.partition(":")[0] != socket.gethostname() or process_alive(tag):
            continue
        try:
            study.tell(trial.number, state=TrialState.FAIL)
        except (ValueError, RuntimeError):  # another worker failed it first
            continue
        failed.append(trial.number)
        callback(study, next(t for t in study.get_trials(deepcopy=True) if t.number == trial.number))
    return failed


def open_heartbeat_storage(spec: str, tracking_uri: str, heartbeat_interval: int, trial_retries: int) -> Any:
    """The study's storage: an RDB URL with heartbeat and retry of lost trials; a journal file as it is.

    Args:
        spec: storage spec (:func:`~lit_sb3.zoo.tuning.study.storage_spec`).
        tracking_uri: MLflow URI (to end a lost trial's runs).
        heartbeat_interval: seconds between heartbeats (grace period: 3x).
        trial_retries: times a lost trial is re-run.
    """
    import optuna

    from lit_sb3.zoo.tuning.study import is_journal, open_storage

    if is_journal(spec):
        return open_storage(spec)
    engine_kwargs: dict[str, Any] = {}
    if spec.startswith(("postgresql", "postgres", "mysql")):
        engine_kwargs["connect_args"] = {"connect_timeout": 10}
    # Optuna 4.9 renamed failed_trial_callback to heartbeat_stale_trial_callback (the old name warns, 6.0 drops it)
    params = inspect.signature(optuna.storages.RDBStorage.__init__).parameters
    key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params else "failed_trial_callback"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                spec, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_interval,
                grace_period=grace_period(heartbeat_interval), **{key: LostTrialCallback(tracking_uri, trial_retries)},
            )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - the URL is the user's
        text = " ".join(str(exc).split())[:300]
        raise BenchError(f"cannot open storage {spec!r}: {type(exc).__name__}: {text}") from exc


def print_trial(study: Any, trial: Any) -> None:
    """One line per finished trial (an Optuna callback).

    Args:
        study: the study.
        trial: the trial that ended.
    """
    from optuna.trial import TrialState

    steps = trial.user_attrs.get("env_steps")
    extra = f"  env steps {steps}" if steps is not None else ""
    if trial.state == TrialState.COMPLETE:
        text = f"value {trial.value:.4g}"
    elif trial.state == TrialState.PRUNED:
        text = f"pruned at step {trial.user_attrs.get('pruned_at_step', '?')}"
    else:
        text = f"failed: {trial.user_attrs.get('failure_reason', '')}"
    print(f"trial {trial.number:4d} {trial.state.name:8s} {text}{extra}", flush=True)


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # failed trials are printed by print_trial
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


def tune_worker(settings: TuneSettings, worker: int, heartbeat_interval: int = DEFAULT_HEARTBEAT_S,
                trial_retries: int = DEFAULT_TRIAL_RETRIES) -> int:  # fmt: skip
    """Body of one tuning worker: run trials until the study holds ``n_trials`` finished ones; the exit status
    (1 when its trials kept failing).

    Args:
        settings: the study settings.
        worker: worker index (sampler seed ``seed + worker``).
        heartbeat_interval: Optuna heartbeat (seconds).
        trial_retries: times a lost trial is re-run.
    """
    from lit_sb3.zoo.tracking import quiet_mlflow

    quiet_mlflow()
    with _quiet_optuna():
        return _run_trials(settings, worker, heartbeat_interval, trial_retries)


def _run_trials(settings: TuneSettings, worker: int, heartbeat_interval: int, trial_retries: int) -> int:
    import optuna
    from optuna.trial import TrialState

    from lit_sb3.zoo.pipeline import TrialSlotLock
    from lit_sb3.zoo.tracking import process_tag
    from lit_sb3.zoo.tuning.objective import Objective, TrialFailed
    from lit_sb3.zoo.tuning.study import load_or_create_study

    storage = open_heartbeat_storage(settings.storage, settings.tracking.uri, heartbeat_interval, trial_retries)
    study = load_or_create_study(settings, storage=storage, worker=worker)
    objective = Objective(settings)
    lost = LostTrialCallback(settings.tracking.uri, trial_retries)
    me = process_tag()
    slot = TrialSlotLock(settings.storage, settings.study_name)

    def run_trial(trial: Any) -> float:
        slot.release()  # the trial exists (RUNNING): the others count it from now on
        trial.set_user_attr(PROCESS_ATTR, me)  # lets a worker on this host see at once that it is gone
        return objective(trial)

    deadline = time.monotonic() + settings.timeout if settings.timeout else None
    poll_s = float(min(5, max(1, heartbeat_interval)))
    failed_in_a_row, cap = 0, max(3, settings.n_trials)
    while deadline is None or time.monotonic() < deadline:
        before: set[int] = set()
        slot.acquire()  # released once this worker's next trial exists, or below
        try:
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                fail_dead_trials(study, lost)
                optuna.storages.fail_stale_trials(study)
            trials = study.get_trials(deepcopy=False)
            count = {s: sum(t.state == s for t in trials) for s in TrialState}
            finished = count[TrialState.COMPLETE] + count[TrialState.PRUNED]
            if finished >= settings.n_trials:
                break
            if count[TrialState.WAITING] == 0 and finished + count[TrialState.RUNNING] >= settings.n_trials:
                slot.release()
                time.sleep(poll_s)  # the others' trials cover the rest: wait until they end or go stale
                continue
            before = {t.number for t in trials}
            study.optimize(run_trial, n_trials=1, catch=(TrialFailed,), callbacks=[print_trial], gc_after_trial=True)
        except (ValueError, AssertionError):  # Optuna refused to tell a trial another worker had failed as lost
            taken = [t for t in study.get_trials(deepcopy=False) if t.number not in before and t.state.is_finished()]
            if not taken:
                raise
            logging.getLogger(__name__).warning(
                "worker %d: trial %d was failed as lost while it ran; its retry runs it again", worker, taken[0].number
            )
        finally:
            slot.release()
        mine = [t for t in study.get_trials(deepcopy=False) if t.number not in before and t.state.is_finished()]
        failed_in_a_row = failed_in_a_row + 1 if any(t.state == TrialState.FAIL for t in mine) else 0
        if failed_in_a_row >= cap:
            logging.getLogger(__name__).warning(
                "worker %d stopping: %d trials failed in a row", worker, failed_in_a_row
            )
            return 1
    return 0


def worker_tasks(settings: TuneSettings, jobs: int, heartbeat_interval: int = DEFAULT_HEARTBEAT_S,
                 trial_retries: int = DEFAULT_TRIAL_RETRIES) -> list[Any]:  # fmt: skip
    """The study's ``jobs`` workers as launcher units (worker ``w`` seeds its sampler with ``seed + w``).

    Args:
        settings: the study settings.
        jobs: number of workers.
        heartbeat_interval: Optuna heartbeat (seconds; RDB storages).
        trial_retries: times a lost trial is re-run.
    """
    from lit_sb3.zoo.launchers.base import Task

    return [Task(f"tune-{w}", tune_worker, (settings, w, heartbeat_interval, trial_retries)) for w in range(jobs)]


def check_ray_tuning(storage: str, address: str | None) -> None:
    """Fail early (one line) when Ray is missing, a cluster is given a journal file or cannot be reached.

    Args:
        storage: storage spec.
        address: ``--ray-address``.
    """
    from lit_sb3.zoo.launchers.ray_launcher import check_ray_address, import_ray
    from lit_sb3.zoo.tuning.study import is_journal

    import_ray()
    if address and is_journal(storage):
        raise BenchError(f"--launcher ray --ray-address {address}: the workers run on other machines and cannot share "
                         f"the journal file {storage}; give --storage postgresql://... (an RDB every node reaches)")  # fmt: skip
    check_ray_address(address)
