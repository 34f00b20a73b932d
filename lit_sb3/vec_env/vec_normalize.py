"""VecNormalize: running normalization of observations and rewards, saved as JSON (never pickle)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from gymnasium import spaces

from lit_sb3.core.preprocessing import is_image_space
from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvStepReturn, VecEnvWrapper
from lit_sb3.vec_env.running_mean_std import RunningMeanStd

__all__ = ["VecNormalize"]

_FORMAT = "lit_sb3.VecNormalize"
_VERSION = 1
_SETTINGS = ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys")
_MAX_FILE_BYTES = 64 * 2**20


def _check_rms(state: Any, where: str) -> None:
    if not isinstance(state, dict) or {"mean", "var", "count"} - set(state):
        raise ValueError(f"{where} must be an object with mean, var and count")
    for key in ("mean", "var"):
        values = np.asarray(state[key], dtype=np.float64)
        if not np.isfinite(values).all() or (key == "var" and (values < 0).any()):
            raise ValueError(f"{where}.{key} must be finite{' and >= 0' if key == 'var' else ''}")
    count = state["count"]
    if isinstance(count, bool) or not isinstance(count, (int, float)) or not np.isfinite(count) or count < 0:
        raise ValueError(f"{where}.count must be a finite number >= 0, got {count!r}")


def _check_state(state: Any) -> None:
    """Check a loaded VecNormalize state: layout, types and ranges (one-line ``ValueError``)."""
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ValueError(f"not a VecNormalize file (expected format {_FORMAT!r})")
    version = state.get("version", _VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version > _VERSION:
        raise ValueError(f"version {version!r} was written by a newer lit_sb3; this one reads up to {_VERSION}")
    missing = [k for k in (*_SETTINGS, "obs_rms", "ret_rms") if k not in state]
    if missing:
        raise ValueError(
            f"missing the key {missing[0]!r} (a VecNormalize file has {', '.join(_SETTINGS)}, obs_rms, ret_rms)"
        )
    for key in ("training", "norm_obs", "norm_reward"):
        if not isinstance(state[key], bool):
            raise ValueError(f"{key} must be true or false, got {state[key]!r}")
    for key, low, high in (("clip_obs", 0.0, np.inf), ("clip_reward", 0.0, np.inf), ("gamma", 0.0, 1.0),
                           ("epsilon", 0.0, np.inf)):  # fmt: skip
        value = state[key]
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and np.isfinite(value)
        if not ok or not low <= value <= high or (key != "gamma" and value == 0):
            raise ValueError(
                f"{key} must be a finite number in {'[0, 1]' if key == 'gamma' else '(0, inf)'}, got {value!r}"
            )
    keys = state["norm_obs_keys"]
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
        raise ValueError(f"norm_obs_keys must be null or a list of strings, got {keys!r}")
    _check_rms(state["ret_rms"], "ret_rms")
    if state["norm_obs"]:
        obs_rms = state["obs_rms"]
        if isinstance(obs_rms, dict) and "mean" not in obs_rms:
            for key, sub in obs_rms.items():
                _check_rms(sub, f"obs_rms.{key}")
        else:
            _check_rms(obs_rms, "obs_rms")


class VecNormalize(VecEnvWrapper):
    """Normalize observations with running mean/std, and rewards by the std of the discounted return.

    Args:
        venv: the vectorized environment to wrap.
        training: update the statistics (False freezes them, e.g. for evaluation).
        norm_obs: normalize observations.
        norm_reward: normalize rewards.
        clip_obs: normalized observations are clipped to [-clip_obs, clip_obs].
        clip_reward: normalized rewards are clipped to [-clip_reward, clip_reward].
        gamma: discount of the return whose std scales the rewards.
        epsilon: added to the variance before the square root.
        norm_obs_keys: keys of a Dict observation to normalize (default: all; they must be Box).
    """

    obs_spaces: dict[str, spaces.Space]
    old_obs: np.ndarray | dict[str, np.ndarray]

    def __init__(
        self,
        venv: VecEnv,
        training: bool = True,
        norm_obs: bool = True,
        norm_reward: bool = True,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
        gamma: float = 0.99,
        epsilon: float = 1e-8,
        norm_obs_keys: list[str] | None = None,
    ) -> None:
        VecEnvWrapper.__init__(self, venv)
        self.norm_obs = norm_obs
        self.norm_obs_keys = list(norm_obs_keys) if norm_obs_keys is not None else None
        self.obs_rms: RunningMeanStd | dict[str, RunningMeanStd]
        if self.norm_obs:
            self._sanity_checks()
            if isinstance(self.observation_space, spaces.Dict):
                self.obs_spaces = dict(self.observation_space.spaces)
                assert self.norm_obs_keys is not None
                self.obs_rms = {key: RunningMeanStd(shape=self.obs_spaces[key].shape) for key in self.norm_obs_keys}
                # normalized images are floats in [-clip_obs, clip_obs] (so that they are not scaled again)
                new_spaces = dict(self.observation_space.spaces)
                for key in self.obs_rms:
                    if is_image_space(self.obs_spaces[key]):
                        new_spaces[key] = spaces.Box(
                            low=-clip_obs, high=clip_obs, shape=self.obs_spaces[key].shape, dtype=np.float32
                        )
                self.observation_space = spaces.Dict(new_spaces)
            else:
                self.obs_rms = RunningMeanStd(shape=self.observation_space.shape)  # type: ignore[arg-type]
                if is_image_space(self.observation_space):
                    self.observation_space = spaces.Box(
                        low=-clip_obs, high=clip_obs, shape=self.observation_space.shape, dtype=np.float32
                    )
        self.ret_rms = RunningMeanStd(shape=())
        self.clip_obs = float(clip_obs)
        self.clip_reward = float(clip_reward)
        self.returns = np.zeros(self.num_envs)
        self.gamma = float(gamma)
        self.epsilon = float(epsilon)
        self.training = bool(training)
        self.norm_reward = bool(norm_reward)
        self.old_reward = np.array([])

    def _sanity_checks(self) -> None:
        """Check that the observations to normalize are Box spaces."""
        if isinstance(self.observation_space, spaces.Dict):
            if self.norm_obs_keys is None:
                self.norm_obs_keys = list(self.observation_space.spaces.keys())
            for obs_key in self.norm_obs_keys:
                if obs_key not in self.observation_space.spaces:
                    raise ValueError(
                        f"norm_obs_keys contains {obs_key!r}, which is not a key of the observation space; "
                        f"allowed keys: {list(self.observation_space.spaces)}."
                    )
                if not isinstance(self.observation_space.spaces[obs_key], spaces.Box):
                    raise ValueError(
                        f"VecNormalize only supports `gym.spaces.Box` observation spaces but {obs_key} "
                        f"is of type {self.observation_space.spaces[obs_key]}. "
                        "Pass the observation keys that should be normalized via the `norm_obs_keys` parameter."
                    )
        elif isinstance(self.observation_space, spaces.Box):
            if self.norm_obs_keys is not None:
                raise ValueError("`norm_obs_keys` param is applicable only with `gym.spaces.Dict` observation spaces")
        else:
            raise ValueError(
                "VecNormalize only supports `gym.spaces.Box` and `gym.spaces.Dict` observation spaces, "
                f"not {self.observation_space} (pass norm_obs=False to normalize rewards only)."
            )

    def set_venv(self, venv: VecEnv) -> None:
        """Wrap ``venv`` (its observation shapes must match the statistics).

        Args:
            venv: the vectorized environment to wrap.
        """
        if getattr(self, "venv", None) is not None and self.venv is not venv:
            raise ValueError("Trying to set venv of already initialized VecNormalize wrapper.")
        self.venv = venv
        self.num_envs = venv.num_envs
        self.render_mode = venv.render_mode
        self._check_obs_shapes(venv.observation_space)
        self.returns = np.zeros(self.num_envs)

    def _check_obs_shapes(self, space: spaces.Space) -> None:
        if not self.norm_obs:
            return
        if isinstance(self.obs_rms, dict):
            if not isinstance(space, spaces.Dict):
                raise ValueError(f"The statistics are for a Dict observation space, the env has {space}.")
            for key, rms in self.obs_rms.items():
                if key not in space.spaces or space.spaces[key].shape != rms.mean.shape:
                    got = space.spaces[key].shape if key in space.spaces else "missing"
                    raise ValueError(
                        f"Observation shape mismatch for key {key!r}: statistics {rms.mean.shape}, env {got}."
                    )
        elif space.shape != self.obs_rms.mean.shape:
            raise ValueError(f"Observation shape mismatch: statistics {self.obs_rms.mean.shape}, env {space.shape}.")

    def _update_obs_rms(self, obs: np.ndarray | dict[str, np.ndarray]) -> None:
        if isinstance(obs, dict) and isinstance(self.obs_rms, dict):
            for key, rms in self.obs_rms.items():
                rms.update(obs[key])
        else:
            assert isinstance(self.obs_rms, RunningMeanStd)
            self.obs_rms.update(obs)  # type: ignore[arg-type]

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        assert isinstance(obs, (np.ndarray, dict))
        self.old_obs = obs
        self.old_reward = rewards
        if self.training and self.norm_obs:
            self._update_obs_rms(obs)
        obs = self.normalize_obs(obs)
        if self.training:
            self._update_reward(rewards)
        rewards = self.normalize_reward(rewards)
        for idx in np.flatnonzero(dones):
            if "terminal_observation" in infos[idx]:
                infos[idx]["terminal_observation"] = self.normalize_obs(infos[idx]["terminal_observation"])
        self.returns[dones] = 0
        return obs, rewards, dones, infos

    def _update_reward(self, reward: np.ndarray) -> None:
        """Update the discounted returns and their statistics."""
        self.returns = self.returns * self.gamma + reward
        self.ret_rms.update(self.returns)

    def _normalize_obs(self, obs: np.ndarray, obs_rms: RunningMeanStd) -> np.ndarray:
        return np.clip((obs - obs_rms.mean) / np.sqrt(obs_rms.var + self.epsilon), -self.clip_obs, self.clip_obs)

    def _unnormalize_obs(self, obs: np.ndarray, obs_rms: RunningMeanStd) -> np.ndarray:
        return (obs * np.sqrt(obs_rms.var + self.epsilon)) + obs_rms.mean

    def normalize_obs(self, obs: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        """Normalize observations with the current statistics (float32; statistics are not updated)."""
        if isinstance(obs, dict):
            obs_ = {k: np.copy(v) for k, v in obs.items()}
            if self.norm_obs and isinstance(self.obs_rms, dict):
                assert self.norm_obs_keys is not None
                for key in self.norm_obs_keys:
                    obs_[key] = self._normalize_obs(obs[key], self.obs_rms[key]).astype(np.float32)
            return obs_
        if self.norm_obs:
            assert isinstance(self.obs_rms, RunningMeanStd)
            return self._normalize_obs(obs, self.obs_rms).astype(np.float32)
        return np.copy(obs)

    def normalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """Scale rewards by the std of the return (float32; statistics are not updated)."""
        if self.norm_reward:
            reward = np.clip(reward / np.sqrt(self.ret_rms.var + self.epsilon), -self.clip_reward, self.clip_reward)
        return np.asarray(reward).astype(np.float32)

    def unnormalize_obs(self, obs: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        """Invert :meth:`normalize_obs` (up to clipping)."""
        if isinstance(obs, dict):
            obs_ = {k: np.copy(v) for k, v in obs.items()}
            if self.norm_obs and isinstance(self.obs_rms, dict):
                assert self.norm_obs_keys is not None
                for key in self.norm_obs_keys:
                    obs_[key] = self._unnormalize_obs(obs[key], self.obs_rms[key])
            return obs_
        if self.norm_obs:
            assert isinstance(self.obs_rms, RunningMeanStd)
            return self._unnormalize_obs(obs, self.obs_rms)
        return np.copy(obs)

    def unnormalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """Invert :meth:`normalize_reward` (up to clipping)."""
        if self.norm_reward:
            return reward * np.sqrt(self.ret_rms.var + self.epsilon)
        return reward

    def get_original_obs(self) -> np.ndarray | dict[str, np.ndarray]:
        """The raw observations of the last step or reset."""
        if isinstance(self.old_obs, dict):
            return {k: np.copy(v) for k, v in self.old_obs.items()}
        return np.copy(self.old_obs)

    def get_original_reward(self) -> np.ndarray:
        """The raw rewards of the last step."""
        return self.old_reward.copy()

    def reset(self) -> np.ndarray | dict[str, np.ndarray]:
        """Reset all environments; returns normalized first observations."""
        obs = self.venv.reset()
        assert isinstance(obs, (np.ndarray, dict))
        self.old_obs = obs
        self.returns = np.zeros(self.num_envs)
        if self.training and self.norm_obs:
            self._update_obs_rms(obs)
        return self.normalize_obs(obs)

    # ------------------------------------------------------------------ persistence (no pickle)
    def state_dict(self) -> dict[str, Any]:
        """Settings and statistics as plain Python values (JSON-serializable, safe for ``weights_only`` loads)."""
        obs_rms: Any = None
        if self.norm_obs:
            if isinstance(self.obs_rms, dict):
                obs_rms = {key: rms.state_dict() for key, rms in self.obs_rms.items()}
            else:
                obs_rms = self.obs_rms.state_dict()
        state: dict[str, Any] = {"format": _FORMAT, "version": _VERSION}
        for name in _SETTINGS:
            value = getattr(self, name)
            state[name] = list(value) if isinstance(value, (list, tuple)) else value
        state["obs_rms"] = obs_rms
        state["ret_rms"] = self.ret_rms.state_dict()
        state["returns"] = np.asarray(self.returns, dtype=np.float64).tolist()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore settings and statistics from :meth:`state_dict` (or a loaded JSON file).

        Args:
            state: the dict; ``norm_obs`` and ``norm_obs_keys`` must match this wrapper's.
        """
        if state.get("format", _FORMAT) != _FORMAT:
            raise ValueError(f"Not a VecNormalize state: format is {state.get('format')!r}, expected {_FORMAT!r}.")
        missing = [k for k in (*_SETTINGS, "obs_rms", "ret_rms") if k not in state]
        if missing:
            raise KeyError(f"VecNormalize state is missing {missing}.")
        stored_keys = list(state["norm_obs_keys"]) if state["norm_obs_keys"] is not None else None
        if bool(state["norm_obs"]) != self.norm_obs or (self.norm_obs and stored_keys != self.norm_obs_keys):
            raise ValueError(
                f"VecNormalize state has norm_obs={state['norm_obs']}, norm_obs_keys={stored_keys}, but this wrapper "
                f"has norm_obs={self.norm_obs}, norm_obs_keys={self.norm_obs_keys}; they must match."
            )
        if self.norm_obs:
            if isinstance(self.obs_rms, dict):
                if not isinstance(state["obs_rms"], dict) or set(state["obs_rms"]) != set(self.obs_rms):
                    raise ValueError(f"VecNormalize state obs_rms must have the keys {sorted(self.obs_rms)}.")
                for key, rms in self.obs_rms.items():
                    rms.load_state_dict(state["obs_rms"][key])
            else:
                self.obs_rms.load_state_dict(state["obs_rms"])
        self.ret_rms.load_state_dict(state["ret_rms"])
        self.training = bool(state["training"])
        self.norm_reward = bool(state["norm_reward"])
        self.clip_obs = float(state["clip_obs"])
        self.clip_reward = float(state["clip_reward"])
        self.gamma = float(state["gamma"])
        self.epsilon = float(state["epsilon"])
        returns = state.get("returns")
        if returns is not None and len(returns) == self.num_envs:
            self.returns = np.asarray(returns, dtype=np.float64)

    def save(self, save_path: str | os.PathLike) -> None:
        """Write the settings and statistics to a JSON file.

        Args:
            save_path: the file to write.
        """
        with open(save_path, "w", encoding="utf-8") as file_handler:
            json.dump(self.state_dict(), file_handler)

    @classmethod
    def load(cls, load_path: str | os.PathLike, venv: VecEnv) -> VecNormalize:
        """Create a VecNormalize around ``venv`` from a JSON file written by :meth:`save`.

        Every field is checked (present, of the right type, finite and in range) before the wrapper is built.

        Args:
            load_path: the JSON file.
            venv: the VecEnv to wrap (same observation shapes as when saved).

        Raises:
            BadFileError: a file that is not a valid VecNormalize state (one line naming the file and the problem).
        """
        from lit_sb3.utils.files import check_file, load_json
        from lit_sb3.utils.serialization import BadFileError

        where = os.fspath(load_path)
        check_file(load_path, _MAX_FILE_BYTES, "VecNormalize file")  # a regular file, bounded, before reading
        with open(load_path, "rb") as file_handler:
            raw = file_handler.read(_MAX_FILE_BYTES + 1)
        if raw[:1] == b"\x80":
            raise BadFileError(f"{where}: not a JSON VecNormalize file written by VecNormalize.save (a pickle: SB3's "
                               "pickled files are never loaded, for safety)")  # fmt: skip
        state = load_json(raw, where, "VecNormalize file")  # deep nesting, huge integers: one line too
        try:
            _check_state(state)
            vec_normalize = cls(
                venv,
                training=state["training"],
                norm_obs=state["norm_obs"],
                norm_reward=state["norm_reward"],
                clip_obs=state["clip_obs"],
                clip_reward=state["clip_reward"],
                gamma=state["gamma"],
                epsilon=state["epsilon"],
                norm_obs_keys=state["norm_obs_keys"],
            )
            vec_normalize._check_obs_shapes_from_state(state)
            vec_normalize.load_state_dict(state)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise BadFileError(f"{where}: {' '.join(str(message).split())}") from None
        return vec_normalize

    def _check_obs_shapes_from_state(self, state: dict[str, Any]) -> None:
        if not self.norm_obs:
            return
        stored = state["obs_rms"]
        if isinstance(self.obs_rms, dict):
            for key, rms in self.obs_rms.items():
                shape = np.asarray(stored.get(key, {}).get("mean", [])).shape if isinstance(stored, dict) else None
                if shape != rms.mean.shape:
                    raise ValueError(
                        f"Saved statistics for key {key!r} have shape {shape}, the env's observations {rms.mean.shape}."
                    )
        else:
            shape = np.asarray(stored["mean"]).shape
            if shape != self.obs_rms.mean.shape:
                raise ValueError(
                    f"Saved statistics have shape {shape}, the env's observations have shape {self.obs_rms.mean.shape}."
                )
