"""The restricted expression parser of zoo strings, and learning-rate/clip-range schedules.

Strings such as ``"dict(net_arch=[64, 64], activation_fn=nn.ReLU)"`` are parsed with :mod:`ast` by
:func:`parse_python_literal`: literals, lists, tuples, dicts, ``dict(k=v)``, unary minus, and whitelisted names
(torch activations and optimizers, features extractors, ``HerReplayBuffer``, ``RMSpropTFLike``). Nothing is
ever evaluated.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from lit_sb3.core.schedules import LinearSchedule, linear_schedule
from lit_sb3.zoo.config.resolved import _EXTRACTORS, _OPTIMIZERS, _WHITELIST
from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = ["parse_python_literal", "parse_schedule"]

_NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ALLOWED_SYNTAX = (
    "numbers, strings, True/False/None, lists, tuples, {...} dicts, dict(key=value, ...), unary minus, "
    "and the names nn.<Activation> (e.g. nn.ReLU, nn.Tanh; also th.nn./torch.nn.), th.optim.<Optimizer> "
    f"({', '.join(_OPTIMIZERS)}), {', '.join(_EXTRACTORS)}, HerReplayBuffer, RMSpropTFLike"
)


def _prefix(file: str | None, env: str | None, key: str | None, line: int | None = None) -> str:
    parts = []
    if file:
        parts.append(f"{file}:{line}" if line else file)
    if env:
        parts.append(env)
    if key:
        parts.append(key)
    return ": ".join(parts) + (": " if parts else "")


def _resolve_name(dotted: str) -> Any:
    """Object for a whitelisted dotted name; raises ``ValueError`` with the reason otherwise."""
    if dotted not in _WHITELIST:
        raise ValueError(f"name '{dotted}' is not allowed{did_you_mean(dotted, _WHITELIST)}")
    from lit_sb3.utils.serialization import path_to_class  # the one class whitelist (configs, jobs, archives)

    module_name, attr = _WHITELIST[dotted]  # a zoo spelling -> the class's path, resolved without importing it
    return path_to_class(f"{module_name}.{attr}")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Rejected(Exception):
    def __init__(self, node: ast.AST, reason: str) -> None:
        super().__init__(reason)
        self.node, self.reason = node, reason


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise _Rejected(node, f"{type(node.value).__name__} constants are not allowed")
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise _Rejected(v, "'**' unpacking is not allowed")
            key = _literal(k)
            if not isinstance(key, (str, int, float, bool, tuple)) and key is not None:
                raise _Rejected(k, "dict keys must be literals")
            out[key] = _literal(v)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Rejected(node, "unary minus/plus only applies to numbers")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == "dict"):
            raise _Rejected(node, "function calls other than dict(key=value, ...) are not allowed")
        if node.args:
            raise _Rejected(node, "dict(...) takes keyword arguments only")
        result: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise _Rejected(kw.value, "'**' unpacking is not allowed")
            result[kw.arg] = _literal(kw.value)
        return result
    if isinstance(node, (ast.Name, ast.Attribute)):
        dotted = _dotted(node)
        if dotted is None:
            raise _Rejected(node, "attribute access on an expression is not allowed")
        try:
            return _resolve_name(dotted)
        except ValueError as exc:
            raise _Rejected(node, str(exc)) from exc
    kinds = {
        ast.Lambda: "lambdas", ast.BinOp: "arithmetic", ast.Subscript: "subscripts", ast.Set: "sets",
        ast.ListComp: "comprehensions", ast.GeneratorExp: "generators", ast.BoolOp: "boolean operators",
        ast.Compare: "comparisons", ast.IfExp: "conditional expressions", ast.JoinedStr: "f-strings",
    }  # fmt: skip
    what = next((v for k, v in kinds.items() if isinstance(node, k)), type(node).__name__ + " expressions")
    raise _Rejected(node, f"{what} are not allowed")


def parse_python_literal(
    text: str, *, file: str | None = None, env: str | None = None, key: str | None = None, line: int | None = None
) -> Any:
    """Parse a zoo expression string without evaluating code.

    Args:
        text: e.g. ``"dict(net_arch=[256, 256], activation_fn=nn.ReLU)"``.
        file: file shown in error messages.
        env: env entry shown in error messages.
        key: hyperparameter shown in error messages.
        line: line shown in error messages.
    """
    where = _prefix(file, env, key, line)
    source = " ".join(text.split())  # zoo strings span lines; newlines inside are insignificant
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise BenchError(f"{where}cannot parse {text!r}: {exc.msg}; allowed: {_ALLOWED_SYNTAX}") from exc
    try:
        return _literal(tree.body)
    except _Rejected as rej:
        expr = ast.get_source_segment(source, rej.node) or ast.unparse(rej.node)
        raise BenchError(f"{where}{rej.reason} in {expr!r}; allowed: {_ALLOWED_SYNTAX}") from None


def parse_schedule(value: Any, *, file: str | None = None, env: str | None = None, key: str | None = None,
                   line: int | None = None) -> float | LinearSchedule | None:  # fmt: skip
    """``lin_<x>`` -> ``linear_schedule(x)``; numbers and number strings -> float.

    Args:
        value: the raw value.
        file: file shown in error messages.
        env: env entry shown in error messages.
        key: hyperparameter shown in error messages.
        line: line shown in error messages.
    """
    where = _prefix(file, env, key, line)
    allowed = "expected a number or lin_<number> (e.g. 3e-4, lin_7.3e-4)"
    if value is None and key == "clip_range_vf":
        return None
    if isinstance(value, LinearSchedule):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER_RE.match(text):
            return float(text)
        if text.startswith("lin_") and _NUMBER_RE.match(text[4:]):
            return linear_schedule(float(text[4:]))
        raise BenchError(f"{where}bad schedule {value!r}: {allowed}")
    raise BenchError(f"{where}bad value {value!r}: {allowed}")
