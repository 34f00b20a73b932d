"""``build_report``: aggregates, intervals and verdicts of an experiment's runs, written to report.md,
report.html, scores.csv, aggregates.json and figures, and logged to MLflow."""

from __future__ import annotations

import csv
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lit_sb3.zoo import plots, stats
from lit_sb3.zoo.normalization import ScoreTable, load_table
from lit_sb3.zoo.normalization import normalize as normalize_score
from lit_sb3.zoo.report.blocks import _html, _md, _n, _steps
from lit_sb3.zoo.report.control import as_json, control_blocks, error_control, pair_verdicts, summary_lines
from lit_sb3.zoo.report.sections import _blocks, _hyperparams, _protocol, _summary
from lit_sb3.zoo.results import Results

CURVE_REPS = 2000
#: runs per algorithm and env below which no verdict is drawn
MIN_RUNS = 5
ENGINES = ("fast", "rliable")


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
        min_runs: runs per algorithm and env below which a fixed-design comparison gets no verdict (intervals are
            still shown; a sequential experiment's design has its own ``--min-seeds``).
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
            if all("human" in (table.entries[e].reference_source or "").lower() for e in tasks):
                scale = "human-normalised score"  # the reference is the human score (Atari): say so
    else:
        tasks, scale = common, "raw return"
        if len(tasks) > 1:
            warnings.append("aggregates pool raw returns of different envs (use --normalize reference)")

    def transform(env: str, values: NDArray[np.float64]) -> NDArray[np.float64]:
        if scale.endswith("normalised score") and table is not None:
            return np.vectorize(lambda v: normalize_score(v, env, table), otypes=[float])(values)
        return values

    def norm_or_nan(env: str, v: float) -> float:
        return normalize_score(v, env, table) if table is not None and table.has(env) else float("nan")

    # --- statistics
    score_dict = {a: results.scores(a, tasks, transform) for a in algos}
    all_scores = np.concatenate([np.concatenate(v) for v in score_dict.values()]) if tasks else np.zeros(1)
    lo_tau, hi_tau = float(all_scores.min()), float(all_scores.max())
    if scale.endswith("normalised score"):
        lo_tau, hi_tau = min(lo_tau, 0.0), max(hi_tau, 1.0)
    taus = np.linspace(lo_tau, hi_tau if hi_tau > lo_tau else lo_tau + 1.0, 101)
    algo_curves = results.aggregate_curves(tasks, transform)  # each algorithm at its own evaluation steps
    curve_reps = min(reps, CURVE_REPS)
    curves: dict[str, stats.Curve] = {}
    if engine == "rliable" and tasks:
        agg, poi, profiles, _ = stats.reference_intervals(score_dict, taus=taus, reps=reps, seed=seed)
        if len(algos) < 2:
            poi = {}
        for i, (a, c) in enumerate(algo_curves.items()):
            curves |= stats.reference_curves({a: c.mats}, c.x, reps=curve_reps, seed=seed + 3 + i)
    else:
        agg = stats.aggregate_intervals(score_dict, reps=reps, seed=seed) if tasks else {}
        poi = stats.improvement_intervals(score_dict, reps=reps, seed=seed + 1) if tasks and len(algos) > 1 else {}
        profiles = stats.performance_profiles(score_dict, taus, reps=reps, seed=seed + 2) if tasks else {}
        for i, (a, c) in enumerate(algo_curves.items()):
            curves |= stats.iqm_curves({a: c.mats}, c.x, reps=curve_reps, seed=seed + 3 + i)

    # --- sample sizes, budgets, protocol, hyperparameters, normalisation constants
    counts = {a: [len(results.select(a, e)) for e in tasks] for a in algos}
    protocol = {env: {a: _protocol(results, env, a) for a in algos if results.select(a, env)} for env in results.envs}
    algo_steps = {
        a: _steps([float(v) for e in tasks for v in protocol[e][a]["env_steps_values"]]) if tasks else "—"
        for a in algos
    }
    # the report's one set of verdicts: the error-controlled family (Holm; a sequential experiment's own design)
    control = error_control(results, tasks, fig_dir, min_runs)
    verdicts = pair_verdicts(control, poi, counts, algo_steps)
    small = sorted(
        {(a, e, len(results.select(a, e))) for a in algos for e in tasks if len(results.select(a, e)) < min_runs}
    )
    sample_warning = None
    if small and (control is None or control["design"] == "fixed"):  # a sequential design has its --min-seeds
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
        n_runs = {a: sum(c) for a, c in counts.items()}
        plots.plot_aggregates(agg, fig_dir / "aggregates.png", scale, n_runs=n_runs)
        figs.append(("figures/aggregates.png", f"Aggregate metrics of {scale} over {_n(len(tasks), 'env')}"))
        plots.plot_profiles(profiles, fig_dir / "performance_profiles.png", scale)
        figs.append(("figures/performance_profiles.png", "Performance profiles (score distributions)"))
    if poi:
        has_verdict = {(d["x"], d["y"]): d["kind"] == "better" for d in verdicts}
        plots.plot_improvement(poi, fig_dir / "probability_of_improvement.png", has_verdict,
                               n_runs={a: sum(c) for a, c in counts.items()})  # fmt: skip
        figs.append(("figures/probability_of_improvement.png", "Probability of improvement"))
    if curves:
        labels = {c.label for c in algo_curves.values()}
        interpolated = sorted(a for a, c in algo_curves.items() if c.interpolated)
        n_runs = {a: c.n_runs for a, c in algo_curves.items()}
        plots.plot_iqm_curves(curves, fig_dir / "iqm_curves.png", " / ".join(sorted(labels)), f"IQM {scale}",
                              n_runs=n_runs, interpolated=interpolated)  # fmt: skip
        caption = (
            f"IQM sample-efficiency curves over {_n(len(tasks), 'env')} (n = runs per algorithm); each algorithm "
            "at its own evaluation steps"
        )
        if interpolated:
            caption += f"; hollow markers on {', '.join(interpolated)}: interpolated between its runs' evaluations"
        figs.append(("figures/iqm_curves.png", caption))
    env_figs: dict[str, tuple[str, str]] = {}
    for env in results.envs:
        env_curves = results.env_curves(env)
        if env_curves:
            name = "figures/curves_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in env) + ".png"
            plots.plot_env_curves(env, env_curves, out / name, colors, reps=curve_reps, seed=seed)
            env_figs[env] = (name, f"Learning curves on {env} (each algorithm at its own evaluation steps)")

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
        "tracking_uri": _relative_uri(results.tracking_uri, out),
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
    if control is not None:
        summary += summary_lines(control)
    links = _links(results)
    aggregates = {
        "title": title,
        "command": command,
        "engine": engine,
        "min_runs": min_runs,
        "sample_warning": sample_warning,
        "verdict_rule": control["rule_short"] if control is not None else None,
        "scale": scale,
        "normalize": normalize,
        "table_version": table.version if table is not None and normalize == "reference" else None,
        "table_path": _relative(table.path, out)
        if table is not None and table.path and normalize == "reference"
        else None,
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
        "protocol": protocol,
        "hyperparameters": hyper,
        "differing_hyperparameters": differing,
        "per_env": per_env,
        "timing": timing,
        "not_finished": not_finished,
        "warnings": warnings,
        "summary": summary,
        "provenance": provenance,
        "error_control": as_json(control) if control is not None else None,
        "links": links,
    }
    (out / "aggregates.json").write_text(json.dumps(aggregates, indent=2, allow_nan=False, default=_nan_none))

    blocks = _blocks(aggregates, verdicts, figs, env_figs, results)
    if control is not None:  # before the per-env results
        at = next((i for i, b in enumerate(blocks) if b.kind == "h2" and b.text == "Per-env results"), len(blocks))
        blocks[at:at] = control_blocks(control)
    (out / "report.md").write_text(_md(blocks))
    (out / "report.html").write_text(_html(blocks, title, out))
    aggregates["seconds"] = time.perf_counter() - started
    if log_to_mlflow:
        _log(results, out, aggregates)
    return out / "report.md"


def _links(results: Results) -> dict[str, Any] | None:
    """Links into MLflow's model-training view: the experiment, each grid run, each run (``serve``: the command
    that serves a sqlite store; None for a server)."""
    from lit_sb3.zoo.tracking.links import experiment_url, run_url, ui_base_url, ui_command

    if not results.experiment_id:
        return None
    uri = _relative_uri(results.tracking_uri, Path.cwd())
    base, exp = ui_base_url(results.tracking_uri), results.experiment_id
    items = [[f"experiment {results.experiment}", experiment_url(base, exp)]]
    for grid in sorted({r.tags.get("mlflow.parentRunId", "") for r in results.runs} - {""}):
        items.append([f"grid run {grid}", run_url(base, exp, grid)])
    for r in sorted(results.runs, key=lambda r: (r.algo, r.env, r.seed)):
        items.append([f"{r.algo} on {r.env}, seed {r.seed} (run {r.run_id})", run_url(base, exp, r.run_id)])
    return {"serve": ui_command(uri), "items": items}


def _relative(path: str | Path, out: Path) -> str:
    """``path`` relative to the project (the working folder) when inside it, else to the report's folder when
    inside that, else as it is: a report names no absolute paths of the machine that wrote it.

    Args:
        path: a file.
        out: the report's folder.
    """
    p = Path(path).resolve()
    for base in (Path.cwd().resolve(), out.resolve()):
        if p.is_relative_to(base):
            return str(p.relative_to(base))
    return str(path)


def _relative_uri(uri: str, out: Path) -> str:
    """A ``sqlite:///`` URI with its file relative (:func:`_relative`); other URIs unchanged."""
    from lit_sb3.zoo.tracking import sqlite_path

    path = sqlite_path(uri)
    return uri if path is None else f"sqlite:///{_relative(path, out)}"


def _nan_none(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(type(obj).__name__)


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
    from lit_sb3.zoo.report.control import report_runs
    from lit_sb3.zoo.results import REPORT_RUNS_TAG

    store.set_tags(rid, {REPORT_RUNS_TAG: json.dumps(report_runs(results), separators=(",", ":"))})
    store.log_metrics(rid, metrics)
    store.log_params(rid, params)
    store.log_artifacts(rid, out)
    store.end_run(rid, "FINISHED")


_Transform = Callable[[str, NDArray[np.float64]], NDArray[np.float64]]
