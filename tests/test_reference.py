"""The reference side inside the suite (issue 31): RL Zoo runs imported as runs of the store, and SB3 trained by
rl_zoo3's own ``train`` through the suite's launcher, side by side with lit_sb3 in one grid.

Everything is real: rl_zoo3's ``train`` makes the log folders, MLflow records on sqlite."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.mlflow_store import copy_store, runs

# looked up, not imported: importing rl_zoo3 patches gymnasium's TimeLimit in this process (rl_zoo3.gym_patches),
# which then differs from the class the suite's env subprocesses use (it broke test_vec_env's env_is_wrapped)
if importlib.util.find_spec("rl_zoo3") is None:
    pytest.skip("rl_zoo3 (the reference extra) is not installed", allow_module_level=True)

ZOO_CONFIGS = Path(__file__).resolve().parents[1] / "zoo_configs"


def _zoo_train(log_folder: Path, seed: int, n_timesteps: int = 2048) -> Path:
    """A real rl_zoo3 run (PPO, CartPole-v1, the zoo's hyperparameters) in ``log_folder``; returns its folder."""
    subprocess.run([sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "--seed", str(seed),
                    "-n", str(n_timesteps), "-f", str(log_folder), "--eval-freq", "1024", "--eval-episodes", "3",
                    "-conf", str(ZOO_CONFIGS / "ppo.yml"), "--num-threads", "1", "--device", "cpu", "--verbose", "0"],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    (folder,) = sorted((log_folder / "ppo").glob("CartPole-v1_*"))[-1:]
    return folder


@pytest.fixture(scope="module")
def zoo_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``logs/`` with two real rl_zoo3 runs (seeds 0 and 1)."""
    logs = tmp_path_factory.mktemp("zoo") / "logs"
    _zoo_train(logs, 0)
    _zoo_train(logs, 1)
    return logs


def _bench(*argv: str) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-m", "lit_sb3.zoo.cli", *argv], capture_output=True, text=True, timeout=900)
    return out.returncode, out.stdout + out.stderr


def test_import_gives_the_zoo_curve_and_score_and_reimport_adds_nothing(zoo_logs, tmp_path, mlflow_template):
    uri = copy_store(tmp_path, mlflow_template)
    code, out = _bench("import", str(zoo_logs), "--experiment", "zoo", "--tracking-uri", uri)
    assert code == 0, out
    imported = runs(uri, "zoo")
    assert len(imported) == 2
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    for run in imported:
        tags = run.data.tags
        assert tags["impl"] == "sb3" and tags["lit_sb3.algo"] == "ppo" and tags["lit_sb3.env"] == "CartPole-v1"
        folder = Path(tags["lit_sb3.zoo_folder"])
        with np.load(folder / "evaluations.npz") as data:
            steps, results = data["timesteps"], data["results"]
        curve = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "eval/mean_reward"))
        assert [s for s, _ in curve] == steps.tolist()
        np.testing.assert_allclose([v for _, v in curve], results.mean(axis=1), rtol=0, atol=1e-9)
        assert run.data.metrics["final/mean_reward"] == pytest.approx(results[-1].mean(), abs=1e-9)
        # the same params as a bench run of that job: the zoo's hyperparameters, resolved by the suite
        params = run.data.params
        assert params["n_steps"] == "32" and params["gamma"] == "0.98" and params["seed"] == tags["lit_sb3.seed"]
        assert params["eval_seed_offset"] == "0" and run.data.metrics["time/wall_seconds"] > 0
    code, out = _bench("import", str(zoo_logs), "--experiment", "zoo", "--tracking-uri", uri)
    assert code == 0 and "0 imported, 2 already there" in out, out
    assert len(runs(uri, "zoo")) == 2


def _broken_copies(zoo_logs: Path, root: Path) -> dict[str, Path]:
    source = sorted((zoo_logs / "ppo").glob("CartPole-v1_*"))[0]
    truncated = root / "truncated"
    shutil.copytree(source, truncated)
    (truncated / "CartPole-v1.zip").unlink()  # training did not finish: no final model
    foreign = root / "foreign"
    shutil.copytree(source, foreign)
    np.savez(foreign / "evaluations.npz", timesteps=np.array([1024, 2048]), results=np.zeros((3, 5)),
             ep_lengths=np.zeros((3, 5), dtype=np.int64))  # fmt: skip
    not_zoo = root / "not_zoo"
    not_zoo.mkdir()
    (not_zoo / "notes.txt").write_text("not a run")
    return {"truncated": truncated, "foreign": foreign, "not_zoo": not_zoo}


@pytest.mark.parametrize("case", ["truncated", "foreign", "not_zoo"])
def test_a_bad_folder_is_one_line_and_no_run(zoo_logs, tmp_path, mlflow_template, case):
    uri = copy_store(tmp_path, mlflow_template)
    folder = _broken_copies(zoo_logs, tmp_path)[case]
    code, out = _bench("import", str(folder), "--experiment", "bad", "--tracking-uri", uri)
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("not imported:")]
    assert len(lines) == 1 and str(folder) in lines[0], out
    expected = {"truncated": "no final model", "foreign": "results must be [2 evaluations", "not_zoo": "not an RL Zoo"}
    assert expected[case] in lines[0], out
    assert runs(uri, "bad") == []


def test_yaml_tags_other_than_the_ordered_dict_are_refused(tmp_path):
    from lit_sb3.zoo.reference.zoo_logs import ZooFolderError, read_zoo_run

    run = tmp_path / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    (run / "CartPole-v1" / "args.yml").write_text("!!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ZooFolderError, match="not rl_zoo3's YAML"):
        read_zoo_run(run)
    assert not Path("pwned").exists()


def test_one_grid_runs_both_sides_and_the_report_compares_them(tmp_path, mlflow_template):
    uri = copy_store(tmp_path, mlflow_template)
    code, out = _bench("run", "--impl", "lit_sb3,sb3", "--algos", "ppo", "--envs", "CartPole-v1", "--seeds", "1",
                       "--n-timesteps", "1024", "--eval-freq", "512", "--eval-episodes", "2", "--jobs", "2",
                       "--experiment", "both", "--tracking-uri", uri)  # fmt: skip
    assert code == 0, out
    by_impl = {r.data.tags["impl"]: r for r in runs(uri, "both")}
    assert set(by_impl) == {"lit_sb3", "sb3"}
    sb3 = by_impl["sb3"]
    assert sb3.info.status == "FINISHED" and sb3.data.tags["lit_sb3.zoo_config_matches"] == "true"
    for run in by_impl.values():  # one protocol: evaluations at the same env steps, the same params
        assert run.data.params["eval_seed_offset"] == "0" and run.data.metrics["time/cpu_seconds"] > 0
    assert {k: v for k, v in by_impl["sb3"].data.params.items() if k != "n_timesteps_requested"} == {
        k: v for k, v in by_impl["lit_sb3"].data.params.items() if k != "n_timesteps_requested"
    }
    code, out = _bench("run", "--impl", "lit_sb3,sb3", "--algos", "ppo", "--envs", "CartPole-v1", "--seeds", "1",
                       "--n-timesteps", "1024", "--eval-freq", "512", "--eval-episodes", "2", "--jobs", "2",
                       "--experiment", "both", "--tracking-uri", uri)  # fmt: skip
    assert code == 0 and "nothing to do" in out, out
    code, out = _bench("report", "--experiment", "both", "--tracking-uri", uri, "--out", str(tmp_path / "report"),
                       "--reps", "200")  # fmt: skip
    assert code == 0, out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "sb3" in report and "lit_sb3" in report


def test_bad_impl_and_offset_are_one_line(tmp_path):
    code, out = _bench("run", "--impl", "sb4", "--algos", "ppo", "--envs", "CartPole-v1", "--dry-run")
    assert code == 2 and "unknown implementation 'sb4'" in out and "did you mean 'sb3'" in out, out
    code, out = _bench("run", "--impl", "sb3", "--eval-seed-offset", "7", "--algos", "ppo", "--envs", "CartPole-v1",
                       "--dry-run")  # fmt: skip
    assert code == 2 and "--eval-seed-offset 7 with --impl sb3" in out, out


def test_the_on_policy_budget_list_is_the_registry_s_on_policy_classes():
    from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm
    from lit_sb3.algorithms.registry import ALGORITHMS
    from lit_sb3.zoo.budget import ON_POLICY
    from lit_sb3.zoo.registry import get_algo_class

    on_policy = {name for name in ALGORITHMS if issubclass(get_algo_class(name), OnPolicyAlgorithm)}
    assert set(ON_POLICY) == on_policy


@pytest.mark.parametrize(("algo", "env"), [("sac", "Pendulum-v1"), ("dqn", "CartPole-v1")])
def test_both_sides_log_the_same_params_where_the_model_resolves_a_default(tmp_path, mlflow_template, algo, env):
    """Defaults a model resolves when it is built (SAC's ``target_entropy="auto"`` to -dim(A), ``train_freq=1`` to
    ``(1, 'step')``, ``replay_buffer_class=None`` to ``ReplayBuffer``) are logged alike on both sides: the report
    lists every param that differs between the sides as a difference of their configurations."""
    uri = copy_store(tmp_path, mlflow_template)
    code, out = _bench("run", "--impl", "lit_sb3,sb3", "--algos", algo, "--envs", env, "--seeds", "1",
                       "--n-timesteps", "256", "--eval-freq", "128", "--eval-episodes", "1", "--jobs", "2",
                       "--experiment", "params", "--tracking-uri", uri)  # fmt: skip
    assert code == 0, out
    sb3, lit = ({k: v for k, v in r.data.params.items() if k != "n_timesteps_requested"}
                for r in sorted(runs(uri, "params"), key=lambda r: r.data.tags["impl"] != "sb3"))  # fmt: skip
    assert {k: (sb3.get(k), lit.get(k)) for k in set(sb3) | set(lit) if sb3.get(k) != lit.get(k)} == {}
