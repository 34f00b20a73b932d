"""Small numeric helpers."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["explained_variance", "safe_mean"]


def safe_mean(arr: np.ndarray | list | Iterable) -> float:
    """Mean that returns NaN (without a warning) for an empty input."""
    arr = np.asarray(list(arr) if not isinstance(arr, (np.ndarray, list)) else arr, dtype=np.float64)
    return float("nan") if arr.size == 0 else float(np.mean(arr))


def explained_variance(y_pred: np.ndarray, y_true: np.ndarray) -> float:
    """1 - Var[y_true - y_pred] / Var[y_true]; NaN when Var[y_true] is 0."""
    var_y = np.var(y_true)
    return float("nan") if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)
