"""DQN specifics: exploration schedule, target updates counted in env steps, learning on CartPole."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from lit_sb3 import DQN
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.vec_env import make_vec_env

th.set_num_threads(1)


def test_defaults_match_sb3():
    model = DQN("MlpPolicy")
    assert (model.learning_rate, model.buffer_size, model.learning_starts, model.batch_size) == (
        1e-4,
        1_000_000,
        100,
        32,
    )
    assert (model.tau, model.gamma, model.gradient_steps, model.target_update_interval) == (1.0, 0.99, 1, 10000)
    assert (model.exploration_fraction, model.exploration_initial_eps, model.exploration_final_eps) == (0.1, 1.0, 0.05)
    assert model.max_grad_norm == 10 and model.train_freq.frequency == 4


def test_exploration_schedule_and_target_updates():
    model = DQN(
        "MlpPolicy",
        learning_starts=0,
        exploration_fraction=0.5,
        exploration_initial_eps=1.0,
        exploration_final_eps=0.1,
        target_update_interval=40,
        batch_size=16,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
    )
    eps = []
    target_changes = []

    from lit_sb3.callbacks.base import BaseCallback

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            eps.append((self.model.num_timesteps, self.model.exploration_rate))
            target = self.model.q_net_target.q_net[0].weight
            target_changes.append(bool(th.equal(target, self.model.q_net.q_net[0].weight)))

    # 2 envs: the target is updated every 40 // 2 = 20 env.step() calls
    model.learn(200, env=make_vec_env("CartPole-v1", n_envs=2, seed=0), callback=Watch())
    assert model._n_calls == 100
    for t, rate in eps:
        progress = t / 200
        expected = 1.0 + min(progress, 0.5) * (0.1 - 1.0) / 0.5 if progress <= 0.5 else 0.1
        assert rate == pytest.approx(expected)
    # right after a target update (every 20 calls = 40 env steps, i.e. at each multiple of 40) q_net == target,
    # and it differs in between (the collection ends before the next gradient step)
    # (before the first gradient step, at t=8, nothing has been trained yet)
    synced = [t for (t, _), same in zip(eps, target_changes) if same and t > 8]
    assert synced == [40, 80, 120, 160, 200]


def test_predict_is_greedy_when_deterministic():
    model = DQN("MlpPolicy", learning_starts=0, batch_size=16, policy_kwargs=dict(net_arch=[16]), seed=0)
    model.learn(40, env="CartPole-v1")
    model.exploration_rate = 1.0
    obs = np.stack([model.observation_space.sample() for _ in range(16)])
    greedy = model.policy.q_net(th.as_tensor(obs)).argmax(dim=1).numpy()
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], greedy)


def _zoo_cartpole_dqn(seed: int) -> DQN:
    return DQN(
        "MlpPolicy",
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1000,
        gamma=0.99,
        target_update_interval=10,
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        policy_kwargs=dict(net_arch=[256, 256]),
        seed=seed,
    )


@pytest.mark.slow
def test_dqn_learns_cartpole_with_zoo_hyperparameters():
    """rl-baselines3-zoo's CartPole-v1 hyperparameters, 5e4 steps: greedy mean >= 195."""
    model = _zoo_cartpole_dqn(seed=0)
    model.learn(50_000, env="CartPole-v1")
    mean_reward, _ = evaluate_policy(
        model, make_vec_env("CartPole-v1", seed=123), n_eval_episodes=10, deterministic=True
    )
    assert mean_reward >= 195
