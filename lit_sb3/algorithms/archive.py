"""Archives of a model: ``save``/``load`` as a zip of JSON data and tensors, ``get_parameters``/``set_parameters``,
and the checks that keep loading safe (:class:`~lit_sb3.algorithms.base.BaseAlgorithm` delegates here).

Loading never runs code from a file: tensors are read with ``torch.load(weights_only=True)``
(:mod:`lit_sb3.utils.serialization`), each archive member's declared size is bounded by what this model can need
(:func:`archive_limits`) before anything is allocated, a K-seed archive's declared K is checked against its tensors
and this machine's memory before K members are built (:func:`check_seed_archive`), and every loaded tensor and
optimiser state is checked against the model's (shapes, finite values, second moments >= 0) before it is used, in
archives and in Lightning checkpoints alike (:func:`check_checkpoint`, :func:`check_optimizer_state`).
"""

from __future__ import annotations

import difflib
import io
import pathlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.core.types import GymEnv
from lit_sb3.utils.checkpoint_io import is_url, local_copy
from lit_sb3.utils.serialization import (
    BadFileError,
    check_declared_net_arch,
    check_state_shapes,
    decode_value,
    encode_value,
    load_archive,
    read_archive_data,
    read_archive_text,
    save_archive,
    space_from_dict,
    space_to_dict,
)

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

SelfBaseAlgorithm = TypeVar("SelfBaseAlgorithm", bound="BaseAlgorithm")

__all__ = [
    "archive_limits",
    "check_checkpoint",
    "check_optimizer_state",
    "check_seed_archive",
    "get_parameters",
    "load_model",
    "load_tensors",
    "save_model",
    "set_parameters",
    "uncompiled_key",
]

_COMPILED_PREFIX = "_orig_mod."  # what torch.compile's wrapper puts before the wrapped module's keys


def uncompiled_key(key: str) -> str:
    """``key`` without ``torch.compile``'s wrapper segments (``policy._orig_mod.x`` -> ``policy.x``), so an archive of
    a model whose policy was compiled (``model.policy = th.compile(model.policy)``) loads into a plain one."""
    return key.replace(_COMPILED_PREFIX, "")


def compiled_names(state: dict[str, Any]) -> dict[str, str]:
    """Plain key -> this model's (compiled) key, for loading plain keys into a model whose policy is compiled."""
    return {uncompiled_key(k): k for k in state}


def save_model(
    model: BaseAlgorithm,
    path: str | pathlib.Path | io.BufferedIOBase,
    exclude: Iterable[str] | None = None,
    include: Iterable[str] | None = None,
) -> None:
    """Save ``model`` to a zip archive (:meth:`BaseAlgorithm.save <lit_sb3.algorithms.base.BaseAlgorithm.save>`).

    Args:
        model: the model.
        path: file path (``.zip`` added when missing) or a writable buffer.
        exclude: constructor arguments not to store.
        include: arguments to store even when they are in ``exclude``.
    """
    from lit_sb3.utils.system import get_system_info

    if not model.policy_ready:
        raise RuntimeError("Nothing to save: the model has no policy yet (train or load it first).")
    exclude = set(exclude or ()) - set(include or ()) - {"policy"}
    params = {}
    for key, value in model._constructor_params().items():
        if key in exclude:
            continue
        try:
            params[key] = encode_value(value)
        except TypeError as exc:
            raise TypeError(f"Cannot save argument {key!r} of {type(model).__name__}: {exc}") from exc
    data = {
        "algo": type(model).__name__,
        "params": params,
        "observation_space": space_to_dict(model.observation_space),
        "action_space": space_to_dict(model.action_space),
        "n_envs": int(getattr(model, "n_envs", 1)),
        "num_timesteps": int(model.num_timesteps),
        "_total_timesteps": int(model._total_timesteps),
        "_episode_num": int(model._episode_num),
        "_n_updates": np.asarray(model._n_updates).tolist(),  # a list per seed when seeds update on their own
        "_current_progress_remaining": float(model._current_progress_remaining),
    }
    data.update(model._extra_save_data())
    data.update(model._seed_save_data())
    info = get_system_info()
    tensors = {
        "model": {uncompiled_key(k): v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizers": {name: opt.state_dict() for name, opt in model._optimizers_to_save().items()},
    }
    save_archive(path, data, tensors, "\n".join(f"- {k}: {v}" for k, v in info.items()))


def load_model(
    cls: type[SelfBaseAlgorithm],
    path: str | pathlib.Path | io.BufferedIOBase,
    env: GymEnv | str | None = None,
    device: th.device | str = "auto",
    custom_objects: dict[str, Any] | None = None,
    print_system_info: bool = False,
    force_reset: bool = True,
    **kwargs: Any,
) -> SelfBaseAlgorithm:
    """A ``cls`` model loaded from an archive (:meth:`BaseAlgorithm.load <lit_sb3.algorithms.base.BaseAlgorithm.load>`:
    the arguments are documented there).

    Args:
        cls: the algorithm class the archive must hold.
        path: archive path, URL or readable buffer.
        env: env to attach.
        device: device for the model.
        custom_objects: values replacing what the archive holds.
        print_system_info: print the stored and current versions.
        force_reset: reset the env before further training.
        kwargs: constructor arguments or stored values to set.
    """
    import inspect

    from lit_sb3.buffers.base import check_declared_buffer

    if is_url(path):  # http(s) or fsspec: a bounded private copy, read the same safe way
        with local_copy(path, "model archive") as local:
            try:
                return load_model(cls, local, env=env, device=device, custom_objects=custom_objects,
                                print_system_info=print_system_info, force_reset=force_reset, **kwargs)  # fmt: skip
            except BadFileError as exc:
                raise BadFileError(str(exc).replace(local, str(path))) from None
    data = read_archive_data(path)  # the tensors are read once the model says how large they can be
    where = getattr(path, "name", None) if not isinstance(path, (str, pathlib.Path)) else str(path)
    where = where or f"<{type(path).__name__}>"
    if data["algo"] != cls.__name__:
        raise BadFileError(
            f"{where}: the archive holds a {data['algo']} model, not {cls.__name__}; use {data['algo']}.load()."
        )
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", *cls._excluded_save_params}
    unknown = sorted(set(data["params"]) - accepted)
    if unknown:
        raise BadFileError(
            f"{where}: data.json params has the unknown key {unknown[0]!r} for {cls.__name__} "
            f"(accepted: {', '.join(sorted(accepted))})"
        )
    try:
        params = {k: decode_value(v) for k, v in data["params"].items()}
        observation_space = space_from_dict(data["observation_space"])
        action_space = space_from_dict(data["action_space"])
        check_declared_net_arch(params.get("policy_kwargs"))
        n_envs = int(data.get("n_envs", 1))
        if "buffer_size" in params:
            check_declared_buffer(params["buffer_size"], observation_space, action_space)
        if "n_steps" in params:
            check_declared_buffer(params["n_steps"] * n_envs, observation_space, action_space)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadFileError(f"{where}: {' '.join(str(exc).split())}") from None
    # SB3: custom_objects replace what the archive holds and nothing else
    late: dict[str, Any] = {}
    for key, value in (custom_objects or {}).items():
        if key in params:
            params[key] = value
        elif key in cls._loaded_attributes:
            late[key] = value
    if "policy_kwargs" in kwargs and kwargs["policy_kwargs"] != params.get("policy_kwargs"):
        raise ValueError(
            "The specified policy kwargs do not equal the stored policy kwargs. "
            f"Stored kwargs: {params.get('policy_kwargs')}, specified kwargs: {kwargs['policy_kwargs']}"
        )
    for key, value in kwargs.items():
        if key in accepted:
            params[key] = value
        elif key in cls._loaded_attributes:
            late[key] = value
        else:
            known = sorted(accepted | set(cls._loaded_attributes))
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(
                f"{cls.__name__}.load() got the unknown argument {key!r}{hint}; it takes constructor arguments "
                f"and stored values: {', '.join(known)}."
            )
    if isinstance(data.get("seeds"), list) and len(data["seeds"]) > 1:  # before K members are built
        check_seed_archive(cls, path, len(data["seeds"]), params, observation_space, action_space, n_envs, where)
    model = cls(device=device, **params)
    model._restore_seeds(data, {**params, "device": device}, where)
    model.observation_space = observation_space
    model.action_space = action_space
    model.n_envs = n_envs
    seed_envs = env if model.n_seeds > 1 else None  # one env per seed, attached once the networks are built
    if env is not None and seed_envs is None:
        saved_obs, saved_act = model.observation_space, model.action_space
        vec_env = model._wrap_env(env)
        if vec_env.observation_space != saved_obs:
            raise ValueError(
                f"Observation spaces do not match: the model expects {saved_obs}, the env has {vec_env.observation_space}."
            )
        if vec_env.action_space != saved_act:
            raise ValueError(
                f"Action spaces do not match: the model expects {saved_act}, the env has {vec_env.action_space}."
            )
        model._init_env_metadata(vec_env)
        model.n_envs = vec_env.num_envs
    model._setup_model()
    _, tensors = load_archive(path, device="cpu", limits=archive_limits(model))
    load_tensors(model, tensors, where, strict=False)
    try:
        model.num_timesteps = int(data.get("num_timesteps", 0))
        model._total_timesteps = int(data.get("_total_timesteps", 0))
        model._episode_num = int(data.get("_episode_num", 0))
        n_updates = data.get("_n_updates", 0)
        if isinstance(n_updates, list) and len(n_updates) != model.n_seeds:
            raise ValueError(f"_n_updates holds {len(n_updates)} counts for {model.n_seeds} seed(s)")
        model._n_updates = np.asarray(n_updates, dtype=np.int64) if isinstance(n_updates, list) else int(n_updates)
        model._current_progress_remaining = float(data.get("_current_progress_remaining", 1.0))
        model._load_extra_save_data(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadFileError(f"{where}: bad counters in data.json: {' '.join(str(exc).split())}") from None
    if seed_envs is not None:
        model.set_env(seed_envs, force_reset)
    for key, value in late.items():
        setattr(model, key, value)
    if print_system_info:
        from lit_sb3.utils.system import get_system_info

        print("== SAVED MODEL SYSTEM INFO ==")
        print(read_archive_text(path) or "(none stored)")
        print("== CURRENT SYSTEM INFO ==")
        print("\n".join(f"- {k}: {v}" for k, v in get_system_info().items()))
    if not force_reset and env is None:
        model._last_obs = None
    return model


def check_seed_archive(
    cls: type[BaseAlgorithm],
    path: Any,
    n_seeds: int,
    params: dict[str, Any],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    n_envs: int,
    where: str,
) -> None:
    """Refuse a K-seed archive before its K members are built: one seed's networks are built (bounded by the
    declared net_arch already checked) to learn a seed's tensor bytes ``b``; ``model.pth`` must declare at least
    ``K * b / 2`` bytes (its stacked tensors hold ``K * b``: an archive declaring 1,024 seeds over one seed's
    tensors is refused), and ``K`` members (networks, their stacked copy, gradients, optimiser moments: 8 * b
    each) must fit in this machine's memory.

    Args:
        path: the archive.
        n_seeds: the declared K.
        params: the decoded constructor arguments.
        observation_space: the stored observation space.
        action_space: the stored action space.
        n_envs: the stored number of envs.
        where: the file name, for messages.
    """
    from lit_sb3.algorithms.seed_dim import MAX_ARCHIVE_SEEDS
    from lit_sb3.buffers.base import total_memory_bytes
    from lit_sb3.utils.serialization import declared_member_size

    if n_seeds > MAX_ARCHIVE_SEEDS:
        return  # more seeds than any archive may hold: the seeds' own check refuses it with its line
    # only the networks are measured: the default replay storage, two slots (a HER storage needs an env; a
    # full-size one would allocate what the check is there to bound)
    skip = ("device", "replay_buffer_class", "replay_buffer_kwargs", "optimize_memory_usage")
    probe_params = {k: v for k, v in params.items() if k not in skip}
    if "buffer_size" in probe_params:
        probe_params["buffer_size"] = 2
    probe = cls(device="cpu", **probe_params)
    probe.observation_space, probe.action_space, probe.n_envs = observation_space, action_space, n_envs
    probe._setup_model()
    per_seed = sum(t.numel() * t.element_size() for t in probe.state_dict().values())
    del probe
    stored = declared_member_size(path, "model.pth")
    if stored < n_seeds * per_seed // 2:
        raise BadFileError(
            f"{where}: data.json declares {n_seeds} seeds but model.pth holds {stored:,} bytes, less than the "
            f"{n_seeds * per_seed:,} that {n_seeds} seeds of this {cls.__name__} need"
        )
    memory = total_memory_bytes()
    if memory is not None and 8 * n_seeds * per_seed > memory:
        raise BadFileError(
            f"{where}: {n_seeds} seeds of this {cls.__name__} would need ~{8 * n_seeds * per_seed / 2**30:,.1f} "
            f"GiB, more than this machine's {memory / 2**30:,.1f} GiB"
        )


def archive_limits(model: BaseAlgorithm) -> dict[str, int]:
    """The most bytes each archive member can need for this model (its spaces and networks are built): the
    tensors' storages for ``model.pth``; for ``optimizers.pth`` four tensors the size of each optimised
    parameter (Adam's two moments and AMSGrad's maximum, with room to spare); plus torch's per-record overhead.
    A member declaring more is refused before anything is read (a zip bomb under the ratio limit)."""
    storages: dict[int, int] = {}
    for tensor in model.state_dict().values():
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    overhead = 2**20 + 4096 * len(storages)
    params = [p for opt in model._optimizers_to_save().values() for g in opt.param_groups for p in g["params"]]
    optim = sum(4 * p.numel() * p.element_size() + 4096 for p in params) + 2**20
    return {"model.pth": sum(storages.values()) + overhead, "optimizers.pth": optim}


def load_tensors(
    model: BaseAlgorithm, tensors: dict[str, Any], where: str, strict: bool, partial: bool = False
) -> None:
    """Load an archive's ``model`` state dict and optimizer states, each mismatch one :class:`BadFileError`
    (``partial``: tensors missing from the archive or unknown to the model are skipped, shapes still checked)."""
    state = tensors["model"]
    if not isinstance(state, dict) or not all(isinstance(v, th.Tensor) for v in state.values()):
        raise BadFileError(f"{where}: model.pth must hold a dict of tensors")
    state = {uncompiled_key(k): v for k, v in state.items()}  # an archive saved before compiled keys were cut
    if any(_COMPILED_PREFIX in k for k in model.state_dict()):  # this model's policy is compiled: its key names
        state = {compiled_names(model.state_dict()).get(k, k): v for k, v in state.items()}
    check_state_shapes(state, model.state_dict(), where, f"{type(model).__name__}'s network")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if not partial and (unexpected or [k for k in missing if strict or not k.startswith("replay")]):
        raise BadFileError(
            f"{where}: the archive does not match {type(model).__name__}'s networks "
            f"(missing {list(missing)[:5]}, unexpected {list(unexpected)[:5]})"
        )
    saved = tensors.get("optimizers", {})
    if not isinstance(saved, dict):
        raise BadFileError(f"{where}: optimizers.pth must hold a dict of optimizer states")
    for name, opt in model._optimizers_to_save().items():
        if name in saved:
            check_optimizer_state(opt, saved[name], f"{where}: optimizer {name}", model.n_seeds,
                                   lambda p, v: model._live_part(p, v, model.failed))  # fmt: skip
            try:
                opt.load_state_dict(saved[name])
            except (ValueError, KeyError, TypeError, RuntimeError) as exc:
                raise BadFileError(f"{where}: optimizer {name}: {' '.join(str(exc).split())}") from None


def get_parameters(model: BaseAlgorithm) -> dict[str, dict]:
    """``{"policy": state_dict, "<name>.optimizer": state_dict, ...}``."""
    params = {"policy": {uncompiled_key(k): v for k, v in model.policy.state_dict().items()}}
    params.update({name: opt.state_dict() for name, opt in model._optimizers_to_save().items()})
    return params


def set_parameters(
    model: BaseAlgorithm, load_path_or_dict: str | pathlib.Path | dict[str, Any], exact_match: bool = True
) -> None:
    """Load parameters into ``model`` (:meth:`BaseAlgorithm.set_parameters
    <lit_sb3.algorithms.base.BaseAlgorithm.set_parameters>`).

    Args:
        model: the model.
        load_path_or_dict: a dict like :func:`get_parameters` returns, or an archive path.
        exact_match: every object (and every tensor of the policy) must be given.
    """
    if not isinstance(load_path_or_dict, dict):
        if is_url(load_path_or_dict):  # http(s) or fsspec: a bounded private copy, read the same safe way
            with local_copy(load_path_or_dict, "model archive") as local:
                _, tensors = load_archive(local, device=model.device, limits=archive_limits(model))
        else:
            _, tensors = load_archive(load_path_or_dict, device=model.device, limits=archive_limits(model))
        load_tensors(model, tensors, str(load_path_or_dict), strict=exact_match, partial=not exact_match)
        return
    params = load_path_or_dict
    optimizers = model._optimizers_to_save()
    known = ["policy", *optimizers]
    unknown = [name for name in params if name not in known]
    if unknown:
        raise ValueError(f"Unknown object {unknown[0]!r} in the parameters; known: {known}")
    if exact_match and set(params) != set(known):
        raise ValueError(
            f"Names of parameters do not match the agent's (exact_match=True): expected {known}, got "
            f"{list(params)}; pass exact_match=False to load some of them."
        )
    if "policy" in params:
        plain = {uncompiled_key(k): v for k, v in params["policy"].items()}
        getattr(model.policy, "_orig_mod", model.policy).load_state_dict(plain, strict=exact_match)
    for name, state in params.items():
        if name != "policy":
            optimizers[name].load_state_dict(state)


def check_checkpoint(model: BaseAlgorithm, checkpoint: Any, where: str) -> None:
    """Refuse a Lightning checkpoint this model cannot resume from, before Lightning loads any of it (one
    :class:`BadFileError` line naming the file), with the archive's checks: the seeds it declares against this
    model's K, every tensor of ``state_dict`` against this model's (shapes; no key missing or unknown), every
    optimiser state of ``optimizer_states`` against this model's optimisers (shapes, finite values, second
    moments >= 0: ``check_optimizer_state``). Lightning would load a wrong-shaped optimiser moment, and
    training would turn the weights NaN.

    Args:
        model: the model resuming from it.
        checkpoint: the loaded checkpoint.
        where: the file, for messages.
    """
    if not isinstance(checkpoint, dict):
        raise BadFileError(f"{where}: a checkpoint must hold a dict, got {type(checkpoint).__name__}")
    seeds = checkpoint.get("lit_sb3_seeds")
    declared = seeds.get("seeds") if isinstance(seeds, dict) else None if seeds is None else "?"
    n_declared = 1 if declared is None else len(declared) if isinstance(declared, list) else None
    if n_declared != model.n_seeds:
        held = "1 seed" if declared is None else f"the seeds {declared}"
        raise BadFileError(
            f"{where}: the checkpoint holds {held}, this {type(model).__name__} trains {model.seeds}: resume a "
            "model from a checkpoint of the same seeds"
        )
    if not model.policy_ready:  # load_from_checkpoint: the networks are built by Lightning's own load
        return
    state = checkpoint.get("state_dict")
    if not isinstance(state, dict) or not all(isinstance(v, th.Tensor) for v in state.values()):
        raise BadFileError(f"{where}: the checkpoint's state_dict must be a dict of tensors")
    expected = model.state_dict()
    check_state_shapes(state, expected, where, f"{type(model).__name__}'s network", member="state_dict")
    if model.strict_loading and state.keys() != expected.keys():
        missing, unknown = [k for k in expected if k not in state], [k for k in state if k not in expected]
        raise BadFileError(
            f"{where}: the checkpoint's state_dict does not match {type(model).__name__}'s networks (missing "
            f"{missing[:5]}, unknown {unknown[:5]})"
        )
    saved = checkpoint.get("optimizer_states")
    if saved is None:
        return
    optimizers = model._lightning_optimizers()
    if not optimizers and isinstance(saved, list) and all(state == {} for state in saved):
        return  # no optimiser (ARS): Lightning saved its stand-in's empty state
    if not isinstance(saved, list) or len(saved) != len(optimizers):
        count = len(saved) if isinstance(saved, list) else type(saved).__name__
        raise BadFileError(
            f"{where}: optimizer_states holds {count} optimizer state(s), {type(model).__name__} has "
            f"{len(optimizers)} optimizer(s)"
        )
    failed = checkpoint_failed(seeds, where)
    for i, (optimizer, optimizer_state) in enumerate(zip(optimizers, saved)):
        check_optimizer_state(optimizer, optimizer_state, f"{where}: optimizer_states[{i}]", model.n_seeds,
                               lambda p, v: model._live_part(p, v, failed))  # fmt: skip


_NON_NEGATIVE_STATE = ("exp_avg_sq", "max_exp_avg_sq", "square_avg", "sum", "acc_delta")


def checkpoint_failed(seeds: Any, where: str) -> set[int]:
    """The failed seed indices a checkpoint's ``lit_sb3_seeds`` holds (none for a single model's)."""
    if not isinstance(seeds, dict):
        return set()
    try:
        return {int(i) for i, _ in seeds.get("failed", [])}
    except (TypeError, ValueError) as exc:
        raise BadFileError(f"{where}: lit_sb3_seeds failed: {' '.join(str(exc).split())}") from None


def check_optimizer_state(opt: th.optim.Optimizer, saved: Any, where: str, n_seeds: int = 1,
                          live: Callable[[th.Tensor, th.Tensor], th.Tensor] | None = None) -> None:  # fmt: skip
    """Refuse a saved optimiser state that would load and then corrupt training: every per-parameter tensor has its
    parameter's shape (``step``: a scalar or one count per seed), finite values, and second moments >= 0 (a negative
    one makes Adam's ``sqrt`` NaN); torch's own ``load_state_dict`` checks only the group sizes. The values of seeds
    the file says failed are not read (a diverged seed's moments may be NaN; its weights stay frozen).

    Args:
        opt: the model's optimiser.
        saved: the archive's (checkpoint's) ``state_dict()`` of it.
        where: the file and optimiser, for messages.
        n_seeds: the model's K (a per-seed ``step`` has K counts).
        live: ``live(parameter, value)``: the part of ``value`` of the seeds still training (default: all of it).
    """
    if not isinstance(saved, dict) or not isinstance(saved.get("state"), dict):
        raise BadFileError(f"{where}: not an optimizer state dict")
    params = [p for group in opt.param_groups for p in group["params"]]
    for index, state in saved["state"].items():
        if not isinstance(index, int) or not 0 <= index < len(params) or not isinstance(state, dict):
            raise BadFileError(f"{where}: state for parameter {index!r}, which the optimizer does not have")
        shape = tuple(params[index].shape)
        for key, value in state.items():
            if not isinstance(value, th.Tensor):
                continue
            allowed = ((), shape[:1], (n_seeds,)) if key == "step" else (shape,)
            if tuple(value.shape) not in allowed:
                raise BadFileError(
                    f"{where}: {key} of parameter {index} has shape {tuple(value.shape)}, the parameter {shape}"
                )
            if key != "step" and live is not None:
                value = live(params[index], value)
            if value.is_floating_point() and not bool(th.isfinite(value).all()):
                raise BadFileError(f"{where}: {key} of parameter {index} holds non-finite values")
            if key in _NON_NEGATIVE_STATE and bool((value < 0).any()):
                raise BadFileError(f"{where}: {key} of parameter {index} holds negative values")
