"""Smoke tests of ``benchmarks/bench_parity.py``: one seed per algorithm at a tiny budget through the benchmark's
entry functions, real envs and both real libraries (slow: two trainings per algorithm); the argument checks are
fast."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("stable_baselines3")

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_parity.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_parity", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_parity"] = module
    spec.loader.exec_module(module)
    return module


# (algo, env, budget, return bounds): budgets cover at least one update where the zoo's warm-up allows it
CASES = [
    ("ppo", "CartPole-v1", 512, (0.0, 500.0)),
    ("a2c", "CartPole-v1", 200, (0.0, 500.0)),
    ("sac", "Pendulum-v1", 250, (-2000.0, 0.0)),
    ("td3", "Pendulum-v1", 250, (-2000.0, 0.0)),
    ("ddpg", "Pendulum-v1", 250, (-2000.0, 0.0)),
    ("dqn", "CartPole-v1", 1100, (0.0, 500.0)),
]


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "env_id", "budget", "bounds"), CASES, ids=[c[0] for c in CASES])
def test_parity_table(bench: ModuleType, algo: str, env_id: str, budget: int, bounds: tuple[float, float]) -> None:
    table = bench.parity(algo, env_id, seeds=1, n_timesteps=budget, seed_offset=7, eval_episodes=2, reps=200)
    assert (table["algo"], table["env"], table["n_timesteps"], table["seeds"]) == (algo, env_id, budget, [7])
    assert table["hyperparameters"], "the zoo's settings are recorded"
    for lib in bench.LIBRARIES:
        (run,) = table["runs"][lib]
        assert run["seed"] == 7 and bounds[0] <= run["return"] <= bounds[1]
        assert run["fps"] > 0 and run["seconds"] > 0
        summary = table["summary"][lib]
        assert summary["mean"] == run["return"] and summary["std"] == 0.0
    p = table["p_lit_better"]
    assert 0.0 <= p["low"] <= p["value"] <= p["high"] <= 1.0
    assert math.isfinite(table["fps_ratio"]) and table["fps_ratio"] > 0
    assert table["versions"]["stable_baselines3"].startswith("2.")
    text = bench.format_table(table)
    assert "P(lit_sb3 > SB3)" in text and "fps ratio" in text


@pytest.mark.slow
def test_main_writes_json(bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t" / "ppo.json"
    argv = ["--algo", "PPO", "--env", "CartPole-v1", "--seeds", "2", "--n-timesteps", "256", "--eval-episodes", "1"]
    bench.main([*argv, "--json", str(out)])
    table = json.loads(out.read_text())
    assert table["seeds"] == [0, 1] and [r["seed"] for r in table["runs"]["sb3"]] == [0, 1]
    assert "lit_sb3  mean" in capsys.readouterr().out


def test_bad_arguments_fail_before_training(bench: ModuleType) -> None:
    with pytest.raises(SystemExit, match="unknown --algo 'dqm' \\(did you mean 'dqn'\\?\\)"):
        bench.resolve_config("dqm", "CartPole-v1")
    with pytest.raises(SystemExit, match="--seeds must be >= 1"):
        bench.parity("dqn", "CartPole-v1", seeds=0)
