"""Hyperparameter values checked before any job starts: constructor annotations plus a table of ranges.

Each value of a resolved config is checked against the type annotation of the constructor argument it feeds
(the algorithm's; for ``policy_kwargs`` the policy class's, for ``optimizer_kwargs`` and
``features_extractor_kwargs`` the optimizer's and features extractor's) and, by argument name, against the
documented range in :data:`RANGES`. Unknown keys in those keyword dictionaries are errors. Nothing here is
written per algorithm: a new algorithm's arguments are checked from its signature.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lit_sb3.core.schedules import ConstantSchedule, LinearSchedule
from lit_sb3.zoo.errors import did_you_mean

__all__ = [
    "Bound",
    "RANGES",
    "STRING_VALUES",
    "DEVICE_HELP",
    "check_device",
    "check_value",
    "check_kwargs",
    "check_policy_kwargs",
    "check_algo_kwargs",
]


@dataclass(frozen=True)
class Bound:
    """A closed (or left-open) numeric interval.

    Args:
        low: smallest allowed value (None: unbounded).
        high: largest allowed value (None: unbounded).
        low_open: exclude ``low`` itself (``> low`` rather than ``>= low``).
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in the interval (NaN and infinity never do: every bound is between numbers)."""
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or x <= self.high

    def __str__(self) -> str:
        low, high = _fmt(self.low), _fmt(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}]"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {low}"
        return f"<= {high}" if self.high is not None else "any value"


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


_UNIT = Bound(0, 1)
_POSITIVE = Bound(0, low_open=True)
_NON_NEGATIVE = Bound(0)
_AT_LEAST_1 = Bound(1)
_AT_LEAST_MINUS_1 = Bound(-1)

#: Documented range of an argument, by name, whichever constructor takes it (SB3 2.x docstrings).
RANGES: dict[str, Bound] = {
    # discounts, averaging and exploration fractions
    **dict.fromkeys(
        ("gamma", "gae_lambda", "tau", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps"),
        _UNIT,
    ),
    # sizes and counts
    **dict.fromkeys(
        (
            "n_steps",
            "batch_size",
            "n_epochs",
            "buffer_size",
            "target_update_interval",
            "policy_delay",
            "stats_window_size",
            "n_critics",
            "n_sampled_goal",
        ),
        _AT_LEAST_1,
    ),
    # -1 means "as many as env steps collected" / "only at the start of a rollout"
    "gradient_steps": _AT_LEAST_MINUS_1,
    "sde_sample_freq": _AT_LEAST_MINUS_1,
    # non-negative amounts
    **dict.fromkeys(
        ("learning_starts", "ent_coef", "vf_coef", "target_policy_noise", "target_noise_clip", "weight_decay"),
        _NON_NEGATIVE,
    ),
    # strictly positive amounts (schedules: their initial value)
    **dict.fromkeys(
        (
            "learning_rate",
            "clip_range",
            "clip_range_vf",
            "max_grad_norm",
            "target_kl",
            "rms_prop_eps",
            "clip_mean",
            "eps",
            "epsilon",
            "clip_obs",
            "clip_reward",
        ),
        _POSITIVE,
    ),
    "verbose": Bound(0, 2),
    "seed": Bound(0, 2**32 - 1),  # numpy's seed range
    # env wrappers' lengths (TimeLimit, TimeFeatureWrapper, FrameSkip, HistoryWrapper)
    **dict.fromkeys(("max_episode_steps", "max_steps", "skip", "horizon"), _AT_LEAST_1),
}
# TRPO and ARS (sb3-contrib 2.9 docstrings)
RANGES.update(
    {
        **dict.fromkeys(
            ("n_delta", "n_top", "n_eval_episodes", "sub_sampling_factor", "line_search_max_iter"), _AT_LEAST_1
        ),
        **dict.fromkeys(("cg_max_steps", "n_critic_updates", "cg_damping"), _NON_NEGATIVE),
        "delta_std": _POSITIVE,
        "line_search_shrinking_factor": Bound(0, 1, low_open=True),
    }
)

#: Strings an argument annotated ``str | float`` accepts: (pattern, description).
STRING_VALUES: dict[str, tuple[re.Pattern[str], str]] = {
    "ent_coef": (
        re.compile(r"^auto(_[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)?$"),
        "'auto' or 'auto_<initial value>' (e.g. auto_0.1)",
    ),
    "target_entropy": (re.compile(r"^auto$"), "'auto'"),
}

_DEVICE_RE = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")
DEVICE_HELP = "cpu, cuda, cuda:N, auto or mps"

#: Arguments a caller fills itself, so a keyword dictionary must not set them (-> the setting to use instead).
_FILLED_BY_CALLER: dict[str, dict[str, str]] = {
    "policy": {
        "observation_space": "the env",
        "action_space": "the env",
        "lr_schedule": "learning_rate",
        "use_sde": "the algorithm's use_sde",
    },
    "optimizer": {"params": "the policy", "lr": "learning_rate"},
    "features extractor": {"observation_space": "the env"},
    "VecNormalize": {"venv": "the env"},
    "buffer": {
        "buffer_size": "buffer_size",
        "observation_space": "the env",
        "action_space": "the env",
        "env": "the env",
        "device": "device",
        "n_envs": "n_envs",
        "optimize_memory_usage": "optimize_memory_usage",
        "gamma": "gamma",
        "gae_lambda": "gae_lambda",
    },
}


def check_device(value: Any) -> str | None:
    """Why ``value`` is not a device name (None when it is one).

    Args:
        value: e.g. ``"cpu"``, ``"cuda:1"``.
    """
    if isinstance(value, str) and _DEVICE_RE.match(value.strip()):
        return None
    return f"unknown device {value!r}; allowed: {DEVICE_HELP}"


# ---------------------------------------------------------------------------------------------------------
# annotations
# ---------------------------------------------------------------------------------------------------------
def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint`` (forms not understood here always fit)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        return any(_matches(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is type:
        if not isinstance(value, type):
            return False
        bases = typing.get_args(args[0]) if args and _is_union(args[0]) else args
        return not bases or any(not isinstance(b, type) or issubclass(value, b) for b in bases)
    if origin in (list, collections.abc.Sequence):
        return isinstance(value, (list, tuple)) and (not args or all(_matches(v, args[0]) for v in value))
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return not args or (len(value) == len(args) and all(_matches(v, a) for v, a in zip(value, args)))
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, Mapping):
            return False
        if len(args) != 2:
            return True
        return all(_matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items())
    if origin is collections.abc.Callable or getattr(hint, "_is_protocol", False):
        return callable(value)
    if isinstance(hint, type) and hint.__module__.partition(".")[0] == "numpy":
        return isinstance(value, (int, float, list, tuple)) and not isinstance(value, bool)  # converted by the callee
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _describe(hint: Any) -> str:
    """A short readable form of an annotation: ``int``, ``list[int] | dict[str, list[int]] | None``."""
    if hint is None or hint is type(None):
        return "None"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        return " | ".join(_describe(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_describe(a) for a in args)}]" if args else name
    return getattr(hint, "__name__", str(hint))


def _integral(hint: Any) -> bool:
    """Whether the annotation takes ``int`` but not ``float`` (so ``1e6`` may become ``1000000``)."""
    parts = typing.get_args(hint) if _is_union(hint) else (hint,)
    return int in parts and float not in parts


def _initial(value: Any) -> Any:
    """The number a range applies to (a schedule's initial value)."""
    if isinstance(value, LinearSchedule):
        return value.start
    if isinstance(value, ConstantSchedule):
        return value.value
    return value


def _show(value: Any) -> str:
    if isinstance(value, LinearSchedule):
        return f"lin_{value.start:g}"
    if isinstance(value, type):
        return value.__name__
    return repr(value)


def check_value(name: str, value: Any, hint: Any) -> tuple[Any, str | None]:
    """``(value, None)`` if it fits (integral floats of int arguments become ints), else ``(value, why)``.

    Args:
        name: argument name (selects the range and accepted strings).
        value: the resolved value.
        hint: the argument's type annotation (``inspect.Parameter.empty`` when there is none).
    """
    if name == "device" and isinstance(value, str):
        return value, check_device(value)
    if _integral(hint) and isinstance(value, float) and value.is_integer():
        value = int(value)
    bound = RANGES.get(name)
    if not _matches(value, hint):
        allowed = _describe(hint)
        if bound is not None:
            allowed += f" {bound}"
        if name in STRING_VALUES and _matches("auto", hint):
            allowed += f", or {STRING_VALUES[name][1]}"
        return value, f"bad value {_show(value)}: expected {allowed}"
    if isinstance(value, str) and name in STRING_VALUES:
        pattern, text = STRING_VALUES[name]
        if not pattern.match(value.strip()):
            number = f"a number {bound}" if bound is not None else "a number"
            return value, f"bad value {value!r}: expected {number} or {text}"
        return value, None
    number = _initial(value)
    if bound is not None and isinstance(number, (int, float)) and not isinstance(number, bool):
        if not bound.contains(number):
            finite = "a finite number " if isinstance(number, float) and math.isinf(number) else ""
            return value, f"bad value {_show(value)}: must be {finite}{bound}"
    return value, None


# ---------------------------------------------------------------------------------------------------------
# keyword dictionaries checked against a class's constructor
# ---------------------------------------------------------------------------------------------------------
@functools.cache
def constructor_hints(cls: type) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool]:
    """``(parameters, annotations, takes **kwargs)`` of ``cls``'s constructor.

    Args:
        cls: a class.
    """
    try:
        params = dict(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return {}, {}, True
    params.pop("self", None)
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    params = {k: p for k, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    from lit_sb3.callbacks.base import BaseCallback
    from lit_sb3.vec_env import VecEnv

    # the library's type aliases name these as strings (GymEnv = Union[gym.Env, "VecEnv"]): an algorithm's
    # `env: GymEnv | str | None` resolves even in a module that does not import VecEnv itself
    forward_refs = {"VecEnv": VecEnv, "BaseCallback": BaseCallback}
    try:
        hints = typing.get_type_hints(cls.__init__, localns=forward_refs)
    except Exception:  # noqa: BLE001 - an annotation that cannot be evaluated is simply not checked
        hints = {}
    return params, hints, var_kw


def check_kwargs(
    kwargs: Mapping[str, Any],
    cls: type,
    role: str,
    fail: Callable[[str, str], Exception],
    key: str,
    nested: Mapping[str, Callable[[Mapping[str, Any]], type | None]] | None = None,
) -> dict[str, Any]:
    """Check a keyword dictionary against ``cls``'s constructor; return it with integral values as ints.

    Args:
        kwargs: e.g. the ``policy_kwargs`` of a config.
        cls: the class the dictionary is passed to (e.g. the policy class).
        role: ``"policy"``, ``"optimizer"`` or ``"features extractor"`` (which arguments the caller fills).
        fail: ``fail(key, message)`` -> the exception to raise (it carries file, line and entry).
        key: dotted name of the dictionary in messages (``policy_kwargs``).
        nested: ``{name: class_of(kwargs)}`` for keys that are themselves keyword dictionaries.
    """
    params, hints, var_kw = constructor_hints(cls)
    filled = _FILLED_BY_CALLER.get(role, {})
    allowed = sorted(k for k in params if k not in filled)
    out = dict(kwargs)
    for name, value in kwargs.items():
        where = f"{key}.{name}"
        if name in filled:
            raise fail(key, f"'{name}' cannot be set here: it comes from {filled[name]}")
        if name not in params:
            if var_kw:
                continue
            hint = did_you_mean(name, allowed)
            raise fail(key, f"unknown {role} argument '{name}' for {cls.__name__}{hint}; allowed: {', '.join(allowed)}")
        if nested and name in nested and isinstance(value, Mapping):
            inner = nested[name](kwargs)
            if inner is not None:
                out[name] = check_kwargs(value, inner, _ROLE_OF.get(name, name), fail, where)
                continue
        out[name], why = check_value(name, value, hints.get(name, params[name].annotation))
        if why is not None:
            raise fail(where, why)
    return out


_ROLE_OF = {"optimizer_kwargs": "optimizer", "features_extractor_kwargs": "features extractor"}


# ---------------------------------------------------------------------------------------------------------
# a whole config
# ---------------------------------------------------------------------------------------------------------
_MAX_LAYER = 1 << 16  # widest hidden layer accepted (a 65,536 x 65,536 layer alone is 17 GB of float32)


def _is_actor_critic(policy_cls: type) -> bool:
    return any(c.__name__ == "ActorCriticPolicy" for c in policy_cls.__mro__)


def _net_arch_error(arch: Any, policy_cls: type) -> str | None:
    """Why ``net_arch`` does not fit the policy (None if it does); its type was checked already."""
    keys = ("pi", "vf") if _is_actor_critic(policy_cls) else ("pi", "qf")
    example = f"[64, 64] or dict({keys[0]}=[64, 64], {keys[1]}=[64, 64])"
    if isinstance(arch, Mapping):
        unknown = sorted(set(arch) - set(keys))
        if unknown:
            return f"bad value {arch!r}: unknown key(s) {unknown}; allowed keys: {', '.join(keys)} (e.g. {example})"
        missing = [k for k in keys if k not in arch]
        if missing and not _is_actor_critic(policy_cls):
            return f"bad value {arch!r}: missing key(s) {missing} (e.g. {example})"
        layers = [n for v in arch.values() for n in v]
    else:
        layers = list(arch or [])
    bad = [n for n in layers if not 1 <= n <= _MAX_LAYER]
    if bad:
        return f"bad value {arch!r}: layer sizes must be in [1, {_MAX_LAYER}] (e.g. {example})"
    return None


def check_policy_kwargs(kwargs: Mapping[str, Any], policy_cls: type, fail: Callable[[str, str], Exception],
                        key: str = "policy_kwargs") -> dict[str, Any]:  # fmt: skip
    """Check ``policy_kwargs`` against the policy class: names, types, ranges, ``net_arch`` shape, nested kwargs.

    Args:
        kwargs: the policy keyword arguments (classes already resolved).
        policy_cls: the policy class the algorithm builds.
        fail: ``fail(key, message)`` -> the exception to raise.
        key: name of the dictionary in messages.
    """
    params, _, _ = constructor_hints(policy_cls)

    def default_of(name: str) -> Callable[[Mapping[str, Any]], type | None]:
        def pick(kw: Mapping[str, Any]) -> type | None:
            cls = kw.get(name, params[name].default if name in params else None)
            return cls if isinstance(cls, type) else None

        return pick

    arch = kwargs.get("net_arch")
    legacy = isinstance(arch, list) and len(arch) == 1 and isinstance(arch[0], Mapping) and _is_actor_critic(policy_cls)
    checked = dict(kwargs, net_arch=arch[0]) if legacy else kwargs  # SB3 < 1.8 form [dict(pi=..., vf=...)]
    nested = {"optimizer_kwargs": default_of("optimizer_class"),
              "features_extractor_kwargs": default_of("features_extractor_class")}  # fmt: skip
    out = check_kwargs(checked, policy_cls, "policy", fail, key, nested)
    if "net_arch" in out:
        why = _net_arch_error(out["net_arch"], policy_cls)
        if why is not None:
            raise fail(f"{key}.net_arch", why)
        if legacy:
            out["net_arch"] = arch
    return out


def check_algo_kwargs(algo_cls: type, policy: str, algo_kwargs: Mapping[str, Any],
                      fail: Callable[[str, str], Exception]) -> dict[str, Any]:  # fmt: skip
    """Check every constructor argument of a resolved config; return them (integral floats of ints as ints).

    Args:
        algo_cls: the algorithm class.
        policy: the policy alias (``MlpPolicy``, ...).
        algo_kwargs: constructor keyword arguments except ``policy`` (noise as a spec, checked elsewhere).
        fail: ``fail(key, message)`` -> the exception to raise (it names file:line and entry of ``key``).
    """
    params, hints, _ = constructor_hints(algo_cls)
    aliases = getattr(algo_cls, "policy_aliases", None) or {}
    if aliases and policy not in aliases:
        hint = did_you_mean(policy, aliases)
        raise fail("policy", f"unknown policy '{policy}' for {algo_cls.__name__}{hint}; allowed: {', '.join(aliases)}")
    out = dict(algo_kwargs)
    for name, value in algo_kwargs.items():
        if name == "action_noise" or name not in params:
            continue  # noise is a spec made and checked by the resolver; unknown names were refused there
        if name == "policy_kwargs" and isinstance(value, Mapping) and policy in aliases:
            out[name] = check_policy_kwargs(value, aliases[policy], fail)
            continue
        buffer_cls = algo_kwargs.get(name.removesuffix("_kwargs") + "_class")
        if name.endswith("buffer_kwargs") and isinstance(value, Mapping) and isinstance(buffer_cls, type):
            out[name] = check_kwargs(value, buffer_cls, "buffer", fail, name)  # the class given next to it
            continue
        out[name], why = check_value(name, value, hints.get(name, params[name].annotation))
        if why is not None:
            raise fail(name, why)
    return out
