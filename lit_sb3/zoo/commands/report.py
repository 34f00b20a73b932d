"""``bench report``: aggregate an experiment's runs with interval estimates into a report."""

from __future__ import annotations

import argparse
from pathlib import Path

from lit_sb3.zoo.errors import BenchError

__all__ = ["add_parser", "run"]


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``report``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    p = subparsers.add_parser("report", help="aggregate an experiment into report.md/html with rliable statistics")
    p.add_argument("--experiment", required=True, help="MLflow experiment name")
    p.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="default: sqlite:///mlflow.db")
    p.add_argument("--out", help="output folder (default reports/<experiment>/)")
    p.add_argument("--algos", nargs="+", help="algorithms to include (space or comma separated)")
    p.add_argument("--envs", nargs="+", help="env ids to include (space or comma separated)")
    p.add_argument("--reps", type=int, default=50_000, help="bootstrap replications (default 50000)")
    p.add_argument("--normalize", choices=("reference", "none"), default="reference")
    p.add_argument("--scores-table", help="scores YAML (default benchmarks/scores.yml)")
    p.add_argument("--title")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--min-runs",
        type=int,
        default=5,
        help="runs per algorithm and env below which a comparison gets no verdict (fixed-seed experiments; "
        "intervals are still shown; default 5)",
    )
    p.add_argument(
        "--engine",
        choices=("fast", "rliable"),
        default="fast",
        help="fast: vectorised stratified bootstrap (default); rliable: recompute every interval with "
        "rliable.library (the reference computation, ~20-30x slower; needs the rliable-ref extra)",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Load the runs, build the report, print where it is.

    Args:
        args: parsed arguments.
    """
    from lit_sb3.zoo.normalization import load_table
    from lit_sb3.zoo.report import build_report
    from lit_sb3.zoo.results import load_results
    from lit_sb3.zoo.tracking import check_name, report_folder

    if not args.experiment.strip():
        raise BenchError("--experiment must not be empty")
    if not args.out:
        check_name(args.experiment, "--experiment")  # it names the default folder, reports/<experiment>
    if args.reps < 100:
        raise BenchError(f"--reps must be >= 100, got {args.reps}")
    if args.min_runs < 1:
        raise BenchError(f"--min-runs must be >= 1, got {args.min_runs}")
    if args.engine == "rliable":
        from lit_sb3.zoo.stats import _library

        try:
            _library()
        except ImportError as exc:
            raise BenchError(str(exc).splitlines()[0]) from exc
    algos = [n.lower() for v in args.algos for n in _names(v)] if args.algos else None
    envs = [n for v in args.envs for n in _names(v)] if args.envs else None
    table = load_table(args.scores_table) if args.normalize == "reference" else None
    out = Path(args.out) if args.out else report_folder(args.experiment)
    _check_writable(out)  # before the runs are read: /proc/x, a file, a read-only folder
    results = load_results(args.tracking_uri, args.experiment, algos=algos, envs=envs)
    from lit_sb3.zoo.cli import command_line

    try:
        path = build_report(
            results,
            out,
            normalize=args.normalize,
            reps=args.reps,
            title=args.title,
            table=table,
            seed=args.seed,
            command=command_line(args),
            min_runs=args.min_runs,
            engine=args.engine,
        )
    except ValueError as exc:  # e.g. rliable.library on unequal runs per env: one line, nothing written yet
        raise BenchError(str(exc)) from exc
    except OSError as exc:
        raise BenchError(f"cannot write the report to {str(out)!r}: {exc.strerror or exc}") from exc
    print(f"report: {path} and {path.with_suffix('.html')}")
    from lit_sb3.zoo.tracking.links import experiment_url, ui_base_url, ui_command

    serve = ui_command(args.tracking_uri)
    where = f"open {experiment_url(ui_base_url(args.tracking_uri), results.experiment_id)}"
    print(f"next: open {path.with_suffix('.html').resolve().as_uri()} in a browser | the runs in MLflow: "
          + (f"{serve}, then {where}" if serve else where), flush=True)  # fmt: skip
    return 0


def _check_writable(out: Path) -> None:
    """Refuse (one line) a report folder that cannot be made or written, creating nothing: the nearest existing
    folder above it must take a temporary folder."""
    import tempfile

    if out.exists() and not out.is_dir():
        raise BenchError(f"--out {str(out)!r} is a file, not a folder")
    existing = out
    while not existing.exists():
        existing = existing.parent
    try:
        tempfile.TemporaryDirectory(dir=existing, prefix=".bench-report-").cleanup()
    except OSError as exc:
        raise BenchError(f"cannot write the report to {str(out)!r}: {str(existing)!r} is not writable "
                         f"({exc.strerror or exc})") from None  # fmt: skip
