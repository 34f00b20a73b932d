"""The tracking gateway: the only module that imports mlflow, params that read well, grid summary metrics, and
``bench report`` reading resumed grids (real MLflow sqlite stores, real jobs)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs

ROOT = Path(__file__).resolve().parent.parent
TRACKING = ROOT / "lit_sb3" / "zoo" / "tracking"


def _imports_mlflow(tree: ast.AST) -> list[int]:
    """Lines that import mlflow (``import mlflow...``, ``from mlflow... import``, Lightning's MLflow logger,
    ``importlib.import_module("mlflow...")``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "mlflow" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] == "mlflow" or node.module.endswith("loggers.mlflow"):
                lines.append(node.lineno)
            elif any(a.name == "MLFlowLogger" for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and str(arg.value).split(".")[0] == "mlflow":
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("mlflow."):
            if node.value.count(" ") == 0 and node.value.split(".")[1:2] in (["store"], ["tracking"], ["entities"]):
                lines.append(node.lineno)  # a module path in a preload list
    return lines


def test_only_the_tracking_package_imports_mlflow() -> None:
    offenders = []
    for path in sorted((ROOT / "lit_sb3").rglob("*.py")):
        if TRACKING in path.parents:
            continue
        for line in _imports_mlflow(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == [], "mlflow imported outside lit_sb3/zoo/tracking: " + ", ".join(offenders)
    assert _imports_mlflow(ast.parse((TRACKING / "store.py").read_text()))  # the check sees real imports


def test_readable_param_text() -> None:
    import torch

    from lit_sb3.core.schedules import LinearSchedule
    from lit_sb3.zoo.tracking import flatten_params, readable

    assert readable((1, "step")) == readable({"__tuple__": [1, "step"]}) == "(1, 'step')"
    assert readable({"__class__": "lit_sb3.buffers.replay.ReplayBuffer"}) == "ReplayBuffer"
    assert readable(torch.nn.ReLU) == "ReLU"
    assert [readable(v) for v in (None, False, True, 3, 0.5, float("inf"))] == [
        "None",
        "False",
        "True",
        "3",
        "0.5",
        "inf",
    ]
    assert readable(LinearSchedule(7.3e-4, 0.0, 1.0)) == "lin_0.00073"
    assert readable(["a", (64,)]) == "['a', (64,)]"
    flat = flatten_params({"policy_kwargs": {"net_arch": [64, 64], "activation_fn": torch.nn.Tanh}, "env_kwargs": {}})
    assert flat == {"policy_kwargs.net_arch": "[64, 64]", "policy_kwargs.activation_fn": "Tanh", "env_kwargs": "{}"}


@pytest.fixture(scope="module")
def dqn_grid(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> str:
    """One DQN job (tuple train_freq, a replay buffer class) through ``bench run``."""
    folder = tmp_path_factory.mktemp("dqn")
    uri = _store(folder, mlflow_template)
    argv = ["run", "--algos", "dqn", "--envs", "CartPole-v1", "--seeds", "1", "--jobs", "1", "--n-timesteps", "256",
            "--eval-freq", "128", "--eval-episodes", "1", "--tracking-uri", uri, "--experiment", "readable",
            "--hyperparams", "learning_starts=64", "train_freq=(4, 'step')",
            "policy_kwargs=dict(net_arch=[32], activation_fn=nn.Tanh)"]  # fmt: skip
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        assert main(argv) == 0
    finally:
        os.chdir(cwd)
    return uri


def test_job_run_params_read_well(dqn_grid: str) -> None:
    (run,) = _runs(dqn_grid, "readable")
    params = run.data.params
    assert run.info.run_name == "s0 dqn CartPole-v1"
    for key, value in params.items():
        assert "__tuple__" not in value and "__class__" not in value and "__schedule__" not in value, (key, value)
        assert value not in ("null", "true", "false"), (key, value)  # Python spelling only: None, True, False
        assert not key.startswith(("algo_kwargs.", "model.")), key  # one namespace
    assert params["train_freq"] == "(4, 'step')"
    assert params["replay_buffer_class"] == "ReplayBuffer"  # the model's resolved default, added by the worker
    assert params["policy_kwargs.activation_fn"] == "Tanh" and params["policy_kwargs.net_arch"] == "[32]"
    assert params["learning_starts"] == "64" and params["gamma"] == "0.99"  # given and default, side by side
    assert params["algo"] == "dqn" and params["seed"] == "0" and params["normalize"] == "False"
    assert params["frame_stack"] == "None"
    # no hyperparameter twice: the last name part is unique except across different nested dicts
    leaves = [k for k in params if "." not in k]
    assert len(leaves) == len(set(leaves))
    arts = {a.path for a in _client(dqn_grid).list_artifacts(run.info.run_id)}
    assert {"config.json", "config.yml"} <= arts  # the full resolved config stays an artifact


def test_grid_run_logs_summary_metrics(dqn_grid: str) -> None:
    (parent,) = _runs(dqn_grid, "readable", "grid")
    (job,) = _runs(dqn_grid, "readable")
    metrics = parent.data.metrics
    assert metrics["final_mean_reward/dqn CartPole-v1"] == pytest.approx(job.data.metrics["final/mean_reward"])
    assert metrics["final_n_runs/dqn CartPole-v1"] == 1
    assert metrics["jobs/finished"] == 1 and metrics["jobs/failed"] == 0
    assert parent.data.params["command"].startswith("bench run") and parent.data.params["seeds"] == "1"


def test_report_skips_superseded_attempts(in_tmp_path: Path, mlflow_template: Path) -> None:
    """After a resumed grid, KILLED/FAILED attempts of a job that later FINISHED are not failures."""
    from lit_sb3.zoo.results import load_results
    from lit_sb3.zoo.tracking import open_tracking

    uri = _store(in_tmp_path, mlflow_template)
    store = open_tracking(uri, "resumed")

    def job(job_id: str, seed: int, status: str, score: float | None = None) -> str:
        tags = {"lit_sb3.algo": "ppo", "lit_sb3.env": "CartPole-v1", "lit_sb3.seed": seed, "lit_sb3.job_id": job_id}
        run_id = store.create_run("job", f"s{seed} ppo CartPole-v1", tags)
        if score is not None:
            store.log_metrics(run_id, {"eval/mean_reward": score, "final/mean_reward": score}, step=100)
        if status == "FINISHED":
            store.end_run(run_id)
        else:
            store.fail_run(run_id, "killed: its bench run ended before the job did", status)
        return run_id

    job("a", 0, "KILLED")  # the first grid was killed mid-job ...
    job("a", 0, "FINISHED", 50.0)  # ... and the resumed grid finished it
    job("b", 1, "FAILED")
    job("b", 1, "FINISHED", 70.0)
    job("c", 2, "FAILED")  # never finished: a real failure
    job("d", 3, "FINISHED", 60.0)
    results = load_results(uri, "resumed")
    assert sorted(r.score for r in results.runs) == [50.0, 60.0, 70.0]
    assert results.not_finished == {("ppo", "CartPole-v1"): 1}
    assert len(results.failure_reasons[("ppo", "CartPole-v1")]) == 1


def test_gateway_and_runner_import_light() -> None:
    """The CLI, the launchers and the terminal import these: mlflow and Lightning wait for the worker."""
    import subprocess
    import sys

    code = (
        "import sys, lit_sb3.zoo.tracking, lit_sb3.zoo.runner, lit_sb3.zoo.results\n"
        "heavy = [m for m in ('mlflow', 'lightning', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)
