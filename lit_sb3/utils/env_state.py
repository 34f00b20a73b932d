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


def _restore_plain(value: Any) -> Any:
    if isinstance(value, dict) and "__nd__" in value:
        return np.asarray(value["__nd__"], dtype=np.dtype(value["dtype"])).reshape(value["shape"])
    if isinstance(value, dict) and "__seq__" in value:
        return tuple(value["__seq__"]) if value["tuple"] else list(value["__seq__"])
    return value


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


def _restore_env(env: Any, layers: list[dict[str, Any]]) -> None:
    current = env
    for state in layers:
        for name, value in state.items():
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
                rng = getattr(current, name)
                rng.bit_generator.state = value["__rng__"]
            else:
                try:
                    setattr(current, name, _restore_plain(value))
                except AttributeError:
                    pass
        if not hasattr(current, "env"):
            break
        current = current.env


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
    """Restore a snapshot taken by :func:`capture_vec_env_state` on an env built the same way."""
    from lit_sb3.vec_env import DummyVecEnv, VecEnvWrapper

    current = venv
    for state in snapshot.get("wrappers", []):
        if not isinstance(current, VecEnvWrapper):
            break
        for name, value in state.items():
            try:
                setattr(current, name, _restore_plain(value))
            except AttributeError:
                pass
        current = current.venv
    if isinstance(current, DummyVecEnv) and snapshot.get("envs"):
        if len(snapshot["envs"]) != len(current.envs):
            raise ValueError(f"Checkpoint has {len(snapshot['envs'])} sub-envs, the env has {len(current.envs)}.")
        for env, layers in zip(current.envs, snapshot["envs"]):
            _restore_env(env, layers)
