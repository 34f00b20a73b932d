"""The tracking store: experiment, parent (grid/study) runs, child (job/trial) runs, resume, and reading.

Layout (the tracking contract that ``bench report`` reads):

- one experiment per ``--experiment``, created with ``artifact_location`` (for ``sqlite:///x/mlflow.db``:
  ``x/mlartifacts/<experiment>``, so ``mlflow ui`` run in ``x`` shows everything);
- a parent run per invocation, tagged ``lit_sb3.run_type=grid`` (``study`` for ``bench tune``), with the
  command line and options as params, the summary table (``summary.md``/``summary.json``) as artifacts and, for
  a grid, the mean final score of each algo x env as metrics (``final_mean_reward/<algo> <env>``);
- a child run per job named ``s<seed> <algo> <env>``, nested under the grid run (MLflow's parent tag,
  :func:`~lit_sb3.zoo.tracking.mlflow_compat.parent_tags`), tagged ``lit_sb3.run_type=job``,
  ``lit_sb3.algo``, ``lit_sb3.env``, ``lit_sb3.seed``, ``lit_sb3.job_id``, ``lit_sb3.config_hash``, versions
  and ``git.commit``; params are the resolved config in plain text, hyperparameters in one namespace
  (:func:`~lit_sb3.zoo.tracking.names.job_params`). Its metrics and artifacts are written by the worker
  (:mod:`lit_sb3.zoo.runner`).

Resume: FINISHED job runs are found by ``lit_sb3.job_id``; RUNNING ones whose ``bench run`` process is gone
(the parent run records host, pid and process start time) are stale and marked KILLED; those whose process is
still alive belong to another ``bench run`` and are left alone.

Every call is MLflow's public client API; the UI's tags and the sqlite fast path are in
:mod:`~lit_sb3.zoo.tracking.mlflow_compat`. mlflow is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.tracking import mlflow_compat as compat
from lit_sb3.zoo.tracking.host import fail_fast, process_alive, process_tag, sqlite_path
from lit_sb3.zoo.tracking.links import VIEW_STATE_KEY, training_view_state
from lit_sb3.zoo.tracking.names import (
    PARAM_MAX,
    job_params,
    job_run_name,
    readable,
)

__all__ = [
    "DEFAULT_TRACKING_URI",
    "FAILURE_TAG",
    "PROC_TAG",
    "RUN_TYPE",
    "Tracking",
    "TrackingTarget",
    "first_line",
    "sqlite_finished_job_ids",
]

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
RUN_TYPE = "lit_sb3.run_type"
PROC_TAG = "lit_sb3.process"
FAILURE_TAG = "lit_sb3.failure_reason"
JOB_ID_TAG = "lit_sb3.job_id"


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


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:240]


# ---------------------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------------------
class Tracking:
    """An open tracking store and experiment (made by :func:`open_tracking`, :func:`connect` or
    :func:`open_reader`): every run the suite creates, tags, logs to, queries or ends goes through it.

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
        ui_tags = {**compat.experiment_kind_tags(), **compat.shared_view_tags(VIEW_STATE_KEY, training_view_state())}
        for key, value in ui_tags.items():  # its "Model training" view; the runs table of the suite's links
            if key not in (exp.tags or {}):
                with contextlib.suppress(Exception):
                    self.client.set_experiment_tag(exp.experiment_id, key, value)
        self.target = TrackingTarget(self.target.uri, self.target.experiment, exp.artifact_location, exp.experiment_id)
        return self.target

    def use_experiment(self, name: str) -> str:
        """Point this store at the existing experiment ``name`` (for reading); returns its id, or a one-line
        :class:`BenchError` naming the experiments there are.

        Args:
            name: experiment name.
        """
        with fail_fast():
            exp = self.client.get_experiment_by_name(name)
            if exp is None or exp.lifecycle_stage == "deleted":
                names = self.experiment_names()
                raise BenchError(f"experiment {name!r} not found in {self.target.uri}{did_you_mean(name, names)}")
        self.target = TrackingTarget(self.target.uri, name, exp.artifact_location, exp.experiment_id)
        return str(exp.experiment_id)

    def use_run_experiment(self, run: Any) -> None:
        """Point this store at the experiment of ``run`` (a run fetched by id, e.g. from a trial's user attrs).

        Args:
            run: MLflow's ``Run``.
        """
        self.target = TrackingTarget(self.target.uri, self.target.experiment, None, str(run.info.experiment_id))

    # -- generic reading ------------------------------------------------------------------------------------
    def experiments(self) -> list[Any]:
        """The active experiments of the store (MLflow's ``Experiment``), all pages."""
        experiments, token = [], None
        while True:
            page = self.client.search_experiments(max_results=1000, page_token=token)
            experiments += list(page)
            token = page.token
            if not token:
                return experiments

    def experiment_names(self) -> list[str]:
        """Names of the active experiments of the store."""
        return [e.name for e in self.experiments()]

    def search_runs(self, filter_string: str = "") -> list[Any]:
        """Every run of the experiment matching ``filter_string`` (MLflow's search syntax), all pages.

        Args:
            filter_string: e.g. ``tags.`lit_sb3.run_type` = 'job'``.
        """
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

    def timed_job_runs(self, algos: Sequence[str], limit: int = 2000) -> list[dict[str, Any]]:
        """``{"algo", "env", "metrics"}`` of the FINISHED job runs of ``algos`` in every experiment of the store
        that logged the phases' ``time/*`` metrics (:data:`lit_sb3.zoo.cost.TIME_METRICS`), newest first.

        Args:
            algos: algorithms.
            limit: most runs read.
        """
        from lit_sb3.zoo.cost import TIME_METRICS

        if self.client is None:  # --dry-run on a store not created yet
            return []
        ids = [e.experiment_id for e in self.experiments()]
        if not ids or not algos:
            return []
        flt = f"attributes.status = 'FINISHED' and tags.`{RUN_TYPE}` = 'job' and metrics.`time/train_seconds` >= 0"
        runs = self.client.search_runs(
            ids, filter_string=flt, max_results=limit, order_by=["attributes.start_time DESC"]
        )
        return [{"algo": r.data.tags.get("lit_sb3.algo", ""), "env": r.data.tags.get("lit_sb3.env", ""),
                 "metrics": {k: v for k, v in r.data.metrics.items() if k in TIME_METRICS}}
                for r in runs if r.data.tags.get("lit_sb3.algo") in algos]  # fmt: skip

    def get_run(self, run_id: str) -> Any:
        """The run (MLflow's ``Run``: ``info``, ``data.tags``, ``data.params``, ``data.metrics``)."""
        return self.client.get_run(run_id)

    def run_status(self, run_id: str) -> str:
        """Current status of a run."""
        return str(self.client.get_run(run_id).info.status)

    def metric_history(self, run_id: str, key: str) -> list[Any]:
        """Every value of metric ``key`` of a run (``step``, ``value``, ``timestamp``)."""
        return list(self.client.get_metric_history(run_id, key))

    # -- generic writing ------------------------------------------------------------------------------------
    def create_run(
        self,
        run_type: str,
        run_name: str | None = None,
        tags: Mapping[str, Any] | None = None,
        parent_run_id: str | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a run of the experiment (created if needed); returns its id.

        Args:
            run_type: ``lit_sb3.run_type`` (``grid``, ``job``, ``study``, ``trial``, ``report``, ...).
            run_name: display name.
            tags: more tags.
            parent_run_id: its parent (:func:`~lit_sb3.zoo.tracking.mlflow_compat.parent_tags`).
            params: params, logged as plain text (:func:`~lit_sb3.zoo.tracking.names.readable`).
        """
        target = self.ensure_experiment()
        all_tags = {RUN_TYPE: run_type, **compat.parent_tags(parent_run_id)}
        all_tags.update({k: str(v)[:PARAM_MAX] for k, v in (tags or {}).items()})
        run = self.client.create_run(target.experiment_id, run_name=run_name, tags=all_tags)
        if params:
            self.log_params(run.info.run_id, params)
        return str(run.info.run_id)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        """Set tags on a run (values as text).

        Args:
            run_id: the run.
            tags: name -> value.
        """
        from mlflow.entities import RunTag

        if tags:
            self.client.log_batch(run_id, tags=[RunTag(k, str(v)[:PARAM_MAX]) for k, v in tags.items()])

    def rename_run(self, run_id: str, name: str) -> None:
        """Give a run another display name.

        Args:
            run_id: the run.
            name: the new name.
        """
        self.client.update_run(run_id, name=name)

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params as plain text (strings as they are, other values :func:`readable`), cut to MLflow's limit,
        100 per ``log_batch`` (MLflow's limit).

        Args:
            run_id: the run.
            params: name -> value.
        """
        from mlflow.entities import Param

        text = {k: v if isinstance(v, str) else readable(v) for k, v in params.items()}
        items = [Param(k, v[:PARAM_MAX]) for k, v in sorted(text.items())]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i : i + 100])

    def log_metrics(self, run_id: str, metrics: Mapping[str, float | None], step: int = 0) -> None:
        """Log the finite metrics at one step, 1,000 per ``log_batch`` (MLflow's limit).

        Args:
            run_id: the run.
            metrics: name -> value (None and non-finite values are skipped).
            step: the step (env steps for job metrics).
        """
        import math

        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        items = [
            Metric(k, float(v), stamp, int(step)) for k, v in metrics.items() if v is not None and math.isfinite(v)
        ]
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

    def log_artifact(self, run_id: str, path: str | Path) -> None:
        """Upload one file as an artifact of a run."""
        self.client.log_artifact(run_id, str(path))

    def log_text(self, run_id: str, text: str, name: str) -> None:
        """Save ``text`` as the artifact ``name`` of a run."""
        self.client.log_text(run_id, text, name)

    def log_dict(self, run_id: str, data: Any, name: str) -> None:
        """Save ``data`` as the JSON/YAML artifact ``name`` of a run."""
        self.client.log_dict(run_id, data, name)

    def log_figure(self, run_id: str, figure: Any, name: str) -> None:
        """Save a matplotlib figure as the artifact ``name`` of a run."""
        self.client.log_figure(run_id, figure, name)

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """End a run with ``status`` (``FINISHED``, ``FAILED``, ``KILLED``)."""
        self.client.set_terminated(run_id, status)

    def fail_run(self, run_id: str, reason: str, status: str = "FAILED", traceback_text: str | None = None) -> None:
        """End a run as FAILED (or KILLED) with its reason tag and optional traceback artifact.

        Args:
            run_id: the run.
            reason: one line.
            status: ``FAILED`` or ``KILLED``.
            traceback_text: saved as ``traceback.txt``.
        """
        with contextlib.suppress(Exception):
            self.set_tags(run_id, {FAILURE_TAG: reason})
            if traceback_text:
                self.client.log_text(run_id, traceback_text, "traceback.txt")
        self.client.set_terminated(run_id, status)

    # -- job runs and resume ----------------------------------------------------------------------------------
    def job_runs(self, status: str | None = None) -> list[Any]:
        """Every job run of the experiment (only those in ``status`` when given: the search filters them, ~6 times
        faster than reading every run of a store of 500 job runs of which 100 FINISHED).

        Args:
            status: ``FINISHED``, ``RUNNING``, ... or None for all.
        """
        flt = f"tags.`{RUN_TYPE}` = 'job'"
        return self.search_runs(flt if status is None else f"{flt} and attributes.status = '{status}'")

    def finished_job_ids(self) -> set[str]:
        """Job ids with a FINISHED run in the experiment."""
        return {r.data.tags.get(JOB_ID_TAG, "") for r in self.job_runs("FINISHED")} - {""}

    def job_attempts(self, job_id: str, parent_run_id: str | None = None) -> list[Any]:
        """Every run (any status) of job ``job_id``, under ``parent_run_id`` when given.

        Args:
            job_id: the job.
            parent_run_id: its grid run.
        """
        flt = f"tags.`{JOB_ID_TAG}` = '{job_id}'"
        if parent_run_id:
            flt += f" and {compat.child_filter(parent_run_id)}"
        return self.search_runs(flt)

    def running_job_runs(self) -> tuple[list[Any], dict[str, str]]:
        """``(stale, active)``: RUNNING job runs whose ``bench run`` is gone, and job id -> process tag of
        RUNNING job runs whose ``bench run`` process is still alive (another invocation is running them)."""
        stale, active = [], {}
        parents: dict[str, str | None] = {}
        for run in self.job_runs("RUNNING"):
            parent_id = compat.parent_run_id(run)
            if parent_id not in parents:
                tag = None
                if parent_id:
                    with contextlib.suppress(Exception):
                        tag = self.client.get_run(parent_id).data.tags.get(PROC_TAG)
                parents[parent_id] = tag
            proc = parents[parent_id]
            if process_alive(proc):
                active[run.data.tags.get(JOB_ID_TAG, "")] = proc or ""
            else:
                stale.append(run)
        return stale, active

    def mark_stale(self) -> tuple[int, dict[str, str]]:
        """Mark stale RUNNING job and grid runs KILLED; returns (how many job runs, active job ids -> process)."""
        stale, active = self.running_job_runs()
        for run in stale:
            self.fail_run(run.info.run_id, "killed: its bench run ended before the job did", "KILLED")
        for run in self.search_runs(f"tags.`{RUN_TYPE}` = 'grid' and attributes.status = 'RUNNING'"):
            if not process_alive(run.data.tags.get(PROC_TAG)):
                self.end_run(run.info.run_id, "KILLED")
        return len(stale), active

    def kill_open_children(self, run_id: str) -> int:
        """End the RUNNING child runs of ``run_id`` KILLED (a lost worker's); returns how many.

        Args:
            run_id: the parent run.
        """
        children = self.search_runs(f"{compat.child_filter(run_id)} and attributes.status = 'RUNNING'")
        for child in children:
            self.end_run(child.info.run_id, "KILLED")
        return len(children)

    # -- grid and job runs ------------------------------------------------------------------------------------
    def create_parent_run(
        self,
        command: str,
        params: Mapping[str, Any],
        run_name: str | None = None,
        run_type: str = "grid",
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Start the parent run of this invocation (``grid`` for ``bench run``, ``study`` for ``bench tune``),
        tagged with this process (so a later run can tell whether it is still alive).

        Args:
            command: the command line.
            params: the parsed options (plain text).
            run_name: display name.
            run_type: ``grid`` or ``study``.
            tags: more tags.
        """
        source = {"grid": "bench run", "study": "bench tune"}.get(run_type, "bench")
        all_tags = {PROC_TAG: process_tag(), **compat.source_tags(source), **(tags or {})}
        return self.create_run(run_type, run_name, all_tags, params={"command": command, **params})

    def create_job_run(
        self,
        spec: Any,
        parent_run_id: str | None,
        env_tags: Mapping[str, str],
        run_type: str = "job",
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Start the child run of one job, named ``s<seed> <algo> <env>``, with its tags and params (the worker
        logs the rest).

        Args:
            spec: the :class:`~lit_sb3.zoo.jobs.JobSpec`.
            parent_run_id: the grid (or trial) run (None: a top-level run).
            env_tags: :func:`~lit_sb3.zoo.tracking.host.run_environment_tags`.
            run_type: ``job`` (``trial_seed`` for a seed of a tuning trial).
            tags: more tags.
        """
        all_tags = {
            "lit_sb3.algo": spec.algo,
            "lit_sb3.env": spec.env_id,
            "lit_sb3.seed": str(spec.seed),
            JOB_ID_TAG: spec.job_id,
            "lit_sb3.config_hash": spec.config_hash,
            "impl": getattr(spec, "impl", "lit_sb3"),  # lit_sb3.zoo.reference.IMPL_TAG
            **env_tags,
            **(tags or {}),
        }
        name = job_run_name(spec.algo, spec.env_id, spec.seed)
        return self.create_run(run_type, name, all_tags, parent_run_id, params=job_params(spec))

    def end_parent_run(
        self, run_id: str, rows: Sequence[Mapping[str, Any]], status: str, markdown: str, job_ids: Iterable[str] = ()
    ) -> None:
        """Log the grid's summary metrics, attach the summary (``summary.json``, ``summary.md``), end the run.

        Summary metrics, so that the experiment's chart view shows the grid: for each algo x env, the mean final
        score over the FINISHED runs of the grid's jobs (``final_mean_reward/<algo> <env>``, those of earlier
        invocations included; MLflow's chart view shows them as one section) and how many runs it rests on
        (``final_n_runs/<algo> <env>``); and
        ``jobs/finished``, ``jobs/failed`` of this invocation.

        Args:
            run_id: the grid run.
            rows: one dict per job run by this invocation.
            status: final status.
            markdown: the summary table as Markdown.
            job_ids: every job of the grid (None: only ``rows``).
        """
        with contextlib.suppress(Exception):
            self.log_metrics(run_id, self._grid_metrics(rows, set(job_ids)))
        with contextlib.suppress(Exception):
            self.client.log_dict(run_id, {"jobs": list(rows)}, "summary.json")
            self.client.log_text(run_id, markdown, "summary.md")
        self.client.set_terminated(run_id, status)

    def _grid_metrics(self, rows: Sequence[Mapping[str, Any]], job_ids: set[str]) -> dict[str, float]:
        job_ids |= {str(r["job_id"]) for r in rows if r.get("job_id")}
        scores: dict[tuple[str, str], list[float]] = {}
        for run in self.job_runs("FINISHED"):
            tags, value = run.data.tags, run.data.metrics.get("final/mean_reward")
            if tags.get(JOB_ID_TAG) not in job_ids or value is None:
                continue
            impl = tags.get("impl", "lit_sb3")
            algo = tags.get("lit_sb3.algo", "?") + ("" if impl == "lit_sb3" else f" ({impl})")
            scores.setdefault((algo, tags.get("lit_sb3.env", "?")), []).append(value)
        metrics: dict[str, float] = {}
        for (algo, env), values in sorted(scores.items()):
            metrics[f"final_mean_reward/{algo} {env}"] = sum(values) / len(values)
            metrics[f"final_n_runs/{algo} {env}"] = float(len(values))
        metrics["jobs/finished"] = float(sum(r.get("status") == "FINISHED" for r in rows))
        metrics["jobs/failed"] = float(sum(r.get("status") not in ("FINISHED", "SKIPPED") for r in rows))
        return metrics


def sqlite_finished_job_ids(uri: str, experiment: str) -> set[str] | None:
    """Job ids with a FINISHED job run in ``experiment`` of a ``sqlite:///`` store, without MLflow's client
    (:func:`~lit_sb3.zoo.tracking.mlflow_compat.sqlite_finished_job_ids`); None when the client must answer
    (:meth:`Tracking.finished_job_ids`).

    Args:
        uri: tracking URI.
        experiment: experiment name.
    """
    return compat.sqlite_finished_job_ids(sqlite_path(uri), experiment, RUN_TYPE, JOB_ID_TAG)
