"""``bench run``: real grids in real worker processes, tracked in a real MLflow sqlite store (tiny budgets)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs

ROOT = Path(__file__).resolve().parent.parent
FAULTY = "tests.envs.faulty"
TINY = ["--n-timesteps", "384", "--eval-freq", "128", "--eval-episodes", "2", "--hyperparams", "n_steps=64", "n_envs=1"]


def _last_eval_step(uri: str, run_id: str) -> int:
    history = _client(uri).get_metric_history(run_id, "eval/mean_reward")
    return max((m.step for m in history), default=0)


# ---------------------------------------------------------------------------------------------------------
# a 2 x 2 x 2 grid, then the same command again
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> tuple[str, list[str], int, Path]:
    folder = tmp_path_factory.mktemp("grid")
    uri = _store(folder, mlflow_template)
    argv = ["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1,Pendulum-v1", "--seeds", "2", "--jobs", "2",
            "--tracking-uri", uri, "--experiment", "grid", *TINY]  # fmt: skip
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code = main(argv)
    finally:
        os.chdir(cwd)
    return uri, argv, code, folder


def test_grid_records_every_job(grid: tuple[str, list[str], int, Path]) -> None:
    uri, _, code, _ = grid
    assert code == 0
    parents = _runs(uri, "grid", "grid")
    jobs = _runs(uri, "grid")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert "command" in parents[0].data.params and parents[0].data.params["command"].startswith("bench run")
    assert len(jobs) == 8
    assert {r.info.status for r in jobs} == {"FINISHED"}
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {parents[0].info.run_id}
    assert {(r.data.tags["lit_sb3.algo"], r.data.tags["lit_sb3.env"], r.data.tags["lit_sb3.seed"]) for r in jobs} == {
        (a, e, s) for a in ("ppo", "a2c") for e in ("CartPole-v1", "Pendulum-v1") for s in ("0", "1")
    }
    assert len({r.data.tags["lit_sb3.job_id"] for r in jobs}) == 8
    assert {r.info.run_name for r in jobs} == {
        f"s{s} {a} {e}" for a in ("ppo", "a2c") for e in ("CartPole-v1", "Pendulum-v1") for s in (0, 1)
    }
    summary = parents[0].data.metrics  # the grid's chart view: mean final score per algo x env
    for algo in ("ppo", "a2c"):
        for env in ("CartPole-v1", "Pendulum-v1"):
            finals = [r.data.metrics["final/mean_reward"] for r in jobs if r.info.run_name.endswith(f"{algo} {env}")]
            assert summary[f"final_mean_reward/{algo} {env}"] == pytest.approx(sum(finals) / 2)
            assert summary[f"final_n_runs/{algo} {env}"] == 2
    client = _client(uri)
    for run in jobs:
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        for key in ("lit_sb3.config_hash", "lit_sb3.version", "torch.version", "gymnasium.version", "git.commit"):
            assert tags.get(key), key
        assert params["n_steps"] == "64" and params["n_timesteps"] == "384"
        assert params["env_id"] == tags["lit_sb3.env"]
        history = client.get_metric_history(run.info.run_id, "eval/mean_reward")
        steps = [m.step for m in history]
        assert steps[:3] == [128, 256, 384] and len(steps) >= 3  # the whole curve, on env steps
        assert metrics["final/mean_reward"] == pytest.approx(history[-1].value)
        assert metrics["time/total_timesteps"] >= 384 and metrics["time/wall_seconds"] > 0
        assert "time/fps" in metrics and any(k.startswith("train/") for k in metrics), sorted(metrics)
        arts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"config.json", "model.zip", "evaluations.csv"} <= arts


def test_model_artifact_loads(grid: tuple[str, list[str], int, Path], tmp_path: Path) -> None:
    import gymnasium as gym

    from lit_sb3 import PPO

    uri = grid[0]
    run = next(
        r
        for r in _runs(uri, "grid")
        if r.data.tags["lit_sb3.algo"] == "ppo" and r.data.tags["lit_sb3.env"] == "CartPole-v1"
    )
    local = _client(uri).download_artifacts(run.info.run_id, "model.zip", str(tmp_path))
    model = PPO.load(local)
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert int(action) in (0, 1)
    csv_path = Path(_client(uri).download_artifacts(run.info.run_id, "evaluations.csv", str(tmp_path)))
    assert csv_path.read_text().splitlines()[0] == "step,mean_reward,std_reward,mean_ep_length"


def test_rerun_adds_nothing_and_dry_run(
    grid: tuple[str, list[str], int, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    uri, argv, _, folder = grid
    before = len(_runs(uri, "grid", None))
    capsys.readouterr()
    assert main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert len(_runs(uri, "grid", None)) == before
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("skip (finished)") == 8
    assert "0 env steps in 0 jobs to run (8 already finished" in out
    assert len(_runs(uri, "grid", None)) == before


# ---------------------------------------------------------------------------------------------------------
# failures: raising, NaN, hanging (timeout), segfault; the healthy job finishes
# ---------------------------------------------------------------------------------------------------------
def test_time_limit_env_wrapper_ends_evaluation_episodes(in_tmp_path: Path, mlflow_template: Path) -> None:
    """A zoo ``env_wrapper`` TimeLimit sits outside the Monitor (as in the RL Zoo); Pendulum never ends its own
    episodes, so the first evaluation waited forever and the job timed out. Now it finishes, with 50-step
    evaluation episodes."""
    Path("limit.yml").write_text(
        "Pendulum-v1:\n  env_wrapper:\n    - gymnasium.wrappers.TimeLimit:\n        max_episode_steps: 50\n"
    )
    uri = _store(in_tmp_path, mlflow_template)
    code = main(["run", "--algos", "ppo", "--envs", "Pendulum-v1", "--config", "limit.yml", "--seeds", "1",
                 "--jobs", "1", "--timeout", "120", "--tracking-uri", uri, "--experiment", "limit",
                 "--n-timesteps", "128", "--eval-freq", "64", "--eval-episodes", "2", "--hyperparams", "n_steps=64",
                 "n_envs=1"])  # fmt: skip
    (job,) = _runs(uri, "limit")
    assert code == 0 and job.info.status == "FINISHED", job.data.tags.get("lit_sb3.failure_reason")
    lengths = _client(uri).get_metric_history(job.info.run_id, "eval/mean_ep_length")
    assert lengths and {m.value for m in lengths} == {50.0}


def test_faulty_jobs_fail_alone(in_tmp_path: Path, mlflow_template: Path) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    envs = ",".join(
        ["CartPole-v1", *(f"{FAULTY}:{name}" for name in ("Raising-v0", "NaNReward-v0", "Hanging-v0", "Segfault-v0"))]
    )
    code = main(["run", "--algos", "a2c", "--envs", envs, "--jobs", "2", "--timeout", "30", "--tracking-uri", uri,
                 "--experiment", "faulty", "--n-timesteps", "256", "--eval-freq", "128", "--eval-episodes", "2",
                 "--hyperparams", "n_steps=16"])  # fmt: skip
    assert code == 1
    runs = {r.data.tags["lit_sb3.env"].split(":")[-1]: r for r in _runs(uri, "faulty")}
    assert len(runs) == 5
    assert runs["CartPole-v1"].info.status == "FINISHED"
    reasons = {
        env: r.data.tags.get("lit_sb3.failure_reason", "") for env, r in runs.items() if r.info.status == "FAILED"
    }
    assert set(reasons) == {"Raising-v0", "NaNReward-v0", "Hanging-v0", "Segfault-v0"}
    assert "RuntimeError: faulty env: boom" in reasons["Raising-v0"]
    assert reasons["NaNReward-v0"].startswith("diverged: rollout/reward = nan at step")
    assert reasons["Hanging-v0"] == "timeout after 30 s"
    assert "SIGSEGV" in reasons["Segfault-v0"] and "-11" in reasons["Segfault-v0"]
    client = _client(uri)
    for env in ("Raising-v0", "Segfault-v0"):
        arts = {a.path for a in client.list_artifacts(runs[env].info.run_id)}
        assert "traceback.txt" in arts
    parent = _runs(uri, "faulty", "grid")[0]
    assert parent.info.status == "FAILED"
    assert {"summary.md", "summary.json"} <= {a.path for a in client.list_artifacts(parent.info.run_id)}


# ---------------------------------------------------------------------------------------------------------
# a SIGKILLed bench run, then the same command: every job FINISHED once, the stale one KILLED
# ---------------------------------------------------------------------------------------------------------
def _marked_processes(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killed_grid_resumes(in_tmp_path: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    uri = _store(in_tmp_path, mlflow_template)
    tmp = in_tmp_path / "tmp"  # the temp folder of both bench runs: the killed one leaves its job logs there
    tmp.mkdir()
    # --seed-batch 1: the test kills the grid while one job has finished and the next is running, which needs the
    # seeds as separate jobs one after another (the default, auto, would train the three as one batch)
    argv = ["run", "--algos", "a2c", "--envs", "CartPole-v1", "--seeds", "3", "--jobs", "1", "--tracking-uri", uri,
            "--experiment", "killed", "--n-timesteps", "10000", "--eval-freq", "1000", "--eval-episodes", "2",
            "--hyperparams", "n_steps=8", "--seed-batch", "1"]  # fmt: skip
    marker = f"BENCH_TEST_MARKER={uuid.uuid4().hex}"
    env = {
        **os.environ,
        marker.split("=")[0]: marker.split("=")[1],
        "PYTHONPATH": str(ROOT),
        "LIT_SB3_METRICS_FLUSH_SECONDS": "0",
        "TMPDIR": str(tmp),
    }  # the evaluation curve is watched live below
    proc = subprocess.Popen([sys.executable, "-m", "lit_sb3.zoo.cli", *argv], cwd=in_tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while True:
            runs = _runs(uri, "killed")
            statuses = [r.info.status for r in runs]
            # kill while a job is early in its run (evaluated at most 3 of its 10 times), not as it finishes
            if statuses.count("FINISHED") >= 1 and any(
                r.info.status == "RUNNING" and 0 < _last_eval_step(uri, r.info.run_id) <= 3000 for r in runs
            ):
                break
            assert proc.poll() is None, "bench run ended before it could be killed"
            assert time.monotonic() < deadline, f"no finished + running job in time: {statuses}"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # workers poll for their parent every 0.5 s; on a loaded 2-core machine they may need a few seconds to run
    deadline = time.monotonic() + 30
    while _marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {
        pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200] for pid in _marked_processes(marker)
    }
    assert not left, f"processes outlived the killed bench run: {left}"
    running = [r for r in _runs(uri, "killed") if r.info.status == "RUNNING"]
    assert len(running) == 1, [(r.info.status, r.data.tags.get("lit_sb3.seed")) for r in _runs(uri, "killed")]
    assert list(tmp.glob(f"bench-logs-{proc.pid}-*")), "the killed run's job logs should be left behind"

    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert main(argv) == 0
    assert not list(tmp.glob("bench-logs-*")), "the rerun removes the killed run's logs and its own"
    runs = _runs(uri, "killed")
    finished = [r.data.tags["lit_sb3.job_id"] for r in runs if r.info.status == "FINISHED"]
    assert len(finished) == 3 and len(set(finished)) == 3
    killed = [r for r in runs if r.info.status == "KILLED"]
    assert [r.info.run_id for r in killed] == [running[0].info.run_id]
    assert killed[0].data.tags["lit_sb3.job_id"] in finished
    assert {r.info.status for r in _runs(uri, "killed", "grid")} == {"KILLED", "FINISHED"}
    from lit_sb3.zoo.results import load_results

    results = load_results(uri, "killed")  # bench report: the superseded KILLED attempt is not a failure
    assert len(results.runs) == len(finished) and results.not_finished == {}


def test_another_live_grid_in_the_experiment_is_left_alone(
    in_tmp_path: Path, mlflow_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two grids may share an experiment (the classic benchmark runs two cells at once): a bench run counts as
    'running in another bench run' only its own jobs that the other live invocation holds, and never touches the
    other's. Before the fix, a2c's grid said '5 job(s) are running in another bench run' of a TQC grid's jobs."""
    from lit_sb3.zoo import pipeline
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.tracking import PROC_TAG, open_tracking, run_environment_tags

    uri = _store(in_tmp_path, mlflow_template)
    tracking = open_tracking(uri, "shared")
    other, _ = plan_grid(["ppo"], ["CartPole-v1"], [7], n_timesteps=384)
    mine, _ = plan_grid(["a2c"], ["CartPole-v1"], [0, 1], n_timesteps=384)
    live = subprocess.Popen(["sleep", "120"])  # the other bench run's process (a live pid on this host)
    try:
        proc = f"{socket.gethostname()}:{live.pid}:"
        parent = tracking.create_parent_run("bench run (the other grid)", {}, tags={PROC_TAG: proc})
        env_tags = run_environment_tags()
        held = {spec.job_id: tracking.create_job_run(spec, parent, env_tags) for spec in (other[0], mine[1])}
        assert pipeline.claim(tracking, [], mine) == {mine[1].job_id: proc}
        assert pipeline.claim(tracking, [], other + mine[:1]) == {other[0].job_id: proc}
        assert pipeline.claim(tracking, [], mine[:1]) == {}

        tracking.end_run(held[mine[1].job_id], "FAILED")  # only the other grid's job is live now
        argv = ["run", "--algos", "a2c", "--envs", "CartPole-v1", "--seeds", "1", "--jobs", "1", "--tracking-uri",
                uri, "--experiment", "shared", *TINY]  # fmt: skip
        capsys.readouterr()
        assert main(argv) == 0
    finally:
        live.kill()
        live.wait()
    out = capsys.readouterr().out
    assert "another bench run" not in out, out
    statuses = {r.data.tags["lit_sb3.job_id"]: r.info.status for r in _runs(uri, "shared")}
    assert statuses[other[0].job_id] == "RUNNING"  # the live grid's job is not marked stale
    assert sorted(statuses.values()) == ["FAILED", "FINISHED", "RUNNING"]


# ---------------------------------------------------------------------------------------------------------
# bad input: one line, exit 2, before any job (no run in MLflow)
# ---------------------------------------------------------------------------------------------------------
BAD_YAML = "CartPole-v1:\n  n_steps: 64\n   gamma: 0.9\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--algos", "ppoo", "--envs", "CartPole-v1"], "unknown algorithm 'ppoo' (did you mean 'ppo'"),
        (["--algos", "ppo", "--envs", "CartPol-v1"], "(did you mean 'CartPole-v1'"),
        (["--algos", "ppo", "--envs", "mujocco"], "(did you mean 'mujoco'"),
        (["--algos", "ppo", "--envs", "CartPole-v1", "--config", "bad.yml"], "bad.yml:3"),
        (["--algos", "ppo", "--envs", "CartPole-v1", "--hyperparams", "n_stepz=5"], "unknown hyperparameter 'n_stepz'"),
        (["--algos", "dqn", "--envs", "Pendulum-v1"], "nothing to run: dqn needs a Discrete action space"),
        (
            ["--algos", "ppo", "--envs", "CartPole-v1", "--tracking-uri", "http://127.0.0.1:1"],
            "cannot reach tracking URI",
        ),
        (["--algos", "ppo", "--envs", f"{FAULTY}x:Raising-v0"], "cannot import module"),
        (["--algos", "ppo", "--envs", "CartPole-v1", "--log-interval", "0"], "--log-interval must be >= 1, got 0"),
        (
            ["--algos", "ppo", "--envs", "CartPole-v1", "--env-var", "LIT_SB3_METRICS_FLUSH_SECONDS=soon"],
            "LIT_SB3_METRICS_FLUSH_SECONDS must be a number of seconds >= 0, got 'soon'",
        ),
    ],
)
def test_errors(extra: list[str], message: str, in_tmp_path: Path, mlflow_template: Path,
                capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    if "--env-var" in extra:  # not a bench option: an environment variable of this case
        i = extra.index("--env-var")
        monkeypatch.setenv(*extra[i + 1].split("=", 1))
        extra = extra[:i] + extra[i + 2 :]
    (in_tmp_path / "bad.yml").write_text(BAD_YAML)
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--n-timesteps", "256", "--experiment", "errors", *extra]  # one PPO CartPole rollout
    if "--tracking-uri" not in extra:
        argv += ["--tracking-uri", uri]
    start = time.monotonic()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("bench run: error: ") and message in err, err
    assert time.monotonic() - start < 30
    assert _runs(uri, "errors", None) == []
    if "unknown hyperparameter" in message:
        assert "allowed:" in err and "n_steps" in err


def test_dry_run_plan(in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--algos", "ppo,dqn", "--envs", "Pendulum-v1", "--seed-list", "3,4", "--n-timesteps", "5000",
                 "--dry-run"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "ppo/Pendulum-v1/s3" in out and "ppo/Pendulum-v1/s4" in out
    assert "skipped dqn on Pendulum-v1: dqn needs a Discrete action space" in out
    # PPO on Pendulum trains whole rollouts of 1024 x 4 env steps: 5,000 -> 8,192, said in one line
    assert "budget: ppo on Pendulum-v1: budget 5,000 env steps rounded up to 8,192" in out
    assert "total budget: 16,384 env steps in 2 jobs to run" in out
    assert not (in_tmp_path / "mlflow.db").exists()  # a dry run creates nothing


# ---------------------------------------------------------------------------------------------------------
# the job description and the evaluation hooks used by `bench tune`
# ---------------------------------------------------------------------------------------------------------
def test_job_ids_are_stable() -> None:
    from lit_sb3.zoo.jobs import JobSpec, plan_grid

    over = {"n_steps": "32", "policy_kwargs": "dict(net_arch=[32], activation_fn=nn.ReLU)"}
    a, _ = plan_grid(["ppo"], ["CartPole-v1"], [0, 1], n_timesteps=500, overrides=over)
    b, _ = plan_grid(["ppo"], ["CartPole-v1"], [0, 1], n_timesteps=500, overrides=over)
    c, _ = plan_grid(["ppo"], ["CartPole-v1"], [0, 1], n_timesteps=1000, overrides=over)  # rollouts of 256
    assert [j.job_id for j in a] == [j.job_id for j in b]
    assert len({j.job_id for j in a + c}) == 4
    back = JobSpec.from_json(a[0].to_json())
    assert back.job_id == a[0].job_id
    cfg = back.resolved_config()
    import torch

    assert cfg.algo_kwargs["policy_kwargs"]["activation_fn"] is torch.nn.ReLU
    assert callable(cfg.algo_kwargs["learning_rate"])


def test_log_interval_default_and_override() -> None:
    """On-policy jobs dump every ~1,024 env steps unless --log-interval says otherwise; off-policy keep SB3's."""
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.runner import build_env, build_model, log_interval

    (auto,), _ = plan_grid(["ppo"], ["CartPole-v1"], [0], n_timesteps=1000)  # zoo: n_envs 8, n_steps 32
    (every,), _ = plan_grid(["ppo"], ["CartPole-v1"], [0], n_timesteps=1000, log_interval=1)
    (sac,), _ = plan_grid(["sac"], ["Pendulum-v1"], [0], n_timesteps=1000)
    assert auto.job_id == every.job_id  # what is logged does not change the job
    for spec, expected in ((auto, 4), (every, 1), (sac, None)):
        env = build_env(spec)
        try:
            assert log_interval(spec, build_model(spec, env.action_space), env.num_envs) == expected
        finally:
            env.close()


def test_evaluation_hook_stops_run(in_tmp_path: Path, mlflow_template: Path) -> None:
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.runner import run_job
    from lit_sb3.zoo.tracking import open_tracking

    uri = _store(in_tmp_path, mlflow_template)
    (job,), _ = plan_grid(["a2c"], ["CartPole-v1"], [0], n_timesteps=4000, eval_freq=100, eval_episodes=1,
                          overrides={"n_steps": "10", "n_envs": "2"})  # fmt: skip
    tracking = open_tracking(uri, "hooks")
    calls: list[tuple[int, float]] = []

    def stop_at_second(step: int, mean_reward: float) -> bool:
        calls.append((step, mean_reward))
        return len(calls) < 2

    result = run_job(job, tracking.target, on_evaluation=stop_at_second, stopped_status="KILLED")
    assert [c[0] for c in calls] == [100, 200]
    assert result.stopped_early and result.status == "KILLED"
    # on-policy evaluations happen at rollout boundaries (after the update); a stop there takes effect at the
    # next env step: n_envs (2) steps later; the score is the evaluation that stopped the run
    assert result.env_steps == 202 and result.score == calls[-1][1]
    assert result.evaluations == calls
    run = _client(uri).get_run(result.run_id)
    assert run.info.status == "KILLED" and run.data.tags["lit_sb3.stopped_early"] == "true"
    assert run.data.metrics["final/mean_reward"] == result.score
    assert [m.step for m in _client(uri).get_metric_history(result.run_id, "eval/mean_reward")] == [100, 200]


@pytest.mark.parametrize("flush_seconds", [0.0, 3600.0])
def test_job_logger_batches_metrics_without_losing_any(flush_seconds: float, in_tmp_path: Path,
                                                       mlflow_template: Path) -> None:  # fmt: skip
    """Metrics are held back until ``flush_seconds`` passed or training ends (also on failure), then all land."""
    from lit_sb3.zoo.tracking import job_logger, open_tracking

    uri = _store(in_tmp_path, mlflow_template)
    tracking = open_tracking(uri, "batching")
    client = _client(uri)
    run_id = client.create_run(tracking.target.experiment_id).info.run_id
    logger = job_logger(tracking.target, run_id, flush_seconds=flush_seconds)
    for step in range(600):  # 1,200 metrics: more than one log_batch of MLflow's 1,000
        logger.log_metrics({"train/loss": step / 10, "rollout/ep_rew_mean": float(step)}, step=step * 64)
    held = client.get_metric_history(run_id, "train/loss")
    assert len(held) == (600 if flush_seconds == 0 else 0)
    logger.finalize("failed")  # what Lightning calls when training raises
    history = client.get_metric_history(run_id, "train/loss")
    assert [(m.step, m.value) for m in history] == [(step * 64, step / 10) for step in range(600)]
    assert len(client.get_metric_history(run_id, "rollout/ep_rew_mean")) == 600
    assert client.get_run(run_id).info.status == "RUNNING"  # the job, not the logger, ends the run
