"""Search spaces of ``bench tune``: the RL Zoo's ranges as data, YAML overrides, sampling and conversion.

A search space maps a parameter name to a :class:`ParamSpec` (``float``/``int`` with ``low``/``high``/``log``/
``step``, or ``categorical`` with ``choices``) or to a fixed value (applied to every trial, not sampled). Names
are constructor arguments of the algorithm, the zoo keys ``n_envs``/``noise_type``/``noise_std``, or one of the
zoo's derived names (:data:`DERIVED_PARAMS`): ``net_arch`` and ``activation_fn`` (labels, put into
``policy_kwargs``), ``log_std_init``/``ortho_init`` (into ``policy_kwargs``), ``one_minus_gamma``/
``one_minus_gae_lambda`` (``gamma = 1 - x``), ``subsample_steps`` (DQN: ``gradient_steps = train_freq // s``).

The built-in spaces (:data:`SEARCH_SPACES`) follow ``rl_zoo3/hyperparams_opt.py`` (rl-baselines3-zoo 2.x).
:func:`to_hyperparameters` turns sampled values into zoo-format hyperparameters (what a zoo YAML entry holds,
``policy_kwargs`` as a ``"dict(...)"`` string), with the zoo's fix-ups (``batch_size <= n_steps * n_envs``,
``gradient_steps = train_freq`` for SAC/TD3/DDPG).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = [
    "ParamSpec",
    "SearchSpace",
    "SEARCH_SPACES",
    "DERIVED_PARAMS",
    "NET_ARCHS",
    "ACTIVATIONS",
    "default_search_space",
    "load_search_space",
    "search_space_from_data",
    "sample_params",
    "to_hyperparameters",
    "render_literal",
    "space_to_jsonable",
    "space_from_jsonable",
]

FLOAT, INT, CATEGORICAL = "float", "int", "categorical"
_TYPES = (FLOAT, INT, CATEGORICAL)
_SPEC_KEYS = {FLOAT: {"type", "low", "high", "log", "step"}, INT: {"type", "low", "high", "log", "step"},
              CATEGORICAL: {"type", "choices"}}  # fmt: skip
_GAMMAS = [0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999]
_TAUS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.08]
_TRAIN_FREQS = [1, 4, 8, 16, 32, 64, 128, 256, 512]
#: constructor arguments that are never tuned
_NOT_TUNABLE = frozenset({"device", "seed", "verbose", "tensorboard_log", "policy", "_init_setup_model"})
#: zoo keys (not constructor arguments) a search space may set
_ZOO_KEYS = frozenset({"n_envs", "noise_type", "noise_std"})

#: names that are not constructor arguments but are turned into some (see :func:`to_hyperparameters`)
DERIVED_PARAMS: dict[str, str] = {
    "net_arch": "policy_kwargs.net_arch (a label, see NET_ARCHS)",
    "activation_fn": "policy_kwargs.activation_fn (tanh, relu, elu, leaky_relu)",
    "log_std_init": "policy_kwargs.log_std_init",
    "ortho_init": "policy_kwargs.ortho_init",
    "one_minus_gamma": "gamma = 1 - value",
    "one_minus_gae_lambda": "gae_lambda = 1 - value",
    "subsample_steps": "gradient_steps = max(train_freq // value, 1)",
    "n_quantiles": "policy_kwargs.n_quantiles (TQC, QR-DQN)",
    "top_frac_size": "n_top = max(int(value * n_delta), 1) (ARS)",
}

#: net_arch labels per algorithm family (the zoo's)
NET_ARCHS: dict[str, dict[str, Any]] = {
    "on_policy": {
        "tiny": {"pi": [64], "vf": [64]},
        "small": {"pi": [64, 64], "vf": [64, 64]},
        "medium": {"pi": [256, 256], "vf": [256, 256]},
        "large": {"pi": [400, 300], "vf": [400, 300]},
    },
    "off_policy": {
        "tiny": [64],
        "small": [64, 64],
        "medium": [256, 256],
        "big": [400, 300],
        "large": [256, 256, 256],
        "verybig": [512, 512, 512],
    },
}
#: activation labels -> the zoo-format class name
ACTIVATIONS: dict[str, str] = {"tanh": "nn.Tanh", "relu": "nn.ReLU", "elu": "nn.ELU", "leaky_relu": "nn.LeakyReLU"}


@dataclass(frozen=True)
class ParamSpec:
    """One tunable parameter.

    Args:
        name: parameter name.
        type: ``float``, ``int`` or ``categorical``.
        low: lower bound (float/int).
        high: upper bound (float/int), ``> low``.
        log: sample on a log scale (``low > 0``).
        step: discretisation step (float/int, not with ``log``).
        choices: the values of a categorical (None, bool, int, float or str).
    """

    name: str
    type: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class SearchSpace:
    """What a trial samples (``params``) and what every trial gets unchanged (``fixed``).

    Args:
        algo: algorithm name.
        params: name -> spec, in sampling order.
        fixed: name -> value applied to every trial.
        source: where it came from (for messages).
    """

    algo: str
    params: dict[str, ParamSpec]
    fixed: dict[str, Any]
    source: str = "built-in"


def _f(low: float, high: float, log: bool = False) -> dict[str, Any]:
    return {"type": FLOAT, "low": low, "high": high, "log": log}


def _c(*choices: Any) -> dict[str, Any]:
    return {"type": CATEGORICAL, "choices": list(choices)}


_ON_POLICY_COMMON: dict[str, dict[str, Any]] = {
    "n_steps": _c(32, 64, 128, 256, 512, 1024, 2048),
    "one_minus_gamma": _f(0.0001, 0.03, log=True),
    "one_minus_gae_lambda": _f(0.0001, 0.1, log=True),
    "learning_rate": _f(1e-5, 0.002, log=True),
    "ent_coef": _f(1e-8, 0.1, log=True),
}

#: the built-in spaces (rl_zoo3/hyperparams_opt.py), as data, by name: an algorithm class names its own in its
#: ``search_space`` metadata (several algorithms may share one, as DDPG does TD3's)
SEARCH_SPACES: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {
        "batch_size": _c(32, 64, 128, 256, 512),
        **_ON_POLICY_COMMON,
        "clip_range": _c(0.1, 0.2, 0.3, 0.4),
        "n_epochs": _c(1, 5, 10, 20),
        "max_grad_norm": _f(0.3, 2.0),
        "net_arch": _c("tiny", "small", "medium"),
        "activation_fn": _c("tanh", "relu"),
    },
    "a2c": {
        **_ON_POLICY_COMMON,
        "max_grad_norm": _f(0.3, 2.0),
        "net_arch": _c("small", "medium"),
        "activation_fn": _c("tanh", "relu"),
    },
    "sac": {
        "gamma": _c(*_GAMMAS),
        "learning_rate": _f(1e-5, 1.0, log=True),
        "batch_size": _c(16, 32, 64, 128, 256, 512, 1024, 2048),
        "buffer_size": _c(10_000, 100_000, 1_000_000),
        "learning_starts": _c(0, 1000, 10_000, 20_000),
        "train_freq": _c(*_TRAIN_FREQS),
        "tau": _c(*_TAUS),
        "log_std_init": _f(-4.0, 1.0),
        "net_arch": _c("small", "medium", "big"),
    },
    "td3": {
        "gamma": _c(*_GAMMAS),
        "learning_rate": _f(1e-5, 1.0, log=True),
        "batch_size": _c(16, 32, 64, 100, 128, 256, 512, 1024, 2048),
        "buffer_size": _c(10_000, 100_000, 1_000_000),
        "tau": _c(*_TAUS),
        "train_freq": _c(*_TRAIN_FREQS),
        "noise_type": _c("ornstein-uhlenbeck", "normal", None),
        "noise_std": _f(0.0, 1.0),
        "net_arch": _c("small", "medium", "big"),
    },
    "dqn": {
        "gamma": _c(*_GAMMAS),
        "learning_rate": _f(1e-5, 1.0, log=True),
        "batch_size": _c(16, 32, 64, 100, 128, 256, 512),
        "buffer_size": _c(10_000, 50_000, 100_000, 1_000_000),
        "exploration_final_eps": _f(0.0, 0.2),
        "exploration_fraction": _f(0.0, 0.5),
        "target_update_interval": _c(1, 1000, 5000, 10_000, 15_000, 20_000),
        "learning_starts": _c(0, 1000, 5000, 10_000, 20_000),
        "train_freq": _c(1, 4, 8, 16, 128, 256, 1000),
        "subsample_steps": _c(1, 2, 4, 8),
        "net_arch": _c("tiny", "small", "medium"),
    },
    # the zoo samples batch_size/n_steps as powers of two (batch_size_pow 2..10, n_steps_pow 5..12)
    "trpo": {
        "batch_size": _c(*(2**p for p in range(2, 11))),
        "n_steps": _c(*(2**p for p in range(5, 13))),
        "one_minus_gamma": _f(0.0001, 0.03, log=True),
        "one_minus_gae_lambda": _f(0.0001, 0.1, log=True),
        "learning_rate": _f(1e-5, 0.002, log=True),
        "n_critic_updates": {"type": INT, "low": 5, "high": 30},
        "cg_max_steps": {"type": INT, "low": 5, "high": 30},
        "target_kl": _f(0.001, 0.1, log=True),
        "net_arch": _c("small", "medium"),
        "activation_fn": _c("tanh", "relu"),
    },
    # n_delta_pow 2..6; n_top from the fraction top_frac_size of n_delta
    "ars": {
        "n_delta": _c(4, 8, 16, 32, 64),
        "learning_rate": _f(1e-5, 0.002, log=True),
        "delta_std": _f(0.01, 0.3),
        "top_frac_size": _f(0.05, 1.0),
    },
}
# sb3-contrib's off-policy algorithms (rl_zoo3 2.9.2 hyperparams_opt.py): TQC is SAC's space plus the quantiles
# (the zoo samples top_quantiles_to_drop_per_net in [0, min(n_quantiles - 1, 5)]; a fixed [0, 4] keeps every sample
# valid for n_quantiles >= 5), QR-DQN is DQN's plus n_quantiles. The zoo has no CrossQ sampler: CrossQ uses SAC's
# space without tau (CrossQ has no target networks).
SEARCH_SPACES["tqc"] = {
    **SEARCH_SPACES["sac"],
    "n_quantiles": {"type": INT, "low": 5, "high": 50},
    "top_quantiles_to_drop_per_net": {"type": INT, "low": 0, "high": 4},
}
SEARCH_SPACES["qrdqn"] = {**SEARCH_SPACES["dqn"], "n_quantiles": {"type": INT, "low": 5, "high": 200}}
SEARCH_SPACES["crossq"] = {k: v for k, v in SEARCH_SPACES["sac"].items() if k != "tau"}


def _family(algo: str) -> str:
    """``off_policy`` (a replay buffer: the algorithm takes ``buffer_size``) or ``on_policy``."""
    from lit_sb3.zoo.registry import algo_arg_names

    return "off_policy" if "buffer_size" in algo_arg_names(algo) else "on_policy"


def _continuous_off_policy(algo: str) -> bool:
    """SAC/TD3/DDPG-like: off-policy with action noise (the zoo's ``noise_type``/``gradient_steps`` rules)."""
    from lit_sb3.zoo.registry import algo_arg_names

    return "action_noise" in algo_arg_names(algo) and _family(algo) == "off_policy"


def allowed_names(algo: str) -> set[str]:
    """Every name a search space of ``algo`` may use.

    Args:
        algo: algorithm name.
    """
    from lit_sb3.zoo.registry import algo_arg_names

    args = algo_arg_names(algo)
    names = (args - _NOT_TUNABLE) | set(DERIVED_PARAMS) | _ZOO_KEYS
    if "gae_lambda" not in args:
        names -= {"one_minus_gae_lambda"}
    if _family(algo) != "on_policy":
        names.discard("ortho_init")
    if not {"train_freq", "gradient_steps"} <= args or _continuous_off_policy(algo):
        names.discard("subsample_steps")
    if not _continuous_off_policy(algo):
        names -= {"noise_type", "noise_std"}
    if not _policy_takes(algo, "n_quantiles"):
        names.discard("n_quantiles")
    if not {"n_delta", "n_top"} <= args:
        names.discard("top_frac_size")
    return names


def _policy_takes(algo: str, name: str) -> bool:
    """Whether ``algo``'s MlpPolicy (or first policy) has the constructor argument ``name``."""
    import inspect

    from lit_sb3.zoo.registry import get_algo_class

    aliases = get_algo_class(algo).policy_aliases
    policy = aliases.get("MlpPolicy") or next(iter(aliases.values()), None)
    return policy is not None and name in inspect.signature(policy.__init__).parameters


def search_space_name(algo: str) -> str | None:
    """The name of ``algo``'s built-in search space (its class's ``search_space`` metadata).

    Args:
        algo: algorithm name.
    """
    from lit_sb3.zoo.registry import get_algo_class

    return get_algo_class(algo).search_space


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``1e-5`` as a string: accept numeric strings."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _spec(name: str, data: Mapping[str, Any], algo: str, where: str) -> ParamSpec:
    """Validate one parameter spec (``where`` prefixes the error)."""
    kind = data.get("type")
    if kind not in _TYPES:
        raise BenchError(f"{where}: parameter '{name}': type must be one of {', '.join(_TYPES)}, got {kind!r}")
    unknown = set(data) - _SPEC_KEYS[kind]
    if unknown:
        key = sorted(unknown)[0]
        raise BenchError(
            f"{where}: parameter '{name}': unknown key '{key}' for a {kind}{did_you_mean(key, _SPEC_KEYS[kind])}; "
            f"allowed: {', '.join(sorted(_SPEC_KEYS[kind]))}"
        )
    if kind == CATEGORICAL:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise BenchError(f"{where}: parameter '{name}': choices must be a non-empty list, got {choices!r}")
        choices = [
            _number(c) if isinstance(c, str) and name not in ("net_arch", "activation_fn") else c for c in choices
        ]
        for choice in choices:
            if choice is not None and not isinstance(choice, (bool, int, float, str)):
                raise BenchError(
                    f"{where}: parameter '{name}': choice {choice!r} is not a number, string, boolean or null"
                )
        labels = NET_ARCHS[_family(algo)] if name == "net_arch" else ACTIVATIONS if name == "activation_fn" else None
        if labels is not None:
            for choice in choices:
                if choice not in labels:
                    raise BenchError(
                        f"{where}: parameter '{name}': unknown choice {choice!r}{did_you_mean(str(choice), labels)}; "
                        f"allowed: {', '.join(labels)}"
                    )
        return ParamSpec(name, kind, choices=tuple(choices))
    low, high = _number(data.get("low")), _number(data.get("high"))
    if not _is_number(low) or not _is_number(high):
        raise BenchError(f"{where}: parameter '{name}': low and high must be numbers, got low={low!r} high={high!r}")
    if low >= high:
        raise BenchError(f"{where}: parameter '{name}': empty range, low ({low}) must be < high ({high})")
    log = data.get("log", False)
    if not isinstance(log, bool):
        raise BenchError(f"{where}: parameter '{name}': log must be true or false, got {log!r}")
    if log and low <= 0:
        raise BenchError(f"{where}: parameter '{name}': a log range needs low > 0, got {low}")
    step = _number(data.get("step"))
    if step is not None and (not _is_number(step) or step <= 0 or log):
        raise BenchError(f"{where}: parameter '{name}': step must be a positive number and not used with log")
    if kind == INT:
        if float(low) != int(low) or float(high) != int(high) or (step is not None and float(step) != int(step)):
            raise BenchError(f"{where}: parameter '{name}': an int range needs integer low/high/step")
        return ParamSpec(name, INT, int(low), int(high), log, int(step) if step is not None else None)
    return ParamSpec(name, FLOAT, float(low), float(high), log, float(step) if step is not None else None)


def search_space_from_data(algo: str, data: Mapping[str, Any], where: str, base: SearchSpace | None = None,
                           ) -> SearchSpace:  # fmt: skip
    """Build (or extend ``base``) from a mapping ``name -> spec | fixed value | null``.

    Args:
        algo: algorithm name.
        data: the parameters; a mapping with ``type`` is a spec, ``null`` removes a parameter, anything
            else is a fixed value.
        where: prefix of error messages (e.g. ``search space my.yml``).
        base: the space to extend (None: start empty).
    """
    allowed = allowed_names(algo)
    params = dict(base.params) if base is not None else {}
    fixed = dict(base.fixed) if base is not None else {}
    for name, value in data.items():
        name = str(name)
        if name not in allowed:
            raise BenchError(
                f"{where}: unknown parameter '{name}' for {algo}{did_you_mean(name, allowed)} "
                f"(not an argument of {algo.upper()} nor one of {', '.join(DERIVED_PARAMS)})"
            )
        params.pop(name, None)
        fixed.pop(name, None)
        if value is None:
            continue
        if isinstance(value, Mapping):
            params[name] = _spec(name, value, algo, where)
        else:
            fixed[name] = _number(value) if name not in ("net_arch", "activation_fn", "noise_type") else value
            if name in ("net_arch", "activation_fn"):
                _spec(name, {"type": CATEGORICAL, "choices": [value]}, algo, where)
    return SearchSpace(algo, params, fixed, where)


def default_search_space(algo: str) -> SearchSpace:
    """The built-in (zoo) search space of ``algo``.

    Args:
        algo: algorithm name.
    """
    name = search_space_name(algo)
    if name is None:
        raise BenchError(f"{algo} declares no search space (its class's search_space is None); give one with a file")
    if name not in SEARCH_SPACES:
        raise BenchError(
            f"{algo} names the search space '{name}'{did_you_mean(name, SEARCH_SPACES)}, which does not exist; "
            f"known: {', '.join(SEARCH_SPACES)}"
        )
    return search_space_from_data(algo, SEARCH_SPACES[name], f"built-in search space of {algo}")


def load_search_space(algo: str, path: str | Path | None) -> SearchSpace:
    """The built-in space of ``algo``, overridden/extended by a YAML file.

    File format: ``{params: {name: spec|value|null, ...}, replace: false}`` or directly ``{name: ..., ...}``;
    a top-level ``<algo>:`` section is used when present. ``replace: true`` starts from an empty space.

    Args:
        algo: algorithm name.
        path: the YAML file (None: the built-in space).
    """
    if path is None or search_space_name(algo) is not None:
        base = default_search_space(algo)
    else:  # an algorithm without a built-in space: the file is the whole space
        base = SearchSpace(algo, {}, {}, f"search space {path}")
    if path is None:
        return base

    where = f"search space {path}"
    from lit_sb3.zoo.config.loading import load_yaml_file

    if not Path(path).exists():
        raise BenchError(f"{where}: no such file")
    data = load_yaml_file(path, "search space file", shown=where)
    if data is None:
        return SearchSpace(algo, base.params, base.fixed, where)
    if not isinstance(data, Mapping):
        raise BenchError(f"{where}: expected a mapping of parameter names, got {type(data).__name__}")
    if algo in data and isinstance(data[algo], Mapping):
        data = data[algo]
    replace = False
    if "params" in data and isinstance(data["params"], Mapping):
        extra = set(data) - {"params", "replace"}
        if extra:
            raise BenchError(f"{where}: unknown top-level key '{sorted(extra)[0]}'; allowed: params, replace")
        replace = data.get("replace", False)
        if not isinstance(replace, bool):
            raise BenchError(f"{where}: replace must be true or false, got {replace!r}")
        data = data["params"]
    return search_space_from_data(algo, data, where, base=None if replace else base)


def sample_params(trial: Any, space: SearchSpace) -> dict[str, Any]:
    """Suggest every parameter of ``space`` on an Optuna trial.

    Args:
        trial: ``optuna.Trial``.
        space: the search space.
    """
    out: dict[str, Any] = {}
    for name, spec in space.params.items():
        if spec.type == CATEGORICAL:
            out[name] = trial.suggest_categorical(name, list(spec.choices or ()))
        elif spec.type == INT:
            out[name] = trial.suggest_int(name, int(spec.low), int(spec.high), step=int(spec.step or 1), log=spec.log)
        else:
            out[name] = trial.suggest_float(name, float(spec.low), float(spec.high), step=spec.step, log=spec.log)
    return out


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


def space_to_jsonable(space: SearchSpace) -> dict[str, Any]:
    """JSON form of a space (it travels to worker processes and into the study's user attributes).

    Args:
        space: the space.
    """
    params = {}
    for name, spec in space.params.items():
        data = {k: v for k, v in asdict(spec).items() if v is not None and k != "name"}
        if "choices" in data:
            data["choices"] = list(data["choices"])
        if not data.get("log"):
            data.pop("log", None)
        params[name] = data
    return {"algo": space.algo, "params": params, "fixed": dict(space.fixed), "source": space.source}


def space_from_jsonable(data: Mapping[str, Any]) -> SearchSpace:
    """Inverse of :func:`space_to_jsonable`.

    Args:
        data: the JSON form.
    """
    params = {}
    for name, spec in data["params"].items():
        spec = dict(spec)
        if "choices" in spec:
            spec["choices"] = tuple(spec["choices"])
        params[name] = ParamSpec(name=name, **spec)
    return SearchSpace(data["algo"], params, dict(data["fixed"]), data.get("source", ""))
