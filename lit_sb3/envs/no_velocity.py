"""Velocity-masked classic-control envs (partially observable), registered as the RL Zoo registers them:
``CartPoleNoVel-v1``, ``PendulumNoVel-v1``, ``LunarLanderNoVel-v3``, ``MountainCarContinuousNoVel-v0``, ...

As rl-zoo3's ``MaskVelocityWrapper``, the velocity entries are set to 0 (the observation space keeps its shape,
so models trained with the zoo load unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import gymnasium as gym
import numpy as np

__all__ = ["MaskVelocityWrapper", "register_no_velocity_envs"]


class MaskVelocityWrapper(gym.ObservationWrapper):
    """Zero the velocity entries of a supported env's observations.

    Args:
        env: one of the envs of :attr:`velocity_indices` (by its unwrapped spec id).
    """

    velocity_indices: ClassVar[dict[str, np.ndarray]] = {
        "CartPole-v1": np.array([1, 3]),
        "MountainCar-v0": np.array([1]),
        "MountainCarContinuous-v0": np.array([1]),
        "Pendulum-v1": np.array([2]),
        "LunarLander-v3": np.array([2, 3, 5]),
        "LunarLanderContinuous-v3": np.array([2, 3, 5]),
    }

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        spec = env.unwrapped.spec
        env_id = spec.id if spec is not None else type(env.unwrapped).__name__
        if env_id not in self.velocity_indices:
            raise NotImplementedError(
                f"velocity masking is not implemented for {env_id}; supported: {', '.join(self.velocity_indices)}"
            )
        self.mask = np.ones(env.observation_space.shape, dtype=env.observation_space.dtype)
        self.mask[self.velocity_indices[env_id]] = 0

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation * self.mask


#: the optional dependency (lit_sb3's extra) of the envs that need one
EXTRA_OF = {"LunarLander-v3": "box2d", "LunarLanderContinuous-v3": "box2d"}


def _no_vel_maker(env_id: str) -> Callable[..., gym.Env]:
    def make_env(render_mode: str | None = None) -> gym.Env:
        try:
            env = gym.make(env_id, render_mode=render_mode)
        except gym.error.DependencyNotInstalled as exc:
            extra = EXTRA_OF.get(env_id)
            if extra is None:
                raise
            detail = " ".join(str(exc).split())
            raise gym.error.DependencyNotInstalled(
                f"{no_vel_id(env_id)} needs the '{extra}' extra: pip install \"lit_sb3[{extra}]\" ({detail})"
            ) from None
        return MaskVelocityWrapper(env)

    return make_env


def no_vel_id(env_id: str) -> str:
    """``CartPole-v1`` -> ``CartPoleNoVel-v1``."""
    name, version = env_id.split("-v")
    return f"{name}NoVel-v{version}"


def register_no_velocity_envs() -> None:
    """Register ``<Name>NoVel-v<N>`` for every env of :attr:`MaskVelocityWrapper.velocity_indices` (idempotent)."""
    for env_id in MaskVelocityWrapper.velocity_indices:
        new_id = no_vel_id(env_id)
        if new_id not in gym.registry:
            gym.register(id=new_id, entry_point=_no_vel_maker(env_id))
