"""Common types shared by the library (mirrors ``stable_baselines3.common.type_aliases``)."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, SupportsFloat, Union

import gymnasium as gym
import numpy as np
import torch as th

if TYPE_CHECKING:
    from lit_sb3.callbacks.base import BaseCallback
    from lit_sb3.vec_env.base_vec_env import VecEnv

GymEnv = Union[gym.Env, "VecEnv"]
GymObs = Union[tuple, dict[str, Any], np.ndarray, int]
GymResetReturn = tuple[GymObs, dict]
GymStepReturn = tuple[GymObs, float, bool, bool, dict]
TensorDict = dict[str, th.Tensor]
OptimizerStateDict = dict[str, Any]
MaybeCallback = Union[None, Callable, list["BaseCallback"], "BaseCallback"]
PyTorchObs = Union[th.Tensor, TensorDict]
EnvSpec = Union[str, gym.Env, "VecEnv", Callable[[], gym.Env]]


class Schedule(Protocol):
    """A function of the remaining progress (1 at the start, 0 at the end) to a value."""

    def __call__(self, progress_remaining: float) -> float: ...


class RolloutBufferSamples(NamedTuple):
    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor


class DictRolloutBufferSamples(NamedTuple):
    observations: TensorDict
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor


class ReplayBufferSamples(NamedTuple):
    observations: th.Tensor
    actions: th.Tensor
    next_observations: th.Tensor
    dones: th.Tensor
    rewards: th.Tensor
    # per-sample discount (gamma ** n for n-step returns); None means the algorithm's gamma
    discounts: th.Tensor | None = None


class DictReplayBufferSamples(NamedTuple):
    observations: TensorDict
    actions: th.Tensor
    next_observations: TensorDict
    dones: th.Tensor
    rewards: th.Tensor
    discounts: th.Tensor | None = None


class RolloutReturn(NamedTuple):
    episode_timesteps: int
    n_episodes: int
    continue_training: bool


class TrainFrequencyUnit(Enum):
    STEP = "step"
    EPISODE = "episode"


class TrainFreq(NamedTuple):
    frequency: int
    unit: TrainFrequencyUnit


class PolicyPredictor(Protocol):
    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]: ...


__all__ = [
    "DictReplayBufferSamples",
    "DictRolloutBufferSamples",
    "EnvSpec",
    "GymEnv",
    "GymObs",
    "MaybeCallback",
    "PolicyPredictor",
    "PyTorchObs",
    "ReplayBufferSamples",
    "RolloutBufferSamples",
    "RolloutReturn",
    "Schedule",
    "SupportsFloat",
    "TensorDict",
    "TrainFreq",
    "TrainFrequencyUnit",
]
