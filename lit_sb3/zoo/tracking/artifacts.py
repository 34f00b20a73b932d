"""Finding a job's run and moving its artifacts through MLflow (``bench enjoy``).

Artifacts are listed, downloaded and uploaded with ``MlflowClient``, so the same calls work on the embedded
sqlite store and against a tracking server (``mlflow-artifacts:`` proxied artifact stores included). Every
lookup that finds nothing raises a one-line :class:`~lit_sb3.zoo.errors.BenchError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.tracking.host import fail_fast
from lit_sb3.zoo.tracking.store import JOB_ID_TAG, RUN_TYPE, Tracking, first_line

__all__ = [
    "download_run_artifact",
    "find_finished_job_run",
    "find_job_run",
    "get_run",
    "list_run_artifacts",
    "log_run_artifact",
]


def get_run(tracking: Tracking, run_id: str) -> Any:
    """The run ``run_id`` (MLflow's ``Run``), or a one-line error naming the store.

    Args:
        tracking: an open store (:func:`~lit_sb3.zoo.tracking.open_reader`).
        run_id: the run id.
    """
    try:
        with fail_fast():
            return tracking.client.get_run(run_id)
    except Exception as exc:  # noqa: BLE001 - MLflow raises its own exception types for a missing run
        raise BenchError(f"no run with id {run_id!r} in {tracking.target.uri} ({first_line(exc)[:120]})") from None


def _experiment_ids(tracking: Tracking, experiment: str | None) -> list[str]:
    if experiment is not None:
        return [tracking.use_experiment(experiment)]
    return [e.experiment_id for e in tracking.experiments()]


def _search(tracking: Tracking, experiment: str | None, filter_string: str) -> list[Any]:
    ids = _experiment_ids(tracking, experiment)
    runs, token = [], None
    while ids:
        page = tracking.client.search_runs(
            ids,
            filter_string=filter_string,
            max_results=1000,
            page_token=token,
            order_by=["attributes.start_time DESC"],
        )
        runs += list(page)
        token = page.token
        if not token:
            break
    return runs


def _latest_finished(runs: list[Any], what: str) -> Any:
    finished = [r for r in runs if r.info.status == "FINISHED"]
    if finished:
        return finished[0]
    if not runs:
        raise BenchError(f"no run of {what}")
    statuses = sorted({r.info.status for r in runs})
    raise BenchError(f"{what} has no FINISHED run (its runs are {', '.join(statuses)}; run id {runs[0].info.run_id})")


def find_job_run(tracking: Tracking, job_id: str, experiment: str | None = None) -> Any:
    """The latest FINISHED run of job ``job_id`` (in ``experiment``, or in any experiment of the store).

    Args:
        tracking: an open store.
        job_id: the job id (``lit_sb3.job_id`` tag; ``bench run`` prints them).
        experiment: restrict to this experiment.
    """
    runs = _search(tracking, experiment, f"tags.`{JOB_ID_TAG}` = '{_quoted(job_id, '--job-id')}'")
    return _latest_finished(runs, f"job {job_id!r} in {tracking.target.uri}")


def find_finished_job_run(tracking: Tracking, experiment: str, algo: str, env_id: str, seed: int) -> Any:
    """The latest FINISHED job run of ``algo`` on ``env_id`` with ``seed`` in ``experiment``.

    Args:
        tracking: an open store.
        experiment: the experiment (``bench run --experiment``).
        algo: algorithm name.
        env_id: env id.
        seed: the seed.
    """
    flt = (
        f"tags.`{RUN_TYPE}` = 'job' and tags.`lit_sb3.algo` = '{_quoted(algo, '--algo')}' and "
        f"tags.`lit_sb3.env` = '{_quoted(env_id, '--env')}' and tags.`lit_sb3.seed` = '{int(seed)}'"
    )
    runs = _search(tracking, experiment, flt)
    if not runs:
        jobs = _search(tracking, experiment, f"tags.`{RUN_TYPE}` = 'job'")
        names = sorted({f"{r.data.tags.get('lit_sb3.algo')}/{r.data.tags.get('lit_sb3.env')}/s{r.data.tags.get('lit_sb3.seed')}"
                        for r in jobs})  # fmt: skip
        wanted = f"{algo}/{env_id}/s{seed}"
        hint = did_you_mean(wanted, names) or (f"; its jobs: {', '.join(names[:8])}" if names else "; it has no job")
        raise BenchError(f"no run of {wanted} in experiment {experiment!r}{hint}")
    return _latest_finished(runs, f"{algo}/{env_id}/s{seed} in experiment {experiment!r}")


def _quoted(value: str, flag: str) -> str:
    if "'" in value or "\\" in value:
        raise BenchError(f"{flag}: quotes and backslashes are not allowed, got {value!r}")
    return value


def list_run_artifacts(tracking: Tracking, run_id: str, path: str | None = None) -> list[str]:
    """Paths of the artifacts of a run directly under ``path`` (the root when None).

    Args:
        tracking: an open store.
        run_id: the run.
        path: artifact folder.
    """
    with fail_fast():
        return [f.path for f in tracking.client.list_artifacts(run_id, path)]


def download_run_artifact(tracking: Tracking, run_id: str, path: str, folder: str | Path) -> Path:
    """Download the artifact ``path`` of a run into ``folder`` (through the tracking server when there is one);
    a one-line error when the run has no such artifact.

    Args:
        tracking: an open store.
        run_id: the run.
        path: artifact path (``model.zip``).
        folder: local destination folder.
    """
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per file otherwise
    parent = path.rpartition("/")[0] or None
    if path not in list_run_artifacts(tracking, run_id, parent):
        raise BenchError(f"run {run_id} has no artifact {path!r}")
    try:
        with fail_fast():
            local = tracking.client.download_artifacts(run_id, path, str(folder))
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is one line
        raise BenchError(f"cannot download artifact {path!r} of run {run_id}: {first_line(exc)[:200]}") from None
    return Path(local)


def log_run_artifact(tracking: Tracking, run_id: str, local_path: str | Path, artifact_path: str | None = None) -> None:
    """Upload one file as an artifact of a run (into the folder ``artifact_path``), whatever its status.

    Args:
        tracking: an open store.
        run_id: the run.
        local_path: the file.
        artifact_path: folder in the run's artifacts (``videos``).
    """
    tracking.client.log_artifact(run_id, str(local_path), artifact_path)
