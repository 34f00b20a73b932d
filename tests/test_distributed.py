"""Beyond one machine: ``bench run``/``bench tune --launcher ray`` on a real local Ray cluster
(``ray.init(num_cpus=2)``), a real ``mlflow server`` on loopback and a real PostgreSQL, all started here and
stopped after (:mod:`tests.services`). Nothing is skipped: a service that cannot start fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lit_sb3.zoo.cli import main
from tests.envs.kill_once import MARKER_ENV
from tests.mlflow_store import client as _client
from tests.mlflow_store import runs as _runs
from tests.services import MlflowServer, postgres_server

ROOT = Path(__file__).resolve().parent.parent
KILL_ONCE = "tests.envs.kill_once:KillOnce-v0"
TINY = ["--n-timesteps", "256", "--eval-freq", "128", "--eval-episodes", "2", "--hyperparams", "n_steps=64", "n_envs=1"]
TINY_SPACE = {
    "replace": True,
    "params": {
        "n_envs": 1,
        "n_steps": 64,
        "batch_size": 64,
        "n_epochs": 1,
        "learning_rate": {"type": "float", "low": 1e-4, "high": 3e-3, "log": True},
        "net_arch": {"type": "categorical", "choices": ["tiny", "small"]},
    },
}


def _warm_worker() -> int:
    """Import what a job needs in a Ray worker (as the local launcher's forkserver does)."""
    import lit_sb3.zoo.launchers.preload  # noqa: F401
    import lit_sb3.zoo.launchers.ray_launcher  # noqa: F401

    return os.getpid()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A real ``mlflow server`` (sqlite backend, proxied artifacts), started now and waited for by its user."""
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tune_kill_marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The marker file of the kill-once env used by ``bench tune`` (given to the Ray workers' environment)."""
    return tmp_path_factory.mktemp("tune-kill") / "killed-once"


@pytest.fixture(scope="module")
def ray_cluster(http_server: MlflowServer, tune_kill_marker: Path) -> Iterator[Any]:
    """A real local Ray cluster with 2 CPUs for the whole module (the launchers use it as it is); the mlflow
    server starts first, so its imports overlap with Ray's start-up. Workers inherit this environment."""
    import ray

    assert os.environ.get("PYTHONPATH"), "conftest sets PYTHONPATH so that Ray workers import tests.envs"
    saved = os.environ.get(MARKER_ENV)
    os.environ[MARKER_ENV] = str(tune_kill_marker)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    # both workers import torch/Lightning/MLflow now, while the mlflow server starts (not waited for)
    warm = ray.remote(num_cpus=1)(_warm_worker)
    _warming = [warm.remote() for _ in range(2)]  # noqa: F841 - not waited for
    try:
        yield ray
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop(MARKER_ENV, None)
        else:
            os.environ[MARKER_ENV] = saved


# ---------------------------------------------------------------------------------------------------------
# Ray stays optional
# ---------------------------------------------------------------------------------------------------------
def test_missing_ray_is_one_line_error(in_tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" raises ImportError
    code = main(["run", "--launcher", "ray", "--algos", "a2c", "--envs", "CartPole-v1",
                 "--tracking-uri", f"sqlite:///{in_tmp_path / 'mlflow.db'}", *TINY])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "install lit_sb3[ray]" in err, err
    assert not (in_tmp_path / "mlflow.db").exists()  # failed before anything was created
    code = main(["tune", "--launcher", "ray", "--algo", "ppo", "--env", "CartPole-v1",
                 "--tracking-uri", f"sqlite:///{in_tmp_path / 'mlflow.db'}"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "install lit_sb3[ray]" in err, err


def test_unreachable_ray_address_is_one_line_error(in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ray.init retries an unreachable cluster for minutes; bench fails in seconds and creates nothing."""
    import socket

    with socket.socket() as sock:  # a loopback port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    uri = f"sqlite:///{in_tmp_path / 'mlflow.db'}"
    code = main(["run", "--launcher", "ray", "--ray-address", address, "--algos", "a2c", "--envs", "CartPole-v1",
                 "--tracking-uri", uri, *TINY])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0, err
    assert f"cannot reach the Ray cluster at '{address}': Connection refused" in err, err
    code = main(["tune", "--launcher", "ray", "--ray-address", address, "--algo", "ppo", "--env", "CartPole-v1",
                 "--storage", f"sqlite:///{in_tmp_path / 'optuna.db'}", "--tracking-uri", uri])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"cannot reach the Ray cluster at '{address}'" in err, err
    code = main(["run", "--launcher", "ray", "--ray-address", "head-node", "--algos", "a2c", "--envs", "CartPole-v1",
                 "--tracking-uri", uri, *TINY])  # fmt: skip
    assert (
        code == 2
        and "--ray-address must be auto, HOST:PORT or ray://HOST:PORT, got 'head-node'" in capsys.readouterr().err
    )
    assert not (in_tmp_path / "mlflow.db").exists() and not (in_tmp_path / "optuna.db").exists()


def test_core_and_local_run_never_import_ray(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import lit_sb3, lit_sb3.zoo.cli, lit_sb3.zoo.runner, lit_sb3.zoo.launchers, lit_sb3.zoo.launchers.local\n"
        "import lit_sb3.zoo.commands.run, lit_sb3.zoo.commands.tune, lit_sb3.zoo.tuning.study\n"
        "from lit_sb3.zoo.cli import main\n"
        f"assert main(['run', '--algos', 'a2c', '--envs', 'CartPole-v1', '--dry-run', '--tracking-uri', "
        f"'sqlite:///{tmp_path / 'm.db'}']) == 0\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


# ---------------------------------------------------------------------------------------------------------
# a hanging job is cancelled (ray.cancel(force=True)) at its timeout and recorded FAILED, not retried
# ---------------------------------------------------------------------------------------------------------
def test_ray_timeout_and_raising_job(ray_cluster: Any, in_tmp_path: Path) -> None:
    uri = f"sqlite:///{in_tmp_path / 'mlflow.db'}"
    envs = "tests.envs.faulty:Hanging-v0,tests.envs.faulty:Raising-v0"
    code = main(["run", "--launcher", "ray", "--algos", "a2c", "--envs", envs, "--jobs", "2", "--timeout", "40",
                 "--tracking-uri", uri, "--experiment", "faulty", "--n-timesteps", "256", "--eval-freq", "128",
                 "--eval-episodes", "2", "--hyperparams", "n_steps=16"])  # fmt: skip
    assert code == 1
    runs = {r.data.tags["lit_sb3.env"].split(":")[-1]: r for r in _runs(uri, "faulty")}
    assert len(runs) == 2  # neither was retried
    assert {r.info.status for r in runs.values()} == {"FAILED"}
    assert runs["Hanging-v0"].data.tags["lit_sb3.failure_reason"] == "timeout after 40 s"
    assert "RuntimeError: faulty env: boom" in runs["Raising-v0"].data.tags["lit_sb3.failure_reason"]
    assert "traceback.txt" in {a.path for a in _client(uri).list_artifacts(runs["Raising-v0"].info.run_id)}


# ---------------------------------------------------------------------------------------------------------
# an Optuna study on a real PostgreSQL, tuned by two Ray workers; one worker is SIGKILLed in its first trial:
# Ray re-runs the worker, Optuna's heartbeat fails the lost trial and RetryFailedTrialCallback re-runs it
# ---------------------------------------------------------------------------------------------------------
def test_tune_two_ray_workers_on_postgres(ray_cluster: Any, tune_kill_marker: Path, in_tmp_path: Path) -> None:
    import optuna
    from optuna.storages import RetryFailedTrialCallback
    from optuna.trial import TrialState

    uri = f"sqlite:///{in_tmp_path / 'mlflow.db'}"
    space = in_tmp_path / "space.yml"
    space.write_text(yaml.safe_dump(TINY_SPACE))
    with postgres_server("optuna") as pg_url:
        argv = ["tune", "--launcher", "ray", "--jobs", "2", "--algo", "ppo", "--env", KILL_ONCE, "--n-trials", "3",
                "--n-timesteps", "128", "--n-evaluations", "2", "--eval-episodes", "1", "--search-space", str(space),
                "--seed", "0", "--pruner", "none", "--storage", pg_url, "--tracking-uri", uri,
                "--study-name", "dist", "--heartbeat-interval", "2"]  # fmt: skip
        assert main(argv) == 0
        assert tune_kill_marker.exists(), "no tuning worker was killed"
        study = optuna.load_study(study_name="dist", storage=pg_url)
        trials = study.get_trials(deepcopy=False)
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers)), numbers
    states = Counter(t.state for t in trials)
    assert states[TrialState.COMPLETE] + states[TrialState.PRUNED] == 3, states  # the requested count
    assert states[TrialState.RUNNING] == 0 and states[TrialState.WAITING] == 0, states
    lost = [t for t in trials if t.state == TrialState.FAIL]
    assert len(lost) == 1, states  # the killed worker's trial, failed by the heartbeat ...
    retried = [t for t in trials if RetryFailedTrialCallback.retried_trial_number(t) == lost[0].number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE  # ... and re-run with its parameters
    assert retried[0].params == lost[0].params
    runs = {r.data.tags["lit_sb3.trial_number"]: r for r in _runs(uri, "tune-dist", "trial")}
    assert sorted(runs, key=int) == [str(n) for n in sorted(numbers)]  # one MLflow run per trial
    assert runs[str(lost[0].number)].info.status == "KILLED"
    assert runs[str(lost[0].number)].data.tags["lit_sb3.trial_state"] == "lost"
    assert {runs[str(t.number)].info.status for t in trials if t.state == TrialState.COMPLETE} == {"FINISHED"}


# ---------------------------------------------------------------------------------------------------------
# a grid on Ray, logged through a real mlflow server; one job's worker is SIGKILLed once and retried
# ---------------------------------------------------------------------------------------------------------
def test_ray_grid_through_mlflow_server(ray_cluster: Any, http_server: MlflowServer, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    marker = tmp_path / "killed-once"
    config = work / "kill.yml"
    config.write_text(yaml.safe_dump({KILL_ONCE: {"env_kwargs": f"dict(marker='{marker}', kill_after=150)"}}))
    url = http_server.wait()
    argv = ["run", "--launcher", "ray", "--algos", "a2c,ppo", "--envs", f"CartPole-v1,{KILL_ONCE}", "--config",
            str(config), "--jobs", "2", "--tracking-uri", url, "--experiment", "dist", *TINY]  # fmt: skip
    assert main(argv) == 0
    assert marker.exists(), "the kill-once env never killed its worker"
    runs = _runs(url, "dist")
    by_status = Counter(r.info.status for r in runs)
    assert by_status == {"FINISHED": 4, "KILLED": 1}, by_status
    finished = Counter(r.data.tags["lit_sb3.job_id"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 4 and set(finished.values()) == {1}  # every job FINISHED exactly once
    killed = next(r for r in runs if r.info.status == "KILLED")
    assert killed.data.tags["lit_sb3.env"] == KILL_ONCE
    assert "Ray worker was lost" in killed.data.tags["lit_sb3.failure_reason"]
    retry = next(r for r in runs if r.info.status == "FINISHED" and r.data.tags["lit_sb3.job_id"] ==
                 killed.data.tags["lit_sb3.job_id"])  # fmt: skip
    assert retry.data.tags["lit_sb3.attempt"].startswith("2 ")
    assert retry.data.tags["mlflow.parentRunId"] == killed.data.tags["mlflow.parentRunId"]
    parent = _runs(url, "dist", "grid")
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"

    # artifacts went through the server (mlflow-artifacts:/), not to a folder of the job
    client = _client(url)
    run = next(r for r in runs if r.info.status == "FINISHED" and r.data.tags["lit_sb3.algo"] == "ppo"
               and r.data.tags["lit_sb3.env"] == "CartPole-v1")  # fmt: skip
    assert run.info.artifact_uri.startswith("mlflow-artifacts:/"), run.info.artifact_uri
    assert {"config.json", "model.zip", "evaluations.csv"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    download = tmp_path / "download"
    download.mkdir()
    local = client.download_artifacts(run.info.run_id, "model.zip", str(download))
    import gymnasium as gym

    from lit_sb3 import PPO

    model = PPO.load(local)
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    assert int(model.predict(obs, deterministic=True)[0]) in (0, 1)
    stored = list((http_server.folder / "artifacts").rglob("model.zip"))
    assert len(stored) == 4, stored  # one per FINISHED run, in the server's --artifacts-destination
    assert not list(work.rglob("model.zip")) and not (work / "mlartifacts").exists()

    # resume: the same command finds every job FINISHED and runs nothing
    capsys.readouterr()
    before = len(_runs(url, "dist", None))
    assert main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert len(_runs(url, "dist", None)) == before
