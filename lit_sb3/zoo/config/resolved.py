"""The resolved config of one (algo, env) pair and its JSON encoding.

The encoding helpers live here, together: the class whitelist (every class a config string may name),
:func:`class_path` (a class as ``module.QualName``), ``_jsonable`` and :meth:`ResolvedConfig.to_jsonable`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ResolvedConfig", "class_path"]

_ACTIVATIONS = (
    "ReLU", "Tanh", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Softplus", "Mish", "SELU", "CELU",
    "Hardtanh", "Hardswish", "ReLU6", "PReLU", "Softsign", "Tanhshrink", "Identity",
)  # fmt: skip
_OPTIMIZERS = ("Adam", "AdamW", "RMSprop", "SGD", "Adagrad", "Adamax", "NAdam", "RAdam")
_EXTRACTORS = ("NatureCNN", "FlattenExtractor", "CombinedExtractor")
_EXTRACTOR_MODULE = "lit_sb3.policies.torch_layers"
_HER_MODULE = "lit_sb3.algorithms.her.her_replay_buffer"
_RMSPROP_TF_MODULE = "lit_sb3.core.rmsprop_tf_like"


def _whitelist() -> dict[str, tuple[str, str]]:
    """Zoo spelling (``nn.ReLU``, ``stable_baselines3.her.HerReplayBuffer``, ...) -> (module, attribute) of the
    classes a config string may name; each is resolved through the library's one class whitelist
    (:func:`lit_sb3.utils.serialization.path_to_class`), which is what decides what may be loaded."""
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
    for prefix in ("", "stable_baselines3.common.sb2_compat.rmsprop_tf_like.", _RMSPROP_TF_MODULE + "."):
        names[prefix + "RMSpropTFLike"] = (_RMSPROP_TF_MODULE, "RMSpropTFLike")
    return names


_WHITELIST = _whitelist()


def class_path(obj: type) -> str:
    """``module.QualName`` of a class (the JSON form of a class in configs).

    Args:
        obj: a class.
    """
    return f"{obj.__module__}.{obj.__qualname__}"


def _jsonable(value: Any) -> Any:
    """Display form of a config value: the plain view of the library's one codec
    (:func:`lit_sb3.utils.serialization.to_display` of :func:`~lit_sb3.utils.serialization.encode_value`)."""
    from lit_sb3.utils.serialization import encode_value, to_display

    try:
        return to_display(encode_value(value))
    except TypeError:  # not storable (e.g. a callable given in Python): shown, never decoded
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
