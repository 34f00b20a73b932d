"""Zoo-format hyperparameter files, the restricted expression parser, and config resolution.

A zoo file (``zoo_configs/<algo>.yml``, or one given with ``--config``) maps env ids (and ``default``) to
hyperparameters in the rl-baselines3-zoo format. :func:`resolve` merges, key by key (later wins):

1. the built-in file's ``default`` entry, then its env entry (for a ``-v5`` env without an entry, the ``-v4``
   then ``-v3`` entry: the zoo's v4 MuJoCo settings apply to v5 envs);
2. each ``--config FILE``: its ``default`` entry, then its entry for the env;
3. ``--hyperparams key=value`` overrides.

With no env entry anywhere the SB3 constructor defaults apply (``policy: MlpPolicy``; ``n_timesteps`` must then
come from the command line). Every value keeps its provenance.

Strings such as ``"dict(net_arch=[64, 64], activation_fn=nn.ReLU)"`` are parsed with :mod:`ast` by
:func:`parse_python_literal`: literals, lists, tuples, dicts, ``dict(k=v)``, unary minus, and whitelisted names
(torch activations and optimizers, features extractors, ``HerReplayBuffer``). Nothing is ever evaluated.
``RMSpropTFLike`` (SB3's TF-style RMSprop) is rejected: torch's RMSprop differs (eps outside the square root,
zero-initialised square average), so silently substituting it would change the published results.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import lit_sb3
from lit_sb3.core.schedules import ConstantSchedule, LinearSchedule, linear_schedule, schedule_to_dict
from lit_sb3.zoo import wrappers as zoo_wrappers
from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.registry import algo_arg_names, algo_defaults, check_algo

__all__ = [
    "DEFAULT_ENTRY",
    "SPECIAL_KEYS",
    "SCHEDULE_KEYS",
    "ResolvedConfig",
    "zoo_config_dir",
    "zoo_config_path",
    "load_zoo_file",
    "parse_python_literal",
    "parse_schedule",
    "find_entry",
    "resolve",
    "validate_zoo_file",
    "build_action_noise",
    "class_path",
]

DEFAULT_ENTRY = "default"
REPO_ROOT = Path(lit_sb3.__file__).resolve().parent.parent
ENV_VAR = "LIT_SB3_ZOO_CONFIGS"

#: Keys of the zoo format that are not algorithm constructor arguments (rl_zoo3's ExperimentManager),
#: plus ``normalize_kwargs`` (ours: VecNormalize arguments next to ``normalize: true``).
SPECIAL_KEYS: frozenset[str] = frozenset(
    {
        "n_timesteps",
        "n_envs",
        "normalize",
        "normalize_kwargs",
        "env_wrapper",
        "vec_env_wrapper",
        "frame_stack",
        "callback",
        "env_kwargs",
        "eval_env_kwargs",
        "monitor_kwargs",
        "noise_type",
        "noise_std",
    }
)
SCHEDULE_KEYS: frozenset[str] = frozenset({"learning_rate", "clip_range", "clip_range_vf"})
_KWARGS_KEYS = frozenset({"policy_kwargs", "replay_buffer_kwargs", "rollout_buffer_kwargs"})
_CLASS_KEYS = frozenset({"replay_buffer_class", "rollout_buffer_class"})
_POLICY_CLASS_KEYS = frozenset(
    {"activation_fn", "optimizer_class", "features_extractor_class", "net_arch_activation_fn"}
)
_VEC_NORMALIZE_KEYS = frozenset(
    {"training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys"}
)
_NOISE_TYPES = ("normal", "ornstein-uhlenbeck")
_V5_FALLBACK = ("-v4", "-v3")
_NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

# ---------------------------------------------------------------------------------------------------------
# whitelisted names for the restricted parser
# ---------------------------------------------------------------------------------------------------------
_ACTIVATIONS = (
    "ReLU", "Tanh", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Softplus", "Mish", "SELU", "CELU",
    "Hardtanh", "Hardswish", "ReLU6", "PReLU", "Softsign", "Tanhshrink", "Identity",
)  # fmt: skip
_OPTIMIZERS = ("Adam", "AdamW", "RMSprop", "SGD", "Adagrad", "Adamax", "NAdam", "RAdam")
_EXTRACTORS = ("NatureCNN", "FlattenExtractor", "CombinedExtractor")
_EXTRACTOR_MODULE = "lit_sb3.policies.torch_layers"
_HER_MODULE = "lit_sb3.algorithms.her.her_replay_buffer"


def _whitelist() -> dict[str, tuple[str, str]]:
    """Dotted name -> (module, attribute) of every object a config string may name."""
    names: dict[str, tuple[str, str]] = {}
    for act in _ACTIVATIONS:
        for prefix in ("nn.", "th.nn.", "torch.nn."):
            names[prefix + act] = ("torch.nn", act)
    for opt in _OPTIMIZERS:
        for prefix in ("optim.", "th.optim.", "torch.optim."):
            names[prefix + opt] = ("torch.optim", opt)
    for ext in _EXTRACTORS:
        for prefix in ("", "stable_baselines3.common.torch_layers.", _EXTRACTOR_MODULE + "."):
            names[prefix + ext] = (_EXTRACTOR_MODULE, ext)
    for prefix in ("", "stable_baselines3.", "stable_baselines3.her.", "lit_sb3."):
        names[prefix + "HerReplayBuffer"] = (_HER_MODULE, "HerReplayBuffer")
    return names


_WHITELIST = _whitelist()
_ALLOWED_SYNTAX = (
    "numbers, strings, True/False/None, lists, tuples, {...} dicts, dict(key=value, ...), unary minus, "
    "and the names nn.<Activation> (e.g. nn.ReLU, nn.Tanh; also th.nn./torch.nn.), th.optim.<Optimizer> "
    f"({', '.join(_OPTIMIZERS)}), {', '.join(_EXTRACTORS)}, HerReplayBuffer"
)

_VEC_WRAPPERS = ("VecFrameStack", "VecNormalize", "VecTransposeImage", "VecMonitor", "VecCheckNan", "VecExtractDictObs")
_CALLBACKS = (
    "CheckpointCallback", "EvalCallback", "StopTrainingOnMaxEpisodes", "StopTrainingOnRewardThreshold",
    "StopTrainingOnNoModelImprovement", "EveryNTimesteps", "ProgressBarCallback", "SummaryWriterCallback",
)  # fmt: skip


def class_path(obj: type) -> str:
    """``module.QualName`` of a class (the JSON form of a class in configs).

    Args:
        obj: a class.
    """
    return f"{obj.__module__}.{obj.__qualname__}"


# ---------------------------------------------------------------------------------------------------------
# locations and errors
# ---------------------------------------------------------------------------------------------------------
def _display(path: Path | str) -> str:
    """Path as shown in messages: relative to the repository root when inside it."""
    p = Path(path)
    try:
        return p.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def _prefix(file: str | None, env: str | None, key: str | None, line: int | None = None) -> str:
    parts = []
    if file:
        parts.append(f"{file}:{line}" if line else file)
    if env:
        parts.append(env)
    if key:
        parts.append(key)
    return ": ".join(parts) + (": " if parts else "")


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
# YAML loading with line numbers
# ---------------------------------------------------------------------------------------------------------
class _LineDict(dict):
    """A dict that remembers the line of the mapping and of each key (1-based)."""

    line: int | None = None
    key_lines: dict[Any, int]


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose mappings are :class:`_LineDict` (anchors, aliases and ``<<`` merges work)."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> Iterable[_LineDict]:
    data = _LineDict()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark,
                )  # fmt: skip
            seen[key] = line
        except TypeError:
            pass  # unhashable key: construct_mapping reports it
    value = loader.construct_mapping(node, deep=True)  # flattens `<<` merges into node.value
    data.update(value)
    for key_node, _ in node.value:
        try:
            data.key_lines[loader.construct_object(key_node, deep=True)] = key_node.start_mark.line + 1
        except TypeError:
            pass


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def zoo_config_dir() -> Path:
    """The built-in config folder: ``$LIT_SB3_ZOO_CONFIGS`` if set, else the installed ``zoo_configs/``
    (:func:`lit_sb3.zoo.data.data_path`)."""
    from lit_sb3.zoo.data import data_path

    env = os.environ.get(ENV_VAR)
    return Path(env) if env else data_path("zoo_configs")


def zoo_config_path(algo: str) -> Path:
    """Path of the built-in zoo file of ``algo``.

    Args:
        algo: algorithm name.
    """
    return zoo_config_dir() / f"{check_algo(algo)}.yml"


def load_zoo_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a zoo-format YAML file: ``{env id or 'default': {key: value}}``.

    Values are plain YAML (``yaml.safe_load`` semantics); the returned mappings also carry the line of
    each key (attribute ``key_lines``) for error messages.

    Args:
        path: the YAML file.
    """
    shown = _display(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"{shown}: cannot read config file: {exc.strerror or exc}") from exc
    try:
        data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - _LineLoader is a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise BenchError(f"{shown}{line}: invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise BenchError(f"{shown}: invalid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchError(f"{shown}:1: a zoo config must map env ids (or 'default') to hyperparameters")
    lines = getattr(data, "key_lines", {})
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data.items():
        line = lines.get(name)
        if not isinstance(name, str):
            raise BenchError(f"{shown}:{line}: entry names must be env ids or 'default', got {name!r}")
        if entry is None:
            entry = _LineDict()
            entry.line, entry.key_lines = line, {}
        if not isinstance(entry, dict):
            raise BenchError(f"{shown}:{line}: {name}: expected a mapping of hyperparameters, got {entry!r}")
        for key in entry:
            if not isinstance(key, str):
                raise BenchError(f"{shown}:{entry.key_lines.get(key, line)}: {name}: bad hyperparameter name {key!r}")
        out[name] = entry
    return out


# ---------------------------------------------------------------------------------------------------------
# restricted parser
# ---------------------------------------------------------------------------------------------------------
def _resolve_name(dotted: str) -> Any:
    """Object for a whitelisted dotted name; raises ``ValueError`` with the reason otherwise."""
    if dotted.rsplit(".", 1)[-1] == "RMSpropTFLike":
        raise ValueError(
            "RMSpropTFLike (SB3's TF-style RMSprop) is not available in lit_sb3; use th.optim.RMSprop "
            "(eps outside the square root, square average starting at 0: not identical) or leave optimizer_class out"
        )
    if dotted not in _WHITELIST:
        raise ValueError(f"name '{dotted}' is not allowed{did_you_mean(dotted, _WHITELIST)}")
    module_name, attr = _WHITELIST[dotted]
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"'{dotted}' is not available: {module_name}.{attr} cannot be imported ({exc})") from exc


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


# ---------------------------------------------------------------------------------------------------------
# resolved config
# ---------------------------------------------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    if isinstance(value, type):
        return class_path(value)
    if isinstance(value, (LinearSchedule, ConstantSchedule)):
        return schedule_to_dict(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if callable(value) and hasattr(value, "__module__") and hasattr(value, "__qualname__"):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


@dataclass(frozen=True)
class ResolvedConfig:
    """Hyperparameters of one (algo, env) pair, ready for a job.

    Args:
        algo: algorithm name.
        env_id: gymnasium env id.
        n_timesteps: env-step budget from the configs (None: must come from the command line).
        policy: policy name (``MlpPolicy``, ...).
        n_envs: number of parallel envs.
        normalize: wrap the VecEnv in VecNormalize.
        normalize_kwargs: VecNormalize arguments (``gamma`` follows the algorithm's, as in the zoo).
        env_wrapper: ``(class path, kwargs)`` of each env wrapper, innermost first (see ``make_env_wrapper``).
        vec_env_wrapper: ``(class path, kwargs)`` of each VecEnv wrapper (``lit_sb3.vec_env.*``).
        frame_stack: VecFrameStack size, or None.
        callback: ``(class path, kwargs)`` of each extra callback (``lit_sb3.callbacks.*``).
        env_kwargs: keyword arguments of ``gymnasium.make`` for the training env.
        eval_env_kwargs: keyword arguments for the evaluation env (None: same as ``env_kwargs``).
        monitor_kwargs: keyword arguments of the Monitor wrapper.
        algo_kwargs: constructor keyword arguments except ``policy`` (schedules, classes, noise spec resolved).
        provenance: key -> where its value came from.
        source_entry: the env entry used (e.g. ``Hopper-v4`` for Hopper-v5), None when none was found.
        notes: remarks on the resolution (fallbacks), for display.
    """

    algo: str
    env_id: str
    n_timesteps: int | None
    policy: str
    n_envs: int = 1
    normalize: bool = False
    normalize_kwargs: dict[str, Any] = field(default_factory=dict)
    env_wrapper: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    vec_env_wrapper: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    frame_stack: int | None = None
    callback: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_env_kwargs: dict[str, Any] | None = None
    monitor_kwargs: dict[str, Any] = field(default_factory=dict)
    algo_kwargs: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)
    source_entry: str | None = None
    notes: tuple[str, ...] = ()

    def to_jsonable(self, include_provenance: bool = False) -> dict[str, Any]:
        """JSON-ready dict (classes -> import paths, schedules -> dicts) for hashing and logging.

        Args:
            include_provenance: also include ``provenance``, ``source_entry`` and ``notes``.
        """
        data: dict[str, Any] = {
            "algo": self.algo,
            "env_id": self.env_id,
            "n_timesteps": self.n_timesteps,
            "policy": self.policy,
            "n_envs": self.n_envs,
            "normalize": self.normalize,
            "normalize_kwargs": _jsonable(self.normalize_kwargs),
            "env_wrapper": _jsonable(self.env_wrapper),
            "vec_env_wrapper": _jsonable(self.vec_env_wrapper),
            "frame_stack": self.frame_stack,
            "callback": _jsonable(self.callback),
            "env_kwargs": _jsonable(self.env_kwargs),
            "eval_env_kwargs": _jsonable(self.eval_env_kwargs),
            "monitor_kwargs": _jsonable(self.monitor_kwargs),
            "algo_kwargs": _jsonable(self.algo_kwargs),
        }
        if include_provenance:
            data["provenance"] = dict(self.provenance)
            data["source_entry"] = self.source_entry
            data["notes"] = list(self.notes)
        return data

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of :meth:`to_jsonable` (provenance excluded)."""
        text = json.dumps(self.to_jsonable(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def hyperparameters(self) -> dict[str, Any]:
        """Flat ``{key: value}`` of what the configs set (zoo key names), in display order."""
        out: dict[str, Any] = {"policy": self.policy, "n_timesteps": self.n_timesteps, "n_envs": self.n_envs}
        if self.normalize:
            out["normalize"] = True
            out["normalize_kwargs"] = self.normalize_kwargs
        for name in ("env_wrapper", "vec_env_wrapper", "callback", "env_kwargs", "monitor_kwargs"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.frame_stack is not None:
            out["frame_stack"] = self.frame_stack
        if self.eval_env_kwargs is not None:
            out["eval_env_kwargs"] = self.eval_env_kwargs
        out.update(self.algo_kwargs)
        return out


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


# ---------------------------------------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------------------------------------
def find_entry(entries: Mapping[str, Any], env_id: str) -> tuple[str | None, str | None]:
    """``(entry name, note)`` of the entry that applies to ``env_id`` (exact, else v4/v3 for a v5 env).

    Args:
        entries: a loaded zoo file.
        env_id: gymnasium env id.
    """
    if env_id in entries:
        return env_id, None
    if env_id.endswith("-v5"):
        for suffix in _V5_FALLBACK:
            older = env_id[: -len("-v5")] + suffix
            if older in entries:
                return older, f"{suffix[1:]} entries apply to v5 envs"
    return None, None


_Layer = tuple[Mapping[str, Any], _Source, str]


def _layers_of_file(path: Path, label: str, env_id: str) -> tuple[list[_Layer], str | None, str | None]:
    entries = load_zoo_file(path)
    shown = _display(path)
    layers = []
    if DEFAULT_ENTRY in entries:
        src = _Source(f"{label}:{DEFAULT_ENTRY}", shown, DEFAULT_ENTRY)
        layers.append((entries[DEFAULT_ENTRY], src, DEFAULT_ENTRY))
    name, note = find_entry(entries, env_id)
    if name is not None and name != DEFAULT_ENTRY:
        tag = f"{label}:{name}" + (f" ({note})" if note else "")
        layers.append((entries[name], _Source(tag, shown, name), name))
    return layers, name, note


def _parse_override(key: str, text: str) -> Any:
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise BenchError(f"--hyperparams {key}={text}: invalid value: {exc}") from exc
    if isinstance(value, str):
        try:
            tree = ast.parse(" ".join(value.split()), mode="eval")
        except SyntaxError:
            return value  # e.g. 'auto_0.1', 'cuda:0'
        if isinstance(tree.body, (ast.Name, ast.BinOp)):
            return value  # a bare word or a schedule: 'auto', 'MlpPolicy', 'lin_1e-3' (parses as lin_1e - 3)
        return parse_python_literal(value, file="--hyperparams", key=key)
    return value


def resolve(
    algo: str,
    env_id: str,
    *,
    config_files: Iterable[str | Path] = (),
    overrides: Mapping[str, str] | None = None,
    algo_class: type | None = None,
    config_dir: str | Path | None = None,
    builtin: bool = True,
) -> ResolvedConfig:
    """Merge built-in zoo config, ``--config`` files and ``--hyperparams`` for one (algo, env) pair.

    Args:
        algo: algorithm name.
        env_id: gymnasium env id (not checked against the registry here).
        config_files: extra zoo-format files, applied in order after the built-in one.
        overrides: ``key -> value text`` from ``--hyperparams`` (YAML scalars or restricted expressions).
        algo_class: class whose constructor defines the allowed keys (default: the registered class).
        config_dir: folder of the built-in files (default: :func:`zoo_config_dir`).
        builtin: read the built-in file at all (False: only ``config_files`` and ``overrides``).
    """
    algo = check_algo(algo)
    arg_names = algo_arg_names(algo, algo_class)
    defaults = algo_defaults(algo, algo_class)
    builtin_path = Path(config_dir) / f"{algo}.yml" if config_dir is not None else zoo_config_path(algo)

    layers: list[_Layer] = []
    notes: list[str] = []
    source_entry: str | None = None
    if builtin and builtin_path.exists():
        file_layers, name, note = _layers_of_file(builtin_path, _display(builtin_path), env_id)
        layers += file_layers
        if name is not None:
            source_entry = name
            if note:
                notes.append(f"{note}: using {name} from {_display(builtin_path)}")
    for cfg in config_files:
        path = Path(cfg)
        if not path.exists():
            raise BenchError(f"--config {cfg}: no such file")
        file_layers, name, note = _layers_of_file(path, f"--config {_display(path)}", env_id)
        layers += file_layers
        if name is not None:
            source_entry = source_entry or name
            if note:
                notes.append(f"{note}: using {name} from {_display(path)}")
    if overrides:
        parsed = {}
        for key, text in overrides.items():
            parsed[key] = _parse_override(key, text)
        layers.append((parsed, _Source("--hyperparams", "--hyperparams", None), "--hyperparams"))
    if source_entry is None:
        notes.append(f"no config entry for {algo} on {env_id}: SB3 defaults (n_timesteps must be given)")

    # merge, key by key
    merged: dict[str, tuple[Any, _Source]] = {}
    for values, src, _ in layers:
        key_lines = getattr(values, "key_lines", {})
        for key, value in values.items():
            merged[key] = (value, _Source(src.label, src.file, src.entry, key_lines.get(key)))

    allowed = sorted((arg_names | SPECIAL_KEYS) - {"action_noise"})
    for key, (_, src) in merged.items():
        if key == "action_noise":
            raise src.error(None, "set action noise with noise_type and noise_std, not action_noise")
        if key not in arg_names and key not in SPECIAL_KEYS:
            raise src.error(
                None,
                f"unknown hyperparameter '{key}' for {algo}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}",
            )
    return _build(algo, env_id, merged, arg_names, defaults, source_entry, notes)


def _build(algo: str, env_id: str, merged: dict[str, tuple[Any, _Source]], arg_names: set[str],
           defaults: dict[str, Any], source_entry: str | None, notes: list[str]) -> ResolvedConfig:  # fmt: skip
    provenance: dict[str, str] = {k: src.label for k, (_, src) in merged.items()}
    fields: dict[str, Any] = {}
    algo_kwargs: dict[str, Any] = {}

    def get(key: str) -> tuple[Any, _Source] | None:
        return merged.get(key)

    # policy
    if (item := get("policy")) is not None:
        value, src = item
        if not isinstance(value, str) or not value.strip().isidentifier():
            raise src.error(
                "policy", f"expected a policy name such as 'MlpPolicy', 'CnnPolicy', 'MultiInputPolicy', got {value!r}"
            )
        fields["policy"] = value.strip()
    else:
        fields["policy"] = "MlpPolicy"
        provenance["policy"] = "SB3 default"

    if (item := get("n_timesteps")) is not None:
        fields["n_timesteps"] = _as_int(item[0], item[1], "n_timesteps", minimum=1)
    else:
        fields["n_timesteps"] = None
    if (item := get("n_envs")) is not None:
        fields["n_envs"] = _as_int(item[0], item[1], "n_envs", minimum=1)
    if (item := get("frame_stack")) is not None and item[0] is not None:
        fields["frame_stack"] = _as_int(item[0], item[1], "frame_stack", minimum=1)

    normalize, normalize_kwargs = False, {}
    if (item := get("normalize")) is not None:
        value, src = item
        if isinstance(value, bool):
            normalize = value
        elif isinstance(value, (str, Mapping)):
            normalize, normalize_kwargs = True, _as_mapping(value, src, "normalize")
        else:
            raise src.error("normalize", f"expected true/false or VecNormalize kwargs, got {value!r}")
    if (item := get("normalize_kwargs")) is not None:
        normalize_kwargs.update(_as_mapping(item[0], item[1], "normalize_kwargs"))
    for key in normalize_kwargs:
        if key not in _VEC_NORMALIZE_KEYS:
            src = (get("normalize_kwargs") or get("normalize"))[1]  # type: ignore[index]
            hint = did_you_mean(key, _VEC_NORMALIZE_KEYS)
            allowed_norm = ", ".join(sorted(_VEC_NORMALIZE_KEYS))
            raise src.error("normalize", f"unknown VecNormalize argument '{key}'{hint}; allowed: {allowed_norm}")

    for key in ("env_kwargs", "monitor_kwargs"):
        if (item := get(key)) is not None:
            fields[key] = _as_mapping(item[0], item[1], key)
    if (item := get("eval_env_kwargs")) is not None and item[0] is not None:
        fields["eval_env_kwargs"] = _as_mapping(item[0], item[1], "eval_env_kwargs")

    if (item := get("env_wrapper")) is not None:
        value, src = item
        specs = []
        for name, kwargs in _wrapper_list(value, src, "env_wrapper"):
            try:
                zoo_wrappers.check_wrapper_kwargs(name, kwargs)
                specs.append((zoo_wrappers.canonical_wrapper(name), kwargs))
            except ValueError as exc:
                raise src.error("env_wrapper", str(exc)) from exc
        fields["env_wrapper"] = specs
    if (item := get("vec_env_wrapper")) is not None:
        fields["vec_env_wrapper"] = _named(
            _wrapper_list(item[0], item[1], "vec_env_wrapper"), item[1], "vec_env_wrapper", _VEC_WRAPPERS,
            "lit_sb3.vec_env", ("stable_baselines3.common.vec_env",),
        )  # fmt: skip
    if (item := get("callback")) is not None:
        items = _wrapper_list(item[0], item[1], "callback")
        fields["callback"] = _named(items, item[1], "callback", _CALLBACKS, "lit_sb3.callbacks",
                                    ("stable_baselines3.common.callbacks",))  # fmt: skip

    # action noise
    noise_type, noise_std = get("noise_type"), get("noise_std")
    if noise_type is not None and noise_type[0] is not None:
        if "action_noise" not in arg_names:
            raise noise_type[1].error("noise_type", f"{algo} takes no action noise")
        if noise_std is None:
            raise noise_type[1].error("noise_type", "noise_type needs noise_std")
        algo_kwargs["action_noise"] = _noise_spec(noise_type[0], noise_std[0], noise_std[1])
        provenance["action_noise"] = noise_type[1].label
    elif noise_std is not None and noise_std[0] is not None and "action_noise" not in arg_names:
        raise noise_std[1].error("noise_std", f"{algo} takes no action noise")

    # constructor arguments
    for key, (value, src) in merged.items():
        if key in SPECIAL_KEYS or key == "policy":
            continue
        if key in SCHEDULE_KEYS:
            algo_kwargs[key] = parse_schedule(value, file=src.file, env=src.entry, key=key, line=src.line)
        elif key == "train_freq":
            algo_kwargs[key] = _train_freq(value, src)
        elif key == "policy_kwargs":
            algo_kwargs[key] = _policy_kwargs(value, src, key)
        elif key in _KWARGS_KEYS:
            algo_kwargs[key] = _as_mapping(value, src, key)
        elif key in _CLASS_KEYS:
            algo_kwargs[key] = None if value is None else _class_value(value, src, key)
        else:
            value = _number(value)
            default = defaults.get(key)
            if (isinstance(default, int) and not isinstance(default, bool) and isinstance(value, float)
                    and value.is_integer()):  # fmt: skip
                value = int(value)  # e.g. buffer_size: !!float 1e6
            algo_kwargs[key] = value

    if normalize and "gamma" in algo_kwargs:
        normalize_kwargs["gamma"] = algo_kwargs["gamma"]  # the zoo uses the algorithm's discount
    return ResolvedConfig(
        algo=algo,
        env_id=env_id,
        normalize=normalize,
        normalize_kwargs=normalize_kwargs,
        algo_kwargs=algo_kwargs,
        provenance=provenance,
        source_entry=source_entry,
        notes=tuple(notes),
        **fields,
    )


def _train_freq(value: Any, src: _Source) -> int | tuple[int, str]:
    value = _number(value)
    if isinstance(value, (list, tuple)):
        if len(value) == 2 and str(value[1]) in ("step", "episode"):
            return (_as_int(value[0], src, "train_freq", minimum=1), str(value[1]))
        raise src.error("train_freq", f"expected an integer or [n, 'step'|'episode'], got {value!r}")
    return _as_int(value, src, "train_freq", minimum=1)


def validate_zoo_file(algo: str, path: str | Path | None = None, *, algo_class: type | None = None) -> list[str]:
    """Resolve every entry of a zoo file (raises :class:`BenchError` at the first bad one); return the env ids.

    Args:
        algo: algorithm name.
        path: the file (default: the built-in one).
        algo_class: class whose constructor defines the allowed keys.
    """
    path = Path(path) if path is not None else zoo_config_path(algo)
    entries = load_zoo_file(path)
    envs = [name for name in entries if name != DEFAULT_ENTRY]
    for env_id in envs:
        resolve(algo, env_id, config_files=[path], algo_class=algo_class, builtin=False)
    return envs
