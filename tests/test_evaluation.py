"""Tests of evaluate_policy with real gymnasium envs and real predictor objects."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.core.monitor import Monitor
from lit_sb3.vec_env import DummyVecEnv, VecMonitor, make_vec_env

torch.set_num_threads(1)


class ConstantPredictor:
    """Always the same action (a real PolicyPredictor)."""

    def __init__(self, action: int) -> None:
        self.action = action
        self.calls = 0

    def predict(
        self,
        observation: np.ndarray,
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        self.calls += 1
        return np.full(len(observation), self.action), None


class RecurrentCounter:
    """Keeps a per-env step counter as its recurrent state, reset by episode_start."""

    def __init__(self) -> None:
        self.max_state = 0

    def predict(self, observation, state=None, episode_start=None, deterministic=False):  # noqa: ANN001, ANN201
        n = len(observation)
        counter = np.zeros(n, dtype=int) if state is None else state[0].copy()
        counter[episode_start] = 0
        counter += 1
        self.max_state = max(self.max_state, int(counter.max()))
        return np.zeros(n, dtype=int), (counter,)


class MaskedPredictor(ConstantPredictor):
    def predict(self, observation, state=None, episode_start=None, deterministic=False, action_masks=None):  # noqa: ANN001, ANN201
        assert action_masks is not None and action_masks.shape == (len(observation), 2)
        return np.argmax(action_masks, axis=1), None


class MaskEnv(gym.Env):
    """Fixed-length episodes whose return counts the chosen action; exposes ``action_masks``."""

    def __init__(self, ep_len: int = 4) -> None:
        self.observation_space = spaces.Box(-1, 1, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.ep_len, self.t = ep_len, 0

    def action_masks(self) -> np.ndarray:
        return np.array([False, True])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.zeros(1, dtype=np.float32), float(action), self.t >= self.ep_len, False, {}


class HalfEpisodeWrapper(gym.Wrapper):
    """Ends 'episodes' early every 3 steps (like a lost life) without resetting the inner env."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.count = 0
        self.real_done = True

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        if self.real_done:
            self.real_done = False
            return self.env.reset(**kwargs)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, rew, term, trunc, info = self.env.step(action)
        self.real_done = term or trunc
        self.count += 1
        return obs, rew, term or self.count % 3 == 0, trunc, info


def _reference_cartpole_returns(n_episodes: int, seed: int) -> list[float]:
    env = gym.make("CartPole-v1")
    returns = []
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        total, done = 0.0, False
        while not done:
            obs, rew, term, trunc, _ = env.step(1)
            total += rew
            done = term or trunc
        returns.append(total)
        obs, _ = env.reset()
    return returns


def test_evaluate_cartpole_exact_count_and_mean() -> None:
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    rewards, lengths = evaluate_policy(ConstantPredictor(1), env, n_eval_episodes=7, return_episode_rewards=True)
    expected = _reference_cartpole_returns(7, seed=0)
    assert rewards == expected
    assert lengths == [int(r) for r in expected]
    env.seed(0)
    mean, std = evaluate_policy(ConstantPredictor(1), env, n_eval_episodes=7)
    assert mean == pytest.approx(np.mean(expected)) and std == pytest.approx(np.std(expected))
    assert isinstance(mean, float)


def test_episodes_spread_over_envs_and_gym_env_input() -> None:
    venv = make_vec_env("CartPole-v1", n_envs=3, seed=1)
    rewards, lengths = evaluate_policy(ConstantPredictor(0), venv, n_eval_episodes=8, return_episode_rewards=True)
    assert len(rewards) == 8 and len(lengths) == 8  # targets [2, 3, 3]
    # a plain gym.Env is wrapped in a DummyVecEnv; no Monitor -> warning
    with pytest.warns(UserWarning, match="not wrapped with a ``Monitor``"):
        mean, _ = evaluate_policy(ConstantPredictor(1), gym.make("CartPole-v1"), n_eval_episodes=2)
    assert mean > 5
    mean, _ = evaluate_policy(ConstantPredictor(1), Monitor(gym.make("CartPole-v1")), n_eval_episodes=2, warn=True)
    mean_vm, _ = evaluate_policy(ConstantPredictor(1), VecMonitor(DummyVecEnv([lambda: gym.make("CartPole-v1")])), 2)
    assert mean > 5 and mean_vm > 5
    with pytest.raises(AssertionError, match="Mean reward below threshold"):
        evaluate_policy(ConstantPredictor(1), Monitor(gym.make("CartPole-v1")), n_eval_episodes=1, reward_threshold=1e6)
    with pytest.raises(ValueError, match="n_eval_episodes must be a positive integer"):
        evaluate_policy(ConstantPredictor(1), venv, n_eval_episodes=0)
    with pytest.raises(TypeError, match="predict"):
        evaluate_policy(object(), venv)  # type: ignore[arg-type]


def test_monitor_gives_true_episode_returns() -> None:
    # Monitor inside the early-ending wrapper: each true episode is 12 steps of reward 1
    env = HalfEpisodeWrapper(Monitor(MaskEnv(ep_len=12)))
    rewards, lengths = evaluate_policy(ConstantPredictor(1), env, n_eval_episodes=2, return_episode_rewards=True)
    assert rewards == [12.0, 12.0] and lengths == [12, 12]
    # without Monitor, the early ends count as episodes
    plain = HalfEpisodeWrapper(MaskEnv(ep_len=12))
    rewards, lengths = evaluate_policy(
        ConstantPredictor(1), plain, n_eval_episodes=2, return_episode_rewards=True, warn=False
    )
    assert rewards == [3.0, 3.0] and lengths == [3, 3]


class Balance:
    """Keeps CartPole's pole up for hundreds of steps (push toward the side the pole falls to)."""

    def predict(self, observation, state=None, episode_start=None, deterministic=False):  # noqa: ANN001, ANN201
        return (observation[:, 2] + 0.5 * observation[:, 3] > 0).astype(np.int64), None


class ZeroTorque:
    """Pendulum's zero action."""

    def predict(self, observation, state=None, episode_start=None, deterministic=False):  # noqa: ANN001, ANN201
        return np.zeros((len(observation), 1), dtype=np.float32), None


def _step_guard(limit: int):  # noqa: ANN202
    """An evaluate_policy callback that fails the test instead of hanging forever."""
    steps = [0]

    def callback(local_vars: dict, global_vars: dict) -> None:
        steps[0] += 1
        if steps[0] > limit:
            raise AssertionError(f"evaluation still running after {limit} steps: no episode end was counted")

    return callback


def test_time_limit_outside_the_monitor_ends_evaluation_episodes() -> None:
    """make_vec_env puts wrapper_class outside the Monitor (as SB3 and the RL Zoo do); a TimeLimit there truncates
    episodes the Monitor would not see end, so evaluation waited forever for an episode (SB3's too). The truncation
    now closes the Monitor's episode; an outer *termination* (a lost life) still does not."""
    limit = {"wrapper_class": gym.wrappers.TimeLimit, "wrapper_kwargs": {"max_episode_steps": 50}}
    # Pendulum never ends an episode itself, and its own TimeLimit (200) is never reached under 50
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0, **limit)
    rewards, lengths = evaluate_policy(ZeroTorque(), env, n_eval_episodes=4, return_episode_rewards=True,
                                       callback=_step_guard(2_000))  # fmt: skip
    assert lengths == [50, 50, 50, 50]
    ref = gym.make("Pendulum-v1")  # env 0's first episode: reset with seed 0, 50 steps of zero torque
    ref.reset(seed=0)
    first = sum(float(ref.step(np.zeros(1, dtype=np.float32))[1]) for _ in range(50))
    assert rewards[0] == pytest.approx(first, abs=1e-4)
    # a policy that keeps CartPole up: every episode is the outer limit's 50 steps
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0, **limit)
    rewards, lengths = evaluate_policy(Balance(), env, n_eval_episodes=3, return_episode_rewards=True,
                                       callback=_step_guard(2_000))  # fmt: skip
    assert rewards == [50.0, 50.0, 50.0] and lengths == [50, 50, 50]
    monitor = env.envs[0].monitor
    assert isinstance(monitor, Monitor) and monitor.get_episode_lengths()[:3] == [50, 50, 50]
    # an outer wrapper that ends 'episodes' by termination (a lost life) is still not an episode end
    env = make_vec_env(lambda: MaskEnv(ep_len=12), n_envs=1, seed=0, wrapper_class=HalfEpisodeWrapper)
    rewards, lengths = evaluate_policy(ConstantPredictor(1), env, n_eval_episodes=2, return_episode_rewards=True)
    assert rewards == [12.0, 12.0] and lengths == [12, 12]


def test_recurrent_state_callback_and_masking() -> None:
    model = RecurrentCounter()
    seen: list[bool] = []
    evaluate_policy(
        model,
        make_vec_env(lambda: MaskEnv(ep_len=4), n_envs=2),
        n_eval_episodes=4,
        callback=lambda loc, glob: seen.append(bool(loc["done"])),
    )
    assert model.max_state == 4  # the state is reset by episode_start at each new episode
    assert len(seen) == 16 and sum(seen) == 4  # 2 envs x 2 episodes x 4 steps
    mean, _ = evaluate_policy(MaskedPredictor(0), make_vec_env(MaskEnv, n_envs=2), n_eval_episodes=2, use_masking=True)
    assert mean == 4.0  # the mask only allows action 1
