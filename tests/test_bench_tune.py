"""``bench tune``: real Optuna studies (journal file and sqlite storages), real MLflow sqlite stores, real
CartPole training with tiny budgets (512-1024 env steps, 2 evaluations)."""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lit_sb3.zoo.cli import main
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs

TINY_SPACE = {
    "replace": True,
    "params": {
        "n_envs": 2,
        "n_steps": 64,
        "batch_size": 64,
        "n_epochs": 1,
        "learning_rate": {"type": "float", "low": 1e-4, "high": 3e-3, "log": True},
        "net_arch": {"type": "categorical", "choices": ["tiny", "small"]},
    },
}
BUDGET = ["--n-timesteps", "512", "--n-evaluations", "2", "--eval-episodes", "2"]


def _runs(uri: str, experiment: str, run_type: str) -> list[Any]:
    return runs(uri, experiment, run_type, must_exist=True)


def _space(folder: Path, data: dict[str, Any] | None = None, name: str = "space.yml") -> str:
    path = folder / name
    path.write_text(yaml.safe_dump(data if data is not None else TINY_SPACE))
    return str(path)


def _study(storage: Any, name: str) -> Any:
    import optuna

    if isinstance(storage, Path):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        storage = JournalStorage(JournalFileBackend(str(storage)))
    return optuna.load_study(study_name=name, storage=storage)


def _finished(study: Any) -> list[Any]:
    from optuna.trial import TrialState

    return [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]


def _precreate(journal: Path, name: str, params: list[dict[str, Any]]) -> None:
    """Create the study in a journal file and enqueue trials (so the test decides what they sample)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    journal.parent.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(study_name=name, direction="maximize",
                                storage=JournalStorage(JournalFileBackend(str(journal))))  # fmt: skip
    for p in params:
        study.enqueue_trial(p)


# ---------------------------------------------------------------------------------------------------------
# a journal study with 2 seeds per trial, used by several tests
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def journal_study(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("tune-journal")
    uri = _store(folder, mlflow_template)
    journal = folder / "studies" / "s.journal"
    journal.parent.mkdir()  # --storage never creates a folder (a missing one is a typo: one line, exit 2)
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--n-trials", "2", "--seeds-per-trial", "2", *BUDGET,
            "--search-space", _space(folder), "--pruner", "none", "--seed", "0", "--study-name", "s",
            "--storage", str(journal), "--tracking-uri", uri, "--experiment", "tune-test"]  # fmt: skip
    t0 = time.monotonic()
    assert main(argv) == 0
    return {"folder": folder, "uri": uri, "journal": journal, "wall": time.monotonic() - t0, "argv": argv}


def test_journal_study_completes_and_is_tracked(journal_study: dict[str, Any]) -> None:
    study = _study(journal_study["journal"], "s")
    assert len(_finished(study)) == 2 and len(study.trials) == 2
    assert study.user_attrs["algo"] == "ppo" and study.user_attrs["seeds_per_trial"] == 2
    uri = journal_study["uri"]
    (parent,) = _runs(uri, "tune-test", "study")
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["lit_sb3.study_name"] == "s" and parent.data.tags["lit_sb3.sampler"] == "tpe"
    assert parent.data.tags["lit_sb3.pruner"] == "none"
    from mlflow import MlflowClient

    artifacts = {a.path for a in MlflowClient(tracking_uri=uri).list_artifacts(parent.info.run_id)}
    assert {"optimization_history.png", "s_best.yml", "search_space.json"} <= artifacts
    trials = _runs(uri, "tune-test", "trial")
    assert sorted(int(r.data.tags["lit_sb3.trial_number"]) for r in trials) == [0, 1]
    for run in trials:
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["lit_sb3.trial_state"] == "complete" and run.info.status == "FINISHED"
        assert "learning_rate" in run.data.params and not any(k.startswith("algo_kwargs.") for k in run.data.params)


def test_seeds_per_trial_objective_is_mean_of_seed_runs(journal_study: dict[str, Any]) -> None:
    uri = journal_study["uri"]
    study = _study(journal_study["journal"], "s")
    seeds = _runs(uri, "tune-test", "trial_seed")
    assert len(seeds) == 4
    for trial in study.trials:
        run_id = trial.user_attrs["mlflow_run_id"]
        mine = [r for r in seeds if r.data.tags["mlflow.parentRunId"] == run_id]
        assert sorted(r.data.tags["lit_sb3.seed"] for r in mine) == ["0", "1"]
        finals = [r.data.metrics["final/mean_reward"] for r in mine]
        assert trial.value == pytest.approx(statistics.fmean(finals))
        assert all(r.data.metrics["time/total_timesteps"] == 512 for r in mine)


def test_show_prints_best_trials(journal_study: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["tune", "--show", "--study-name", "s", "--storage", str(journal_study["journal"])]) == 0
    out = capsys.readouterr().out
    assert "best 2 trials" in out and "COMPLETE" in out and "learning_rate=" in out


def test_exported_yaml_runs_under_bench_run(journal_study: dict[str, Any], in_tmp_path: Path,
                                            mlflow_template: Path) -> None:  # fmt: skip
    from lit_sb3.zoo.config import resolve

    path = journal_study["journal"].parent / "s_best.yml"
    data = yaml.safe_load(path.read_text())
    entry = data["CartPole-v1"]
    study = _study(journal_study["journal"], "s")
    assert entry["learning_rate"] == pytest.approx(study.best_params["learning_rate"])
    # the zoo config's budget (the study's short one is stated in the header, kept with --export-tuned-budget)
    assert entry["n_timesteps"] == resolve("ppo", "CartPole-v1").n_timesteps > 512 and entry["policy"] == "MlpPolicy"
    assert "# tuned at 512 env steps per seed; n_timesteps below is the zoo config's" in path.read_text()
    assert study.metric_names == ["final eval mean return, mean over 2 seeds"]  # not Optuna's "Objective 0"
    cfg = resolve("ppo", "CartPole-v1", config_files=[path])
    assert cfg.algo_kwargs["n_steps"] == 64 and cfg.n_envs == 2
    assert cfg.algo_kwargs["policy_kwargs"]["net_arch"] in ({"pi": [64], "vf": [64]}, {"pi": [64, 64], "vf": [64, 64]})
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--seeds", "1", "--config", str(path),
            "--n-timesteps", "256", "--eval-freq", "128", "--eval-episodes", "1", "--jobs", "1",
            "--tracking-uri", uri, "--experiment", "from-tune"]  # fmt: skip
    assert main(argv) == 0
    (job,) = _runs(uri, "from-tune", "job")
    assert job.info.status == "FINISHED"
    assert float(job.data.params["learning_rate"]) == pytest.approx(entry["learning_rate"])


# ---------------------------------------------------------------------------------------------------------
# sqlite storage, resume
# ---------------------------------------------------------------------------------------------------------
def test_sqlite_storage_and_resume(in_tmp_path: Path, mlflow_template: Path) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    storage = f"sqlite:///{in_tmp_path / 'optuna.db'}"
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", *BUDGET, "--search-space", _space(in_tmp_path),
            "--storage", storage, "--tracking-uri", uri, "--seed", "1"]  # fmt: skip
    assert main([*argv, "--n-trials", "1"]) == 0
    assert len(_finished(_study(storage, "ppo-CartPole-v1"))) == 1
    assert main([*argv, "--n-trials", "2"]) == 0  # resumes: one more trial
    study = _study(storage, "ppo-CartPole-v1")
    assert [t.number for t in _finished(study)] == [0, 1]
    assert len(_runs(uri, "tune-ppo-CartPole-v1", "study")) == 2
    assert (in_tmp_path / "optuna" / "ppo-CartPole-v1_best.yml").exists()


# ---------------------------------------------------------------------------------------------------------
# pruning
# ---------------------------------------------------------------------------------------------------------
def test_bad_trials_are_pruned_early(
    in_tmp_path: Path, mlflow_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    space = {"replace": True, "params": {"n_envs": 2, "n_steps": 128, "batch_size": 64, "n_epochs": 2,
                                         "learning_rate": {"type": "categorical", "choices": [0.003, 5.0]}}}  # fmt: skip
    journal = in_tmp_path / "optuna" / "p.journal"
    # two sensible trials complete first, then a learning rate of 5 wrecks the policy by the first evaluation
    _precreate(journal, "p", [{"learning_rate": 0.003}, {"learning_rate": 0.003}, {"learning_rate": 5.0}])
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--study-name", "p", "--n-trials", "3",
            "--n-timesteps", "1024", "--n-evaluations", "2", "--eval-episodes", "2",
            "--search-space", _space(in_tmp_path, space), "--pruner", "median", "--n-startup-trials", "2",
            "--n-warmup-evaluations", "0", "--tracking-uri", uri, "--experiment", "prune",
            "--progress-interval", "0.5"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    ticks = [line for line in out.splitlines() if re.match(r"^\[\d\d:\d\d:\d\d\] trials: \d+/3 finished", line)]
    assert ticks and "env steps: " in ticks[-1] and " | ETA " in ticks[-1], out  # progress lines at the cadence
    assert "workflowType=machine_learning" in "\n".join(out.splitlines()[-3:])  # where the trials are, in MLflow
    from optuna.trial import TrialState

    study = _study(journal, "p")
    pruned = [t for t in study.trials if t.state == TrialState.PRUNED]
    assert pruned, [(t.number, t.state, t.intermediate_values) for t in study.trials]
    for trial in pruned:
        assert trial.user_attrs["env_steps"] < 1024
    runs = {r.data.tags["lit_sb3.trial_number"]: r for r in _runs(uri, "prune", "trial")}
    run = runs[str(pruned[0].number)]
    assert run.data.tags["lit_sb3.trial_state"] == "pruned" and run.info.status == "KILLED"
    assert run.info.run_name.endswith("(pruned)")  # MLflow has no pruned status: the name says it
    assert run.data.metrics["trial/env_steps"] < 1024
    (seed,) = [r for r in _runs(uri, "prune", "trial_seed") if r.data.tags["mlflow.parentRunId"] == run.info.run_id]
    assert seed.info.status == "KILLED" and seed.data.tags["lit_sb3.trial_state"] == "pruned"
    assert seed.info.run_name == "s0 ppo CartPole-v1 (pruned)"
    assert seed.data.metrics["time/total_timesteps"] < 1024


def test_failed_trial_is_recorded_and_the_study_goes_on(in_tmp_path: Path, mlflow_template: Path) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    space = {"replace": True, "params": {"n_envs": 2, "n_steps": 64, "n_epochs": 1,
                                         "batch_size": {"type": "categorical", "choices": [1, 64]}}}  # fmt: skip
    journal = in_tmp_path / "optuna" / "f.journal"
    _precreate(journal, "f", [{"batch_size": 1}, {"batch_size": 64}])  # PPO refuses batch_size 1
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--study-name", "f", "--n-trials", "1", *BUDGET,
            "--search-space", _space(in_tmp_path, space), "--tracking-uri", uri, "--experiment", "fail"]  # fmt: skip
    assert main(argv) == 0
    from optuna.trial import TrialState

    study = _study(journal, "f")
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert "batch_size" in study.trials[0].user_attrs["failure_reason"]
    run = {r.data.tags["lit_sb3.trial_number"]: r for r in _runs(uri, "fail", "trial")}["0"]
    assert run.info.status == "FAILED" and run.data.tags["lit_sb3.trial_state"] == "failed"
    assert "batch_size" in run.data.tags["lit_sb3.failure_reason"]


# ---------------------------------------------------------------------------------------------------------
# two worker processes on one study
# ---------------------------------------------------------------------------------------------------------
def test_two_workers_share_one_study(in_tmp_path: Path, mlflow_template: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Two workers (asked for with the RL Zoo's flag, --n-jobs) run the study's 4 trials, not one more each (Optuna's
    MaxTrialsCallback counts finished trials only: a worker started a fifth while the other's last one ran), with
    no warning on the way; and the lines the study ends with: the best config, the study in MLflow and in
    optuna-dashboard, and the next command. (A fifth trial remains possible only if both workers count in the
    same few milliseconds between one's count and its next trial's creation, against trials of seconds.)"""
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--n-trials", "4", "--n-jobs", "2", *BUDGET,
            "--search-space", _space(in_tmp_path), "--seed", "3", "--tracking-uri", uri]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "Warning" not in err, err
    tail = out.splitlines()[-4:]
    best = in_tmp_path / "optuna" / "ppo-CartPole-v1_best.yml"
    assert tail[0].startswith("best trial ") and tail[0].endswith(f"zoo config written to {best}")
    assert tail[1].startswith("trials in MLflow: mlflow ui --backend-store-uri ")
    assert (
        tail[2] == f"study in optuna-dashboard: optuna-dashboard {in_tmp_path / 'optuna' / 'ppo-CartPole-v1.journal'}"
    )
    assert tail[3].startswith(f"next: bench run --algos ppo --envs CartPole-v1 --config {best} --seeds 5")
    study = _study(in_tmp_path / "optuna" / "ppo-CartPole-v1.journal", "ppo-CartPole-v1")
    numbers = [t.number for t in study.trials]
    assert len(numbers) == len(set(numbers)) == 4 and len(_finished(study)) == 4
    run_numbers = [r.data.tags["lit_sb3.trial_number"] for r in _runs(uri, "tune-ppo-CartPole-v1", "trial")]
    assert len(run_numbers) == len(set(run_numbers)) == len(numbers)


# ---------------------------------------------------------------------------------------------------------
# search spaces and errors (nothing trains)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo,env_id", [("ppo", "CartPole-v1"), ("a2c", "CartPole-v1"), ("dqn", "CartPole-v1"),
                                         ("sac", "Pendulum-v1"), ("td3", "Pendulum-v1"), ("ddpg", "Pendulum-v1")])  # fmt: skip
def test_builtin_search_spaces_resolve(algo: str, env_id: str) -> None:
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
        assert "net_arch" in cfg.algo_kwargs["policy_kwargs"]
        if algo == "ppo":
            assert cfg.algo_kwargs["batch_size"] <= cfg.algo_kwargs["n_steps"] * cfg.n_envs
            assert cfg.algo_kwargs["gamma"] == pytest.approx(1 - point["one_minus_gamma"])


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--sampler", "tpee"], "unknown sampler 'tpee' (did you mean 'tpe'?)"),
        (["--pruner", "medain"], "unknown pruner 'medain' (did you mean 'median'?)"),
        (["--algo", "ppp"], "unknown algorithm 'ppp'"),
        (["--env", "CartPol-v1"], "unknown env id 'CartPol-v1'"),
        (["--search-space", "@unknown"], "unknown parameter 'learning_rat'"),
        (["--search-space", "@empty"], "parameter 'learning_rate': empty range"),
        (["--search-space", "@badtype"], "parameter 'n_epochs': type must be one of"),
        (["--search-space", "@gamma5"], "gamma5.yml: gamma: bad value 5: must be in [0, 1]"),  # fixed wins, checked
        (["--search-space", "@both"], "'gamma' and 'one_minus_gamma' both set gamma: keep one of them"),
        (["--storage", "@unwritable"], "cannot open journal storage"),
        (["--storage", "postgresql://u:p@127.0.0.1:1/db"], "cannot open storage 'postgresql://"),
        (["--eval-freq", "1000"], "--eval-freq is the RL Zoo's flag: give --n-evaluations N"),
        (["--log-folder", "logs"], "--log-folder is the RL Zoo's flag: give --output FILE"),
    ],
)
def test_errors(extra: list[str], message: str, in_tmp_path: Path, mlflow_template: Path,
                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    uri = _store(in_tmp_path, mlflow_template)
    files = {
        "@unknown": {"learning_rat": {"type": "float", "low": 1e-4, "high": 1e-3}},
        "@empty": {"learning_rate": {"type": "float", "low": 1e-3, "high": 1e-4}},
        "@badtype": {"n_epochs": {"type": "integer", "low": 1, "high": 3}},
        "@gamma5": {"gamma": 5},
        "@both": {"gamma": 0.97, "one_minus_gamma": {"type": "float", "low": 0.001, "high": 0.1}},
    }
    (in_tmp_path / "afile").write_text("")
    extra = [
        _space(in_tmp_path, files[x], f"{x[1:]}.yml") if x in files
        else str(in_tmp_path / "afile" / "sub" / "s.journal") if x == "@unwritable" else x
        for x in extra
    ]  # fmt: skip
    options = {"--algo": "ppo", "--env": "CartPole-v1", "--n-trials": "1", "--tracking-uri": uri}
    for key, value in zip(extra[::2], extra[1::2]):
        options[key] = value
    argv = ["tune"] + [x for kv in options.items() for x in kv] + BUDGET
    t0 = time.monotonic()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert time.monotonic() - t0 < 30
    assert message in err and len(err.splitlines()) == 1, err
    if "--search-space" in options:
        assert f"--search-space {options['--search-space']}" in err  # the message names the option and file
        assert "--hyperparams" not in err
    assert not (in_tmp_path / "optuna").exists() or "--storage" in options  # nothing was started


def test_a_fixed_value_wins_over_the_builtin_derived_one(tmp_path: Path) -> None:
    """A file that fixes gamma (or policy_kwargs.net_arch) replaces the built-in one_minus_gamma (net_arch):
    what the RL Zoo user wrote is what every trial gets."""
    import optuna

    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.errors import BenchError
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.tuning.search_spaces import load_search_space, sample_params, to_hyperparameters

    path = _space(tmp_path, {"gamma": 0.97, "policy_kwargs": "dict(net_arch=[32, 32])"})
    space = load_search_space("ppo", path)
    assert "one_minus_gamma" not in space.params and "net_arch" not in space.params
    assert "activation_fn" in space.params and "one_minus_gae_lambda" in space.params  # the rest stays
    base = resolve("ppo", "CartPole-v1")
    for trial in (optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=s)).ask() for s in range(3)):
        hp, _ = to_hyperparameters("ppo", sample_params(trial, space), space.fixed, base.algo_kwargs, base.n_envs)
        assert hp["gamma"] == 0.97 and hp["policy_kwargs"].startswith("dict(net_arch=[32, 32], activation_fn=")
    # a value that fails in a trial names the search space, not --hyperparams
    with pytest.raises(BenchError, match=r"^--search-space f\.yml: gamma: bad value 5"):
        plan_grid(["ppo"], ["CartPole-v1"], [0], n_timesteps=4096, overrides={"gamma": "5"},
                  overrides_label="--search-space f.yml")  # fmt: skip


def test_seed_reports_are_running_means_and_objectives() -> None:
    import optuna

    from lit_sb3.zoo.tuning.objective import objective_value
    from lit_sb3.zoo.tuning.pruning import TrialReporter

    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    first = TrialReporter(trial, 0, 1000, 500, [])
    assert first(500, 10.0) and first(1000, 20.0)
    second = TrialReporter(trial, 1, 1000, 500, [first.values])
    assert second(500, 30.0) and second(1000, 40.0)
    assert trial.storage.get_trial(trial._trial_id).intermediate_values == {500: 10.0, 1000: 20.0, 1500: 20.0,
                                                                            2000: 30.0}  # fmt: skip
    assert objective_value("final", [[1.0, 2.0, 3.0, 4.0], [5.0]], [4.0, 5.0]) == 4.5
    assert objective_value("last_mean", [[1.0, 2.0, 3.0, 4.0], [5.0]], [4.0, 5.0]) == pytest.approx((3.0 + 5.0) / 2)


# ---------------------------------------------------------------------------------------------------------
# exact budgets and evaluation grids
# ---------------------------------------------------------------------------------------------------------
def test_budget_not_a_multiple_of_the_rollout(in_tmp_path: Path, mlflow_template: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """1,100 env steps, 3 evaluations (one requested every 366 steps), rollouts of 2 x n_steps in 32..512."""
    from optuna.trial import TrialState

    uri = _store(in_tmp_path, mlflow_template)
    space = {"replace": True, "params": {"n_envs": 2, "batch_size": 32, "n_epochs": 1,
                                         "n_steps": {"type": "categorical", "choices": [16, 64, 128, 256]}}}  # fmt: skip
    journal = in_tmp_path / "optuna" / "b.journal"
    _precreate(journal, "b", [{"n_steps": 16}, {"n_steps": 64}, {"n_steps": 128}])
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--study-name", "b", "--n-trials", "3",
            "--n-timesteps", "1100", "--n-evaluations", "3", "--eval-episodes", "1", "--pruner", "none",
            "--n-startup-trials", "1", "--search-space", _space(in_tmp_path, space), "--tracking-uri", uri,
            "--experiment", "budget"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    # the space adapts (a rollout of 2 x 256 does not fit between two evaluations) and says so, in one line each
    assert "search space adapted to the budget: n_steps [16, 64, 128, 256] -> [16, 64, 128]" in out
    assert "budget: 1,100 env steps per seed, rounded up by each trial to whole rollouts" in out
    study = _study(journal, "b")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    seed_runs = {r.data.tags["mlflow.parentRunId"]: r for r in _runs(uri, "budget", "trial_seed")}
    trial_runs = {r.data.tags["lit_sb3.trial_number"]: r for r in _runs(uri, "budget", "trial")}
    from tests.mlflow_store import client

    c = client(uri)
    for trial in study.trials:
        rollout = 2 * trial.params["n_steps"]
        budget = -(-1100 // rollout) * rollout  # whole rollouts, rounded up: 1,120 / 1,152 / 1,280
        assert trial.user_attrs["budget_per_seed"] == budget == trial.user_attrs["env_steps"]
        seed = seed_runs[trial_runs[str(trial.number)].info.run_id]
        assert seed.data.metrics["time/total_timesteps"] == budget
        steps = [m.step for m in c.get_metric_history(seed.info.run_id, "eval/mean_reward")]
        # exactly 3 evaluations, each at the first rollout boundary at or after 366, 732, 1,098 (the last one is
        # the end of the budget, so no extra final evaluation)
        assert steps == [-(-r // rollout) * rollout for r in (366, 732, 1098)], (rollout, steps)
        assert all(s >= rollout for s in steps)  # none before the first update
        # Optuna holds exactly 3 intermediate values, on the study's grid, within the budget
        assert sorted(trial.intermediate_values) == [366, 732, 1098]
    from lit_sb3.zoo.tuning.progress import StudyProgress

    # the trials ran 1,120 + 1,152 + 1,280 env steps (whole rollouts); the progress counts each within its budget
    line = StudyProgress(str(journal), "b", 3, 1100, 1, 30.0).line()
    assert "env steps: 3,300/3,300" in line, line


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--n-timesteps", "100", "--n-evaluations", "1"],
         "the budget of 100 env steps is smaller than one rollout (n_steps 64 x n_envs 2 = 128 env steps)"),
        (["--n-timesteps", "512", "--n-evaluations", "8"],
         "one rollout (n_steps 64 x n_envs 2 = 128 env steps) is longer than the 64 env steps between two evaluations"),
    ],
)  # fmt: skip
def test_too_small_budget_is_one_line(argv: list[str], message: str, in_tmp_path: Path, mlflow_template: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    uri = _store(in_tmp_path, mlflow_template)
    space = {"replace": True, "params": {"n_envs": 2, "n_steps": 64, "batch_size": 64, "n_epochs": 1}}
    full = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--n-trials", "1", *argv,
            "--search-space", _space(in_tmp_path, space), "--tracking-uri", uri]  # fmt: skip
    capsys.readouterr()
    assert main(full) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (in_tmp_path / "optuna").exists()  # nothing was started
