"""A migrated empty MLflow sqlite store, kept once per MLflow version and copied into every new store.

MLflow creates a sqlite store by running its whole chain of schema migrations: ~3 s on an idle 2-core machine and
15 s on a loaded one (measured: ``MlflowClient(...).get_experiment_by_name`` on a new file, load average 9), paid by
the first ``bench run`` or ``bench tune`` in every new folder before any job starts. The first store this user
creates with a given MLflow (and SQLAlchemy/alembic) version is copied, right after MLflow made it and before the
suite writes anything, to ``$LIT_SB3_CACHE_DIR/mlflow-templates/`` (beside the plan memo; off when that variable is
set empty); later new stores start as a copy of it. The copy's ``Default`` experiment (id 0, which MLflow points at
``<working folder>/mlruns/0`` when it creates a store) is pointed at the new working folder's, as MLflow would
have (:func:`lit_sb3.zoo.tracking.mlflow_compat.point_default_experiment`: no public API does it). A template is
bounded in size, and it is copied only when it is verified: this user's private file in a private folder, its sha256
sealed (MAC with the user's cache key, :func:`lit_sb3.zoo.plan_cache.sealed_write`) when it was kept, and, opened by
MLflow's client (which checks the schema revision), an empty store (no run, only the ``Default`` experiment).
Anything else is ignored: MLflow creates the store (and the template is kept again). Checking through the client
costs ~0.15 s on a loaded core where a query of the tables took ~0.04 s (MLflow's import is paid by the store's
opening anyway), once per new store.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from importlib import metadata
from pathlib import Path

from lit_sb3.zoo.plan_cache import _read_private, cache_dir, sealed_read, sealed_write
from lit_sb3.zoo.tracking.mlflow_compat import DEFAULT_EXPERIMENT_ID, point_default_experiment

__all__ = ["restore_template", "save_template", "template_path", "verified_template"]

_MAX_TEMPLATE_BYTES = 16 << 20  # an empty migrated store is ~1 MB


def template_path() -> Path | None:
    """Where the template of the installed MLflow version lives (None: the cache is off or MLflow is missing)."""
    plans = cache_dir()
    if plans is None:
        return None
    try:
        versions = "-".join(metadata.version(d) for d in ("mlflow", "sqlalchemy", "alembic"))
    except metadata.PackageNotFoundError:
        return None
    return plans.parent / "mlflow-templates" / f"mlflow-store-{versions}.db"


def restore_template(path: Path) -> bool:
    """Create the new store ``path`` as a copy of the template; False when there is none (MLflow creates it).

    Args:
        path: the sqlite file to create (must not exist).
    """
    template = template_path()
    if template is None or path.exists():
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        data = verified_template(template)
        if data is None:
            return False
        tmp.write_bytes(data)
        if not _is_empty_store(tmp):
            raise sqlite3.DatabaseError("not an empty MLflow store")
        point_default_experiment(tmp, str(Path.cwd().resolve() / "mlruns" / "0"))
        os.replace(tmp, path)
        return True
    except (OSError, sqlite3.Error):
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False


def verified_template(template: Path) -> bytes | None:
    """The template's bytes when they are the ones sealed by :func:`save_template` (a private file, its sha256 under
    this user's MAC), else None.

    Args:
        template: :func:`template_path`.
    """
    seal = sealed_read(_seal_path(template), 4096)
    data = _read_private(template, _MAX_TEMPLATE_BYTES)
    if not isinstance(seal, dict) or data is None or seal.get("sha256") != hashlib.sha256(data).hexdigest():
        return None
    return data


def _seal_path(template: Path) -> Path:
    return template.with_name(template.name + ".seal")


def _is_empty_store(path: Path) -> bool:
    """Whether MLflow's client opens ``path`` as a store of its schema revision holding nothing: no run (deleted
    ones included), only the ``Default`` experiment.

    Args:
        path: the sqlite file.
    """
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    try:
        client = MlflowClient(tracking_uri=f"sqlite:///{path.resolve()}")
        experiments = client.search_experiments(view_type=ViewType.ALL, max_results=2)
        ids = [e.experiment_id for e in experiments]
        runs = client.search_runs(ids, run_view_type=ViewType.ALL, max_results=1) if ids else []
    except Exception:  # noqa: BLE001 - another schema revision, not a database: MLflow makes the store
        return False
    return [(e.experiment_id, e.name) for e in experiments] == [(DEFAULT_EXPERIMENT_ID, "Default")] and not runs


def save_template(path: Path) -> None:
    """Keep the store MLflow just created at ``path`` (migrated, nothing of the suite in it yet) as the template,
    unless there is one; an unwritable cache keeps nothing.

    Args:
        path: the new sqlite store.
    """
    template = template_path()
    if template is None or verified_template(template) is not None:
        return  # kept already (one that does not verify is replaced)
    from lit_sb3.zoo.plan_cache import private_folder

    if not private_folder(template.parent, create=True):
        return
    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        with contextlib.closing(sqlite3.connect(path)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
            src.backup(dst)  # a consistent copy even while MLflow's engine holds the file open
        os.chmod(tmp, 0o600)
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        os.replace(tmp, template)
        sealed_write(_seal_path(template), {"sha256": digest})
    except (OSError, sqlite3.Error):
        with contextlib.suppress(OSError):
            tmp.unlink()
