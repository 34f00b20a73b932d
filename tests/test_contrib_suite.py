"""The suite side of MaskablePPO (ppo_mask) and RecurrentPPO (ppo_lstm): the RL Zoo's ppo_lstm.yml as published,
the NoVel and masked envs (registered without rl_zoo3), bench list/tune search spaces, and one small real bench run
+ report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs

ROOT = Path(__file__).resolve().parent.parent
ZOO_PUBLISHED = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
ZOO_PUBLISHED = ZOO_PUBLISHED / "rl_zoo3" / "hyperparams" / "ppo_lstm.yml"


def test_zoo_ppo_lstm_yml_is_the_published_file_and_its_entries_resolve():
    from lit_sb3.zoo.config import load_zoo_file, resolve, zoo_config_path

    path = zoo_config_path("ppo_lstm")
    if ZOO_PUBLISHED.exists():
        assert path.read_bytes() == ZOO_PUBLISHED.read_bytes()
    entries = [name for name in load_zoo_file(path) if name != "default"]
    assert {"CartPoleNoVel-v1", "PendulumNoVel-v1", "MountainCarContinuousNoVel-v0"} <= set(entries)
    for env_id in entries:  # every entry resolves (atari: AtariWrapper; CarRacing-v3: YAMLCompatResizeObservation)
        resolve("ppo_lstm", env_id, config_files=[path], builtin=False)
    cfg = resolve("ppo_lstm", "CartPoleNoVel-v1")
    assert cfg.n_envs == 8 and cfg.normalize
    assert cfg.algo_kwargs["n_steps"] == 32 and cfg.algo_kwargs["batch_size"] == 256
    kwargs = cfg.algo_kwargs["policy_kwargs"]
    assert kwargs["lstm_hidden_size"] == 64 and kwargs["enable_critic_lstm"] is True
    cfg = resolve("ppo_mask", "InvalidActionDiscrete-v0")
    assert cfg.n_envs == 4 and cfg.algo_kwargs["policy_kwargs"]["net_arch"] == [32, 32]


def test_envs_register_without_rl_zoo3_and_mask_the_velocities():
    code = (
        "import sys, gymnasium as gym, lit_sb3.zoo; "
        "assert 'rl_zoo3' not in sys.modules; "
        "ids = ['CartPoleNoVel-v1', 'PendulumNoVel-v1', 'LunarLanderNoVel-v3', 'MountainCarContinuousNoVel-v0', "
        "'InvalidActionDiscrete-v0', 'TicTacToe-v0']; "
        "assert all(i in gym.registry for i in ids), ids"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    import lit_sb3.envs  # noqa: F401

    for env_id, base_id, velocities in (
        ("CartPoleNoVel-v1", "CartPole-v1", [1, 3]),
        ("PendulumNoVel-v1", "Pendulum-v1", [2]),
        ("MountainCarContinuousNoVel-v0", "MountainCarContinuous-v0", [1]),
    ):
        env, base = gym.make(env_id), gym.make(base_id)
        assert env.observation_space == base.observation_space  # as rl-zoo3: zeroed, not removed
        obs, _ = env.reset(seed=0)
        full, _ = base.reset(seed=0)
        for _ in range(5):
            action = base.action_space.sample()
            obs, *_ = env.step(action)
            full, *_ = base.step(action)
        assert np.all(obs[velocities] == 0) and np.any(full[velocities] != 0)
        keep = [i for i in range(len(full)) if i not in velocities]
        np.testing.assert_allclose(obs[keep], full[keep])
        assert env.spec.max_episode_steps == base.spec.max_episode_steps  # the base env's time limit, once


@pytest.mark.parametrize("algo,env_id", [("ppo_lstm", "CartPoleNoVel-v1"), ("ppo_mask", "InvalidActionDiscrete-v0")])
def test_search_spaces_resolve(algo: str, env_id: str) -> None:
    import optuna

    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.tuning.objective import override_text
    from lit_sb3.zoo.tuning.search_spaces import default_search_space, sample_params, to_hyperparameters

    space = default_search_space(algo)
    assert set(space.params) == set(default_search_space("ppo").params)  # the zoo samples both with PPO's sampler
    base = resolve(algo, env_id)
    for index in (0, -1):
        point = {n: (s.choices[index] if s.type == "categorical" else (s.low if index == 0 else s.high))
                 for n, s in space.params.items()}  # fmt: skip
        sampled = sample_params(optuna.trial.FixedTrial(point), space)
        hp, _ = to_hyperparameters(algo, sampled, space.fixed, base.algo_kwargs, base.n_envs)
        cfg = resolve(algo, env_id, overrides={k: override_text(v) for k, v in hp.items()})
        assert cfg.algo_kwargs["batch_size"] <= cfg.algo_kwargs["n_steps"] * cfg.n_envs
        if algo == "ppo_lstm":  # the config's LSTM settings are kept beside the sampled net_arch
            assert cfg.algo_kwargs["policy_kwargs"]["lstm_hidden_size"] == 64


def test_bench_list_run_and_report(in_tmp_path: Path, mlflow_template: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["list", "--all"]) == 0
    out = capsys.readouterr().out
    for text in ("ppo_mask: lit_sb3.algorithms.ppo_mask.MaskablePPO", "ppo_lstm: lit_sb3.algorithms.ppo_recurrent",
                 "MlpLstmPolicy", "masked - ", "novel - "):  # fmt: skip
        assert text in out, text
    uri = _store(in_tmp_path, mlflow_template)
    # ppo_mask on CartPoleNoVel-v1 (no action_masks) is a skipped pair, as an algorithm on a space it cannot act in
    argv = ["run", "--algos", "ppo_lstm,ppo_mask", "--envs", "InvalidActionDiscrete-v0,CartPoleNoVel-v1", "--seeds", "1",
            "--jobs", "2",
            "--tracking-uri", uri, "--experiment", "contrib", "--n-timesteps", "256", "--eval-freq", "128",
            "--eval-episodes", "2", "--hyperparams", "n_steps=64", "batch_size=64", "n_envs=2"]  # fmt: skip
    assert main(argv) == 0
    jobs = _runs(uri, "contrib")
    assert sorted((r.data.tags["lit_sb3.algo"], r.data.tags["lit_sb3.env"]) for r in jobs) == [
        ("ppo_lstm", "CartPoleNoVel-v1"),
        ("ppo_lstm", "InvalidActionDiscrete-v0"),
        ("ppo_mask", "InvalidActionDiscrete-v0"),
    ]
    assert {r.info.status for r in jobs} == {"FINISHED"}
    for run in jobs:
        metrics = run.data.metrics
        assert "eval/mean_reward" in metrics and any(k.startswith("train/") for k in metrics), sorted(metrics)
        if run.data.tags["lit_sb3.algo"] == "ppo_mask":  # evaluated with masks: no invalid action ends an episode
            assert metrics["eval/mean_ep_length"] == 50
    assert main(["report", "--experiment", "contrib", "--tracking-uri", uri, "--reps", "200"]) == 0
    assert any(in_tmp_path.glob("reports/*/report.md"))
