"""Running mean and variance of a data stream (parallel algorithm of Chan et al.)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RunningMeanStd"]


class RunningMeanStd:
    """Running mean/variance, updated with batches.

    Args:
        epsilon: initial count (avoids a division by zero before the first update).
        shape: shape of one data point.
    """

    def __init__(self, epsilon: float = 1e-4, shape: tuple[int, ...] = ()) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = float(epsilon)

    def copy(self) -> RunningMeanStd:
        """An independent copy."""
        new_object = RunningMeanStd(shape=self.mean.shape)
        new_object.mean = self.mean.copy()
        new_object.var = self.var.copy()
        new_object.count = float(self.count)
        return new_object

    def combine(self, other: RunningMeanStd) -> None:
        """Merge the statistics of ``other`` into this one."""
        self.update_from_moments(other.mean, other.var, other.count)

    def update(self, arr: np.ndarray) -> None:
        """Update with a batch (first axis = samples)."""
        arr = np.asarray(arr)
        self.update_from_moments(np.mean(arr, axis=0), np.var(arr, axis=0), arr.shape[0])

    def update_from_moments(self, batch_mean: np.ndarray, batch_var: np.ndarray, batch_count: float) -> None:
        """Update from a batch's mean, variance and size."""
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        new_mean = self.mean + delta * batch_count / tot_count
        m_a = self.var * self.count
        m_b = batch_var * batch_count
        m_2 = m_a + m_b + np.square(delta) * self.count * batch_count / tot_count
        self.mean = new_mean
        self.var = m_2 / tot_count
        self.count = float(tot_count)

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state (lists and floats: JSON- and ``torch.load(weights_only=True)``-safe)."""
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "count": float(self.count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` (lists or arrays); the shape must match.

        Args:
            state: dict with ``mean``, ``var`` and ``count``.
        """
        missing = {"mean", "var", "count"} - set(state)
        if missing:
            raise KeyError(f"RunningMeanStd state is missing {sorted(missing)}; expected keys mean, var, count.")
        mean = np.asarray(state["mean"], dtype=np.float64)
        var = np.asarray(state["var"], dtype=np.float64)
        if mean.shape != self.mean.shape or var.shape != self.var.shape:
            raise ValueError(
                f"RunningMeanStd shape mismatch: stored mean {mean.shape} / var {var.shape}, expected {self.mean.shape}."
            )
        self.mean, self.var, self.count = mean, var, float(state["count"])

    def __repr__(self) -> str:
        return f"RunningMeanStd(shape={self.mean.shape}, count={self.count})"
