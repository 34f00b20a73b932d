"""Helpers for vectorized environments: observation dict views and wrapper look-ups."""

from __future__ import annotations

from collections import OrderedDict
from copy import deepcopy
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from gymnasium import spaces

from lit_sb3.core.preprocessing import check_for_nested_spaces
from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvObs, VecEnvWrapper

if TYPE_CHECKING:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = [
    "copy_obs_dict",
    "dict_to_obs",
    "is_vecenv_wrapped",
    "obs_space_info",
    "sync_envs_normalization",
    "unwrap_vec_normalize",
    "unwrap_vec_wrapper",
]

VecEnvWrapperT = TypeVar("VecEnvWrapperT", bound=VecEnvWrapper)


def copy_obs_dict(obs: dict[Any, np.ndarray]) -> dict[Any, np.ndarray]:
    """A copy of a dict of arrays (each array copied).

    Args:
        obs: the dict of observation arrays.
    """
    if not isinstance(obs, dict):
        raise TypeError(f"copy_obs_dict expects a dict of arrays, got {type(obs).__name__}.")
    return OrderedDict([(k, np.copy(v)) for k, v in obs.items()])


def dict_to_obs(obs_space: spaces.Space, obs_dict: dict[Any, np.ndarray]) -> VecEnvObs:
    """Turn the internal dict of arrays back into the structure of ``obs_space``.

    Args:
        obs_space: Dict (returned as is), Tuple (keys 0..n-1 become a tuple) or any other space (key ``None``).
        obs_dict: the arrays, keyed as by :func:`obs_space_info`.
    """
    if isinstance(obs_space, spaces.Dict):
        return obs_dict
    if isinstance(obs_space, spaces.Tuple):
        if len(obs_dict) != len(obs_space.spaces):
            raise ValueError(f"Got {len(obs_dict)} observation parts for a Tuple space of {len(obs_space.spaces)}.")
        return tuple(obs_dict[i] for i in range(len(obs_space.spaces)))
    if set(obs_dict.keys()) != {None}:
        raise ValueError(f"Unstructured space {obs_space} expects the single key None, got {list(obs_dict)}.")
    return obs_dict[None]


def obs_space_info(obs_space: spaces.Space) -> tuple[list[Any], dict[Any, tuple[int, ...]], dict[Any, np.dtype]]:
    """Keys, shapes and dtypes of a space seen as a dict (Tuple: keys 0..n-1; other spaces: key ``None``).

    Args:
        obs_space: the observation space (Dict/Tuple must not be nested).
    """
    check_for_nested_spaces(obs_space)
    if isinstance(obs_space, spaces.Dict):
        subspaces: dict[Any, spaces.Space] = dict(obs_space.spaces)
    elif isinstance(obs_space, spaces.Tuple):
        subspaces = dict(enumerate(obs_space.spaces))
    else:
        if hasattr(obs_space, "spaces"):
            raise TypeError(f"Unsupported structured space '{type(obs_space).__name__}': use Box, Discrete, Dict, ...")
        subspaces = {None: obs_space}
    keys = list(subspaces)
    shapes = {k: tuple(s.shape) for k, s in subspaces.items()}  # type: ignore[arg-type]
    dtypes = {k: s.dtype for k, s in subspaces.items()}
    return keys, shapes, dtypes  # type: ignore[return-value]


def unwrap_vec_wrapper(env: VecEnv, vec_wrapper_class: type[VecEnvWrapperT]) -> VecEnvWrapperT | None:
    """The first wrapper of class ``vec_wrapper_class`` in the chain of ``env``, or None.

    Args:
        env: the (possibly wrapped) VecEnv.
        vec_wrapper_class: the wrapper class to look for.
    """
    env_tmp: VecEnv | None = env
    while isinstance(env_tmp, VecEnvWrapper):
        if isinstance(env_tmp, vec_wrapper_class):
            return env_tmp
        env_tmp = env_tmp.venv
    return None


def unwrap_vec_normalize(env: VecEnv) -> VecNormalize | None:
    """The VecNormalize wrapper of ``env``, if any."""
    from lit_sb3.vec_env.vec_normalize import VecNormalize

    return unwrap_vec_wrapper(env, VecNormalize)


def is_vecenv_wrapped(env: VecEnv, vec_wrapper_class: type[VecEnvWrapper]) -> bool:
    """Whether ``env`` is wrapped with ``vec_wrapper_class`` somewhere in its chain."""
    return unwrap_vec_wrapper(env, vec_wrapper_class) is not None


def _vec_normalize_chain(env: VecEnv) -> list[VecNormalize]:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

    found = []
    env_tmp: VecEnv = env
    while isinstance(env_tmp, VecEnvWrapper):
        if isinstance(env_tmp, VecNormalize):
            found.append(env_tmp)
        env_tmp = env_tmp.venv
    return found


def sync_envs_normalization(env: VecEnv, eval_env: VecEnv) -> None:
    """Copy the VecNormalize statistics of ``env`` into the matching VecNormalize wrappers of ``eval_env``.

    The i-th VecNormalize of the training chain (outermost first) is copied into the i-th of the eval chain.

    Args:
        env: the training env (source of the statistics).
        eval_env: the evaluation env (its VecNormalize wrappers receive copies).
    """
    sources, targets = _vec_normalize_chain(env), _vec_normalize_chain(eval_env)
    if len(sources) != len(targets):
        raise ValueError(
            f"sync_envs_normalization: the training env has {len(sources)} VecNormalize wrapper(s) and the evaluation "
            f"env has {len(targets)}; wrap both envs with VecNormalize the same way."
        )
    for source, target in zip(sources, targets):
        if hasattr(source, "obs_rms"):
            target.obs_rms = deepcopy(source.obs_rms)
        target.ret_rms = deepcopy(source.ret_rms)
