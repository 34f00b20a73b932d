"""Build the benchmark report (markdown, self-contained HTML, CSV, JSON, PNG figures) and log it to MLflow.

Aggregates (IQM, median, mean, optimality gap, profiles, probability of improvement, IQM curves) use the envs
where every algorithm has at least one FINISHED run. With ``normalize="reference"`` they use normalised scores
of the envs the table covers; envs without an entry are shown raw in the per-env table, left out of the
aggregates, and listed as warnings. Curves and per-env learning-curve CIs use ``min(reps, 2000)`` replications.

Sample size: a pair of algorithms gets a verdict ("X is credibly better than Y") only when its 95 % CI of
P(X > Y) excludes 0.5 *and* each of the two has at least ``min_runs`` runs on every aggregated env; otherwise
the intervals are still shown, the verdict reads "too few runs for a verdict (n=...)", and a warning sits at
the top of the report. Every claim states the runs, envs and env steps it rests on.

Engines: ``"fast"`` (default) is the vectorised stratified bootstrap of :mod:`lit_sb3.zoo.stats`;
``"rliable"`` recomputes every interval with ``rliable.library`` (the reference computation, much slower).
Point estimates come from ``rliable.metrics`` and the aggregate figures from ``rliable.plot_utils`` in both.
"""

from __future__ import annotations

from lit_sb3.zoo.report.blocks import Block
from lit_sb3.zoo.report.build import ENGINES, MIN_RUNS, build_report

__all__ = ["build_report", "Block", "MIN_RUNS", "ENGINES"]
