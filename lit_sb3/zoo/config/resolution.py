"""Config resolution: merge the built-in file, ``--config`` files and ``--hyperparams`` for one (algo, env).

:func:`resolve` merges, key by key (later wins):

1. the built-in file's ``default`` entry, then its env entry (for a ``-v5`` env without an entry, the ``-v4``
   then ``-v3`` entry: the zoo's v4 MuJoCo settings apply to v5 envs; for an Atari env without an entry, the
   ``atari`` entry, as rl_zoo3 does);
2. each ``--config FILE``: its ``default`` entry, then its entry for the env;
3. ``--hyperparams key=value`` overrides.

With no env entry anywhere the SB3 constructor defaults apply (``policy: MlpPolicy``; ``n_timesteps`` must then
come from the command line). Every value keeps its provenance.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lit_sb3.zoo import wrappers as zoo_wrappers
from lit_sb3.zoo.config.checks import check_algo_kwargs, check_kwargs
from lit_sb3.zoo.config.literals import parse_python_literal, parse_schedule
from lit_sb3.zoo.config.loading import DEFAULT_ENTRY, _display, load_zoo_file, parse_yaml, zoo_config_path
from lit_sb3.zoo.config.resolved import ResolvedConfig
from lit_sb3.zoo.config.values import (
    _as_int,
    _as_mapping,
    _class_value,
    _named,
    _noise_spec,
    _number,
    _policy_kwargs,
    _Source,
    _wrapper_list,
    build_action_noise,
)
from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.registry import algo_arg_names, algo_defaults, check_algo, get_algo_class

__all__ = ["SPECIAL_KEYS", "SCHEDULE_KEYS", "build_action_noise", "find_entry", "resolve", "validate_zoo_file"]

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
_VEC_NORMALIZE_KEYS = frozenset(
    {"training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys"}
)
_V5_FALLBACK = ("-v4", "-v3")
_ATARI_ENTRY = "atari"  # the zoo's entry for every ALE env without its own
#: Constructor arguments that every bench job sets itself (runner: seed, device and verbose of the job).
_SET_BY_BENCH = ("seed", "device", "verbose")
_SET_BY_BENCH_HOW = "seed from --seeds/--seed-list, device from --device, verbose 0"
_VEC_WRAPPERS = ("VecFrameStack", "VecNormalize", "VecTransposeImage", "VecMonitor", "VecCheckNan", "VecExtractDictObs")
_CALLBACKS = (
    "CheckpointCallback", "EvalCallback", "StopTrainingOnMaxEpisodes", "StopTrainingOnRewardThreshold",
    "StopTrainingOnNoModelImprovement", "EveryNTimesteps", "ProgressBarCallback", "SummaryWriterCallback",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------------------------------------
def find_entry(entries: Mapping[str, Any], env_id: str) -> tuple[str | None, str | None]:
    """``(entry name, note)`` of the entry that applies to ``env_id`` (exact, else v4/v3 for a v5 env, else
    ``atari`` for an ALE env).

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
    if _ATARI_ENTRY in entries:
        from lit_sb3.envs.atari_wrappers import is_atari_env_id

        if is_atari_env_id(env_id):
            return _ATARI_ENTRY, None
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
    value = parse_yaml(text, f"--hyperparams {key}={text}", with_line=False) if text.strip() else None
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
        defaults_from = [src.label for _, src, name in layers if name == DEFAULT_ENTRY]
        if defaults_from:  # e.g. the zoo's `default: {n_timesteps: 1e6, policy: MlpPolicy}`
            notes.append(f"no config entry for {algo} on {env_id}: {', '.join(defaults_from)} and SB3 defaults")
        else:
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
    cls = algo_class if algo_class is not None else get_algo_class(algo)
    return _build(algo, env_id, merged, arg_names, defaults, source_entry, notes, cls)


def _build(algo: str, env_id: str, merged: dict[str, tuple[Any, _Source]], arg_names: set[str],
           defaults: dict[str, Any], source_entry: str | None, notes: list[str],
           algo_class: type) -> ResolvedConfig:  # fmt: skip
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

    def fail(key: str, message: str) -> BenchError:
        top = key.split(".", 1)[0]
        item = get("noise_type") if top == "action_noise" else get(top)
        if top == "normalize":
            item = get("normalize_kwargs") or get("normalize")
        return (item[1] if item is not None else _Source("SB3 default", None, None)).error(key, message)

    algo_kwargs = check_algo_kwargs(algo_class, fields["policy"], algo_kwargs, fail)
    replaced = [k for k in _SET_BY_BENCH if k in algo_kwargs]
    if replaced:
        notes.append(f"{', '.join(replaced)} from the configs: bench run/tune jobs set their own ({_SET_BY_BENCH_HOW})")
    if normalize_kwargs:
        from lit_sb3.vec_env import VecNormalize

        normalize_kwargs = check_kwargs(normalize_kwargs, VecNormalize, "VecNormalize", fail, "normalize")
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
