"""A ``bench run`` rerun with nothing to do: planning replayed from the plan memo (no torch, no Lightning), the
finished jobs read from the sqlite store with one query (no MLflow), and both give the answers of the slow path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lit_sb3.zoo.jobs import plan_grid
from lit_sb3.zoo.plan_cache import PlanCache
from lit_sb3.zoo.suites import default_budgets
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store

ROOT = Path(__file__).resolve().parent.parent
# the README's main job (scripts/main.sh)
README_ARGV = ["run", "--algos", "sac,a2c", "--envs", "Pendulum-v1", "--seeds", "5", "--n-timesteps", "3000",
               "--eval-freq", "1000", "--eval-episodes", "5"]  # fmt: skip


def _plan(cache: PlanCache | None, *, algos=("ppo", "dqn", "sac"), envs=("CartPole-v1", "Pendulum-v1"),
          n_timesteps: int | None = 5000, overrides=None, config_files=()) -> tuple[list[str], list, list[str]]:  # fmt: skip
    notes: list[str] = []
    jobs, skipped = plan_grid(list(algos), list(envs), range(2), n_timesteps=n_timesteps, overrides=overrides,
                              config_files=config_files, notes=notes, cache=cache)  # fmt: skip
    return [j.to_json() for j in jobs], skipped, notes


def test_plan_memo_replays_the_same_plan(tmp_path: Path) -> None:
    """Jobs (ids, configs, budgets), skipped pairs and budget notes are the same from the memo as planned."""
    expected = _plan(None)
    assert expected[1] and expected[2]  # dqn on Pendulum is skipped; PPO's 1,000 steps round up to rollouts
    folder = tmp_path / "plans"
    first = PlanCache((), None, 5000, folder=folder)
    assert _plan(first) == expected and first.misses == 6 and first.hits == 0
    again = PlanCache((), None, 5000, folder=folder)
    assert _plan(again) == expected and again.hits == 6 and again.misses == 0

    # any input that changes the plan is part of the key: an override, a --config file's contents
    other = PlanCache((), {"gamma": "0.9"}, 5000, folder=folder)
    changed = _plan(other, overrides={"gamma": "0.9"})
    assert other.misses == 6 and changed[0] != expected[0]
    config = tmp_path / "extra.yml"
    config.write_text("CartPole-v1:\n  n_envs: 2\n")
    with_file = PlanCache([str(config)], None, 5000, folder=folder)
    _plan(with_file, algos=("ppo",), envs=("CartPole-v1",), config_files=[str(config)])
    config.write_text("CartPole-v1:\n  n_envs: 4\n")
    edited = PlanCache([str(config)], None, 5000, folder=folder)
    four = _plan(edited, algos=("ppo",), envs=("CartPole-v1",), config_files=[str(config)])
    assert edited.misses == 1 and json.loads(four[0][0])["config"]["n_envs"] == 4
    assert four == _plan(None, algos=("ppo",), envs=("CartPole-v1",), config_files=[str(config)])


def test_plan_memo_records_no_error(tmp_path: Path) -> None:
    """A bad input fails every time; module:Env ids are never recorded."""
    from lit_sb3.zoo.errors import BenchError

    folder = tmp_path / "plans"
    for _ in range(2):
        with pytest.raises(BenchError, match="learning_rat"):
            _plan(PlanCache((), {"learning_rat": "1"}, 5000, folder=folder), algos=("ppo",), envs=("CartPole-v1",),
                  overrides={"learning_rat": "1"})  # fmt: skip
    assert not folder.exists() or not list(folder.iterdir())
    cache = PlanCache((), None, 5000, folder=folder)
    _plan(cache, algos=("ppo",), envs=("tests.envs.faulty:Raising-v0",))
    assert not folder.exists() or not list(folder.iterdir())


def test_plan_memo_ignores_damaged_entries(tmp_path: Path) -> None:
    """An entry that is not JSON, not ours, or too large is a miss, and planning writes it anew."""
    folder = tmp_path / "plans"
    expected = _plan(PlanCache((), None, 5000, folder=folder), algos=("sac",), envs=("Pendulum-v1",))
    (entry,) = folder.iterdir()
    for damage in (b"{not json", b'{"algo": "ppo", "env_id": "CartPole-v1"}', b" " * (2 << 20)):
        entry.write_bytes(damage)
        cache = PlanCache((), None, 5000, folder=folder)
        assert _plan(cache, algos=("sac",), envs=("Pendulum-v1",)) == expected and cache.misses == 1
    assert json.loads(entry.read_text())["payload"]["algo"] == "sac"


def _store_with_runs(folder: Path, template: Path) -> tuple[str, set[str]]:
    """A store whose experiment 'e' holds job runs in every state (and a deleted one), plus other runs."""
    from lit_sb3.zoo.tracking import open_tracking

    uri = _store(folder, template)
    store = open_tracking(uri, "e")

    def job(job_id: str, status: str, run_type: str = "job") -> str:
        run_id = store.create_run(run_type, f"s0 ppo {job_id}", {"lit_sb3.job_id": job_id})
        if status == "FINISHED":
            store.end_run(run_id)
        elif status != "RUNNING":
            store.fail_run(run_id, "test", status)
        return run_id

    job("a", "FINISHED")
    job("b", "FAILED")
    job("c", "KILLED")
    job("c", "FINISHED")
    job("d", "RUNNING")
    _client(uri).delete_run(job("gone", "FINISHED"))
    job("x", "FINISHED", run_type="grid")
    other = open_tracking(uri, "other")
    other.end_run(other.create_run("job", "s0 ppo y", {"lit_sb3.job_id": "y"}))
    return uri, {"a", "c"}


def test_sqlite_query_agrees_with_mlflow(tmp_path: Path, mlflow_template: Path) -> None:
    from lit_sb3.zoo.tracking import open_tracking, sqlite_finished_job_ids

    uri, expected = _store_with_runs(tmp_path, mlflow_template)
    assert open_tracking(uri, "e", create=False).finished_job_ids() == expected
    assert sqlite_finished_job_ids(uri, "e") == expected
    assert sqlite_finished_job_ids(uri, "other") == open_tracking(uri, "other", create=False).finished_job_ids()
    assert sqlite_finished_job_ids(uri, "missing") == set()
    assert sqlite_finished_job_ids(f"sqlite:///{tmp_path / 'none.db'}", "e") == set()
    assert not (tmp_path / "none.db").exists()  # read-only: nothing created
    assert sqlite_finished_job_ids("http://127.0.0.1:1", "e") is None  # a server: MLflow's client answers
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    assert sqlite_finished_job_ids(f"sqlite:///{tmp_path / 'junk.db'}", "e") is None


def test_noop_rerun_plans_without_torch_or_lightning(tmp_path: Path, mlflow_template: Path) -> None:
    """The README's grid, all finished: the rerun says so without importing torch, Lightning or MLflow."""
    from lit_sb3.zoo.tracking import open_tracking

    uri = _store(tmp_path, mlflow_template)
    cache = PlanCache((), {}, 3000, folder=tmp_path / "cache" / "plans")
    jobs, _ = plan_grid(["sac", "a2c"], ["Pendulum-v1"], range(5), n_timesteps=3000, eval_freq=1000,
                        eval_episodes=5, overrides={}, default_budgets=default_budgets("Pendulum-v1"),
                        cache=cache)  # fmt: skip
    store = open_tracking(uri, "readme-demo")
    for job in jobs:  # the store of a finished grid (the runs' contents do not matter to a rerun)
        store.end_run(store.create_run("job", job.name, {"lit_sb3.job_id": job.job_id}))
    argv = [*README_ARGV, "--experiment", "readme-demo", "--tracking-uri", uri]
    code = (
        "import sys\nfrom lit_sb3.zoo.cli import main\n"
        f"rc = main({argv!r})\n"
        "print('heavy:', [m for m in ('torch', 'lightning', 'mlflow') if m in sys.modules])\nsys.exit(rc)\n"
    )
    env = {**os.environ, "LIT_SB3_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "nothing to do: all 10 jobs already finished in experiment 'readme-demo'" in out.stdout
    assert "heavy: []" in out.stdout, out.stdout
    assert out.stdout.splitlines()[0].startswith("bench run: algos sac,a2c x envs Pendulum-v1")
