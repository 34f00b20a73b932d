"""What :mod:`lit_sb3.zoo.tracking.mlflow_compat` relies on still holds for the installed MLflow (tag names, the UI's
tags, the schema revision and the columns its SQL reads), and no other module of ``lit_sb3`` runs SQL against
MLflow's tables. Real MLflow sqlite stores throughout."""

from __future__ import annotations

import ast
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from lit_sb3.zoo.tracking import mlflow_compat as compat
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "lit_sb3" / "zoo" / "tracking" / "mlflow_compat.py"


def _ui_bundle() -> str:
    """The JavaScript of MLflow's UI as installed (the ``mlflow ui`` the suite's links open)."""
    import mlflow

    folder = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    files = sorted(folder.glob("*.js"))
    assert files, f"no UI bundle in {folder}"
    return "\n".join(f.read_text(errors="replace") for f in files)


def test_tag_names_are_mlflows() -> None:
    """The tags set for MLflow's UI are the names MLflow itself uses: its constants where it has them, else the
    names its UI bundle reads (with the experiment kind's value)."""
    from mlflow.utils import mlflow_tags

    assert compat.PARENT_RUN_TAG == mlflow_tags.MLFLOW_PARENT_RUN_ID
    assert compat.SOURCE_NAME_TAG == mlflow_tags.MLFLOW_SOURCE_NAME
    assert compat.NOTE_TAG == mlflow_tags.MLFLOW_RUN_NOTE
    bundle = _ui_bundle()
    assert compat.EXPERIMENT_KIND_TAG in bundle
    assert compat.experiment_kind_tags()[compat.EXPERIMENT_KIND_TAG] in bundle
    assert compat.SHARED_VIEW_TAG_PREFIX.rstrip(".") in bundle


def test_parent_tag_is_what_mlflow_nests_by(tmp_path: Path, mlflow_template: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A run started nested by MLflow's own fluent API is read as a child by :func:`parent_run_id` and found by
    :func:`child_filter`; one created by the client with :func:`parent_tags` is found the same way."""
    import mlflow

    uri = _store(tmp_path, mlflow_template)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = _client(uri)
    exp = client.create_experiment("nest")
    from mlflow.tracking._tracking_service import utils as tracking_utils

    # the fluent API's own URI: an earlier test in this process may have set it (it wins over the env); restored
    # exactly after (None: unset), so no later test writes here
    before = tracking_utils._tracking_uri
    mlflow.set_tracking_uri(uri)
    try:
        with (
            mlflow.start_run(experiment_id=exp) as parent,
            mlflow.start_run(experiment_id=exp, nested=True) as child,
        ):
            pass
    finally:
        mlflow.set_tracking_uri(before)
    parent_id = parent.info.run_id
    assert compat.parent_run_id(client.get_run(child.info.run_id)) == parent_id
    assert compat.parent_run_id(client.get_run(parent_id)) is None
    ours = client.create_run(exp, tags=compat.parent_tags(parent_id)).info.run_id
    found = client.search_runs([exp], filter_string=compat.child_filter(parent_id))
    assert {r.info.run_id for r in found} == {child.info.run_id, ours}
    assert compat.parent_tags(None) == {}


def test_schema_is_the_checked_one(mlflow_template: Path) -> None:
    """The installed MLflow migrates a new store to :data:`SCHEMA_REVISION`, with every table and column the SQL
    reads or writes (a new MLflow: check the queries against its schema, then update the revision)."""
    with sqlite3.connect(mlflow_template) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(compat.SCHEMA_REVISION,)]
        for table, columns in compat.SCHEMA_COLUMNS.items():
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            assert set(columns) <= have, f"{table}: {sorted(set(columns) - have)} gone"


def test_fast_path_leaves_another_schema_to_mlflow(tmp_path: Path, mlflow_template: Path) -> None:
    """The finished-jobs query answers at the checked revision only; any other is left to MLflow's client (None)."""
    from lit_sb3.zoo.tracking import open_tracking, sqlite_finished_job_ids

    uri = _store(tmp_path, mlflow_template)
    store = open_tracking(uri, "e")
    store.end_run(store.create_run("job", "s0 ppo a", {"lit_sb3.job_id": "a"}))
    assert sqlite_finished_job_ids(uri, "e") == {"a"} == store.finished_job_ids()
    other = tmp_path / "other.db"
    shutil.copy(tmp_path / "mlflow.db", other)
    with sqlite3.connect(other) as db:
        db.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")  # a store of another MLflow
    assert sqlite_finished_job_ids(f"sqlite:///{other}", "e") is None


def test_point_default_experiment(tmp_path: Path, mlflow_template: Path) -> None:
    """The copied store's Default experiment points where asked, as MLflow's client reads it; another revision is
    refused and left unchanged."""
    from mlflow.tracking.default_experiment import DEFAULT_EXPERIMENT_ID

    assert compat.DEFAULT_EXPERIMENT_ID == DEFAULT_EXPERIMENT_ID
    path = tmp_path / "copy.db"
    shutil.copy(mlflow_template, path)
    compat.point_default_experiment(path, str(tmp_path / "mlruns" / "0"))
    default = _client(f"sqlite:///{path}").get_experiment(DEFAULT_EXPERIMENT_ID)
    assert default.name == "Default" and default.artifact_location == str(tmp_path / "mlruns" / "0")
    other = tmp_path / "other.db"
    shutil.copy(mlflow_template, other)
    with sqlite3.connect(other) as db:
        db.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
        before = db.execute("SELECT artifact_location FROM experiments").fetchall()
    with pytest.raises(sqlite3.DatabaseError, match="schema revision"):
        compat.point_default_experiment(other, "/elsewhere")
    with sqlite3.connect(other) as db:
        assert db.execute("SELECT artifact_location FROM experiments").fetchall() == before


def _sql_statements(tables: list[str]) -> re.Pattern[str]:
    """SQL that reads or writes one of ``tables`` (a statement's shape, so that prose such as "update runs" in a
    docstring is not taken for it)."""
    t = r"[`\"\[]?(?:" + "|".join(map(re.escape, tables)) + r")\b"
    shapes = (
        r"\bselect\b[^;]*?\b(?:from|join)\s+" + t,
        r"\binsert\s+(?:or\s+\w+\s+)?into\s+" + t,
        r"\bupdate\s+" + t + r"\s+set\b",
        r"\bdelete\s+from\s+" + t,
        r"\b(?:create|alter|drop)\s+(?:table|index|trigger|view)\b[^;]*?" + t,
        r"\bpragma\s+\w+\s*\(\s*" + t,
    )
    return re.compile("|".join(shapes), re.IGNORECASE | re.DOTALL)


def _sql_lines(path: Path, pattern: re.Pattern[str]) -> list[int]:
    """Lines of ``path`` holding a string (f-strings included, their fields as ``{}``) that matches ``pattern``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if pattern.search(text):
            lines.append(node.lineno)
    return lines


def test_no_sql_against_mlflow_tables_outside_compat(mlflow_template: Path) -> None:
    """No module of ``lit_sb3`` but ``mlflow_compat.py`` holds SQL naming a table of MLflow's store (every table the
    installed MLflow creates)."""
    with sqlite3.connect(mlflow_template) as db:
        tables = sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    assert {"runs", "tags", "experiments", "metrics", "params", "latest_metrics", "alembic_version"} <= set(tables)
    pattern = _sql_statements(tables)
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "lit_sb3").rglob("*.py"))
        if path != COMPAT
        for line in _sql_lines(path, pattern)
    ]
    assert offenders == [], "SQL against MLflow's tables outside mlflow_compat.py: " + ", ".join(offenders)
    assert len(_sql_lines(COMPAT, pattern)) >= 3  # the check sees real SQL: the compat module's own queries
    assert not pattern.search("Collect/update cycles: each update runs on a batch from the replay buffer")
