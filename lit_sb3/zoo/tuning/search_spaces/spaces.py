"""Search-space machinery of ``bench tune``: the space/parameter classes, validation, sampling, JSON form.

A search space maps a parameter name to a :class:`ParamSpec` (``float``/``int`` with ``low``/``high``/``log``/
``step``, or ``categorical`` with ``choices``) or to a fixed value (applied to every trial, not sampled). Names
are constructor arguments of the algorithm, the zoo keys ``n_envs``/``noise_type``/``noise_std``, or one of the
zoo's derived names (:data:`~lit_sb3.zoo.tuning.search_spaces.tables.DERIVED_PARAMS`). This module resolves and
validates the built-in spaces (:mod:`~lit_sb3.zoo.tuning.search_spaces.tables`) and ``--search-space`` files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.tuning.search_spaces.tables import (
    ACTIVATIONS,
    CATEGORICAL,
    DERIVED_PARAMS,
    FLOAT,
    INT,
    NET_ARCHS,
    SEARCH_SPACES,
)

__all__ = [
    "ParamSpec",
    "SearchSpace",
    "allowed_names",
    "search_space_name",
    "default_search_space",
    "load_search_space",
    "search_space_from_data",
    "sample_params",
    "space_to_jsonable",
    "space_from_jsonable",
]

_TYPES = (FLOAT, INT, CATEGORICAL)
_SPEC_KEYS = {FLOAT: {"type", "low", "high", "log", "step"}, INT: {"type", "low", "high", "log", "step"},
              CATEGORICAL: {"type", "choices"}}  # fmt: skip
#: constructor arguments that are never tuned
_NOT_TUNABLE = frozenset({"device", "seed", "verbose", "tensorboard_log", "policy", "_init_setup_model"})
#: zoo keys (not constructor arguments) a search space may set
_ZOO_KEYS = frozenset({"n_envs", "noise_type", "noise_std"})
_POLICY_KEYS = ("net_arch", "activation_fn", "log_std_init", "ortho_init", "n_quantiles")
#: the argument a derived name sets (policy keys: a key of ``policy_kwargs``)
_SETS: dict[str, str] = {
    "one_minus_gamma": "gamma",
    "one_minus_gae_lambda": "gae_lambda",
    "subsample_steps": "gradient_steps",
    "top_frac_size": "n_top",
    **{key: f"policy_kwargs.{key}" for key in _POLICY_KEYS},
}


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


def policy_kwargs_value(value: Any, where: str) -> dict[str, Any]:
    """A search space's ``policy_kwargs`` value (a ``"dict(...)"`` string or a mapping) as a dictionary.

    Args:
        value: the value.
        where: prefix of error messages.
    """
    from lit_sb3.zoo.config.literals import parse_python_literal

    parsed = parse_python_literal(value, file=where, key="policy_kwargs") if isinstance(value, str) else value
    if not isinstance(parsed, Mapping):
        raise BenchError(f"{where}: policy_kwargs: expected a dict such as dict(net_arch=[64, 64]), got {value!r}")
    return dict(parsed)


def _targets(name: str, value: Any, where: str) -> set[str]:
    """The arguments ``name`` sets: itself, what a derived name sets, the keys of a fixed ``policy_kwargs``."""
    if name == "policy_kwargs":
        if isinstance(value, ParamSpec) or (isinstance(value, Mapping) and "type" in value):  # sampled: any key
            return {f"policy_kwargs.{key}" for key in _POLICY_KEYS}
        return {f"policy_kwargs.{key}" for key in policy_kwargs_value(value, where)} if value is not None else set()
    return {_SETS.get(name, name)}


def search_space_from_data(algo: str, data: Mapping[str, Any], where: str, base: SearchSpace | None = None,
                           ) -> SearchSpace:  # fmt: skip
    """Build (or extend ``base``) from a mapping ``name -> spec | fixed value | null``.

    An argument set by ``data`` replaces whatever ``base`` set for it, directly or through a derived name: a
    file's fixed ``gamma`` (or its own range of ``gamma``) replaces the built-in ``one_minus_gamma``, a fixed
    ``policy_kwargs`` with ``net_arch`` replaces the built-in ``net_arch``. Two names of ``data`` that set the
    same argument (``gamma`` and ``one_minus_gamma``) are an error naming both.

    Args:
        algo: algorithm name.
        data: the parameters; a mapping with ``type`` is a spec, ``null`` removes a parameter, anything
            else is a fixed value.
        where: prefix of error messages (e.g. ``--search-space my.yml``).
        base: the space to extend (None: start empty).
    """
    allowed = allowed_names(algo)
    params = dict(base.params) if base is not None else {}
    fixed = dict(base.fixed) if base is not None else {}
    seen: dict[str, str] = {}  # argument -> the name of data that sets it
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
        targets = _targets(name, value, where)
        for target in sorted(targets):
            if target in seen:
                raise BenchError(f"{where}: '{seen[target]}' and '{name}' both set {target}: keep one of them")
            seen[target] = name
        for other in [n for n in (*params, *fixed) if n not in seen.values()]:
            if _targets(other, params.get(other, fixed.get(other)), where) & targets:
                params.pop(other, None)  # the later layer's value wins over the base's derived one
                fixed.pop(other, None)
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
        base = SearchSpace(algo, {}, {}, f"--search-space {path}")
    if path is None:
        return base

    where = f"--search-space {path}"
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
