"""The one place where the suite relies on MLflow beyond its public client API.

Everything else goes through ``MlflowClient`` (create, search with filter strings and pages, tag, log, end, rename).
What is here has a reason the public API cannot meet, one commented function per use:

- tags MLflow's UI reads (nesting, source, note, the experiment's kind and saved view): the client has no argument
  for them, MLflow's own fluent API sets the same tags;
- a read-only SQL query of a ``sqlite:///`` store's tables, the no-op rerun's fast path: it answers "which jobs
  already finished?" without importing MLflow (measured on a store of 500 job runs, a 100-job grid: 0.2 s of CPU
  for the whole process against 3.1-3.8 s through ``MlflowClient``, whose import and schema check dominate), and only
  for the schema revision it was checked against (:data:`SCHEMA_REVISION`); any other store is left to the client;
- the artifact location of a copied store's ``Default`` experiment, which no public API can change.

``tests/test_mlflow_compat.py`` fails when the installed MLflow changes any of it (tag names against
``mlflow.utils.mlflow_tags`` and MLflow's UI bundle, the schema revision and the columns read against a store MLflow
migrates) and when a module outside this one runs SQL against MLflow's tables. mlflow is not imported here.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = [
    "DEFAULT_EXPERIMENT_ID",
    "EXPERIMENT_KIND_TAG",
    "NOTE_TAG",
    "PARENT_RUN_TAG",
    "SCHEMA_COLUMNS",
    "SCHEMA_REVISION",
    "SHARED_VIEW_TAG_PREFIX",
    "SOURCE_NAME_TAG",
    "child_filter",
    "experiment_kind_tags",
    "note_tags",
    "parent_run_id",
    "parent_tags",
    "point_default_experiment",
    "shared_view_tags",
    "source_tags",
    "sqlite_finished_job_ids",
]

# ---------------------------------------------------------------------------------------------------------
# tags MLflow's UI reads
# ---------------------------------------------------------------------------------------------------------
PARENT_RUN_TAG = "mlflow.parentRunId"
"""``mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID``: the UI nests a run under the run it names."""

SOURCE_NAME_TAG = "mlflow.source.name"
"""``MLFLOW_SOURCE_NAME``: the runs table's "Source" column."""

NOTE_TAG = "mlflow.note.content"
"""``MLFLOW_RUN_NOTE``: the run page's description."""

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
"""MLflow 3's experiment kind (its UI bundle reads it; no constant in ``mlflow_tags``)."""

SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."
"""An experiment tag ``<prefix><key>`` holds a saved runs-table view (its UI bundle reads it)."""


def parent_tags(parent_run_id: str | None) -> dict[str, str]:
    """The tags that make a new run a child of ``parent_run_id`` (none for a top-level run).

    ``MlflowClient.create_run`` has no parent argument; ``mlflow.start_run(parent_run_id=...)`` sets this tag, and
    the UI and ``search_runs`` know a child by it.

    Args:
        parent_run_id: the parent run, or None.
    """
    return {PARENT_RUN_TAG: parent_run_id} if parent_run_id else {}


def parent_run_id(run: Any) -> str | None:
    """The parent of ``run`` (MLflow's ``Run``), None for a top-level run: ``RunInfo`` has no parent field, the
    tag set by :func:`parent_tags` is where MLflow keeps it.

    Args:
        run: the run.
    """
    return run.data.tags.get(PARENT_RUN_TAG) or None


def child_filter(parent_run_id: str) -> str:
    """The ``search_runs`` filter clause selecting the children of ``parent_run_id`` (the tag of
    :func:`parent_tags`).

    Args:
        parent_run_id: the parent run.
    """
    return f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}'"


def source_tags(source: str) -> dict[str, str]:
    """The tags that fill the runs table's "Source" column with ``source`` (e.g. ``bench run``); MLflow sets it
    itself only for runs started by its fluent API, from ``sys.argv[0]``.

    Args:
        source: what started the run.
    """
    return {SOURCE_NAME_TAG: source}


def note_tags(text: str) -> dict[str, str]:
    """The tags that set a run's description (the run page's "Description"; no client method writes it).

    Args:
        text: the note (Markdown).
    """
    return {NOTE_TAG: text}


def experiment_kind_tags() -> dict[str, str]:
    """The experiment tags that make MLflow 3's UI open the experiment in its "Model training" view (runs,
    metrics) rather than the GenAI one (traces); ``create_experiment`` has no kind argument."""
    return {EXPERIMENT_KIND_TAG: "custom_model_development"}


def shared_view_tags(key: str, state: str) -> dict[str, str]:
    """The experiment tags that save a runs-table view under ``key``, listed in the UI's "Views" menu (the UI
    saves views as such tags; no client method does).

    Args:
        key: the view's key.
        state: the view as the UI stores it (:func:`lit_sb3.zoo.tracking.links.training_view_state`).
    """
    return {f"{SHARED_VIEW_TAG_PREFIX}{key}": state}


# ---------------------------------------------------------------------------------------------------------
# the sqlite store's tables
# ---------------------------------------------------------------------------------------------------------
SCHEMA_REVISION = "dc11669786a5"
"""The alembic revision of MLflow's SQL schema (MLflow 3.17) the queries below were checked against."""

SCHEMA_COLUMNS: dict[str, tuple[str, ...]] = {
    "alembic_version": ("version_num",),
    "experiments": ("experiment_id", "name", "lifecycle_stage", "artifact_location"),
    "runs": ("run_uuid", "experiment_id", "lifecycle_stage", "status"),
    "tags": ("run_uuid", "key", "value"),
}
"""The tables and columns read or written here."""


DEFAULT_EXPERIMENT_ID = "0"
"""The id MLflow gives the ``Default`` experiment of a new store (``mlflow.tracking.default_experiment``)."""


def _read_only(path: Path, timeout_s: float) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=timeout_s)


def _at_checked_revision(db: sqlite3.Connection) -> bool:
    rows = db.execute("SELECT version_num FROM alembic_version").fetchall()
    return rows == [(SCHEMA_REVISION,)]


def sqlite_finished_job_ids(path: Path | None, experiment: str, run_type_tag: str, job_id_tag: str) -> set[str] | None:
    """Job ids with a FINISHED job run in ``experiment`` of the sqlite store ``path``, read with one read-only query
    instead of MLflow's client: the answer of ``search_runs`` (active experiment and runs only) without importing
    MLflow (see the module docstring for the measured cost).

    Returns None when MLflow's client must answer: not a sqlite store, a schema revision other than
    :data:`SCHEMA_REVISION`, a file sqlite cannot read or one locked for longer than a few seconds. A missing
    database file has no finished job.

    Args:
        path: the database file of a ``sqlite:///`` URI (None: another kind of store).
        experiment: experiment name.
        run_type_tag: the tag whose value ``job`` marks a job run.
        job_id_tag: the tag holding the job id.
    """
    if path is None:
        return None
    if not path.is_file():
        return set()
    query = (
        "SELECT DISTINCT j.value FROM experiments e JOIN runs r ON r.experiment_id = e.experiment_id "
        "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = ? AND t.value = 'job' "
        "JOIN tags j ON j.run_uuid = r.run_uuid AND j.key = ? "
        "WHERE e.name = ? AND e.lifecycle_stage = 'active' AND r.lifecycle_stage = 'active' AND r.status = 'FINISHED'"
    )
    try:
        with contextlib.closing(_read_only(path, 5.0)) as db:
            if not _at_checked_revision(db):
                return None
            rows = db.execute(query, (run_type_tag, job_id_tag, experiment)).fetchall()
    except sqlite3.Error:
        return None
    return {str(value) for (value,) in rows if value}


def point_default_experiment(path: Path, artifact_location: str) -> None:
    """Point the ``Default`` experiment (id 0) of the sqlite store ``path`` at ``artifact_location``: a store
    copied from the template keeps the location of the folder the template was made in, and no public API changes
    an experiment's artifact location. Raises ``sqlite3.Error`` on another schema revision.

    Args:
        path: a store file no MLflow client has open yet.
        artifact_location: where MLflow would have put it (``<working folder>/mlruns/0``).
    """
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        if not _at_checked_revision(db):
            raise sqlite3.DatabaseError(f"not MLflow's schema revision {SCHEMA_REVISION}")
        db.execute(
            "UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
            (artifact_location, int(DEFAULT_EXPERIMENT_ID)),
        )
