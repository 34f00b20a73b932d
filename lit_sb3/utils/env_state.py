"""Capture and restore the state of gymnasium envs as plain data (no pickle).

Used by Lightning checkpoints so that a resumed run continues each sub-env exactly where it was. The snapshot
walks the wrapper chain of every sub-env of a ``DummyVecEnv`` and records numeric attributes (numbers, numpy
arrays, lists of numbers), numpy random generator states and, for MuJoCo envs, ``qpos``/``qvel``/``act``/``time``.
Envs whose state lives elsewhere (e.g. in a subprocess or a C library without accessors) are restored only as far
as those attributes go; ``capture`` reports ``complete=False`` for ``SubprocVecEnv``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["capture_vec_env_state", "restore_vec_env_state"]

_SKIP = {"metadata", "spec", "render_mode", "observation_space", "action_space", "_np_random_seed"}


def _plain(value: Any) -> Any:
    """Return a checkpoint-safe copy (numbers, lists, numpy -> lists) or raise TypeError."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return {"__nd__": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, np.number)) for v in value):
        return {
            "__seq__": [v.item() if isinstance(v, np.generic) else v for v in value],
            "tuple": isinstance(value, tuple),
        }
    raise TypeError


_SCALARS = (type(None), bool, int, float, str)
_MAX_TEXT = 4096


def _restore_plain(value: Any, live: Any, name: str) -> Any:
    """The value to restore for attribute ``name`` whose live capture is ``live`` (what :func:`_plain` writes for
    it now): the same kind (an attribute that is None now takes any kind; sizes change as the env runs, e.g.
    ``VecNormalize.old_reward`` is empty after a reset), a plain numeric dtype (no sub-array dtype such as
    ``(16000,16000)f8``, which numpy would allocate for every element) and a shape that the data has, all checked
    before numpy allocates anything.

    Raises:
        ValueError: anything else (one line naming the attribute).
    """
    live_kind, kind = _kind(live), _kind(value)
    if kind is None:
        raise ValueError(f"{name}: expected a number, a short text, an array or a list of numbers")
    if value is not None and live is not None and kind != live_kind:
        article = {"array": "an array", "list": "a list", "scalar": "a scalar"}
        raise ValueError(f"{name}: {article[kind]} where the env has {article[str(live_kind)]}")
    if kind == "array":
        try:
            dtype = np.dtype(str(value["dtype"]))
        except TypeError:
            raise ValueError(f"{name}: unknown dtype {value['dtype']!r}") from None
        if dtype.kind not in "biuf" or dtype.shape != () or dtype.fields is not None:
            raise ValueError(f"{name}: dtype {value['dtype']!r} is not a plain numeric dtype")
        shape = value["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise ValueError(f"{name}: shape must be a list of integers, got {shape!r}")
        array = np.asarray(value["__nd__"], dtype=dtype)  # as large as the data already read, no larger
        if array.shape != tuple(shape):
            raise ValueError(f"{name}: array data of shape {array.shape}, declared {tuple(shape)}")
        return array
    if kind == "list":
        items = value["__seq__"]
        return tuple(items) if value["tuple"] else list(items)
    return value


def _kind(value: Any) -> str | None:
    """``scalar``, ``array`` or ``list`` for a well-formed captured value (see :func:`_plain`), else None."""
    if isinstance(value, dict):
        if set(value) == {"__nd__", "dtype", "shape"} and isinstance(value["__nd__"], (list, int, float, bool)):
            return "array"
        if (set(value) == {"__seq__", "tuple"} and isinstance(value["__seq__"], list) and isinstance(value["tuple"], bool)
                and all(isinstance(v, (bool, int, float)) for v in value["__seq__"])):  # fmt: skip
            return "list"
        return None
    if isinstance(value, _SCALARS) and not (isinstance(value, str) and len(value) > _MAX_TEXT):
        return "scalar"
    return None


def _lazy_data_name(layer: Any, name: Any) -> bool:
    """Whether ``name`` may be an instance data attribute of ``layer`` whose value is not plain data right now
    (``PassiveEnvChecker._previous_data`` after a reset) or that the layer creates later: a plain identifier
    that is an instance attribute now or names nothing on the layer or its class (so no method, property or
    class attribute, such as ``step``, can be replaced)."""
    return (
        isinstance(name, str)
        and name.isidentifier()
        and not name.startswith("__")
        and name not in _SKIP
        and name not in ("env", "venv")
        and (name in vars(layer) or not hasattr(layer, name))
    )


def _live_layers(env: Any) -> list[tuple[Any, dict[str, Any]]]:
    """``(layer, what the capture side writes for it now)`` down the wrapper chain: the whitelist of a restore."""
    layers, current = [], env
    for state in _capture_env(env):
        layers.append((current, state))
        current = getattr(current, "env", None)
    return layers


def _capture_env(env: Any) -> list[dict[str, Any]]:
    layers = []
    current = env
    while True:
        state: dict[str, Any] = {}
        for name, value in vars(current).items():
            if name in _SKIP or name == "env":
                continue
            if isinstance(value, np.random.Generator):
                state[name] = {"__rng__": value.bit_generator.state}
                continue
            try:
                state[name] = _plain(value)
            except TypeError:
                continue
        data = getattr(current, "data", None)
        if data is not None and hasattr(data, "qpos") and hasattr(data, "qvel"):
            state["__mujoco__"] = {
                "qpos": np.asarray(data.qpos).tolist(),
                "qvel": np.asarray(data.qvel).tolist(),
                "act": np.asarray(data.act).tolist(),
                "time": float(data.time),
            }
        layers.append(state)
        if not hasattr(current, "env"):
            break
        current = current.env
    return layers


def _restore_env(env: Any, layers: Any) -> None:
    live_layers = _live_layers(env)
    if not isinstance(layers, list) or len(layers) != len(live_layers):
        count = len(layers) if isinstance(layers, list) else type(layers).__name__
        raise ValueError(f"env state has {count} wrapper layers, the env {len(live_layers)}")
    checked: list[tuple[Any, dict[str, Any]]] = []
    for (current, live), state in zip(live_layers, layers, strict=True):  # every entry checked before any is set
        where = type(current).__name__
        if not isinstance(state, dict):
            raise ValueError(f"env state of {where} is not a mapping")
        restored: dict[str, Any] = {}
        for name, value in state.items():
            if name not in live and not _lazy_data_name(current, name):
                allowed = ", ".join(sorted(live)) or "none"
                raise ValueError(f"{where}: {name!r} is not part of its state (restorable: {allowed})")
            if name not in live:  # a data attribute the layer creates later (PassiveEnvChecker._previous_data)
                restored[name] = _restore_plain(value, None, f"{where}.{name}")
            elif name == "__mujoco__":
                restored[name] = _check_mujoco(value, live[name], where)
            elif isinstance(live[name], dict) and "__rng__" in live[name]:
                if not isinstance(value, dict) or set(value) != {"__rng__"} or not isinstance(value["__rng__"], dict):
                    raise ValueError(f"{where}.{name}: expected a random generator state")
                restored[name] = value
            else:
                restored[name] = _restore_plain(value, live[name], f"{where}.{name}")
        checked.append((current, restored))
    for current, restored in checked:
        for name, value in restored.items():
            if name == "__mujoco__":
                data, model = current.data, current.model
                data.qpos[:] = value["qpos"]
                data.qvel[:] = value["qvel"]
                if len(value["act"]):
                    data.act[:] = value["act"]
                data.time = value["time"]
                import mujoco

                mujoco.mj_forward(model, data)
            elif isinstance(value, dict) and "__rng__" in value:
                try:
                    getattr(current, name).bit_generator.state = value["__rng__"]
                except (ValueError, TypeError, KeyError) as exc:
                    raise ValueError(f"{type(current).__name__}.{name}: bad random generator state ({exc})") from None
            else:
                setattr(current, name, value)


def _check_mujoco(value: Any, live: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != set(live):
        raise ValueError(f"{where}: MuJoCo state must hold {sorted(live)}")
    for key in ("qpos", "qvel", "act"):
        items = value[key]
        if (
            not isinstance(items, list)
            or len(items) != len(live[key])
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
        ):
            raise ValueError(f"{where}: MuJoCo {key} must be {len(live[key])} numbers")
    if not isinstance(value["time"], (int, float)):
        raise ValueError(f"{where}: MuJoCo time must be a number")
    return value


def capture_vec_env_state(venv: Any) -> dict[str, Any]:
    """Snapshot of a (wrapped) VecEnv's sub-envs and numeric wrapper state."""
    from lit_sb3.vec_env import DummyVecEnv, VecEnvWrapper

    wrappers = []
    current = venv
    while isinstance(current, VecEnvWrapper):
        state = {}
        for name, value in vars(current).items():
            if name in _SKIP or name == "venv":
                continue
            try:
                state[name] = _plain(value)
            except TypeError:
                continue
        wrappers.append(state)
        current = current.venv
    if isinstance(current, DummyVecEnv):
        envs = [_capture_env(env) for env in current.envs]
        complete = True
    else:
        envs, complete = [], False
    return {"wrappers": wrappers, "envs": envs, "complete": complete}


def restore_vec_env_state(venv: Any, snapshot: dict[str, Any]) -> None:
    """Restore a snapshot taken by :func:`capture_vec_env_state` on an env built the same way.

    Only what the capture side writes for each layer of *this* env is restored (its attributes' names, kinds,
    dtypes and shapes are the whitelist), everything checked before anything is set or allocated.

    Raises:
        ValueError: an entry the capture side would not write (one line naming the layer and attribute).
    """
    from lit_sb3.vec_env import DummyVecEnv, VecEnvWrapper

    if not isinstance(snapshot, dict) or not set(snapshot) <= {"wrappers", "envs", "complete"}:
        raise ValueError("env state must be a mapping of wrappers, envs and complete")
    live = capture_vec_env_state(venv)
    wrappers = snapshot.get("wrappers", [])
    if not isinstance(wrappers, list) or len(wrappers) > len(live["wrappers"]):
        raise ValueError(f"env state has {len(wrappers)} VecEnv wrappers, the env {len(live['wrappers'])}")
    current, updates = venv, []
    for state, live_state in zip(wrappers, live["wrappers"], strict=False):  # all checked before any is set
        where = type(current).__name__
        if not isinstance(state, dict):
            raise ValueError(f"env state of {where} is not a mapping")
        for name, value in state.items():
            if name not in live_state and not _lazy_data_name(current, name):
                allowed = ", ".join(sorted(live_state)) or "none"
                raise ValueError(f"{where}: {name!r} is not part of its state (restorable: {allowed})")
            updates.append((current, name, _restore_plain(value, live_state.get(name), f"{where}.{name}")))
        current = current.venv
    for target, name, value in updates:
        setattr(target, name, value)
    while isinstance(current, VecEnvWrapper):
        current = current.venv
    envs = snapshot.get("envs")
    if isinstance(current, DummyVecEnv) and envs:
        if not isinstance(envs, list) or len(envs) != len(current.envs):
            count = len(envs) if isinstance(envs, list) else type(envs).__name__
            raise ValueError(f"env state has {count} sub-envs, the env has {len(current.envs)}")
        for env, layers in zip(current.envs, envs, strict=True):
            _restore_env(env, layers)
