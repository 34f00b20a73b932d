"""RLTrainer / RLEnvDataModule contract tests (seed 001) and the core library's behaviour."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from lightning.pytorch.loggers import CSVLogger, MLFlowLogger, TensorBoardLogger

from lit_sb3 import A2C, PPO, RLEnvDataModule, RLTrainer
from lit_sb3.callbacks import BaseCallback
from lit_sb3.vec_env import DummyVecEnv, VecNormalize, make_vec_env

SMALL_PPO = dict(n_steps=64, batch_size=32, n_epochs=2, seed=0)


def small_ppo(**kwargs):
    return PPO("MlpPolicy", **{**SMALL_PPO, **kwargs})


# ---------------------------------------------------------------- constructor contract


@pytest.mark.parametrize("bad", [0, -5])
def test_max_steps_must_be_positive(bad):
    with pytest.raises(ValueError, match="RLTrainer requires `max_steps` to be a positive integer."):
        RLTrainer(max_steps=bad)


@pytest.mark.parametrize(
    "kwargs, names",
    [
        ({"max_epochs": 3}, "max_epochs"),
        ({"min_epochs": 1}, "min_epochs"),
        ({"min_steps": 2}, "min_steps"),
        ({"max_epochs": 3, "min_steps": 2}, "max_epochs, min_steps"),
    ],
)
def test_epoch_limits_rejected_with_seed_message(kwargs, names):
    with pytest.raises(ValueError) as info:
        RLTrainer(max_steps=10, **kwargs)
    assert (
        str(info.value)
        == f"RLTrainer manages Lightning loop limits from `max_steps`; unsupported constructor args: {names}."
    )


def test_lightning_arguments_forwarded(tmp_path):
    trainer = RLTrainer(max_steps=10, default_root_dir=str(tmp_path), accelerator="cpu", gradient_clip_val=None)
    assert trainer.default_root_dir == str(tmp_path)
    assert trainer.rl_total_timesteps == 10
    assert trainer.rl_num_timesteps == 0 and not trainer.rl_budget_reached and trainer.rl_progress == 0.0


def test_fit_rejects_dataloaders_and_missing_datamodule():
    trainer = RLTrainer(max_steps=10, logger=False)
    with pytest.raises(TypeError, match=r"does not support Lightning data/checkpoint inputs \(train_dataloaders\)"):
        trainer.fit(small_ppo(), train_dataloaders=[1, 2])
    with pytest.raises(TypeError, match="requires a datamodule"):
        trainer.fit(small_ppo())
    with pytest.raises(TypeError, match="expects an RLEnvDataModule"):
        trainer.fit(small_ppo(), datamodule=object())
    with pytest.raises(ValueError, match="has no train_env"):
        trainer.fit(small_ppo(), datamodule=RLEnvDataModule())


def test_fit_budget_counts_env_steps_and_stops(in_tmp_path):
    model = small_ppo()
    dm = RLEnvDataModule(train_env="CartPole-v1", n_envs=2, seed=0)
    trainer = RLTrainer(max_steps=256, logger=False)
    assert trainer.fit(model, datamodule=dm) is model
    # on-policy collects whole rollouts (64 steps x 2 envs): exactly 2 iterations
    assert model.num_timesteps == 256
    assert trainer.rl_num_timesteps == 256 and trainer.rl_budget_reached and trainer.rl_progress == 1.0
    # Lightning's global_step counts collect/update cycles (here 2 iterations), not env steps
    assert trainer.global_step == 2


def test_validate_test_predict_return_shapes(in_tmp_path):
    model = small_ppo()
    dm = RLEnvDataModule(train_env="CartPole-v1", seed=0)
    trainer = RLTrainer(max_steps=64, logger=False)
    trainer.fit(model, datamodule=dm)
    keys = ["mean_reward", "std_reward", "mean_episode_length", "std_episode_length", "n_eval_episodes"]
    for stage, method in (("validate", trainer.validate), ("test", trainer.test)):
        out = method(model, datamodule=dm, n_eval_episodes=3)
        assert isinstance(out, list) and len(out) == 1
        assert sorted(out[0]) == sorted(f"{stage}/{k}" for k in keys)
        assert out[0][f"{stage}/n_eval_episodes"] == 3
        full = method(model, env="CartPole-v1", n_eval_episodes=2, return_episode_rewards=True)[0]
        assert len(full[f"{stage}/episode_rewards"]) == 2 and len(full[f"{stage}/episode_lengths"]) == 2
    actions, state = trainer.predict(model, observation=np.zeros((1, 4), dtype=np.float32))
    assert actions.shape == (1,) and state is None
    actions, _ = trainer.predict(model, datamodule=dm)
    assert actions.shape == (1,)
    with pytest.raises(TypeError, match="always returns policy predictions"):
        trainer.predict(model, return_predictions=False)
    with pytest.raises(TypeError, match=r"\(ckpt_path\)"):
        trainer.validate(model, ckpt_path="x.ckpt")


def test_default_tensorboard_logger_folder(in_tmp_path):
    model = small_ppo()
    trainer = RLTrainer(max_steps=64, run_name="myrun", default_root_dir=str(in_tmp_path))
    trainer.fit(model, datamodule=RLEnvDataModule(train_env="CartPole-v1", seed=0))
    assert isinstance(trainer.logger, TensorBoardLogger)
    assert (in_tmp_path / "lightning_logs" / "myrun_1").is_dir()
    trainer2 = RLTrainer(max_steps=64, run_name="myrun", default_root_dir=str(in_tmp_path))
    trainer2.fit(small_ppo(), datamodule=RLEnvDataModule(train_env="CartPole-v1", seed=0))
    assert (in_tmp_path / "lightning_logs" / "myrun_2").is_dir()


def test_any_lightning_logger_gets_sb3_keys_on_env_steps(in_tmp_path):
    csv = CSVLogger(str(in_tmp_path), name="csv")
    tb = TensorBoardLogger(str(in_tmp_path), name="tb")
    mlf = MLFlowLogger(
        experiment_name="t",
        tracking_uri=f"sqlite:///{in_tmp_path}/mlflow.db",
        artifact_location=str(in_tmp_path / "mlartifacts"),
    )
    model = small_ppo()
    trainer = RLTrainer(max_steps=192, logger=[csv, tb, mlf])
    trainer.fit(model, datamodule=RLEnvDataModule(train_env="CartPole-v1", seed=0))
    import pandas as pd

    frame = pd.read_csv(f"{csv.log_dir}/metrics.csv")
    assert {"time/fps", "rollout/ep_rew_mean", "train/value_loss"} <= set(frame.columns)
    assert sorted(frame["step"].dropna().unique().tolist()) == [64, 128, 192]  # env steps, one row per iteration
    history = mlf.experiment.get_metric_history(mlf.run_id, "time/fps")
    assert [m.step for m in history] == [64, 128, 192]
    assert list((in_tmp_path / "tb").rglob("events.out.tfevents*"))


class OrderCallback(BaseCallback):
    def __init__(self, stop_after: int | None = None):
        super().__init__()
        self.events: list[str] = []
        self.stop_after = stop_after

    def _on_training_start(self):
        self.events.append("training_start")

    def _on_rollout_start(self):
        self.events.append("rollout_start")

    def _on_step(self):
        self.events.append("step")
        return self.stop_after is None or self.n_calls < self.stop_after

    def _on_rollout_end(self):
        self.events.append("rollout_end")

    def _on_training_end(self):
        self.events.append("training_end")


def test_callbacks_fire_in_sb3_order_and_can_stop(in_tmp_path):
    cb = OrderCallback()
    model = PPO("MlpPolicy", n_steps=4, batch_size=4, n_epochs=1, seed=0)
    model.learn(8, env="CartPole-v1", callback=cb)
    assert cb.events == ["training_start", "rollout_start"] + ["step"] * 4 + ["rollout_end", "rollout_start"] + [
        "step"
    ] * 4 + ["rollout_end", "training_end"]
    stopper = OrderCallback(stop_after=3)
    model = PPO("MlpPolicy", n_steps=64, batch_size=32, n_epochs=1, seed=0)
    model.learn(10_000, env="CartPole-v1", callback=stopper)
    assert model.num_timesteps == 3 and stopper.events[-1] == "training_end"


def test_function_callback_and_callback_list(in_tmp_path):
    calls = []
    model = A2C("MlpPolicy", seed=0)
    model.learn(20, env="CartPole-v1", callback=[OrderCallback(), lambda _locals, _globals: calls.append(1) or True])
    assert len(calls) == 20


# ---------------------------------------------------------------- datamodule


def test_datamodule_accepts_every_env_form():
    forms = [
        "CartPole-v1",
        gym.make("CartPole-v1"),
        lambda: gym.make("CartPole-v1"),
        DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2),
        make_vec_env("CartPole-v1", n_envs=3),
    ]
    for form in forms:
        env = RLEnvDataModule(train_env=form).get_env("fit")
        assert env.observation_space.shape == (4,)
        env.reset()
    dm = RLEnvDataModule(train_env="Pendulum-v1", n_envs=3, seed=1, normalize=True, normalize_kwargs={"gamma": 0.9})
    env = dm.get_env("fit")
    assert env.num_envs == 3 and isinstance(env, VecNormalize) and env.gamma == 0.9
    val = dm.get_env("validate")
    assert isinstance(val, VecNormalize) and not val.training and not val.norm_reward and val is not env
    assert dm.get_env("test") is not None and dm.get_env("predict") is not None
    with pytest.raises(ValueError, match="Unknown stage"):
        dm.get_env("train")
    with pytest.raises(TypeError, match="train_env must be an env id"):
        RLEnvDataModule(train_env=3)


def test_unregistered_env_id_suggests_close_match():
    with pytest.raises(ValueError, match=r"'CartPol-v1' is not registered.*did you mean 'CartPole-v1'"):
        RLEnvDataModule(train_env="CartPol-v1")


# ---------------------------------------------------------------- errors before training


def test_unknown_policy_alias():
    with pytest.raises(ValueError, match=r"Unknown policy 'MlpPolicyy' for PPO \(did you mean 'MlpPolicy'\?\)"):
        PPO("MlpPolicyy")


def test_unsupported_spaces_fail_before_training():
    class TupleObsEnv(gym.Env):
        observation_space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3)))
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(NotImplementedError, match="not supported|Tuple"):
        PPO("MlpPolicy").learn(10, env=TupleObsEnv())


def test_load_with_mismatched_env(in_tmp_path):
    model = small_ppo()
    model.learn(64, env="CartPole-v1")
    model.save("ppo_cartpole")
    with pytest.raises(ValueError, match="Observation spaces do not match"):
        PPO.load("ppo_cartpole.zip", env="MountainCar-v0")
    with pytest.raises(ValueError, match="holds a PPO model, not A2C"):
        A2C.load("ppo_cartpole.zip")


# ---------------------------------------------------------------- save/load, seeding, resume


def test_save_load_identical_actions_and_parameters(in_tmp_path):
    model = PPO(
        "MlpPolicy", n_steps=64, batch_size=32, n_epochs=2, learning_rate=lambda p: 3e-4 * p if False else 3e-4, seed=0
    )
    model = small_ppo(learning_rate=3e-4)
    model.learn(128, env="Pendulum-v1")
    model.save(in_tmp_path / "ppo_pendulum")
    loaded = PPO.load(in_tmp_path / "ppo_pendulum.zip", env="Pendulum-v1")
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    assert np.array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    for (k1, v1), (k2, v2) in zip(model.get_parameters()["policy"].items(), loaded.get_parameters()["policy"].items()):
        assert k1 == k2 and th.equal(v1, v2)
    assert loaded.num_timesteps == 128 and loaded.n_steps == 64 and loaded.batch_size == 32
    # continue training the loaded model
    loaded.learn(64, reset_num_timesteps=False)
    assert loaded.num_timesteps == 192
    # the archive holds no pickle
    import zipfile

    names = zipfile.ZipFile(in_tmp_path / "ppo_pendulum.zip").namelist()
    assert "data.json" in names and not any(n.endswith(".pkl") for n in names)


def test_callable_schedule_cannot_be_saved_but_zoo_schedules_can(in_tmp_path):
    from lit_sb3.core.schedules import linear_schedule

    model = small_ppo(learning_rate=linear_schedule(1e-3), clip_range=linear_schedule(0.2))
    model.learn(64, env="CartPole-v1")
    model.save(in_tmp_path / "m.zip")
    loaded = PPO.load(in_tmp_path / "m.zip")
    assert loaded.learning_rate == linear_schedule(1e-3)
    model = small_ppo(learning_rate=lambda p: 1e-3 * p)
    model.learn(64, env="CartPole-v1")
    with pytest.raises(TypeError, match="Cannot save argument 'learning_rate'"):
        model.save(in_tmp_path / "m2.zip")


def _params(model):
    return th.cat([p.detach().flatten() for p in model.policy.parameters()])


def test_same_seed_same_results(in_tmp_path):
    runs = []
    for _ in range(2):
        model = small_ppo()
        model.learn(256, env=RLEnvDataModule(train_env="CartPole-v1", n_envs=2, seed=3).get_env("fit"))
        runs.append(_params(model))
    assert th.equal(runs[0], runs[1])


@pytest.mark.parametrize("normalize", [False, True])
def test_checkpoint_resume_equals_uninterrupted_run(in_tmp_path, normalize):
    def make_dm():
        return RLEnvDataModule(train_env="Pendulum-v1", n_envs=2, seed=7, normalize=normalize)

    full = small_ppo()
    RLTrainer(max_steps=384, logger=False).fit(full, datamodule=make_dm())

    first = small_ppo()
    trainer = RLTrainer(max_steps=192, logger=False)
    trainer.fit(first, datamodule=make_dm())
    ckpt = in_tmp_path / "mid.ckpt"
    trainer.save_checkpoint(ckpt)
    # the checkpoint loads with torch's safe loader
    th.load(ckpt, weights_only=True)

    resumed = small_ppo()
    RLTrainer(max_steps=384, logger=False).fit(resumed, datamodule=make_dm(), ckpt_path=str(ckpt))
    assert resumed.num_timesteps == 384
    assert th.equal(_params(full), _params(resumed))
    if normalize:
        assert np.allclose(full.get_vec_normalize_env().obs_rms.mean, resumed.get_vec_normalize_env().obs_rms.mean)
