"""The classic benchmark's timing of an invocation killed when a sitting ended (benchmarks/bench_classic.py): it
counts the runs that invocation finished, not those of the later invocation that redid its work."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

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
    for start, end in ((t0 + 10, t0 + 100), (t1 + 10, t1 + 200)):
        run = client.create_run(exp, start_time=int(start * 1000), tags=tags)
        client.set_terminated(run.info.run_id, "FINISHED", end_time=int(end * 1000))
    lines = [
        {"algo": "td3", "env": "Pendulum-v1", "impl": "sb3", "started_ts": t0, "event": "start"},
        {"algo": "td3", "env": "Pendulum-v1", "impl": "sb3", "started_ts": t1, "event": "start"},
        {"algo": "td3", "env": "Pendulum-v1", "impl": "sb3", "started_ts": t1, "wall_seconds": 210.0, "status": "ok"},
    ]
    (store / "invocations.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = driver._records(store)
    killed = [r for r in rows if r.get("status", "").startswith("killed")]
    assert len(killed) == 1 and killed[0]["wall_seconds"] == 100.0
