"""Interval estimates for RL benchmarks (Agarwal et al. 2021), as a vectorised stratified bootstrap.

Same definitions as rliable 1.2 (``rliable.metrics`` / ``rliable.library``), computed for all bootstrap
replications at once:

* **Stratified bootstrap**: within each task, runs are resampled with replacement, independently per task
  (index arrays ``[reps, n_runs_task]``), in chunks of replications to bound memory. A resample is kept as
  per-run *counts* (how often each run was drawn), so every metric is a weighted sum over the original runs:
  mean, optimality gap, score distributions and probability of improvement are matrix products, and the IQM
  of a resample is exact without sorting it (the sorted original values are weighted by how much of each
  value's count falls inside the inter-quartile positions).
* **Scores** per algorithm are given as a runs × tasks matrix, or as a list of 1-D arrays (one per task) when
  tasks have different numbers of runs. Unequal counts are stratified per task with their own count.
  Run-level metrics (IQM, optimality gap, score distributions) then pool all runs, each weighing 1 (as
  rliable does on a full matrix); task-level metrics (mean, median) use per-task means. For a full matrix both
  readings coincide with rliable.
* **CIs** are percentile intervals (``np.percentile``, linear), as rliable's default ``method='percentile'``.
* **Sample-efficiency curves**: one resample of runs per task is applied to every evaluation (a run keeps its
  whole curve); rliable resamples each evaluation independently; the per-evaluation marginals are identical.
* **Point estimates** come from ``rliable.metrics`` itself (numpy + scipy only; it does not import arch).
* **Reference engine**: :func:`reference_intervals` recomputes every interval with ``rliable.library`` (arch's
  bootstrap, a Python loop: ~20-30x slower); it needs the ``rliable-ref`` extra (``arch<8``, ``pandas<3``) and a
  full runs x tasks matrix per algorithm.
"""

from __future__ import annotations

from lit_sb3.zoo.stats.bootstrap import (
    METRICS,
    Curve,
    Interval,
    Profile,
    aggregate_intervals,
    aggregate_point,
    as_tasks,
    improvement_intervals,
    iqm,
    iqm_curves,
    performance_profiles,
    probability_of_improvement,
    score_distribution,
)

# also importable from here: the score-input type aliases, and _library (bench report checks the extra with it)
from lit_sb3.zoo.stats.bootstrap import ScoreInput as ScoreInput
from lit_sb3.zoo.stats.bootstrap import Tasks as Tasks
from lit_sb3.zoo.stats.reference import _library as _library
from lit_sb3.zoo.stats.reference import reference_curves, reference_intervals

__all__ = [
    "METRICS",
    "Interval",
    "Profile",
    "Curve",
    "as_tasks",
    "iqm",
    "aggregate_point",
    "aggregate_intervals",
    "score_distribution",
    "performance_profiles",
    "probability_of_improvement",
    "improvement_intervals",
    "iqm_curves",
    "reference_curves",
    "reference_intervals",
]
