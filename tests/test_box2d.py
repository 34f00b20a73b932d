"""The ``box2d`` family: its suite runs through ``bench run`` with the zoo's entries (tiny budgets; CarRacing as
images with CnnPolicy), its scores are sourced, and a missing extra (Box2D, ALE, ...) is one line at planning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs
from tests.poisoned import bench_without

pytest.importorskip("Box2D")  # the box2d extra (in dev)

BOX2D = ["LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3", "BipedalWalkerHardcore-v3", "CarRacing-v3"]


def test_env_families() -> None:
    from lit_sb3.zoo.extras import env_extra

    assert {env: env_extra(env) for env in BOX2D} == dict.fromkeys(BOX2D, "box2d")
    assert env_extra("LunarLanderNoVel-v3") == "box2d"
    for env in ("PongNoFrameskip-v4", "ALE/Pong-v5", "BreakoutNoFrameskip-v4"):
        assert env_extra(env) == "atari", env
    assert env_extra("Hopper-v5") == "mujoco" and env_extra("CartPole-v1") is None


def test_box2d_suite_and_scores() -> None:
    from lit_sb3.zoo.normalization import load_table
    from lit_sb3.zoo.suites import expand_envs

    assert expand_envs("box2d") == BOX2D
    table = load_table()
    for env in BOX2D:
        entry = table.entries[env]
        assert entry.random is not None and entry.reference is not None and entry.reference > entry.random, env
        assert entry.random_source and entry.reference_source, env


def test_box2d_suite_runs_through_bench_run(tmp_path: Path, mlflow_template: Path) -> None:
    uri = _store(tmp_path, mlflow_template)
    argv = ["run", "--algos", "ppo", "--envs", "box2d", "--jobs", "2", "--tracking-uri", uri, "--experiment", "box2d",
            "--n-timesteps", "256", "--eval-freq", "256", "--eval-episodes", "1",
            "--hyperparams", "n_envs=1", "n_steps=128", "batch_size=64", "n_epochs=1",
            "env_kwargs=dict(max_episode_steps=200)"]  # fmt: skip  # short evaluation episodes (untrained walkers stand)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(argv) == 0
    finally:
        os.chdir(cwd)
    jobs = {r.data.tags["lit_sb3.env"]: r for r in _runs(uri, "box2d")}
    assert sorted(jobs) == sorted(BOX2D)
    for env, run in jobs.items():
        assert run.info.status == "FINISHED", env
        assert run.data.metrics["time/total_timesteps"] == 256, env
        assert "final/mean_reward" in run.data.metrics, env
    car = jobs["CarRacing-v3"].data.params  # the zoo's image entry: CNN on 64x64 grey frames, 2 stacked
    assert car["policy"] == "CnnPolicy" and car["frame_stack"] == "2"
    assert "YAMLCompatResizeObservation" in car["env_wrapper"]


@pytest.mark.parametrize(
    ("modules", "envs", "extra"),
    [(["Box2D"], "classic,box2d", "box2d"), (["ale_py"], "PongNoFrameskip-v4", "atari")],
)
def test_missing_extra_is_one_line_at_planning(tmp_path: Path, modules: list[str], envs: str, extra: str) -> None:
    proc = bench_without(modules, ["run", "--algos", "ppo", "--envs", envs, "--tracking-uri", f"sqlite:///{tmp_path}/m.db"],
                     tmp_path)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"needs the '{extra}' extra: pip install \"lit_sb3[{extra}]\"" in lines[0]
    assert not (tmp_path / "m.db").exists()  # before any job, run or store


def test_list_shows_missing_extras(tmp_path: Path) -> None:
    proc = bench_without(["Box2D"], ["list", "--envs", "box2d,CartPole-v1", "--algos", "ppo"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # bench list wraps its lines to the terminal's width
    assert 'box2d: Box2D envs (LunarLander, BipedalWalker, CarRacing): missing (pip install "lit_sb3[box2d]")' in text
    rows = {line.split()[1]: line.split()[3] for line in proc.stdout.splitlines() if line.startswith("│")}
    assert rows["LunarLander-v3"] == "extra" and rows["CarRacing-v3"] == "extra" and rows["CartPole-v1"] == "entry"
