"""The report's one set of verdicts: the family of (pair, env) and aggregate comparisons, Holm over all of them,
and for a ``bench run --until-verdict`` experiment its sequential design replayed from the runs. Every "credibly
better / credibly equivalent / open / too few runs" in a report (summary, comparisons table, figures,
``aggregates.json``, MLflow) is :func:`verdict_of` a comparison decided here, and the one interval of P(X > Y)
shown anywhere is the comparison's confidence sequence (anytime-valid, simultaneous over the family by
Bonferroni): the interval the equivalence rule reads. P(X > Y) is always oriented with X before Y in name order.

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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lit_sb3.zoo.report.blocks import Block
from lit_sb3.zoo.results import Results

if TYPE_CHECKING:
    from lit_sb3.zoo.stats.sequential import Comparison

__all__ = [
    "error_control",
    "control_blocks",
    "report_runs",
    "verdict_of",
    "pair_verdicts",
    "summary_lines",
    "interval_name",
]

ALPHA = 0.05
MARGIN = 0.1


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
        short = (
            f"group-sequential permutation test of P(X > Y) ({plan.spending} spending, looks at "
            f"{', '.join(map(str, plan.looks))} seeds), Holm over {len(family)} comparisons, family-wise error "
            f"<= {plan.alpha:g} over all looks"
        )
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
        short = (
            f"exact permutation test of P(X > Y) (one look), Holm over {len(family)} comparisons, family-wise error "
            f"<= {alpha:.3g}; a verdict needs >= {min_runs} runs per algorithm and env"
        )
        rule = (
            "Fixed design: one look per comparison at the seeds both algorithms have on every env it covers (the "
            "first n in seed order), exact permutation test of P(X > Y) (Mann-Whitney, ties half), Holm over all "
            f"{len(family)} comparisons (every pair on every env, and each pair's aggregate over the envs); "
            f"credibly equivalent when the {1 - alpha / len(family):.4g} confidence sequence of P(X > Y) (the one "
            f"interval of P(X > Y) in this report) lies inside 0.5 +- {MARGIN:g}; a comparison on fewer than "
            f"{min_runs} seeds per algorithm and env gets no verdict. Error rate: the probability of any false "
            f"verdict of superiority in the family is <= {alpha:.3g} (family-wise), and of any false verdict of "
            f"equivalence likewise (the intervals hold simultaneously with probability >= {1 - alpha:.3g})."
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
        "tasks": list(tasks),
        "design": design,
        "alpha": alpha,
        "rule": rule,
        "rule_short": short,
        "margin": plan.margin if plan is not None else MARGIN,
        "min_runs": min_runs,
        "plan": plan.as_dict() if plan is not None else None,
        "extended": extended,
        "earlier_reports": earlier,
        "comparisons": [c.as_dict() for c in family],
        "figure": figure,
        "family": family,
    }


def _smallest_p(n: int, envs: int) -> float:
    """The smallest two-sided p-value the exact permutation test can give at ``n`` runs against ``n`` on ``envs``
    envs (every label set of the observed values but the two extremes is less extreme)."""
    from math import comb

    return min(1.0, 2.0 / float(comb(2 * n, n)) ** envs)


def verdict_of(c: Comparison, margin: float, alpha: float = ALPHA) -> tuple[str, str]:
    """The one wording of a decided comparison: ``(kind, text)``, kind ``better``, ``equivalent``, ``open``
    (neither, at the seeds it has; or a sequential design with looks still to come) or ``too_few_runs``.

    Args:
        c: a comparison of the family.
        margin: the equivalence margin on P(X > Y).
        alpha: the family-wise level (says when the exact test cannot reach it at this sample size).
    """
    if c.outcome in ("x_better", "y_better"):
        winner, loser = (c.x, c.y) if c.outcome == "x_better" else (c.y, c.x)
        return "better", f"{winner} is credibly better than {loser}"
    if c.outcome == "equivalent":
        return "equivalent", f"{c.x} and {c.y} are credibly equivalent (P({c.x} > {c.y}) within 0.5 ± {margin:g})"
    if not c.looks or c.reason.startswith("too few runs"):
        return "too_few_runs", c.reason or "too few runs for a verdict"
    if c.reason.startswith("open after look"):
        return "open", f"open: no verdict yet between {c.x} and {c.y} ({c.reason}; the design has more looks)"
    n = c.looks[-1].n
    smallest = _smallest_p(n, len(c.envs))
    if smallest > alpha:
        return "open", (
            f"open: no verdict between {c.x} and {c.y} is possible at {n} seeds per algorithm (the exact test's "
            f"smallest p is {smallest:.3g} > {alpha:.3g})"
        )
    return "open", f"open: {c.x} and {c.y} are neither credibly different nor credibly equivalent at {n} seeds"


def _headline(control: dict[str, Any], x: str, y: str) -> Comparison:
    """The comparison that decides the pair: its aggregate over the envs, or its one env."""
    for c in control["family"]:
        if {c.x, c.y} == {x, y} and (c.env == "aggregate" or len(c.envs) == len(control["tasks"])):
            return c
    raise KeyError(f"no comparison of {x} and {y} in the family")


def interval_name(control: dict[str, Any]) -> str:
    """What the interval of P(X > Y) is, in a few words (its level and what it is simultaneous over).

    Args:
        control: :func:`error_control`'s result.
    """
    m = len(control["family"])
    level = 100.0 * (1.0 - control["alpha"] / m)
    over = f", simultaneous over the {m} comparisons" if m > 1 else ""
    return f"{level:.4g} % confidence sequence{over}"


def pair_verdicts(
    control: dict[str, Any] | None,
    counts: Mapping[str, list[int]],
    steps: Mapping[str, str],
) -> list[dict[str, Any]]:
    """One verdict per pair of algorithms (X before Y in name order), from the error-controlled decision of the
    pair's comparison over the report's envs (its aggregate, or its one env), with that comparison's interval.

    Args:
        control: :func:`error_control`'s result.
        counts: algo -> runs per aggregated env.
        steps: algo -> env steps per run (text).
    """
    out: list[dict[str, Any]] = []
    if control is None:
        return out
    from lit_sb3.zoo.stats import Interval

    pairs = list(dict.fromkeys((c.x, c.y) for c in control["family"]))
    for x, y in pairs:
        c = _headline(control, x, y)
        kind, text = verdict_of(c, control["margin"], control["alpha"])
        winner = None
        if kind == "better":
            winner = c.x if c.outcome == "x_better" else c.y
        lk = c.looks[-1] if c.looks else None
        interval = Interval(lk.point, lk.low, lk.high) if lk else Interval(float("nan"), 0.0, 1.0)
        out.append(
            {
                "x": x,
                "y": y,
                "interval": interval,
                "interval_name": interval_name(control),
                "kind": kind,
                "winner": winner,
                "verdict": text,
                "comparison": c.env,
                "seeds": lk.n if lk else 0,
                "p_value": lk.p_value if lk else None,
                "rule": control["rule_short"],
                "design": control["design"],
                "alpha": control["alpha"],
                "n_x": min(counts[x]),
                "n_y": min(counts[y]),
                "runs": sum(counts[x]) + sum(counts[y]),
                "tasks": len(control["tasks"]),
                "env_steps": f"{steps[x]} ({x}), {steps[y]} ({y})" if steps[x] != steps[y] else steps[x],
            }
        )
    return out


def decision_text(d: dict[str, Any]) -> str:
    """How a pair's verdict was decided: its sample, its rule and its error rate (one clause); "not decided" for
    every verdict that is not one of superiority or equivalence.

    Args:
        d: one of :func:`pair_verdicts`.
    """
    on = "the aggregate over the envs" if d["comparison"] == "aggregate" else d["comparison"]
    if d["kind"] not in ("better", "equivalent"):
        return f"not decided (rule: {d['rule']})"
    return f"decided on the first {d['seeds']} seeds per algorithm on {on} (p = {d['p_value']:.3g}) by the {d['rule']}"


def _fmt(v: float) -> str:
    return f"{v:.3f}"


def control_blocks(control: dict[str, Any]) -> list[Block]:
    """The report's section "Verdicts with error control": the rule, then every comparison of the family with
    its P(X > Y), its interval, the p-value the rule reads and the verdict.

    Args:
        control: :func:`error_control`'s result.
    """
    name = interval_name(control)
    b = [Block("h2", "Verdicts with error control"), Block("p", control["rule"])]
    if control["extended"]:
        b.append(Block("warn", control["extended"]))
    rows = []
    for c in control["family"]:
        kind, text = verdict_of(c, control["margin"], control["alpha"])
        if kind == "too_few_runs":  # the details are in the reason column
            text = "too few runs for a verdict"
        if not c.looks:
            rows.append([c.x, c.y, c.env, "—", "—", "—", "—", text, c.reason])
            continue
        lk = c.looks[-1]
        p = f"{lk.p_value:.3g}" if kind != "too_few_runs" else f"— (below {control['min_runs']} runs: not read)"
        rows.append([c.x, c.y, c.env, lk.n, _fmt(lk.point), f"[{_fmt(lk.low)}, {_fmt(lk.high)}]", p, text, c.reason])
    headers = ["X", "Y", "env", "seeds per algo", "P(X > Y)", name, "repeated p", "verdict", "why it stopped"]
    if control["design"] == "fixed":
        headers[-1], headers[-3] = "reason", "p (exact, one look)"
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
    """One line per settled comparison on one env that is not already a pair's headline (a report over several
    envs: the pair's line states its aggregate), in the same wording.

    Args:
        control: :func:`error_control`'s result.
    """
    out = []
    for c in control["family"]:
        if c.env == "aggregate" or len(c.envs) == len(control["tasks"]):
            continue  # the pair's headline: stated by its summary line
        kind, text = verdict_of(c, control["margin"], control["alpha"])
        if kind in ("better", "equivalent"):
            lk = c.looks[-1]
            out.append(
                f"On {c.env}: {text}; decided on the first {lk.n} seeds per algorithm (p = {lk.p_value:.3g}) by the "
                f"{control['rule_short']}."
            )
    return out


def as_json(control: dict[str, Any]) -> dict[str, Any]:
    """The JSON part (no objects)."""
    out = {k: v for k, v in control.items() if k != "family"}
    for c, d in zip(control["family"], out["comparisons"], strict=True):
        d["kind"], d["verdict"] = verdict_of(c, control["margin"], control["alpha"])
    out["figure"] = str(control["figure"]) if control["figure"] is not None else None
    return out
