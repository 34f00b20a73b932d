"""Action noise for exploration with deterministic policies (TD3, DDPG), as in SB3.

Noise objects are stored in model files as plain data (:func:`noise_to_dict` / :func:`noise_from_dict`),
never pickled. They draw from numpy's global generator, as SB3's do, unless given their own (:attr:`ActionNoise.rng`:
a K-seed model gives seed i's noise seed i's numpy stream, so that it draws what its separate run draws).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = [
    "ActionNoise",
    "NormalActionNoise",
    "OrnsteinUhlenbeckActionNoise",
    "VectorizedActionNoise",
    "noise_from_dict",
    "noise_to_dict",
]


def _as_float_array(value: ArrayLike, name: str) -> np.ndarray:
    """Convert ``value`` to a float64 array, with a clear error for non-numeric input."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}") from e
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return arr


def _check_mean_sigma(mean: np.ndarray, sigma: np.ndarray) -> None:
    if np.any(sigma < 0):
        raise ValueError(f"sigma must be >= 0 everywhere, got {sigma!r}")
    try:
        np.broadcast_shapes(mean.shape, sigma.shape)
    except ValueError as e:
        raise ValueError(
            f"mean (shape {mean.shape}) and sigma (shape {sigma.shape}) must have the same or broadcastable shapes"
        ) from e


class ActionNoise(ABC):
    """Base class of action noise processes.

    Attributes:
        rng: the numpy generator the draws come from; None (the default): numpy's global one (``np.random``), in
            SB3's order. Not stored with the noise (a model restores its generators itself).
    """

    rng: np.random.RandomState | None = None

    @property
    def _random(self) -> Any:
        """Where draws come from: :attr:`rng`, else the ``np.random`` module (the global generator)."""
        return np.random if self.rng is None else self.rng

    def reset(self) -> None:
        """Reset the noise at the end of an episode (no-op by default)."""

    @abstractmethod
    def __call__(self) -> np.ndarray:
        raise NotImplementedError()


class NormalActionNoise(ActionNoise):
    """Gaussian action noise.

    Args:
        mean: mean of the noise.
        sigma: standard deviation of the noise (>= 0).
        dtype: dtype of the returned noise.
    """

    def __init__(self, mean: ArrayLike, sigma: ArrayLike, dtype: DTypeLike = np.float32) -> None:
        super().__init__()
        self._mu = _as_float_array(mean, "mean")
        self._sigma = _as_float_array(sigma, "sigma")
        _check_mean_sigma(self._mu, self._sigma)
        self._dtype = np.dtype(dtype)

    def __call__(self) -> np.ndarray:
        return np.asarray(self._random.normal(self._mu, self._sigma)).astype(self._dtype)

    def __repr__(self) -> str:
        return f"NormalActionNoise(mu={self._mu}, sigma={self._sigma})"


class OrnsteinUhlenbeckActionNoise(ActionNoise):
    """Ornstein-Uhlenbeck action noise (Brownian motion with friction).

    Args:
        mean: mean the process reverts to.
        sigma: scale of the noise (>= 0).
        theta: rate of mean reversion.
        dt: time step of the discretisation (> 0).
        initial_noise: value of the process after ``reset()`` (zeros if None).
        dtype: dtype of the returned noise.
    """

    def __init__(
        self,
        mean: ArrayLike,
        sigma: ArrayLike,
        theta: float = 0.15,
        dt: float = 1e-2,
        initial_noise: ArrayLike | None = None,
        dtype: DTypeLike = np.float32,
    ) -> None:
        super().__init__()
        self._mu = _as_float_array(mean, "mean")
        self._sigma = _as_float_array(sigma, "sigma")
        _check_mean_sigma(self._mu, self._sigma)
        if dt <= 0:
            raise ValueError(f"dt must be > 0, got {dt}")
        self._theta = float(theta)
        self._dt = float(dt)
        self._dtype = np.dtype(dtype)
        self.initial_noise = None if initial_noise is None else _as_float_array(initial_noise, "initial_noise")
        self.noise_prev = np.zeros_like(self._mu)
        self.reset()

    def __call__(self) -> np.ndarray:
        noise = (
            self.noise_prev
            + self._theta * (self._mu - self.noise_prev) * self._dt
            + self._sigma * np.sqrt(self._dt) * self._random.normal(size=self._mu.shape)
        )
        self.noise_prev = noise
        return np.asarray(noise).astype(self._dtype)

    def reset(self) -> None:
        """Reset the process to ``initial_noise`` (or zeros)."""
        self.noise_prev = (
            np.array(self.initial_noise, dtype=np.float64)
            if self.initial_noise is not None
            else np.zeros_like(self._mu)
        )

    def __repr__(self) -> str:
        return f"OrnsteinUhlenbeckActionNoise(mu={self._mu}, sigma={self._sigma})"


class VectorizedActionNoise(ActionNoise):
    """One independent copy of ``base_noise`` per parallel environment.

    Args:
        base_noise: the noise to copy (deep copies, one per env).
        n_envs: number of parallel environments (integer > 0).
    """

    def __init__(self, base_noise: ActionNoise, n_envs: int) -> None:
        super().__init__()
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or int(n_envs) <= 0:
            raise ValueError(f"Expected n_envs={n_envs!r} to be a positive integer greater than 0")
        self.n_envs = int(n_envs)
        self.base_noise = base_noise
        self.noises = [copy.deepcopy(self.base_noise) for _ in range(self.n_envs)]
        self.rng = base_noise.rng  # the same generator, not the deep copies' copies of it

    @property  # type: ignore[override]
    def rng(self) -> np.random.RandomState | None:
        """The generator of every env's noise (None: numpy's global one); setting it sets theirs."""
        return self._rng

    @rng.setter
    def rng(self, rng: np.random.RandomState | None) -> None:
        self._rng = rng
        for noise in getattr(self, "_noises", ()):
            noise.rng = rng

    def reset(self, indices: Iterable[int] | None = None) -> None:
        """Reset all the noise processes, or only those listed in ``indices``.

        Args:
            indices: env indices to reset; None resets all.
        """
        if indices is None:
            indices = range(len(self.noises))
        for index in indices:
            if not 0 <= int(index) < self.n_envs:
                raise IndexError(f"Noise index {index} out of range: allowed 0..{self.n_envs - 1}")
            self.noises[int(index)].reset()

    def __repr__(self) -> str:
        return f"VecNoise(BaseNoise={self.base_noise!r}), n_envs={len(self.noises)})"

    def __call__(self) -> np.ndarray:
        """Stack one draw of each env's noise: shape ``(n_envs, *action_shape)``."""
        return np.stack([noise() for noise in self.noises])

    @property
    def base_noise(self) -> ActionNoise:
        return self._base_noise

    @base_noise.setter
    def base_noise(self, base_noise: ActionNoise) -> None:
        if base_noise is None:
            raise ValueError("Expected base_noise to be an instance of ActionNoise, not None")
        if not isinstance(base_noise, ActionNoise):
            raise TypeError(f"Expected base_noise to be an instance of ActionNoise, got {type(base_noise).__name__}")
        self._base_noise = base_noise

    @property
    def noises(self) -> list[ActionNoise]:
        return self._noises

    @noises.setter
    def noises(self, noises: Iterable[ActionNoise]) -> None:
        noises = list(noises)
        if len(noises) != self.n_envs:
            raise ValueError(f"Expected a list of {self.n_envs} ActionNoises, found {len(noises)}.")
        different_types = [i for i, noise in enumerate(noises) if not isinstance(noise, type(self.base_noise))]
        if different_types:
            raise ValueError(
                f"Noise instances at indices {different_types} don't match the type of base_noise "
                f"({type(self.base_noise).__name__})"
            )
        self._noises = noises
        for noise in noises:
            noise.reset()
            noise.rng = getattr(self, "_rng", None)


# ----------------------------------------------------------------------------------------------------------
# Serialisation as plain data
# ----------------------------------------------------------------------------------------------------------


def noise_to_dict(noise: ActionNoise | None) -> dict[str, Any] | None:
    """JSON-safe description of a noise object, including the OU process state.

    Args:
        noise: a NormalActionNoise, OrnsteinUhlenbeckActionNoise or VectorizedActionNoise (or None).

    Returns:
        a dict of lists/numbers/strings (None for None).
    """
    if noise is None:
        return None
    if isinstance(noise, NormalActionNoise):
        return {
            "type": "NormalActionNoise",
            "mean": noise._mu.tolist(),
            "sigma": noise._sigma.tolist(),
            "dtype": noise._dtype.name,
        }
    if isinstance(noise, OrnsteinUhlenbeckActionNoise):
        return {
            "type": "OrnsteinUhlenbeckActionNoise",
            "mean": noise._mu.tolist(),
            "sigma": noise._sigma.tolist(),
            "theta": noise._theta,
            "dt": noise._dt,
            "initial_noise": None if noise.initial_noise is None else np.asarray(noise.initial_noise).tolist(),
            "dtype": noise._dtype.name,
            "noise_prev": np.asarray(noise.noise_prev, dtype=np.float64).tolist(),
        }
    if isinstance(noise, VectorizedActionNoise):
        return {
            "type": "VectorizedActionNoise",
            "n_envs": noise.n_envs,
            "base_noise": noise_to_dict(noise.base_noise),
            "noises": [noise_to_dict(n) for n in noise.noises],
        }
    raise TypeError(
        f"Cannot store action noise of type {type(noise).__name__} as data; supported: NormalActionNoise, "
        "OrnsteinUhlenbeckActionNoise, VectorizedActionNoise"
    )


def noise_from_dict(data: dict[str, Any] | None) -> ActionNoise | None:
    """Rebuild a noise object stored by :func:`noise_to_dict`.

    Args:
        data: the dict (None gives None).
    """
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"Expected a dict describing an action noise, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "NormalActionNoise":
        return NormalActionNoise(
            np.asarray(data["mean"]), np.asarray(data["sigma"]), dtype=data.get("dtype", "float32")
        )
    if kind == "OrnsteinUhlenbeckActionNoise":
        noise = OrnsteinUhlenbeckActionNoise(
            np.asarray(data["mean"]),
            np.asarray(data["sigma"]),
            theta=float(data["theta"]),
            dt=float(data["dt"]),
            initial_noise=None if data.get("initial_noise") is None else np.asarray(data["initial_noise"]),
            dtype=data.get("dtype", "float32"),
        )
        if data.get("noise_prev") is not None:
            noise.noise_prev = np.asarray(data["noise_prev"], dtype=np.float64)
        return noise
    if kind == "VectorizedActionNoise":
        base = noise_from_dict(data["base_noise"])
        assert base is not None
        vec = VectorizedActionNoise(base, int(data["n_envs"]))
        if data.get("noises") is not None:
            noises = [noise_from_dict(d) for d in data["noises"]]
            # restore per-env states after the setter's reset()
            states = [getattr(n, "noise_prev", None) for n in noises]
            vec.noises = noises  # type: ignore[assignment]
            for n, state in zip(vec.noises, states, strict=True):
                if state is not None:
                    n.noise_prev = state  # type: ignore[attr-defined]
        return vec
    raise ValueError(
        f"Unknown action noise type {kind!r}; known: NormalActionNoise, OrnsteinUhlenbeckActionNoise, "
        "VectorizedActionNoise"
    )
