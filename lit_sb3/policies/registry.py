"""Policy aliases ("MlpPolicy", ...) and the whitelist of classes that saved files and configs may name.

Loading resolves class names only through :data:`CLASS_WHITELIST`, never by importing arbitrary paths, so a
saved model or config cannot make the library run code it does not already trust.
"""

from __future__ import annotations

import difflib

import torch as th
from torch import nn

from lit_sb3.policies import base, dqn, sac, td3
from lit_sb3.policies.torch_layers import BaseFeaturesExtractor, CombinedExtractor, FlattenExtractor, NatureCNN

__all__ = [
    "CLASS_WHITELIST",
    "POLICY_ALIASES",
    "class_to_path",
    "path_to_class",
    "register_class",
    "resolve_policy_class",
]

POLICY_ALIASES: dict[str, dict[str, type]] = {
    "ActorCriticPolicy": {
        "MlpPolicy": base.ActorCriticPolicy,
        "CnnPolicy": base.ActorCriticCnnPolicy,
        "MultiInputPolicy": base.MultiInputActorCriticPolicy,
    },
    "SACPolicy": {"MlpPolicy": sac.MlpPolicy, "CnnPolicy": sac.CnnPolicy, "MultiInputPolicy": sac.MultiInputPolicy},
    "TD3Policy": {"MlpPolicy": td3.MlpPolicy, "CnnPolicy": td3.CnnPolicy, "MultiInputPolicy": td3.MultiInputPolicy},
    "DQNPolicy": {"MlpPolicy": dqn.MlpPolicy, "CnnPolicy": dqn.CnnPolicy, "MultiInputPolicy": dqn.MultiInputPolicy},
}


def resolve_policy_class(aliases: dict[str, type], policy: str | type, algo_name: str) -> type:
    """The policy class for an alias or a class.

    Args:
        aliases: the algorithm's aliases (a value of :data:`POLICY_ALIASES`).
        policy: an alias such as ``"MlpPolicy"`` or a policy class.
        algo_name: the algorithm's name, for error messages.
    """
    if isinstance(policy, str):
        if policy in aliases:
            return aliases[policy]
        close = difflib.get_close_matches(policy, list(aliases), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"Unknown policy '{policy}' for {algo_name}{hint}; available: {', '.join(aliases)}")
    if isinstance(policy, type) and issubclass(policy, base.BasePolicy):
        return policy
    raise TypeError(
        f"policy for {algo_name} must be one of {', '.join(aliases)} or a BasePolicy subclass, got {policy!r}."
    )


def class_to_path(cls: type) -> str:
    """Import path of a class (``module.QualName``), e.g. ``"torch.nn.modules.activation.Tanh"``.

    Args:
        cls: the class (it must be whitelisted, or it could not be loaded back).
    """
    path = f"{cls.__module__}.{cls.__qualname__}"
    if CLASS_WHITELIST.get(path) is not cls:
        raise ValueError(
            f"Class {path} is not in the whitelist of classes that can be saved and loaded; "
            "register it with lit_sb3.policies.registry.register_class(cls) first."
        )
    return path


CLASS_WHITELIST: dict[str, type] = {}
_SHORT_NAMES: dict[str, list[type]] = {}
# prefixes accepted before a short name in configs ("nn.ReLU", "th.optim.Adam", ...)
_SHORT_PREFIXES = {"", "nn", "th.nn", "torch.nn", "optim", "th.optim", "torch.optim"}


def register_class(cls: type) -> type:
    """Allow ``cls`` in saved files and configs (usable as a decorator).

    Args:
        cls: a class (activation, optimizer, features extractor, policy, ...).
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_class expects a class, got {cls!r}.")
    path = f"{cls.__module__}.{cls.__qualname__}"
    CLASS_WHITELIST[path] = cls
    same = _SHORT_NAMES.setdefault(cls.__qualname__, [])
    if cls not in same:
        same.append(cls)
    return cls


def path_to_class(path: str) -> type:
    """The whitelisted class named by ``path``: a full path from :func:`class_to_path`, or a short form such as
    ``"Tanh"``, ``"nn.Tanh"``, ``"th.optim.Adam"`` when the name is unambiguous.

    Args:
        path: the class name or path.
    """
    if not isinstance(path, str):
        raise TypeError(f"A class path must be a string, got {path!r}.")
    path = path.strip()
    if path in CLASS_WHITELIST:
        return CLASS_WHITELIST[path]
    prefix, _, name = path.rpartition(".")
    candidates = _SHORT_NAMES.get(name, [])
    if prefix not in _SHORT_PREFIXES:
        candidates = [cls for cls in candidates if cls.__module__ == prefix or cls.__module__.startswith(prefix + ".")]
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        options = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in candidates)
        raise ValueError(f"Class name {path!r} is ambiguous; use one of: {options}.")
    close = difflib.get_close_matches(name, list(_SHORT_NAMES), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"Class {path!r} is not in the whitelist of loadable classes.{hint} Allowed: {', '.join(sorted(_SHORT_NAMES))}. "
        "Register your own classes with lit_sb3.policies.registry.register_class(cls)."
    )


for _cls in (
    nn.ReLU, nn.Tanh, nn.ELU, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Softplus, nn.Identity, nn.Mish,
    nn.SELU, nn.CELU, nn.PReLU, nn.ReLU6, nn.Hardtanh, nn.Hardswish, nn.Softsign, nn.Tanhshrink,
    nn.LayerNorm, nn.BatchNorm1d, nn.Dropout,
    th.optim.Adam, th.optim.AdamW, th.optim.RMSprop, th.optim.SGD,
    BaseFeaturesExtractor, FlattenExtractor, NatureCNN, CombinedExtractor,
    base.ActorCriticPolicy, base.ActorCriticCnnPolicy, base.MultiInputActorCriticPolicy,
    sac.SACPolicy, sac.CnnPolicy, sac.MultiInputPolicy,
    td3.TD3Policy, td3.CnnPolicy, td3.MultiInputPolicy,
    dqn.DQNPolicy, dqn.CnnPolicy, dqn.MultiInputPolicy,
):  # fmt: skip
    register_class(_cls)
del _cls
