"""The one serialisation module: the class whitelist, the JSON codec, spaces, and the model zip archive.

Nothing here executes code from a file: JSON only (classes are named by whitelisted import paths, schedules and
action noise are data), tensors with ``torch.load(weights_only=True)``. Every size a file declares is checked
before anything is read or allocated, and every problem with a file is one :class:`BadFileError` line naming the
file and the problem.

JSON codec (:func:`encode_value` / :func:`decode_value`), used by model archives, job specs and configs
(:func:`to_display` is its plain view for people and MLflow):
  ``None``/bool/int/str/finite float  as themselves
  non-finite float                    ``{"__float__": "nan"}``
  tuple                               ``{"__tuple__": [...]}``
  class (whitelisted)                 ``{"__class__": "torch.nn.modules.activation.Tanh"}``
  schedule                            ``{"__schedule__": {...}}``
  action noise                        ``{"__noise__": {...}}``
  numpy array                         ``{"__ndarray__": [...], "dtype": "float32"}``

A model archive is a zip with:
  ``data.json``        algorithm name, constructor arguments (codec above), spaces and counters,
  ``model.pth``        the LightningModule's ``state_dict`` (tensors only, ``weights_only=True``),
  ``optimizers.pth``   optimizer state dicts (tensors and numbers, ``weights_only=True``),
  ``system_info.txt``  versions, for the human reader (and ``load(print_system_info=True)``).
Only these members are read, each after its declared size was checked against the zip directory.
"""

from __future__ import annotations

import difflib
import io
import json
import math
import os
import pathlib
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.utils.files import BadFileError, check_file, load_json, torch_load_error

__all__ = [
    "ARCHIVE_FORMAT",
    "CLASS_WHITELIST",
    "BadFileError",
    "check_declared_net_arch",
    "check_file",
    "class_to_path",
    "decode_value",
    "encode_value",
    "load_archive",
    "path_to_class",
    "read_archive_data",
    "read_archive_text",
    "register_class",
    "save_archive",
    "space_from_dict",
    "space_to_dict",
    "to_display",
]

#: version of the archive layout this code writes; archives with a higher one are refused
ARCHIVE_FORMAT = 1

# ------------------------------------------------------------------ limits on what a file may declare
#: members of a model archive and the most each may hold once uncompressed (bytes)
ARCHIVE_MEMBERS: dict[str, int] = {
    "data.json": 16 * 2**20,
    "system_info.txt": 2**20,
    "model.pth": 2 * 2**30,
    "optimizers.pth": 4 * 2**30,
}
#: a member bigger than this that compresses better than :data:`MAX_COMPRESSION_RATIO` is a zip bomb
_BOMB_MIN_BYTES = 2**20
MAX_COMPRESSION_RATIO = 100
#: the largest space a file may declare: elements of a Box / MultiBinary, actions (logits) of a Discrete /
#: MultiDiscrete
MAX_SPACE_ELEMENTS = 2**24
MAX_DISCRETE_N = 2**20
MAX_SPACE_DEPTH = 8
#: the widest layer and the most weights a ``net_arch`` read from a file may ask for
MAX_LAYER_WIDTH = 2**16
MAX_NET_WEIGHTS = 2**28


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _name(path: Any) -> str:
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)
    return getattr(path, "name", None) or f"<{type(path).__name__}>"


# ------------------------------------------------------------------ the class whitelist
#: ``module.QualName`` -> class: the only classes a saved file, job spec or config may name
CLASS_WHITELIST: dict[str, type] = {}
_SHORT_NAMES: dict[str, list[type]] = {}
# prefixes accepted before a short name in configs ("nn.ReLU", "th.optim.Adam", ...)
_SHORT_PREFIXES = {"", "nn", "th.nn", "torch.nn", "optim", "th.optim", "torch.optim"}
_BUILTINS_LOADED = False


def register_class(cls: type) -> type:
    """Allow ``cls`` in saved files, job specs and configs (usable as a decorator).

    Args:
        cls: a class (activation, optimizer, features extractor, policy, buffer, wrapper, ...).
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_class expects a class, got {cls!r}.")
    CLASS_WHITELIST[f"{cls.__module__}.{cls.__qualname__}"] = cls
    same = _SHORT_NAMES.setdefault(cls.__qualname__, [])
    if cls not in same:
        same.append(cls)
    return cls


def _load_builtins() -> None:
    """Register the library's own classes (policies, extractors, buffers, wrappers) on first use."""
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        import lit_sb3.policies.registry  # noqa: F401 - registers the policies and torch layers
        from lit_sb3.algorithms.her.her_replay_buffer import HerReplayBuffer
        from lit_sb3.buffers import DictReplayBuffer, NStepReplayBuffer, ReplayBuffer
        from lit_sb3.core.rmsprop_tf_like import RMSpropTFLike

        for cls in (ReplayBuffer, DictReplayBuffer, NStepReplayBuffer, HerReplayBuffer, RMSpropTFLike):
            register_class(cls)


def class_to_path(cls: type) -> str:
    """Import path of a whitelisted class (``module.QualName``), e.g. ``"torch.nn.modules.activation.Tanh"``.

    Args:
        cls: the class (it must be whitelisted, or it could not be loaded back).
    """
    _load_builtins()
    path = f"{cls.__module__}.{cls.__qualname__}"
    if CLASS_WHITELIST.get(path) is not cls:
        raise ValueError(
            f"Class {path} is not in the whitelist of classes that can be saved and loaded; "
            "register it with lit_sb3.utils.serialization.register_class(cls) first."
        )
    return path


def path_to_class(path: str) -> type:
    """The whitelisted class named by ``path``: a full path from :func:`class_to_path`, or a short form such as
    ``"Tanh"``, ``"nn.Tanh"``, ``"th.optim.Adam"`` when the name is unambiguous. Nothing is imported.

    Args:
        path: the class name or path.
    """
    if not isinstance(path, str):
        raise TypeError(f"A class path must be a string, got {path!r}.")
    _load_builtins()
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
        "Register your own classes with lit_sb3.utils.serialization.register_class(cls)."
    )


for _cls in (
    th.nn.ReLU, th.nn.Tanh, th.nn.ELU, th.nn.LeakyReLU, th.nn.GELU, th.nn.SiLU, th.nn.Sigmoid, th.nn.Softplus,
    th.nn.Identity, th.nn.Mish, th.nn.SELU, th.nn.CELU, th.nn.PReLU, th.nn.ReLU6, th.nn.Hardtanh, th.nn.Hardswish,
    th.nn.Softsign, th.nn.Tanhshrink, th.nn.LayerNorm, th.nn.BatchNorm1d, th.nn.Dropout,
    th.optim.Adam, th.optim.AdamW, th.optim.RMSprop, th.optim.SGD, th.optim.Adagrad, th.optim.Adamax,
    th.optim.NAdam, th.optim.RAdam,
):  # fmt: skip
    register_class(_cls)
del _cls


# ------------------------------------------------------------------ the JSON codec
def _array(value: np.ndarray) -> dict[str, Any]:
    return {"__ndarray__": np.asarray(value).tolist(), "dtype": str(np.asarray(value).dtype)}


def _from_array(data: Mapping[str, Any]) -> np.ndarray:
    values = data["__ndarray__"]
    if not isinstance(values, (list, int, float, bool)):
        raise ValueError(f"__ndarray__ must hold a list of numbers, got {type(values).__name__}")
    dtype = np.dtype(str(data["dtype"]))
    if dtype.kind not in "biuf":
        raise ValueError(f"array dtype must be numeric, got {dtype}")
    return np.asarray(values, dtype=dtype)


def encode_value(value: Any) -> Any:
    """JSON form of a value: classes as whitelisted paths, schedules/noise as data, tuples kept recognisable.

    Args:
        value: a constructor argument, a resolved config value, ...

    Raises:
        TypeError: for values that cannot be stored safely (e.g. an arbitrary lambda, a class not whitelisted).
    """
    from lit_sb3.core.noise import ActionNoise, noise_to_dict
    from lit_sb3.core.schedules import schedule_to_dict

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": str(value)}
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return encode_value(value.item())
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, type):
        try:
            return {"__class__": class_to_path(value)}
        except ValueError as exc:
            raise TypeError(str(exc)) from None
    if isinstance(value, th.device):
        return str(value)
    if isinstance(value, ActionNoise):
        return {"__noise__": noise_to_dict(value)}
    schedule = schedule_to_dict(value)
    if schedule is not None:
        return {"__schedule__": schedule}
    if hasattr(value, "value") and hasattr(type(value), "__members__"):  # Enum
        return value.value
    raise TypeError(
        f"Cannot store {value!r} ({type(value).__name__}) safely; use numbers, strings, lists, dicts, "
        "registered classes, lit_sb3 schedules or action noise."
    )


def decode_value(data: Any) -> Any:
    """Inverse of :func:`encode_value`; classes are resolved only through the whitelist.

    Args:
        data: JSON data made by :func:`encode_value`.

    Raises:
        ValueError: a class outside the whitelist, or a malformed tagged value.
    """
    from lit_sb3.core.noise import noise_from_dict
    from lit_sb3.core.schedules import schedule_from_dict

    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if isinstance(data, dict):
        if "__tuple__" in data:
            return tuple(decode_value(v) for v in data["__tuple__"])
        if "__class__" in data:
            return path_to_class(data["__class__"])
        if "__schedule__" in data:
            return schedule_from_dict(data["__schedule__"])
        if "__noise__" in data:
            return noise_from_dict(data["__noise__"])
        if "__ndarray__" in data:
            return _from_array(data)
        if "__float__" in data:
            return float(str(data["__float__"]))
        return {k: decode_value(v) for k, v in data.items()}
    return data


def to_display(data: Any) -> Any:
    """The plain-JSON view of :func:`encode_value`'s output, for people and MLflow params: tags collapsed
    (a class becomes its path, a tuple a list, a schedule its dict, a non-finite float its text).

    Args:
        data: JSON data made by :func:`encode_value`.
    """
    if isinstance(data, list):
        return [to_display(v) for v in data]
    if isinstance(data, dict):
        for tag in ("__class__", "__float__", "__schedule__", "__noise__"):
            if tag in data:
                return data[tag]
        if "__tuple__" in data:
            return [to_display(v) for v in data["__tuple__"]]
        if "__ndarray__" in data:
            return data["__ndarray__"]
        return {k: to_display(v) for k, v in data.items()}
    return data


# ------------------------------------------------------------------ spaces
def space_to_dict(space: spaces.Space) -> dict[str, Any]:
    """JSON description of a gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)."""
    if isinstance(space, spaces.Box):
        low, high = np.asarray(space.low), np.asarray(space.high)
        if low.size and (low == low.flat[0]).all() and (high == high.flat[0]).all():
            # uniform bounds (images: 0..255 over 4x84x84) as two numbers and a shape, not two full arrays
            return {"type": "Box", "low": _array(low.flat[0]), "high": _array(high.flat[0]),
                    "shape": list(space.shape), "dtype": str(space.dtype)}  # fmt: skip
        return {"type": "Box", "low": _array(low), "high": _array(high), "dtype": str(space.dtype)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": _array(space.nvec), "start": _array(space.start)}
    if isinstance(space, spaces.MultiBinary):
        n = space.n if isinstance(space.n, int) else list(space.n)
        return {"type": "MultiBinary", "n": n}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {key: space_to_dict(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_dict(sub) for sub in space.spaces]}
    raise NotImplementedError(
        f"Cannot serialise space {space}; supported: Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple"
    )


def _bounded_int(value: Any, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 < int(value) <= high:
        raise ValueError(f"{what} must be an integer in [1, {high}], got {value!r}")
    return int(value)


def _bounded_array(data: Any, what: str) -> np.ndarray:
    if not isinstance(data, Mapping) or "__ndarray__" not in data:
        raise ValueError(f"{what} must be an encoded array")
    values = data["__ndarray__"]
    count, stack = 0, [values]
    while stack:  # count the numbers before numpy allocates anything
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        count += 1
        if count > 2 * MAX_SPACE_ELEMENTS:
            raise ValueError(f"{what} has more than {MAX_SPACE_ELEMENTS} elements")
    return _from_array(data)


def space_from_dict(data: Any, _depth: int = 0) -> spaces.Space:
    """Inverse of :func:`space_to_dict`, with sizes bounded (:data:`MAX_SPACE_ELEMENTS`, :data:`MAX_DISCRETE_N`).

    Raises:
        ValueError: a malformed or oversized space (one line).
    """
    if _depth > MAX_SPACE_DEPTH:
        raise ValueError(f"spaces nested deeper than {MAX_SPACE_DEPTH}")
    if not isinstance(data, Mapping):
        raise ValueError(f"a space must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "Box":
        low, high = _bounded_array(data.get("low"), "Box low"), _bounded_array(data.get("high"), "Box high")
        if "shape" in data:  # uniform bounds: two numbers and a shape, bounded before numpy allocates it
            shape = data["shape"]
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape
            ):
                raise ValueError(f"Box shape must be a list of positive integers, got {shape!r}")
            _bounded_int(int(np.prod(shape, dtype=np.int64)) if shape else 1, "Box elements", MAX_SPACE_ELEMENTS)
            if low.ndim or high.ndim:
                raise ValueError("a Box with a shape has scalar low/high")
            return spaces.Box(
                low=low.item(), high=high.item(), shape=tuple(shape), dtype=np.dtype(str(data.get("dtype")))
            )
        if low.shape != high.shape:
            raise ValueError(f"Box low {low.shape} and high {high.shape} differ in shape")
        return spaces.Box(low=low, high=high, dtype=np.dtype(str(data.get("dtype"))))
    if kind == "Discrete":
        n = _bounded_int(data.get("n"), "Discrete n", MAX_DISCRETE_N)
        start = data.get("start", 0)
        if isinstance(start, bool) or not isinstance(start, int) or abs(start) > 2**62:
            raise ValueError(f"Discrete start must be an integer, got {start!r}")
        return spaces.Discrete(n, start=start)
    if kind == "MultiDiscrete":
        nvec = _bounded_array(data.get("nvec"), "MultiDiscrete nvec")
        if nvec.size == 0 or nvec.min() < 1 or nvec.sum() > MAX_DISCRETE_N:
            raise ValueError(f"MultiDiscrete nvec must be >= 1 with a sum <= {MAX_DISCRETE_N} (one logit each)")
        start = _bounded_array(data.get("start", _array(np.zeros_like(nvec))), "MultiDiscrete start")
        return spaces.MultiDiscrete(nvec, start=start)
    if kind == "MultiBinary":
        n = data.get("n")
        dims = n if isinstance(n, list) else [n]
        sizes = [_bounded_int(d, "MultiBinary n", MAX_SPACE_ELEMENTS) for d in dims]
        if math.prod(sizes) > MAX_SPACE_ELEMENTS:
            raise ValueError(f"MultiBinary {n} has more than {MAX_SPACE_ELEMENTS} elements")
        return spaces.MultiBinary(sizes if isinstance(n, list) else sizes[0])
    if kind == "Dict":
        subs = data.get("spaces")
        if not isinstance(subs, Mapping) or len(subs) > 1024:
            raise ValueError("Dict spaces must be a JSON object of at most 1024 spaces")
        return spaces.Dict({str(key): space_from_dict(sub, _depth + 1) for key, sub in subs.items()})
    if kind == "Tuple":
        subs = data.get("spaces")
        if not isinstance(subs, list) or len(subs) > 1024:
            raise ValueError("Tuple spaces must be a list of at most 1024 spaces")
        return spaces.Tuple([space_from_dict(sub, _depth + 1) for sub in subs])
    raise ValueError(f"unknown space type {kind!r}; known: Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple")


def check_declared_net_arch(policy_kwargs: Any) -> None:
    """Refuse a ``net_arch`` read from a file whose layers would not fit in memory (``[200000, 200000]``).

    Args:
        policy_kwargs: decoded policy keyword arguments (a dict, or anything else which is left to the policy).

    Raises:
        ValueError: a layer wider than :data:`MAX_LAYER_WIDTH` or more than :data:`MAX_NET_WEIGHTS` weights.
    """
    if not isinstance(policy_kwargs, Mapping) or "net_arch" not in policy_kwargs:
        return
    arch = policy_kwargs["net_arch"]
    branches = list(arch.values()) if isinstance(arch, Mapping) else [arch]
    total = 0
    for branch in branches:
        if not isinstance(branch, (list, tuple)):
            continue
        widths = [_bounded_int(w, "net_arch layer width", MAX_LAYER_WIDTH) for w in branch]
        total += sum(a * b for a, b in zip(widths, widths[1:], strict=False))
    if total > MAX_NET_WEIGHTS:
        raise ValueError(f"net_arch {arch} asks for {total:,} weights (limit {MAX_NET_WEIGHTS:,})")


# ------------------------------------------------------------------ the model archive
def save_archive(
    path: str | pathlib.Path | io.BufferedIOBase,
    data: dict[str, Any],
    tensors: dict[str, Any],
    system_info: str = "",
) -> None:
    """Write a model archive (``.zip`` is appended to a path without a suffix).

    Args:
        path: file path or writable binary buffer.
        data: JSON-serialisable dict (already encoded).
        tensors: name -> object of tensors/numbers saved with ``torch.save`` (one ``<name>.pth`` member each).
        system_info: text stored as ``system_info.txt``.
    """
    unknown = [name for name in tensors if f"{name}.pth" not in ARCHIVE_MEMBERS]
    if unknown:
        raise ValueError(f"unknown archive members {unknown}; allowed: {', '.join(ARCHIVE_MEMBERS)}")
    if isinstance(path, (str, pathlib.Path)):
        path = pathlib.Path(path)
        if path.suffix == "":
            path = path.with_suffix(".zip")
        path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, mode="w") as archive:
        archive.writestr("data.json", json.dumps({"format": ARCHIVE_FORMAT, **data}, indent=2))
        for name, obj in tensors.items():
            buffer = io.BytesIO()
            th.save(obj, buffer)
            archive.writestr(f"{name}.pth", buffer.getvalue())
        archive.writestr("system_info.txt", system_info)


def _resolve(path: Any) -> Any:
    if isinstance(path, (str, pathlib.Path)):
        path = pathlib.Path(path)
        if not path.exists() and path.with_suffix(".zip").exists():
            path = path.with_suffix(".zip")
        if not path.exists():
            raise FileNotFoundError(f"No model archive at {os.fspath(path)}")
        check_file(path, sum(ARCHIVE_MEMBERS.values()) + 2**30, "model archive")  # a regular file, bounded
    return path


def _check_directory(archive: zipfile.ZipFile, where: str) -> dict[str, zipfile.ZipInfo]:
    """The archive's known members, after checking every entry of the zip directory (nothing is read)."""
    members: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        name = info.filename
        if name.startswith(("/", "\\")) or "\\" in name or ".." in name.split("/") or ":" in name or "\x00" in name:
            raise BadFileError(f"{where}: unsafe member name {name!r} (absolute or leaving the archive)")
        limit = ARCHIVE_MEMBERS.get(name)
        if limit is None:
            continue  # never read
        if name in members:
            raise BadFileError(f"{where}: member {name!r} appears twice")
        if info.file_size > limit:
            raise BadFileError(
                f"{where}: member {name} declares {info.file_size:,} bytes, more than the {limit:,} allowed"
            )
        if info.file_size > _BOMB_MIN_BYTES and info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
            raise BadFileError(
                f"{where}: member {name} expands {info.compress_size:,} -> {info.file_size:,} bytes (a zip bomb?)"
            )
        members[name] = info
    return members


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    with archive.open(info) as f:
        data = f.read(info.file_size + 1)
    if len(data) > info.file_size:
        raise BadFileError(f"{where}: member {info.filename} holds more than its declared {info.file_size:,} bytes")
    return data


def read_archive_text(path: str | pathlib.Path | io.BufferedIOBase, member: str = "system_info.txt") -> str:
    """One text member of an archive (``system_info.txt`` by default), size-checked; ``""`` if absent.

    Args:
        path: archive path or readable buffer.
        member: the member name (one of :data:`ARCHIVE_MEMBERS`).
    """
    path = _resolve(path)
    where = _name(path)
    try:
        with zipfile.ZipFile(path) as archive:
            info = _check_directory(archive, where).get(member)
            return "" if info is None else _read_member(archive, info, where).decode("utf-8", errors="replace")
    except zipfile.BadZipFile as exc:
        raise BadFileError(f"{where}: not a valid zip model archive ({_one_line(exc)})") from None


def read_archive_data(path: str | pathlib.Path | io.BufferedIOBase) -> dict[str, Any]:
    """The checked ``data.json`` of a model archive (values still encoded), without reading its tensors.

    Args:
        path: archive path or readable buffer.

    Raises:
        BadFileError: a malformed, foreign, newer, oversized or unsafe archive (one line).
    """
    path = _resolve(path)
    where = _name(path)
    text = read_archive_text(path, "data.json")
    if not text:
        raise BadFileError(f"{where}: not a lit_sb3 model archive (no data.json)")
    data = load_json(text, where, "data.json")
    check_archive_data(data, where)
    return data


def _load_member_tensors(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, device: th.device | str) -> Any:
    """``torch.load(weights_only=True)`` of one member, streamed: the member is decompressed in chunks into a
    private temporary file (at most its declared size) and memory-mapped, so the compressed data, a decompressed
    copy and the tensors are never all in memory at once (the tensors share the file's pages)."""
    name = info.filename
    with tempfile.TemporaryDirectory(prefix="lit_sb3-archive-") as folder:
        local = os.path.join(folder, "member.pth")
        written = 0
        with archive.open(info) as src, open(local, "wb") as dst:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > info.file_size:
                    raise BadFileError(f"{where}: member {name} holds more than its declared {info.file_size:,} bytes")
                dst.write(chunk)
        try:
            return th.load(local, map_location=device, weights_only=True, mmap=True)
        except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
            raise BadFileError(
                f"{where}: {name} cannot be loaded safely (weights_only=True): {torch_load_error(exc)}"
            ) from None


def check_state_shapes(state: Mapping[str, th.Tensor], expected: Mapping[str, th.Tensor], where: str,
                       network: str, member: str = "model.pth") -> None:  # fmt: skip
    """Refuse an archive's or checkpoint's tensor whose shape differs from the module's (one
    :class:`BadFileError` naming the file and the key), before ``load_state_dict`` sees it.

    Args:
        state: the archive's ``model.pth`` state dict (a Lightning checkpoint's ``state_dict``).
        expected: the module's ``state_dict()``.
        where: the file, for the message.
        network: whose network, for the message (e.g. ``"the network's"``).
        member: where in the file the state dict is, for the message.
    """
    for key, value in state.items():
        if key in expected and expected[key].shape != value.shape:
            raise BadFileError(
                f"{where}: {member} {key} has shape {tuple(value.shape)}, {network} {tuple(expected[key].shape)}"
            )


def declared_member_size(path: str | pathlib.Path | io.BufferedIOBase, member: str) -> int:
    """The size a model archive's member declares in the zip directory (0: no such member), read without reading the
    member (a buffer's position is restored).

    Args:
        path: archive path or readable buffer.
        member: the member's name (``model.pth``).
    """
    path = _resolve(path)
    position = path.tell() if hasattr(path, "tell") else None
    try:
        with zipfile.ZipFile(path) as archive:
            info = _check_directory(archive, _name(path)).get(member)
            return 0 if info is None else int(info.file_size)
    except zipfile.BadZipFile as exc:
        raise BadFileError(f"{_name(path)}: not a valid zip model archive ({_one_line(exc)})") from None
    finally:
        if position is not None:
            path.seek(position)


def load_archive(
    path: str | pathlib.Path | io.BufferedIOBase,
    device: th.device | str = "cpu",
    limits: Mapping[str, int] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a model archive written by :func:`save_archive`.

    Only ``data.json``, ``model.pth`` and ``optimizers.pth`` are read, each after its declared size was checked
    (against :data:`ARCHIVE_MEMBERS`, the compression ratio and ``limits``); tensors are streamed (see
    :func:`_load_member_tensors`) and loaded with ``weights_only=True``.

    Args:
        path: archive path or readable buffer.
        device: ``map_location`` of the tensors.
        limits: member name -> the most bytes it may declare, from what the model it describes can need
            (``lit_sb3.algorithms.archive.archive_limits``); None: only the fixed limits.

    Returns:
        ``(data, tensors)``: the decoded-JSON ``data.json`` (values still encoded) and ``{"model": ...,
        "optimizers": ...}``.

    Raises:
        BadFileError: a malformed, foreign, newer, oversized or unsafe archive (one line).
        FileNotFoundError: no file at ``path``.
    """
    path = _resolve(path)
    where = _name(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = _check_directory(archive, where)
            if "data.json" not in members:
                names = archive.namelist()[:5]
                raise BadFileError(f"{where}: not a lit_sb3 model archive (no data.json; members: {names})")
            data = load_json(_read_member(archive, members["data.json"], where), where, "data.json")
            check_archive_data(data, where)
            for member, limit in (limits or {}).items():  # every member, before any tensor is read
                info = members.get(member)
                if info is not None and info.file_size > limit:
                    raise BadFileError(
                        f"{where}: member {member} declares {info.file_size:,} bytes, more than the {limit:,} "
                        f"that a {data['algo']} with these spaces and networks can need"
                    )
            tensors = {}
            for name in ("model", "optimizers"):
                info = members.get(f"{name}.pth")
                if info is not None:
                    tensors[name] = _load_member_tensors(archive, info, where, device)
    except zipfile.BadZipFile as exc:
        raise BadFileError(f"{where}: not a valid zip model archive ({_one_line(exc)})") from None
    if "model" not in tensors:
        raise BadFileError(f"{where}: no model.pth member (the network parameters)")
    return data, tensors


def check_archive_data(data: Any, where: str) -> None:
    """Check ``data.json``'s layout: a JSON object of a known format with the keys a model needs.

    Args:
        data: the decoded ``data.json``.
        where: the file name, for messages.
    """
    if not isinstance(data, dict):
        raise BadFileError(f"{where}: data.json must be a JSON object, got {type(data).__name__}")
    version = data.get("format")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise BadFileError(f"{where}: data.json has no valid 'format' version (got {version!r})")
    if version > ARCHIVE_FORMAT:
        raise BadFileError(
            f"{where}: archive format {version} was written by a newer lit_sb3; this version reads formats "
            f"up to {ARCHIVE_FORMAT} (upgrade lit_sb3)"
        )
    for key, kind in (("algo", str), ("params", dict), ("observation_space", dict), ("action_space", dict)):
        if key not in data:
            raise BadFileError(f"{where}: data.json has no {key!r}")
        if not isinstance(data[key], kind):
            raise BadFileError(f"{where}: data.json {key!r} must be a {kind.__name__}, got {type(data[key]).__name__}")
