"""evaluate_policy: run a policy for a number of episodes and report the returns (SB3 semantics)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from lit_sb3.core.masking import check_masking_model, get_action_masks, is_masking_supported
from lit_sb3.core.monitor import Monitor
from lit_sb3.core.types import PolicyPredictor
from lit_sb3.vec_env.base_vec_env import VecEnv
from lit_sb3.vec_env.dummy_vec_env import DummyVecEnv
from lit_sb3.vec_env.util import is_vecenv_wrapped
from lit_sb3.vec_env.vec_monitor import VecMonitor

__all__ = ["evaluate_policy", "evaluate_seeds"]


def evaluate_policy(
    model: PolicyPredictor,
    env: gym.Env | VecEnv,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
    reward_threshold: float | None = None,
    return_episode_rewards: bool = False,
    warn: bool = True,
    use_masking: bool = False,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Run ``model`` for ``n_eval_episodes`` episodes and return the mean and std of the episode returns.

    Episodes are split evenly over the sub-envs of a VecEnv (env ``i`` runs ``(n_eval_episodes + i) // n_envs``)
    to avoid favouring short episodes. With a Monitor (or VecMonitor), the returns and lengths come from
    ``info["episode"]``, i.e. true episode ends even when other wrappers end episodes early (lost lives).

    Args:
        model: anything with ``predict(observation, state=None, episode_start=None, deterministic=False)``.
        env: a gym.Env (wrapped in a DummyVecEnv) or a VecEnv.
        n_eval_episodes: number of episodes.
        deterministic: deterministic actions.
        render: render the env after each step.
        callback: called with ``(locals(), globals())`` after each step, once per sub-env still evaluating.
        reward_threshold: raise an AssertionError when the mean return is not above it.
        return_episode_rewards: return the lists of episode returns and lengths instead of mean and std.
        warn: warn when the env has no Monitor.
        use_masking: pass ``action_masks`` (from ``env.env_method("action_masks")``) to ``predict``.

    Returns:
        ``(mean_return, std_return)``, or ``(episode_returns, episode_lengths)`` with ``return_episode_rewards``.
    """
    if isinstance(n_eval_episodes, bool) or not isinstance(n_eval_episodes, (int, np.integer)) or n_eval_episodes < 1:
        raise ValueError(f"n_eval_episodes must be a positive integer, got {n_eval_episodes!r}.")
    if not callable(getattr(model, "predict", None)):
        raise TypeError(
            f"evaluate_policy needs a model with a predict(observation, state, episode_start, deterministic) method, "
            f"got {type(model).__name__}."
        )
    if not isinstance(env, VecEnv):
        if not isinstance(env, gym.Env):
            raise TypeError(f"evaluate_policy needs a gymnasium.Env or a VecEnv, got {type(env).__name__}.")
        gym_env = env
        env = DummyVecEnv([lambda: gym_env])

    is_monitor_wrapped = is_vecenv_wrapped(env, VecMonitor) or env.env_is_wrapped(Monitor)[0]
    if not is_monitor_wrapped and warn:
        warnings.warn(
            "Evaluation environment is not wrapped with a ``Monitor`` wrapper. This may result in reporting modified "
            "episode lengths and rewards, if other wrappers happen to modify these. Consider wrapping environment "
            "first with ``Monitor`` wrapper.",
            UserWarning,
            stacklevel=2,
        )

    if use_masking:
        check_masking_model(model)
        if not is_masking_supported(env):
            get_action_masks(env)  # raises the one-line error naming the env

    n_envs = env.num_envs
    episode_rewards: list[float] = []
    episode_lengths: list[int] = []
    episode_counts = np.zeros(n_envs, dtype="int")
    episode_count_targets = np.array([(n_eval_episodes + i) // n_envs for i in range(n_envs)], dtype="int")
    current_rewards = np.zeros(n_envs)
    current_lengths = np.zeros(n_envs, dtype="int")
    observations = env.reset()
    states = None
    episode_starts = np.ones((env.num_envs,), dtype=bool)
    while (episode_counts < episode_count_targets).any():
        if use_masking:
            action_masks = get_action_masks(env)
            actions, states = model.predict(  # type: ignore[call-arg]
                observations,
                state=states,
                episode_start=episode_starts,
                deterministic=deterministic,
                action_masks=action_masks,
            )
        else:
            actions, states = model.predict(
                observations,  # type: ignore[arg-type]
                state=states,
                episode_start=episode_starts,
                deterministic=deterministic,
            )
        new_observations, rewards, dones, infos = env.step(actions)
        current_rewards += rewards
        current_lengths += 1
        for i in range(n_envs):
            if episode_counts[i] < episode_count_targets[i]:
                # named locals for the callback
                reward = rewards[i]  # noqa: F841
                done = dones[i]
                info = infos[i]
                episode_starts[i] = done
                if callback is not None:
                    callback(locals(), globals())
                if done:
                    if is_monitor_wrapped:
                        # only Monitor's "episode" marks a true episode end (not e.g. a lost life)
                        if "episode" in info:
                            episode_rewards.append(float(info["episode"]["r"]))
                            episode_lengths.append(int(info["episode"]["l"]))
                            episode_counts[i] += 1
                    else:
                        episode_rewards.append(float(current_rewards[i]))
                        episode_lengths.append(int(current_lengths[i]))
                        episode_counts[i] += 1
                    current_rewards[i] = 0
                    current_lengths[i] = 0
        observations = new_observations
        if render:
            env.render()

    mean_reward = float(np.mean(episode_rewards))
    std_reward = float(np.std(episode_rewards))
    if reward_threshold is not None:
        assert mean_reward > reward_threshold, (
            f"Mean reward below threshold: {mean_reward:.2f} < {reward_threshold:.2f}"
        )
    if return_episode_rewards:
        return episode_rewards, episode_lengths
    return mean_reward, std_reward


class _EpisodeTally:
    """:func:`evaluate_policy`'s episode bookkeeping for one VecEnv: episodes split evenly over its sub-envs,
    returns and lengths from Monitor's ``info["episode"]`` where the env is Monitor-wrapped."""

    def __init__(self, env: VecEnv, n_eval_episodes: int) -> None:
        self.monitored = is_vecenv_wrapped(env, VecMonitor) or env.env_is_wrapped(Monitor)[0]
        n_envs = env.num_envs
        self.counts = np.zeros(n_envs, dtype="int")
        self.targets = np.array([(n_eval_episodes + i) // n_envs for i in range(n_envs)], dtype="int")
        self.current_rewards = np.zeros(n_envs)
        self.current_lengths = np.zeros(n_envs, dtype="int")
        self.rewards: list[float] = []
        self.lengths: list[int] = []

    @property
    def running(self) -> bool:
        return bool((self.counts < self.targets).any())

    def add(self, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        self.current_rewards += rewards
        self.current_lengths += 1
        for i in range(len(dones)):
            if self.counts[i] >= self.targets[i] or not dones[i]:
                continue
            if self.monitored:  # only Monitor's "episode" marks a true episode end (not e.g. a lost life)
                if "episode" in infos[i]:
                    self.rewards.append(float(infos[i]["episode"]["r"]))
                    self.lengths.append(int(infos[i]["episode"]["l"]))
                    self.counts[i] += 1
            else:
                self.rewards.append(float(self.current_rewards[i]))
                self.lengths.append(int(self.current_lengths[i]))
                self.counts[i] += 1
            self.current_rewards[i] = 0
            self.current_lengths[i] = 0


def evaluate_seeds(
    predict: Callable[[Any], np.ndarray],
    envs: Sequence[VecEnv],
    n_eval_episodes: int = 10,
) -> list[tuple[list[float], list[int]]]:
    """Evaluate K policies on their K VecEnvs in lockstep: one ``predict`` call per step for all of them.

    Each env gets what :func:`evaluate_policy` gives it (episodes split evenly over its sub-envs, Monitor's episode
    returns, stepped until its own episodes are complete and no further), so seed i's returns are those of
    ``evaluate_policy(policy_i, envs[i], n_eval_episodes, return_episode_rewards=True)`` when ``predict`` returns
    policy i's actions at index i. All envs must have the same number of sub-envs.

    Args:
        predict: observations ``[K, n_envs, ...]`` (a dict of such arrays for dict spaces) -> actions
            ``[K, n_envs, ...]`` (e.g. a seed batch's :meth:`~lit_sb3.algorithms.base.BaseAlgorithm.predict_stacked`).
        envs: the K evaluation VecEnvs.
        n_eval_episodes: episodes per env.

    Returns:
        Per env, its ``(episode returns, episode lengths)``.
    """
    if isinstance(n_eval_episodes, bool) or not isinstance(n_eval_episodes, (int, np.integer)) or n_eval_episodes < 1:
        raise ValueError(f"n_eval_episodes must be a positive integer, got {n_eval_episodes!r}.")
    if not envs or len({env.num_envs for env in envs}) != 1:
        raise ValueError(f"evaluate_seeds needs K >= 1 VecEnvs with the same number of sub-envs, got {len(envs)}.")
    tallies = [_EpisodeTally(env, n_eval_episodes) for env in envs]
    observations = [env.reset() for env in envs]
    while any(t.running for t in tallies):
        if isinstance(observations[0], dict):
            stacked: Any = {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}
        else:
            stacked = np.stack(observations)
        actions = predict(stacked)
        for i, (env, tally) in enumerate(zip(envs, tallies)):
            if not tally.running:
                continue  # its episodes are complete: evaluate_policy would have stopped stepping it
            observations[i], rewards, dones, infos = env.step(actions[i])
            tally.add(rewards, dones, infos)
    return [(t.rewards, t.lengths) for t in tallies]
