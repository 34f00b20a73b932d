"""VecCheckNan: find where NaN/inf values come from (the env or the model)."""

from __future__ import annotations

import warnings

import numpy as np
from gymnasium import spaces

from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvObs, VecEnvStepReturn, VecEnvWrapper

__all__ = ["VecCheckNan"]


class VecCheckNan(VecEnvWrapper):
    """Warn (or raise) when actions, observations or rewards contain NaN (or inf).

    Args:
        venv: the vectorized environment to wrap.
        raise_exception: raise a ValueError instead of a UserWarning.
        warn_once: warn only the first time.
        check_inf: also check for +inf/-inf.
    """

    def __init__(
        self, venv: VecEnv, raise_exception: bool = False, warn_once: bool = True, check_inf: bool = True
    ) -> None:
        super().__init__(venv)
        self.raise_exception = raise_exception
        self.warn_once = warn_once
        self.check_inf = check_inf
        self._user_warned = False
        self._actions: np.ndarray | None = None
        self._observations: VecEnvObs | None = None
        if isinstance(venv.action_space, spaces.Dict):
            raise NotImplementedError("VecCheckNan doesn't support dict action spaces")

    def step_async(self, actions: np.ndarray) -> None:
        self._check_val(event="step_async", actions=actions)
        self._actions = actions
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        self._check_val(event="step_wait", observations=observations, rewards=rewards, dones=dones)
        self._observations = observations
        return observations, rewards, dones, infos

    def reset(self) -> VecEnvObs:
        observations = self.venv.reset()
        self._check_val(event="reset", observations=observations)
        self._observations = observations
        return observations

    def check_array_value(self, name: str, value: np.ndarray) -> list[tuple[str, str]]:
        """Issues (``(name, "inf" | "nan")``) found in one array."""
        value = np.asarray(value)
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.complexfloating)):
            return []  # integer/bool arrays cannot hold NaN or inf
        found = []
        if self.check_inf and np.any(np.isinf(value)):
            found.append((name, "inf"))
        if np.any(np.isnan(value)):
            found.append((name, "nan"))
        return found

    def _check_val(self, event: str, **kwargs) -> None:
        if not self.raise_exception and self.warn_once and self._user_warned:
            return
        found: list[tuple[str, str]] = []
        for name, value in kwargs.items():
            if isinstance(value, (np.ndarray, list)):
                found += self.check_array_value(name, np.asarray(value))
            elif isinstance(value, dict):
                for inner_name, inner_val in value.items():
                    found += self.check_array_value(f"{name}.{inner_name}", inner_val)
            elif isinstance(value, tuple):
                for idx, inner_val in enumerate(value):
                    found += self.check_array_value(f"{name}.{idx}", inner_val)
            else:
                raise TypeError(f"Unsupported observation type {type(value)}: expected an array, list, dict or tuple.")
        if not found:
            return
        self._user_warned = True
        msg = ", ".join(f"found {type_val} in {name}" for name, type_val in found)
        msg += ".\r\nOriginated from the "
        if event == "reset":
            msg += "environment observation (at reset)"
        elif event == "step_wait":
            msg += f"environment, Last given value was: \r\n\taction={self._actions}"
        else:
            msg += f"RL model, Last given value was: \r\n\tobservations={self._observations}"
        if self.raise_exception:
            raise ValueError(msg)
        warnings.warn(msg, UserWarning, stacklevel=2)
