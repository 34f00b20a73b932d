"""OffPolicyAlgorithm behaviour on real envs, with tiny budgets: collection, buffers, errors, save/load, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from lit_sb3 import DQN, SAC, TD3, HerReplayBuffer, NormalActionNoise, RLEnvDataModule, RLTrainer, VectorizedActionNoise
from lit_sb3.buffers.dict_replay import DictReplayBuffer
from lit_sb3.buffers.nstep_replay import NStepReplayBuffer
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.types import TrainFreq, TrainFrequencyUnit
from lit_sb3.vec_env import DummyVecEnv, VecNormalize, make_vec_env
from tests.envs import BitFlippingEnv

th.set_num_threads(1)

TINY = dict(batch_size=16, policy_kwargs=dict(net_arch=[16, 16]))


def tiny_dqn(**kwargs):
    params = dict(learning_starts=50, target_update_interval=50, **TINY)
    params.update(kwargs)
    return DQN("MlpPolicy", seed=0, **params)


def tiny_sac(**kwargs):
    params = dict(learning_starts=50, **TINY)
    params.update(kwargs)
    return SAC("MlpPolicy", seed=0, **params)


# ---------------------------------------------------------------------------------------------------------------
# Errors (raised at construction or before training starts)
# ---------------------------------------------------------------------------------------------------------------


def test_bad_train_freq_unit_raises_at_construction():
    with pytest.raises(ValueError, match="The unit of the `train_freq` must be either 'step' or 'episode' not 'x'!"):
        SAC("MlpPolicy", train_freq=(1, "x"))
    with pytest.raises(ValueError, match="frequency of `train_freq` must be an integer"):
        DQN("MlpPolicy", train_freq=(1.5, "step"))


def test_train_freq_is_converted():
    assert SAC("MlpPolicy", train_freq=3).train_freq == TrainFreq(3, TrainFrequencyUnit.STEP)
    assert DQN("MlpPolicy", train_freq=(2, "episode")).train_freq == TrainFreq(2, TrainFrequencyUnit.EPISODE)


@pytest.mark.parametrize("algo", [SAC, TD3])
def test_continuous_algorithms_reject_discrete_actions(algo):
    model = algo("MlpPolicy")
    with pytest.raises(ValueError, match=r"does not support the action space Discrete\(2\).*supported: Box"):
        model.learn(10, env="CartPole-v1")
    assert model.num_timesteps == 0


def test_dqn_rejects_box_actions():
    model = DQN("MlpPolicy")
    with pytest.raises(ValueError, match=r"DQN does not support the action space Box.*supported: Discrete"):
        model.learn(10, env="Pendulum-v1")


def test_her_needs_a_goal_env():
    model = DQN("MlpPolicy", replay_buffer_class=HerReplayBuffer)
    with pytest.raises(ValueError, match="HerReplayBuffer needs a goal"):
        model.learn(10, env="CartPole-v1")
    assert model.num_timesteps == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="ent_coef"):
        SAC("MlpPolicy", ent_coef="autox")
    with pytest.raises(ValueError, match="initial value of ent_coef"):
        SAC("MlpPolicy", ent_coef="auto_-1")
    with pytest.raises(ValueError, match="gradient_steps"):
        SAC("MlpPolicy", gradient_steps=-2)
    with pytest.raises(ValueError, match="Unknown policy"):
        TD3("MlpPolicyy")


def test_episode_train_freq_needs_one_env():
    model = tiny_dqn(train_freq=(1, "episode"))
    with pytest.raises(ValueError, match="single env"):
        model.learn(10, env=make_vec_env("CartPole-v1", n_envs=2))


# ---------------------------------------------------------------------------------------------------------------
# Collection and training schedule
# ---------------------------------------------------------------------------------------------------------------


def test_train_freq_steps_budget_and_gradient_steps():
    model = tiny_dqn(train_freq=4, gradient_steps=3)
    model.learn(203, env="CartPole-v1")
    assert model.num_timesteps == 203  # the budget is exact
    # cycles of 4 steps; updates once num_timesteps > learning_starts (52, 56, ..., 200); the cycle cut by the budget
    # at 203 stays open (its update would run when a continued fit completes it)
    n_cycles = len([t for t in range(4, 204, 4) if t > 50])
    assert model._n_updates == 3 * n_cycles
    assert model._cycle_open and model._cycle_steps == 3


def test_train_freq_episodes_with_all_gradient_steps():
    steps_per_cycle = []

    class Record(BaseCallback):
        def _on_rollout_end(self) -> None:
            steps_per_cycle.append(self.model.num_timesteps)

    model = tiny_dqn(train_freq=(1, "episode"), gradient_steps=-1, learning_starts=0)
    model.learn(300, env="CartPole-v1", callback=Record())
    assert model.num_timesteps == 300
    lengths = np.diff([0, *steps_per_cycle])
    # one episode per cycle and as many gradient steps as env steps collected; the episode cut by the budget is an
    # open cycle without its update yet
    assert model._n_updates == int(lengths.sum()) == steps_per_cycle[-1]
    assert model._cycle_open == (steps_per_cycle[-1] < 300)
    assert model._episode_num >= len(lengths) - 1


def test_random_actions_before_learning_starts_and_callbacks_every_step():
    calls = []

    class Count(BaseCallback):
        def _on_step(self) -> bool:
            calls.append(self.model.num_timesteps)
            return True

    model = tiny_sac(learning_starts=1000)
    model.learn(70, env="Pendulum-v1", callback=Count())
    assert calls == list(range(1, 71))
    assert model._n_updates == 0
    actions = model.replay_buffer.actions[:70, 0, 0].numpy()
    assert actions.min() < -0.5 and actions.max() > 0.5  # uniform in [-1, 1] (scaled)


def test_callback_stops_training():
    class Stop(BaseCallback):
        def _on_step(self) -> bool:
            return self.model.num_timesteps < 40

    model = tiny_dqn()
    model.learn(1000, env="CartPole-v1", callback=Stop())
    assert model.num_timesteps == 40


def test_several_envs_with_action_noise():
    noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
    model = TD3("MlpPolicy", seed=0, learning_starts=20, action_noise=noise, **TINY)
    model.learn(60, env=make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    assert isinstance(model.action_noise, VectorizedActionNoise)
    assert model.action_noise.n_envs == 2
    assert model.num_timesteps == 60
    assert model.replay_buffer.n_envs == 2 and model.replay_buffer.pos == 30
    assert model._n_updates > 0


def test_n_step_returns_end_to_end():
    model = tiny_dqn(n_steps=3, train_freq=1)
    model.learn(120, env="CartPole-v1")
    assert isinstance(model.replay_buffer, NStepReplayBuffer)
    assert model.replay_buffer.n_steps == 3 and model.replay_buffer.gamma == model.gamma
    sample = model.replay_buffer.sample(64)
    assert sample.discounts is not None
    allowed = th.tensor([model.gamma, model.gamma**2, model.gamma**3])
    assert th.isclose(sample.discounts, allowed.reshape(1, 3), atol=1e-6).any(dim=1).all()
    assert model._n_updates > 0


def test_timeout_is_bootstrapped_and_termination_is_not():
    # Pendulum is truncated at 200 steps: the transition is stored with done=1, timeout=1 and sampled as done=0
    model = tiny_sac(learning_starts=10_000)
    model.learn(205, env="Pendulum-v1")
    rb = model.replay_buffer
    assert rb.dones[199, 0] == 1 and rb.timeouts[199, 0] == 1
    assert rb._get_samples(th.tensor([199])).dones.item() == 0.0
    # the terminal observation (not the reset one) is the next observation
    assert th.allclose(rb.next_observations[199, 0], rb.observations[199, 0], atol=1.0)
    assert not th.allclose(rb.next_observations[199, 0], rb.observations[200, 0])
    # CartPole terminates: done=1 is kept
    dqn = tiny_dqn(learning_starts=10_000)
    dqn.learn(60, env="CartPole-v1")
    ends = th.nonzero(dqn.replay_buffer.dones[:60, 0]).flatten()
    assert len(ends) > 0
    terminated = [i for i in ends.tolist() if dqn.replay_buffer.timeouts[i, 0] == 0]
    assert dqn.replay_buffer._get_samples(th.tensor(terminated)).dones.min().item() == 1.0


def test_dict_observations_multi_input_policy():
    model = SAC("MultiInputPolicy", seed=0, learning_starts=30, **TINY)
    model.learn(60, env=BitFlippingEnv(n_bits=4, continuous=True))
    assert isinstance(model.replay_buffer, DictReplayBuffer)
    assert model._n_updates > 0
    obs = model.env.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (1, 4)


def test_vec_normalize_stores_original_observations():
    env = VecNormalize(DummyVecEnv([lambda: __import__("gymnasium").make("Pendulum-v1")]), norm_reward=True)
    model = tiny_sac(learning_starts=10_000)
    model.learn(50, env=env)
    rb = model.replay_buffer
    original = env.get_original_obs()
    assert np.allclose(rb.next_observations[49, 0].numpy(), original[0], atol=1e-6)
    assert np.allclose(model._last_original_obs, original)
    # raw Pendulum observations: cos/sin in [-1, 1]
    assert rb.observations[:50, 0, :2].abs().max() <= 1.0 + 1e-6
    assert np.allclose(rb.observations[1:50, 0].numpy(), rb.next_observations[:49, 0].numpy())


def test_optimize_memory_usage_and_truncation_warning():
    model = tiny_dqn(optimize_memory_usage=True, replay_buffer_kwargs=dict(handle_timeout_termination=False))
    model.learn(80, env="CartPole-v1")
    assert model.replay_buffer.next_observations is None
    with pytest.warns(UserWarning, match="last trajectory in the replay buffer will be truncated"):
        model.learn(20, env="CartPole-v1")
    assert model.num_timesteps == 20


def test_custom_replay_buffer_class_with_n_steps_warns():
    model = tiny_dqn(n_steps=3, replay_buffer_class=ReplayBuffer)
    with pytest.warns(UserWarning, match="n_steps=3` is ignored"):
        model.learn(10, env="CartPole-v1")


# ---------------------------------------------------------------------------------------------------------------
# Save / load
# ---------------------------------------------------------------------------------------------------------------


def test_replay_buffer_save_load_round_trip(tmp_path):
    model = tiny_dqn(learning_starts=10_000)
    model.learn(70, env="CartPole-v1")
    path = tmp_path / "sub" / "buffer"
    model.save_replay_buffer(path)
    assert (tmp_path / "sub" / "buffer.npz").exists()
    old = model.replay_buffer
    model.load_replay_buffer(path)
    assert model.replay_buffer is not old
    assert model.replay_buffer.pos == old.pos == 70
    for name, tensor in old._storage_tensors().items():
        assert th.equal(tensor, model.replay_buffer._storage_tensors()[name])


@pytest.mark.parametrize("algo", ["sac", "td3", "dqn"])
def test_save_load_same_deterministic_actions(tmp_path, algo):
    if algo == "dqn":
        model, env_id, cls = tiny_dqn(), "CartPole-v1", DQN
    else:
        cls = SAC if algo == "sac" else TD3
        model, env_id = cls("MlpPolicy", seed=0, learning_starts=20, **TINY), "Pendulum-v1"
    model.learn(60, env=env_id)
    obs = np.stack([model.observation_space.sample() for _ in range(8)])
    actions, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "model.zip")
    loaded = cls.load(tmp_path / "model.zip")
    loaded_actions, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_allclose(actions, loaded_actions)
    assert loaded.num_timesteps == 60
    assert loaded.train_freq == model.train_freq
    # the loaded model trains further
    loaded.learn(30, env=env_id, reset_num_timesteps=False)
    assert loaded.num_timesteps == 90


# ---------------------------------------------------------------------------------------------------------------
# Lightning checkpoints
# ---------------------------------------------------------------------------------------------------------------


def test_checkpoint_resume_equals_uninterrupted_run(tmp_path):
    kwargs = dict(learning_starts=100, batch_size=32, policy_kwargs=dict(net_arch=[32, 32]), seed=3)

    def fit(model, steps, ckpt_path=None):
        trainer = RLTrainer(max_steps=steps, logger=False, default_root_dir=tmp_path)
        trainer.fit(
            model,
            datamodule=RLEnvDataModule("Pendulum-v1"),
            ckpt_path=ckpt_path,
            weights_only=True if ckpt_path else None,
        )
        return trainer

    straight = SAC("MlpPolicy", **kwargs)
    fit(straight, 600)

    first = SAC("MlpPolicy", **kwargs)
    trainer = fit(first, 300)
    trainer.save_checkpoint(tmp_path / "half.ckpt")

    resumed = SAC("MlpPolicy", **kwargs)
    fit(resumed, 600, ckpt_path=tmp_path / "half.ckpt")

    assert resumed.num_timesteps == straight.num_timesteps == 600
    assert resumed._n_updates == straight._n_updates == 500
    expected, got = straight.state_dict(), resumed.state_dict()
    assert expected.keys() == got.keys() and "log_ent_coef" in got
    for key in expected:
        assert th.equal(expected[key], got[key]), key
    for name, tensor in straight.replay_buffer._storage_tensors().items():
        assert th.equal(tensor, resumed.replay_buffer._storage_tensors()[name]), name
    for a, b in zip(
        straight.actor.optimizer.state_dict()["state"].values(), resumed.actor.optimizer.state_dict()["state"].values()
    ):
        assert th.equal(a["exp_avg"], b["exp_avg"])


# ---------------------------------------------------------------------------------------------------------------
# Logging and precision
# ---------------------------------------------------------------------------------------------------------------


def test_dump_logs_every_log_interval_episodes():
    model = tiny_dqn(learning_starts=20)
    model.learn(150, env="CartPole-v1", log_every_n_steps=1)
    logged = model.last_logged
    for key in (
        "time/fps",
        "time/episodes",
        "rollout/ep_rew_mean",
        "rollout/ep_len_mean",
        "train/loss",
        "train/n_updates",
    ):
        assert key in logged, key
    assert isinstance(logged["train/loss"], float)


def test_bf16_mixed_precision_trains(tmp_path):
    # ('16-mixed', which needs a GradScaler, is rejected in on_train_start; on CPU Lightning turns it into bf16)
    model = tiny_sac(learning_starts=20)
    trainer = RLTrainer(max_steps=50, precision="bf16-mixed", logger=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule("Pendulum-v1"))
    assert model.num_timesteps == 50 and model._n_updates == 30
    assert all(th.isfinite(p).all() for p in model.parameters())
