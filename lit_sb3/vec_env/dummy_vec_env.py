"""DummyVecEnv: sub-environments stepped one after another in this process (the hot path of every algorithm)."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from lit_sb3.vec_env.util import dict_to_obs, obs_space_info

__all__ = ["DummyVecEnv"]


def _copy_terminal(obs: Any) -> Any:
    """Own copy of a terminal observation (envs may reuse their observation arrays)."""
    if isinstance(obs, np.ndarray):
        return obs.copy()
    if isinstance(obs, dict):
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(v.copy() if isinstance(v, np.ndarray) else v for v in obs)
    return obs


class DummyVecEnv(VecEnv):
    """Vectorize environments by calling them in sequence in the current process.

    Faster than subprocesses for cheap environments such as CartPole. Each ``step`` returns new arrays and new
    info dicts (the env's info dict shallow-copied), so results can be kept without copying.

    Args:
        env_fns: functions that each create a new environment.

    Raises:
        ValueError: when two functions return the same environment instance.
    """

    actions: np.ndarray

    def __init__(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        if len(env_fns) == 0:
            raise ValueError("DummyVecEnv needs at least one env function, got an empty list.")
        self.envs: list[gym.Env] = [fn() for fn in env_fns]
        for env in self.envs:
            if not isinstance(env, gym.Env):
                raise TypeError(f"DummyVecEnv env functions must return a gymnasium.Env, got {type(env).__name__}.")
        if len({id(env.unwrapped) for env in self.envs}) != len(self.envs):
            raise ValueError(
                "You tried to create multiple environments, but the function to create them returned the same "
                "instance instead of creating different objects. You are probably using `make_vec_env(lambda: env)` "
                "or `DummyVecEnv([lambda: env] * n_envs)`: pass a function that creates a new environment at every "
                "call (using `gym.make()` for instance)."
            )
        env = self.envs[0]
        super().__init__(len(env_fns), env.observation_space, env.action_space)
        obs_space = env.observation_space
        self.keys, shapes, dtypes = obs_space_info(obs_space)
        self.buf_obs: OrderedDict[Any, np.ndarray] = OrderedDict(
            [(k, np.zeros((self.num_envs, *tuple(shapes[k])), dtype=dtypes[k])) for k in self.keys]
        )
        # Fast path: a single (non-Dict, non-Tuple) observation array
        self._single_buf: np.ndarray | None = self.buf_obs[None] if self.keys == [None] else None
        self.buf_dones = np.zeros((self.num_envs,), dtype=bool)
        self.buf_rews = np.zeros((self.num_envs,), dtype=np.float32)
        self.buf_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self.metadata = env.metadata

    def step_async(self, actions: np.ndarray) -> None:
        self.actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        actions = self.actions
        single_buf = self._single_buf
        n_envs = self.num_envs
        rews: list[Any] = [0.0] * n_envs
        dones: list[bool] = [False] * n_envs
        infos: list[dict[str, Any]] = [{}] * n_envs
        for env_idx, env in enumerate(self.envs):
            obs, rew, terminated, truncated, env_info = env.step(actions[env_idx])
            info = dict(env_info)  # a fresh dict: never mutate or share the env's own
            done = bool(terminated or truncated)
            info["TimeLimit.truncated"] = bool(truncated and not terminated)
            if done:
                info["terminal_observation"] = _copy_terminal(obs)
                obs, self.reset_infos[env_idx] = env.reset()
            if single_buf is not None:
                single_buf[env_idx] = obs
            else:
                self._save_obs(env_idx, obs)
            rews[env_idx] = rew
            dones[env_idx] = done
            infos[env_idx] = info
        # new arrays and lists every step: the caller owns what is returned (no copies needed)
        self.buf_rews = np.array(rews, dtype=np.float32)
        self.buf_dones = np.array(dones, dtype=bool)
        self.buf_infos = infos
        return self._obs_from_buf(), self.buf_rews, self.buf_dones, infos

    def reset(self) -> VecEnvObs:
        for env_idx, env in enumerate(self.envs):
            maybe_options = {"options": self._options[env_idx]} if self._options[env_idx] else {}
            obs, self.reset_infos[env_idx] = env.reset(seed=self._seeds[env_idx], **maybe_options)
            self._save_obs(env_idx, obs)
        self._reset_seeds()
        self._reset_options()
        return self._obs_from_buf()

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images.",
                stacklevel=2,
            )
            return [None for _ in self.envs]
        return [env.render() for env in self.envs]  # type: ignore[misc]

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """Render the envs, tiled into one image for ``rgb_array`` (see :meth:`VecEnv.render`)."""
        return super().render(mode=mode)

    def _save_obs(self, env_idx: int, obs: Any) -> None:
        for key in self.keys:
            if key is None:
                self.buf_obs[key][env_idx] = obs
            else:
                self.buf_obs[key][env_idx] = obs[key]

    def _obs_from_buf(self) -> VecEnvObs:
        if self._single_buf is not None:
            return self._single_buf.copy()
        return dict_to_obs(self.observation_space, OrderedDict((k, v.copy()) for k, v in self.buf_obs.items()))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Values of an attribute of the sub-environments (looked up through their wrappers)."""
        return [env_i.get_wrapper_attr(attr_name) for env_i in self._get_target_envs(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute on the outermost wrapper of the sub-environments."""
        for env_i in self._get_target_envs(indices):
            setattr(env_i, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        """Call a method of the sub-environments (looked up through their wrappers)."""
        return [
            env_i.get_wrapper_attr(method_name)(*method_args, **method_kwargs)
            for env_i in self._get_target_envs(indices)
        ]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each sub-environment is wrapped with ``wrapper_class``."""
        from lit_sb3.vec_env.env_util import is_wrapped

        return [is_wrapped(env_i, wrapper_class) for env_i in self._get_target_envs(indices)]

    def _get_target_envs(self, indices: VecEnvIndices) -> list[gym.Env]:
        idx = list(self._get_indices(indices))
        for i in idx:
            if not -self.num_envs <= i < self.num_envs:
                raise IndexError(f"Environment index {i} is out of range: this VecEnv has {self.num_envs} envs.")
        return [self.envs[i] for i in idx]
