"""Build the benchmark report (markdown, self-contained HTML, CSV, JSON, PNG figures) and log it to MLflow.

Aggregates (IQM, median, mean, optimality gap, profiles, probability of improvement, IQM curves) use the envs
where every algorithm has at least one FINISHED run. With ``normalize="reference"`` they use normalised scores
of the envs the table covers; envs without an entry are shown raw in the per-env table, left out of the
aggregates, and listed as warnings. Curves and per-env learning-curve CIs use ``min(reps, 2000)`` replications.

The report is a list of sections (:data:`lit_sb3.zoo.report.build.SECTIONS`), each computing its numbers,
drawing its figures and placing its blocks, over one :class:`~lit_sb3.zoo.report.context.ReportContext`.

Verdicts: one set, with error control (:mod:`lit_sb3.zoo.report.control`). The family is every pair of
algorithms on every aggregated env, plus each pair's aggregate over the envs when there are several; a pair's
verdict ("X is credibly better than Y", "credibly equivalent", "open: ...", "too few runs for a verdict (n=...)")
is the decision of its comparison over all aggregated envs. Fixed-seed experiment: one exact permutation test of
P(X > Y) per comparison, Holm over the family, family-wise error <= 5 % (divided by the number of earlier reports
that looked at fewer runs), and no verdict below ``min_runs`` runs per algorithm and env (a warning at the top
says so). A ``bench run --until-verdict`` experiment: its group-sequential design, replayed from the runs. Every
verdict states its sample, its rule and its error rate. P(X > Y) has one orientation (X before Y in name order)
and one interval everywhere (report, terminal, MLflow): the comparison's confidence sequence, simultaneous over
the family, which the equivalence rule reads.

Implementations (:mod:`lit_sb3.zoo.report.implementations`): when the experiment holds runs of several
implementations (tag ``impl``: ``lit_sb3`` by default, ``sb3`` for RL Zoo runs), the algorithm comparisons use
lit_sb3's runs and a section compares the implementations cell by cell (algorithm × env), with the same rule.

Engines: ``"fast"`` (default) is the vectorised stratified bootstrap of :mod:`lit_sb3.zoo.stats`;
``"rliable"`` recomputes every interval with ``rliable.library`` (the reference computation, much slower).
Point estimates come from ``rliable.metrics`` and the aggregate figures from ``rliable.plot_utils`` in both.
"""

from __future__ import annotations

from lit_sb3.zoo.report.blocks import Block
from lit_sb3.zoo.report.build import ENGINES, MIN_RUNS, build_report

__all__ = ["build_report", "Block", "MIN_RUNS", "ENGINES"]
