"""Build the benchmark report (markdown, self-contained HTML, CSV, JSON, PNG figures) and log it to MLflow.

Aggregates (IQM, median, mean, optimality gap, profiles, probability of improvement, IQM curves) use the envs
where every algorithm has at least one FINISHED run. With ``normalize="reference"`` they use normalised scores
of the envs the table covers; envs without an entry are shown raw in the per-env table, left out of the
aggregates, and listed as warnings. Curves and per-env learning-curve CIs use ``min(reps, 2000)`` replications.
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

__all__ = ["build_report", "Block"]

CURVE_REPS = 2000


@dataclass
class Block:
    """One element of the document, rendered to both markdown and HTML.

    Args:
        kind: ``h1``, ``h2``, ``p``, ``ul``, ``code``, ``table`` or ``fig``.
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


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "—"
    # returns such as -1398.97 read better than -1.4e+03; keep 3 decimals below 1000, 1 above
    return f"{x:.1f}" if abs(x) >= 1000 else f"{x:.{digits}f}"


def _ci(iv: stats.Interval) -> str:
    return f"{_fmt(iv.point)} [{_fmt(iv.low)}, {_fmt(iv.high)}]"


def _md(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b.kind == "h1":
            out.append(f"# {b.text}\n")
        elif b.kind == "h2":
            out.append(f"## {b.text}\n")
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
        if b.kind in ("h1", "h2", "p"):
            tag = b.kind
            body.append(f"<{tag}>{e(b.text)}</{tag}>")
        elif b.kind == "ul":
            body.append("<ul>" + "".join(f"<li>{e(str(i))}</li>" for i in b.items) + "</ul>")
        elif b.kind == "code":
            body.append(f"<pre><code>{e(b.text)}</code></pre>")
        elif b.kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in b.items)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b.kind == "fig":
            data = base64.b64encode((folder / b.path).read_bytes()).decode("ascii")
            body.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{e(b.text)}" data-file="{e(b.path)}">'
                f'<figcaption>{e(b.text)} (<a href="{e(b.path)}">{e(b.path)}</a>)</figcaption></figure>'
            )
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left}th{background:#f3f3f3}pre{background:#f6f6f6;padding:0.8em;overflow-x:auto}"
        "img{max-width:100%}figure{margin:1em 0}figcaption{font-size:0.85em;color:#555}"
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
) -> Path:
    """Write report.md, report.html, scores.csv, aggregates.json and figures/*.png; log them to MLflow.

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

    Returns:
        The path of report.md.
    """
    if normalize not in ("reference", "none"):
        raise ValueError(f"normalize must be 'reference' or 'none', got {normalize!r}")
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
    agg = stats.aggregate_intervals(score_dict, reps=reps, seed=seed) if tasks else {}
    poi = stats.improvement_intervals(score_dict, reps=reps, seed=seed + 1) if tasks and len(algos) > 1 else {}
    all_scores = np.concatenate([np.concatenate(v) for v in score_dict.values()]) if tasks else np.zeros(1)
    lo_tau, hi_tau = float(all_scores.min()), float(all_scores.max())
    if scale == "normalised score":
        lo_tau, hi_tau = min(lo_tau, 0.0), max(hi_tau, 1.0)
    taus = np.linspace(lo_tau, hi_tau if hi_tau > lo_tau else lo_tau + 1.0, 101)
    profiles = stats.performance_profiles(score_dict, taus, reps=reps, seed=seed + 2) if tasks else {}
    x, x_label, curve_mats = results.aggregate_curves(tasks, transform)
    curve_reps = min(reps, CURVE_REPS)
    curves = stats.iqm_curves(curve_mats, x, reps=curve_reps, seed=seed + 3) if x.size else {}

    # --- figures
    figs: list[tuple[str, str]] = []
    if agg:
        plots.plot_aggregates(agg, fig_dir / "aggregates.png", scale)
        figs.append(("figures/aggregates.png", f"Aggregate metrics of {scale} over {len(tasks)} envs"))
        plots.plot_profiles(profiles, fig_dir / "performance_profiles.png", scale)
        figs.append(("figures/performance_profiles.png", "Performance profiles (score distributions)"))
    if poi:
        plots.plot_improvement(poi, fig_dir / "probability_of_improvement.png")
        figs.append(("figures/probability_of_improvement.png", "Probability of improvement"))
    if curves:
        plots.plot_iqm_curves(curves, fig_dir / "iqm_curves.png", x_label, f"IQM {scale}")
        figs.append(("figures/iqm_curves.png", "IQM sample-efficiency curves"))
    env_figs: list[tuple[str, str]] = []
    for env in results.envs:
        steps, env_curves = results.env_curves(env)
        if env_curves:
            name = "figures/curves_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in env) + ".png"
            plots.plot_env_curves(env, steps, env_curves, out / name, colors, reps=curve_reps, seed=seed)
            env_figs.append((name, f"Learning curves on {env}"))

    # --- files: scores.csv
    with (out / "scores.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["algo", "env", "seed", "run_id", "score", "normalized_score", "wall_seconds", "fps", "config_hash"])
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
    summary = _summary(agg, poi, scale)
    aggregates = {
        "title": title,
        "command": command,
        "scale": scale,
        "normalize": normalize,
        "table_version": table.version if table is not None and normalize == "reference" else None,
        "table_path": str(table.path) if table is not None and table.path and normalize == "reference" else None,
        "reps": reps,
        "curve_reps": curve_reps,
        "seed": seed,
        "confidence": 0.95,
        "tasks": tasks,
        "aggregates": {a: {m: iv.as_dict() for m, iv in d.items()} for a, d in agg.items()},
        "probability_of_improvement": [{"x": x_, "y": y_, **iv.as_dict()} for (x_, y_), iv in poi.items()],
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
        "per_env": per_env,
        "timing": timing,
        "not_finished": not_finished,
        "warnings": warnings,
        "summary": summary,
        "provenance": provenance,
    }
    (out / "aggregates.json").write_text(json.dumps(aggregates, indent=2, allow_nan=False, default=_nan_none))

    blocks = _blocks(
        title,
        command,
        summary,
        agg,
        poi,
        per_env,
        timing,
        not_finished,
        warnings,
        provenance,
        figs,
        env_figs,
        scale,
        tasks,
        reps,
        seed,
        aggregates["table_version"],
        results,
    )
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
    agg: dict[str, dict[str, stats.Interval]], poi: dict[tuple[str, str], stats.Interval], scale: str
) -> list[str]:
    lines = []
    if agg:
        best = max(agg, key=lambda a: agg[a]["iqm"].point)
        lines.append(f"Highest IQM {scale}: {best} ({_ci(agg[best]['iqm'])}).")
    for (x, y), iv in poi.items():
        if iv.low > 0.5:
            verdict = f"{x} is credibly better than {y}"
        elif iv.high < 0.5:  # state it from the winner's side: P(Y > X) = 1 - P(X > Y)
            x, y, iv = y, x, stats.Interval(1.0 - iv.point, 1.0 - iv.high, 1.0 - iv.low)
            verdict = f"{x} is credibly better than {y}"
        else:
            verdict = f"no credible difference between {x} and {y}"
        lines.append(f"{verdict}: P({x} > {y}) = {_ci(iv)}.")
    return lines


def _blocks(
    title: str,
    command: str,
    summary: list[str],
    agg: dict,
    poi: dict,
    per_env: dict,
    timing: dict,
    not_finished: list[dict],
    warnings: list[str],
    prov: dict,
    figs: list,
    env_figs: list,
    scale: str,
    tasks: list[str],
    reps: int,
    seed: int,
    table_version: int | None,
    results: Results,
) -> list[Block]:
    b: list[Block] = [Block("h1", title), Block("code", command), Block("h2", "Summary")]
    b.append(
        Block(
            "p",
            f"{len(results.runs)} finished runs of {len(results.algos)} algorithms on "
            f"{len(results.envs)} envs. Aggregates of {scale} over {len(tasks)} envs "
            f"({', '.join(tasks) or 'none'}), 95 % stratified-bootstrap CIs with {reps} reps (seed {seed})"
            + (f", score table version {table_version}." if table_version is not None else "."),
        )
    )
    b.append(Block("ul", items=summary or ["Not enough data for comparisons."]))
    if warnings:
        b += [Block("h2", "Warnings"), Block("ul", items=warnings)]
    if agg:
        b.append(Block("h2", "Aggregate metrics"))
        b.append(
            Block(
                "table",
                headers=["algo", "median", "IQM", "mean", "optimality gap"],
                items=[[a, *(_ci(d[m]) for m in stats.METRICS)] for a, d in agg.items()],
            )
        )
    if poi:
        b.append(Block("h2", "Probability of improvement"))
        b.append(
            Block(
                "table",
                headers=["X", "Y", "P(X > Y) [95 % CI]", "verdict"],
                items=[
                    [
                        x,
                        y,
                        _ci(iv),
                        "X better" if iv.low > 0.5 else "Y better" if iv.high < 0.5 else "no credible difference",
                    ]
                    for (x, y), iv in poi.items()
                ],
            )
        )
    for path, caption in figs:
        b.append(Block("fig", caption, path=path))
    b.append(Block("h2", "Per-env results"))
    rows = []
    for env, per_algo in per_env.items():
        for a, d in per_algo.items():
            ms = f"{_fmt(d['mean'])} ± {_fmt(d['std'])}" if d["runs"] else "—"
            rows.append(
                [
                    env,
                    a,
                    d["runs"],
                    ", ".join(map(str, d["seeds"])) or "—",
                    d["not_finished"],
                    ms,
                    _fmt(d["iqm"]) if d["iqm"] is not None else "—",
                    _fmt(d["normalized_iqm"]) if d["normalized_iqm"] is not None else "—",
                ]
            )
    b.append(
        Block(
            "table",
            headers=["env", "algo", "runs", "seeds", "failed/killed", "mean ± std", "IQM (raw)", "IQM (normalised)"],
            items=rows,
        )
    )
    counts = {(a, e): d["runs"] for e, pa in per_env.items() for a, d in pa.items()}
    if len(set(counts.values())) > 1:
        b.append(
            Block(
                "p",
                "Seeds are unequal across algorithms/envs (see the runs column); the bootstrap "
                "resamples each algorithm × env with its own number of runs.",
            )
        )
    b.append(Block("h2", "Failed and missing runs"))
    if not_finished:
        b.append(
            Block(
                "table",
                headers=["algo", "env", "not finished", "reasons"],
                items=[[d["algo"], d["env"], d["count"], "; ".join(d["reasons"]) or "—"] for d in not_finished],
            )
        )
    else:
        b.append(Block("p", "None: every job run FINISHED."))
    for path, caption in env_figs:
        b.append(Block("fig", caption, path=path))
    b.append(Block("h2", "Wall-clock and throughput"))
    b.append(
        Block(
            "table",
            headers=["algo", "runs", "wall seconds (total)", "wall seconds (mean per run)", "fps (mean)"],
            items=[
                [
                    a,
                    t["runs"],
                    _fmt(t["wall_seconds_total"]),
                    _fmt(t["wall_seconds_mean"] or float("nan")),
                    _fmt(t["fps_mean"] or float("nan")),
                ]
                for a, t in timing.items()
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
    params = {k: str(aggregates[k]) for k in ("normalize", "reps", "seed", "table_version", "scale")}
    params["tasks"] = ",".join(aggregates["tasks"])
    store.log_metrics(rid, metrics)
    store.log_params(rid, params)
    store.log_artifacts(rid, out)
    store.end_run(rid, "FINISHED")


_Transform = Callable[[str, NDArray[np.float64]], NDArray[np.float64]]
