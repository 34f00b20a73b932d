"""MLflow bookkeeping of ``bench run``: experiment, parent (grid) run, child (job) runs, resume.

Layout (the tracking contract that ``bench report`` reads):

- one experiment per ``--experiment``, created with ``artifact_location`` (for ``sqlite:///x/mlflow.db``:
  ``x/mlartifacts/<experiment>``, so ``mlflow ui`` run in ``x`` shows everything);
- a parent run per invocation, tagged ``lit_sb3.run_type=grid``, with the command line as params and the
  summary table (``summary.md``/``summary.json``) as artifacts;
- a child run per job, tagged ``mlflow.parentRunId``, ``lit_sb3.run_type=job``, ``lit_sb3.algo``, ``lit_sb3.env``,
  ``lit_sb3.seed``, ``lit_sb3.job_id``, ``lit_sb3.config_hash``, versions and ``git.commit``; params are the
  flattened resolved hyperparameters. Its metrics and artifacts are written by the worker
  (:mod:`lit_sb3.zoo.runner`).

Resume: FINISHED job runs are found by ``lit_sb3.job_id``; RUNNING ones whose ``bench run`` process is gone
(the parent run records host, pid and process start time) are stale and marked KILLED; those whose process is
still alive belong to another ``bench run`` and are left alone.

mlflow is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = [
    "DEFAULT_TRACKING_URI",
    "TrackingTarget",
    "Tracking",
    "open_tracking",
    "connect",
    "fail_fast",
    "pid_alive",
    "sqlite_path",
    "flatten_params",
    "default_experiment_name",
    "run_environment_tags",
]

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
RUN_TYPE = "lit_sb3.run_type"
PROC_TAG = "lit_sb3.process"
FAILURE_TAG = "lit_sb3.failure_reason"
_PARAM_MAX = 6000


@dataclass(frozen=True)
class TrackingTarget:
    """Where a job logs (picklable: it travels to the worker processes).

    Args:
        uri: MLflow tracking URI (``sqlite:///`` paths made absolute).
        experiment: experiment name.
        artifact_location: artifact root of the experiment (None: the server's default).
        experiment_id: the experiment's id once it exists.
    """

    uri: str
    experiment: str
    artifact_location: str | None = None
    experiment_id: str | None = None


# ---------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def fail_fast(timeout_s: int = 10) -> Iterator[None]:
    """No HTTP retries and a short request timeout (an unreachable server fails in seconds, not minutes).

    Args:
        timeout_s: per-request timeout.
    """
    keys = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout_s)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for other schemes).

    Args:
        uri: tracking URI.
    """
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///") :].split("?")[0])


def _normalize_uri(uri: str) -> str:
    """``sqlite:///rel.db`` -> ``sqlite:////abs/rel.db`` (workers may not share the cwd forever)."""
    path = sqlite_path(uri)
    if path is None or path.is_absolute():
        return uri
    query = uri.partition("?")[2]
    return "sqlite:///" + str(path.resolve()) + (f"?{query}" if query else "")


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "default"


def default_artifact_location(uri: str, experiment: str) -> str | None:
    """``<db folder>/mlartifacts/<experiment>`` for sqlite stores, None (the server decides) otherwise.

    Args:
        uri: tracking URI.
        experiment: experiment name.
    """
    path = sqlite_path(_normalize_uri(uri))
    if path is None:
        return None
    return str(path.parent / "mlartifacts" / _safe_name(experiment))


def default_experiment_name(envs_spec: str) -> str:
    """``bench-<suite or env names>`` from the ``--envs`` text, e.g. ``bench-smoke``, ``bench-CartPole-v1``.

    Args:
        envs_spec: the ``--envs`` argument.
    """
    parts = [p.strip().rsplit(":", 1)[-1] for p in envs_spec.split(",") if p.strip()]
    name = "bench-" + "+".join(parts)
    return name if len(name) <= 80 else name[:72] + "-etc"


def flatten_params(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested dicts -> ``{"a.b": "value"}`` strings (lists/None as JSON), each cut to MLflow's length limit.

    Args:
        data: nested mapping.
        prefix: key prefix.
    """
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, prefix=f"{name}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out[name] = text[:_PARAM_MAX]
    return out


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def run_environment_tags() -> dict[str, str]:
    """Version and git tags put on every job run."""
    import gymnasium
    import torch

    import lit_sb3

    return {
        "lit_sb3.version": lit_sb3.__version__,
        "torch.version": torch.__version__,
        "gymnasium.version": gymnasium.__version__,
        "git.commit": _git_commit(),
    }


def _proc_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks (Linux), to tell a live process from a reused pid."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host and is not a zombie (unknown: assumed alive).

    Args:
        pid: process id.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _process_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_proc_start(os.getpid()) or ''}"


def _process_alive(tag: str | None) -> bool:
    """Whether the ``host:pid:start`` process is alive on this host (other hosts: assumed dead)."""
    if not tag:
        return False
    host, _, rest = tag.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid() or not pid_alive(pid):
        return False
    now = _proc_start(pid)
    return not start or now is None or now == start


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:240]


# ---------------------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------------------
class Tracking:
    """An open tracking store and experiment (made by :func:`open_tracking`).

    Args:
        client: the ``MlflowClient``.
        target: where to log.
    """

    def __init__(self, client: Any, target: TrackingTarget) -> None:
        self.client = client
        self.target = target

    @property
    def experiment_id(self) -> str | None:
        """The experiment id (None when it does not exist yet)."""
        return self.target.experiment_id

    def ensure_experiment(self) -> TrackingTarget:
        """Create the experiment (with its artifact location) if needed; returns the completed target."""
        if self.target.experiment_id is not None:
            return self.target
        exp = self.client.get_experiment_by_name(self.target.experiment)
        if exp is not None and exp.lifecycle_stage == "deleted":
            raise BenchError(
                f"experiment '{self.target.experiment}' is deleted in {self.target.uri}; restore it "
                "(mlflow experiments restore) or choose another --experiment"
            )
        if exp is None:
            exp_id = self.client.create_experiment(
                self.target.experiment, artifact_location=self.target.artifact_location
            )
            exp = self.client.get_experiment(exp_id)
        self.target = TrackingTarget(self.target.uri, self.target.experiment, exp.artifact_location, exp.experiment_id)
        return self.target

    # -- reading ------------------------------------------------------------------------------------------
    def _search(self, filter_string: str) -> list[Any]:
        if self.target.experiment_id is None:
            return []
        runs, token = [], None
        while True:
            page = self.client.search_runs(
                [self.target.experiment_id], filter_string=filter_string, max_results=1000, page_token=token
            )
            runs += list(page)
            token = page.token
            if not token:
                return runs

    def job_runs(self) -> list[Any]:
        """Every job run of the experiment."""
        return self._search(f"tags.`{RUN_TYPE}` = 'job'")

    def finished_job_ids(self) -> set[str]:
        """Job ids with a FINISHED run in the experiment."""
        return {r.data.tags.get("lit_sb3.job_id", "") for r in self.job_runs() if r.info.status == "FINISHED"} - {""}

    def running_job_runs(self) -> tuple[list[Any], dict[str, str]]:
        """``(stale, active)``: RUNNING job runs whose ``bench run`` is gone, and job id -> process tag of
        RUNNING job runs whose ``bench run`` process is still alive (another invocation is running them)."""
        stale, active = [], {}
        parents: dict[str, str | None] = {}
        for run in self.job_runs():
            if run.info.status != "RUNNING":
                continue
            parent_id = run.data.tags.get("mlflow.parentRunId")
            if parent_id not in parents:
                tag = None
                if parent_id:
                    with contextlib.suppress(Exception):
                        tag = self.client.get_run(parent_id).data.tags.get(PROC_TAG)
                parents[parent_id] = tag
            proc = parents[parent_id]
            if _process_alive(proc):
                active[run.data.tags.get("lit_sb3.job_id", "")] = proc or ""
            else:
                stale.append(run)
        return stale, active

    def mark_stale(self) -> tuple[int, dict[str, str]]:
        """Mark stale RUNNING job and grid runs KILLED; returns (how many job runs, active job ids -> process)."""
        stale, active = self.running_job_runs()
        for run in stale:
            self.client.set_tag(run.info.run_id, FAILURE_TAG, "killed: its bench run ended before the job did")
            self.client.set_terminated(run.info.run_id, "KILLED")
        for run in self._search(f"tags.`{RUN_TYPE}` = 'grid' and attributes.status = 'RUNNING'"):
            if not _process_alive(run.data.tags.get(PROC_TAG)):
                self.client.set_terminated(run.info.run_id, "KILLED")
        return len(stale), active

    # -- writing ------------------------------------------------------------------------------------------
    def create_parent_run(self, command: str, params: Mapping[str, Any], run_name: str | None = None) -> str:
        """Start the grid run of this invocation.

        Args:
            command: the command line.
            params: the parsed options.
            run_name: display name.
        """
        from mlflow.entities import Param

        target = self.ensure_experiment()
        tags = {RUN_TYPE: "grid", PROC_TAG: _process_tag(), "mlflow.source.name": "bench run"}
        run = self.client.create_run(target.experiment_id, run_name=run_name, tags=tags)
        values = {"command": command, **{k: json.dumps(v) if not isinstance(v, str) else v for k, v in params.items()}}
        self.client.log_batch(run.info.run_id, params=[Param(k, str(v)[:_PARAM_MAX]) for k, v in values.items()])
        return run.info.run_id

    def create_job_run(self, spec: Any, parent_run_id: str | None, env_tags: Mapping[str, str]) -> str:
        """Start the child run of one job, with its tags and params (the worker logs the rest).

        Args:
            spec: the :class:`~lit_sb3.zoo.jobs.JobSpec`.
            parent_run_id: the grid run (None: a top-level run).
            env_tags: :func:`run_environment_tags`.
        """
        from mlflow.entities import Param

        target = self.ensure_experiment()
        tags = {
            **({"mlflow.parentRunId": parent_run_id} if parent_run_id else {}),
            RUN_TYPE: "job",
            "lit_sb3.algo": spec.algo,
            "lit_sb3.env": spec.env_id,
            "lit_sb3.seed": str(spec.seed),
            "lit_sb3.job_id": spec.job_id,
            "lit_sb3.config_hash": spec.config_hash,
            **env_tags,
        }
        run = self.client.create_run(
            target.experiment_id, run_name=f"{spec.algo}-{spec.env_id}-s{spec.seed}", tags=tags
        )
        params = flatten_params(spec.params)
        params.update(
            {"seed": str(spec.seed), "eval_freq": str(spec.eval_freq), "eval_episodes": str(spec.eval_episodes),
             "device": spec.device, "torch_threads": str(spec.torch_threads)}
        )  # fmt: skip
        items = [Param(k, v) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):  # MLflow's log_batch limit is 100 params
            self.client.log_batch(run.info.run_id, params=items[i : i + 100])
        return run.info.run_id

    def fail_run(self, run_id: str, reason: str, status: str = "FAILED", traceback_text: str | None = None) -> None:
        """End a run as FAILED (or KILLED) with its reason tag and optional traceback artifact.

        Args:
            run_id: the run.
            reason: one line.
            status: ``FAILED`` or ``KILLED``.
            traceback_text: saved as ``traceback.txt``.
        """
        with contextlib.suppress(Exception):
            self.client.set_tag(run_id, FAILURE_TAG, reason[:_PARAM_MAX])
            if traceback_text:
                self.client.log_text(run_id, traceback_text, "traceback.txt")
        self.client.set_terminated(run_id, status)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        """Set tags on a run (values as text).

        Args:
            run_id: the run.
            tags: name -> value.
        """
        from mlflow.entities import RunTag

        if tags:
            self.client.log_batch(run_id, tags=[RunTag(k, str(v)[:_PARAM_MAX]) for k, v in tags.items()])

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params (values as text, cut to MLflow's limit), 100 per ``log_batch`` (MLflow's limit).

        Args:
            run_id: the run.
            params: name -> value.
        """
        from mlflow.entities import Param

        items = [Param(k, str(v)[:_PARAM_MAX]) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i : i + 100])

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        """Log metrics at one step in one ``log_batch`` (1,000 at most per call, MLflow's limit).

        Args:
            run_id: the run.
            metrics: name -> value.
            step: the step (env steps for job metrics).
        """
        import time

        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        items = [Metric(k, float(v), stamp, int(step)) for k, v in metrics.items()]
        for i in range(0, len(items), 1000):
            self.client.log_batch(run_id, metrics=items[i : i + 1000])

    def log_artifacts(self, run_id: str, folder: str | Path, artifact_path: str | None = None) -> None:
        """Upload the files of ``folder`` as artifacts of a run.

        Args:
            run_id: the run.
            folder: local folder.
            artifact_path: sub-folder in the run's artifacts.
        """
        self.client.log_artifacts(run_id, str(folder), artifact_path)

    def log_text(self, run_id: str, text: str, name: str) -> None:
        """Save ``text`` as the artifact ``name`` of a run."""
        self.client.log_text(run_id, text, name)

    def log_dict(self, run_id: str, data: Any, name: str) -> None:
        """Save ``data`` as the JSON/YAML artifact ``name`` of a run."""
        self.client.log_dict(run_id, data, name)

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """End a run with ``status`` (``FINISHED``, ``FAILED``, ``KILLED``)."""
        self.client.set_terminated(run_id, status)

    def get_run(self, run_id: str) -> Any:
        """The run (MLflow's ``Run``: ``info``, ``data.tags``, ``data.params``, ``data.metrics``)."""
        return self.client.get_run(run_id)

    def run_status(self, run_id: str) -> str:
        """Current status of a run."""
        return str(self.client.get_run(run_id).info.status)

    def end_parent_run(self, run_id: str, rows: Sequence[Mapping[str, Any]], status: str, markdown: str) -> None:
        """Attach the summary (``summary.json``, ``summary.md``) and end the grid run.

        Args:
            run_id: the grid run.
            rows: one dict per job.
            status: final status.
            markdown: the summary table as Markdown.
        """
        with contextlib.suppress(Exception):
            self.client.log_dict(run_id, {"jobs": list(rows)}, "summary.json")
            self.client.log_text(run_id, markdown, "summary.md")
        self.client.set_terminated(run_id, status)


def connect(target: TrackingTarget) -> Tracking:
    """A :class:`Tracking` on an already resolved target (no query is made; the worker side of a job).

    Args:
        target: where to log (from :func:`open_tracking` in the parent process).
    """
    from mlflow import MlflowClient

    _quiet_mlflow()
    return Tracking(MlflowClient(tracking_uri=target.uri), target)


def _quiet_mlflow() -> None:
    for name in ("alembic", "mlflow.store.db.utils", "mlflow.tracking.fluent", "mlflow.store.sqlalchemy_store"):
        logging.getLogger(name).setLevel(logging.WARNING)


def open_tracking(uri: str, experiment: str, *, artifact_location: str | None = None, create: bool = True) -> Tracking:
    """Connect to ``uri`` (failing fast with a one-line :class:`BenchError`) and look up the experiment.

    For a ``sqlite:///`` URI the database is created when ``create`` is true (its folder must exist); with
    ``create=False`` (``--dry-run``) a missing file is simply an empty store. HTTP stores are probed with no
    retries and a short timeout, so ``http://127.0.0.1:1`` fails in well under a second.

    Args:
        uri: tracking URI (``sqlite:///mlflow.db``, ``http://host:5000``, ...).
        experiment: experiment name.
        artifact_location: artifact root for a new experiment (default :func:`default_artifact_location`).
        create: create the database and the experiment when missing.
    """
    _quiet_mlflow()
    norm = _normalize_uri(uri)
    path = sqlite_path(norm)
    location = artifact_location if artifact_location is not None else default_artifact_location(norm, experiment)
    if path is not None:
        if not path.parent.is_dir():
            raise BenchError(f"cannot use tracking URI {uri!r}: folder {str(path.parent)!r} does not exist")
        if not create and not path.exists():
            return Tracking(None, TrackingTarget(norm, experiment, location, None))
    elif norm.startswith(("file:", "/")) or "://" not in norm:
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
            raise BenchError(
                f"tracking URI {uri!r} is a file store, which MLflow 3 refuses; use sqlite:///mlflow.db (default) "
                "or an http:// server"
            )
    from mlflow import MlflowClient

    try:
        with fail_fast():
            client = MlflowClient(tracking_uri=norm)
            exp = client.get_experiment_by_name(experiment)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the store is the user's URI
        raise BenchError(f"cannot reach tracking URI {uri!r}: {_first_line(exc)}") from exc
    exp_id = exp.experiment_id if exp is not None and exp.lifecycle_stage != "deleted" else None
    if exp is not None:
        location = exp.artifact_location
    tracking = Tracking(client, TrackingTarget(norm, experiment, location, exp_id))
    if create:
        tracking.ensure_experiment()
    return tracking
