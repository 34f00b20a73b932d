"""Opening a tracking store: for a grid or study (:func:`open_tracking`), in a worker (:func:`connect`), for
reading (:func:`open_reader`). Each fails fast with a one-line :class:`~lit_sb3.zoo.errors.BenchError`."""

from __future__ import annotations

import logging
import os

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tracking.host import fail_fast, probe_database, sqlite_path
from lit_sb3.zoo.tracking.names import default_artifact_location, normalize_uri
from lit_sb3.zoo.tracking.store import Tracking, TrackingTarget, first_line

__all__ = ["connect", "open_reader", "open_tracking", "quiet_mlflow", "warm_imports"]


def warm_imports() -> None:
    """Import MLflow's client and SQL store and configure its ORM mappers (for a forkserver that forks the
    job processes: each then starts with them ready)."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    import mlflow.tracking  # noqa: F401
    from sqlalchemy.orm import configure_mappers

    configure_mappers()


def quiet_mlflow() -> None:
    """MLflow's and alembic's INFO chatter off."""
    for name in ("alembic", "mlflow.store.db.utils", "mlflow.tracking.fluent", "mlflow.store.sqlalchemy_store"):
        logging.getLogger(name).setLevel(logging.WARNING)


def connect(target: TrackingTarget) -> Tracking:
    """A :class:`Tracking` on an already resolved target (no query is made; the worker side of a job).

    Args:
        target: where to log (from :func:`open_tracking` in the parent process).
    """
    from mlflow import MlflowClient

    quiet_mlflow()
    return Tracking(MlflowClient(tracking_uri=target.uri), target)


def open_reader(uri: str) -> Tracking:
    """A :class:`Tracking` for reading ``uri`` after checking it can be read (a missing sqlite file is not
    created), else a one-line :class:`BenchError`; select the experiment with :meth:`Tracking.use_experiment`.

    Args:
        uri: tracking URI.
    """
    from mlflow import MlflowClient

    quiet_mlflow()
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise BenchError(f"cannot read tracking URI {uri!r}: no database file {str(path)!r}")
    if (why := probe_database(uri, create=False)) is not None:  # seconds, where MLflow retries for minutes
        raise BenchError(f"cannot read tracking URI {uri!r}: {why}")
    client = MlflowClient(tracking_uri=uri)
    try:
        with fail_fast():
            client.search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - any failure to read is the user's URI
        raise BenchError(f"cannot read tracking URI {uri!r}: {first_line(exc)[:200]}") from exc
    return Tracking(client, TrackingTarget(uri, ""))


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
    quiet_mlflow()
    norm = normalize_uri(uri)
    path = sqlite_path(norm)
    location = artifact_location if artifact_location is not None else default_artifact_location(norm, experiment)
    made_by_mlflow = False
    if path is not None:
        if not path.parent.is_dir():
            raise BenchError(f"cannot use tracking URI {uri!r}: folder {str(path.parent)!r} does not exist")
        if not create and not path.exists():
            return Tracking(None, TrackingTarget(norm, experiment, location, None))
        if not path.exists():  # a new store: a copy of the migrated template, else MLflow migrates (seconds)
            from lit_sb3.zoo.tracking.template import restore_template

            made_by_mlflow = not restore_template(path)
    elif norm.startswith(("file:", "/")) or "://" not in norm:
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
            raise BenchError(
                f"tracking URI {uri!r} is a file store, which MLflow 3 refuses; use sqlite:///mlflow.db (default) "
                "or an http:// server"
            )
    if (why := probe_database(norm, create=create)) is not None:  # seconds, where MLflow retries for minutes
        raise BenchError(f"cannot reach tracking URI {uri!r}: {why}")
    from mlflow import MlflowClient

    try:
        with fail_fast():
            client = MlflowClient(tracking_uri=norm)
            exp = client.get_experiment_by_name(experiment)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the store is the user's URI
        raise BenchError(f"cannot reach tracking URI {uri!r}: {first_line(exc)}") from exc
    if made_by_mlflow and path is not None:
        from lit_sb3.zoo.tracking.template import save_template

        save_template(path)  # migrated, nothing of the suite in it yet: the next new store starts from it
    exp_id = exp.experiment_id if exp is not None and exp.lifecycle_stage != "deleted" else None
    if exp is not None:
        location = exp.artifact_location
    tracking = Tracking(client, TrackingTarget(norm, experiment, location, exp_id))
    if create:
        tracking.ensure_experiment()
    return tracking
