"""``build_report``: the report's sections (:data:`SECTIONS`, each computing, drawing and placing itself)
written to report.md, report.html, scores.csv and aggregates.json, and logged to MLflow."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from lit_sb3.zoo.normalization import ScoreTable
from lit_sb3.zoo.report.blocks import Block, _html, _md
from lit_sb3.zoo.report.context import ReportContext, impl_of
from lit_sb3.zoo.report.implementations import Implementations
from lit_sb3.zoo.report.sections import (
    Aggregates,
    Comparisons,
    Failed,
    Header,
    Hyperparameters,
    Normalisation,
    PerEnv,
    Protocol,
    Provenance,
    Section,
    Summary,
    Timing,
    Warnings,
)
from lit_sb3.zoo.results import Results

#: runs per algorithm and env below which no verdict is drawn
MIN_RUNS = 5
ENGINES = ("fast", "rliable")

SECTIONS: tuple[Section, ...] = (
    Header(),
    Summary(),
    Warnings(),
    Implementations(),
    Protocol(),
    Aggregates(),
    Comparisons(),
    PerEnv(),
    Hyperparameters(),
    Normalisation(),
    Failed(),
    Timing(),
    Provenance(),
)
"""The report, in order: each section computes its numbers, draws its figures and places its blocks."""


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
        reps: bootstrap replications for aggregates, profiles and intervals.
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
    started = time.perf_counter()
    ctx = ReportContext(
        everything=results,
        out=out,
        title=title or f"Benchmark report: {results.experiment}",
        command=command or "build_report(...) (called from Python)",
        normalize=normalize,
        reps=reps,
        seed=seed,
        engine=engine,
        min_runs=min_runs,
        table=table if normalize == "reference" else None,
    )
    aggregates: dict[str, Any] = {}
    blocks: list[Block] = []
    for section in SECTIONS:
        data, placed = section.render(ctx)
        aggregates.update(data)
        blocks += placed
    _write_scores(ctx, out / "scores.csv")
    (out / "aggregates.json").write_text(json.dumps(_finite(aggregates), indent=2, allow_nan=False, default=_nan_none))
    (out / "report.md").write_text(_md(blocks))
    (out / "report.html").write_text(_html(blocks, ctx.title, out))
    aggregates["seconds"] = time.perf_counter() - started
    if log_to_mlflow:
        _log(ctx.results, out, aggregates)  # the runs the verdicts rest on (a later report sees its looks)
    return out / "report.md"


def _write_scores(ctx: ReportContext, path: Path) -> None:
    """scores.csv: one row per FINISHED run (every implementation)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["algo", "impl", "env", "seed", "run_id", "score", "normalized_score", "eval_episodes",
                    "env_steps", "wall_seconds", "cpu_seconds", "fps", "config_hash"])  # fmt: skip
        for r in sorted(ctx.everything.runs, key=lambda r: (r.algo, impl_of(r), r.env, r.seed)):
            n = ctx.norm_or_nan(r.env, r.score)
            w.writerow([r.algo, impl_of(r), r.env, r.seed, r.run_id, r.score, "" if np.isnan(n) else n,
                        r.params.get("eval_episodes", ""),
                        "" if np.isnan(r.total_timesteps) else int(r.total_timesteps), r.wall_seconds,
                        "" if np.isnan(r.cpu_seconds) else r.cpu_seconds, r.fps, r.config_hash])  # fmt: skip


def _links(results: Results) -> dict[str, Any] | None:
    """Links into MLflow's model-training view: the experiment, each grid run, each run (``serve``: the command
    that serves a sqlite store; None for a server)."""
    from lit_sb3.zoo.tracking.links import experiment_url, run_url, ui_base_url, ui_command
    from lit_sb3.zoo.tracking.mlflow_compat import PARENT_RUN_TAG

    if not results.experiment_id:
        return None
    uri = _relative_uri(results.tracking_uri, Path.cwd())
    base, exp = ui_base_url(results.tracking_uri), results.experiment_id
    items = [[f"experiment {results.experiment}", experiment_url(base, exp)]]
    for grid in sorted({r.tags.get(PARENT_RUN_TAG, "") for r in results.runs} - {""}):
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


def _finite(obj: Any) -> Any:
    """``obj`` with every non-finite float as None (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)) and not np.isfinite(obj):
        return None
    return obj


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
    for d in aggregates["probability_of_improvement"]:  # X before Y in name order, the report's one interval
        for k in ("point", "low", "high"):
            if np.isfinite(d[k]):
                metrics[f"report/poi/{d['x']}_vs_{d['y']}" + ("" if k == "point" else f"_{k}")] = float(d[k])
    impl = aggregates.get("implementation_comparison") or {}
    for side in impl.get("against", []):
        for c in side["cells"]:
            for k, v in c["poi"].items():
                if np.isfinite(v):
                    name = f"report/impl/{impl['reference']}_vs_{side['impl']}/{c['algo']}/{c['env']}/poi"
                    metrics[name + ("" if k == "point" else f"_{k}")] = float(v)
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
