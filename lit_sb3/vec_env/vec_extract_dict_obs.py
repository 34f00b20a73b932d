"""VecExtractDictObs: keep one key of a Dict observation space (SB3's wrapper)."""

from __future__ import annotations

import difflib

import numpy as np
from gymnasium import spaces

from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvStepReturn, VecEnvWrapper

__all__ = ["VecExtractDictObs"]


class VecExtractDictObs(VecEnvWrapper):
    """Replace Dict observations by the array under ``key`` (also in the ``terminal_observation`` of the infos).

    Args:
        venv: a vectorized environment with a Dict observation space.
        key: the key to keep.
    """

    def __init__(self, venv: VecEnv, key: str) -> None:
        space = venv.observation_space
        if not isinstance(space, spaces.Dict):
            raise ValueError(f"VecExtractDictObs needs a Dict observation space, got {space}.")
        if key not in space.spaces:
            keys = [str(k) for k in space.spaces]
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"VecExtractDictObs: the observation space has no key {key!r}{hint}; keys: {keys}.")
        self.key = key
        super().__init__(venv=venv, observation_space=space.spaces[key])

    def reset(self) -> np.ndarray:
        return self.venv.reset()[self.key]  # type: ignore[index]

    def step_wait(self) -> VecEnvStepReturn:
        obs, reward, done, infos = self.venv.step_wait()
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = info["terminal_observation"][self.key]
        return obs[self.key], reward, done, infos  # type: ignore[index]
