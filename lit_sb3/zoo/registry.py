"""The algorithms ``bench`` knows, the spaces they support, and env-id checks.

Every fact about an algorithm comes from the library: names and import paths from the registration table
(:data:`lit_sb3.algorithms.registry.ALGORITHMS`, light), the rest from the class's own metadata
(``supported_action_spaces``, ``supported_observation_spaces``, ``search_space``, ...), read when the class is
first needed. Env spaces are read once per env id (``gymnasium.make`` then ``close``) and cached.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from lit_sb3.algorithms.registry import ALGORITHMS, algorithm_class
from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = [
    "ALGOS",
    "get_algo_class",
    "algo_action_spaces",
    "algo_observation_spaces",
    "algo_arg_names",
    "algo_defaults",
    "check_algo",
    "check_env_id",
    "env_spaces",
    "check_pair",
    "registered_env_ids",
]

#: zoo name -> "module:Class": the library's registration table itself (one line per algorithm, see
#: ``docs/adding_an_algorithm.md``), so an algorithm registered in-process is seen here too
ALGOS: dict[str, str] = ALGORITHMS


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
    try:
        return algorithm_class(key)
    except ImportError as exc:
        raise BenchError(f"algorithm '{key}' cannot be imported from {ALGOS[key]}: {exc}") from exc


def algo_action_spaces(name: str) -> tuple[type[spaces.Space], ...]:
    """The gymnasium action-space classes that algorithm ``name`` supports (its class's metadata).

    Args:
        name: algorithm name.
    """
    return tuple(get_algo_class(name).supported_action_spaces)


def algo_observation_spaces(name: str) -> tuple[type[spaces.Space], ...]:
    """The gymnasium observation-space classes that algorithm ``name`` supports (its class's metadata).

    Args:
        name: algorithm name.
    """
    return tuple(get_algo_class(name).supported_observation_spaces)


def _signature_params(cls: type) -> dict[str, inspect.Parameter]:
    params = dict(inspect.signature(cls).parameters)
    params.pop("self", None)
    # the env comes from the job, and the networks are built by the fit: neither is a hyperparameter
    params.pop("env", None)
    params.pop("_init_setup_model", None)
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
        register_optional_envs(name)
    if name not in gym.registry:
        raise BenchError(f"unknown env id '{env_id}'{did_you_mean(name, registered_env_ids())}")
    return env_id


def register_optional_envs(env_id: str) -> None:
    """Register the envs of an optional extra that ``env_id`` needs (Atari: ale-py), as a one-line error.

    Args:
        env_id: gymnasium env id, not registered yet.
    """
    from lit_sb3.envs.atari_wrappers import register_atari_if_needed

    try:
        register_atari_if_needed(env_id)
    except ImportError as exc:
        raise BenchError(f"env id '{env_id}': {exc}") from None


@functools.cache
def published_env_ids(algo: str | None = None) -> frozenset[str]:
    """Env ids with an entry in the built-in zoo file of ``algo`` (or of any algorithm).

    Args:
        algo: algorithm name (None: all).
    """
    from lit_sb3.zoo.config.loading import DEFAULT_ENTRY, load_zoo_file, zoo_config_dir

    out: set[str] = set()
    for name in [algo] if algo is not None else list(ALGOS):
        path = zoo_config_dir() / f"{name}.yml"
        if path.exists():
            out.update(k for k in load_zoo_file(path) if k not in (DEFAULT_ENTRY, "atari"))
    return frozenset(out)


def not_installed_reason(algo: str, env_id: str) -> str | None:
    """Why ``algo`` cannot run on a published zoo env here: it is not registered (its package is not installed).

    Args:
        algo: algorithm name.
        env_id: gymnasium env id.
    """
    if env_id in gym.registry or ":" in env_id or env_id not in published_env_ids():
        return None
    return (
        f"{env_id} is not installed here (an env of the zoo's published configs; install the package that registers it)"
    )


@functools.cache
def env_spaces(env_id: str) -> tuple[spaces.Space, spaces.Space]:
    """``(observation_space, action_space)`` of ``env_id``, made once and cached.

    Args:
        env_id: gymnasium env id.
    """
    from lit_sb3.zoo.env_warnings import captured

    check_env_id(env_id)
    try:
        with captured(env_id):  # said once by whoever drains them (lit_sb3.zoo.env_warnings)
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
    if env_id not in gym.registry:
        register_optional_envs(env_id)
    if (reason := not_installed_reason(key, env_id)) is not None:
        return reason
    observation_space, action_space = env_spaces(env_id)
    for kind, space, allowed in (
        ("action", action_space, algo_action_spaces(key)),
        ("observation", observation_space, algo_observation_spaces(key)),
    ):
        if not isinstance(space, allowed):
            names = " or ".join(c.__name__ for c in allowed)
            article = "an" if names[0] in "AEIOU" else "a"
            return f"{key} needs {article} {names} {kind} space; {env_id} has {space}"
    if getattr(get_algo_class(key), "supports_action_masks", False) and not env_has_action_masks(env_id):
        return f"{key} needs an env with an action_masks() method; {env_id} has none"
    return None


@functools.cache
def env_has_action_masks(env_id: str) -> bool:
    """Whether ``env_id``'s env (through its wrappers) has an ``action_masks()`` method (MaskablePPO's envs).

    Args:
        env_id: gymnasium env id.
    """
    from lit_sb3.core.masking import is_masking_supported
    from lit_sb3.zoo.env_warnings import captured

    env_spaces(env_id)  # the one-line errors of an unknown or broken env
    with captured(env_id):
        env = gym.make(env_id)
    try:
        return is_masking_supported(env)
    finally:
        env.close()
