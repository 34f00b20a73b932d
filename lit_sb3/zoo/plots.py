"""Report figures (matplotlib, Agg backend, PNG): the rliable set plus per-env learning curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from lit_sb3.zoo.stats import METRICS, Curve, Interval, Profile

__all__ = [
    "algo_colors",
    "plot_aggregates",
    "plot_profiles",
    "plot_improvement",
    "plot_iqm_curves",
    "plot_env_curves",
    "mean_ci_over_seeds",
]

METRIC_TITLES = {"median": "Median", "iqm": "IQM", "mean": "Mean", "optimality_gap": "Optimality gap"}


def _plt():  # noqa: ANN202 - pyplot module
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def algo_colors(algos: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """A fixed colour per algorithm (tab10 in the given order).

    Args:
        algos: algorithm names.
    """
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {a: cmap(i % 10) for i, a in enumerate(algos)}


def _save(fig, path: Path) -> Path:  # noqa: ANN001 - matplotlib Figure
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return path


def plot_aggregates(agg: Mapping[str, Mapping[str, Interval]], path: Path, xlabel: str) -> Path:
    """Four panels (median, IQM, mean, optimality gap): point and 95 % CI bar per algorithm.

    Args:
        agg: algo -> metric -> interval.
        path: PNG to write.
        xlabel: score name for the x axes.
    """
    plt = _plt()
    algos = list(agg)
    colors = algo_colors(algos)
    fig, axes = plt.subplots(1, len(METRICS), figsize=(3.4 * len(METRICS), 0.5 * len(algos) + 1.4), sharey=True)
    for ax, metric in zip(axes, METRICS, strict=True):
        for i, a in enumerate(algos):
            iv = agg[a][metric]
            ax.barh(i, iv.high - iv.low, left=iv.low, height=0.6, color=colors[a], alpha=0.75)
            ax.vlines(iv.point, i - 0.3, i + 0.3, color="k", linewidth=1.5)
        ax.set_title(METRIC_TITLES[metric])
        ax.set_yticks(range(len(algos)), algos)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlabel(xlabel)
    fig.suptitle("Aggregate metrics (95 % stratified-bootstrap CIs)", y=1.04)
    return _save(fig, path)


def plot_profiles(profiles: Mapping[str, Profile], path: Path, xlabel: str) -> Path:
    """Score-distribution performance profiles with CI bands.

    Args:
        profiles: algo -> profile.
        path: PNG to write.
        xlabel: score name (tau axis).
    """
    plt = _plt()
    colors = algo_colors(list(profiles))
    fig, ax = plt.subplots(figsize=(6, 4))
    for a, p in profiles.items():
        ax.plot(p.taus, p.point, color=colors[a], label=a, linewidth=2)
        ax.fill_between(p.taus, p.low, p.high, color=colors[a], alpha=0.2)
    ax.set_xlabel(f"{xlabel} (τ)")
    ax.set_ylabel("Fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Performance profiles")
    return _save(fig, path)


def plot_improvement(poi: Mapping[tuple[str, str], Interval], path: Path) -> Path:
    """P(X > Y) with CIs, one row per pair, and the 0.5 line.

    Args:
        poi: (X, Y) -> interval.
        path: PNG to write.
    """
    plt = _plt()
    pairs = list(poi)
    fig, ax = plt.subplots(figsize=(6, 0.55 * max(1, len(pairs)) + 1.2))
    for i, pair in enumerate(pairs):
        iv = poi[pair]
        credible = iv.low > 0.5 or iv.high < 0.5
        ax.barh(i, iv.high - iv.low, left=iv.low, height=0.6, color="tab:blue" if credible else "tab:gray", alpha=0.7)
        ax.vlines(iv.point, i - 0.3, i + 0.3, color="k", linewidth=1.5)
    ax.axvline(0.5, color="tab:red", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(pairs)), [f"P({x} > {y})" for x, y in pairs])
    ax.set_xlim(0, 1)
    ax.set_xlabel("Probability of improvement")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Probability of improvement (95 % CIs)")
    return _save(fig, path)


def plot_iqm_curves(curves: Mapping[str, Curve], path: Path, xlabel: str, ylabel: str) -> Path:
    """IQM sample-efficiency curves with CI bands.

    Args:
        curves: algo -> curve.
        path: PNG to write.
        xlabel: x axis label.
        ylabel: y axis label.
    """
    plt = _plt()
    colors = algo_colors(list(curves))
    fig, ax = plt.subplots(figsize=(6, 4))
    for a, c in curves.items():
        ax.plot(c.steps, c.point, color=colors[a], label=a, linewidth=2, marker="o", markersize=3)
        ax.fill_between(c.steps, c.low, c.high, color=colors[a], alpha=0.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("IQM sample efficiency (95 % CIs)")
    return _save(fig, path)


def mean_ci_over_seeds(
    values: NDArray[np.float64], *, reps: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Mean over runs and a bootstrap percentile CI of it, at each eval (NaN entries are skipped).

    Args:
        values: ``[runs, evals]``.
        reps: bootstrap replications.
        seed: generator seed.
        confidence: CI coverage.
    """
    rng = np.random.default_rng(seed)
    n, _ = values.shape
    ok = ~np.isnan(values)
    filled = np.where(ok, values, 0.0)
    idx = rng.integers(0, n, size=(reps, n))
    counts = np.zeros((reps, n))
    np.add.at(counts, (np.repeat(np.arange(reps), n), idx.ravel()), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(0) / ok.sum(0)
        boot = (counts @ filled) / (counts @ ok.astype(np.float64))
    alpha = 100 * (1 - confidence) / 2
    low, high = np.nanpercentile(boot, [alpha, 100 - alpha], axis=0)
    return mean, low, high


def plot_env_curves(
    env: str,
    steps: NDArray[np.float64],
    curves: Mapping[str, NDArray[np.float64]],
    path: Path,
    colors: Mapping[str, tuple[float, ...]],
    *,
    reps: int = 2000,
    seed: int = 0,
) -> Path:
    """Learning curves of one env: mean return over seeds ± bootstrap CI, per algorithm.

    Args:
        env: env id (title).
        steps: eval steps.
        curves: algo -> ``[runs, evals]``.
        path: PNG to write.
        colors: algo -> colour.
        reps: bootstrap replications.
        seed: generator seed.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for a, vals in curves.items():
        mean, low, high = mean_ci_over_seeds(vals, reps=reps, seed=seed)
        ax.plot(steps, mean, color=colors[a], label=f"{a} (n={vals.shape[0]})", linewidth=2)
        ax.fill_between(steps, low, high, color=colors[a], alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval/mean_reward")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{env}: mean over seeds (95 % bootstrap CI)")
    return _save(fig, path)
