"""The classic benchmark's timing of an invocation killed when a sitting ended (benchmarks/bench_classic.py): it
counts the runs that invocation finished, not those of the later invocation that redid its work."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from tests.mlflow_store import copy_store

ROOT = Path(__file__).resolve().parents[1]


def _driver():
    spec = importlib.util.spec_from_file_location("bench_classic", ROOT / "benchmarks" / "bench_classic.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["bench_classic"] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_killed_invocation_is_timed_by_its_own_runs(tmp_path: Path, mlflow_template: Path) -> None:
    """Invocation A (start at t0, killed) finished one run (t0+10 to t0+100); invocation B (start at t1) redid the
    rest (its run ends at t1+200). A is timed 100 s (before: up to the end of B's run, t1 + 200 - t0)."""
    from mlflow import MlflowClient

    driver = _driver()
    store = tmp_path / "store"
    store.mkdir()
    uri = copy_store(store, mlflow_template)
    assert uri == f"sqlite:///{store / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment(driver.EXPERIMENT)
    t0, t1 = 1_800_000_000.0, 1_800_003_000.0
    tags = {"lit_sb3.algo": "td3", "lit_sb3.env": "Pendulum-v1", "impl": "sb3"}
    ids = []
    for start, end in ((t0 + 10, t0 + 100), (t1 + 10, t1 + 200)):
        run = client.create_run(exp, start_time=int(start * 1000), tags=tags)
        client.set_terminated(run.info.run_id, "FINISHED", end_time=int(end * 1000))
        ids.append(run.info.run_id)
    lines = [
        {"algo": "td3", "env": "Pendulum-v1", "impl": "sb3", "started_ts": t0, "event": "start"},
        {"algo": "td3", "env": "Pendulum-v1", "impl": "sb3", "started_ts": t1, "event": "start"},
        {"algo": "td3", "env": "Pendulum-v1", "impl": "sb3", "started_ts": t1, "wall_seconds": 210.0, "status": "ok"},
    ]
    (store / "invocations.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = driver._records(store)
    killed = [r for r in rows if r.get("status", "").startswith("killed")]
    assert len(killed) == 1 and killed[0]["wall_seconds"] == 100.0
    client.delete_run(ids[0])  # its side redone (--redo deletes the runs): the invocation still took 100 s
    assert [r["wall_seconds"] for r in driver._records(store) if r["status"].startswith("killed")] == [100.0]


def test_redo_deletes_a_side_and_supersedes_its_invocations(tmp_path: Path, mlflow_template: Path) -> None:
    """``--redo dqn:CartPole-v1:sb3``: that side's job runs are deleted (the other side's kept), so neither the
    driver nor ``bench run``'s resume counts them as finished; the side's earlier invocation is listed as superseded
    with the reason and left out of the totals, which count the invocation that ran it again."""
    from mlflow import MlflowClient

    from lit_sb3.zoo.tracking.mlflow_compat import sqlite_finished_job_ids

    driver = _driver()
    store = tmp_path / "store"
    store.mkdir()
    client = MlflowClient(copy_store(store, mlflow_template))
    exp = client.create_experiment(driver.EXPERIMENT)
    for impl in ("sb3", "lit_sb3"):
        for seed in range(2):
            tags = {"lit_sb3.algo": "dqn", "lit_sb3.env": "CartPole-v1", "impl": impl, "lit_sb3.run_type": "job",
                    "lit_sb3.job_id": f"{impl}-{seed}"}  # fmt: skip
            client.set_terminated(client.create_run(exp, tags=tags).info.run_id, "FINISHED")
    side = {"algo": "dqn", "env": "CartPole-v1", "cpus": "1", "jobs": 1, "load_before": [0.1] * 3,
            "load_after": [0.1] * 3, "started": "t", "status": "ok"}  # fmt: skip
    lines = [{**side, "impl": "sb3", "started": "2026-12-04T23:48:46+0000", "wall_seconds": 300.0},  # no ts: older
             {**side, "impl": "lit_sb3", "started_ts": 2.0, "wall_seconds": 100.0}]  # fmt: skip
    (store / "invocations.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    with pytest.raises(SystemExit, match="expected algo:env:impl"):
        driver.redo(store, "dqn:CartPol-v1:sb3", "x")
    with pytest.raises(SystemExit, match="needs --reason"):
        driver.redo(store, "dqn:CartPole-v1:sb3", " ")
    assert driver.redo(store, "dqn:CartPole-v1:sb3", "replay_buffer_class logged as None") == 2
    counts = driver.finished_counts(store)
    assert counts.get(("dqn", "CartPole-v1", "sb3"), 0) == 0 and counts[("dqn", "CartPole-v1", "lit_sb3")] == 2
    finished = sqlite_finished_job_ids(store / "mlflow.db", driver.EXPERIMENT, "lit_sb3.run_type", "lit_sb3.job_id")
    assert finished == {"lit_sb3-0", "lit_sb3-1"}

    rows = driver._records(store)
    assert [r["status"] for r in rows] == ["superseded: replay_buffer_class logged as None", "ok"]
    summary = driver.timing_summary(store)
    assert "| superseded: replay_buffer_class logged as None | 300.0 |" in summary and "Over the 0 cells" in summary
    with open(store / "invocations.jsonl", "a") as fh:  # the side run again
        fh.write(json.dumps({**side, "impl": "sb3", "started_ts": time.time() + 1, "wall_seconds": 250.0}) + "\n")
    summary = driver.timing_summary(store)
    assert "Over the 1 cells" in summary and "| sb3 | 250 s" in summary and "**2.50x**" in summary


def test_unknown_cell_is_one_line_naming_the_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped ``--cells`` once selected nothing and the driver ended as if all were done."""
    driver = _driver()
    with pytest.raises(SystemExit) as exc:
        driver.main(["--store", str(tmp_path), "--dry-run", "--tier", "1", "--cells", "tqc:Pendulum,ppo:CartPole-v1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--cells: no such cell at --tier 1: tqc:Pendulum (cells: ppo:CartPole-v1, " in err
    assert "tqc:Pendulum-v1" in err and "Acrobot" not in err  # the tier's cells, not tier 2's
