"""``bench enjoy`` and videos: a real tiny grid in a real MLflow sqlite store, its model replayed, recorded as
mp4 (imageio + ffmpeg) and logged back to the run; ``bench run --record-final``; every bad input is one line."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs
from tests.poisoned import bench_without

pytest.importorskip("imageio_ffmpeg")  # the video extra (in dev)

EPISODES = 2
GRID = ["--algos", "ppo", "--envs", "CartPole-v1", "--seeds", "1", "--jobs", "1", "--n-timesteps", "256",
        "--eval-freq", "256", "--eval-episodes", str(EPISODES), "--experiment", "enjoy",
        "--hyperparams", "n_steps=64", "batch_size=64", "n_envs=1", "normalize=True", "--record-final"]  # fmt: skip
RENDER_SHAPE = (400, 600, 3)  # CartPole's rgb_array frames


def _frames(path: Path) -> list[np.ndarray]:
    import imageio

    with imageio.v2.get_reader(path, format="FFMPEG") as reader:
        return [np.asarray(frame) for frame in reader]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("enjoy")
    uri = _store(folder, mlflow_template)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code = main(["run", *GRID, "--tracking-uri", uri])
    finally:
        os.chdir(cwd)
    assert code == 0
    (job,) = _runs(uri, "enjoy")
    (parent,) = _runs(uri, "enjoy", "grid")
    return {"uri": uri, "folder": folder, "job": job, "parent": parent}


def _enjoy(grid: dict[str, Any], capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(grid["folder"])
    try:
        code = main(["enjoy", "--tracking-uri", grid["uri"], *argv])
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    return code, out, err


def _returns(out: str) -> list[float]:
    return [float(m) for m in re.findall(r"^episode \d+: return (-?[\d.]+), length \d+$", out, re.M)]


def test_record_final_leaves_an_mp4_per_job(grid: dict[str, Any], tmp_path: Path) -> None:
    job = grid["job"]
    run_id, job_id = job.info.run_id, job.data.tags["lit_sb3.job_id"]
    client = _client(grid["uri"])
    assert [a.path for a in client.list_artifacts(run_id, "videos")] == [f"videos/final-{job_id}.mp4"]
    frames = _frames(Path(client.download_artifacts(run_id, f"videos/final-{job_id}.mp4", str(tmp_path))))
    # the final evaluation: its first reset, then one frame per step of its episodes
    steps = round(job.data.metrics["eval/mean_ep_length"] * EPISODES)
    assert len(frames) == 1 + steps
    assert {f.shape for f in frames} == {RENDER_SHAPE}


def test_enjoy_run_id_replays_the_final_evaluation(grid: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    job = grid["job"]
    code, out, err = _enjoy(grid, capsys, "--run-id", job.info.run_id, "--episodes", str(EPISODES))
    assert code == 0, err
    returns = _returns(out)
    assert len(returns) == EPISODES
    # same env seed, same VecNormalize statistics, deterministic: the run's own final evaluation
    assert np.mean(returns) == pytest.approx(job.data.metrics["final/mean_reward"])
    assert re.search(r"^mean return -?[\d.]+ over 2 episode\(s\)", out, re.M)
    for selector in (["--job-id", job.data.tags["lit_sb3.job_id"]],
                     ["--experiment", "enjoy", "--algo", "ppo", "--env", "CartPole-v1", "--seed", "0"]):  # fmt: skip
        code, out2, err = _enjoy(grid, capsys, *selector, "--episodes", str(EPISODES))
        assert code == 0, err
        assert _returns(out2) == returns


def test_enjoy_record_logs_a_video_to_the_run(
    grid: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_id = grid["job"].info.run_id
    code, out, err = _enjoy(grid, capsys, "--run-id", run_id, "--episodes", "1", "--record")
    assert code == 0, err
    length = int(re.search(r"^episode 1: return -?[\d.]+, length (\d+)$", out, re.M).group(1))
    client = _client(grid["uri"])
    videos = [a.path for a in client.list_artifacts(run_id, "videos") if "/enjoy-" in a.path]
    assert len(videos) == 1 and videos[0].endswith(".mp4") and videos[0] in out
    frames = _frames(Path(client.download_artifacts(run_id, videos[0], str(tmp_path))))
    assert len(frames) == 1 + length and {f.shape for f in frames} == {RENDER_SHAPE}


def test_enjoy_model_file(grid: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run_id = grid["job"].info.run_id
    client = _client(grid["uri"])
    for name in ("model.zip", "vecnormalize.json"):  # the run's layout: statistics next to the model
        client.download_artifacts(run_id, name, str(tmp_path))
    _, out_run, _ = _enjoy(grid, capsys, "--run-id", run_id, "--episodes", "2")
    code, out, err = _enjoy(grid, capsys, "--model", str(tmp_path / "model.zip"), "--env", "CartPole-v1",
                            "--episodes", "2", "--seed", "0")  # fmt: skip
    assert code == 0, err
    assert "model " in out and _returns(out) == _returns(out_run)


def _one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        ([], ["give one of --run-id"]),
        (["--run-id", "0123456789abcdef0123456789abcdef"], ["no run with id"]),
        (["--run-id", "x", "--job-id", "y"], ["--run-id and --job-id"]),
        (["--run-id", "x", "--env", "CartPole-v1"], ["drop --env"]),
        (["--model", "m.zip"], ["--model needs --env"]),
        (["--experiment", "enjoy", "--algo", "ppo"], ["needs --env, --seed too"]),
        (["--model", "no-such-file.zip", "--env", "CartPole-v1"], ["no file"]),
        (["--job-id", "ffffffffffffffff"], ["no run of job"]),
        (
            ["--experiment", "enjoy", "--algo", "ppo", "--env", "CartPole-v1", "--seed", "7"],
            ["no run of ppo/CartPole-v1/s7"],
        ),
        (
            ["--experiment", "nope", "--algo", "ppo", "--env", "CartPole-v1", "--seed", "0"],
            ["experiment 'nope' not found"],
        ),
        (["--job-id", "x", "--episodes", "0"], ["--episodes must be >= 1"]),
    ],
)
def test_enjoy_bad_input_is_one_line(
    grid: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str], needles: list[str]
) -> None:
    code, _, err = _enjoy(grid, capsys, *argv)
    _one_line_error(code, err, *needles)


def test_enjoy_refuses_runs_without_a_model_or_not_finished(
    grid: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _enjoy(grid, capsys, "--run-id", grid["parent"].info.run_id)  # the grid run: a summary only
    _one_line_error(code, err, "has no model.zip artifact")
    client = _client(grid["uri"])
    failed = client.create_run(grid["job"].info.experiment_id, tags={"lit_sb3.run_type": "job"})
    client.set_terminated(failed.info.run_id, "FAILED")
    code, _, err = _enjoy(grid, capsys, "--run-id", failed.info.run_id)
    _one_line_error(code, err, "is FAILED, not FINISHED")


def test_missing_video_extra_is_one_line(grid: dict[str, Any]) -> None:
    model = grid["folder"] / "m.zip"
    _client(grid["uri"]).download_artifacts(grid["job"].info.run_id, "model.zip", str(grid["folder"]))
    (grid["folder"] / "model.zip").rename(model)
    for argv in (["enjoy", "--model", str(model), "--env", "CartPole-v1", "--record"],
                 ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--record-final", "--tracking-uri", grid["uri"]]):  # fmt: skip
        proc = bench_without(["imageio", "imageio_ffmpeg"], argv, grid["folder"])
        _one_line_error(proc.returncode, proc.stderr, "needs the 'video' extra", 'pip install "lit_sb3[video]"')


def test_enjoy_through_a_tracking_server(
    grid: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A job run whose artifacts live behind ``mlflow server`` (proxied ``mlflow-artifacts:``): downloaded and the
    video uploaded through the server."""
    import shutil

    from tests.services import mlflow_server

    local, files = _client(grid["uri"]), tmp_path / "files"
    job = grid["job"]
    for name in ("model.zip", "config.json", "vecnormalize.json"):
        local.download_artifacts(job.info.run_id, name, str(files))
    shutil.copy(Path(grid["uri"].removeprefix("sqlite:///")), tmp_path / "mlflow.db")
    with mlflow_server(tmp_path) as url:
        remote = _client(url)
        exp = remote.create_experiment("served")  # the server's artifact root: mlflow-artifacts:/
        run = remote.create_run(exp, tags={"lit_sb3.run_type": "job", **{k: v for k, v in job.data.tags.items()
                                                                        if k.startswith("lit_sb3.")}})  # fmt: skip
        for name in ("model.zip", "config.json", "vecnormalize.json"):
            remote.log_artifact(run.info.run_id, str(files / name))
        remote.set_terminated(run.info.run_id, "FINISHED")
        assert remote.get_run(run.info.run_id).info.artifact_uri.startswith("mlflow-artifacts:")
        code, out, err = _enjoy(
            {**grid, "uri": url}, capsys, "--run-id", run.info.run_id, "--episodes", "2", "--record"
        )
        assert code == 0, err
        _, out_local, _ = _enjoy(grid, capsys, "--run-id", job.info.run_id, "--episodes", "2")
        assert _returns(out) == _returns(out_local)
        videos = [a.path for a in remote.list_artifacts(run.info.run_id, "videos")]
        assert len(videos) == 1 and videos[0].endswith(".mp4")
    assert list((tmp_path / "artifacts").rglob("enjoy-*.mp4"))  # stored by the server, not written locally
