"""Invalid-action masks (sb3-contrib's convention): an env exposes ``action_masks()`` returning one boolean per
action choice (``n`` for Discrete, ``sum(nvec)`` for MultiDiscrete, ``2 * n`` for MultiBinary); a VecEnv gives
them for all its envs through ``env_method("action_masks")``."""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np

from lit_sb3.vec_env.base_vec_env import VecEnv

__all__ = ["EXPECTED_METHOD_NAME", "check_masking_model", "get_action_masks", "is_masking_supported"]

EXPECTED_METHOD_NAME = "action_masks"


def is_masking_supported(env: gym.Env | VecEnv) -> bool:
    """Whether ``env`` (or every env of a VecEnv, through its wrappers) has an ``action_masks`` method."""
    if isinstance(env, VecEnv):
        return env.has_attr(EXPECTED_METHOD_NAME)
    try:
        env.get_wrapper_attr(EXPECTED_METHOD_NAME)
    except AttributeError:
        return False
    return True


def get_action_masks(env: gym.Env | VecEnv) -> np.ndarray:
    """The current action masks of ``env``: ``[n_envs, mask_dims]`` for a VecEnv, ``[mask_dims]`` otherwise.

    Raises:
        ValueError: the env has no ``action_masks()`` method.
    """
    try:
        if isinstance(env, VecEnv):
            return np.stack(env.env_method(EXPECTED_METHOD_NAME))
        return np.asarray(env.get_wrapper_attr(EXPECTED_METHOD_NAME)())
    except AttributeError:
        raise ValueError(
            f"the env {_env_name(env)} has no action_masks() method: masking needs an env that returns the valid "
            "actions from action_masks() (wrap it, e.g. with a gymnasium wrapper defining action_masks)"
        ) from None


def check_masking_model(model: Any) -> None:
    """Raise a one-line error when ``model`` cannot take action masks (only maskable algorithms can).

    A model says so with the class attribute ``supports_action_masks`` (MaskablePPO); any other predictor is
    checked for an ``action_masks`` parameter of its ``predict``.

    Raises:
        ValueError: the model cannot take masks.
    """
    supported = getattr(model, "supports_action_masks", None)
    if supported is None:  # a duck-typed predictor: does its predict() take action_masks?
        try:
            supported = "action_masks" in inspect.signature(model.predict).parameters
        except (TypeError, ValueError, AttributeError):
            supported = False
    if not supported:
        raise ValueError(
            f"{type(model).__name__} cannot use action masks (use_masking/action_masks): only a maskable model "
            "such as MaskablePPO can; drop the masks or train a MaskablePPO"
        )


def _env_name(env: Any) -> str:
    if isinstance(env, VecEnv):
        try:
            spec = env.get_attr("spec", indices=[0])[0]
        except (AttributeError, IndexError):
            spec = None
    else:
        spec = getattr(env, "spec", None)
    return repr(spec.id) if spec is not None else type(env).__name__
