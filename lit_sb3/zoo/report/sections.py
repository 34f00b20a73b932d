"""The report as a list of sections: each computes its numbers (its part of ``aggregates.json``), draws its
figures and places its blocks (:data:`lit_sb3.zoo.report.build.SECTIONS` is the report, in order)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import time
from pathlib import Path
from typing import Any

import numpy as np

from lit_sb3.zoo import plots, stats
from lit_sb3.zoo.report.blocks import Block, _ci, _fmt, _int, _n, _steps
from lit_sb3.zoo.report.context import BOOKKEEPING, SHORT_EVAL, ReportContext, eval_episodes
from lit_sb3.zoo.report.control import (
    as_json,
    control_blocks,
    decision_text,
    interval_name,
    summary_lines,
)
from lit_sb3.zoo.results import Results, RunRecord

__all__ = [
    "Section",
    "Header",
    "Summary",
    "Warnings",
    "Protocol",
    "Aggregates",
    "Comparisons",
    "PerEnv",
    "Hyperparameters",
    "Normalisation",
    "Failed",
    "Timing",
    "Provenance",
    "protocol_of",
    "hyperparams_of",
    "constructor_defaults",
    "Rendered",
]

#: params shown in the budget/protocol table rather than among the hyperparameters (``seed`` varies per run)
_PROTOCOL_KEYS = ("n_timesteps", "n_timesteps_requested", "eval_freq", "eval_episodes", "seed")
#: values that mean "nothing set" (an empty wrapper list, no kwargs): a default whatever the key
_EMPTY = ("{}", "[]", "None", "")

Rendered = tuple[dict[str, Any], list[Block]]


def hyperparams_of(runs: list[RunRecord]) -> dict[str, str]:
    """One algo × env's hyperparameters from its runs' params (values that differ between seeds joined by " | ").

    ``seed`` and the budget/protocol keys are left out (shown elsewhere); a Lightning-logged duplicate
    ``model.K`` is dropped when ``K`` or ``algo_kwargs.K`` is there too.

    Args:
        runs: the runs.
    """
    merged: dict[str, set[str]] = {}
    for r in runs:
        for k, v in r.params.items():
            merged.setdefault(k, set()).add(v)
    out = {}
    for k, vs in merged.items():
        if k in _PROTOCOL_KEYS:
            continue
        if k.startswith("model.") and (k[6:] in merged or f"algo_kwargs.{k[6:]}" in merged):
            continue
        out[k] = " | ".join(sorted(vs))
    return out


def protocol_of(runs: list[RunRecord]) -> dict[str, Any]:
    """Budget and evaluation protocol of one algo × env's runs.

    Args:
        runs: the runs.
    """

    def values(key: str) -> str:
        found = sorted({r.params.get(key, "") for r in runs} - {""}, key=lambda v: (len(v), v))
        return ", ".join(_int(float(v)) if v.isdigit() else v for v in found) if found else "—"

    budgets = [float(r.params["n_timesteps"]) for r in runs if r.params.get("n_timesteps", "").isdigit()]
    asked = [float(r.params["n_timesteps_requested"]) for r in runs
             if r.params.get("n_timesteps_requested", "").isdigit()]  # fmt: skip
    episodes = [n for n in (eval_episodes(r) for r in runs) if n is not None]
    return {
        "budget_requested": _steps(asked) if asked else "—",
        "budget": _steps(budgets),
        "budget_values": sorted({int(b) for b in budgets}),
        "env_steps": _steps([r.total_timesteps for r in runs]),
        "env_steps_values": sorted({int(r.total_timesteps) for r in runs if np.isfinite(r.total_timesteps)}),
        "eval_freq": values("eval_freq"),
        "eval_episodes": values("eval_episodes") + (" †" if episodes and min(episodes) < SHORT_EVAL else ""),
        "deterministic": values("eval_deterministic")
        if any("eval_deterministic" in r.params for r in runs)
        else "True",
    }


@functools.cache
def constructor_defaults(algo: str) -> dict[str, Any]:
    """The literal constructor defaults of a registered lit_sb3 algorithm, read from its module's source.

    The numbers are written in the class's signature; importing the class to read them costs the library (torch,
    Lightning: 15 s measured on a loaded core for PPO and A2C) in a command that needs none of it. A default that is
    not a literal, and an algorithm outside lit_sb3's source, give nothing (those keys stay in the table).

    Args:
        algo: the algorithm's bench name.
    """
    from lit_sb3.algorithms.registry import ALGORITHMS

    module, _, name = ALGORITHMS.get(algo, "").partition(":")
    root = importlib.util.find_spec(module.split(".")[0]) if module else None
    if root is None or not root.submodule_search_locations:
        return {}
    file = Path(list(root.submodule_search_locations)[0]).joinpath(*module.split(".")[1:]).with_suffix(".py")
    if not file.is_file():
        return {}
    for node in ast.parse(file.read_text()).body:
        if not (isinstance(node, ast.ClassDef) and node.name == name):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args
                positional = args.posonlyargs + args.args
                pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
                out = {}
                for arg, default in pairs:
                    try:
                        out[arg.arg] = ast.literal_eval(default)
                    except ValueError:  # not a literal (a class, a call): not compared
                        continue
                return out
    return {}


def _default_keys(algo: str, hp: dict[str, str]) -> set[str]:
    """Keys of ``hp`` whose value is the algorithm's constructor default, an empty value or bookkeeping."""
    defaults = constructor_defaults(algo)
    out = set()
    for key, value in hp.items():
        if key in BOOKKEEPING or key in ("env_id", "torch_threads") or value in _EMPTY:
            out.add(key)
        elif key in defaults and _same(value, defaults[key]):
            out.add(key)
    return out


def _same(text: str, default: Any) -> bool:
    if text == str(default):
        return True
    try:
        return float(text) == float(default)
    except (TypeError, ValueError):
        return False


def _scores_by_seed(runs: list[RunRecord]) -> str:
    return ", ".join(f"{r.seed}: {_fmt(r.score)}" + (" †" if ReportContext.is_short(r) else "") for r in runs) or "—"


class Section:
    """One part of the report: :meth:`render` computes its numbers, draws its figures and places its blocks."""

    def render(self, ctx: ReportContext) -> Rendered:
        """``(its part of aggregates.json, its blocks)``.

        Args:
            ctx: the report's inputs and shared statistics.
        """
        raise NotImplementedError


class Header(Section):
    """Title, command and the sample-size warning."""

    def render(self, ctx: ReportContext) -> Rendered:
        small = sorted(
            {(a, e, n) for a in ctx.algos for e in ctx.tasks if (n := len(ctx.results.select(a, e))) < ctx.min_runs}
        )
        warning = None
        control = ctx.control
        if small and (control is None or control["design"] == "fixed"):  # a sequential design has its --min-seeds
            listed = ", ".join(f"{a} n={n} on {e}" for a, e, n in small[:8]) + (" ..." if len(small) > 8 else "")
            warning = (
                f"too few runs for a verdict: fewer than {ctx.min_runs} runs per algorithm and env ({listed}). "
                "The intervals below are computed and shown, but no comparison on so few runs gets a verdict. "
                f"Run at least {ctx.min_runs} seeds (bench run --seeds {ctx.min_runs}, or --until-verdict) or "
                "lower the threshold with --min-runs."
            )
        data = {
            "title": ctx.title,
            "command": ctx.command,
            "engine": ctx.engine,
            "min_runs": ctx.min_runs,
            "sample_warning": warning,
            "scale": ctx.scale,
            "normalize": ctx.normalize,
            "reps": ctx.reps,
            "curve_reps": ctx.curve_reps,
            "seed": ctx.seed,
            "confidence": 0.95,
            "tasks": ctx.tasks,
            "runs_per_task": ctx.counts,
            "implementations": ctx.impls,
        }
        blocks = [Block("h1", ctx.title), Block("code", ctx.command)]
        if warning:
            blocks.append(Block("warn", warning))
        return data, blocks


class Summary(Section):
    """What the report found: the best IQM and one line per pair's verdict."""

    def render(self, ctx: ReportContext) -> Rendered:
        agg = ctx.intervals[0]
        control, tasks = ctx.control, ctx.tasks
        lines = []
        if agg:
            best = max(agg, key=lambda a: agg[a]["iqm"].point)
            lines.append(
                f"Highest IQM {ctx.scale}: {best} ({_ci(agg[best]['iqm'])}), over {_n(sum(ctx.counts[best]), 'run')} "
                f"on {_n(len(tasks), 'env')}, {ctx.algo_steps[best]} env steps per run."
            )
        for d in ctx.verdicts:  # always P(X > Y) with X before Y in name order: one orientation everywhere
            lines.append(
                f"{d['verdict']}: P({d['x']} > {d['y']}) = {_ci(d['interval'])} ({d['interval_name']}); rests on "
                f"{d['runs']} runs ({d['x']}: n={d['n_x']}, {d['y']}: n={d['n_y']} per env) on "
                f"{_n(d['tasks'], 'env')}, {d['env_steps']} env steps per run; {decision_text(d)}."
            )
        if control is not None:
            lines += summary_lines(control)
        res = ctx.results
        rule = control["rule_short"] if control is not None else None
        text = (
            f"{_n(len(res.runs), 'finished run')} of {_n(len(ctx.algos), 'algorithm')} on {_n(len(res.envs), 'env')}"
            + (f" (the {ctx.impls[0]} runs; the implementations are compared below)" if len(ctx.impls) > 1 else "")
            + (
                f". Aggregates of {ctx.scale} over {_n(len(tasks), 'env')} ({', '.join(tasks)})"
                if tasks
                else ". No aggregate across algorithms (no env has runs of every one)"
            )
            + f"; 95 % stratified-bootstrap CIs with {_int(ctx.reps)} reps (seed {ctx.seed}, engine {ctx.engine}"
            + ("" if ctx.engine == "rliable" else ": vectorised, checked against rliable.library")
            + (f"); verdicts: {rule}" if rule else ")")
            + (
                f"; score table version {ctx.table.version}."
                if ctx.table is not None and ctx.normalize == "reference"
                else "."
            )
        )
        verdicts = [{k: v for k, v in d.items() if k != "interval"} | d["interval"].as_dict() for d in ctx.verdicts]
        data = {"summary": lines, "verdicts": verdicts, "verdict_rule": rule}
        none = "Not enough data for comparisons."
        if len(ctx.impls) > 1:
            none = "No comparison between algorithms (it needs runs of both on common envs); the implementations are "
            none += "compared below."
        blocks = [
            Block("h2", "Summary"),
            Block("p", text),
            Block("ul", items=lines or [none]),
        ]
        return data, blocks


class Warnings(Section):
    """Everything the reader must know before trusting a number."""

    def render(self, ctx: ReportContext) -> Rendered:
        blocks = [Block("h2", "Warnings"), Block("ul", items=list(ctx.warnings))] if ctx.warnings else []
        return {"warnings": list(ctx.warnings)}, blocks


class Protocol(Section):
    """Budget and evaluation protocol per algorithm and env."""

    def render(self, ctx: ReportContext) -> Rendered:
        rows = [
            [env, algo, p["budget_requested"], p["budget"], p["env_steps"], p["eval_freq"], p["eval_episodes"],
             p["deterministic"]]
            for env, per_algo in ctx.protocol.items()
            for algo, p in per_algo.items()
        ]  # fmt: skip
        headers = ["env", "algo", "budget asked (env steps)", "budget run (on-policy: rounded up to whole rollouts)",
                   "env steps trained", "eval requested every (env steps)", "episodes per eval", "deterministic"]  # fmt: skip
        blocks = [
            Block("h2", "Budget and evaluation protocol"),
            Block("table", headers=headers, items=rows),
            Block(
                "p",
                "A run's score is its final evaluation (mean return over the episodes above, on a separate eval env "
                "with VecNormalize statistics synced); the learning curves keep every periodic evaluation. On-policy "
                "algorithms evaluate at the first rollout boundary at or after each requested step, after the "
                "update."
                + (
                    f" † marks fewer than {SHORT_EVAL} episodes per evaluation."
                    if any(ctx.is_short(r) for r in ctx.results.runs)
                    else ""
                ),
            ),
        ]
        return {"protocol": ctx.protocol}, blocks


class Aggregates(Section):
    """Aggregate metrics with CIs, performance profiles and IQM sample-efficiency curves."""

    def render(self, ctx: ReportContext) -> Rendered:
        agg, profiles, curves = ctx.intervals
        blocks: list[Block] = []
        n_runs = {a: sum(c) for a, c in ctx.counts.items()}
        if agg:
            blocks.append(Block("h2", "Aggregate metrics"))
            blocks.append(
                Block(
                    "table",
                    headers=["algo", "runs", "median", "IQM", "mean", "optimality gap"],
                    items=[[a, n_runs[a], *(_ci(d[m]) for m in stats.METRICS)] for a, d in agg.items()],
                )
            )
            plots.plot_aggregates(agg, ctx.fig_dir / "aggregates.png", ctx.scale, n_runs=n_runs)
            blocks.append(Block("fig", f"Aggregate metrics of {ctx.scale} over {_n(len(ctx.tasks), 'env')}",
                                path="figures/aggregates.png"))  # fmt: skip
            plots.plot_profiles(profiles, ctx.fig_dir / "performance_profiles.png", ctx.scale)
            blocks.append(Block("fig", "Performance profiles (score distributions)",
                                path="figures/performance_profiles.png"))  # fmt: skip
        algo_curves = ctx.algo_curves
        if curves:
            labels = {c.label for c in algo_curves.values()}
            interpolated = sorted(a for a, c in algo_curves.items() if c.interpolated)
            plots.plot_iqm_curves(curves, ctx.fig_dir / "iqm_curves.png", " / ".join(sorted(labels)),
                                  f"IQM {ctx.scale}", n_runs={a: c.n_runs for a, c in algo_curves.items()},
                                  interpolated=interpolated)  # fmt: skip
            caption = (
                f"IQM sample-efficiency curves over {_n(len(ctx.tasks), 'env')} (n = runs per algorithm); each "
                "algorithm at its own evaluation steps"
            )
            if interpolated:
                caption += f"; hollow markers on {', '.join(interpolated)}: interpolated between its runs' evaluations"
            blocks.append(Block("fig", caption, path="figures/iqm_curves.png"))
        data = {
            "aggregates": {a: {m: iv.as_dict() for m, iv in d.items()} for a, d in agg.items()},
            "performance_profiles": {
                a: {"taus": p.taus.tolist(), "point": p.point.tolist(), "low": p.low.tolist(), "high": p.high.tolist()}
                for a, p in profiles.items()
            },
            "iqm_curves": {
                a: {
                    "x": c.steps.tolist(),
                    "x_label": algo_curves[a].label,
                    "interpolated": algo_curves[a].interpolated,
                    "n_runs": algo_curves[a].n_runs,
                    "point": c.point.tolist(),
                    "low": c.low.tolist(),
                    "high": c.high.tolist(),
                }
                for a, c in curves.items()
            },
        }
        return data, blocks


class Comparisons(Section):
    """The verdicts with error control: every comparison of the family, the figure of P(X > Y) with the one
    interval, and the final score of every seed the verdicts rest on."""

    def render(self, ctx: ReportContext) -> Rendered:
        control = ctx.control
        data: dict[str, Any] = {"probability_of_improvement": [], "error_control": None}
        blocks: list[Block] = []
        if control is not None:
            name = interval_name(control)
            blocks += control_blocks(control)
            poi = {(d["x"], d["y"]): d["interval"] for d in ctx.verdicts if d["seeds"]}
            data["probability_of_improvement"] = [
                {"x": d["x"], "y": d["y"], "interval_name": name, **d["interval"].as_dict()} for d in ctx.verdicts
            ]
            data["error_control"] = as_json(control)
            if poi:
                has_verdict = {(d["x"], d["y"]): d["kind"] == "better" for d in ctx.verdicts}
                plots.plot_improvement(poi, ctx.fig_dir / "probability_of_improvement.png", has_verdict,
                                       n_runs={a: sum(c) for a, c in ctx.counts.items()},
                                       interval_name=name)  # fmt: skip
                blocks.append(Block("fig", f"P(X > Y) of each pair over the aggregated envs, with its {name} "
                                    "(blue: a verdict of superiority)",
                                    path="figures/probability_of_improvement.png"))  # fmt: skip
        if ctx.tasks and ctx.algos:
            panels = {
                env: {a: [(r.seed, r.score, ctx.is_short(r)) for r in ctx.results.select(a, env)] for a in ctx.algos}
                for env in ctx.tasks
            }
            if not blocks:
                blocks.append(Block("h2", "Final scores"))
            plots.plot_final_scores(panels, ctx.fig_dir / "final_scores.png", ctx.colors)
            blocks.append(Block("fig", "The final score of every seed the comparisons rest on (raw return; bar: "
                                f"IQM; hollow: fewer than {SHORT_EVAL} evaluation episodes)",
                                path="figures/final_scores.png"))  # fmt: skip
        return data, blocks


class PerEnv(Section):
    """Per env and algorithm: runs, seeds, each seed's final score, mean ± std, IQM; the learning curves."""

    def render(self, ctx: ReportContext) -> Rendered:
        res = ctx.results
        per_env: dict[str, dict[str, Any]] = {}
        rows = []
        for env in res.envs:
            per_env[env] = {}
            for a in ctx.algos:
                runs = res.select(a, env)
                s = np.array([r.score for r in runs])
                d = {
                    "runs": len(runs),
                    "seeds": [r.seed for r in runs],
                    "scores": [r.score for r in runs],
                    "short_evaluation": [ctx.is_short(r) for r in runs],
                    "not_finished": res.not_finished.get((a, env), 0),
                    "mean": float(s.mean()) if s.size else None,
                    "std": float(s.std()) if s.size else None,
                    "iqm": stats.iqm(s) if s.size else None,
                    "normalized_iqm": stats.iqm([ctx.norm_or_nan(env, v) for v in s])
                    if s.size and ctx.table is not None and ctx.table.has(env)
                    else None,
                }
                per_env[env][a] = d
                ms = f"{_fmt(d['mean'])} ± {_fmt(d['std'])}" if d["runs"] else "—"
                rows.append([env, a, d["runs"], _scores_by_seed(runs), d["not_finished"], ms, _fmt(d["iqm"]),
                             _fmt(d["normalized_iqm"])])  # fmt: skip
        headers = ["env", "algo", "runs", "final score by seed (seed: score)", "failed/killed", "mean ± std",
                   "IQM (raw)", "IQM (normalised)"]  # fmt: skip
        blocks = [Block("h2", "Per-env results"), Block("table", headers=headers, items=rows)]
        if any(ctx.is_short(r) for r in res.runs):
            blocks.append(Block("p", f"† the score rests on fewer than {SHORT_EVAL} evaluation episodes."))
        if len({d["runs"] for pa in per_env.values() for d in pa.values()}) > 1:
            blocks.append(Block("p", "Seeds are unequal across algorithms/envs (see the runs column); the bootstrap "
                                "resamples each algorithm × env with its own number of runs."))  # fmt: skip
        for env in res.envs:
            curves = res.env_curves(env)
            if not curves:
                continue
            name = "figures/curves_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in env) + ".png"
            plots.plot_env_curves(env, curves, ctx.out / name, ctx.colors, reps=ctx.curve_reps, seed=ctx.seed)
            blocks.append(Block("h3", env))
            blocks.append(Block("p", "; ".join(
                f"{algo}: {p['budget']} env steps, evaluated every {p['eval_freq']} env steps "
                f"({p['eval_episodes']} episodes, deterministic={p['deterministic']})"
                for algo, p in ctx.protocol[env].items()) + "."))  # fmt: skip
            blocks.append(Block("fig", f"Learning curves on {env} (each algorithm at its own evaluation steps)",
                                path=name))  # fmt: skip
        return {"per_env": per_env}, blocks


class Hyperparameters(Section):
    """What differs between the compared runs first; keys at their defaults (and bookkeeping) hidden."""

    def render(self, ctx: ReportContext) -> Rendered:
        res = ctx.results
        hyper = {env: {a: hyperparams_of(res.select(a, env)) for a in ctx.protocol[env]} for env in res.envs}
        differing, hidden = {}, {}
        blocks = [
            Block("h2", "Hyperparameters"),
            Block(
                "p",
                "The resolved hyperparameters of each algorithm, as logged to its runs' MLflow params (values that "
                "differ between an algorithm's seeds are joined by |). Keys whose values differ between the compared "
                "algorithms come first, marked ≠; keys every algorithm leaves at its constructor default (or empty), "
                "and bookkeeping such as callback or verbose, are hidden (listed in aggregates.json).",
            ),
        ]
        for env, hp in hyper.items():
            names = list(hp)
            keys = {k for h in hp.values() for k in h} - set(BOOKKEEPING)
            # first the keys all compared runs set to different values, then those only some of them have
            everywhere = {k for k in keys if all(k in h for h in hp.values())}
            diff = sorted((k for k in keys if len({h.get(k, "—") for h in hp.values()}) > 1),
                          key=lambda k: (k not in everywhere, k))  # fmt: skip
            at_default = set.intersection(*(_default_keys(a, h) | (keys - set(h)) for a, h in hp.items()))
            present = {k for h in hp.values() for k in h}
            hide = sorted(((at_default & keys) - set(diff)) | (present & set(BOOKKEEPING)))
            shown = diff + sorted(keys - set(diff) - set(hide))
            differing[env], hidden[env] = diff, hide
            head = f"differing keys: {', '.join(diff)}" if diff else "no differing keys"
            blocks.append(Block("h3", f"{env}: {head}"))
            blocks.append(Block("table", headers=["key", *names, "differs"],
                                items=[[k, *(hp[n].get(k, "—") for n in names), "≠" if k in diff else ""]
                                       for k in shown]))  # fmt: skip
            if hide:
                blocks.append(Block("p", f"{_n(len(hide), 'key')} at defaults or bookkeeping, hidden: "
                                    f"{', '.join(hide)}."))  # fmt: skip
        data = {"hyperparameters": hyper, "differing_hyperparameters": differing, "hidden_hyperparameters": hidden}
        return data, blocks


class Normalisation(Section):
    """The random and reference scores of each env, with their sources."""

    def render(self, ctx: ReportContext) -> Rendered:
        table = ctx.table
        if table is None or ctx.normalize != "reference":
            return {"normalization_constants": {}, "table_version": None, "table_path": None}, []
        from lit_sb3.zoo.report.build import _relative

        constants = {
            env: {
                "random": table.entries[env].random,
                "reference": table.entries[env].reference,
                "random_source": table.entries[env].random_source,
                "reference_source": table.entries[env].reference_source,
            }
            for env in ctx.everything.envs
            if table.has(env)
        }
        path = _relative(table.path, ctx.out) if table.path else None
        data = {"normalization_constants": constants, "table_version": table.version, "table_path": path}
        if not constants:
            return data, []
        blocks = [
            Block("h2", "Normalisation constants"),
            Block(
                "p", f"normalised = (score − random) / (reference − random), from {path} (version {table.version})."
            ),  # fmt: skip
            Block(
                "table",
                headers=["env", "random", "reference", "random source", "reference source"],
                items=[
                    [env, _fmt(c["random"]), _fmt(c["reference"]), c["random_source"], c["reference_source"]]
                    for env, c in constants.items()
                ],
            ),  # fmt: skip
        ]
        return data, blocks


class Failed(Section):
    """Runs that did not finish, and why."""

    def render(self, ctx: ReportContext) -> Rendered:
        res = ctx.everything
        rows = [
            {"algo": a, "env": e, "count": n, "reasons": res.failure_reasons.get((a, e), [])}
            for (a, e), n in sorted(res.not_finished.items())
        ]
        blocks = [Block("h2", "Failed and missing runs")]
        if rows:
            blocks.append(Block("table", headers=["algo", "env", "not finished", "reasons"],
                                items=[[d["algo"], d["env"], d["count"], "; ".join(d["reasons"]) or "—"]
                                       for d in rows]))  # fmt: skip
        else:
            blocks.append(Block("p", "None: every job run FINISHED."))
        return {"not_finished": rows}, blocks


class Timing(Section):
    """Wall-clock and throughput per algorithm."""

    def render(self, ctx: ReportContext) -> Rendered:
        from lit_sb3.zoo.report.implementations import process_share

        timing = {}
        for a in ctx.algos:
            runs = [r for r in ctx.results.runs if r.algo == a]
            wall = np.array([r.wall_seconds * process_share(r) for r in runs])
            fps = np.array([r.fps for r in runs])
            timing[a] = {
                "runs": len(runs),
                "wall_seconds_total": float(np.nansum(wall)),
                "wall_seconds_mean": float(np.nanmean(wall)) if np.isfinite(wall).any() else None,
                "fps_mean": float(np.nanmean(fps)) if np.isfinite(fps).any() else None,
            }
        blocks = [
            Block("h2", "Wall-clock and throughput"),
            Block(
                "table",
                headers=["algo", "runs", "wall seconds (total)", "wall seconds (mean per run)", "fps (mean)"],
                items=[
                    [a, t["runs"], _fmt(t["wall_seconds_total"]), _fmt(t["wall_seconds_mean"]), _fmt(t["fps_mean"])]
                    for a, t in timing.items()
                ],
            ),  # fmt: skip
            Block(
                "p",
                "A run's wall seconds are its process's divided by K, the seeds trained together in that "
                "process (seed batching): the totals add up to the processes' time.",
            ),  # fmt: skip
        ]
        return {"timing": timing}, blocks


class Provenance(Section):
    """Where the numbers come from: store, versions, machine, run ids and links into MLflow."""

    def render(self, ctx: ReportContext) -> Rendered:
        from lit_sb3.zoo.report.build import _links, _relative_uri

        res = ctx.everything
        prov = {
            "tracking_uri": _relative_uri(res.tracking_uri, ctx.out),
            "experiment": res.experiment,
            "experiment_id": res.experiment_id,
            "run_ids": sorted(r.run_id for r in res.runs),
            "config_hashes": {
                f"{a}/{e}": sorted({r.config_hash for r in res.select(a, e)})
                for a in res.algos
                for e in res.envs
                if res.select(a, e)
            },
            "lit_sb3_version": _unique_tag(res, "lit_sb3.version"),
            "torch_version": _unique_tag(res, "torch.version"),
            "gymnasium_version": _unique_tag(res, "gymnasium.version"),
            "git_commit": _unique_tag(res, "git.commit"),
            "machine": ctx.machine(),
            "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
        links = _links(res)
        blocks = [
            Block("h2", "Provenance"),
            Block(
                "ul",
                items=[
                    f"tracking URI: {prov['tracking_uri']}",
                    f"experiment: {prov['experiment']} (id {prov['experiment_id']})",
                    f"lit_sb3: {prov['lit_sb3_version']}",
                    f"torch: {prov['torch_version']}",
                    f"gymnasium: {prov['gymnasium_version']}",
                    f"git commit: {prov['git_commit']}",
                    f"machine (report): {prov['machine']}",
                    f"generated: {prov['generated']}",
                ],
            ),  # fmt: skip
            Block(
                "table",
                headers=["algo/env", "config hashes"],
                items=[[k, ", ".join(v)] for k, v in prov["config_hashes"].items()],
            ),  # fmt: skip
            Block("p", "Run ids: " + ", ".join(prov["run_ids"])),
        ]
        if links:
            blocks.append(Block("h3", "In MLflow (model-training view)"))
            blocks.append(Block("p", f"Serve the store with `{links['serve']}`, then:" if links["serve"] else "Open:"))
            blocks.append(Block("links", items=[tuple(item) for item in links["items"]]))
        return {"provenance": prov, "links": links}, blocks


def _unique_tag(results: Results, key: str) -> str:
    values = sorted({r.tags.get(key, "") for r in results.runs} - {""})
    return ", ".join(values) if values else "—"
