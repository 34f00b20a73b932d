"""Environments that fail on purpose, for the ``bench run`` tests.

Importing this module registers them, so ``"tests.envs.faulty:Raising-v0"`` works with ``gym.make`` (and so in a
``bench run`` worker). Each behaves like a tiny discrete task (20-step episodes) until its ``fail_after``-th
step, then: ``Raising-v0`` raises, ``NaNReward-v0`` returns NaN rewards, ``Hanging-v0`` sleeps for an hour,
``Segfault-v0`` kills its process with SIGSEGV, ``Exit-v0`` calls ``os._exit(3)``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["FaultyEnv", "RaisingEnv", "NaNRewardEnv", "HangingEnv", "SegfaultEnv", "ExitEnv"]


class FaultyEnv(gym.Env):
    """A 4-d observation, 2-action task with 20-step episodes; subclasses fail after ``fail_after`` steps.

    Args:
        fail_after: total steps (over all episodes of this instance) before failing.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, fail_after: int = 100) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.fail_after = fail_after
        self.total_steps = 0
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, size=4).astype(np.float32), {}

    def fail(self, reward: float) -> float:
        """What happens once ``fail_after`` steps are done; returns the reward to give (``reward``: the normal one)."""
        return 0.0

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.total_steps += 1
        reward = float(action == 1)
        if self.total_steps > self.fail_after:
            reward = self.fail(reward)
        obs = self.np_random.uniform(-1, 1, size=4).astype(np.float32)
        return obs, reward, self.t >= 20, False, {}


class RaisingEnv(FaultyEnv):
    def fail(self, reward: float) -> float:
        raise RuntimeError(f"faulty env: boom at step {self.total_steps}")


class NaNRewardEnv(FaultyEnv):
    def fail(self, reward: float) -> float:
        return float("nan")


class HangingEnv(FaultyEnv):
    def fail(self, reward: float) -> float:
        time.sleep(3600)
        return 0.0


class SegfaultEnv(FaultyEnv):
    def fail(self, reward: float) -> float:
        os.kill(os.getpid(), signal.SIGSEGV)
        return 0.0


class ExitEnv(FaultyEnv):
    def fail(self, reward: float) -> float:
        os._exit(3)


for _name, _cls in (("Raising-v0", RaisingEnv), ("NaNReward-v0", NaNRewardEnv), ("Hanging-v0", HangingEnv),
                    ("Segfault-v0", SegfaultEnv), ("Exit-v0", ExitEnv)):  # fmt: skip
    if _name not in gym.registry:
        gym.register(id=_name, entry_point=f"{__name__}:{_cls.__name__}")
