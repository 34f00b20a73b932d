"""Atari: SB3's AtariWrapper semantics step by step, the zoo's ``atari`` entry, uint8 observations end to end,
replay memory per transition, and PPO/DQN through ``bench run`` into MLflow (ale-py and OpenCV: the ``atari``
extra, in ``dev``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

ROOT = Path(__file__).resolve().parent.parent
GAME = "BreakoutNoFrameskip-v4"  # FIRE on reset, 5 lives


def _lives(env: gym.Env) -> int:
    return int(env.unwrapped.ale.lives())


@pytest.mark.parametrize(
    ("env_id", "kwargs", "steps"),
    [(GAME, {}, 400), ("PongNoFrameskip-v4", {"action_repeat_probability": 0.25, "noop_max": 5}, 150)],
)
def test_atari_wrapper_matches_sb3_step_by_step(env_id: str, kwargs: dict, steps: int) -> None:
    from stable_baselines3.common.atari_wrappers import AtariWrapper as SB3AtariWrapper

    from lit_sb3.envs.atari_wrappers import AtariWrapper, EpisodicLifeEnv
    from lit_sb3.vec_env import check_env_id

    check_env_id(env_id)  # registers the ALE ids
    ours, theirs = AtariWrapper(gym.make(env_id), **kwargs), SB3AtariWrapper(gym.make(env_id), **kwargs)
    assert ours.observation_space == theirs.observation_space
    assert ours.observation_space.dtype == np.uint8 and ours.observation_space.shape == (84, 84, 1)
    obs_a, _ = ours.reset(seed=7)
    obs_b, _ = theirs.reset(seed=7)
    assert obs_a.tobytes() == obs_b.tobytes()
    episodic = ours
    while not isinstance(episodic, EpisodicLifeEnv):
        episodic = episodic.env
    rng = np.random.default_rng(0)
    life_losses = game_overs = 0
    for t in range(steps):
        action = int(rng.integers(ours.action_space.n))
        obs_a, rew_a, term_a, trunc_a, info_a = ours.step(action)
        obs_b, rew_b, term_b, trunc_b, info_b = theirs.step(action)
        assert obs_a.dtype == np.uint8 and obs_a.tobytes() == obs_b.tobytes(), t
        assert (rew_a, term_a, trunc_a) == (rew_b, term_b, trunc_b), t
        assert rew_a in (-1.0, 0.0, 1.0) and _lives(ours) == _lives(theirs) == info_a["lives"] == info_b["lives"]
        if term_a or trunc_a:
            if episodic.was_real_done:
                game_overs += 1
            else:
                life_losses += 1
            obs_a, _ = ours.reset()
            obs_b, _ = theirs.reset()
            assert obs_a.tobytes() == obs_b.tobytes(), t
    if env_id == GAME:  # the episodic-life logic was exercised: lives lost, and whole games over and reset
        assert life_losses >= 4 and game_overs >= 1, (life_losses, game_overs)


def test_make_atari_env_matches_sb3_and_stacks_uint8_frames() -> None:
    from stable_baselines3.common.env_util import make_atari_env as sb3_make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack as SB3VecFrameStack

    from lit_sb3.vec_env import VecFrameStack, make_atari_env

    ours = VecFrameStack(make_atari_env(GAME, n_envs=2, seed=3), 4)
    theirs = SB3VecFrameStack(sb3_make_atari_env(GAME, n_envs=2, seed=3), 4)
    obs_a, obs_b = ours.reset(), theirs.reset()
    assert obs_a.dtype == np.uint8 and obs_a.shape == (2, 84, 84, 4)
    rng = np.random.default_rng(1)
    for t in range(60):
        actions = rng.integers(4, size=2)
        obs_a, rew_a, done_a, _ = ours.step(actions)
        obs_b, rew_b, done_b, _ = theirs.step(actions)
        assert obs_a.tobytes() == obs_b.tobytes(), t
        assert np.array_equal(rew_a, rew_b) and np.array_equal(done_a, done_b), t
    ours.close()
    theirs.close()


def test_atari_ids_register_lazily_and_a_missing_ale_py_names_the_extra() -> None:
    code = (
        "import sys, gymnasium as gym, lit_sb3, lit_sb3.vec_env as v, lit_sb3.envs.atari_wrappers\n"
        "assert 'ale_py' not in sys.modules and 'cv2' not in sys.modules\n"
        "sys.modules['ale_py'] = None  # ale-py missing: a one-line ImportError naming the extra\n"
        "try:\n    v.make_atari_env('BreakoutNoFrameskip-v4')\nexcept ImportError as e:\n    print(e)\n"
        "del sys.modules['ale_py']\n"
        "v.check_env_id('PongNoFrameskip-v4'); assert 'ale_py' in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == 'Atari envs need ale-py, which is not installed: pip install "lit_sb3[atari]"'


def test_zoo_atari_entry_resolves_and_builds_uint8_stacked_frames() -> None:
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.worker.envs import build_env

    jobs, skipped = plan_grid(["ppo", "a2c", "dqn", "qrdqn"], [GAME], [0], n_timesteps=2048)
    assert not skipped and len(jobs) == 4
    for job in jobs:
        cfg = job.resolved_config()
        assert resolve(job.algo, GAME).source_entry == "atari" and cfg.policy == "CnnPolicy" and cfg.frame_stack == 4
        assert cfg.env_wrapper == [("lit_sb3.envs.atari_wrappers.AtariWrapper", {})]
    a2c = jobs[1].resolved_config()
    from lit_sb3.core.rmsprop_tf_like import RMSpropTFLike

    assert a2c.algo_kwargs["policy_kwargs"]["optimizer_class"] is RMSpropTFLike  # the zoo's a2c atari entry
    env = build_env(jobs[0])  # ppo: 8 envs
    obs = env.reset()
    assert obs.dtype == np.uint8 and obs.shape == (8, 84, 84, 4)
    obs, *_ = env.step(np.zeros(8, dtype=np.int64))
    assert obs.dtype == np.uint8 and obs.shape == (8, 84, 84, 4)
    env.close()


def test_replay_memory_per_transition_matches_sb3() -> None:
    """Bytes per stored transition of the zoo's DQN Atari data (4x84x84 uint8, Discrete), from the arrays' nbytes."""
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    from lit_sb3.buffers import ReplayBuffer

    obs_space, act_space = spaces.Box(0, 255, (4, 84, 84), np.uint8), spaces.Discrete(4)
    size = 1000
    names = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    for optimize, expected in ((False, 2 * 28224 + 8 + 12), (True, 28224 + 8 + 12)):
        kwargs = dict(optimize_memory_usage=optimize, handle_timeout_termination=not optimize, device="cpu")
        ours, theirs = (
            ReplayBuffer(size, obs_space, act_space, **kwargs),
            SB3ReplayBuffer(size, obs_space, act_space, **kwargs),
        )
        per = [
            sum(int(a.nbytes) for n in names if (a := getattr(b, n, None)) is not None) / size for b in (ours, theirs)
        ]
        assert per == [expected, expected]
        assert ours.nbytes_per_transition() == expected and str(ours.observations.dtype) == "torch.uint8"


def test_uint8_observations_stay_uint8_until_the_network_divides(tmp_path: Path) -> None:
    import torch as th

    from lit_sb3 import DQN, PPO, RLEnvDataModule, RLTrainer
    from lit_sb3.vec_env import VecFrameStack, make_atari_env

    seen: list[th.Tensor] = []
    for cls, kwargs, n_envs in (
        (PPO, dict(n_steps=32, batch_size=32, n_epochs=1), 2),
        (DQN, dict(buffer_size=500, learning_starts=64, batch_size=8, optimize_memory_usage=True,
                   replay_buffer_kwargs=dict(handle_timeout_termination=False)), 1),
    ):  # fmt: skip
        model = cls("CnnPolicy", seed=0, device="cpu", **kwargs)
        env = VecFrameStack(make_atari_env(GAME, n_envs=n_envs, seed=0), 4)
        trainer = RLTrainer(max_steps=96 if cls is DQN else 64, logger=False, default_root_dir=tmp_path)
        trainer.fit(model, datamodule=RLEnvDataModule(train_env=env, seed=0))
        extractor = model.policy.q_net.features_extractor if cls is DQN else model.policy.features_extractor
        handle = extractor.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
        buffer = model.replay_buffer if cls is DQN else model.rollout_buffer
        assert "uint8" in str(buffer.observations.dtype)
        batch = buffer.sample(4) if cls is DQN else next(iter(buffer.get(4)))
        assert batch.observations.dtype == th.uint8 and batch.observations.shape[1:] == (4, 84, 84)
        with th.no_grad():
            model.policy.predict(batch.observations.numpy(), deterministic=True)
        handle.remove()
        assert seen[-1].dtype == th.float32 and 0.0 <= float(seen[-1].min()) and float(seen[-1].max()) <= 1.0
        env.close()


def _bench_run(uri: str, algo: str, hyperparams: list[str]) -> int:
    from lit_sb3.zoo.cli import main

    return main(["run", "--algos", algo, "--envs", GAME, "--seeds", "1", "--jobs", "1", "--tracking-uri", uri,
                 "--experiment", "atari", "--n-timesteps", "512", "--eval-freq", "512", "--eval-episodes", "1",
                 "--hyperparams", *hyperparams])  # fmt: skip


def test_ppo_and_dqn_run_an_atari_game_through_bench_run(tmp_path: Path, mlflow_template: Path) -> None:
    from tests.mlflow_store import client, copy_store, runs

    uri = copy_store(tmp_path, mlflow_template)
    assert _bench_run(uri, "ppo", ["n_envs=2", "n_steps=64", "batch_size=64", "n_epochs=1"]) == 0
    assert _bench_run(uri, "dqn", ["buffer_size=1000", "learning_starts=128", "optimize_memory_usage=True",
                                   "replay_buffer_kwargs=dict(handle_timeout_termination=False)"]) == 0  # fmt: skip
    jobs = runs(uri, "atari")
    assert sorted(r.data.tags["lit_sb3.algo"] for r in jobs) == ["dqn", "ppo"]
    for run in jobs:
        assert run.info.status == "FINISHED" and run.data.params["env_wrapper"].count("AtariWrapper") == 1
        history = client(uri).get_metric_history(run.info.run_id, "eval/mean_reward")
        assert history and history[-1].step == 512


def test_a2c_zoo_atari_optimizer_survives_save_and_load(tmp_path: Path) -> None:
    from lit_sb3 import A2C, RLEnvDataModule, RLTrainer
    from lit_sb3.core.rmsprop_tf_like import RMSpropTFLike
    from lit_sb3.vec_env import VecFrameStack, make_atari_env
    from lit_sb3.zoo.config import resolve

    policy_kwargs = resolve("a2c", GAME).algo_kwargs["policy_kwargs"]  # RMSpropTFLike, eps 1e-5
    model = A2C("CnnPolicy", seed=0, device="cpu", n_steps=5, policy_kwargs=policy_kwargs)
    env = VecFrameStack(make_atari_env(GAME, n_envs=2, seed=0), 4)
    RLTrainer(max_steps=10, logger=False, default_root_dir=tmp_path).fit(
        model, datamodule=RLEnvDataModule(train_env=env, seed=0)
    )
    model.save(tmp_path / "a2c.zip")
    loaded = A2C.load(tmp_path / "a2c.zip")
    assert type(model.policy.optimizer) is type(loaded.policy.optimizer) is RMSpropTFLike
    assert loaded.policy.optimizer.param_groups[0]["eps"] == 1e-5
    env.close()
