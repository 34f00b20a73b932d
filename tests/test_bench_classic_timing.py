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


def test_a_running_invocation_of_another_driver_is_not_killed(tmp_path: Path, mlflow_template: Path) -> None:
    """Two drivers share the store (one per core). Driver X's invocation (live process, no end line yet) is running,
    not 'killed (the sitting ended)' because driver Y started an invocation after it; Y's own killed invocation is
    timed up to the next start of the same side, not up to X's unrelated start."""
    import socket
    import subprocess

    from mlflow import MlflowClient

    driver = _driver()
    store = tmp_path / "store"
    store.mkdir()
    client = MlflowClient(copy_store(store, mlflow_template))
    exp = client.create_experiment(driver.EXPERIMENT)
    t0 = 1_800_000_000.0
    tags = {"lit_sb3.algo": "a2c", "lit_sb3.env": "CartPole-v1", "impl": "sb3"}
    run = client.create_run(exp, start_time=int((t0 + 10) * 1000), tags=tags)
    client.set_terminated(run.info.run_id, "FINISHED", end_time=int((t0 + 300) * 1000))  # after X started
    dead = f"{socket.gethostname()}:999999999:"
    live = subprocess.Popen(["sleep", "60"])
    try:
        lines = [  # Y: a2c (killed when its sitting ended, never resumed); X: dqn (running)
            {"algo": "a2c", "env": "CartPole-v1", "impl": "sb3", "started_ts": t0, "event": "start", "process": dead},
            {"algo": "dqn", "env": "Acrobot-v1", "impl": "sb3", "started_ts": t0 + 60, "event": "start",
             "process": f"{socket.gethostname()}:{live.pid}:"},
        ]  # fmt: skip
        (store / "invocations.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        rows = driver._records(store)
    finally:
        live.kill()
        live.wait()
    assert [(r["algo"], r["status"], r["wall_seconds"]) for r in rows] == [("a2c", "killed (the sitting ended)", 300.0)]
    rows = driver._records(store)  # X's driver gone too: now it is killed, with nothing finished
    assert [(r["algo"], r["wall_seconds"]) for r in rows] == [("a2c", 300.0), ("dqn", 0.0)]


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


def test_headline_lists_only_cells_done_on_both_sides() -> None:
    """dqn on Acrobot-v1 with 10 + 5 runs once appeared in the README's table with a verdict (5 runs a side is
    enough for the rule) while its SB3 side was still running."""
    driver = _driver()

    def cell(algo: str, env: str, runs: tuple[int, int]) -> dict:
        side = {"point": 1.0, "low": 0.0, "high": 2.0}
        return {"algo": algo, "env": env, "runs": {"lit_sb3": runs[0], "sb3": runs[1]}, "kind": "open",
                "verdict": "open", "iqm": {"lit_sb3": side, "sb3": side}, "poi": {"point": 0.5, "low": 0.1, "high": 0.9},
                "wall_seconds": {"lit_sb3": 10.0, "sb3": 20.0}}  # fmt: skip

    against = {"impl": "sb3", "interval_name": "CS", "alpha": 0.05, "margin": 0.1,
               "cells": [cell("ppo", "CartPole-v1", (10, 10)), cell("dqn", "Acrobot-v1", (10, 5))]}  # fmt: skip
    text = driver.headline({"implementation_comparison": {"against": [against]}}, "")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["| ppo | CartPole-v1 | 1.0 | 1.0 | 0.50 [0.10, 0.90] | open | 10 s / 20 s (2.00x) |"]
    assert "In progress (not in the table): dqn on Acrobot-v1 (10 + 5 runs)." in text
    assert "1 cells, 10 seeds a side each" in text
    pending = next(line for line in text.splitlines() if line.startswith("Not yet run (1"))
    assert "ars on CartPole-v1" in pending and "ppo on" not in pending
    tier2 = next(line for line in text.splitlines() if "tier 2" in line).split(": ", 1)[1].rstrip(".").split(", ")
    assert "dqn on Acrobot-v1" not in tier2 and "qrdqn on Acrobot-v1" in tier2
