"""Frame-stacking buffers for Box and Dict observations."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import numpy as np
from gymnasium import spaces

from lit_sb3.core.preprocessing import is_image_space, is_image_space_channels_first

__all__ = ["StackedObservations"]

TObs = TypeVar("TObs", np.ndarray, dict[str, np.ndarray])


class StackedObservations(Generic[TObs]):
    """Keep the last ``n_stack`` observations of each env, concatenated along the channel axis.

    Args:
        num_envs: number of environments.
        n_stack: number of frames to stack.
        observation_space: Box or Dict observation space.
        channels_order: ``"first"`` or ``"last"`` (axis to stack on); ``None`` detects it for images and uses
            ``"last"`` otherwise. For Dict spaces, a mapping key -> order is also accepted.
    """

    def __init__(
        self,
        num_envs: int,
        n_stack: int,
        observation_space: spaces.Box | spaces.Dict,
        channels_order: str | Mapping[str, str | None] | None = None,
    ) -> None:
        if not isinstance(n_stack, (int, np.integer)) or n_stack < 1:
            raise ValueError(f"n_stack must be a positive integer, got {n_stack!r}.")
        self.n_stack = int(n_stack)
        self.observation_space = observation_space
        self.stacked_observation_space: spaces.Box | spaces.Dict
        if isinstance(observation_space, spaces.Dict):
            if not isinstance(channels_order, Mapping):
                channels_order = {key: channels_order for key in observation_space.spaces.keys()}
            self.sub_stacked_observations = {
                key: StackedObservations(num_envs, n_stack, subspace, channels_order.get(key))  # type: ignore[arg-type]
                for key, subspace in observation_space.spaces.items()
            }
            self.stacked_observation_space = spaces.Dict(
                {key: sub.stacked_observation_space for key, sub in self.sub_stacked_observations.items()}
            )
        elif isinstance(observation_space, spaces.Box):
            if isinstance(channels_order, Mapping):
                raise TypeError("When the observation space is Box, channels_order can't be a dict.")
            self.channels_first, self.stack_dimension, self.stacked_shape, self.repeat_axis = self.compute_stacking(
                n_stack, observation_space, channels_order
            )
            low = np.repeat(observation_space.low, n_stack, axis=self.repeat_axis)
            high = np.repeat(observation_space.high, n_stack, axis=self.repeat_axis)
            self.stacked_observation_space = spaces.Box(low=low, high=high, dtype=observation_space.dtype)  # type: ignore[arg-type]
            self.stacked_obs = np.zeros((num_envs, *self.stacked_shape), dtype=observation_space.dtype)
        else:
            raise TypeError(
                f"StackedObservations only supports Box and Dict as observation spaces. {observation_space} was provided."
            )

    @staticmethod
    def compute_stacking(
        n_stack: int, observation_space: spaces.Box, channels_order: str | None = None
    ) -> tuple[bool, int, tuple[int, ...], int]:
        """Stacking parameters: ``(channels_first, stack_dimension, stacked_shape, repeat_axis)``.

        Args:
            n_stack: number of frames.
            observation_space: the Box space of one frame.
            channels_order: ``"first"``, ``"last"`` or ``None`` (auto).
        """
        if channels_order is None:
            channels_first = (
                is_image_space_channels_first(observation_space) if is_image_space(observation_space) else False
            )
        else:
            if channels_order not in {"last", "first"}:
                raise ValueError(f"`channels_order` must be one of following: 'last', 'first', got {channels_order!r}.")
            channels_first = channels_order == "first"
        stack_dimension = 1 if channels_first else -1  # includes the env axis
        repeat_axis = 0 if channels_first else -1
        stacked_shape = list(observation_space.shape)
        stacked_shape[repeat_axis] *= n_stack
        return channels_first, stack_dimension, tuple(stacked_shape), repeat_axis

    def reset(self, observation: TObs) -> TObs:
        """Clear the stacks and put the reset observation last; returns the stacked observation."""
        if isinstance(observation, dict):
            return {key: self.sub_stacked_observations[key].reset(obs) for key, obs in observation.items()}  # type: ignore[return-value]
        # a new array: stacks returned earlier are never modified
        self.stacked_obs = np.zeros_like(self.stacked_obs)
        if self.channels_first:
            self.stacked_obs[:, -observation.shape[self.stack_dimension] :, ...] = observation
        else:
            self.stacked_obs[..., -observation.shape[self.stack_dimension] :] = observation
        return self.stacked_obs  # type: ignore[return-value]

    def update(
        self, observations: TObs, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> tuple[TObs, list[dict[str, Any]]]:
        """Push new observations; for finished envs stack the terminal observation into the info and clear.

        Args:
            observations: the new observations (first axis = env).
            dones: episode ends.
            infos: infos of the step (``terminal_observation`` entries are replaced by stacked ones).
        """
        if isinstance(observations, dict):
            sub_infos = {
                key: [
                    {"terminal_observation": info["terminal_observation"][key]}
                    if "terminal_observation" in info
                    else {}
                    for info in infos
                ]
                for key in observations.keys()
            }
            stacked_obs = {}
            stacked_infos = {}
            for key, obs in observations.items():
                stacked_obs[key], stacked_infos[key] = self.sub_stacked_observations[key].update(
                    obs, dones, sub_infos[key]
                )
            for env_idx in range(len(infos)):
                if "terminal_observation" in infos[env_idx]:
                    terminal = dict(infos[env_idx]["terminal_observation"])
                    for key in stacked_infos:
                        terminal[key] = stacked_infos[key][env_idx]["terminal_observation"]
                    infos[env_idx]["terminal_observation"] = terminal
            return stacked_obs, infos  # type: ignore[return-value]

        shift = -observations.shape[self.stack_dimension]
        # np.roll makes a new array: stacks returned earlier are never modified
        self.stacked_obs = np.roll(self.stacked_obs, shift, axis=self.stack_dimension)
        for env_idx in np.flatnonzero(dones):
            if "terminal_observation" in infos[env_idx]:
                old_terminal = infos[env_idx]["terminal_observation"]
                if self.channels_first:
                    previous_stack = self.stacked_obs[env_idx, :shift, ...]
                else:
                    previous_stack = self.stacked_obs[env_idx, ..., :shift]
                infos[env_idx]["terminal_observation"] = np.concatenate(
                    (previous_stack, old_terminal), axis=self.repeat_axis
                )
            else:
                warnings.warn("VecFrameStack wrapping a VecEnv without terminal_observation info", stacklevel=2)
            self.stacked_obs[env_idx] = 0
        if self.channels_first:
            self.stacked_obs[:, shift:, ...] = observations
        else:
            self.stacked_obs[..., shift:] = observations
        return self.stacked_obs, infos  # type: ignore[return-value]
