"""MLflow helpers shared by the suite's tests: a fresh sqlite store per test (copied from a migrated template,
see the ``mlflow_template`` fixture in conftest.py) and run queries."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def copy_store(folder: Path, template: Path) -> str:
    """Copy the migrated template database into ``folder``; returns its ``sqlite:///`` URI.

    Args:
        folder: the test's folder.
        template: the ``mlflow_template`` fixture.
    """
    shutil.copy(template, folder / "mlflow.db")
    return f"sqlite:///{folder / 'mlflow.db'}"


def client(uri: str) -> Any:
    """An ``MlflowClient`` of ``uri``."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs(uri: str, experiment: str, run_type: str | None = "job", *, must_exist: bool = False) -> list[Any]:
    """The runs of ``experiment`` tagged ``lit_sb3.run_type = run_type`` (None: all runs).

    Args:
        uri: tracking URI.
        experiment: experiment name; a missing one gives [] (or fails the test with ``must_exist``).
        run_type: ``job``, ``grid``, ``trial``, ... or None.
        must_exist: assert that the experiment exists.
    """
    mlflow_client = client(uri)
    exp = mlflow_client.get_experiment_by_name(experiment)
    assert exp is not None or not must_exist, f"no experiment {experiment}"
    if exp is None:
        return []
    flt = f"tags.`lit_sb3.run_type` = '{run_type}'" if run_type else ""
    return list(mlflow_client.search_runs([exp.experiment_id], filter_string=flt, max_results=1000))
