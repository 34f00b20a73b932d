"""Names and params as the tracking store and the file system see them (no mlflow import).

- Names that become paths (experiment and study names, default report and artifact folders) stay inside their
  folder: a name given by the user is refused when it is empty or path-like (:func:`check_name`); folder names
  derived from names are single, safe path components (:func:`folder_name`).
- Params are plain, consistent text (:func:`readable`): ``train_freq = (1, 'step')``,
  ``replay_buffer_class = ReplayBuffer``, ``None``, ``False``; one namespace for hyperparameters
  (:func:`job_params`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tracking.host import sqlite_path

__all__ = [
    "PARAM_MAX",
    "check_name",
    "default_artifact_location",
    "default_experiment_name",
    "flatten_params",
    "folder_name",
    "hyperparameter_params",
    "job_params",
    "job_run_name",
    "normalize_uri",
    "parse_logged",
    "readable",
    "report_folder",
]

PARAM_MAX = 6000
"""MLflow's longest param value."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=@-]")
_NAME_MAX = 200


def normalize_uri(uri: str) -> str:
    """``sqlite:///rel.db`` -> ``sqlite:////abs/rel.db`` (workers may not share the cwd forever)."""
    path = sqlite_path(uri)
    if path is None or path.is_absolute():
        return uri
    query = uri.partition("?")[2]
    return "sqlite:///" + str(path.resolve()) + (f"?{query}" if query else "")


# ---------------------------------------------------------------------------------------------------------
# names that become paths
# ---------------------------------------------------------------------------------------------------------
def check_name(name: str, flag: str) -> str:
    """``name`` if it can name a folder or file inside its parent, else a one-line :class:`BenchError`.

    Refused: empty or blank names, ``.``/``..``, path separators (``/``, ``\\``), control characters, more than
    200 characters.

    Args:
        name: the user's name (``--experiment``, ``--study-name``).
        flag: the option, for the message.
    """
    if not name or not name.strip():
        raise BenchError(f"{flag} must not be empty")
    bad = None
    if name in (".", "..") or name.startswith("../") or name.startswith("..\\"):
        bad = "'..' would leave its folder"
    elif "/" in name or "\\" in name:
        bad = "path separators ('/', '\\') are not allowed"
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        bad = "control characters are not allowed"
    elif name != name.strip():
        bad = "leading or trailing spaces are not allowed"
    elif len(name) > _NAME_MAX:
        bad = f"at most {_NAME_MAX} characters"
    if bad:
        raise BenchError(f"{flag} {name!r} cannot name a folder: {bad}; use letters, digits and - _ . + = @")
    return name


def folder_name(name: str) -> str:
    """A single safe path component for ``name``: unsafe characters become ``_``, never ``.``/``..``/empty.

    Args:
        name: an experiment or study name.
    """
    safe = _UNSAFE.sub("_", name)[:_NAME_MAX]
    return "_" if not safe.strip(".") else safe


def report_folder(experiment: str) -> Path:
    """The default report folder of an experiment: ``reports/<folder_name(experiment)>``.

    Args:
        experiment: experiment name.
    """
    return Path("reports") / folder_name(experiment)


def default_artifact_location(uri: str, experiment: str) -> str | None:
    """``<db folder>/mlartifacts/<experiment>`` for sqlite stores, None (the server decides) otherwise.

    Args:
        uri: tracking URI.
        experiment: experiment name.
    """
    path = sqlite_path(normalize_uri(uri))
    if path is None:
        return None
    return str(path.parent / "mlartifacts" / folder_name(experiment))


def default_experiment_name(envs_spec: str) -> str:
    """``bench-<suite or env names>`` from the ``--envs`` text, e.g. ``bench-smoke``, ``bench-CartPole-v1``
    (characters unsafe in a folder name, such as the ``/`` of ``ALE/Pong-v5``, become ``_``).

    Args:
        envs_spec: the ``--envs`` argument.
    """
    parts = [p.strip().rsplit(":", 1)[-1] for p in envs_spec.split(",") if p.strip()]
    name = folder_name("bench-" + "+".join(parts))
    return name if len(name) <= 80 else name[:72] + "-etc"


# ---------------------------------------------------------------------------------------------------------
# params as text
# ---------------------------------------------------------------------------------------------------------
def _schedule_text(data: Mapping[str, Any]) -> str:
    kind = data.get("type")
    if kind == "ConstantSchedule":
        return readable(data.get("value"))
    if kind == "LinearSchedule" and data.get("end") == 0 and data.get("end_fraction") == 1:
        return f"lin_{readable(data.get('start'))}"  # the zoo's spelling
    fields = ", ".join(f"{k}={readable(v)}" for k, v in data.items() if k != "type")
    return f"{kind}({fields})"


def _inner(value: Any) -> str:
    return repr(value) if isinstance(value, str) else readable(value)


def readable(value: Any) -> str:
    """Plain text of a hyperparameter value, for people: Python spelling (``None``, ``False``, ``(1, 'step')``,
    ``[64, 64]``), classes by name (``ReLU``), the zoo's ``lin_<start>`` for linear schedules. Takes real
    objects and the job description's JSON form (``{"__tuple__": ...}``, ``{"__class__": ...}``, ...).

    Args:
        value: the value.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, type):
        return value.__qualname__
    if isinstance(value, tuple):
        return "(" + ", ".join(_inner(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_inner(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if set(value) == {"__tuple__"}:
            return readable(tuple(value["__tuple__"]))
        if set(value) == {"__class__"}:
            return str(value["__class__"]).rsplit(".", 1)[-1]
        if set(value) == {"__schedule__"}:
            return _schedule_text(value["__schedule__"])
        if set(value) == {"__float__"}:
            return str(value["__float__"])
        return "{" + ", ".join(f"{k!r}: {_inner(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return readable(value.item())
    from dataclasses import asdict, is_dataclass

    if is_dataclass(value) and not isinstance(value, type):  # schedules
        return _schedule_text({"type": type(value).__name__, **asdict(value)})
    return type(value).__qualname__ if callable(value) else str(value)


def parse_logged(value: Any) -> Any:
    """A value as a library logger hands it over: the text of a container (``"{'__tuple__': [1, 'step']}"``,
    ``"{'net_arch': [64]}"``) back to the container (a Python literal, read with :func:`ast.literal_eval`,
    which evaluates nothing), anything else unchanged.

    Args:
        value: a logged hyperparameter value.
    """
    if isinstance(value, str) and value[:1] in ("{", "[", "(") and len(value) <= 100_000:
        import ast

        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return value
    return value


def _is_encoded(value: Mapping[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)) in ("__tuple__", "__class__", "__schedule__", "__float__")


def flatten_params(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested dicts -> ``{"a.b": readable(value)}``, each cut to MLflow's length limit (an empty dict is ``{}``).

    Args:
        data: nested mapping.
        prefix: key prefix.
    """
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and not _is_encoded(value):
            out.update(flatten_params(value, prefix=f"{name}."))
        else:
            out[name] = readable(value)[:PARAM_MAX]
    return out


def hyperparameter_params(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """A model's logged hyperparameters (``hyperparameters_for_logging``, containers as text) as a run's params,
    in the one namespace of :func:`job_params`: what a lit_sb3 job run logs and what an imported SB3 run is given.

    Args:
        hyperparameters: name -> value as the model hands them to its loggers.
    """
    return flatten_params({k: parse_logged(v) for k, v in hyperparameters.items()})


JOB_SETTINGS = ("seed", "eval_freq", "eval_episodes", "eval_seed_offset", "device", "torch_threads")
"""Job fields logged as params next to the resolved config."""


def job_params(spec: Any) -> dict[str, str]:
    """A job run's params, one namespace: the resolved config's settings (``env_id``, ``n_timesteps``,
    ``n_envs``, ``normalize``, ...), its hyperparameters at the top level (``learning_rate``, ``train_freq``,
    ``policy_kwargs.net_arch``, ...), and the job's ``seed``, ``eval_freq``, ``eval_episodes``, ``device``,
    ``torch_threads``. The worker adds the algorithm's defaults for the keys not given here (see
    :class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`).

    Args:
        spec: the :class:`~lit_sb3.zoo.jobs.JobSpec`.
    """
    data = dict(spec.params)
    data.pop("algo_kwargs", None)
    hyper = spec.resolved_config().algo_kwargs  # real objects: classes by name, schedules as the zoo writes them
    settings = {key: getattr(spec, key) for key in JOB_SETTINGS}
    params = flatten_params({**data, **{k: v for k, v in hyper.items() if k not in settings}, **settings})
    requested = getattr(spec, "requested_timesteps", None)
    if requested is not None:
        params["n_timesteps_requested"] = str(requested)  # the budget asked, before rounding to whole rollouts
    return dict(sorted(params.items()))


def job_run_name(algo: str, env_id: str, seed: int) -> str:
    """A job run's display name, seed first so that seeds differ where the runs table cuts names:
    ``s0 sac Pendulum-v1``.

    Args:
        algo: algorithm.
        env_id: env id.
        seed: seed.
    """
    return f"s{seed} {algo} {env_id}"
