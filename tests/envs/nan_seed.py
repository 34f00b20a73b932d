"""An env whose rewards become NaN for one seed only, for the seed-batch tests (``bench run --seed-batch``).

``"tests.envs.nan_seed:NaNSeed-v0"``: a 3-d observation, 1-d continuous action task (reward ``-a^2``, 20-step
episodes); an instance first reset with seed ``nan_seed`` (a job's train env with that seed: ``make_vec_env``
seeds sub-env 0 with the job's seed) returns NaN rewards after ``fail_after`` steps (``fail_with="raise"``: its
``step`` raises instead); every other seed behaves.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["NaNObservationAfter", "NaNSeedEnv"]


class NaNSeedEnv(gym.Env):
    """See the module docstring.

    Args:
        nan_seed: the seed whose instance turns NaN.
        fail_after: steps of that instance before its rewards are NaN.
        fail_with: ``"nan"`` (NaN rewards) or ``"raise"`` (``step`` raises a RuntimeError).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, nan_seed: int = 1, fail_after: int = 150, fail_with: str = "nan") -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.nan_seed = nan_seed
        self.fail_after = fail_after
        self.fail_with = fail_with
        self.first_seed: int | None = None
        self.total_steps = 0
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if self.first_seed is None and seed is not None:
            self.first_seed = int(seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, size=3).astype(np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.total_steps += 1
        reward = -float(np.square(action).sum())
        if self.first_seed == self.nan_seed and self.total_steps > self.fail_after:
            if self.fail_with == "raise":
                raise RuntimeError(f"the env of seed {self.nan_seed} broke at its step {self.total_steps}")
            reward = float("nan")
        obs = self.np_random.uniform(-1, 1, size=3).astype(np.float32)
        return obs, reward, False, self.t >= 20, {}


if "NaNSeed-v0" not in gym.registry:
    gym.register(id="NaNSeed-v0", entry_point=f"{__name__}:NaNSeedEnv")


class NaNObservationAfter(gym.Wrapper):
    """Returns a NaN observation from step ``n`` on (a diverging env, as ``make_vec_env``'s ``wrapper_class``).

    Args:
        env: the env.
        n: the first step whose observation is NaN.
    """

    def __init__(self, env: gym.Env, n: int) -> None:
        super().__init__(env)
        self.n, self.t = n, 0

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.t >= self.n:
            obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info
