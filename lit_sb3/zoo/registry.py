"""The algorithms ``bench`` knows, the action spaces they support, and env-id checks.

Algorithm classes are imported lazily (only when a constructor signature or class is needed), and env
spaces are read once per env id (``gymnasium.make`` then ``close``) and cached.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = [
    "ALGOS",
    "ACTION_SPACES",
    "get_algo_class",
    "algo_action_spaces",
    "algo_arg_names",
    "algo_defaults",
    "check_algo",
    "check_env_id",
    "env_spaces",
    "check_pair",
    "registered_env_ids",
]

ALGOS: dict[str, str] = {
    "ppo": "lit_sb3.algorithms.ppo:PPO",
    "a2c": "lit_sb3.algorithms.a2c:A2C",
    "sac": "lit_sb3.algorithms.sac:SAC",
    "td3": "lit_sb3.algorithms.td3:TD3",
    "ddpg": "lit_sb3.algorithms.ddpg:DDPG",
    "dqn": "lit_sb3.algorithms.dqn:DQN",
}

_ON_POLICY_SPACES: tuple[type[spaces.Space], ...] = (
    spaces.Box,
    spaces.Discrete,
    spaces.MultiDiscrete,
    spaces.MultiBinary,
)

ACTION_SPACES: dict[str, tuple[type[spaces.Space], ...]] = {
    "ppo": _ON_POLICY_SPACES,
    "a2c": _ON_POLICY_SPACES,
    "sac": (spaces.Box,),
    "td3": (spaces.Box,),
    "ddpg": (spaces.Box,),
    "dqn": (spaces.Discrete,),
}


def check_algo(name: str) -> str:
    """Return the canonical (lower-case) algorithm name or raise a :class:`BenchError`.

    Args:
        name: algorithm name as typed by the user (case-insensitive).
    """
    key = name.strip().lower()
    if key not in ALGOS:
        raise BenchError(f"unknown algorithm '{name}'{did_you_mean(key, ALGOS)}; known: {', '.join(ALGOS)}")
    return key


def get_algo_class(name: str) -> type:
    """Import and return the algorithm class registered under ``name``.

    Args:
        name: algorithm name (``ppo``, ``sac``, ...).
    """
    key = check_algo(name)
    module_name, _, attr = ALGOS[key].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BenchError(f"algorithm '{key}' cannot be imported from {module_name}: {exc}") from exc
    return getattr(module, attr)


def algo_action_spaces(name: str) -> tuple[type[spaces.Space], ...]:
    """The gymnasium action-space classes that algorithm ``name`` supports.

    Args:
        name: algorithm name.
    """
    return ACTION_SPACES[check_algo(name)]


def _signature_params(cls: type) -> dict[str, inspect.Parameter]:
    params = dict(inspect.signature(cls).parameters)
    params.pop("self", None)
    # SB3 classes (used as stand-ins in tests) take the env in the constructor; lit_sb3's do not.
    params.pop("env", None)
    return {
        k: p
        for k, p in params.items()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    }


def algo_arg_names(name: str, cls: type | None = None) -> set[str]:
    """Constructor parameter names of the algorithm (``policy`` included, ``self``/``env`` excluded).

    Args:
        name: algorithm name.
        cls: the class to inspect instead of the registered one (e.g. an SB3 class in tests).
    """
    return set(_signature_params(cls if cls is not None else get_algo_class(name)))


def algo_defaults(name: str, cls: type | None = None) -> dict[str, Any]:
    """Constructor defaults of the algorithm (parameters without a default are left out).

    Args:
        name: algorithm name.
        cls: the class to inspect instead of the registered one.
    """
    params = _signature_params(cls if cls is not None else get_algo_class(name))
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def registered_env_ids() -> list[str]:
    """All env ids registered with gymnasium (sorted)."""
    return sorted(str(k) for k in gym.registry.keys())


def check_env_id(env_id: str) -> str:
    """Return ``env_id`` if gymnasium knows it, else raise a :class:`BenchError` with a suggestion.

    Args:
        env_id: gymnasium env id.
    """
    name = env_id
    if ":" in env_id:  # "module:EnvName-v0": gym.make imports the module, which registers the env
        module, _, name = env_id.partition(":")
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's env id
            raise BenchError(
                f"env id '{env_id}': cannot import module '{module}' ({type(exc).__name__}: {exc})"
            ) from exc
    if name not in gym.registry:
        raise BenchError(f"unknown env id '{env_id}'{did_you_mean(name, registered_env_ids())}")
    return env_id


@functools.cache
def env_spaces(env_id: str) -> tuple[spaces.Space, spaces.Space]:
    """``(observation_space, action_space)`` of ``env_id``, made once and cached.

    Args:
        env_id: gymnasium env id.
    """
    check_env_id(env_id)
    try:
        env = gym.make(env_id)
    except Exception as exc:  # noqa: BLE001 - any failure to build the env is a user-facing error
        raise BenchError(f"env '{env_id}' cannot be created: {type(exc).__name__}: {exc}") from exc
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def check_pair(algo: str, env_id: str) -> str | None:
    """Why ``algo`` cannot run on ``env_id`` (one line), or ``None`` if it can.

    Args:
        algo: algorithm name.
        env_id: gymnasium env id (unknown ids raise a :class:`BenchError`).
    """
    key = check_algo(algo)
    _, action_space = env_spaces(env_id)
    allowed = ACTION_SPACES[key]
    if isinstance(action_space, allowed):
        return None
    names = " or ".join(c.__name__ for c in allowed)
    article = "an" if names[0] in "AEIOU" else "a"
    return f"{key} needs {article} {names} action space; {env_id} has {action_space}"
