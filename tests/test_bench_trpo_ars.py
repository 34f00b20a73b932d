"""The suite with TRPO and ARS: a small real ``bench run`` (MLflow sqlite), ``bench report`` on it, a tiny
``bench tune`` study, and the zoo search spaces resolving to valid configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import copy_store, runs


def test_bench_run_report_and_tune_trpo_ars(in_tmp_path: Path, mlflow_template: Path) -> None:
    uri = copy_store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "trpo,ars", "--envs", "CartPole-v1", "--seeds", "1", "--jobs", "2",
            "--n-timesteps", "1024", "--eval-freq", "1024", "--eval-episodes", "2",
            "--tracking-uri", uri, "--experiment", "contrib"]  # fmt: skip
    assert main(argv) == 0
    jobs = {r.data.tags["lit_sb3.algo"]: r for r in runs(uri, "contrib")}
    assert set(jobs) == {"trpo", "ars"} and {r.info.status for r in jobs.values()} == {"FINISHED"}
    # the zoo entries' values reached the jobs
    assert jobs["trpo"].data.params["cg_damping"] == "0.001"
    assert jobs["ars"].data.params["n_delta"] == "2"
    for run in jobs.values():
        assert run.data.metrics["time/total_timesteps"] >= 1024 and "final/mean_reward" in run.data.metrics
    assert "train/is_line_search_success" in jobs["trpo"].data.metrics
    assert "train/step_size" in jobs["ars"].data.metrics

    out = in_tmp_path / "report"
    assert main(["report", "--experiment", "contrib", "--tracking-uri", uri, "--out", str(out), "--reps", "200"]) == 0
    text = (out / "report.md").read_text()
    assert "trpo" in text and "ars" in text

    journal = in_tmp_path / "ars.journal"
    argv = ["tune", "--algo", "ars", "--env", "CartPole-v1", "--n-trials", "2", "--n-timesteps", "600",
            "--n-evaluations", "1", "--eval-episodes", "2", "--pruner", "none", "--seed", "0", "--study-name", "a",
            "--storage", str(journal), "--tracking-uri", uri, "--experiment", "tune-ars"]  # fmt: skip
    assert main(argv) == 0
    trials = runs(uri, "tune-ars", "trial")
    assert len(trials) == 2 and {r.info.status for r in trials} == {"FINISHED"}


@pytest.mark.parametrize("algo,env_id", [("trpo", "CartPole-v1"), ("trpo", "Pendulum-v1"), ("ars", "Pendulum-v1"),
                                         ("ars", "CartPole-v1")])  # fmt: skip
def test_zoo_search_spaces_resolve(algo: str, env_id: str) -> None:
    import optuna

    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.tuning.objective import override_text
    from lit_sb3.zoo.tuning.search_spaces import default_search_space, sample_params, to_hyperparameters

    space = default_search_space(algo)
    base = resolve(algo, env_id)
    for index in (0, -1):
        point = {n: (s.choices[index] if s.type == "categorical" else (s.low if index == 0 else s.high))
                 for n, s in space.params.items()}  # fmt: skip
        sampled = sample_params(optuna.trial.FixedTrial(point), space)
        hp, _ = to_hyperparameters(algo, sampled, space.fixed, base.algo_kwargs, base.n_envs)
        cfg = resolve(algo, env_id, overrides={k: override_text(v) for k, v in hp.items()})
        if algo == "trpo":
            assert cfg.algo_kwargs["batch_size"] <= cfg.algo_kwargs["n_steps"] * cfg.n_envs
            assert "net_arch" in cfg.algo_kwargs["policy_kwargs"]
        else:
            assert 1 <= cfg.algo_kwargs["n_top"] <= cfg.algo_kwargs["n_delta"]


@pytest.mark.parametrize(
    "algo,override,message",
    [
        ("ars", {"n_delta": "0"}, "n_delta: bad value 0: must be >= 1"),
        ("ars", {"delta_std": "-1"}, "delta_std: bad value -1: must be > 0"),
        ("trpo", {"line_search_shrinking_factor": "0"}, "line_search_shrinking_factor: bad value 0: must be in (0, 1]"),
        ("trpo", {"cg_max_steps": "abc"}, "cg_max_steps: bad value 'abc': expected int >= 0"),
    ],
)
def test_bad_hyperparameters_fail_at_resolution(algo: str, override: dict, message: str) -> None:
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.errors import BenchError

    with pytest.raises(BenchError) as err:
        resolve(algo, "Pendulum-v1", overrides=override)
    assert message in str(err.value)
