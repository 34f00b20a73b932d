"""Report figures: the rliable set drawn by ``rliable.plot_utils``, plus per-env learning curves.

Every figure is written twice, as PNG at :data:`DPI` dots per inch and as SVG (same stem), so it stays sharp
in print and in the HTML report. ``rliable.plot_utils`` draws interval estimates, performance profiles,
probability of improvement and sample-efficiency curves as in Agarwal et al. (2021); on top of its
probability-of-improvement figure each point estimate also gets a marker, so a degenerate interval (P = 1.0
[1.0, 1.0]) is still visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
    "plot_sequential",
    "plot_final_scores",
]

DPI = 200

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
    """Write ``path`` (PNG, :data:`DPI`) and the same figure as SVG next to it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    fig.savefig(path.with_suffix(".svg"), bbox_inches="tight")
    _plt().close(fig)
    return path


def _plot_utils():  # noqa: ANN202 - the rliable.plot_utils module
    _plt()
    from rliable import plot_utils

    return plot_utils


def _with_n(algo: str, n_runs: Mapping[str, int] | None) -> str:
    """``"sac (n=10)"``: the algorithm's label with its number of runs (when known)."""
    return f"{algo} (n={n_runs[algo]})" if n_runs and algo in n_runs else algo


def plot_aggregates(agg: Mapping[str, Mapping[str, Interval]], path: Path, xlabel: str,
                    n_runs: Mapping[str, int] | None = None) -> Path:  # fmt: skip
    """Four panels (median, IQM, mean, optimality gap): ``rliable.plot_utils.plot_interval_estimates``.

    Args:
        agg: algo -> metric -> interval.
        path: PNG to write (and its SVG).
        xlabel: score name for the x axes.
        n_runs: algo -> runs behind its intervals (shown as ``algo (n=...)``).
    """
    algos = list(agg)
    labels = {a: _with_n(a, n_runs) for a in algos}
    points = {labels[a]: np.array([agg[a][m].point for m in METRICS]) for a in algos}
    cis = {labels[a]: np.array([[agg[a][m].low for m in METRICS], [agg[a][m].high for m in METRICS]]) for a in algos}
    colors = algo_colors(algos)
    fig, _ = _plot_utils().plot_interval_estimates(
        points,
        cis,
        metric_names=[METRIC_TITLES[m] for m in METRICS],
        algorithms=[labels[a] for a in algos],
        colors={labels[a]: colors[a] for a in algos},
        xlabel=xlabel,
        row_height=max(0.5, 2.2 / len(algos)),
        max_ticks=3,
        xlabel_y_coordinate=-0.18,
    )
    return _save(fig, path)


def plot_profiles(profiles: Mapping[str, Profile], path: Path, xlabel: str) -> Path:
    """Score-distribution performance profiles with CI bands: ``rliable.plot_utils.plot_performance_profiles``.

    Args:
        profiles: algo -> profile.
        path: PNG to write (and its SVG).
        xlabel: score name (tau axis).
    """
    plt = _plt()
    algos = list(profiles)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    taus = next(iter(profiles.values())).taus
    _plot_utils().plot_performance_profiles(
        {a: p.point for a, p in profiles.items()},
        taus,
        performance_profile_cis={a: (p.low, p.high) for a, p in profiles.items()},
        colors=algo_colors(algos),
        ax=ax,
        xlabel=f"{xlabel} (τ)",
        ylabel="Fraction of runs with score > τ",
        labelsize="large",
        ticklabelsize="medium",
        legend=True,
    )
    ax.set_title("Performance profiles (95 % CI bands)")
    return _save(fig, path)


def plot_improvement(
    poi: Mapping[tuple[str, str], Interval],
    path: Path,
    verdicts: Mapping[tuple[str, str], bool] | None = None,
    n_runs: Mapping[str, int] | None = None,
    interval_name: str = "95 % CI",
) -> Path:
    """P(X > Y) with CIs, one row per pair: ``rliable.plot_utils.plot_probability_of_improvement``.

    Each point estimate also gets a black diamond, and the x axis runs a little past [0, 1], so a pair whose
    interval is degenerate (width 0) is still visible.

    Args:
        poi: (X, Y) -> interval.
        path: PNG to write (and its SVG).
        verdicts: (X, Y) -> whether the pair has a verdict of superiority (blue) or not (gray), from the report's
            error-controlled decision (:func:`lit_sb3.zoo.report.control.pair_verdicts`); default: none (all gray).
            The CI is drawn, never tested here.
        n_runs: algo -> runs behind its scores (shown as ``algo (n=...)`` in each pair's label).
        interval_name: what the interval is (the title says it).
    """
    plt = _plt()
    pairs = list(poi)
    fig, ax = plt.subplots(figsize=(6.5, 0.6 * max(1, len(pairs)) + 1.4))
    verdicts = verdicts or {}
    colors = ["tab:blue" if verdicts.get(p, False) else "tab:gray" for p in pairs]
    _plot_utils().plot_probability_of_improvement(
        {f"{_with_n(x, n_runs)},{_with_n(y, n_runs)}": poi[(x, y)].point for x, y in pairs},
        {f"{_with_n(x, n_runs)},{_with_n(y, n_runs)}": np.array([poi[(x, y)].low, poi[(x, y)].high]) for x, y in pairs},
        ax=ax,
        colors=colors,
        xticks=[0.0, 0.25, 0.5, 0.75, 1.0],
        labelsize="large",
        ticklabelsize="medium",
    )
    ax.plot([poi[p].point for p in pairs], range(len(pairs)), "D", color="k", markersize=6, zorder=5)
    ax.axvline(0.5, color="tab:red", linestyle="--", linewidth=1)
    ax.set_xlim(-0.04, 1.04)
    ax.set_title(f"P(X > Y): point estimate and {interval_name}", fontsize="medium")
    return _save(fig, path)


def plot_iqm_curves(curves: Mapping[str, Curve], path: Path, xlabel: str, ylabel: str, *,
                    n_runs: Mapping[str, int] | None = None, interpolated: Sequence[str] = ()) -> Path:  # fmt: skip
    """IQM sample-efficiency curves with CI bands (``rliable.plot_utils.plot_sample_efficiency_curve``), each
    algorithm drawn at its own steps (``curve.steps``): a marker is a measured evaluation, hollow where
    interpolated between a run's evaluations (``interpolated``).

    Args:
        curves: algo -> curve.
        path: PNG to write (and its SVG).
        xlabel: x axis label.
        ylabel: y axis label.
        n_runs: algo -> runs behind its curve (shown as ``algo (n=...)``).
        interpolated: algorithms whose points are (partly) interpolated.
    """
    plt = _plt()
    algos = list(curves)
    colors = algo_colors(algos)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, a in enumerate(algos):
        label = _with_n(a, n_runs)
        c = curves[a]
        _plot_utils().plot_sample_efficiency_curve(
            c.steps,
            {label: c.point},
            {label: np.array([c.low, c.high])},
            algorithms=[label],
            colors={label: colors[a]},
            ax=ax,
            xlabel=xlabel,
            ylabel=ylabel,
            labelsize="large",
            ticklabelsize="medium",
            marker="o",
            legend=i == len(algos) - 1,
            legendsize="medium",
        )
        if a in interpolated:
            ax.lines[-1].set_markerfacecolor("none")
    ax.set_title("IQM sample efficiency (95 % CIs; markers: evaluations)")
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
    low, high = np.full(mean.shape, np.nan), np.full(mean.shape, np.nan)
    some = ~np.isnan(boot).all(axis=0)  # an eval no run has a value at stays NaN (no All-NaN slice warning)
    if some.any():
        low[some], high[some] = np.nanpercentile(boot[:, some], [alpha, 100 - alpha], axis=0)
    return mean, low, high


def plot_env_curves(
    env: str,
    curves: Mapping[str, Any],
    path: Path,
    colors: Mapping[str, tuple[float, ...]],
    *,
    reps: int = 2000,
    seed: int = 0,
) -> Path:
    """Learning curves of one env: mean return over seeds ± bootstrap CI, per algorithm at its own evaluation
    steps (markers: measured evaluations; hollow where interpolated between a run's evaluations).

    Args:
        env: env id (title).
        curves: algo -> :class:`~lit_sb3.zoo.results.AlgoCurves` (``x``: steps, ``mats[0]``: ``[runs, evals]``).
        path: PNG to write (and its SVG).
        colors: algo -> colour.
        reps: bootstrap replications.
        seed: generator seed.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for a, c in curves.items():
        vals = c.mats[0]
        mean, low, high = mean_ci_over_seeds(vals, reps=reps, seed=seed)
        face = "none" if c.interpolated else colors[a]
        ax.plot(c.x, mean, color=colors[a], label=f"{a} (n={vals.shape[0]})", linewidth=2, marker="o",
                markersize=3, markerfacecolor=face)  # fmt: skip
        ax.fill_between(c.x, low, high, color=colors[a], alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval/mean_reward")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{env}: mean over seeds (95 % bootstrap CI)")
    return _save(fig, path)


def plot_sequential(family: Sequence[object], path: Path, margin: float) -> Path:
    """P(X > Y) wave by wave, one panel per comparison: the point estimate and the confidence sequence at each
    look (seeds per algorithm on the x axis), with 0.5 and the equivalence margin dashed.

    Args:
        family: :class:`~lit_sb3.zoo.stats.sequential.Comparison` objects (their ``looks``).
        path: PNG to write (and its SVG).
        margin: the equivalence margin.
    """
    plt = _plt()
    shown = [c for c in family if c.looks]  # type: ignore[attr-defined]
    cols = min(3, max(1, len(shown)))
    rows = -(-len(shown) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    colors = {"x_better": "tab:blue", "y_better": "tab:orange", "equivalent": "tab:green", "open": "tab:gray"}
    for ax, c in zip(axes.ravel(), shown):
        n = [lk.n for lk in c.looks]  # type: ignore[attr-defined]
        point = np.array([lk.point for lk in c.looks])  # type: ignore[attr-defined]
        low = np.array([lk.low for lk in c.looks])  # type: ignore[attr-defined]
        high = np.array([lk.high for lk in c.looks])  # type: ignore[attr-defined]
        color = colors.get(c.outcome, "tab:gray")  # type: ignore[attr-defined]
        ax.errorbar(n, point, yerr=[point - low, high - point], fmt="o-", color=color, capsize=4)
        for y, style in ((0.5, "--"), (0.5 - margin, ":"), (0.5 + margin, ":")):
            ax.axhline(y, color="tab:red", linestyle=style, linewidth=1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(n)
        ax.set_xlabel("seeds per algorithm")
        ax.set_ylabel(f"P({c.x} > {c.y})")  # type: ignore[attr-defined]
        what = {"x_better": f"{c.x} better", "y_better": f"{c.y} better"}.get(c.outcome, c.outcome)  # type: ignore[attr-defined]
        ax.set_title(f"{c.x} vs {c.y}, {c.env}: {what}", fontsize=9)  # type: ignore[attr-defined]
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(shown) :]:
        ax.axis("off")
    fig.tight_layout()
    return _save(fig, path)


def plot_final_scores(
    panels: Mapping[str, Mapping[str, Sequence[tuple[int, float, bool]]]],
    path: Path,
    colors: Mapping[str, Any],
    ylabel: str = "final score (final/mean_reward)",
) -> Path:
    """The final scores a comparison rests on, one dot per seed: a strip per arm (algorithm or implementation) in
    each panel (env or cell), its IQM as a bar; a hollow dot is a score from fewer than 5 evaluation episodes.

    Args:
        panels: panel title -> arm -> ``(seed, score, short_evaluation)`` per run.
        path: PNG to write (and its SVG).
        colors: arm -> colour.
        ylabel: y axis label.
    """
    from lit_sb3.zoo.stats import iqm

    plt = _plt()
    n = max(1, len(panels))
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.2 * rows), squeeze=False)
    for ax, (title, arms) in zip(axes.ravel(), panels.items()):
        for i, (arm, points) in enumerate(arms.items()):
            if not points:
                continue
            scores = np.array([score for _, score, _ in points], dtype=np.float64)
            jitter = np.linspace(-0.18, 0.18, len(points)) if len(points) > 1 else np.zeros(1)
            for x, (_, score, short) in zip(i + jitter, points):
                ax.plot(x, score, "o", color=colors.get(arm, "k"), markersize=6, alpha=0.85,
                        markerfacecolor="none" if short else colors.get(arm, "k"))  # fmt: skip
            ax.plot([i - 0.3, i + 0.3], [iqm(scores)] * 2, color="k", linewidth=2)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels([f"{a}\n(n={len(p)})" for a, p in arms.items()], fontsize="small")
        ax.set_xlim(-0.6, len(arms) - 0.4)
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
    for ax in axes.ravel()[len(panels) :]:
        ax.axis("off")
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle("Final score of each seed (bar: IQM; hollow: fewer than 5 evaluation episodes)", fontsize="medium")
    fig.tight_layout()
    return _save(fig, path)
