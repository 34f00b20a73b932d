"""The reference computation: every interval of the report recomputed with ``rliable.library`` (arch's
bootstrap; needs the ``rliable-ref`` extra and a full runs × tasks matrix per algorithm)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lit_sb3.zoo.stats.bootstrap import METRICS, Curve, Interval, Profile, ScoreInput, _kernel, as_tasks


def _library():  # noqa: ANN202 - the rliable.library module
    try:
        from rliable import library
    except Exception as exc:  # noqa: BLE001 - arch/pandas incompatibility shows as any import error
        raise ImportError(
            "the rliable engine needs rliable.library, which imports arch<8 and pandas<3: "
            f"pip install 'lit_sb3[rliable-ref]' ({type(exc).__name__}: {exc})"
        ) from exc
    return library


def _matrix(algo: str, scores: ScoreInput) -> NDArray[np.float64]:
    tasks = as_tasks(scores)
    sizes = {t.shape[0] for t in tasks}
    if len(sizes) != 1:
        raise ValueError(
            f"{algo}: rliable.library needs the same number of runs on every task, got {[t.shape[0] for t in tasks]}"
            " (use the default engine, which stratifies unequal counts)"
        )
    return np.stack(tasks, axis=1)  # runs × tasks [× evals]


def reference_intervals(
    score_dict: Mapping[str, ScoreInput],
    *,
    taus: ArrayLike | None = None,
    curve_dict: Mapping[str, ScoreInput] | None = None,
    steps: ArrayLike | None = None,
    reps: int = 50_000,
    seed: int = 0,
    confidence: float = 0.95,
    gamma: float = 1.0,
) -> tuple[dict[str, dict[str, Interval]], dict[tuple[str, str], Interval], dict[str, Profile], dict[str, Curve]]:
    """Every interval of the report recomputed with ``rliable.library`` (the reference computation).

    Same outputs as :func:`aggregate_intervals`, :func:`improvement_intervals` (every pair),
    :func:`performance_profiles` and :func:`iqm_curves`; point estimates from ``rliable.metrics``.

    Args:
        score_dict: algorithm -> runs × tasks (every task with the same number of runs).
        taus: profile thresholds (None: no profiles).
        curve_dict: algorithm -> runs × tasks × evals, or per-task ``[runs, evals]`` (None: no curves).
        steps: env steps of the evaluations.
        reps: bootstrap replications.
        seed: seed of the ``np.random.RandomState`` given to rliable.
        confidence: CI coverage.
        gamma: optimality-gap threshold.
    """
    from rliable import metrics

    library = _library()
    # rliable hands its RandomState to arch as ``random_state``, which arch 7 deprecates (same numbers)
    warnings.filterwarnings("ignore", message="random_state is deprecated", category=FutureWarning)
    state = np.random.RandomState(seed)
    mats = {a: _matrix(a, s) for a, s in score_dict.items()}

    def agg_func(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.array(
            [
                metrics.aggregate_median(x),
                metrics.aggregate_iqm(x),
                metrics.aggregate_mean(x),
                metrics.aggregate_optimality_gap(x, gamma),
            ]
        )

    kw = {"reps": reps, "confidence_interval_size": confidence, "random_state": state}
    points, cis = library.get_interval_estimates(mats, agg_func, **kw)
    agg = {
        a: {m: Interval(float(points[a][i]), float(cis[a][0, i]), float(cis[a][1, i])) for i, m in enumerate(METRICS)}
        for a in mats
    }

    def poi_func(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
        # rliable's definition with a numpy kernel instead of scipy's mannwhitneyu per rep (same values)
        return float(np.mean([_kernel(x[:, t], y[:, t]).mean() for t in range(x.shape[1])]))

    pairs = {f"{x},{y}": [mats[x], mats[y]] for x, y in itertools.combinations(mats, 2)}
    poi: dict[tuple[str, str], Interval] = {}
    if pairs:
        _, pcis = library.get_interval_estimates(pairs, poi_func, **kw)
        for key, (mx, my) in pairs.items():
            x, y = key.split(",")
            low, high = np.ravel(pcis[key])
            poi[(x, y)] = Interval(float(metrics.probability_of_improvement(mx, my)), float(low), float(high))

    profiles: dict[str, Profile] = {}
    if taus is not None:
        tau_arr = np.asarray(taus, dtype=np.float64)
        # rliable's create_performance_profile with its score-distribution function vectorised over taus
        prof, pcis = library.get_interval_estimates(
            mats, lambda s: (s.reshape(-1)[:, None] > tau_arr[None, :]).mean(axis=0), **kw
        )
        profiles = {a: Profile(tau_arr, np.asarray(prof[a]), pcis[a][0], pcis[a][1]) for a in mats}

    curves = reference_curves(curve_dict, steps, state=state, reps=reps, confidence=confidence) if curve_dict else {}
    return agg, poi, profiles, curves


def reference_curves(
    curve_dict: Mapping[str, ScoreInput],
    steps: ArrayLike,
    *,
    state: np.random.RandomState | None = None,
    reps: int = 2_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Curve]:
    """IQM sample-efficiency curves with ``rliable.library``'s stratified-bootstrap CIs (the reference of
    :func:`iqm_curves`); every algorithm at the same ``steps`` (call once per algorithm for their own steps).

    Args:
        curve_dict: algorithm -> runs × tasks × evals, or per-task ``[runs, evals]``.
        steps: env steps (or fractions of the budget) of the evaluations.
        state: the ``RandomState`` given to rliable (default: one seeded with ``seed``).
        reps: bootstrap replications.
        seed: seed of the default ``state``.
        confidence: CI coverage.
    """
    from rliable import metrics

    library = _library()
    warnings.filterwarnings("ignore", message="random_state is deprecated", category=FutureWarning)
    kw = {"reps": reps, "confidence_interval_size": confidence,
          "random_state": state if state is not None else np.random.RandomState(seed)}  # fmt: skip
    step_arr = np.asarray(steps, dtype=np.float64)
    cmats = {a: _matrix(a, s) for a, s in curve_dict.items()}

    def iqm_func(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.array([metrics.aggregate_iqm(x[..., e]) for e in range(x.shape[-1])])

    cpoints, ccis = library.get_interval_estimates(cmats, iqm_func, **kw)
    return {a: Curve(step_arr, np.asarray(cpoints[a]), ccis[a][0], ccis[a][1]) for a in cmats}
