"""Verdicts with error control in every report: the family of (pair, env) and aggregate comparisons, Holm over
all of them, and for a ``bench run --until-verdict`` experiment its sequential design replayed from the runs.

* Sequential experiment (its grid run carries the plan): :func:`~lit_sb3.zoo.stats.sequential.decide` on the
  runs' scores in seed order gives the same decisions as the run did, look by look; the report shows the rule,
  the looks, the seeds each comparison used and why it stopped, and a figure of the confidence sequence of
  P(X > Y) narrowing wave by wave.
* Fixed-seed experiment: one look per comparison (:func:`~lit_sb3.zoo.stats.sequential.fixed_design`), Holm
  over the family. If earlier reports of the experiment rested on fewer runs (the experiment was extended
  after them), each of those was a look at the data: the level is divided by the number of looks
  (Bonferroni), and the report says so.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from lit_sb3.zoo.report.blocks import Block
from lit_sb3.zoo.results import Results

__all__ = ["error_control", "control_blocks", "report_runs"]

ALPHA = 0.05
MARGIN = 0.1
_OUTCOME = {"x_better": "{x} credibly better", "y_better": "{y} credibly better", "equivalent": "credibly equivalent",
            "open": "no verdict"}  # fmt: skip


def report_runs(results: Results) -> dict[str, int]:
    """``{"algo env": runs}``: what this report rests on (recorded on the report run)."""
    return {f"{a} {e}": len(results.select(a, e)) for a in results.algos for e in results.envs if results.select(a, e)}


def _earlier_looks(results: Results) -> list[dict[str, Any]]:
    """Earlier reports that looked at a strict subset of the runs this one rests on (one per distinct look)."""
    now = report_runs(results)
    seen, out = set(), []
    for rep in results.earlier_reports:
        runs = {k: int(v) for k, v in rep["runs"].items() if k in now}
        if not runs or any(v > now[k] for k, v in runs.items()) or runs == {k: now[k] for k in runs}:
            continue
        key = tuple(sorted(runs.items()))
        if key not in seen:
            seen.add(key)
            out.append({**rep, "runs": runs})
    return out


def error_control(results: Results, tasks: list[str], fig_dir: Path, min_runs: int = 5) -> dict[str, Any] | None:
    """The family of comparisons over ``tasks`` with its verdicts, and the design it rests on.

    Args:
        results: the experiment's runs.
        tasks: the envs every algorithm has runs on.
        fig_dir: where the narrowing figure goes (sequential experiments).
        min_runs: the report's ``--min-runs``: a fixed-design comparison on fewer seeds gets no verdict (a
            sequential design's own ``--min-seeds`` rules there).
    """
    from lit_sb3.zoo import plots
    from lit_sb3.zoo.stats.sequential import SequentialPlan, decide, fixed_design

    algos = results.algos
    if len(algos) < 2 or not tasks:
        return None
    pairs = list(itertools.combinations(algos, 2))
    sequential = results.sequential_plan is not None
    scores: dict[tuple[str, str], list[float]] = {}
    for a in algos:
        for e in tasks:
            runs = results.select(a, e)  # by seed
            if sequential:  # the run read seeds 0, 1, ... up to the first one without a score: so does this
                runs = [r for i, r in enumerate(runs) if all(q.seed == j for j, q in enumerate(runs[: i + 1]))]
            scores[(a, e)] = [r.score for r in runs]
    earlier = _earlier_looks(results)
    plan = None
    if results.sequential_plan is not None:
        try:
            plan = SequentialPlan.from_dict(results.sequential_plan)
        except (TypeError, ValueError):
            plan = None
    figure = None
    if plan is not None:
        family = decide(scores, pairs, tasks, plan)
        alpha, design = plan.alpha, "sequential"
        rule = (
            f"Sequential design of bench run --until-verdict: {plan.describe()}. Sample: each comparison rests on "
            "the seeds (in seed order) it had when it stopped, for both algorithms on every env it covers. "
            f"Error rate: the probability of any false verdict of superiority in the family of {len(family)} "
            f"comparisons is <= {plan.alpha:g} (family-wise, over all looks); of a false verdict of equivalence "
            "likewise (Bonferroni over the confidence sequences)."
        )
        if any(c.looks for c in family):
            figure = plots.plot_sequential(family, fig_dir / "sequential_intervals.png", plan.margin)
    else:
        alpha = ALPHA / (len(earlier) + 1)
        family = fixed_design(scores, pairs, tasks, alpha=alpha, margin=MARGIN, min_runs=min_runs)
        design = "fixed"
        rule = (
            "Fixed design: one look per comparison at the seeds both algorithms have on every env it covers (the "
            "first n in seed order), exact permutation test of P(X > Y) (Mann-Whitney, ties half), Holm over all "
            f"{len(family)} comparisons (every pair on every env, and each pair's aggregate over the envs); "
            f"credibly equivalent when the {1 - alpha / len(family):.4g} confidence sequence lies inside 0.5 +- "
            f"{MARGIN:g}; a comparison on fewer than {min_runs} seeds per algorithm and env gets no verdict. Error "
            f"rate: the probability of any false verdict of superiority in the family is <= {alpha:.3g} "
            "(family-wise)."
        )
    extended = None
    if earlier:
        listed = "; ".join(f"{rep.get('name') or rep['run_id']} on {sum(rep['runs'].values())} runs" for rep in earlier)
        if plan is None:
            extended = (
                f"this experiment was extended after {len(earlier)} earlier report(s) ({listed}): each was a look "
                f"at the data, so the verdicts with error control use alpha = {ALPHA:g} / {len(earlier) + 1} looks "
                f"= {alpha:.3g} (Bonferroni). Plan the looks with bench run --until-verdict instead."
            )
        else:
            extended = (
                f"earlier report(s) looked at fewer runs ({listed}); the sequential design's looks cover looks "
                "taken between its waves."
            )
    return {
        "design": design,
        "alpha": alpha,
        "rule": rule,
        "plan": plan.as_dict() if plan is not None else None,
        "extended": extended,
        "earlier_reports": earlier,
        "comparisons": [c.as_dict() for c in family],
        "figure": figure,
        "family": family,
    }


def _fmt(v: float) -> str:
    return f"{v:.3f}"


def control_blocks(control: dict[str, Any]) -> list[Block]:
    """The report's section "Verdicts with error control".

    Args:
        control: :func:`error_control`'s result.
    """
    b = [Block("h2", "Verdicts with error control"), Block("p", control["rule"])]
    if control["extended"]:
        b.append(Block("warn", control["extended"]))
    rows = []
    for c in control["family"]:
        if not c.looks:
            rows.append([c.x, c.y, c.env, "—", "—", "—", "—", _OUTCOME["open"].format(x=c.x, y=c.y), c.reason])
            continue
        lk = c.looks[-1]
        rows.append(
            [c.x, c.y, c.env, lk.n, _fmt(lk.point), f"[{_fmt(lk.low)}, {_fmt(lk.high)}]", f"{lk.p_value:.3g}",
             _OUTCOME[c.outcome].format(x=c.x, y=c.y), c.reason]
        )  # fmt: skip
    headers = ["X", "Y", "env", "seeds per algo", "P(X > Y)", "confidence sequence", "repeated p", "verdict",
               "why it stopped"]  # fmt: skip
    if control["design"] == "fixed":
        headers[-1], headers[-3] = "reason", "p (one look)"
    b.append(Block("table", headers=headers, items=rows))
    if control["design"] == "sequential":
        looks = control["plan"]["looks"]
        b.append(
            Block(
                "p",
                f"Looks at {', '.join(map(str, looks))} seeds per algorithm; a comparison stops at the first look "
                "where it settles, and an (algo, env) got the next wave while any comparison it belongs to was open.",
            )
        )
    if control["figure"] is not None:
        b.append(
            Block(
                "fig",
                "P(X > Y) wave by wave: point estimate and confidence sequence per comparison (dashed: 0.5 and the "
                "equivalence margin)",
                path=f"figures/{Path(control['figure']).name}",
            )
        )
    return b


def summary_lines(control: dict[str, Any]) -> list[str]:
    """One line per settled comparison, for the report's summary.

    Args:
        control: :func:`error_control`'s result.
    """
    out = []
    for c in control["family"]:
        if c.outcome != "open" and c.looks:
            out.append(
                f"With error control ({control['design']} design, Holm, family-wise {control['alpha']:.3g}): "
                f"{c.reason.split(': ', 1)[-1]} on {c.env} ({c.looks[-1].n} seeds per algorithm)."
            )
    return out


def as_json(control: dict[str, Any]) -> dict[str, Any]:
    """The JSON part (no objects)."""
    out = {k: v for k, v in control.items() if k != "family"}
    out["figure"] = str(control["figure"]) if control["figure"] is not None else None
    return out
