"""Raw config values -> typed ones: integers, mappings, whitelisted classes, wrapper lists, action noise.

Every helper takes the :class:`_Source` of the value, so that an error names its file:line and env entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lit_sb3.zoo.config.literals import _ALLOWED_SYNTAX, _NUMBER_RE, _prefix, _resolve_name, parse_python_literal
from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = ["build_action_noise"]

_POLICY_CLASS_KEYS = frozenset(
    {"activation_fn", "optimizer_class", "features_extractor_class", "net_arch_activation_fn"}
)
_NOISE_TYPES = ("normal", "ornstein-uhlenbeck")


@dataclass(frozen=True)
class _Source:
    """Where a raw value came from."""

    label: str
    file: str | None
    entry: str | None
    line: int | None = None

    def error(self, key: str | None, message: str) -> BenchError:
        return BenchError(_prefix(self.file, self.entry, key, self.line) + message)


# ---------------------------------------------------------------------------------------------------------
# value processing
# ---------------------------------------------------------------------------------------------------------
def _number(value: Any) -> Any:
    """Numeric-looking strings (YAML 1.1 reads ``1e-3`` as a string) become floats."""
    if isinstance(value, str) and _NUMBER_RE.match(value.strip()):
        return float(value)
    return value


def _as_int(value: Any, src: _Source, key: str, minimum: int | None = None) -> int:
    value = _number(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise src.error(key, f"expected an integer, got {value!r}")
    result = int(value)
    if minimum is not None and result < minimum:
        raise src.error(key, f"must be >= {minimum}, got {result}")
    return result


def _as_mapping(value: Any, src: _Source, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = parse_python_literal(value, file=src.file, env=src.entry, key=key, line=src.line)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise src.error(key, f"expected a mapping (e.g. dict(a=1) or {{'a': 1}}), got {value!r}")
    return dict(value)


def _class_value(value: Any, src: _Source, key: str) -> Any:
    if isinstance(value, str):
        try:
            return _resolve_name(value.strip())
        except ValueError as exc:
            raise src.error(key, f"{exc}; allowed: {_ALLOWED_SYNTAX}") from exc
    if isinstance(value, type):
        return value
    raise src.error(key, f"expected a class name, got {value!r}")


def _policy_kwargs(value: Any, src: _Source, key: str) -> dict[str, Any]:
    kwargs = _as_mapping(value, src, key)
    for name in _POLICY_CLASS_KEYS & kwargs.keys():
        if isinstance(kwargs[name], str):
            kwargs[name] = _class_value(kwargs[name], src, f"{key}.{name}")
    return kwargs


def _wrapper_list(value: Any, src: _Source, key: str) -> list[tuple[str, dict[str, Any]]]:
    """Zoo wrapper syntax (name, {name: kwargs}, or a list of those) -> ``[(name, kwargs), ...]``."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        if isinstance(item, str):
            out.append((item.strip(), {}))
        elif isinstance(item, Mapping) and len(item) == 1:
            ((name, kwargs),) = item.items()
            if not isinstance(name, str):
                raise src.error(key, f"bad wrapper name {name!r}")
            out.append((name.strip(), _as_mapping(kwargs, src, key)))
        else:
            raise src.error(
                key, f"expected a name, {{name: kwargs}} or a list of those, got {item!r} (check the indentation)"
            )
    return out


def _named(items: list[tuple[str, dict[str, Any]]], src: _Source, key: str, known: tuple[str, ...],
           canonical_module: str, foreign: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
    out = []
    for name, kwargs in items:
        short = name.rsplit(".", 1)[-1]
        module = name.rpartition(".")[0]
        if short in known and module in ("", canonical_module, *foreign):
            out.append((f"{canonical_module}.{short}", kwargs))
            continue
        allowed = ", ".join(f"{canonical_module}.{k}" for k in known)
        raise src.error(key, f"'{name}' is not supported{did_you_mean(short, known)}; allowed: {allowed}")
    return out


def _noise_spec(noise_type: Any, noise_std: Any, src: _Source) -> dict[str, Any]:
    kind = str(noise_type).strip()
    if kind not in _NOISE_TYPES:
        hint = did_you_mean(kind, _NOISE_TYPES)
        raise src.error("noise_type", f"unknown noise type {noise_type!r}{hint}; allowed: {', '.join(_NOISE_TYPES)}")
    sigma = _number(noise_std)
    if isinstance(sigma, list):
        sigma = [_number(s) for s in sigma]
    ok = (isinstance(sigma, (int, float)) and not isinstance(sigma, bool)) or (
        isinstance(sigma, list) and all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in sigma)
    )
    if not ok:
        raise src.error("noise_std", f"expected a number (or one per action dimension), got {noise_std!r}")
    sigma = [float(s) for s in sigma] if isinstance(sigma, list) else float(sigma)
    return {"kind": kind, "mean": 0.0, "sigma": sigma}


def build_action_noise(spec: Mapping[str, Any] | None, action_dim: int) -> Any:
    """Build the action noise object of a spec made by :func:`resolve` (``algo_kwargs['action_noise']``).

    Args:
        spec: ``{"kind": "normal"|"ornstein-uhlenbeck", "mean": float, "sigma": float or list}``, or None.
        action_dim: size of the (flat) Box action space.
    """
    if spec is None:
        return None
    import numpy as np

    from lit_sb3.core.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    mean = np.zeros(action_dim) + float(spec.get("mean", 0.0))
    sigma = np.ones(action_dim) * np.asarray(spec["sigma"], dtype=np.float64)
    kind = spec["kind"]
    if kind == "normal":
        return NormalActionNoise(mean=mean, sigma=sigma)
    if kind == "ornstein-uhlenbeck":
        return OrnsteinUhlenbeckActionNoise(mean=mean, sigma=sigma)
    raise BenchError(f"unknown action noise kind {kind!r}; allowed: {', '.join(_NOISE_TYPES)}")
