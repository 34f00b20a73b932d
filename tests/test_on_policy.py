"""PPO / A2C: learning checks on real envs, spaces, policies and callbacks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from lit_sb3 import A2C, PPO, RLEnvDataModule, RLTrainer
from lit_sb3.callbacks import (
    CheckpointCallback,
    EvalCallback,
    EveryNTimesteps,
    StopTrainingOnMaxEpisodes,
    StopTrainingOnNoModelImprovement,
    StopTrainingOnRewardThreshold,
)
from lit_sb3.core.schedules import linear_schedule
from tests.tolerances import UNIT_ROUNDOFF


def test_ppo_learns_cartpole_with_zoo_hyperparameters(in_tmp_path):
    """RL Zoo CartPole-v1 settings: deterministic mean >= 475 over 20 episodes within 100k env steps (seed 0)."""
    model = PPO(
        "MlpPolicy",
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear_schedule(1e-3),
        clip_range=linear_schedule(0.2),
        seed=0,
    )
    dm = RLEnvDataModule(train_env="CartPole-v1", n_envs=8, seed=0)
    stop = StopTrainingOnRewardThreshold(reward_threshold=475)
    eval_cb = EvalCallback(
        dm.get_env("validate"), callback_on_new_best=stop, n_eval_episodes=20, eval_freq=5000 // 8, verbose=0
    )
    trainer = RLTrainer(max_steps=100_000, rl_callback=eval_cb, logger=False)
    trainer.fit(model, datamodule=dm)
    assert model.num_timesteps <= 100_000
    result = trainer.validate(model, datamodule=dm, n_eval_episodes=20)[0]
    assert result["validate/mean_reward"] >= 475, result


def test_a2c_learns_cartpole(in_tmp_path):
    """A2C with the RL Zoo's CartPole settings (8 envs, ent_coef 0) beats 150 within 60k steps (random policy: ~22)."""
    model = A2C("MlpPolicy", ent_coef=0.0, seed=0)
    dm = RLEnvDataModule(train_env="CartPole-v1", n_envs=8, seed=0)
    stop = StopTrainingOnRewardThreshold(reward_threshold=150)
    eval_cb = EvalCallback(
        dm.get_env("validate"), callback_on_new_best=stop, n_eval_episodes=10, eval_freq=4000 // 8, verbose=0
    )
    trainer = RLTrainer(max_steps=60_000, rl_callback=eval_cb, logger=False)
    trainer.fit(model, datamodule=dm)
    assert trainer.validate(model, datamodule=dm, n_eval_episodes=10)[0]["validate/mean_reward"] >= 150


@pytest.mark.slow
def test_ppo_learns_pendulum():
    """RL Zoo Pendulum-v1 PPO settings: mean >= -300 after 100k steps."""
    model = PPO(
        "MlpPolicy",
        n_steps=1024,
        gae_lambda=0.95,
        gamma=0.9,
        n_epochs=10,
        ent_coef=0.0,
        learning_rate=1e-3,
        clip_range=0.2,
        use_sde=True,
        sde_sample_freq=4,
        seed=0,
    )
    dm = RLEnvDataModule(train_env="Pendulum-v1", n_envs=4, seed=0, normalize=True, normalize_kwargs={"gamma": 0.9})
    trainer = RLTrainer(max_steps=100_000, logger=False)
    trainer.fit(model, datamodule=dm)
    assert trainer.validate(model, datamodule=dm, n_eval_episodes=10)[0]["validate/mean_reward"] >= -300


class DictObsEnv(gym.Env):
    """Dict observation (vector + image + discrete), Discrete actions; reward for matching the discrete key."""

    def __init__(self):
        self.observation_space = spaces.Dict(
            {
                "vec": spaces.Box(-1, 1, (3,), np.float32),
                "img": spaces.Box(0, 255, (36, 36, 1), np.uint8),
                "mode": spaces.Discrete(3),
            }
        )
        self.action_space = spaces.Discrete(3)
        self._t = 0

    def _obs(self):
        return {
            "vec": self.np_random.uniform(-1, 1, 3).astype(np.float32),
            "img": self.np_random.integers(0, 255, (36, 36, 1), dtype=np.uint8),
            "mode": int(self.np_random.integers(3)),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._last = self._obs()
        return self._last, {}

    def step(self, action):
        reward = float(action == self._last["mode"])
        self._t += 1
        self._last = self._obs()
        return self._last, reward, False, self._t >= 20, {}


class ImageEnv(gym.Env):
    """Small synthetic uint8 image env (channel-last), Box actions."""

    def __init__(self):
        self.observation_space = spaces.Box(0, 255, (40, 40, 3), np.uint8)
        self.action_space = spaces.Box(-1, 1, (2,), np.float32)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.integers(0, 255, (40, 40, 3), dtype=np.uint8), {}

    def step(self, action):
        self._t += 1
        obs = self.np_random.integers(0, 255, (40, 40, 3), dtype=np.uint8)
        return obs, -float(np.sum(np.square(action))), False, self._t >= 25, {}


class MultiActionEnv(gym.Env):
    """Reward for actions equal to a fixed target; action space given at construction."""

    def __init__(self, action_space):
        self.observation_space = spaces.Box(-1, 1, (4,), np.float32)
        self.action_space = action_space
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self._t += 1
        reward = float(np.mean(np.asarray(action) == 1))
        return np.full(4, self._t / 10, np.float32), reward, False, self._t >= 10, {}


@pytest.mark.parametrize("algo", [PPO, A2C])
def test_dict_observations_multi_input_policy(algo, in_tmp_path):
    model = algo("MultiInputPolicy", n_steps=32, seed=0, **({"batch_size": 32, "n_epochs": 2} if algo is PPO else {}))
    model.learn(256, env=DictObsEnv())
    obs = DictObsEnv()
    o, _ = obs.reset(seed=0)
    action, _ = model.predict(o, deterministic=True)
    assert obs.action_space.contains(int(action))


def test_cnn_policy_on_images_normalised(in_tmp_path):
    model = PPO("CnnPolicy", n_steps=32, batch_size=16, n_epochs=1, seed=0)
    model.learn(64, env=ImageEnv())
    # channel-last images were transposed for the CNN and uint8 scaled to [0, 1]
    assert model.observation_space.shape == (3, 40, 40)
    obs = model.policy.obs_to_tensor(np.full((3, 40, 40), 255, np.uint8))[0]
    features = model.policy.extract_features(obs, model.policy.pi_features_extractor)
    assert features.shape[-1] == 512


@pytest.mark.parametrize("space", [spaces.MultiDiscrete([3, 2, 4]), spaces.MultiBinary(5)])
@pytest.mark.parametrize("algo", [PPO, A2C])
def test_multidiscrete_and_multibinary_actions(space, algo, in_tmp_path):
    kwargs = {"batch_size": 32, "n_epochs": 2} if algo is PPO else {}
    model = algo("MlpPolicy", n_steps=32, seed=0, **kwargs)
    model.learn(320, env=MultiActionEnv(space))
    action, _ = model.predict(np.zeros(4, np.float32))
    assert space.contains(action.astype(space.dtype))


def test_gsde_and_value_clipping(in_tmp_path):
    model = PPO(
        "MlpPolicy",
        n_steps=64,
        batch_size=32,
        n_epochs=2,
        use_sde=True,
        sde_sample_freq=4,
        clip_range_vf=0.2,
        target_kl=0.05,
        seed=0,
    )
    model.learn(256, env="Pendulum-v1")
    assert np.isfinite(model.last_logged["train/value_loss"])
    assert "train/std" in model.last_logged


def test_eval_checkpoint_and_stop_callbacks(in_tmp_path):
    dm = RLEnvDataModule(train_env="CartPole-v1", seed=0)
    no_improvement = StopTrainingOnNoModelImprovement(max_no_improvement_evals=0, min_evals=1)
    eval_cb = EvalCallback(
        dm.get_env("validate"),
        callback_after_eval=no_improvement,
        n_eval_episodes=2,
        eval_freq=32,
        log_path=str(in_tmp_path / "eval"),
        best_model_save_path=str(in_tmp_path / "best"),
        verbose=0,
    )
    ckpt = CheckpointCallback(save_freq=64, save_path=str(in_tmp_path / "ckpt"), name_prefix="ppo")
    model = PPO("MlpPolicy", n_steps=32, batch_size=32, n_epochs=1, learning_rate=0.0, seed=0)
    trainer = RLTrainer(max_steps=2048, rl_callback=[eval_cb, ckpt], logger=False)
    trainer.fit(model, datamodule=dm)
    # learning_rate 0: no improvement after the first evaluations -> stopped long before the budget
    assert model.num_timesteps < 2048
    data = np.load(in_tmp_path / "eval" / "evaluations.npz")
    assert data["results"].shape[1] == 2 and list(data["timesteps"]) == sorted(data["timesteps"])
    assert (in_tmp_path / "best" / "best_model.zip").exists()
    assert sorted(p.name for p in (in_tmp_path / "ckpt").iterdir())[0].startswith("ppo_")
    assert "eval/mean_reward" in model.last_logged
    PPO.load(in_tmp_path / "best" / "best_model.zip")


def test_every_n_timesteps_and_max_episodes(in_tmp_path):
    triggered = []
    from lit_sb3.callbacks import ConvertCallback

    every = EveryNTimesteps(n_steps=50, callback=ConvertCallback(lambda _locals, _globals: triggered.append(1) or True))
    model = A2C("MlpPolicy", seed=0)
    model.learn(500, env="CartPole-v1", callback=every)
    assert len(triggered) == 10
    stopper = StopTrainingOnMaxEpisodes(max_episodes=3)
    model = A2C("MlpPolicy", seed=0)
    model.learn(100_000, env="CartPole-v1", callback=stopper)
    assert stopper.n_episodes == 3 and model.num_timesteps < 1000


def test_progress_bar_counts_env_steps(in_tmp_path, capsys):
    model = PPO("MlpPolicy", n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(64, env="CartPole-v1", progress_bar=True)
    out = capsys.readouterr().out
    assert "64/64" in out


class ZeroRewardEnv(gym.Env):
    """Reward 0 always; truncated after 5 steps (never terminated); the observation is the step count."""

    observation_space = spaces.Box(0, 10, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self._t += 1
        return np.array([self._t], np.float32), 0.0, False, self._t >= 5, {}


def test_timeout_bootstrapping_adds_discounted_terminal_value(in_tmp_path):
    """On truncation the stored reward is gamma * V(terminal_obs) (SB3's timeout bootstrapping); else untouched."""
    import torch as th

    model = PPO("MlpPolicy", n_steps=10, batch_size=10, n_epochs=1, gamma=0.9, learning_rate=0.0, seed=0)
    model.learn(10, env=ZeroRewardEnv())
    rewards = model.rollout_buffer.rewards[:, 0]
    with th.no_grad():
        v_terminal = float(model.policy.predict_values(th.tensor([[5.0]]))[0])
    expected = np.zeros(10, np.float32)
    expected[[4, 9]] = 0.9 * v_terminal
    # 0.9 rounded to float32, the float32 product, the float32 cast of the float64 expectation: three roundings
    np.testing.assert_allclose(rewards, expected, rtol=3 * UNIT_ROUNDOFF, atol=0.0)
    assert v_terminal != 0.0
