"""The implementation dimension of a report: lit_sb3 against another implementation of the same algorithms
(``impl=sb3``: SB3 / sb3-contrib runs made by the RL Zoo), cell by cell (algorithm × env).

Per cell: each side's IQM with its 95 % stratified-bootstrap CI, P(lit_sb3 > other) with its confidence
sequence, the error-controlled verdict over the family of cells (an exact permutation test per cell, Holm over
the family; equivalent when the confidence sequence at level ``alpha / m`` lies inside ``0.5 ± margin``; the same
rule as the algorithm comparisons, :func:`lit_sb3.zoo.stats.sequential.fixed_design`), overlaid learning curves,
each seed's final score, and each side's wall and CPU time. A run's time is its process's; the K seeds of a
seed batch share one process, so a cell's time per side is the sum over its runs of time / K.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from lit_sb3.zoo import plots, stats
from lit_sb3.zoo.report.blocks import Block, _ci, _fmt, _n
from lit_sb3.zoo.report.context import ReportContext, impl_of
from lit_sb3.zoo.report.control import ALPHA, MARGIN
from lit_sb3.zoo.report.sections import Rendered, Section, hyperparams_of
from lit_sb3.zoo.results import RunRecord

__all__ = ["Implementations", "SEED_BATCH_TAG", "process_share"]

SEED_BATCH_TAG = "lit_sb3.seed_batch"

_KIND = {"x_better": "better", "y_better": "worse", "equivalent": "equivalent", "open": "open"}


def process_share(run: RunRecord) -> float:
    """The share of its process a run's time stands for: 1 / K for the K seeds of a seed batch (tag
    :data:`SEED_BATCH_TAG`; 1 without it).

    Args:
        run: a run.
    """
    text = run.tags.get(SEED_BATCH_TAG, "1")
    return 1.0 / int(text) if text.isdigit() and int(text) > 0 else 1.0


def _seconds(runs: list[RunRecord], what: str) -> float:
    values = [getattr(r, what) * process_share(r) for r in runs]
    finite = [v for v in values if np.isfinite(v)]
    return float(sum(finite)) if finite else float("nan")


class Implementations(Section):
    """lit_sb3 against each other implementation in the experiment, per cell, with the whole benchmark's time."""

    def render(self, ctx: ReportContext) -> Rendered:
        if len(ctx.impls) < 2:
            return {"implementation_comparison": None}, []
        from lit_sb3.zoo.stats.sequential import fixed_design

        ours = ctx.impls[0]
        runs = ctx.everything.runs
        data: dict[str, Any] = {"reference": ours, "against": []}
        blocks: list[Block] = [Block("h2", "Implementations")]
        for other in ctx.impls[1:]:
            by_cell: dict[tuple[str, str], dict[str, list[RunRecord]]] = {}
            for r in sorted(runs, key=lambda r: r.seed):
                by_cell.setdefault((r.algo, r.env), {}).setdefault(impl_of(r), []).append(r)
            cells = sorted(c for c, sides in by_cell.items() if ours in sides and other in sides)
            alone = sorted(c for c, sides in by_cell.items() if (ours in sides) != (other in sides))
            names = [f"{a} on {e}" for a, e in cells]
            scores = {(impl, name): [r.score for r in by_cell[cell][impl]]
                      for cell, name in zip(cells, names) for impl in (ours, other)}  # fmt: skip
            family = fixed_design(scores, [(ours, other)], names, alpha=ALPHA, margin=MARGIN, aggregate=False,
                                  min_runs=ctx.min_runs) if cells else []  # fmt: skip
            m = max(1, len(family))
            level = 100.0 * (1.0 - ALPHA / m)
            interval = f"{level:.4g} % confidence sequence" + (f", simultaneous over the {m} cells" if m > 1 else "")
            colors = {ours: "tab:blue", other: "tab:orange"}
            rows, cell_data, panels, uneven = [], [], {}, []
            total = {ours: {"wall": 0.0, "cpu": 0.0}, other: {"wall": 0.0, "cpu": 0.0}}
            for (algo, env), name, c in zip(cells, names, family):
                sides = by_cell[(algo, env)]
                iqm = {
                    impl: stats.aggregate_intervals({impl: [np.array([r.score for r in sides[impl]])]},
                                                    reps=ctx.reps, seed=ctx.seed)[impl]["iqm"]
                    for impl in (ours, other)
                }  # fmt: skip
                times = {impl: {"wall": _seconds(sides[impl], "wall_seconds"),
                                "cpu": _seconds(sides[impl], "cpu_seconds")} for impl in (ours, other)}  # fmt: skip
                counts = {impl: len(sides[impl]) for impl in (ours, other)}
                if counts[ours] != counts[other]:  # not the same work on both sides (one still running)
                    uneven.append(f"{name} ({counts[ours]} + {counts[other]} runs)")
                else:
                    for impl in (ours, other):
                        for k in ("wall", "cpu"):
                            if np.isfinite(times[impl][k]):
                                total[impl][k] += times[impl][k]
                kind, verdict, p = self._verdict(c, ours, other, ctx.min_runs, counts)
                lk = c.looks[-1] if c.looks else None
                poi = stats.Interval(lk.point, lk.low, lk.high) if lk else stats.Interval(float("nan"), 0.0, 1.0)
                hp = {impl: hyperparams_of(sides[impl]) for impl in (ours, other)}
                differ = sorted(k for k in set(hp[ours]) & set(hp[other]) if hp[ours][k] != hp[other][k])
                rows.append([algo, env, f"{counts[ours]} + {counts[other]}", _ci(iqm[ours]), _ci(iqm[other]),
                             _ci(poi), p, verdict, f"{_fmt(times[ours]['wall'])} / {_fmt(times[other]['wall'])}",
                             f"{_fmt(times[ours]['cpu'])} / {_fmt(times[other]['cpu'])}"])  # fmt: skip
                cell_data.append({
                    "algo": algo, "env": env, "runs": counts,
                    "iqm": {impl: iqm[impl].as_dict() for impl in (ours, other)},
                    "poi": poi.as_dict(), "interval_name": interval, "p_value": lk.p_value if lk else None,
                    "kind": kind, "verdict": verdict, "reason": c.reason,
                    "wall_seconds": {impl: times[impl]["wall"] for impl in (ours, other)},
                    "cpu_seconds": {impl: times[impl]["cpu"] for impl in (ours, other)},
                    "differing_hyperparameters": differ,
                })  # fmt: skip
                panels[name] = {
                    impl: [(r.seed, r.score, ctx.is_short(r)) for r in sides[impl]] for impl in (ours, other)
                }
            blocks.append(Block("h3", f"{ours} against {other}"))
            blocks.append(Block("p", (
                f"{_n(len(cells), 'cell')} (algorithm × env) with runs of both. Per cell: each side's IQM of the "
                f"final score (raw return) with its 95 % stratified-bootstrap CI; P({ours} > {other}) with its "
                f"{interval} (the point: all seed pairs compared, n × n; the interval: anytime-valid, from the n pairs of the "
                f"same seed index, so it need not be centred on the point and it is wider than a one-look interval"
                f"); the verdict by an exact permutation test of P({ours} > {other}) per cell (Mann-Whitney, "
                f"ties half; one look), Holm over the {m} cells: '{ours} better' or '{ours} worse' with family-wise "
                f"error <= {ALPHA:g}; 'equivalent' when the interval lies inside 0.5 ± {MARGIN:g} (a false "
                f"equivalence also has probability <= {ALPHA:g} over the family); 'open' otherwise; no verdict "
                f"below {ctx.min_runs} runs per side. Time per side: the sum over the cell's runs of its process's "
                "wall (CPU) seconds / K, K the seeds trained together in that process (seed batching)."
            )))  # fmt: skip
            headers = ["algo", "env", f"runs ({ours} + {other})", f"IQM {ours} [95 % CI]", f"IQM {other} [95 % CI]",
                       f"P({ours} > {other}) [{interval}]", "p (exact, one look)", "verdict",
                       f"wall s ({ours} / {other})", f"CPU s ({ours} / {other})"]  # fmt: skip
            blocks.append(Block("table", headers=headers, items=rows))
            wall_ratio = total[other]["wall"] / total[ours]["wall"] if total[ours]["wall"] > 0 else float("nan")
            cpu_ratio = total[other]["cpu"] / total[ours]["cpu"] if total[ours]["cpu"] > 0 else float("nan")
            summed = _n(len(cells) - len(uneven), "cell") + (
                f"; left out, not the same number of runs a side: {', '.join(uneven)}" if uneven else ""
            )
            blocks.append(Block("p", (
                f"The whole benchmark ({summed}): {ours} {_fmt(total[ours]['wall'])} wall s and "
                f"{_fmt(total[ours]['cpu'])} CPU s, {other} {_fmt(total[other]['wall'])} wall s and "
                f"{_fmt(total[other]['cpu'])} CPU s: {other} / {ours} = {_fmt(wall_ratio)} (wall), "
                f"{_fmt(cpu_ratio)} (CPU). Wall seconds are process-seconds: with parallel jobs the elapsed time is "
                "shorter, on both sides alike."
            )))  # fmt: skip
            differing = [f"{d['algo']} on {d['env']}: {', '.join(d['differing_hyperparameters'])}"
                         for d in cell_data if d["differing_hyperparameters"]]  # fmt: skip
            if differing:
                blocks.append(Block("p", "Hyperparameters that differ between the sides: " + "; ".join(differing)))
            if alone:
                blocks.append(Block("p", "Not compared (runs of one side only): "
                                    + ", ".join(f"{a} on {e}" for a, e in alone) + "."))  # fmt: skip
            if panels:
                stem = f"impl_{other}_final_scores".replace("/", "_")
                plots.plot_final_scores(panels, ctx.fig_dir / f"{stem}.png", colors)
                blocks.append(Block("fig", f"Final score of every seed per cell, {ours} against {other} (bar: IQM)",
                                    path=f"figures/{stem}.png"))  # fmt: skip
            for (algo, env), name in zip(cells, names):
                sub = replace(ctx.everything, runs=[replace(r, algo=impl_of(r)) for r in runs
                                                    if r.algo == algo and r.env == env
                                                    and impl_of(r) in (ours, other)])  # fmt: skip
                curves = sub.env_curves(env)
                if not curves:
                    continue
                fname = "figures/impl_" + "".join(ch if ch.isalnum() or ch in "-_." else "_"
                                                  for ch in f"{other}_{algo}_{env}") + ".png"  # fmt: skip
                plots.plot_env_curves(name, curves, ctx.out / fname, colors, reps=ctx.curve_reps, seed=ctx.seed)
                blocks.append(Block("fig", f"Learning curves of {name}: {ours} and {other} on env steps", path=fname))
            data["against"].append({
                "impl": other, "interval_name": interval, "alpha": ALPHA, "margin": MARGIN, "cells": cell_data,
                "not_compared": [{"algo": a, "env": e} for a, e in alone],
                "total": total, "ratio": {"wall": wall_ratio, "cpu": cpu_ratio}, "left_out_of_total": uneven,
            })  # fmt: skip
        return {"implementation_comparison": data}, blocks

    @staticmethod
    def _verdict(c: Any, ours: str, other: str, min_runs: int, counts: dict[str, int]) -> tuple[str, str, str]:
        """``(kind, text, p shown)`` of one cell's comparison (``counts``: each side's runs)."""
        if not c.looks or c.reason.startswith("too few runs"):
            runs = f"{counts[ours]} run(s) of {ours} and {counts[other]} of {other}"
            return "too_few_runs", f"no verdict: {runs}, the rule needs >= {min_runs} per side", "—"
        kind = _KIND[c.outcome]
        text = {
            "better": f"{ours} better",
            "worse": f"{ours} worse",
            "equivalent": f"equivalent (P within 0.5 ± {MARGIN:g})",
            "open": "open",
        }[kind]
        return kind, text, f"{c.looks[-1].p_value:.3g}"
