"""The vectorised stratified bootstrap: interval estimates of aggregate metrics, performance profiles,
probability of improvement and IQM curves, all bootstrap replications at once (see :mod:`lit_sb3.zoo.stats`)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

METRICS: tuple[str, ...] = ("median", "iqm", "mean", "optimality_gap")
_CHUNK_ELEMENTS = 2_000_000  # reps × runs per chunk: bounds memory to a few tens of MB

Tasks = list[NDArray[np.float64]]
ScoreInput = ArrayLike | Sequence[ArrayLike]


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval.

    Args:
        point: the estimate on the observed data.
        low: lower CI bound.
        high: upper CI bound.
    """

    point: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        """The three numbers as a dict."""
        return {"point": self.point, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Profile:
    """A performance profile (fraction of runs with score > tau) with pointwise CIs.

    Args:
        taus: thresholds.
        point: fraction of runs above each tau.
        low: lower CI bound per tau.
        high: upper CI bound per tau.
    """

    taus: NDArray[np.float64]
    point: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


@dataclass(frozen=True)
class Curve:
    """IQM per evaluation step with pointwise CIs.

    Args:
        steps: env steps of the evaluations.
        point: IQM at each step.
        low: lower CI bound per step.
        high: upper CI bound per step.
    """

    steps: NDArray[np.float64]
    point: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


def as_tasks(scores: ScoreInput) -> Tasks:
    """Normalise scores to a list of per-task arrays (runs first).

    Args:
        scores: runs × tasks [× evals] array, or a sequence with one array per task (runs [× evals]).
    """
    if isinstance(scores, np.ndarray):
        if scores.ndim < 2:
            raise ValueError(f"scores must be runs x tasks, got shape {scores.shape}")
        tasks = [np.asarray(scores[:, t], dtype=np.float64) for t in range(scores.shape[1])]
    else:
        tasks = [np.asarray(s, dtype=np.float64) for s in scores]
    if not tasks or any(t.shape[0] == 0 for t in tasks):
        raise ValueError("every task needs at least one run")
    return tasks


def iqm(values: ArrayLike) -> float:
    """Interquartile mean (25 % trimmed mean, as ``scipy.stats.trim_mean(x, 0.25, axis=None)``).

    Args:
        values: any array; it is flattened.
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    cut = int(0.25 * x.size)
    return float(x[cut : x.size - cut].mean())


def _percentiles(values: NDArray[np.float64], confidence: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    alpha = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(values, [alpha, 100.0 - alpha], axis=0)
    return low, high


def _chunks(reps: int, n_runs: int) -> list[int]:
    size = max(1, _CHUNK_ELEMENTS // max(1, n_runs))
    return [min(size, reps - start) for start in range(0, reps, size)]


def _counts(rng: np.random.Generator, reps: int, sizes: Sequence[int]) -> NDArray[np.float64]:
    """Stratified resample as counts: ``[reps, sum(sizes)]``, each task's block summing to its size."""
    blocks = []
    for n in sizes:
        idx = rng.integers(0, n, size=(reps, n))
        flat = (idx + (np.arange(reps) * n)[:, None]).ravel()
        blocks.append(np.bincount(flat, minlength=reps * n).reshape(reps, n))
    return np.concatenate(blocks, axis=1).astype(np.float64)


def _weighted_iqm(sorted_values: NDArray[np.float64], counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """IQM of each resample given counts aligned with ``sorted_values`` (ascending); exact."""
    n = sorted_values.shape[-1]
    cut = int(0.25 * n)
    lo, hi = cut, n - cut
    end = np.cumsum(counts, axis=-1)
    start = end - counts
    inside = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)
    return (inside * sorted_values).sum(axis=-1) / (hi - lo)


class _Pooled:
    """One algorithm's final scores pooled over tasks, with per-task bookkeeping."""

    def __init__(self, scores: ScoreInput) -> None:
        self.tasks = as_tasks(scores)
        if any(t.ndim != 1 for t in self.tasks):
            raise ValueError("final scores must be runs x tasks (one value per run)")
        self.sizes = [t.size for t in self.tasks]
        self.values = np.concatenate(self.tasks)
        self.order = np.argsort(self.values, kind="stable")
        self.sorted = self.values[self.order]
        self.task_of = np.repeat(np.arange(len(self.tasks)), self.sizes)
        # pooled-run -> per-task-mean weights: [n_total, n_tasks], 1/n_t on the task's runs
        self.task_weights = np.zeros((self.values.size, len(self.tasks)))
        self.task_weights[np.arange(self.values.size), self.task_of] = 1.0 / np.repeat(self.sizes, self.sizes)

    def metrics(self, counts: NDArray[np.float64], gamma: float) -> NDArray[np.float64]:
        """All four metrics for each resample: ``[reps, 4]`` in :data:`METRICS` order."""
        task_means = counts * self.values @ self.task_weights  # [reps, tasks]
        n = self.values.size
        return np.stack(
            [
                np.median(task_means, axis=1),
                _weighted_iqm(self.sorted, counts[:, self.order]),
                task_means.mean(axis=1),
                gamma - counts @ np.minimum(self.values, gamma) / n,
            ],
            axis=1,
        )


def aggregate_point(scores: ScoreInput, gamma: float = 1.0) -> dict[str, float]:
    """Point estimates of median, IQM, mean and optimality gap, computed by ``rliable.metrics``.

    Run-level metrics (IQM, optimality gap) pool all runs; task-level ones (median, mean) use per-task means,
    so a ragged input (tasks with different numbers of runs) reads as rliable reads a full matrix.

    Args:
        scores: runs × tasks matrix or per-task arrays.
        gamma: optimality-gap threshold.
    """
    from rliable import metrics

    tasks = as_tasks(scores)
    pooled = np.concatenate(tasks)[:, None]  # runs × 1: every run weighs 1
    task_means = np.array([[t.mean() for t in tasks]])  # 1 × tasks
    return {
        "median": float(metrics.aggregate_median(task_means)),
        "iqm": float(metrics.aggregate_iqm(pooled)),
        "mean": float(metrics.aggregate_mean(task_means)),
        "optimality_gap": float(metrics.aggregate_optimality_gap(pooled, gamma)),
    }


def aggregate_intervals(
    score_dict: Mapping[str, ScoreInput],
    *,
    reps: int = 50_000,
    seed: int = 0,
    confidence: float = 0.95,
    gamma: float = 1.0,
) -> dict[str, dict[str, Interval]]:
    """Median, IQM, mean and optimality gap with stratified-bootstrap percentile CIs, per algorithm.

    Args:
        score_dict: algorithm -> runs × tasks matrix (or per-task arrays; algorithms may differ in runs).
        reps: bootstrap replications.
        seed: seed of the ``np.random.Generator``.
        confidence: CI coverage.
        gamma: optimality-gap threshold.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, Interval]] = {}
    for algo, scores in score_dict.items():
        pooled = _Pooled(scores)
        point = aggregate_point(pooled.tasks, gamma)
        boot = np.concatenate(
            [pooled.metrics(_counts(rng, r, pooled.sizes), gamma) for r in _chunks(reps, pooled.values.size)]
        )
        low, high = _percentiles(boot, confidence)
        out[algo] = {m: Interval(point[m], float(low[i]), float(high[i])) for i, m in enumerate(METRICS)}
    return out


def score_distribution(scores: ScoreInput, taus: ArrayLike) -> NDArray[np.float64]:
    """Fraction of runs (pooled over tasks) with score > tau, for each tau.

    Args:
        scores: runs × tasks matrix or per-task arrays.
        taus: thresholds.
    """
    values = np.concatenate(as_tasks(scores))
    return (values[:, None] > np.asarray(taus, dtype=np.float64)[None, :]).mean(axis=0)


def performance_profiles(
    score_dict: Mapping[str, ScoreInput],
    taus: ArrayLike,
    *,
    reps: int = 2_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Profile]:
    """Score-distribution performance profiles with bootstrap CIs (rliable's ``create_performance_profile``).

    Args:
        score_dict: algorithm -> runs × tasks matrix or per-task arrays.
        taus: thresholds.
        reps: bootstrap replications.
        seed: seed of the ``np.random.Generator``.
        confidence: CI coverage.
    """
    rng = np.random.default_rng(seed)
    tau_arr = np.asarray(taus, dtype=np.float64)
    out: dict[str, Profile] = {}
    for algo, scores in score_dict.items():
        pooled = _Pooled(scores)
        above = (pooled.values[:, None] > tau_arr[None, :]).astype(np.float64)  # [runs, taus]
        n = pooled.values.size
        boot = np.concatenate([_counts(rng, r, pooled.sizes) @ above / n for r in _chunks(reps, n)])
        low, high = _percentiles(boot, confidence)
        out[algo] = Profile(tau_arr, above.mean(axis=0), low, high)
    return out


def _kernel(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """``K[i, j] = 1 if x_i > y_j, 0.5 if equal, else 0`` (the Mann-Whitney U kernel)."""
    return (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])


def probability_of_improvement(scores_x: ScoreInput, scores_y: ScoreInput) -> float:
    """P(X > Y) by ``rliable.metrics``: per task Mann-Whitney U / (n_x n_y), averaged over tasks.

    Args:
        scores_x: runs × tasks of algorithm X (or per-task arrays).
        scores_y: runs × tasks of algorithm Y, same tasks in the same order.
    """
    from rliable import metrics

    tx, ty = as_tasks(scores_x), as_tasks(scores_y)
    if len(tx) != len(ty):
        raise ValueError(f"X has {len(tx)} tasks, Y has {len(ty)}")
    return float(
        np.mean([metrics.probability_of_improvement(x[:, None], y[:, None]) for x, y in zip(tx, ty, strict=True)])
    )


def improvement_intervals(
    score_dict: Mapping[str, ScoreInput],
    *,
    reps: int = 2_000,
    seed: int = 0,
    confidence: float = 0.95,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> dict[tuple[str, str], Interval]:
    """P(X > Y) with CIs for each pair, both algorithms resampled independently and stratified per task.

    Args:
        score_dict: algorithm -> runs × tasks matrix or per-task arrays (same tasks for all).
        reps: bootstrap replications.
        seed: seed of the ``np.random.Generator``.
        confidence: CI coverage.
        pairs: (X, Y) pairs; default every pair in ``score_dict`` order (P(Y > X) = 1 − P(X > Y)).
    """
    rng = np.random.default_rng(seed)
    tasks = {a: as_tasks(s) for a, s in score_dict.items()}
    pairs = list(pairs) if pairs is not None else list(itertools.combinations(score_dict, 2))
    out: dict[tuple[str, str], Interval] = {}
    for x_name, y_name in pairs:
        tx, ty = tasks[x_name], tasks[y_name]
        n_total = sum(t.size for t in tx) + sum(t.size for t in ty)
        boot_parts = []
        for r in _chunks(reps, n_total):
            acc = np.zeros(r)
            for x, y in zip(tx, ty, strict=True):
                cx = _counts(rng, r, [x.size])
                cy = _counts(rng, r, [y.size])
                acc += ((cx @ _kernel(x, y)) * cy).sum(axis=1) / (x.size * y.size)
            boot_parts.append(acc / len(tx))
        low, high = _percentiles(np.concatenate(boot_parts), confidence)
        out[(x_name, y_name)] = Interval(probability_of_improvement(tx, ty), float(low), float(high))
    return out


def iqm_curves(
    curve_dict: Mapping[str, ScoreInput],
    steps: ArrayLike,
    *,
    reps: int = 2_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Curve]:
    """IQM over runs × tasks at each evaluation, with stratified-bootstrap CIs (sample-efficiency curves).

    Args:
        curve_dict: algorithm -> runs × tasks × evals array, or per-task ``[runs, evals]`` arrays.
        steps: env steps of the evaluations (length evals).
        reps: bootstrap replications.
        seed: seed of the ``np.random.Generator``.
        confidence: CI coverage.
    """
    rng = np.random.default_rng(seed)
    step_arr = np.asarray(steps, dtype=np.float64)
    out: dict[str, Curve] = {}
    for algo, scores in curve_dict.items():
        tasks = as_tasks(scores)
        sizes = [t.shape[0] for t in tasks]
        values = np.concatenate(tasks, axis=0)  # [runs, evals]
        if values.ndim != 2 or values.shape[1] != step_arr.size:
            raise ValueError(f"{algo}: curves must be runs x tasks x {step_arr.size} evals, got {values.shape}")
        order = np.argsort(values, axis=0, kind="stable")  # per eval
        sorted_values = np.take_along_axis(values, order, axis=0).T  # [evals, runs]
        from rliable import metrics

        point = np.array([metrics.aggregate_iqm(values[:, e]) for e in range(step_arr.size)], dtype=np.float64)
        n_evals = step_arr.size
        boot_parts = []
        for r in _chunks(reps, values.shape[0] * n_evals):
            counts = _counts(rng, r, sizes)  # [r, runs], shared by all evals
            per_eval = counts[:, order.T]  # [r, evals, runs]
            boot_parts.append(_weighted_iqm(sorted_values[None], per_eval))
        low, high = _percentiles(np.concatenate(boot_parts), confidence)
        out[algo] = Curve(step_arr, point, low, high)
    return out
