"""Env wrappers that zoo configs may name (``env_wrapper:``), through a whitelist.

A config names wrappers the way the RL Zoo does (``sb3_contrib.common.wrappers.TimeFeatureWrapper``,
``rl_zoo3.wrappers.HistoryWrapper``, ``gymnasium.wrappers.TimeLimit`` ...). Nothing is imported by name:
each name maps to a known class here. The zoo's wrappers that the published configs use are reimplemented
below with the same behaviour (TimeFeatureWrapper from sb3-contrib; FrameSkip, HistoryWrapper,
DelayedRewardWrapper and YAMLCompatResizeObservation from rl_zoo3); SB3's ``AtariWrapper`` is the library's
:class:`lit_sb3.envs.atari_wrappers.AtariWrapper`. Other names are rejected with a clear message.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = [
    "TimeFeatureWrapper",
    "FrameSkip",
    "HistoryWrapper",
    "DelayedRewardWrapper",
    "YAMLCompatResizeObservation",
    "WrapperSpec",
    "canonical_wrapper",
    "wrapper_class",
    "allowed_wrapper_names",
    "check_wrapper_kwargs",
    "make_env_wrapper",
]

WrapperSpec = tuple[str, dict[str, Any]]


class TimeFeatureWrapper(gym.Wrapper):
    """Append the remaining time (1 -> 0 over the episode) to a 1-D Box observation (sb3-contrib behaviour).

    Args:
        env: env with a 1-D ``Box`` observation space (or a ``Dict`` with such an ``observation`` key).
        max_steps: episode length used when the env spec has no ``max_episode_steps``.
        test_mode: if True the feature is constant (1.0), to avoid overfitting to the time feature.
    """

    def __init__(self, env: gym.Env, max_steps: int = 1000, test_mode: bool = False) -> None:
        super().__init__(env)
        obs_space = env.observation_space
        box = obs_space["observation"] if isinstance(obs_space, spaces.Dict) else obs_space
        if not isinstance(box, spaces.Box) or len(box.shape) != 1:
            raise ValueError(f"TimeFeatureWrapper needs a 1-D Box observation space, got {obs_space}")
        low = np.concatenate((box.low, [0.0])).astype(box.dtype)
        high = np.concatenate((box.high, [1.0])).astype(box.dtype)
        new_box = spaces.Box(low=low, high=high, dtype=box.dtype)  # type: ignore[arg-type]
        if isinstance(obs_space, spaces.Dict):
            self.observation_space = spaces.Dict({**obs_space.spaces, "observation": new_box})
        else:
            self.observation_space = new_box
        self._dtype = box.dtype
        spec_steps = getattr(env.spec, "max_episode_steps", None) if env.spec is not None else None
        self._max_steps = int(spec_steps) if spec_steps is not None else int(max_steps)
        self._current_step = 0
        self._test_mode = test_mode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self._current_step = 0
        obs, info = self.env.reset(seed=seed, options=options)
        return self._get_obs(obs), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        self._current_step += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._get_obs(obs), reward, terminated, truncated, info

    def _get_obs(self, obs: Any) -> Any:
        feature = 1.0 if self._test_mode else 1.0 - self._current_step / self._max_steps
        value = np.array([feature], dtype=self._dtype)
        if isinstance(obs, dict):
            return {**obs, "observation": np.concatenate((obs["observation"], value))}
        return np.concatenate((np.asarray(obs, dtype=self._dtype), value))


class FrameSkip(gym.Wrapper):
    """Repeat each action ``skip`` times and sum the rewards (rl_zoo3 behaviour).

    Args:
        env: the env.
        skip: number of env steps per agent step.
    """

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        self._skip = int(skip)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        total = 0.0
        for _ in range(self._skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


class HistoryWrapper(gym.Wrapper):
    """Observation = the last ``horizon`` observations followed by the last ``horizon`` actions (rl_zoo3).

    Args:
        env: env with Box observation and action spaces.
        horizon: number of past steps kept.
    """

    def __init__(self, env: gym.Env, horizon: int = 2) -> None:
        super().__init__(env)
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(obs_space, spaces.Box) or not isinstance(act_space, spaces.Box):
            raise ValueError("HistoryWrapper needs Box observation and action spaces")
        self.horizon = int(horizon)
        low_obs, high_obs = np.tile(obs_space.low, self.horizon), np.tile(obs_space.high, self.horizon)
        low_act, high_act = np.tile(act_space.low, self.horizon), np.tile(act_space.high, self.horizon)
        self.observation_space = spaces.Box(
            low=np.concatenate((low_obs, low_act)),
            high=np.concatenate((high_obs, high_act)),
            dtype=obs_space.dtype,  # type: ignore[arg-type]
        )
        self.obs_history = np.zeros(low_obs.shape, low_obs.dtype)
        self.action_history = np.zeros(low_act.shape, low_act.dtype)

    def _obs(self) -> np.ndarray:
        return np.concatenate((self.obs_history, self.action_history))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        self.obs_history[...] = 0
        self.action_history[...] = 0
        obs, info = self.env.reset(seed=seed, options=options)
        self.obs_history[..., -obs.shape[-1] :] = obs
        return self._obs(), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        action = np.asarray(action)
        self.obs_history = np.roll(self.obs_history, shift=-obs.shape[-1], axis=-1)
        self.obs_history[..., -obs.shape[-1] :] = obs
        self.action_history = np.roll(self.action_history, shift=-action.shape[-1], axis=-1)
        self.action_history[..., -action.shape[-1] :] = action
        return self._obs(), reward, terminated, truncated, info


class DelayedRewardWrapper(gym.Wrapper):
    """Give the accumulated reward only every ``delay`` steps or at episode end (rl_zoo3).

    Args:
        env: the env.
        delay: number of steps over which the reward is accumulated.
    """

    def __init__(self, env: gym.Env, delay: int = 10) -> None:
        super().__init__(env)
        self.delay = int(delay)
        self.current_step = 0
        self.accumulated_reward = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self.current_step = 0
        self.accumulated_reward = 0.0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.accumulated_reward += float(reward)
        self.current_step += 1
        if self.current_step % self.delay == 0 or terminated or truncated:
            reward, self.accumulated_reward = self.accumulated_reward, 0.0
        else:
            reward = 0.0
        return obs, reward, terminated, truncated, info


class YAMLCompatResizeObservation(gym.wrappers.ResizeObservation):
    """gymnasium's ``ResizeObservation`` with the shape as a list, as YAML writes it (rl_zoo3).

    Args:
        env: env with image observations.
        shape: ``[height, width]`` of the output.
    """

    def __init__(self, env: gym.Env, shape: list[int]) -> None:
        if len(shape) < 2:
            raise ValueError(f"YAMLCompatResizeObservation: shape needs [height, width], got {shape!r}")
        super().__init__(env, (int(shape[0]), int(shape[1])))


_OWN = "lit_sb3.zoo.wrappers."
_OWN_CLASSES: dict[str, type[gym.Wrapper]] = {
    "TimeFeatureWrapper": TimeFeatureWrapper,
    "FrameSkip": FrameSkip,
    "HistoryWrapper": HistoryWrapper,
    "DelayedRewardWrapper": DelayedRewardWrapper,
    "YAMLCompatResizeObservation": YAMLCompatResizeObservation,
}
#: Library wrappers a config may name: canonical dotted name -> (module, class), imported when looked up.
_LIBRARY: dict[str, tuple[str, str]] = {
    "lit_sb3.envs.atari_wrappers.AtariWrapper": ("lit_sb3.envs.atari_wrappers", "AtariWrapper"),
}
# gymnasium.wrappers classes that take only plain (YAML-expressible) arguments.
_GYM_ALLOWED = (
    "TimeLimit",
    "ClipAction",
    "RescaleAction",
    "RescaleObservation",
    "FlattenObservation",
    "NormalizeObservation",
    "NormalizeReward",
    "ClipReward",
    "RecordEpisodeStatistics",
    "TimeAwareObservation",
    "DtypeObservation",
    "FrameStackObservation",
    "GrayscaleObservation",
    "ResizeObservation",
    "ReshapeObservation",
    "MaxAndSkipObservation",
    "DelayObservation",
    "StickyAction",
    "RepeatAction",
    "AddWhiteNoise",
    "FilterObservation",
)
_GYM_RENAMED = {"GrayScaleObservation": "GrayscaleObservation", "FrameStack": "FrameStackObservation"}
_ALIASES: dict[str, str] = {
    "sb3_contrib.common.wrappers.TimeFeatureWrapper": _OWN + "TimeFeatureWrapper",
    "sb3_contrib.common.wrappers.time_feature.TimeFeatureWrapper": _OWN + "TimeFeatureWrapper",
    "rl_zoo3.wrappers.TimeFeatureWrapper": _OWN + "TimeFeatureWrapper",
    "utils.wrappers.TimeFeatureWrapper": _OWN + "TimeFeatureWrapper",
    "TimeFeatureWrapper": _OWN + "TimeFeatureWrapper",
    "rl_zoo3.wrappers.FrameSkip": _OWN + "FrameSkip",
    "rl_zoo3.wrappers.HistoryWrapper": _OWN + "HistoryWrapper",
    "rl_zoo3.wrappers.DelayedRewardWrapper": _OWN + "DelayedRewardWrapper",
    "rl_zoo3.wrappers.YAMLCompatResizeObservation": _OWN + "YAMLCompatResizeObservation",
    "stable_baselines3.common.atari_wrappers.AtariWrapper": "lit_sb3.envs.atari_wrappers.AtariWrapper",
}


#: Wrappers of other packages that published zoo entries name, and why lit_sb3 does not run them.
_THIRD_PARTY = {
    "ae": "a pretrained-autoencoder wrapper (araffin/aae-train-donkeycar), not available in lit_sb3",
    "minigrid": "a wrapper of the minigrid package, not available in lit_sb3",
}


def _gym_classes() -> dict[str, type]:
    return {n: getattr(gym.wrappers, n) for n in _GYM_ALLOWED if hasattr(gym.wrappers, n)}


def allowed_wrapper_names() -> list[str]:
    """Canonical names accepted for ``env_wrapper`` (aliases such as the sb3-contrib path also work)."""
    own = [_OWN + n for n in _OWN_CLASSES]
    return own + list(_LIBRARY) + ["gymnasium.wrappers." + n for n in _gym_classes()]


def canonical_wrapper(name: str) -> str:
    """Map a zoo wrapper name to its canonical lit_sb3/gymnasium path, or raise ``ValueError``.

    Args:
        name: dotted name as written in a zoo config.
    """
    name = name.strip()
    if name in _ALIASES:
        return _ALIASES[name]
    if (name.startswith(_OWN) and name[len(_OWN) :] in _OWN_CLASSES) or name in _LIBRARY:
        return name
    for prefix in ("gymnasium.wrappers.", "gym.wrappers."):
        if name.startswith(prefix):
            short = _GYM_RENAMED.get(name.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1])
            if short in _gym_classes():
                return "gymnasium.wrappers." + short
    allowed = allowed_wrapper_names()
    hint = did_you_mean(name, allowed + list(_ALIASES))
    if name.startswith("rl_zoo3.wrappers."):
        reason = "this rl_zoo3 wrapper is not implemented in lit_sb3"
    elif name.split(".", 1)[0] in _THIRD_PARTY:
        reason = _THIRD_PARTY[name.split(".", 1)[0]]
    else:
        reason = "not a whitelisted env wrapper"
    raise ValueError(
        f"env wrapper '{name}': {reason}{hint}; allowed: {', '.join(allowed)} "
        "(and the sb3_contrib/rl_zoo3/stable_baselines3 names of these classes)"
    )


def wrapper_class(name: str) -> type:
    """The wrapper class for a (canonical or alias) name; raises ``ValueError`` if not whitelisted.

    Args:
        name: wrapper name.
    """
    canonical = canonical_wrapper(name)
    short = canonical.rsplit(".", 1)[-1]
    if canonical.startswith(_OWN):
        return _OWN_CLASSES[short]
    if canonical in _LIBRARY:
        module, attr = _LIBRARY[canonical]
        return getattr(importlib.import_module(module), attr)
    return _gym_classes()[short]


def check_wrapper_kwargs(name: str, kwargs: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` if ``kwargs`` do not fit the wrapper's constructor.

    Args:
        name: wrapper name.
        kwargs: keyword arguments from the config.
    """
    cls = wrapper_class(name)
    try:
        inspect.signature(cls).bind(None, **kwargs)
    except TypeError as exc:
        params = [p for p in inspect.signature(cls).parameters if p not in ("self", "env")]
        raise ValueError(f"env wrapper '{name}': bad arguments {dict(kwargs)} ({exc}); accepted: {params}") from exc
    from lit_sb3.zoo.config.checks import check_value, constructor_hints

    params, hints, _ = constructor_hints(cls)
    for key, value in kwargs.items():
        if key in params:
            _, why = check_value(key, value, hints.get(key, params[key].annotation))
            if why is not None:
                raise ValueError(f"env wrapper '{name}': {key}: {why}")


def make_env_wrapper(spec: WrapperSpec | str | Iterable[WrapperSpec | str]) -> Callable[[gym.Env], gym.Env]:
    """Build ``env -> wrapped env`` from one or several ``(name, kwargs)`` specs, applied in order.

    Args:
        spec: a wrapper name, a ``(name, kwargs)`` pair, or a list of those (as in ``ResolvedConfig.env_wrapper``).
    """
    if isinstance(spec, str) or (
        isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], Mapping)
    ):
        items = [spec]
    else:
        items = list(spec)  # type: ignore[arg-type]
    resolved: list[tuple[type, dict[str, Any]]] = []
    for item in items:
        name, kwargs = (item, {}) if isinstance(item, str) else (item[0], dict(item[1]))
        try:
            check_wrapper_kwargs(name, kwargs)
            resolved.append((wrapper_class(name), kwargs))
        except ValueError as exc:
            raise BenchError(str(exc)) from exc

    def wrap(env: gym.Env) -> gym.Env:
        for cls, kwargs in resolved:
            env = cls(env, **kwargs)
        return env

    return wrap
