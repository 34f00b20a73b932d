"""Base class of rollout and replay buffers, plus dtype helpers shared by them."""

from __future__ import annotations

import os
import warnings
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import DTypeLike

from lit_sb3.core.preprocessing import get_action_dim, get_device, get_obs_shape

if TYPE_CHECKING:
    from lit_sb3.vec_env.vec_normalize import VecNormalize

try:  # optional: only used for the "not enough memory" warning
    import psutil
except ImportError:  # pragma: no cover - depends on the environment
    psutil = None

__all__ = [
    "BaseBuffer",
    "available_memory_bytes",
    "check_declared_buffer",
    "maybe_warn_memory",
    "numpy_to_torch_dtype",
    "storage_action_dtype",
    "storage_obs_dtype",
    "total_memory_bytes",
]


def numpy_to_torch_dtype(dtype: DTypeLike) -> th.dtype:
    """The torch dtype matching a numpy dtype (``np.float32`` -> ``th.float32``)."""
    return th.from_numpy(np.zeros(0, dtype=np.dtype(dtype))).dtype


def storage_obs_dtype(space: spaces.Space, obs_dtype: DTypeLike | None = None) -> np.dtype:
    """Dtype used to store observations of ``space``.

    float64 spaces are stored as float32 (half SB3's memory) unless ``obs_dtype`` says otherwise;
    every other dtype (uint8 images, int8 MultiBinary, int64 Discrete, ...) is kept.

    Args:
        space: a non-Dict observation space.
        obs_dtype: explicit storage dtype (overrides the rule above).
    """
    if obs_dtype is not None:
        return np.dtype(obs_dtype)
    dtype = np.dtype(space.dtype) if space.dtype is not None else np.dtype(np.float32)
    if dtype == np.float64:
        return np.dtype(np.float32)
    return dtype


def storage_action_dtype(dtype: DTypeLike | None) -> np.dtype:
    """Dtype used to store actions: float64 as float32 (as SB3 does), other dtypes kept."""
    dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float32)
    return np.dtype(np.float32) if dtype == np.float64 else dtype


def available_memory_bytes() -> int | None:
    """Available system memory in bytes (psutil when installed, else ``sysconf`` on POSIX), None if unknown."""
    if psutil is not None:
        return int(psutil.virtual_memory().available)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def maybe_warn_memory(total_bytes: int) -> None:
    """Warn like SB3 when a buffer of ``total_bytes`` apparently does not fit in the available memory."""
    available = available_memory_bytes()
    if available is not None and total_bytes > available:
        warnings.warn(
            "This system does not have apparently enough memory to store the complete "
            f"replay buffer {total_bytes / 1e9:.2f}GB > {available / 1e9:.2f}GB",
            stacklevel=3,
        )


def total_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes (psutil when installed, else ``sysconf``), None if unknown."""
    if psutil is not None:
        return int(psutil.virtual_memory().total)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


_DECLARED_MEMORY_FACTOR = 8


def check_declared_buffer(
    buffer_size: Any, observation_space: spaces.Space, action_space: spaces.Space, n_envs: Any = 1
) -> None:
    """Refuse a buffer size read from a file (model archive, replay ``.npz``) that this machine cannot hold.

    The estimate (two observations, an action and three floats per transition) is checked against 8 x the
    physical memory before anything is allocated, so ``buffer_size=10**12`` in a file is one clear error, not an
    OOM, while a large but real buffer (lazily allocated) still loads.

    Args:
        buffer_size: the declared size (transitions over all envs).
        observation_space: the buffer's observation space.
        action_space: the buffer's action space.
        n_envs: the declared number of envs.

    Raises:
        ValueError: not a positive integer, or more than 8 x the bytes the machine has.
    """
    for name, value in (("buffer_size", buffer_size), ("n_envs", n_envs)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    obs = observation_space.spaces.values() if isinstance(observation_space, spaces.Dict) else [observation_space]
    obs_bytes = sum(int(np.prod(s.shape or (1,))) * storage_obs_dtype(s).itemsize for s in obs)
    act_bytes = int(np.prod(action_space.shape or (1,))) * max(np.dtype(action_space.dtype or np.float32).itemsize, 4)
    total = int(buffer_size) * (2 * obs_bytes + act_bytes + 12)
    memory = total_memory_bytes()
    # storage is allocated lazily (zero pages), so a model trained on a big machine still loads on a small one for
    # inference; only a size no machine like this one could ever fill is refused
    if memory is not None and total > _DECLARED_MEMORY_FACTOR * memory:
        raise ValueError(
            f"buffer_size={int(buffer_size):,} would need {total / 2**30:,.1f} GiB, more than "
            f"{_DECLARED_MEMORY_FACTOR} x this machine's {memory / 2**30:,.1f} GiB"
        )


class BaseBuffer(ABC):
    """Base class of rollout and replay buffers.

    Args:
        buffer_size: maximum number of elements in the buffer.
        observation_space: observation space.
        action_space: action space.
        device: torch device the samples are returned on ("auto": CUDA when available).
        n_envs: number of parallel environments.
    """

    observation_space: spaces.Space
    obs_shape: tuple[int, ...]

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
    ) -> None:
        super().__init__()
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, (int, np.integer)) or buffer_size <= 0:
            raise ValueError(f"buffer_size must be a positive integer, got {buffer_size!r}")
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs <= 0:
            raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}")
        self.buffer_size = int(buffer_size)
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_shape = get_obs_shape(observation_space)  # type: ignore[assignment]
        self.action_dim = get_action_dim(action_space)
        self.pos = 0
        self.full = False
        self.device = get_device(device)
        self.n_envs = int(n_envs)

    @staticmethod
    def swap_and_flatten(arr: np.ndarray) -> np.ndarray:
        """Reshape ``[n_steps, n_envs, ...]`` to ``[n_envs * n_steps, ...]`` (env-major, order kept per env).

        Args:
            arr: array of shape ``[n_steps, n_envs, ...]`` (a trailing 1 is added to 2-D arrays).
        """
        shape = arr.shape
        if len(shape) < 3:
            shape = (*shape, 1)
        return arr.swapaxes(0, 1).reshape(shape[0] * shape[1], *shape[2:])

    def size(self) -> int:
        """Current number of (time) slots filled."""
        if self.full:
            return self.buffer_size
        return self.pos

    def add(self, *args: Any, **kwargs: Any) -> None:
        """Add elements to the buffer."""
        raise NotImplementedError()

    def extend(self, *args: Any, **kwargs: Any) -> None:
        """Add a batch of transitions, one ``add`` per element along the first axis."""
        for data in zip(*args, strict=True):
            self.add(*data)

    def reset(self) -> None:
        """Empty the buffer."""
        self.pos = 0
        self.full = False

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> Any:
        """Sample ``batch_size`` elements uniformly.

        Args:
            batch_size: number of elements to sample.
            env: VecNormalize used to normalise observations/rewards (None: no normalisation).
        """
        upper_bound = self.buffer_size if self.full else self.pos
        batch_inds = np.random.randint(0, upper_bound, size=batch_size)
        return self._get_samples(batch_inds, env=env)

    @abstractmethod
    def _get_samples(self, batch_inds: Any, env: VecNormalize | None = None) -> Any:
        raise NotImplementedError()

    @staticmethod
    def _normalize_obs(
        obs: np.ndarray | dict[str, np.ndarray], env: VecNormalize | None = None
    ) -> np.ndarray | dict[str, np.ndarray]:
        if env is not None:
            return env.normalize_obs(obs)
        return obs

    @staticmethod
    def _normalize_reward(reward: np.ndarray, env: VecNormalize | None = None) -> np.ndarray:
        if env is not None:
            return np.asarray(env.normalize_reward(reward)).astype(np.float32)
        return reward
