"""What every section of a report reads: the runs, the options, the scale and envs of the aggregates, and the
statistics computed once for all sections (each on first use)."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lit_sb3.zoo import plots, stats
from lit_sb3.zoo.normalization import ScoreTable, load_table
from lit_sb3.zoo.normalization import normalize as normalize_score
from lit_sb3.zoo.report.blocks import _steps
from lit_sb3.zoo.results import Results, RunRecord

__all__ = ["ReportContext", "IMPL_TAG", "DEFAULT_IMPL", "SHORT_EVAL", "impl_of", "eval_episodes"]

CURVE_REPS = 2000
#: the tag naming the implementation that trained a run (a run without it is lit_sb3's)
IMPL_TAG = "impl"
DEFAULT_IMPL = "lit_sb3"
#: a score from fewer evaluation episodes than this is flagged
SHORT_EVAL = 5
#: params that are bookkeeping, never hyperparameters (hidden from the tables)
BOOKKEEPING = ("callback", "verbose", "tensorboard_log", "device", "seed", "_init_setup_model", "algo", "seeds")


def impl_of(run: RunRecord) -> str:
    """The implementation that trained ``run`` (tag :data:`IMPL_TAG`, default :data:`DEFAULT_IMPL`).

    Args:
        run: a run.
    """
    return run.tags.get(IMPL_TAG, "") or DEFAULT_IMPL


def eval_episodes(run: RunRecord) -> int | None:
    """Evaluation episodes behind ``run``'s score (its ``eval_episodes`` param; None when not logged).

    Args:
        run: a run.
    """
    value = run.params.get("eval_episodes", "")
    return int(value) if value.isdigit() else None


@dataclass
class ReportContext:
    """The inputs of a report and the statistics its sections share.

    Args:
        everything: every FINISHED run read (all implementations).
        out: the report's folder.
        title: report title.
        command: the command line shown at the top.
        normalize: ``"reference"`` or ``"none"``.
        reps: bootstrap replications.
        seed: bootstrap seed.
        engine: ``"fast"`` or ``"rliable"``.
        min_runs: runs per algorithm and env below which a fixed-design comparison gets no verdict.
        table: the score table (read when normalising).
    """

    everything: Results
    out: Path
    title: str
    command: str
    normalize: str
    reps: int
    seed: int
    engine: str
    min_runs: int
    table: ScoreTable | None = None
    warnings: list[str] = field(default_factory=list)
    tasks: list[str] = field(init=False)
    scale: str = field(init=False)

    def __post_init__(self) -> None:
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        results = self.results
        common = results.common_envs()
        partial = [env for env in results.envs if env not in common]
        if partial and not common and len(results.algos) > 1:  # a benchmark: each algorithm on its own envs
            ran = "; ".join(f"{env}: {', '.join(a for a in results.algos if results.select(a, env))}"
                            for env in results.envs)  # fmt: skip
            self.warnings.append(f"no env has FINISHED runs of every algorithm ({ran}): no aggregate across "
                                 "algorithms; each env's results and the comparisons below stand on their own")  # fmt: skip
        else:
            for env in partial:
                missing = [a for a in results.algos if not results.select(a, env)]
                self.warnings.append(f"{env}: no FINISHED runs for {', '.join(missing)}; left out of the aggregates")
        if self.normalize == "reference":
            self.table = self.table or load_table()
            for env in self.everything.envs:
                if not self.table.has(env):
                    self.warnings.append(f"{env}: not in the score table (version {self.table.version}); reported raw")
            self.tasks = [e for e in common if self.table.has(e)]
            if not self.tasks:
                if common:  # with no common env there is no aggregate to normalise
                    self.warnings.append("no env can be normalised: aggregates use raw returns")
                self.tasks, self.scale = common, "raw return"
            else:
                self.scale = "normalised score"
                if all("human" in (self.table.entries[e].reference_source or "").lower() for e in self.tasks):
                    self.scale = "human-normalised score"  # the reference is the human score (Atari): say so
        else:
            self.tasks, self.scale = common, "raw return"
            if len(self.tasks) > 1:
                self.warnings.append("aggregates pool raw returns of different envs (use --normalize reference)")
        short = sorted(
            {(r.algo, impl_of(r), r.env, eval_episodes(r)) for r in self.everything.runs if self.is_short(r)},
            key=str,
        )
        if short:
            listed = ", ".join(f"{a}{'' if i == DEFAULT_IMPL else f' ({i})'} on {e}: {n}" for a, i, e, n in short)
            self.warnings.append(
                f"scores resting on fewer than {SHORT_EVAL} evaluation episodes ({listed}; marked † in the tables, "
                f"hollow in the figures): such a score is one or two episodes' return, not a mean, and its "
                f"std_reward says nothing. Rerun with --eval-episodes {SHORT_EVAL} or more."
            )

    # --- the runs ------------------------------------------------------------------------------------------
    @cached_property
    def impls(self) -> list[str]:
        """The implementations in the experiment, lit_sb3 first."""
        found = {impl_of(r) for r in self.everything.runs}
        return sorted(found, key=lambda i: (i != DEFAULT_IMPL, i))

    @cached_property
    def results(self) -> Results:
        """The runs of the algorithm comparisons: one implementation's (lit_sb3's when the experiment holds
        several; the implementations are compared in their own section)."""
        if len(self.impls) == 1:
            return self.everything
        keep = self.impls[0]
        return replace(self.everything, runs=[r for r in self.everything.runs if impl_of(r) == keep])

    @property
    def fig_dir(self) -> Path:
        """Where the figures go."""
        return self.out / "figures"

    @cached_property
    def algos(self) -> list[str]:
        """The algorithms compared."""
        return self.results.algos

    @cached_property
    def colors(self) -> dict[str, tuple[float, ...]]:
        """A colour per algorithm."""
        return plots.algo_colors(self.algos)

    @staticmethod
    def is_short(run: RunRecord) -> bool:
        """Whether ``run``'s score rests on fewer than :data:`SHORT_EVAL` evaluation episodes.

        Args:
            run: a run.
        """
        n = eval_episodes(run)
        return n is not None and n < SHORT_EVAL

    # --- scales --------------------------------------------------------------------------------------------
    def transform(self, env: str, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Scores on the report's scale.

        Args:
            env: env id.
            values: raw returns.
        """
        if self.scale.endswith("normalised score") and self.table is not None:
            table = self.table
            return np.vectorize(lambda v: normalize_score(v, env, table), otypes=[float])(values)
        return values

    def norm_or_nan(self, env: str, v: float) -> float:
        """``v`` normalised when the table covers ``env``, else NaN.

        Args:
            env: env id.
            v: a raw return.
        """
        return normalize_score(v, env, self.table) if self.table is not None and self.table.has(env) else float("nan")

    # --- statistics shared by sections ---------------------------------------------------------------------
    @cached_property
    def score_dict(self) -> dict[str, list[NDArray[np.float64]]]:
        """algo -> final scores per aggregated env (on the report's scale)."""
        return {a: self.results.scores(a, self.tasks, self.transform) for a in self.algos}

    @cached_property
    def taus(self) -> NDArray[np.float64]:
        """Thresholds of the performance profiles."""
        scores = self.score_dict
        all_scores = np.concatenate([np.concatenate(v) for v in scores.values()]) if self.tasks else np.zeros(1)
        lo, hi = float(all_scores.min()), float(all_scores.max())
        if self.scale.endswith("normalised score"):
            lo, hi = min(lo, 0.0), max(hi, 1.0)
        return np.linspace(lo, hi if hi > lo else lo + 1.0, 101)

    @cached_property
    def curve_reps(self) -> int:
        """Replications of curve CIs."""
        return min(self.reps, CURVE_REPS)

    @cached_property
    def algo_curves(self) -> dict[str, Any]:
        """Each algorithm's curves over the aggregated envs (its own evaluation steps)."""
        return self.results.aggregate_curves(self.tasks, self.transform)

    @cached_property
    def intervals(self) -> tuple[dict[str, dict[str, stats.Interval]], dict[str, stats.Profile], dict[str, Any]]:
        """(aggregate intervals, performance profiles, IQM curves) by the report's engine."""
        curves: dict[str, Any] = {}
        if not self.tasks:
            return {}, {}, {}
        if self.engine == "rliable":
            agg, _, profiles, _ = stats.reference_intervals(self.score_dict, taus=self.taus, reps=self.reps,
                                                             seed=self.seed)  # fmt: skip
            for i, (a, c) in enumerate(self.algo_curves.items()):
                curves |= stats.reference_curves({a: c.mats}, c.x, reps=self.curve_reps, seed=self.seed + 3 + i)
            return agg, profiles, curves
        agg = stats.aggregate_intervals(self.score_dict, reps=self.reps, seed=self.seed)
        profiles = stats.performance_profiles(self.score_dict, self.taus, reps=self.reps, seed=self.seed + 2)
        for i, (a, c) in enumerate(self.algo_curves.items()):
            curves |= stats.iqm_curves({a: c.mats}, c.x, reps=self.curve_reps, seed=self.seed + 3 + i)
        return agg, profiles, curves

    @cached_property
    def counts(self) -> dict[str, list[int]]:
        """algo -> runs per aggregated env."""
        return {a: [len(self.results.select(a, e)) for e in self.tasks] for a in self.algos}

    @cached_property
    def protocol(self) -> dict[str, dict[str, dict[str, Any]]]:
        """env -> algo -> budget and evaluation protocol of its runs."""
        from lit_sb3.zoo.report.sections import protocol_of

        res = self.results
        return {env: {a: protocol_of(res.select(a, env)) for a in self.algos if res.select(a, env)} for env in res.envs}

    @cached_property
    def algo_steps(self) -> dict[str, str]:
        """algo -> env steps per run (text)."""
        return {
            a: _steps([float(v) for e in self.tasks for v in self.protocol[e][a]["env_steps_values"]])
            if self.tasks
            else "—"
            for a in self.algos
        }

    @cached_property
    def control(self) -> dict[str, Any] | None:
        """The error-controlled family of algorithm comparisons (:func:`~lit_sb3.zoo.report.control.error_control`)."""
        from lit_sb3.zoo.report.control import error_control

        return error_control(self.results, self.tasks, self.fig_dir, self.min_runs)

    @cached_property
    def verdicts(self) -> list[dict[str, Any]]:
        """One verdict per pair of algorithms (:func:`~lit_sb3.zoo.report.control.pair_verdicts`)."""
        from lit_sb3.zoo.report.control import pair_verdicts

        return pair_verdicts(self.control, self.counts, self.algo_steps)

    @staticmethod
    def machine() -> str:
        """This machine, in one line."""
        import os

        return (
            f"{platform.node()} ({platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()})"
        )
