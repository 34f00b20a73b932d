"""Links into the MLflow UI that open MLflow 3's model-training view, and the line that says how to look at results.

MLflow 3's UI has two workflows, GenAI (its default) and machine learning ("model training"); the experiment page
reads the ``workflowType`` URL parameter (``genai`` or ``machine_learning``, MLflow's JS bundle, the
``WorkflowType`` context), and every link made here carries ``workflowType=machine_learning``. The grid's runs
table opens with the final score and the evaluation metrics as columns and the best score first: MLflow keeps a
runs-table state that a link can name (the experiment tag ``mlflow.sharedViewState.<key>``, opened with the URL
parameter ``viewStateShareKey=<key>``, as its "share" button does); :func:`training_view_state` is that state, and
:meth:`~lit_sb3.zoo.tracking.store.Tracking.ensure_experiment` puts it on every experiment the suite creates.
"""

from __future__ import annotations

import json
import shlex

__all__ = [
    "TRAINING_VIEW",
    "VIEW_STATE_KEY",
    "experiment_url",
    "results_hint",
    "study_hint",
    "run_url",
    "training_view_state",
    "ui_base_url",
    "ui_command",
]

TRAINING_VIEW = "workflowType=machine_learning"
"""The URL parameter that opens MLflow 3's model-training view (not the GenAI one)."""

VIEW_STATE_KEY = "lit-sb3-scores"
"""Name of the runs-table state the suite's experiment links open."""

VIEW_NAME = "lit_sb3 scores"
"""Its name in the runs table's "Views" menu."""

DEFAULT_UI = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves by default."""

#: the metrics shown as columns of the runs table by default, in this order
SCORE_COLUMNS = ("final/mean_reward", "final/std_reward", "eval/mean_reward", "eval/std_reward", "time/fps")


def training_view_state(created_ms: int | None = None) -> str:
    """The runs-table view of the links, as MLflow 3.17's saved views store it (the envelope ``{"name",
    "createdAt", "updatedAt", "state"}`` with the state as JSON text): score and evaluation metrics as columns,
    the best final score first. It also appears by name in the runs table's "Views" menu.

    Args:
        created_ms: creation time in ms since the epoch (default now).
    """
    import time

    columns = [f"metrics.`{key}`" for key in SCORE_COLUMNS]
    state = {
        "selectedColumns": ["attributes.`Source`", *columns, "tags.`lit_sb3.trial_state`"],
        "orderByKey": columns[0],
        "orderByAsc": False,
    }
    created = int(time.time() * 1000) if created_ms is None else int(created_ms)
    return json.dumps({"name": VIEW_NAME, "createdAt": created, "updatedAt": created, "state": json.dumps(state)})


def ui_base_url(uri: str) -> str:
    """The UI's address for tracking URI ``uri``: the server itself for ``http(s)://``, else ``mlflow ui``'s.

    Args:
        uri: tracking URI.
    """
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else DEFAULT_UI


def ui_command(uri: str) -> str | None:
    """The command that serves ``uri`` in the UI (None for a server, which is the UI already).

    Args:
        uri: tracking URI as the user gave it (a relative sqlite path stays relative).
    """
    if uri.startswith(("http://", "https://")):
        return None
    return f"mlflow ui --backend-store-uri {shlex.quote(uri)}"


def experiment_url(base: str, experiment_id: str, *, scores_view: bool = True) -> str:
    """The experiment's runs in the model-training view.

    Args:
        base: the UI's address (:func:`ui_base_url`).
        experiment_id: the experiment.
        scores_view: open the runs table with the score columns (:func:`training_view_state`).
    """
    view = f"&viewStateShareKey={VIEW_STATE_KEY}" if scores_view else ""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{TRAINING_VIEW}{view}"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    """One run's page in the model-training view.

    Args:
        base: the UI's address (:func:`ui_base_url`).
        experiment_id: its experiment.
        run_id: the run.
    """
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{TRAINING_VIEW}"


def results_hint(uri: str, experiment: str, experiment_id: str | None, *, grid_run_id: str | None = None) -> str:
    """One line saying how to look at the results: the report command and the MLflow UI with its link.

    Args:
        uri: tracking URI as the user gave it.
        experiment: experiment name.
        experiment_id: its id (None: not created; no link).
        grid_run_id: the grid's run (its link is added).
    """
    report = f"bench report --experiment {shlex.quote(experiment)}"
    if uri != "sqlite:///mlflow.db":
        report += f" --tracking-uri {shlex.quote(uri)}"
    base = ui_base_url(uri)
    serve = ui_command(uri)
    where = "" if experiment_id is None else f"open {experiment_url(base, experiment_id)}"
    if grid_run_id is not None and experiment_id is not None:
        where += f" (this grid: {run_url(base, experiment_id, grid_run_id)})"
    ui = f"{serve}, then {where}" if serve and where else (serve or where)
    return f"results: {report} | {ui}" if ui else f"results: {report}"


def study_hint(uri: str, experiment_id: str | None, study_run_id: str) -> str:
    """One line saying where to look at a study's trials in MLflow's training view.

    Args:
        uri: tracking URI.
        experiment_id: the study's experiment.
        study_run_id: the study's run (its trials are its children).
    """
    base, serve = ui_base_url(uri), ui_command(uri)
    where = f"open {experiment_url(base, experiment_id or '0')} (this study: {run_url(base, experiment_id or '0', study_run_id)})"
    return f"trials in MLflow: {serve}, then {where}" if serve else f"trials in MLflow: {where}"
