"""``bench run --seed-batch K``: seeds of one algo x env trained together in one process (one seed-batched model),
each seed still tracked as its own job run, in a real MLflow sqlite store, with real worker processes (tiny
budgets); a seed that diverges fails alone; a re-run runs only the unfinished seeds; Ray runs a batch as one task.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs

ROOT = Path(__file__).resolve().parent.parent
NAN_SEED = "tests.envs.nan_seed:NaNSeed-v0"
KILL_ONCE = "tests.envs.kill_once:KillOnce-v0"
# SAC on Pendulum, small enough for a test: 400 env steps per seed, updates from step 100, two evaluations
TINY_SAC = ["--algos", "sac", "--envs", "Pendulum-v1", "--n-timesteps", "400", "--eval-freq", "200",
            "--eval-episodes", "1", "--hyperparams", "learning_starts=100", "buffer_size=5000", "batch_size=64",
            "policy_kwargs=dict(net_arch=[32, 32])"]  # fmt: skip
TINY_PPO = ["--algos", "ppo", "--envs", "CartPole-v1", "--n-timesteps", "512", "--eval-freq", "256",
            "--eval-episodes", "1", "--hyperparams", "n_envs=1", "n_steps=64", "batch_size=32", "n_epochs=2",
            "policy_kwargs=dict(net_arch=[32, 32])"]  # fmt: skip
#: per algorithm: its command-line part, budget, evaluation steps and one of its training losses
CASES = {
    "sac": (TINY_SAC, 400, [200, 400], "train/critic_loss"),
    "ppo": (TINY_PPO, 512, [256, 512], "train/value_loss"),
}


def _bench(folder: Path, argv: list[str]) -> int:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return main(argv)
    finally:
        os.chdir(cwd)


def _by_seed(uri: str, experiment: str) -> dict[int, Any]:
    runs = _runs(uri, experiment)
    assert len({r.data.tags["lit_sb3.seed"] for r in runs}) == len(runs), "one run per seed"
    return {int(r.data.tags["lit_sb3.seed"]): r for r in runs}


# ---------------------------------------------------------------------------------------------------------
# planning: grouping and validation (no training)
# ---------------------------------------------------------------------------------------------------------
def test_seed_batches_group_seeds_of_one_config() -> None:
    from lit_sb3.zoo.errors import BenchError
    from lit_sb3.zoo.jobs import plan_grid, seed_batches

    jobs, _ = plan_grid(["sac", "ppo"], ["Pendulum-v1"], range(6), n_timesteps=4096)
    sac = [j for j in jobs if j.algo == "sac"]
    ppo = [j for j in jobs if j.algo == "ppo"]
    assert seed_batches(jobs, 4) == [sac[:3], sac[3:], ppo[:3], ppo[3:]]  # balanced, in the place of their first job
    assert seed_batches(jobs, 1) == [[job] for job in jobs]  # every unit is a batch; a single job is one of one
    assert seed_batches(jobs, 10)[0] == sac  # K > number of seeds is fine
    assert seed_batches(sac[:5], 4) == [sac[:3], sac[3:5]]
    assert seed_batches(sac[:3], 2) == [sac[:2], sac[2:3]]
    other, _ = plan_grid(["sac"], ["Pendulum-v1"], [6, 7], n_timesteps=8192)  # another budget: another batch
    assert seed_batches([*sac[:2], *other], 4) == [sac[:2], other]
    with pytest.raises(BenchError, match="--seed-batch must be >= 1"):
        seed_batches(jobs, 0)


@pytest.mark.parametrize("value", ["0", "two"])
def test_bad_seed_batch_is_one_line_before_anything(value: str, in_tmp_path: Path, mlflow_template: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", *TINY_SAC, "--seeds", "2", "--seed-batch", value, "--tracking-uri", uri, "--experiment", "bad"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    if value == "two":
        assert err == [
            "bench run: error: argument --seed-batch: expected 'auto' or an integer >= 1, got 'two' (see bench run --help)"
        ]
    else:
        assert err == [f"bench run: error: --seed-batch must be in [1, 100,000], got {value}"]
    assert _runs(uri, "bad", None) == []


# ---------------------------------------------------------------------------------------------------------
# a batch of four SAC seeds against the same job run alone
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=sorted(CASES))
def batched(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            mlflow_template: Path) -> tuple[str, str, Path]:  # fmt: skip
    """Experiment ``batched``: seeds 0-3 in one batch; experiment ``single``: seed 0 alone (one process)."""
    algo = request.param
    folder = tmp_path_factory.mktemp(f"seed-batch-{algo}")
    uri = _store(folder, mlflow_template)
    common = ["--jobs", "2", "--tracking-uri", uri, *CASES[algo][0]]
    assert _bench(folder, ["run", "--seeds", "4", "--seed-batch", "4", "--experiment", "batched", *common]) == 0
    assert _bench(folder, ["run", "--seeds", "1", "--experiment", "single", *common]) == 0
    return algo, uri, folder


def test_batched_seeds_are_tracked_as_separate_jobs(batched: tuple[str, str, Path], tmp_path: Path) -> None:
    from lit_sb3.zoo.registry import get_algo_class

    algo, uri, _ = batched
    _, budget, eval_steps, loss = CASES[algo]
    runs = _by_seed(uri, "batched")
    single = _by_seed(uri, "single")[0]
    assert sorted(runs) == [0, 1, 2, 3]
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    env = single.data.tags["lit_sb3.env"]
    assert {r.info.run_name for r in runs.values()} == {f"s{s} {algo} {env}" for s in range(4)}
    client = _client(uri)
    ref_metrics = set(single.data.metrics)
    ref_artifacts = {a.path for a in client.list_artifacts(single.info.run_id)}
    assert {"config.json", "config.yml", "model.zip", "evaluations.csv"} <= ref_artifacts
    for seed, run in runs.items():
        # the same params as the job run alone (seed 0: the very same job), the same tags, metrics, artifacts
        assert run.data.params == dict(single.data.params, seed=str(seed))
        assert set(run.data.tags) - {"mlflow.parentRunId"} == set(single.data.tags) - {"mlflow.parentRunId"}
        assert set(run.data.metrics) == ref_metrics, set(run.data.metrics) ^ ref_metrics
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == ref_artifacts
        evals = client.get_metric_history(run.info.run_id, "eval/mean_reward")
        assert [m.step for m in evals] == eval_steps  # every periodic evaluation of this seed, on env steps
        assert run.data.metrics["final/mean_reward"] == pytest.approx(evals[-1].value)
        assert run.data.metrics["time/total_timesteps"] == budget
        losses = client.get_metric_history(run.info.run_id, loss)
        assert losses and all(0 < m.step <= budget for m in losses)
        path = client.download_artifacts(run.info.run_id, "model.zip", str(tmp_path / str(seed)))
        model = get_algo_class(algo).load(path)  # the single-seed class loads it
        assert model.seed == seed and model.num_timesteps == budget
        action, _ = model.predict(model.observation_space.sample(), deterministic=True)
        assert model.action_space.contains(action.reshape(model.action_space.shape).astype(model.action_space.dtype))
    assert runs[0].data.tags["lit_sb3.job_id"] == single.data.tags["lit_sb3.job_id"]
    assert single.data.tags["lit_sb3.seed_batch"] == "1"
    assert {r.data.tags["lit_sb3.seed_batch"] for r in runs.values()} == {"4"}  # the four trained together
    # trained together: one fit, so the seeds share its speed exactly; and they learned separately
    assert len({r.data.metrics["time/fps"] for r in runs.values()}) == 1
    assert len({tuple(m.value for m in client.get_metric_history(r.info.run_id, loss)) for r in runs.values()}) == 4


@pytest.mark.parametrize("batched", ["sac"], indirect=True)  # one algorithm is enough here
def test_rerun_runs_only_unfinished_seeds(batched: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``single`` holds seed 0; the same grid with three seeds batched runs seeds 1 and 2 only, as one batch."""
    _, uri, folder = batched
    capsys.readouterr()
    argv = ["run", "--seeds", "3", "--seed-batch", "4", "--experiment", "single", "--jobs", "2",
            "--tracking-uri", uri, *TINY_SAC]  # fmt: skip
    assert _bench(folder, argv) == 0
    out = capsys.readouterr().out
    assert "--seed-batch 4: 2 job(s) in 1 seed batch(es), 1 unit(s) to run" in out
    runs = _runs(uri, "single")
    assert sorted(int(r.data.tags["lit_sb3.seed"]) for r in runs) == [0, 1, 2]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert _bench(folder, argv) == 0
    assert "nothing to do" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------
# a seed whose env turns NaN fails alone
# ---------------------------------------------------------------------------------------------------------
def test_diverging_seed_fails_alone(in_tmp_path: Path, mlflow_template: Path) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "sac", "--envs", NAN_SEED, "--seeds", "3", "--seed-batch", "3", "--jobs", "1",
            "--tracking-uri", uri, "--experiment", "nan", "--n-timesteps", "300", "--eval-freq", "150",
            "--eval-episodes", "1", "--hyperparams", "learning_starts=50", "buffer_size=1000", "batch_size=32",
            "policy_kwargs=dict(net_arch=[16])", "env_kwargs=dict(nan_seed=1, fail_after=120)"]  # fmt: skip
    assert main(argv) == 1
    runs = _by_seed(uri, "nan")
    assert {s: r.info.status for s, r in runs.items()} == {0: "FINISHED", 1: "FAILED", 2: "FINISHED"}
    reason = runs[1].data.tags["lit_sb3.failure_reason"]
    assert reason.startswith("diverged:") and "reward" in reason and "121" in reason, reason
    client = _client(uri)
    assert "traceback.txt" in {a.path for a in client.list_artifacts(runs[1].info.run_id)}
    for seed in (0, 2):
        assert runs[seed].data.metrics["time/total_timesteps"] == 300
        assert "model.zip" in {a.path for a in client.list_artifacts(runs[seed].info.run_id)}
    grid = _runs(uri, "nan", "grid")[0]
    assert grid.info.status == "FAILED" and grid.data.metrics["jobs/failed"] == 1


def test_a_seed_whose_env_raises_fails_alone_and_a_rerun_redoes_only_it(in_tmp_path: Path, mlflow_template: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Seed 1's env raises after 120 steps in a batch of 4: seeds 0, 2, 3 finish (FINISHED, full budget, a model),
    seed 1 is FAILED with its own reason; the rerun runs seed 1 alone (it fails the same way) and no healthy seed."""
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "sac", "--envs", NAN_SEED, "--seeds", "4", "--seed-batch", "4", "--jobs", "1",
            "--tracking-uri", uri, "--experiment", "raise", "--n-timesteps", "300", "--eval-freq", "150",
            "--eval-episodes", "1", "--hyperparams", "learning_starts=50", "buffer_size=1000", "batch_size=32",
            "policy_kwargs=dict(net_arch=[16])", "env_kwargs=dict(nan_seed=1, fail_after=120, fail_with='raise')"]  # fmt: skip
    assert main(argv) == 1
    runs = _by_seed(uri, "raise")
    assert {s: r.info.status for s, r in runs.items()} == {0: "FINISHED", 1: "FAILED", 2: "FINISHED", 3: "FINISHED"}
    reason = runs[1].data.tags["lit_sb3.failure_reason"]
    assert "env raised at step 121: RuntimeError: the env of seed 1 broke" in reason, reason
    for seed in (0, 2, 3):
        assert runs[seed].data.metrics["time/total_timesteps"] == 300
    capsys.readouterr()
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "1 job(s)" in out, out
    after = _runs(uri, "raise")
    assert sorted(int(r.data.tags["lit_sb3.seed"]) for r in after if r.info.status == "FINISHED") == [0, 2, 3]
    assert sum(int(r.data.tags["lit_sb3.seed"]) == 1 for r in after) == 2  # seed 1 ran again, alone


def test_record_final_records_each_seed_of_a_batch(in_tmp_path: Path, mlflow_template: Path) -> None:
    """``--record-final`` with ``--seed-batch``: each seed's final evaluation is an mp4 in its own run."""
    imageio = pytest.importorskip("imageio")
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", *TINY_PPO, "--seeds", "2", "--seed-batch", "2", "--jobs", "1", "--record-final",
            "--tracking-uri", uri, "--experiment", "video"]  # fmt: skip
    assert main(argv) == 0
    client = _client(uri)
    for seed, run in _by_seed(uri, "video").items():
        assert run.info.status == "FINISHED"
        videos = [a.path for a in client.list_artifacts(run.info.run_id, "videos")]
        assert videos == [f"videos/final-{run.data.tags['lit_sb3.job_id']}.mp4"], (seed, videos)
        path = client.download_artifacts(run.info.run_id, videos[0], str(in_tmp_path / f"v{seed}"))
        frames = imageio.v3.imread(path)  # CartPole's rgb_array frames: 400 x 600
        assert frames.ndim == 4 and frames.shape[1:] == (400, 600, 3) and len(frames) >= 2


# ---------------------------------------------------------------------------------------------------------
# Ray: a batch is one task
# ---------------------------------------------------------------------------------------------------------
def test_ray_runs_a_batch_as_one_task(in_tmp_path: Path, mlflow_template: Path) -> None:
    ray = pytest.importorskip("ray")
    from lit_sb3.zoo.launchers.ray_launcher import ATTEMPT_TAG

    assert os.environ.get("PYTHONPATH"), "conftest sets PYTHONPATH so that Ray workers import tests.envs"
    uri = _store(in_tmp_path, mlflow_template)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        code = main(["run", "--launcher", "ray", "--algos", "sac", "--envs", NAN_SEED, "--seeds", "2",
                     "--seed-batch", "2", "--cpus-per-job", "2", "--tracking-uri", uri, "--experiment", "ray",
                     "--n-timesteps", "200", "--eval-freq", "100", "--eval-episodes", "1", "--hyperparams",
                     "learning_starts=50", "buffer_size=1000", "batch_size=32", "policy_kwargs=dict(net_arch=[16])",
                     "env_kwargs=dict(nan_seed=-1)"])  # fmt: skip
    finally:
        ray.shutdown()
    assert code == 0
    runs = _by_seed(uri, "ray")
    assert sorted(runs) == [0, 1] and {r.info.status for r in runs.values()} == {"FINISHED"}
    attempts = {r.data.tags[ATTEMPT_TAG] for r in runs.values()}
    assert len(attempts) == 1 and next(iter(attempts)).startswith("1 "), attempts  # one task (same process)
    client = _client(uri)
    for run in runs.values():
        assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/mean_reward")] == [100, 200]
        assert "model.zip" in {a.path for a in client.list_artifacts(run.info.run_id)}


# ---------------------------------------------------------------------------------------------------------
# evaluation hooks (bench tune's pruning) stop the whole batch; bench tune batches a trial's seeds
# ---------------------------------------------------------------------------------------------------------
def test_hook_stops_the_whole_batch(in_tmp_path: Path, mlflow_template: Path) -> None:
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.runner import run_jobs
    from lit_sb3.zoo.tracking import open_tracking

    uri = _store(in_tmp_path, mlflow_template)
    tracking = open_tracking(uri, "hook")
    overrides = {"learning_starts": "50", "buffer_size": "1000", "batch_size": "32",
                 "policy_kwargs": "dict(net_arch=[16])", "env_kwargs": "dict(nan_seed=-1)"}  # fmt: skip
    jobs, _ = plan_grid(["sac"], [NAN_SEED], [3, 4], n_timesteps=400, eval_freq=100, eval_episodes=1,
                        overrides=overrides)  # fmt: skip
    seen: list[tuple[int, int]] = []

    def stop_second_seed_at_200(step: int, mean_reward: float) -> bool:
        seen.append((step, len(seen)))
        return step < 200

    results = run_jobs(jobs, tracking.target, seed_hooks=[[], [stop_second_seed_at_200]], stopped_status="KILLED")
    assert [s for s, _ in seen] == [100, 200]
    assert [(r.status, r.stopped_early, r.env_steps) for r in results] == [("KILLED", True, 200)] * 2
    assert [[step for step, _ in r.evaluations] for r in results] == [[100, 200]] * 2
    runs = _by_seed(uri, "hook")
    assert {r.info.status for r in runs.values()} == {"KILLED"}
    assert {r.data.tags["lit_sb3.stopped_early"] for r in runs.values()} == {"true"}


def test_tune_trains_the_seeds_of_a_trial_as_one_batch(in_tmp_path: Path, mlflow_template: Path) -> None:
    import statistics

    import yaml

    uri = _store(in_tmp_path, mlflow_template)
    space = in_tmp_path / "space.yml"
    space.write_text(yaml.safe_dump({"replace": True, "params": {
        "learning_starts": 50, "buffer_size": 1000, "batch_size": 32, "net_arch": "tiny",
        "learning_rate": {"type": "float", "low": 1e-4, "high": 3e-3, "log": True}}}))  # fmt: skip
    argv = ["tune", "--algo", "sac", "--env", "Pendulum-v1", "--n-trials", "1", "--seeds-per-trial", "2",
            "--seed-batch", "2", "--n-timesteps", "200", "--n-evaluations", "2", "--eval-episodes", "1",
            "--search-space", str(space), "--pruner", "none", "--seed", "0", "--study-name", "b",
            "--storage", str(in_tmp_path / "b.journal"), "--tracking-uri", uri, "--experiment", "tune"]  # fmt: skip
    assert main(argv) == 0
    (trial,) = _runs(uri, "tune", "trial")
    seeds = _runs(uri, "tune", "trial_seed")
    assert sorted(r.data.tags["lit_sb3.seed_index"] for r in seeds) == ["0", "1"]
    assert {r.info.status for r in seeds} == {"FINISHED"} and trial.info.status == "FINISHED"
    finals = [r.data.metrics["final/mean_reward"] for r in seeds]
    assert trial.data.metrics["trial/value"] == pytest.approx(statistics.fmean(finals))
    # trained together: one fit, so the two seeds share its wall time and speed exactly
    assert seeds[0].data.metrics["time/fps"] == seeds[1].data.metrics["time/fps"]


#: configs that cannot be one K-seed model: the library refuses (NotImplementedError when the batch is built;
#: gSDE with train_freq in episodes is not batched yet: when it is, use what the library still refuses), or the
#: suite does (config callbacks)
_SMALL = {"learning_starts": "50", "buffer_size": "1000", "batch_size": "32", "policy_kwargs": "dict(net_arch=[16])"}
#: who refuses -> (algo, env, overrides, the words of the refusal): the library (a Discrete observation space, which
#: the seed replay storage does not hold yet) or the suite (callbacks built per model)
REFUSED = {
    "library": ("dqn", "FrozenLake-v1", _SMALL, "supports Box observations (vectors, images) only"),
    "suite": ("sac", NAN_SEED, {**_SMALL, "env_kwargs": "dict(nan_seed=-1)",
               "callback": "[{'lit_sb3.callbacks.StopTrainingOnMaxEpisodes': {'max_episodes': 1000}}]"},
              f"sac on {NAN_SEED}: the config's callbacks run on one model per seed"),
}  # fmt: skip


@pytest.mark.parametrize("who", sorted(REFUSED))
def test_config_the_batch_cannot_build_runs_seed_by_seed_through_the_same_path(
    who: str, in_tmp_path: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from lit_sb3.zoo import runner
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.tracking import open_tracking

    algo, env, overrides, reason = REFUSED[who]
    calls: list[int] = []
    train = runner._train
    monkeypatch.setattr(runner, "_train", lambda seeds, *args: calls.append(len(seeds)) or train(seeds, *args))
    uri = _store(in_tmp_path, mlflow_template)
    jobs, _ = plan_grid([algo], [env], [0, 1], n_timesteps=128, eval_freq=128, eval_episodes=1,
                        overrides=overrides)  # fmt: skip
    results = runner.run_jobs(jobs, open_tracking(uri, "refused").target)
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("seed batch of 2: ")]
    assert reason in line and line.endswith("; its seeds run as batches of one, one after the other"), line
    assert calls == [2, 1, 1]  # the batch was refused before any training, then each seed alone: the same function
    assert [r.status for r in results] == ["FINISHED"] * 2
    assert results[0].fps != results[1].fps  # two fits
    assert {(r.info.status, r.data.tags["lit_sb3.seed_batch"]) for r in _by_seed(uri, "refused").values()} == {
        ("FINISHED", "1")  # trained alone
    }


def test_ars_seed_batch_runs_into_per_seed_runs(in_tmp_path: Path, mlflow_template: Path) -> None:
    """``bench run --algos ars --seed-batch 2``: both seeds train as one ARS model (no refusal: one fit), each into
    its own FINISHED run with its own metrics, evaluations and a model the single class loads."""
    from lit_sb3 import ARS

    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "ars", "--envs", "CartPole-v1", "--seeds", "2", "--seed-batch", "2", "--jobs", "1",
            "--n-timesteps", "300", "--eval-freq", "150", "--eval-episodes", "1", "--hyperparams", "n_delta=1",
            "n_top=1", "--tracking-uri", uri, "--experiment", "ars"]  # fmt: skip
    assert _bench(in_tmp_path, argv) == 0
    runs = _by_seed(uri, "ars")
    assert sorted(runs) == [0, 1]
    assert {(r.info.status, r.data.tags["lit_sb3.seed_batch"]) for r in runs.values()} == {("FINISHED", "2")}
    seconds = {round(r.data.metrics["time/total_timesteps"] / r.data.metrics["time/fps"], 9) for r in runs.values()}
    assert len(seconds) == 1  # one fit (each seed's fps is its own env-step count over the fit's time)
    client = _client(uri)
    for seed, run in runs.items():
        assert run.data.params["seed"] == str(seed)
        assert {"train/step_size", "rollout/return_std", "eval/mean_reward", "final/mean_reward"} <= set(
            run.data.metrics
        )
        assert run.data.metrics["time/total_timesteps"] >= 300  # whole iterations, each seed its own count
        path = client.download_artifacts(run.info.run_id, "model.zip", str(in_tmp_path / f"m{seed}"))
        assert ARS.load(path).seed == seed


def test_ppo_lstm_seed_batch_runs_into_per_seed_runs(in_tmp_path: Path, mlflow_template: Path) -> None:
    """``bench run --algos ppo_lstm --seed-batch 2``: both seeds train as one RecurrentPPO (one fit, an LSTM per
    seed), each into its own FINISHED run with its own metrics, evaluations (its member carries its LSTM state
    through the evaluation episodes) and a model the single class loads."""
    from lit_sb3 import RecurrentPPO

    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "ppo_lstm", "--envs", "CartPole-v1", "--seeds", "2", "--seed-batch", "2", "--jobs", "1",
            "--n-timesteps", "256", "--eval-freq", "128", "--eval-episodes", "1", "--hyperparams", "n_envs=1",
            "n_steps=64", "batch_size=32", "n_epochs=2", "policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8)",
            "--tracking-uri", uri, "--experiment", "lstm"]  # fmt: skip
    assert _bench(in_tmp_path, argv) == 0
    runs = _by_seed(uri, "lstm")
    assert sorted(runs) == [0, 1]
    assert {(r.info.status, r.data.tags["lit_sb3.seed_batch"]) for r in runs.values()} == {("FINISHED", "2")}
    seconds = {round(r.data.metrics["time/total_timesteps"] / r.data.metrics["time/fps"], 9) for r in runs.values()}
    assert len(seconds) == 1  # one fit
    client = _client(uri)
    for seed, run in runs.items():
        assert run.data.params["seed"] == str(seed)
        assert {"train/value_loss", "train/approx_kl", "eval/mean_reward", "final/mean_reward"} <= set(run.data.metrics)
        assert run.data.metrics["time/total_timesteps"] == 256
        path = client.download_artifacts(run.info.run_id, "model.zip", str(in_tmp_path / f"m{seed}"))
        loaded = RecurrentPPO.load(path)
        assert loaded.seed == seed and loaded.n_seeds == 1


def test_a_single_model_is_a_batch_of_one_seed() -> None:
    """The seed API the job path uses, on a single model: one seed, ``member(0)`` is the model, ``fail_seed(0)`` stops
    its fit after the current step and keeps the reason."""
    from lit_sb3 import PPO, RLEnvDataModule, RLTrainer
    from lit_sb3.callbacks import BaseCallback

    class FailAt64(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == 64:
                self.model.fail_seed(0, "diverged:  stopped\n by the test")
            return True

    model = PPO("MlpPolicy", n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=dict(net_arch=[8]), seed=0)
    assert model.n_seeds == 1 and model.member(0) is model and model.failed == {}
    with pytest.raises(IndexError, match="seed index"):
        model.member(1)
    RLTrainer(max_steps=512, rl_callback=FailAt64(), enable_progress_bar=False).fit(
        model, datamodule=RLEnvDataModule(train_env="CartPole-v1")
    )
    assert model.failed == {0: "diverged: stopped by the test"}
    assert 64 <= model.num_timesteps < 512  # the fit ended at the end of that collect/update cycle


def test_single_job_and_seed_batch_go_through_the_same_worker_function(
    in_tmp_path: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_job`` (a single job) and a batch of two are both :func:`runner._train` of a model built by
    :func:`runner._build_model`: one seed (the algorithm class itself) or two (``SeedBatch``), recorded alike."""
    from lit_sb3 import SAC
    from lit_sb3.zoo import runner
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.tracking import open_tracking

    calls: list[tuple[int, int, type]] = []
    train, build = runner._train, runner._build_model

    def spy_build(seeds: Any) -> Any:
        model = build(seeds)
        calls.append((len(seeds), model.n_seeds, type(model.member(len(seeds) - 1))))
        return model

    trained: list[int] = []
    monkeypatch.setattr(runner, "_build_model", spy_build)
    monkeypatch.setattr(runner, "_train", lambda seeds, *args: trained.append(len(seeds)) or train(seeds, *args))
    uri = _store(in_tmp_path, mlflow_template)
    tracking = open_tracking(uri, "same")
    overrides = {"learning_starts": "50", "buffer_size": "1000", "batch_size": "32",
                 "policy_kwargs": "dict(net_arch=[16])", "env_kwargs": "dict(nan_seed=-1)"}  # fmt: skip
    jobs, _ = plan_grid(["sac"], [NAN_SEED], [0, 1, 2], n_timesteps=100, eval_freq=50, eval_episodes=1,
                        overrides=overrides)  # fmt: skip
    single = runner.run_job(jobs[0], tracking.target)
    batch = runner.run_jobs(jobs[1:], tracking.target)
    assert trained == [1, 2] and calls == [(1, 1, SAC), (2, 2, SAC)]
    assert [r.status for r in [single, *batch]] == ["FINISHED"] * 3
    assert [[step for step, _ in r.evaluations] for r in [single, *batch]] == [[50, 100]] * 3
    runs = _by_seed(uri, "same")
    client = _client(uri)
    keys = {s: (set(r.data.metrics), {a.path for a in client.list_artifacts(r.info.run_id)}) for s, r in runs.items()}
    assert keys[0] == keys[1] == keys[2] and "model.zip" in keys[0][1], keys  # recorded alike


# ---------------------------------------------------------------------------------------------------------
# a unit whose process is killed: the re-run runs its seeds only (in one batch again), not the finished ones
# ---------------------------------------------------------------------------------------------------------
def test_rerun_after_a_killed_batch_runs_only_its_seeds(in_tmp_path: Path, mlflow_template: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The first batch (seeds 0, 1) SIGKILLs its own process once (``KillOnce-v0``: the marker file does not exist
    yet); the second (seeds 2, 3) finishes. The same command again runs seeds 0 and 1 only, as one batch."""
    uri = _store(in_tmp_path, mlflow_template)
    marker = in_tmp_path / "killed"
    argv = ["run", "--algos", "ppo", "--envs", KILL_ONCE, "--seeds", "4", "--seed-batch", "2", "--jobs", "1",
            "--tracking-uri", uri, "--experiment", "kill", "--n-timesteps", "128", "--eval-freq", "64",
            "--eval-episodes", "1", "--hyperparams", "n_envs=1", "n_steps=64", "batch_size=32", "n_epochs=1",
            "policy_kwargs=dict(net_arch=[16])", f"env_kwargs=dict(marker='{marker}', kill_after=40)"]  # fmt: skip
    assert main(argv) == 1
    assert marker.exists()
    first = {int(r.data.tags["lit_sb3.seed"]): r for r in _runs(uri, "kill")}
    assert {s: r.info.status for s, r in first.items()} == {0: "FAILED", 1: "FAILED", 2: "FINISHED", 3: "FINISHED"}
    assert {first[s].data.tags["lit_sb3.failure_reason"] for s in (0, 1)} == {"process died: SIGKILL (exit code -9)"}
    capsys.readouterr()
    assert main(argv) == 0
    assert "--seed-batch 2: 2 job(s) in 1 seed batch(es), 1 unit(s) to run" in capsys.readouterr().out
    runs = _runs(uri, "kill")
    by_seed: dict[int, list[str]] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        by_seed.setdefault(int(run.data.tags["lit_sb3.seed"]), []).append(run.info.status)
    assert by_seed == {0: ["FAILED", "FINISHED"], 1: ["FAILED", "FINISHED"], 2: ["FINISHED"], 3: ["FINISHED"]}
    assert main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------
# a batched grid killed while its second batch runs: the re-run runs that batch's seeds only
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow  # two bench runs in fresh interpreters; test_rerun_runs_only_unfinished_seeds covers resume fast
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL and process groups")
def test_killed_batched_grid_reruns_only_unfinished_seeds(in_tmp_path: Path, mlflow_template: Path) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--algos", "sac", "--envs", NAN_SEED, "--seeds", "4", "--seed-batch", "2", "--jobs", "1",
            "--tracking-uri", uri, "--experiment", "killed", "--n-timesteps", "300", "--eval-freq", "150",
            "--eval-episodes", "1", "--hyperparams", "learning_starts=50", "buffer_size=1000", "batch_size=32",
            "policy_kwargs=dict(net_arch=[16])", "env_kwargs=dict(nan_seed=-1)"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LIT_SB3_METRICS_FLUSH_SECONDS": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "lit_sb3.zoo.cli", *argv], cwd=in_tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while True:  # the first batch (seeds 0, 1) finished, the second (seeds 2, 3) started
            statuses = sorted(r.info.status for r in _runs(uri, "killed"))
            if statuses == ["FINISHED", "FINISHED", "RUNNING", "RUNNING"]:
                break
            assert proc.poll() is None, f"bench run ended before it could be killed: {statuses}"
            assert time.monotonic() < deadline, f"the second batch did not start in time: {statuses}"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    first = {int(r.data.tags["lit_sb3.seed"]): r.info.status for r in _runs(uri, "killed")}
    assert first[0] == first[1] == "FINISHED", first
    # the batch process dies with its parent (it polls for it every 0.5 s); its runs stay RUNNING until the re-run
    assert main(argv) == 0
    runs = _runs(uri, "killed")
    finished = sorted(int(r.data.tags["lit_sb3.seed"]) for r in runs if r.info.status == "FINISHED")
    killed = sorted(int(r.data.tags["lit_sb3.seed"]) for r in runs if r.info.status == "KILLED")
    assert finished == [0, 1, 2, 3] and killed == [2, 3], [(r.data.tags["lit_sb3.seed"], r.info.status) for r in runs]
