"""Safe (no pickle, no eval) serialisation helpers: spaces, JSON values and the model zip archive.

A model archive is a zip with:
  ``data.json``        constructor arguments and algorithm state as JSON (classes as whitelisted import paths,
                       schedules and action noise as data),
  ``model.pth``        the LightningModule's ``state_dict`` (tensors only, loaded with ``weights_only=True``),
  ``optimizers.pth``   optimizer state dicts (tensors and numbers, ``weights_only=True``),
  ``system_info.txt``  versions, for the human reader.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import zipfile
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

__all__ = [
    "jsonable",
    "load_archive",
    "save_archive",
    "space_from_dict",
    "space_to_dict",
]

ARCHIVE_FORMAT = 1


def _array(value: np.ndarray) -> dict[str, Any]:
    return {"__ndarray__": np.asarray(value).tolist(), "dtype": str(np.asarray(value).dtype)}


def _from_array(data: dict[str, Any]) -> np.ndarray:
    return np.asarray(data["__ndarray__"], dtype=np.dtype(data["dtype"]))


def space_to_dict(space: spaces.Space) -> dict[str, Any]:
    """JSON description of a gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)."""
    if isinstance(space, spaces.Box):
        return {"type": "Box", "low": _array(space.low), "high": _array(space.high), "dtype": str(space.dtype)}
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


def space_from_dict(data: dict[str, Any]) -> spaces.Space:
    """Inverse of :func:`space_to_dict`."""
    kind = data.get("type")
    if kind == "Box":
        return spaces.Box(low=_from_array(data["low"]), high=_from_array(data["high"]), dtype=np.dtype(data["dtype"]))
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(_from_array(data["nvec"]), start=_from_array(data["start"]))
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return spaces.Dict({key: space_from_dict(sub) for key, sub in data["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_dict(sub) for sub in data["spaces"]])
    raise ValueError(f"Unknown space type {kind!r} in saved data")


def jsonable(value: Any) -> Any:
    """Turn a constructor argument into JSON: classes become whitelisted paths, schedules/noise become data.

    Raises:
        TypeError: for values that cannot be stored safely (e.g. an arbitrary lambda).
    """
    from lit_sb3.core.noise import ActionNoise, noise_to_dict
    from lit_sb3.core.schedules import schedule_to_dict
    from lit_sb3.policies.registry import class_to_path

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, (list, tuple)):
        return {"__tuple__": [jsonable(v) for v in value]} if isinstance(value, tuple) else [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, type):
        return {"__class__": class_to_path(value)}
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


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`jsonable` (resolves classes only through the whitelist)."""
    from lit_sb3.core.noise import noise_from_dict
    from lit_sb3.core.schedules import schedule_from_dict
    from lit_sb3.policies.registry import path_to_class

    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    if isinstance(value, dict):
        if "__tuple__" in value:
            return tuple(from_jsonable(v) for v in value["__tuple__"])
        if "__class__" in value:
            return path_to_class(value["__class__"])
        if "__schedule__" in value:
            return schedule_from_dict(value["__schedule__"])
        if "__noise__" in value:
            return noise_from_dict(value["__noise__"])
        if "__ndarray__" in value:
            return _from_array(value)
        return {k: from_jsonable(v) for k, v in value.items()}
    return value


def save_archive(
    path: str | pathlib.Path | io.BufferedIOBase,
    data: dict[str, Any],
    tensors: dict[str, Any],
    system_info: str = "",
) -> None:
    """Write a model archive (``.zip`` is appended to a path without a suffix).

    Args:
        path: file path or writable binary buffer.
        data: JSON-serialisable dict.
        tensors: name -> object of tensors/numbers saved with ``torch.save`` (one ``<name>.pth`` member each).
        system_info: text stored as ``system_info.txt``.
    """
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


def load_archive(
    path: str | pathlib.Path | io.BufferedIOBase, device: th.device | str = "cpu"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a model archive written by :func:`save_archive`; tensors are loaded with ``weights_only=True``."""
    if isinstance(path, (str, pathlib.Path)):
        path = pathlib.Path(path)
        if not path.exists() and path.with_suffix(".zip").exists():
            path = path.with_suffix(".zip")
        if not path.exists():
            raise FileNotFoundError(f"No model archive at {os.fspath(path)}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if "data.json" not in names:
                raise ValueError(f"{path} is not a lit_sb3 model archive (no data.json; members: {names[:5]})")
            data = json.loads(archive.read("data.json"))
            tensors = {}
            for name in names:
                if name.endswith(".pth"):
                    with archive.open(name) as f:
                        tensors[name[: -len(".pth")]] = th.load(
                            io.BytesIO(f.read()), map_location=device, weights_only=True
                        )
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a valid zip model archive: {exc}") from exc
    return data, tensors
