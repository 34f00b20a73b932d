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

import base64
import csv
import html
import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lit_sb3.zoo import plots, stats
from lit_sb3.zoo.normalization import ScoreTable, load_table
from lit_sb3.zoo.normalization import normalize as normalize_score
from lit_sb3.zoo.results import Results

__all__ = ["build_report", "Block", "MIN_RUNS", "ENGINES"]

CURVE_REPS = 2000
#: runs per algorithm and env below which no verdict is drawn
MIN_RUNS = 5
ENGINES = ("fast", "rliable")
#: params shown in the budget/protocol table rather than among the hyperparameters (``seed`` varies per run)
_PROTOCOL_KEYS = ("n_timesteps", "eval_freq", "eval_episodes", "seed")


@dataclass
class Block:
    """One element of the document, rendered to both markdown and HTML.

    Args:
        kind: ``h1``, ``h2``, ``h3``, ``p``, ``warn``, ``ul``, ``code``, ``table`` or ``fig``.
        text: heading/paragraph/code text, or figure caption.
        items: list items, or table rows.
        headers: table headers.
        path: figure file, relative to the report folder.
    """

    kind: str
    text: str = ""
    items: list[Any] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    path: str = ""


def _fmt(x: float | None) -> str:
    """The one number format of the report: 3 decimals (scores, CIs, probabilities, seconds), — for none."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return f"{float(x):.3f}"


def _int(n: float | None) -> str:
    """Counts and env steps: integers with thousands separators."""
    if n is None or (isinstance(n, float) and not np.isfinite(n)):
        return "—"
    return f"{int(round(n)):,}"


def _ci(iv: stats.Interval) -> str:
    return f"{_fmt(iv.point)} [{_fmt(iv.low)}, {_fmt(iv.high)}]"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _steps(values: list[float]) -> str:
    """One env-step count, or the range when runs differ."""
    finite = sorted({int(v) for v in values if np.isfinite(v)})
    if not finite:
        return "—"
    return _int(finite[0]) if len(finite) == 1 else f"{_int(finite[0])}–{_int(finite[-1])}"


def _md(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b.kind == "h1":
            out.append(f"# {b.text}\n")
        elif b.kind == "h2":
            out.append(f"## {b.text}\n")
        elif b.kind == "h3":
            out.append(f"### {b.text}\n")
        elif b.kind == "warn":
            out.append(f"> **Warning:** {b.text}\n")
        elif b.kind == "p":
            out.append(b.text + "\n")
        elif b.kind == "ul":
            out.append("\n".join(f"- {i}" for i in b.items) + "\n")
        elif b.kind == "code":
            out.append(f"```\n{b.text}\n```\n")
        elif b.kind == "table":
            rows = [b.headers, ["---"] * len(b.headers), *b.items]
            out.append("\n".join("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows) + "\n")
        elif b.kind == "fig":
            out.append(f"![{b.text}]({b.path})\n")
    return "\n".join(out)


def _html(blocks: list[Block], title: str, folder: Path) -> str:
    e = html.escape
    body = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3", "p"):
            tag = b.kind
            body.append(f"<{tag}>{e(b.text)}</{tag}>")
        elif b.kind == "warn":
            body.append(f'<div class="warn"><strong>Warning:</strong> {e(b.text)}</div>')
        elif b.kind == "ul":
            body.append("<ul>" + "".join(f"<li>{e(str(i))}</li>" for i in b.items) + "</ul>")
        elif b.kind == "code":
            body.append(f"<pre><code>{e(b.text)}</code></pre>")
        elif b.kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in b.items)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b.kind == "fig":
            raw = (folder / b.path).read_bytes()
            data = base64.b64encode(raw).decode("ascii")
            # shown at 100 CSS px per inch of figure (the PNG has plots.DPI pixels per inch): sharp, not oversized
            width = int.from_bytes(raw[16:20], "big") * 100 // plots.DPI
            body.append(
                f'<figure><img src="data:image/png;base64,{data}" width="{width}" alt="{e(b.text)}" '
                f'data-file="{e(b.path)}">'
                f'<figcaption>{e(b.text)} (<a href="{e(b.path)}">PNG</a>, '
                f'<a href="{e(str(Path(b.path).with_suffix(".svg")))}">SVG</a>)</figcaption></figure>'
            )
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left}th{background:#f3f3f3}pre{background:#f6f6f6;padding:0.8em;overflow-x:auto}"
        "img{max-width:100%;height:auto}figure{margin:1em 0}figcaption{font-size:0.85em;color:#555}"
        ".warn{background:#fff4e5;border-left:6px solid #e67e00;padding:0.8em 1em;margin:1em 0;font-size:1.05em}"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _machine() -> str:
    import os

    return f"{platform.node()} ({platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()})"


def _unique_tag(results: Results, key: str) -> str:
    values = sorted({r.tags.get(key, "") for r in results.runs} - {""})
    return ", ".join(values) if values else "—"


def _hyperparams(runs: list[Any]) -> dict[str, str]:
    """One algo × env's hyperparameters from its runs' params (values that differ between seeds joined by " | ").

    ``seed`` and the budget/protocol keys are left out (shown elsewhere); a Lightning-logged duplicate
    ``model.K`` is dropped when ``K`` or ``algo_kwargs.K`` is there too.
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


def _protocol(results: Results, env: str, algo: str) -> dict[str, Any]:
    runs = results.select(algo, env)

    def values(key: str) -> str:
        found = sorted({r.params.get(key, "") for r in runs} - {""}, key=lambda v: (len(v), v))
        return ", ".join(_int(float(v)) if v.isdigit() else v for v in found) if found else "—"

    budgets = [float(r.params["n_timesteps"]) for r in runs if r.params.get("n_timesteps", "").isdigit()]
    return {
        "budget": _steps(budgets),
        "budget_values": sorted({int(b) for b in budgets}),
        "env_steps": _steps([r.total_timesteps for r in runs]),
        "env_steps_values": sorted({int(r.total_timesteps) for r in runs if np.isfinite(r.total_timesteps)}),
        "eval_freq": values("eval_freq"),
        "eval_episodes": values("eval_episodes"),
        "deterministic": values("eval_deterministic")
        if any("eval_deterministic" in r.params for r in runs)
        else "True",
    }


def _verdicts(
    poi: dict[tuple[str, str], stats.Interval],
    counts: dict[str, list[int]],
    tasks: list[str],
    steps: dict[str, str],
    min_runs: int,
) -> list[dict[str, Any]]:
    """One verdict per pair: credible only when the CI excludes 0.5 and both have >= ``min_runs`` runs per env."""
    out = []
    for (x, y), iv in poi.items():
        nx, ny = min(counts[x]), min(counts[y])
        winner = x if iv.low > 0.5 else y if iv.high < 0.5 else None
        if nx < min_runs or ny < min_runs:
            kind = "too_few_runs"
            text = f"too few runs for a verdict (n={nx} {x}, n={ny} {y} per env; a verdict needs >= {min_runs})"
        elif winner is None:
            kind, text = "no_difference", f"no credible difference between {x} and {y}"
        else:
            loser = y if winner == x else x
            kind, text = "better", f"{winner} is credibly better than {loser}"
        out.append(
            {
                "x": x,
                "y": y,
                "interval": iv,
                "kind": kind,
                "winner": winner if kind == "better" else None,
                "verdict": text,
                "n_x": nx,
                "n_y": ny,
                "runs": sum(counts[x]) + sum(counts[y]),
                "tasks": len(tasks),
                "env_steps": f"{steps[x]} ({x}), {steps[y]} ({y})" if steps[x] != steps[y] else steps[x],
            }
        )
    return out


def build_report(
    results: Results,
    out_dir: str | Path,
    *,
    normalize: str = "reference",
    reps: int = 50_000,
    title: str | None = None,
    table: ScoreTable | None = None,
    seed: int = 0,
    command: str | None = None,
    log_to_mlflow: bool = True,
    min_runs: int = MIN_RUNS,
    engine: str = "fast",
) -> Path:
    """Write report.md, report.html, scores.csv, aggregates.json and figures/*.{png,svg}; log them to MLflow.

    Args:
        results: runs read by :func:`lit_sb3.zoo.results.load_results`.
        out_dir: output folder (created).
        normalize: ``"reference"`` (random → 0, reference → 1) or ``"none"`` (raw returns).
        reps: bootstrap replications for aggregates, profiles and probability of improvement.
        title: report title.
        table: scores table (default ``benchmarks/scores.yml``; only read when normalising).
        seed: bootstrap seed.
        command: the command line shown at the top.
        log_to_mlflow: log a ``lit_sb3.run_type="report"`` run with the files as artifacts.
        min_runs: runs per algorithm and env below which no verdict is drawn (intervals are still shown).
        engine: ``"fast"`` (vectorised bootstrap) or ``"rliable"`` (every interval by ``rliable.library``).

    Returns:
        The path of report.md.
    """
    if normalize not in ("reference", "none"):
        raise ValueError(f"normalize must be 'reference' or 'none', got {normalize!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if min_runs < 1:
        raise ValueError(f"min_runs must be >= 1, got {min_runs}")
    out = Path(out_dir)
    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    title = title or f"Benchmark report: {results.experiment}"
    command = command or "build_report(...) (called from Python)"
    algos, warnings = results.algos, []
    colors = plots.algo_colors(algos)

    # --- which envs are aggregated, on which scale
    common = results.common_envs()
    for env in results.envs:
        if env not in common:
            missing = [a for a in algos if not results.select(a, env)]
            warnings.append(f"{env}: no FINISHED runs for {', '.join(missing)}; left out of the aggregates")
    if normalize == "reference":
        table = table or load_table()
        for env in results.envs:
            if not table.has(env):
                warnings.append(f"{env}: not in the score table (version {table.version}); reported raw")
        tasks = [e for e in common if table.has(e)]
        if not tasks:
            warnings.append("no env can be normalised: aggregates use raw returns")
            tasks, scale = common, "raw return"
        else:
            scale = "normalised score"
    else:
        tasks, scale = common, "raw return"
        if len(tasks) > 1:
            warnings.append("aggregates pool raw returns of different envs (use --normalize reference)")

    def transform(env: str, values: NDArray[np.float64]) -> NDArray[np.float64]:
        if scale == "normalised score" and table is not None:
            return np.vectorize(lambda v: normalize_score(v, env, table), otypes=[float])(values)
        return values

    def norm_or_nan(env: str, v: float) -> float:
        return normalize_score(v, env, table) if table is not None and table.has(env) else float("nan")

    # --- statistics
    score_dict = {a: results.scores(a, tasks, transform) for a in algos}
    all_scores = np.concatenate([np.concatenate(v) for v in score_dict.values()]) if tasks else np.zeros(1)
    lo_tau, hi_tau = float(all_scores.min()), float(all_scores.max())
    if scale == "normalised score":
        lo_tau, hi_tau = min(lo_tau, 0.0), max(hi_tau, 1.0)
    taus = np.linspace(lo_tau, hi_tau if hi_tau > lo_tau else lo_tau + 1.0, 101)
    x, x_label, curve_mats = results.aggregate_curves(tasks, transform)
    curve_reps = min(reps, CURVE_REPS)
    if engine == "rliable" and tasks:
        agg, poi, profiles, curves = stats.reference_intervals(
            score_dict,
            taus=taus,
            curve_dict=curve_mats if x.size else None,
            steps=x,
            reps=reps,
            seed=seed,
        )
        if len(algos) < 2:
            poi = {}
    else:
        agg = stats.aggregate_intervals(score_dict, reps=reps, seed=seed) if tasks else {}
        poi = stats.improvement_intervals(score_dict, reps=reps, seed=seed + 1) if tasks and len(algos) > 1 else {}
        profiles = stats.performance_profiles(score_dict, taus, reps=reps, seed=seed + 2) if tasks else {}
        curves = stats.iqm_curves(curve_mats, x, reps=curve_reps, seed=seed + 3) if x.size else {}

    # --- sample sizes, budgets, protocol, hyperparameters, normalisation constants
    counts = {a: [len(results.select(a, e)) for e in tasks] for a in algos}
    protocol = {env: {a: _protocol(results, env, a) for a in algos if results.select(a, env)} for env in results.envs}
    algo_steps = {
        a: _steps([float(v) for e in tasks for v in protocol[e][a]["env_steps_values"]]) if tasks else "—"
        for a in algos
    }
    verdicts = _verdicts(poi, counts, tasks, algo_steps, min_runs)
    small = sorted(
        {(a, e, len(results.select(a, e))) for a in algos for e in tasks if len(results.select(a, e)) < min_runs}
    )
    sample_warning = None
    if small:
        listed = ", ".join(f"{a} n={n} on {e}" for a, e, n in small[:8]) + (" ..." if len(small) > 8 else "")
        sample_warning = (
            f"too few runs for a verdict: fewer than {min_runs} runs per algorithm and env ({listed}). "
            "The intervals below are computed and shown, but with so few runs they mostly span the observed "
            f"values, so no algorithm is called better. Run at least {min_runs} seeds (bench run --seeds "
            f"{min_runs}) or lower the threshold with --min-runs."
        )
    hyper = {env: {a: _hyperparams(results.select(a, env)) for a in protocol[env]} for env in results.envs}
    differing = {
        env: sorted(k for k in {k for h in hp.values() for k in h} if len({h.get(k, "—") for h in hp.values()}) > 1)
        for env, hp in hyper.items()
    }
    constants = (
        {
            env: {
                "random": table.entries[env].random,
                "reference": table.entries[env].reference,
                "random_source": table.entries[env].random_source,
                "reference_source": table.entries[env].reference_source,
            }
            for env in results.envs
            if table.has(env)
        }
        if table is not None and normalize == "reference"
        else {}
    )

    # --- figures
    figs: list[tuple[str, str]] = []
    if agg:
        plots.plot_aggregates(agg, fig_dir / "aggregates.png", scale)
        figs.append(("figures/aggregates.png", f"Aggregate metrics of {scale} over {_n(len(tasks), 'env')}"))
        plots.plot_profiles(profiles, fig_dir / "performance_profiles.png", scale)
        figs.append(("figures/performance_profiles.png", "Performance profiles (score distributions)"))
    if poi:
        has_verdict = {(d["x"], d["y"]): d["kind"] == "better" for d in verdicts}
        plots.plot_improvement(poi, fig_dir / "probability_of_improvement.png", has_verdict)
        figs.append(("figures/probability_of_improvement.png", "Probability of improvement"))
    if curves:
        plots.plot_iqm_curves(curves, fig_dir / "iqm_curves.png", x_label, f"IQM {scale}")
        figs.append(("figures/iqm_curves.png", "IQM sample-efficiency curves"))
    env_figs: dict[str, tuple[str, str]] = {}
    for env in results.envs:
        steps, env_curves = results.env_curves(env)
        if env_curves:
            name = "figures/curves_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in env) + ".png"
            plots.plot_env_curves(env, steps, env_curves, out / name, colors, reps=curve_reps, seed=seed)
            env_figs[env] = (name, f"Learning curves on {env}")

    # --- files: scores.csv
    with (out / "scores.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "algo",
                "env",
                "seed",
                "run_id",
                "score",
                "normalized_score",
                "env_steps",
                "wall_seconds",
                "fps",
                "config_hash",
            ]
        )
        for r in sorted(results.runs, key=lambda r: (r.algo, r.env, r.seed)):
            n = norm_or_nan(r.env, r.score)
            w.writerow(
                [
                    r.algo,
                    r.env,
                    r.seed,
                    r.run_id,
                    r.score,
                    "" if np.isnan(n) else n,
                    "" if np.isnan(r.total_timesteps) else int(r.total_timesteps),
                    r.wall_seconds,
                    r.fps,
                    r.config_hash,
                ]
            )

    per_env: dict[str, dict[str, Any]] = {}
    for env in results.envs:
        per_env[env] = {}
        for a in algos:
            runs = results.select(a, env)
            s = np.array([r.score for r in runs])
            per_env[env][a] = {
                "runs": len(runs),
                "seeds": [r.seed for r in runs],
                "not_finished": results.not_finished.get((a, env), 0),
                "mean": float(s.mean()) if s.size else None,
                "std": float(s.std()) if s.size else None,
                "iqm": stats.iqm(s) if s.size else None,
                "normalized_iqm": stats.iqm([norm_or_nan(env, v) for v in s])
                if s.size and table is not None and table.has(env)
                else None,
            }
    timing = {}
    for a in algos:
        runs = [r for r in results.runs if r.algo == a]
        wall = np.array([r.wall_seconds for r in runs])
        fps = np.array([r.fps for r in runs])
        timing[a] = {
            "runs": len(runs),
            "wall_seconds_total": float(np.nansum(wall)),
            "wall_seconds_mean": float(np.nanmean(wall)) if np.isfinite(wall).any() else None,
            "fps_mean": float(np.nanmean(fps)) if np.isfinite(fps).any() else None,
        }
    provenance = {
        "tracking_uri": results.tracking_uri,
        "experiment": results.experiment,
        "experiment_id": results.experiment_id,
        "run_ids": sorted(r.run_id for r in results.runs),
        "config_hashes": {
            f"{a}/{e}": sorted({r.config_hash for r in results.select(a, e)})
            for a in algos
            for e in results.envs
            if results.select(a, e)
        },
        "lit_sb3_version": _unique_tag(results, "lit_sb3.version"),
        "torch_version": _unique_tag(results, "torch.version"),
        "gymnasium_version": _unique_tag(results, "gymnasium.version"),
        "git_commit": _unique_tag(results, "git.commit"),
        "machine": _machine(),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    not_finished = [
        {"algo": a, "env": e, "count": n, "reasons": results.failure_reasons.get((a, e), [])}
        for (a, e), n in sorted(results.not_finished.items())
    ]
    summary = _summary(agg, verdicts, scale, counts, tasks, algo_steps)
    aggregates = {
        "title": title,
        "command": command,
        "engine": engine,
        "min_runs": min_runs,
        "sample_warning": sample_warning,
        "scale": scale,
        "normalize": normalize,
        "table_version": table.version if table is not None and normalize == "reference" else None,
        "table_path": str(table.path) if table is not None and table.path and normalize == "reference" else None,
        "normalization_constants": constants,
        "reps": reps,
        "curve_reps": curve_reps,
        "seed": seed,
        "confidence": 0.95,
        "tasks": tasks,
        "runs_per_task": counts,
        "aggregates": {a: {m: iv.as_dict() for m, iv in d.items()} for a, d in agg.items()},
        "probability_of_improvement": [{"x": x_, "y": y_, **iv.as_dict()} for (x_, y_), iv in poi.items()],
        "verdicts": [{k: v for k, v in d.items() if k != "interval"} | d["interval"].as_dict() for d in verdicts],
        "performance_profiles": {
            a: {"taus": p.taus.tolist(), "point": p.point.tolist(), "low": p.low.tolist(), "high": p.high.tolist()}
            for a, p in profiles.items()
        },
        "iqm_curves": {
            "x": x.tolist(),
            "x_label": x_label,
            **{
                a: {"point": c.point.tolist(), "low": c.low.tolist(), "high": c.high.tolist()}
                for a, c in curves.items()
            },
        },
        "protocol": protocol,
        "hyperparameters": hyper,
        "differing_hyperparameters": differing,
        "per_env": per_env,
        "timing": timing,
        "not_finished": not_finished,
        "warnings": warnings,
        "summary": summary,
        "provenance": provenance,
    }
    (out / "aggregates.json").write_text(json.dumps(aggregates, indent=2, allow_nan=False, default=_nan_none))

    blocks = _blocks(aggregates, verdicts, figs, env_figs, results)
    (out / "report.md").write_text(_md(blocks))
    (out / "report.html").write_text(_html(blocks, title, out))
    aggregates["seconds"] = time.perf_counter() - started
    if log_to_mlflow:
        _log(results, out, aggregates)
    return out / "report.md"


def _nan_none(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(type(obj).__name__)


def _summary(
    agg: dict[str, dict[str, stats.Interval]],
    verdicts: list[dict[str, Any]],
    scale: str,
    counts: dict[str, list[int]],
    tasks: list[str],
    algo_steps: dict[str, str],
) -> list[str]:
    lines = []
    if agg:
        best = max(agg, key=lambda a: agg[a]["iqm"].point)
        lines.append(
            f"Highest IQM {scale}: {best} ({_ci(agg[best]['iqm'])}), over {_n(sum(counts[best]), 'run')} on "
            f"{_n(len(tasks), 'env')}, {algo_steps[best]} env steps per run."
        )
    for d in verdicts:
        x, y, iv = d["x"], d["y"], d["interval"]
        if d["kind"] == "better" and d["winner"] == y:  # state it from the winner's side: P(Y > X) = 1 - P(X > Y)
            x, y, iv = y, x, stats.Interval(1.0 - iv.point, 1.0 - iv.high, 1.0 - iv.low)
        lines.append(
            f"{d['verdict']}: P({x} > {y}) = {_ci(iv)}; rests on {d['runs']} runs ({d['x']}: n={d['n_x']}, "
            f"{d['y']}: n={d['n_y']} per env) on {_n(d['tasks'], 'env')}, {d['env_steps']} env steps per run."
        )
    return lines


def _blocks(
    a: dict[str, Any],
    verdicts: list[dict[str, Any]],
    figs: list[tuple[str, str]],
    env_figs: dict[str, tuple[str, str]],
    results: Results,
) -> list[Block]:
    prov, tasks, scale = a["provenance"], a["tasks"], a["scale"]
    b: list[Block] = [Block("h1", a["title"]), Block("code", a["command"])]
    if a["sample_warning"]:
        b.append(Block("warn", a["sample_warning"]))
    b.append(Block("h2", "Summary"))
    b.append(
        Block(
            "p",
            f"{_int(len(results.runs))} finished runs of {len(results.algos)} algorithms on "
            f"{_n(len(results.envs), 'env')}. Aggregates of {scale} over {_n(len(tasks), 'env')} "
            f"({', '.join(tasks) or 'none'}), 95 % stratified-bootstrap CIs with {_int(a['reps'])} reps "
            f"(seed {a['seed']}, engine {a['engine']}"
            + ("" if a["engine"] == "rliable" else ": vectorised, checked against rliable.library")
            + f"); a verdict needs >= {a['min_runs']} runs per algorithm and env"
            + (f"; score table version {a['table_version']}." if a["table_version"] is not None else "."),
        )
    )
    b.append(Block("ul", items=a["summary"] or ["Not enough data for comparisons."]))
    if a["warnings"]:
        b += [Block("h2", "Warnings"), Block("ul", items=a["warnings"])]

    b.append(Block("h2", "Budget and evaluation protocol"))
    rows = []
    for env, per_algo in a["protocol"].items():
        for algo, p in per_algo.items():
            rows.append(
                [env, algo, p["budget"], p["env_steps"], p["eval_freq"], p["eval_episodes"], p["deterministic"]]
            )
    b.append(
        Block(
            "table",
            headers=[
                "env",
                "algo",
                "budget (env steps; on-policy: whole rollouts)",
                "env steps trained",
                "eval requested every (env steps)",
                "episodes per eval",
                "deterministic",
            ],
            items=rows,
        )
    )
    b.append(
        Block(
            "p",
            "A run's score is its final evaluation (mean return over the episodes above, on a separate eval env "
            "with VecNormalize statistics synced); the learning curves keep every periodic evaluation. On-policy "
            "algorithms evaluate at the first rollout boundary at or after each requested step, after the update.",
        )
    )
    if a["aggregates"]:
        b.append(Block("h2", "Aggregate metrics"))
        b.append(
            Block(
                "table",
                headers=["algo", "runs", "median", "IQM", "mean", "optimality gap"],
                items=[
                    [algo, sum(a["runs_per_task"][algo]), *(_ci(stats.Interval(**d[m])) for m in stats.METRICS)]
                    for algo, d in a["aggregates"].items()
                ],
            )
        )
    if verdicts:
        b.append(Block("h2", "Probability of improvement"))
        b.append(
            Block(
                "table",
                headers=["X", "Y", "P(X > Y) [95 % CI]", "runs per env (X + Y)", "verdict"],
                items=[
                    [d["x"], d["y"], _ci(d["interval"]), f"{d['n_x']} + {d['n_y']}", d["verdict"]] for d in verdicts
                ],
            )
        )
    for path, caption in figs:
        b.append(Block("fig", caption, path=path))

    b.append(Block("h2", "Per-env results"))
    rows = []
    for env, per_algo in a["per_env"].items():
        for algo, d in per_algo.items():
            ms = f"{_fmt(d['mean'])} ± {_fmt(d['std'])}" if d["runs"] else "—"
            rows.append(
                [
                    env,
                    algo,
                    d["runs"],
                    ", ".join(map(str, d["seeds"])) or "—",
                    d["not_finished"],
                    ms,
                    _fmt(d["iqm"]),
                    _fmt(d["normalized_iqm"]),
                ]
            )
    b.append(
        Block(
            "table",
            headers=["env", "algo", "runs", "seeds", "failed/killed", "mean ± std", "IQM (raw)", "IQM (normalised)"],
            items=rows,
        )
    )
    counts = {(algo, e): d["runs"] for e, pa in a["per_env"].items() for algo, d in pa.items()}
    if len(set(counts.values())) > 1:
        b.append(
            Block(
                "p",
                "Seeds are unequal across algorithms/envs (see the runs column); the bootstrap "
                "resamples each algorithm × env with its own number of runs.",
            )
        )
    for env in a["per_env"]:
        if env in env_figs:
            per_algo = a["protocol"][env]
            b.append(Block("h3", env))
            b.append(
                Block(
                    "p",
                    "; ".join(
                        f"{algo}: {p['budget']} env steps, evaluated every {p['eval_freq']} env steps "
                        f"({p['eval_episodes']} episodes, deterministic={p['deterministic']})"
                        for algo, p in per_algo.items()
                    )
                    + ".",
                )
            )
            path, caption = env_figs[env]
            b.append(Block("fig", caption, path=path))

    b.append(Block("h2", "Hyperparameters"))
    b.append(
        Block(
            "p",
            "The resolved hyperparameters of each algorithm, as logged to its runs' MLflow params (values that "
            "differ between an algorithm's seeds are joined by |). Keys whose values differ between algorithms "
            "come first, marked ≠.",
        )
    )
    for env, hp in a["hyperparameters"].items():
        names = list(hp)
        diff = a["differing_hyperparameters"][env]
        keys = diff + sorted({k for h in hp.values() for k in h} - set(diff))
        b.append(Block("h3", f"{env}: " + (f"differing keys: {', '.join(diff)}" if diff else "no differing keys")))
        b.append(
            Block(
                "table",
                headers=["key", *names, "differs"],
                items=[[k, *(hp[n].get(k, "—") for n in names), "≠" if k in diff else ""] for k in keys],
            )
        )

    if a["normalization_constants"]:
        b.append(Block("h2", "Normalisation constants"))
        b.append(
            Block(
                "p",
                f"normalised = (score − random) / (reference − random), from {a['table_path']} "
                f"(version {a['table_version']}).",
            )
        )
        b.append(
            Block(
                "table",
                headers=["env", "random", "reference", "random source", "reference source"],
                items=[
                    [env, _fmt(c["random"]), _fmt(c["reference"]), c["random_source"], c["reference_source"]]
                    for env, c in a["normalization_constants"].items()
                ],
            )
        )

    b.append(Block("h2", "Failed and missing runs"))
    if a["not_finished"]:
        b.append(
            Block(
                "table",
                headers=["algo", "env", "not finished", "reasons"],
                items=[[d["algo"], d["env"], d["count"], "; ".join(d["reasons"]) or "—"] for d in a["not_finished"]],
            )
        )
    else:
        b.append(Block("p", "None: every job run FINISHED."))
    b.append(Block("h2", "Wall-clock and throughput"))
    b.append(
        Block(
            "table",
            headers=["algo", "runs", "wall seconds (total)", "wall seconds (mean per run)", "fps (mean)"],
            items=[
                [
                    algo,
                    t["runs"],
                    _fmt(t["wall_seconds_total"]),
                    _fmt(t["wall_seconds_mean"]),
                    _fmt(t["fps_mean"]),
                ]
                for algo, t in a["timing"].items()
            ],
        )
    )
    b.append(Block("h2", "Provenance"))
    b.append(
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
        )
    )
    b.append(
        Block(
            "table",
            headers=["algo/env", "config hashes"],
            items=[[k, ", ".join(v)] for k, v in prov["config_hashes"].items()],
        )
    )
    b.append(Block("p", "Run ids: " + ", ".join(prov["run_ids"])))
    return b


def _log(results: Results, out: Path, aggregates: dict[str, Any]) -> None:
    from lit_sb3.zoo.tracking import TrackingTarget, connect

    store = connect(TrackingTarget(results.tracking_uri, results.experiment, None, results.experiment_id))
    rid = store.create_run(
        "report",
        run_name=f"report-{time.strftime('%Y%m%d-%H%M%S')}",
        tags={"lit_sb3.command": aggregates["command"][:5000], "lit_sb3.report_title": aggregates["title"]},
    )
    metrics = {}
    for algo, d in aggregates["aggregates"].items():
        for m, iv in d.items():
            for k, v in iv.items():
                metrics[f"report/{algo}/{m}" + ("" if k == "point" else f"_{k}")] = float(v)
    for d in aggregates["probability_of_improvement"]:
        metrics[f"report/poi/{d['x']}_vs_{d['y']}"] = float(d["point"])
    keys = ("normalize", "reps", "seed", "table_version", "scale", "engine", "min_runs")
    params = {k: str(aggregates[k]) for k in keys}
    params["tasks"] = ",".join(aggregates["tasks"])
    store.log_metrics(rid, metrics)
    store.log_params(rid, params)
    store.log_artifacts(rid, out)
    store.end_run(rid, "FINISHED")


_Transform = Callable[[str, NDArray[np.float64]], NDArray[np.float64]]
