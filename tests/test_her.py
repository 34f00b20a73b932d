"""HER with off-policy algorithms on BitFlippingEnv (real learning, small budgets)."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from lit_sb3 import DQN, SAC, HerReplayBuffer
from tests.envs import BitFlippingEnv

th.set_num_threads(1)


def _greedy_success_rate(model, n_bits: int, continuous: bool = False, n_episodes: int = 30) -> float:
    env = BitFlippingEnv(n_bits=n_bits, continuous=continuous, max_steps=n_bits)
    successes = []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=episode)
        done, info = False, {}
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes.append(float(info["is_success"]))
    return float(np.mean(successes))


def test_dqn_her_solves_bit_flipping():
    n_bits = 6
    model = DQN(
        "MultiInputPolicy",
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
        learning_rate=1e-3,
        train_freq=1,
        learning_starts=100,
        exploration_fraction=0.3,
        exploration_final_eps=0.02,
        target_update_interval=250,
        batch_size=64,
        buffer_size=100_000,
        gamma=0.95,
        policy_kwargs=dict(net_arch=[64, 64]),
        seed=0,
    )
    model.learn(2500, env=BitFlippingEnv(n_bits=n_bits, max_steps=n_bits))
    assert isinstance(model.replay_buffer, HerReplayBuffer)
    # success rate of the last (training) episodes, and of the greedy policy
    assert np.mean(list(model.ep_success_buffer)[-50:]) >= 0.9
    assert _greedy_success_rate(model, n_bits) >= 0.9
    assert "rollout/success_rate" in model.last_logged


def test_her_buffer_checkpoint_and_save_load(tmp_path):
    model = SAC(
        "MultiInputPolicy",
        replay_buffer_class=HerReplayBuffer,
        learning_starts=20,
        batch_size=16,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
    )
    env = BitFlippingEnv(n_bits=4, continuous=True, max_steps=4)
    model.learn(40, env=env)
    model.save_replay_buffer(tmp_path / "her.npz")
    model.load_replay_buffer(tmp_path / "her.npz", truncate_last_traj=True)
    assert isinstance(model.replay_buffer, HerReplayBuffer)
    assert model.replay_buffer.env is model.env
    assert model.replay_buffer.pos == 40 % model.replay_buffer.buffer_size
    state = model._extra_checkpoint_state()
    model._load_extra_checkpoint_state(state)
    assert isinstance(model.replay_buffer, HerReplayBuffer) and model.replay_buffer.env is model.env


@pytest.mark.slow
def test_sac_her_solves_continuous_bit_flipping():
    n_bits = 6
    model = SAC(
        "MultiInputPolicy",
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
        learning_starts=200,
        learning_rate=1e-3,
        gamma=0.95,
        batch_size=128,
        policy_kwargs=dict(net_arch=[64, 64]),
        seed=0,
    )
    model.learn(5000, env=BitFlippingEnv(n_bits=n_bits, continuous=True, max_steps=n_bits))
    assert _greedy_success_rate(model, n_bits, continuous=True) >= 0.9
