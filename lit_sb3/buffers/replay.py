"""Replay buffer of off-policy algorithms (SAC, TD3, DDPG, DQN), stored as torch tensors.

Compared with SB3's ``ReplayBuffer`` (same constructor arguments and semantics):

* storage is a set of torch tensors on ``storage_device`` (CPU by default), so sampling is a few torch ops
  (``th.randint`` + ``index_select``) and one ``.to(device)`` per field;
* float64 observations are stored as float32 (``obs_dtype`` overrides this), halving the memory of MuJoCo
  buffers;
* ``save``/``load`` use an ``.npz`` file with a JSON metadata string: nothing is pickled.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import DTypeLike

from lit_sb3.buffers.base import BaseBuffer, maybe_warn_memory, numpy_to_torch_dtype, storage_obs_dtype
from lit_sb3.core.preprocessing import get_device
from lit_sb3.core.types import ReplayBufferSamples
from lit_sb3.utils.files import BadFileError

if TYPE_CHECKING:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = ["ReplayBuffer"]

_METADATA_KEY = "__metadata__"
_FORMAT_VERSION = 1
_MAX_METADATA_BYTES = 64 * 2**20


def _array_header(data: np.lib.npyio.NpzFile, name: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype an ``.npz`` member declares, read from its header only (nothing is allocated)."""
    with data.zip.open(f"{name}.npy") as f:
        version = np.lib.format.read_magic(f)
        readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"array {name!r} has the unsupported .npy version {version}")
        shape, _, dtype = readers[version](f)  # the header only (bounded by numpy), never the data
    return tuple(shape), np.dtype(dtype)


def _read_metadata(data: np.lib.npyio.NpzFile) -> dict[str, Any]:
    """The JSON metadata of a replay ``.npz`` (size-checked, never unpickled)."""
    if _METADATA_KEY not in data.files:
        raise ValueError(f"not a lit_sb3 replay buffer file (no {_METADATA_KEY} entry)")
    shape, dtype = _array_header(data, _METADATA_KEY)
    if shape != () or dtype.kind != "U" or dtype.itemsize > _MAX_METADATA_BYTES:
        raise ValueError(f"{_METADATA_KEY} must be one JSON string of at most {_MAX_METADATA_BYTES:,} bytes")
    from lit_sb3.utils.files import load_json

    meta = load_json(str(data[_METADATA_KEY]), "", _METADATA_KEY)  # deep nesting, huge integers: ValueError
    if not isinstance(meta, dict):
        raise ValueError(f"{_METADATA_KEY} must be a JSON object")
    return meta


_T = TypeVar("_T", bound="ReplayBuffer")
PathLike = str | os.PathLike | io.IOBase


@contextlib.contextmanager
def _open_npz(path: PathLike) -> Iterator[tuple[np.lib.npyio.NpzFile, str]]:
    """``(the opened .npz, the file's name for messages)``; a missing, irregular, non-zip or single-array file
    is one :class:`BadFileError` line naming it."""
    from lit_sb3.utils.files import check_file

    where = os.fspath(path) if isinstance(path, (str, os.PathLike)) else getattr(path, "name", "<file object>")
    if isinstance(path, (str, os.PathLike)):
        check_file(path, 2**50, "replay buffer file")  # a regular file (its members are bounded when read)
    try:
        data = np.load(path, allow_pickle=False)  # type: ignore[arg-type]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise BadFileError(f"{where}: not a replay buffer .npz file ({' '.join(str(exc).split())})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise BadFileError(f"{where}: not a replay buffer .npz file (a single array)")
    with data:
        yield data, where


def _maybe_cast_action_dtype(dtype: DTypeLike | None) -> np.dtype:
    """float64 actions are stored as float32 (as SB3 does); other dtypes are kept."""
    dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float32)
    return np.dtype(np.float32) if dtype == np.float64 else dtype


class ReplayBuffer(BaseBuffer):
    """Replay buffer of transitions ``(obs, action, reward, next_obs, done)`` with timeout handling.

    Args:
        buffer_size: maximum number of transitions (shared by all envs: ``buffer_size // n_envs`` slots each).
        observation_space: observation space.
        action_space: action space.
        device: torch device of the samples ("auto": CUDA when available).
        n_envs: number of parallel environments.
        optimize_memory_usage: store ``next_obs`` implicitly as ``obs[(i + 1) % size]`` (about half the memory).
            Cannot be combined with ``handle_timeout_termination``.
        handle_timeout_termination: treat ``infos[i]["TimeLimit.truncated"]`` as a timeout, not a termination,
            so that the algorithm bootstraps from ``next_obs``.
        obs_dtype: storage dtype of the observations (default: the space's dtype, float64 -> float32).
        storage_device: device holding the storage ("cpu" by default; "cuda" keeps the buffer on the GPU).
    """

    observations: th.Tensor
    next_observations: th.Tensor | None
    actions: th.Tensor
    rewards: th.Tensor
    dones: th.Tensor
    timeouts: th.Tensor

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        obs_dtype: DTypeLike | None = None,
        storage_device: th.device | str = "cpu",
    ) -> None:
        super().__init__(buffer_size, observation_space, action_space, device, n_envs=n_envs)
        self.buffer_size = max(self.buffer_size // self.n_envs, 1)
        # same restriction as SB3 (see https://github.com/DLR-RM/stable-baselines3/issues/934)
        if optimize_memory_usage and handle_timeout_termination:
            raise ValueError(
                "ReplayBuffer does not support optimize_memory_usage = True "
                "and handle_timeout_termination = True simultaneously."
            )
        self.optimize_memory_usage = optimize_memory_usage
        self.handle_timeout_termination = handle_timeout_termination
        self.storage_device = get_device(storage_device)
        # floating samples are cast to this dtype (the networks' under precision="bf16-true"/"64-true"; None: as
        # stored); the algorithm sets it when Lightning has placed the networks
        self.sample_float_dtype: th.dtype | None = None
        self.action_dtype = _maybe_cast_action_dtype(action_space.dtype)
        self._init_obs_dtype(obs_dtype)
        maybe_warn_memory(self.nbytes_per_transition() * self.buffer_size * self.n_envs)
        self._allocate()

    # ------------------------------------------------------------------
    # Storage
    # ------------------------------------------------------------------

    def _init_obs_dtype(self, obs_dtype: DTypeLike | dict[str, DTypeLike] | None) -> None:
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError(f"{type(self).__name__} does not support Dict observation spaces; use DictReplayBuffer.")
        if isinstance(obs_dtype, dict):
            raise ValueError("obs_dtype must be a single dtype for a non-Dict observation space, not a dict")
        self.obs_dtype = storage_obs_dtype(self.observation_space, obs_dtype)

    def _zeros(self, shape: tuple[int, ...], dtype: DTypeLike) -> th.Tensor:
        return th.zeros(
            (self.buffer_size, self.n_envs, *shape), dtype=numpy_to_torch_dtype(dtype), device=self.storage_device
        )

    def _np_view(self, tensor: th.Tensor) -> np.ndarray | None:
        """A numpy array sharing the tensor's memory (fast writes), when the storage is on the CPU."""
        return tensor.numpy() if tensor.device.type == "cpu" else None

    def _allocate_observations(self) -> None:
        self.observations = self._zeros(self.obs_shape, self.obs_dtype)
        self.next_observations = None if self.optimize_memory_usage else self._zeros(self.obs_shape, self.obs_dtype)

    def _allocate(self) -> None:
        """Allocate the storage tensors (zeros) and their flat views."""
        self._allocate_observations()
        self.actions = self._zeros((self.action_dim,), self.action_dtype)
        self.rewards = self._zeros((), np.float32)
        self.dones = self._zeros((), np.float32)
        self.timeouts = self._zeros((), np.float32)
        self._refresh_views()

    def _refresh_views(self) -> None:
        """(Re)build the numpy views (CPU writes) and the ``[size * n_envs, ...]`` flat views (sampling)."""
        self._obs_np = self._np_view(self.observations)
        self._next_obs_np = None if self.next_observations is None else self._np_view(self.next_observations)
        self._np = {name: self._np_view(getattr(self, name)) for name in ("actions", "rewards", "dones", "timeouts")}

    @staticmethod
    def _flat(tensor: th.Tensor) -> th.Tensor:
        return tensor.flatten(0, 1)

    def _write(self, tensor: th.Tensor, view: np.ndarray | None, index: int, value: Any) -> None:
        if view is not None:
            view[index] = value
        else:
            tensor[index].copy_(th.as_tensor(np.asarray(value)).reshape(tensor[index].shape), non_blocking=True)

    def _storage_tensors(self) -> dict[str, th.Tensor]:
        """Every storage tensor by name (Dict buffers use ``observations/<key>``)."""
        tensors = {"observations": self.observations}
        if self.next_observations is not None:
            tensors["next_observations"] = self.next_observations
        tensors.update(
            {"actions": self.actions, "rewards": self.rewards, "dones": self.dones, "timeouts": self.timeouts}
        )
        return tensors

    def _obs_slot_nbytes(self) -> int:
        n = int(np.prod(self.obs_shape)) * self.obs_dtype.itemsize  # type: ignore[arg-type]
        return n if self.optimize_memory_usage else 2 * n

    def nbytes_per_transition(self) -> int:
        """Bytes of storage per stored transition (observations, next observations, action, reward, flags)."""
        return self._obs_slot_nbytes() + self.action_dim * self.action_dtype.itemsize + 3 * 4

    def nbytes(self) -> int:
        """Total bytes held by the storage tensors."""
        return sum(t.numel() * t.element_size() for t in self._storage_tensors().values())

    # ------------------------------------------------------------------
    # Adding
    # ------------------------------------------------------------------

    def _timeouts_from_infos(self, infos: list[dict[str, Any]]) -> np.ndarray:
        return np.array([info.get("TimeLimit.truncated", False) for info in infos], dtype=np.float32)

    def _add_observations(self, obs: Any, next_obs: Any) -> None:
        obs = np.asarray(obs)
        next_obs = np.asarray(next_obs)
        if isinstance(self.observation_space, spaces.Discrete):
            obs = obs.reshape((self.n_envs, *self.obs_shape))
            next_obs = next_obs.reshape((self.n_envs, *self.obs_shape))
        self._write(self.observations, self._obs_np, self.pos, obs)
        if self.optimize_memory_usage:
            self._write(self.observations, self._obs_np, (self.pos + 1) % self.buffer_size, next_obs)
        else:
            assert self.next_observations is not None
            self._write(self.next_observations, self._next_obs_np, self.pos, next_obs)

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one transition of every env (arrays with a leading ``n_envs`` dim).

        Args:
            obs: observations.
            next_obs: next observations (the terminal observation when an episode ended).
            action: actions (scaled to [-1, 1] for Box spaces, as SB3's buffer actions).
            reward: rewards.
            done: episode ends (termination or truncation).
            infos: step infos; ``"TimeLimit.truncated"`` marks timeouts.
        """
        self._add_observations(obs, next_obs)
        action = np.asarray(action).reshape((self.n_envs, self.action_dim))
        self._write(self.actions, self._np["actions"], self.pos, action)
        self._write(self.rewards, self._np["rewards"], self.pos, np.asarray(reward).reshape(self.n_envs))
        self._write(self.dones, self._np["dones"], self.pos, np.asarray(done).reshape(self.n_envs))
        if self.handle_timeout_termination:
            self._write(self.timeouts, self._np["timeouts"], self.pos, self._timeouts_from_infos(infos))
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True
            self.pos = 0

    # ------------------------------------------------------------------
    # Sampling
    # ------------------------------------------------------------------

    def _check_not_empty(self) -> None:
        if not self.full and self.pos == 0:
            raise RuntimeError(f"Cannot sample from an empty {type(self).__name__}: add transitions first.")

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """Sample ``batch_size`` transitions uniformly (with replacement), env index uniform too.

        Args:
            batch_size: number of transitions.
            env: VecNormalize whose statistics normalise observations and rewards (None: raw values).
        """
        self._check_not_empty()
        dev = self.storage_device
        if self.optimize_memory_usage and self.full:
            # slot `pos` holds the next obs of the newest transition, not a valid transition start
            batch_inds = (th.randint(1, self.buffer_size, (batch_size,), device=dev) + self.pos) % self.buffer_size
        else:
            upper_bound = self.buffer_size if self.full else self.pos
            batch_inds = th.randint(0, upper_bound, (batch_size,), device=dev)
        return self._get_samples(batch_inds, env=env)

    def _env_indices(self, n: int) -> th.Tensor:
        if self.n_envs == 1:
            return th.zeros(n, dtype=th.long, device=self.storage_device)
        return th.randint(0, self.n_envs, (n,), device=self.storage_device)

    def _gather(self, tensor: th.Tensor, flat_idx: th.Tensor) -> th.Tensor:
        return self._flat(tensor).index_select(0, flat_idx)

    def _gather_obs(self, flat_idx: th.Tensor, next_flat_idx: th.Tensor | None = None) -> tuple[Any, Any]:
        """Observations at ``flat_idx`` and next observations (``next_flat_idx`` defaults to ``flat_idx``)."""
        nxt = flat_idx if next_flat_idx is None else next_flat_idx
        obs = self._gather(self.observations, flat_idx)
        if self.optimize_memory_usage:
            # next obs stored in the following time slot, same env
            size = self.buffer_size * self.n_envs
            next_obs = self._gather(self.observations, (nxt + self.n_envs) % size)
        else:
            assert self.next_observations is not None
            next_obs = self._gather(self.next_observations, nxt)
        return obs, next_obs

    def _to_device(self, tensor: th.Tensor) -> th.Tensor:
        if self.sample_float_dtype is not None and tensor.is_floating_point():
            return tensor.to(self.device, dtype=self.sample_float_dtype, non_blocking=True)
        return tensor.to(self.device, non_blocking=True)

    def _normalize_obs_tensor(self, obs: th.Tensor, env: VecNormalize | None) -> th.Tensor:
        """Normalise with ``env.normalize_obs`` (numpy), keeping float32 unless the storage is float64."""
        if env is None:
            return obs
        out = np.asarray(env.normalize_obs(obs.cpu().numpy()))
        if out.dtype == np.float64 and self.obs_dtype != np.float64:
            out = out.astype(np.float32)
        return th.from_numpy(np.ascontiguousarray(out))

    def _normalize_reward_tensor(self, rewards: th.Tensor, env: VecNormalize | None) -> th.Tensor:
        if env is None:
            return rewards
        return th.from_numpy(np.ascontiguousarray(self._normalize_reward(rewards.cpu().numpy(), env)))

    def _dones_without_timeouts(self, flat_idx: th.Tensor) -> th.Tensor:
        dones = self._gather(self.dones, flat_idx)
        if self.handle_timeout_termination:
            dones = dones * (1.0 - self._gather(self.timeouts, flat_idx))
        return dones

    def _get_samples(self, batch_inds: th.Tensor | np.ndarray, env: VecNormalize | None = None) -> ReplayBufferSamples:
        batch_inds = th.as_tensor(batch_inds, dtype=th.long, device=self.storage_device)
        flat_idx = batch_inds * self.n_envs + self._env_indices(batch_inds.shape[0])
        obs, next_obs = self._gather_obs(flat_idx)
        return ReplayBufferSamples(
            observations=self._to_device(self._normalize_obs_tensor(obs, env)),
            actions=self._to_device(self._gather(self.actions, flat_idx)),
            next_observations=self._to_device(self._normalize_obs_tensor(next_obs, env)),
            # only dones that are not due to timeouts
            dones=self._to_device(self._dones_without_timeouts(flat_idx).unsqueeze(1)),
            rewards=self._to_device(
                self._normalize_reward_tensor(self._gather(self.rewards, flat_idx).unsqueeze(1), env)
            ),
        )

    # ------------------------------------------------------------------
    # Save / load (npz + JSON, no pickle)
    # ------------------------------------------------------------------

    def _obs_dtype_json(self) -> Any:
        return self.obs_dtype.name

    def _init_kwargs(self) -> dict[str, Any]:
        """Constructor arguments (JSON-safe) that rebuild an identical empty buffer."""
        return {
            "buffer_size": self.buffer_size * self.n_envs,
            "n_envs": self.n_envs,
            "optimize_memory_usage": self.optimize_memory_usage,
            "handle_timeout_termination": self.handle_timeout_termination,
            "obs_dtype": self._obs_dtype_json(),
            "storage_device": str(self.storage_device),
        }

    def _extra_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Subclass hook: extra JSON metadata and extra arrays to save."""
        return {}, {}

    def _load_extra_state(self, meta: dict[str, Any], arrays: Any) -> None:
        """Subclass hook: restore what :meth:`_extra_state` saved."""

    def _saved_rows(self) -> int:
        if self.full:
            return self.buffer_size
        # with optimize_memory_usage, slot `pos` holds the last next_obs
        return min(self.pos + 1, self.buffer_size)

    def save(self, path: PathLike) -> None:
        """Write the buffer to ``path`` (an ``.npz`` file; the name is used as given).

        Args:
            path: file path or writable binary file object.
        """
        rows = self._saved_rows()
        arrays = {name: t[:rows].cpu().numpy() for name, t in self._storage_tensors().items()}
        extra_meta, extra_arrays = self._extra_state()
        meta = {
            "format": "lit_sb3.replay_buffer",
            "version": _FORMAT_VERSION,
            "class": type(self).__name__,
            "init_kwargs": self._init_kwargs(),
            "pos": self.pos,
            "full": self.full,
            "rows": rows,
            "observation_space": repr(self.observation_space),
            "action_space": repr(self.action_space),
            **extra_meta,
        }
        overlap = set(arrays) & set(extra_arrays)
        assert not overlap, overlap
        payload = {
            **arrays,
            **{f"extra/{k}": v for k, v in extra_arrays.items()},
            _METADATA_KEY: np.array(json.dumps(meta)),
        }
        if isinstance(path, io.IOBase):
            np.savez(path, **payload)  # type: ignore[arg-type]
        else:
            with open(path, "wb") as f:
                np.savez(f, **payload)  # type: ignore[arg-type]

    @staticmethod
    def saved_class_name(path: PathLike) -> str:
        """The buffer class named in a file written by :meth:`save`, through the same checks as :meth:`load`
        (a ``.npz`` with a bounded JSON ``__metadata__`` string, nothing unpickled).

        Args:
            path: file path or readable binary file object (rewound afterwards).

        Raises:
            BadFileError: anything else, one line naming the file.
        """
        with _open_npz(path) as (data, where):
            try:
                name = _read_metadata(data).get("class")
            except (ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
                raise BadFileError(f"{where}: {' '.join(str(exc).split())}") from None
        if hasattr(path, "seek"):
            path.seek(0)  # type: ignore[union-attr]
        if not isinstance(name, str):
            raise BadFileError(f"{where}: {_METADATA_KEY} names no buffer class")
        return name

    @classmethod
    def load(
        cls: type[_T],
        path: PathLike,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        **kwargs: Any,
    ) -> _T:
        """Rebuild a buffer saved with :meth:`save` (nothing is unpickled).

        Args:
            path: file path or readable binary file object.
            observation_space: the observation space the buffer was created with.
            action_space: the action space the buffer was created with.
            device: torch device of the samples.
            **kwargs: constructor arguments overriding the saved ones (e.g. ``storage_device``, HER's ``env``).
        """
        import inspect

        from lit_sb3.buffers.base import check_declared_buffer

        with _open_npz(path) as (data, where):
            try:
                meta = _read_metadata(data)
                if meta.get("format") != "lit_sb3.replay_buffer":
                    raise ValueError(f"not a lit_sb3 replay buffer file (format {meta.get('format')!r})")
                if not isinstance(meta.get("version"), int) or meta["version"] > _FORMAT_VERSION:
                    raise ValueError(
                        f"version {meta.get('version')!r} was written by a newer lit_sb3; this one reads up to "
                        f"{_FORMAT_VERSION}"
                    )
                if meta.get("class") != cls.__name__:
                    raise ValueError(f"holds a {meta.get('class')}, not a {cls.__name__}: load it with its class")
                saved_kwargs = meta.get("init_kwargs")
                accepted = {  # the arguments of every __init__ up the class tree (subclasses pass **kwargs on)
                    name for klass in cls.__mro__ if "__init__" in vars(klass)
                    for name in inspect.signature(vars(klass)["__init__"]).parameters
                }  # fmt: skip
                if not isinstance(saved_kwargs, dict) or set(saved_kwargs) - accepted:
                    raise ValueError(f"init_kwargs must be an object of {cls.__name__}'s arguments")
                init_kwargs = {**saved_kwargs, **kwargs}
                check_declared_buffer(
                    init_kwargs.get("buffer_size"), observation_space, action_space, init_kwargs.get("n_envs", 1)
                )
                if "storage_device" in saved_kwargs and "storage_device" not in kwargs:
                    init_kwargs["storage_device"] = str(get_device(str(saved_kwargs["storage_device"])))
                buffer = cls(
                    observation_space=observation_space, action_space=action_space, device=device, **init_kwargs
                )
                rows, pos = meta.get("rows"), meta.get("pos")
                for name, value in (("rows", rows), ("pos", pos)):
                    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= buffer.buffer_size:
                        raise ValueError(f"{name} must be an integer in [0, {buffer.buffer_size}], got {value!r}")
                tensors = buffer._storage_tensors()
                missing = set(tensors) - set(data.files)
                if missing:
                    raise ValueError(f"lacks the arrays {sorted(missing)} needed by this {cls.__name__}")
                limit = buffer.nbytes() + 2**24  # no member may declare more than the whole buffer
                for info in data.zip.infolist():
                    if info.file_size > limit:
                        raise ValueError(
                            f"member {info.filename} declares {info.file_size:,} bytes, more than the buffer's "
                            f"{limit:,}"
                        )
                for name, tensor in tensors.items():
                    shape, dtype = _array_header(data, name)
                    if shape[1:] != tuple(tensor.shape[1:]) or shape[:1] != (rows,):
                        raise ValueError(
                            f"array {name!r} has shape {shape} but the given spaces give {(rows, *tensor.shape[1:])}: "
                            "pass the observation/action spaces the buffer was saved with "
                            f"(saved: {meta.get('observation_space')}, {meta.get('action_space')})"
                        )
                    if dtype.kind not in "biuf":
                        raise ValueError(f"array {name!r} has the non-numeric dtype {dtype}")
                    tensor[:rows].copy_(th.from_numpy(data[name]))
                buffer.pos = pos
                buffer.full = bool(meta.get("full"))
                extra = {k[len("extra/") :]: data[k] for k in data.files if k.startswith("extra/")}
                buffer._load_extra_state(meta, extra)
            except (ValueError, KeyError, TypeError, RuntimeError, zipfile.BadZipFile) as exc:
                message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
                raise BadFileError(f"{where}: {' '.join(str(message).split())}") from None
        return buffer
