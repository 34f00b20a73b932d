"""Conversion of sampled values into zoo-format hyperparameters (what a zoo YAML entry holds).

:func:`to_hyperparameters` applies the derived names (``policy_kwargs`` as a ``"dict(...)"`` string, ``gamma = 1 -
x``, ...) and the zoo's fix-ups (``batch_size <= n_steps * n_envs``, ``gradient_steps = train_freq`` for
SAC/TD3/DDPG); :func:`render_literal` writes values as text of the config's restricted parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tuning.search_spaces.spaces import _continuous_off_policy, _family, policy_kwargs_value
from lit_sb3.zoo.tuning.search_spaces.tables import ACTIVATIONS, NET_ARCHS

__all__ = ["to_hyperparameters", "render_literal", "render_literal_raw"]


def render_literal(value: Any) -> str:
    """A value as text of the config's restricted parser (classes as ``nn.Tanh`` etc.).

    Args:
        value: None, bool, number, str, class, list/tuple/dict of those.
    """
    if isinstance(value, type):
        module = value.__module__
        if module.startswith("torch.nn"):
            return f"nn.{value.__name__}"
        if module.startswith("torch.optim"):
            return f"th.optim.{value.__name__}"
        return value.__name__
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and k.isidentifier() for k in value):
            return "dict(" + ", ".join(f"{k}={render_literal(v)}" for k, v in value.items()) + ")"
        return "{" + ", ".join(f"{render_literal(k)}: {render_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(render_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise BenchError(f"cannot write {value!r} ({type(value).__name__}) in a zoo config")


def to_hyperparameters(algo: str, sampled: Mapping[str, Any], fixed: Mapping[str, Any],
                       base_algo_kwargs: Mapping[str, Any], base_n_envs: int) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """Sampled + fixed values -> zoo-format hyperparameters, and the fix-ups made (one line each).

    ``policy_kwargs`` merges the config's own ``policy_kwargs`` with the derived ``net_arch``/``activation_fn``/
    ``log_std_init``/``ortho_init`` and is returned as a ``"dict(...)"`` string.

    Args:
        algo: algorithm name.
        sampled: the trial's sampled values.
        fixed: the space's fixed values.
        base_algo_kwargs: ``ResolvedConfig.algo_kwargs`` of the algo/env before tuning.
        base_n_envs: ``ResolvedConfig.n_envs`` before tuning.
    """
    from lit_sb3.zoo.registry import algo_arg_names

    values = {**dict(fixed), **dict(sampled)}
    hp: dict[str, Any] = {}
    notes: list[str] = []
    policy_kwargs = dict(base_algo_kwargs.get("policy_kwargs") or {})
    touched_pk = False
    for name, value in values.items():
        if name == "net_arch":
            policy_kwargs["net_arch"] = NET_ARCHS[_family(algo)][value]
            touched_pk = True
        elif name == "activation_fn":
            policy_kwargs["activation_fn"] = ACTIVATIONS[value]
            touched_pk = True
        elif name in ("log_std_init", "ortho_init", "n_quantiles"):
            policy_kwargs[name] = value
            touched_pk = True
        elif name == "policy_kwargs":  # a fixed (or sampled) one: its keys, with the derived ones next to them
            policy_kwargs.update(policy_kwargs_value(value, "policy_kwargs"))
            touched_pk = True
        elif name == "one_minus_gamma":
            hp["gamma"] = 1.0 - float(value)
        elif name == "one_minus_gae_lambda":
            hp["gae_lambda"] = 1.0 - float(value)
        elif name in ("subsample_steps", "top_frac_size"):
            continue
        else:
            hp[name] = value
    if "subsample_steps" in values:
        train_freq = hp.get("train_freq", base_algo_kwargs.get("train_freq", 4))
        freq = int(train_freq[0] if isinstance(train_freq, (list, tuple)) else train_freq)
        hp["gradient_steps"] = max(freq // int(values["subsample_steps"]), 1)
    elif _continuous_off_policy(algo) and "train_freq" in hp and "gradient_steps" not in hp:
        hp["gradient_steps"] = hp["train_freq"]  # the zoo's choice: one gradient step per env step
    if "top_frac_size" in values:  # ARS (the zoo's convert_ars_params)
        n_delta = int(hp.get("n_delta", base_algo_kwargs.get("n_delta", 8)))
        hp["n_top"] = max(int(float(values["top_frac_size"]) * n_delta), 1)
    if _family(algo) == "on_policy" and "batch_size" in algo_arg_names(algo):
        n_steps = int(hp.get("n_steps", base_algo_kwargs.get("n_steps", 2048)))
        n_envs = int(hp.get("n_envs", base_n_envs))
        batch_size = int(hp.get("batch_size", base_algo_kwargs.get("batch_size", 64)))
        if batch_size > n_steps * n_envs:
            hp["batch_size"] = n_steps * n_envs
            notes.append(f"batch_size {batch_size} > n_steps * n_envs = {n_steps * n_envs}: set to {n_steps * n_envs}")
    if touched_pk:
        text_pk = {
            k: (v if not isinstance(v, str) or k != "activation_fn" else _Raw(v)) for k, v in policy_kwargs.items()
        }
        hp["policy_kwargs"] = render_literal_raw(text_pk)
    return hp, notes


class _Raw(str):
    """Text written as-is by :func:`render_literal_raw` (a class name such as ``nn.Tanh``)."""


def render_literal_raw(value: Any) -> str:
    """:func:`render_literal`, writing :class:`_Raw` strings unquoted.

    Args:
        value: the value.
    """
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, Mapping):
        return "dict(" + ", ".join(f"{k}={render_literal_raw(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(render_literal_raw(v) for v in value) + "]"
    return render_literal(value)
