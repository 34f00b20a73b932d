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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import DTypeLike

from lit_sb3.buffers.base import BaseBuffer, maybe_warn_memory, storage_obs_dtype
from lit_sb3.buffers.seed_replay import SeedReplayBuffer
from lit_sb3.core.preprocessing import get_device
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


def _map_obs(obs: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to an observation value, or to each value of a Dict observation's."""
    return {key: fn(value) for key, value in obs.items()} if isinstance(obs, dict) else fn(obs)


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


class ReplayBuffer(BaseBuffer):
    """Replay buffer of transitions ``(obs, action, reward, next_obs, done)`` with timeout handling.

    A view of a one-seed :class:`~lit_sb3.buffers.seed_replay.SeedReplayBuffer` (:attr:`storage`, which holds the
    replay rules) with SB3's API: indices drawn from torch's global stream, samples normalised with a VecNormalize
    and moved to :attr:`device`.

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

    storage: SeedReplayBuffer

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
        self._init_obs_dtype(obs_dtype)
        self.storage = SeedReplayBuffer(
            1,
            self.buffer_size * self.n_envs,
            observation_space,
            action_space,
            self.n_envs,
            self.storage_device,
            handle_timeout_termination=handle_timeout_termination,
            optimize_memory_usage=optimize_memory_usage,
            obs_dtype=self.obs_dtype,
            grow=False,
            **self._storage_options(),
        )
        maybe_warn_memory(self.nbytes_per_transition() * self.buffer_size * self.n_envs)

    def _init_obs_dtype(self, obs_dtype: DTypeLike | dict[str, DTypeLike] | None) -> None:
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError(f"{type(self).__name__} does not support Dict observation spaces; use DictReplayBuffer.")
        if isinstance(obs_dtype, dict):
            raise ValueError("obs_dtype must be a single dtype for a non-Dict observation space, not a dict")
        self.obs_dtype = storage_obs_dtype(self.observation_space, obs_dtype)

    def _storage_options(self) -> dict[str, Any]:
        """Subclass hook: the storage's n-step or HER arguments."""
        return {}

    # the storage's write position and its fields, seed dimension dropped (views: writing them writes the storage)
    @property  # type: ignore[override]
    def pos(self) -> int:
        return self.storage.pos

    @pos.setter
    def pos(self, value: int) -> None:
        if "storage" in vars(self):  # (BaseBuffer.__init__ sets it before the storage exists)
            self.storage.pos = int(value)

    @property  # type: ignore[override]
    def full(self) -> bool:
        return self.storage.full

    @full.setter
    def full(self, value: bool) -> None:
        if "storage" in vars(self):
            self.storage.full = bool(value)

    def _field(self, prefix: str) -> Any:
        group = self.storage._group(prefix)
        return _map_obs(group, lambda tensor: tensor[0]) if group is not None else None

    @property
    def observations(self) -> Any:
        """``[buffer_size, n_envs, ...]`` observations (a ``{key: tensor}`` dict for Dict spaces)."""
        return self._field("observations")

    @property
    def next_observations(self) -> Any:
        """Next observations as :attr:`observations` (None with ``optimize_memory_usage``)."""
        return self._field("next_observations")

    @property
    def actions(self) -> th.Tensor:
        return self.storage.actions[0]

    @property
    def rewards(self) -> th.Tensor:
        return self.storage.rewards[0]

    @property
    def dones(self) -> th.Tensor:
        return self.storage.dones[0]

    @property
    def timeouts(self) -> th.Tensor:
        return self.storage.timeouts[0]

    def _storage_tensors(self) -> dict[str, th.Tensor]:
        """Every storage tensor by name (Dict buffers use ``observations/<key>``)."""
        return {name: tensor[0] for name, tensor in self.storage._fields.items()}

    def nbytes_per_transition(self) -> int:
        """Bytes of storage per stored transition (observations, next observations, action, reward, flags)."""
        return self.storage.nbytes_per_transition()

    def nbytes(self) -> int:
        """Total bytes held by the storage tensors."""
        return sum(t.numel() * t.element_size() for t in self._storage_tensors().values())

    # ------------------------------------------------------------------
    # Adding
    # ------------------------------------------------------------------

    def add(
        self,
        obs: Any,
        next_obs: Any,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one transition of every env (arrays with a leading ``n_envs`` dim, dicts of them for Dict spaces).

        Args:
            obs: observations.
            next_obs: next observations (the terminal observation when an episode ended).
            action: actions (scaled to [-1, 1] for Box spaces, as SB3's buffer actions).
            reward: rewards.
            done: episode ends (termination or truncation).
            infos: step infos; ``"TimeLimit.truncated"`` marks timeouts.
        """
        timeouts = np.array([info.get("TimeLimit.truncated", False) for info in infos], dtype=np.float32)
        self.storage.add(obs, next_obs, action, reward, done, timeouts, [infos])

    # ------------------------------------------------------------------
    # Sampling
    # ------------------------------------------------------------------

    def _check_not_empty(self) -> None:
        if not self.full and self.pos == 0:
            raise RuntimeError(f"Cannot sample from an empty {type(self).__name__}: add transitions first.")

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> Any:
        """Sample ``batch_size`` transitions uniformly (with replacement), env index uniform too.

        Args:
            batch_size: number of transitions.
            env: VecNormalize whose statistics normalise observations and rewards (None: raw values).
        """
        self._check_not_empty()
        return self._get_samples(self.storage.draw_slots(batch_size, None, self.storage_device)[0], env=env)

    def _env_indices(self, n: int) -> th.Tensor:
        if self.n_envs == 1:
            return th.zeros(n, dtype=th.long, device=self.storage_device)
        return th.randint(0, self.n_envs, (n,), device=self.storage_device)

    def _get_samples(self, batch_inds: th.Tensor | np.ndarray, env: VecNormalize | None = None) -> Any:
        batch_inds = th.as_tensor(batch_inds, dtype=th.long, device=self.storage_device)
        env_inds = self._env_indices(batch_inds.shape[0])
        data = self.storage.gather(batch_inds[None], env_inds[None], self._reward_normalizer(env), seed_major=False)
        return self._to_samples(data, env)

    def _reward_normalizer(self, env: VecNormalize | None) -> Callable[[th.Tensor], th.Tensor] | None:
        """Stored rewards -> ``env``'s normalised ones (float32), None without ``env``."""
        if env is None:
            return None
        return lambda rewards: th.from_numpy(np.ascontiguousarray(self._normalize_reward(rewards.cpu().numpy(), env)))

    def _to_samples(self, data: Any, env: VecNormalize | None) -> Any:
        """The storage's one-seed samples (no seed dimension), observations normalised with ``env``, on
        :attr:`device` (floating point ones in :attr:`sample_float_dtype`)."""
        if env is None and self.sample_float_dtype is None and self.device == self.storage_device:
            return data  # (the common case: nothing to do per field)
        fields = {name: value for name, value in data._asdict().items() if value is not None}
        for name in ("observations", "next_observations"):
            fields[name] = self._normalize_obs_tensor(fields[name], env)
        return type(data)(**{name: _map_obs(value, self._to_device) for name, value in fields.items()})

    @staticmethod
    def _one_seed(data: Any) -> Any:
        """A one-seed storage's seed-major samples without their seed dimension."""
        fields = data._asdict().items()
        return type(data)(**{name: _map_obs(value, lambda t: t[0]) for name, value in fields if value is not None})

    def _to_device(self, tensor: th.Tensor) -> th.Tensor:
        if self.sample_float_dtype is not None and tensor.is_floating_point():
            return tensor.to(self.device, dtype=self.sample_float_dtype, non_blocking=True)
        return tensor.to(self.device, non_blocking=True)

    def _normalize_obs_tensor(self, obs: Any, env: VecNormalize | None) -> Any:
        """Normalise with ``env.normalize_obs`` (numpy), keeping float32 unless the storage is float64."""
        if env is None:
            return obs
        normalized = env.normalize_obs(_map_obs(obs, lambda tensor: tensor.cpu().numpy()))

        def back(array: Any, dtype: np.dtype) -> th.Tensor:
            array = np.asarray(array)
            if array.dtype == np.float64 and dtype != np.float64:
                array = array.astype(np.float32)
            return th.from_numpy(np.ascontiguousarray(array))

        if isinstance(obs, dict):
            return {key: back(normalized[key], self.obs_dtype[key]) for key in obs}  # type: ignore[index]
        return back(normalized, self.obs_dtype)  # type: ignore[arg-type]

    # ------------------------------------------------------------------
    # Save / load (npz + JSON, no pickle)
    # ------------------------------------------------------------------

    def _obs_dtype_json(self) -> Any:
        return _map_obs(self.obs_dtype, lambda dtype: dtype.name)

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

    def save(self, path: PathLike) -> None:
        """Write the buffer to ``path`` (an ``.npz`` file; the name is used as given).

        Args:
            path: file path or writable binary file object.
        """
        rows = self.storage._rows(self.pos, self.full)
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
