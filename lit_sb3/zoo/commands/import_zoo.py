"""``bench import``: record RL Zoo runs (``logs/<algo>/<env>_<n>/`` folders of rl_zoo3's ``train``) in the store.

Each run becomes a job run with the metrics, params and tags of ``bench run``'s own (tag ``impl=sb3``), so that
``bench report`` compares them with lit_sb3's runs by the same statistics. Every folder is read and checked in
full before anything is recorded: a folder that is incomplete or malformed gets one line naming it and imports
nothing; re-importing adds nothing (a job id that already has a FINISHED run is skipped). Exit status: 0 when
every folder was imported or already there, 1 when some were refused, 2 for bad input.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``import``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    p = subparsers.add_parser(
        "import", help="record RL Zoo log folders (rl_zoo3 train) as runs, tagged impl=sb3",
        description="Record RL Zoo runs (logs/<algo>/<env>_<n>/: evaluations.npz, monitor files, <env>/config.yml "
        "and args.yml) in the MLflow store as job runs tagged impl=sb3, comparable by bench report. Re-importing "
        "adds nothing.",
    )  # fmt: skip
    p.add_argument("paths", nargs="+", metavar="PATH", help="an RL Zoo log folder (logs/) or run folders in it")
    p.add_argument("--experiment", required=True, help="MLflow experiment to record them in")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow.db)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Check every folder, then record the good ones.

    Args:
        args: parsed arguments.
    """
    from pathlib import Path

    from lit_sb3.zoo.reference.zoo_logs import find_zoo_runs
    from lit_sb3.zoo.tracking import DEFAULT_TRACKING_URI, check_name

    check_name(args.experiment, "--experiment")
    folders: list[Path] = []
    for path in args.paths:
        if not Path(path).exists():
            raise BenchError(f"{path}: no such file or folder")
        found = find_zoo_runs(path)
        folders += found if found else [Path(path)]  # a folder with no run is refused below, by name
    import lit_sb3.envs  # noqa: F401 - the suite's envs (NoVel, invalid actions) that zoo runs may name
    from lit_sb3.zoo.reference.importer import zoo_job_spec
    from lit_sb3.zoo.reference.zoo_logs import ZooFolderError, read_zoo_run

    checked: list[tuple[Any, Any]] = []
    refused = 0
    for folder in dict.fromkeys(folders):
        try:
            zoo_run = read_zoo_run(folder)
            checked.append((zoo_run, zoo_job_spec(zoo_run)))
        except ZooFolderError as exc:
            print(f"not imported: {exc}", flush=True)
            refused += 1
    uri = args.tracking_uri or DEFAULT_TRACKING_URI
    if checked:
        from lit_sb3.zoo.cli import command_line

        _record(checked, uri, args.experiment, command_line(args))
    else:
        print("nothing imported", flush=True)
    return 1 if refused else 0


def _record(checked: list[tuple[Any, Any]], uri: str, experiment: str, command: str) -> None:
    from lit_sb3.zoo.reference.importer import import_zoo_run
    from lit_sb3.zoo.tracking import open_tracking
    from lit_sb3.zoo.tracking.links import results_hint

    tracking = open_tracking(uri, experiment)
    finished = tracking.finished_job_ids()
    todo = [(run, spec) for run, spec in checked if spec.job_id not in finished]
    for run, spec in checked:
        if spec.job_id in finished:
            print(f"already imported: {run.path} (job {spec.job_id})", flush=True)
    if todo:
        parent = tracking.create_parent_run(
            command, {"folders": len(todo)},
            run_name=f"import-{time.strftime('%Y%m%d-%H%M%S')}", run_type="import",
        )  # fmt: skip
        for run, spec in todo:
            run_id = import_zoo_run(run, tracking, parent_run_id=parent, spec=spec)
            print(f"imported {run.path} -> run {run_id} ({spec.algo} on {spec.env_id}, seed {spec.seed}, "
                  f"final score {float(run.results[-1].mean()):.2f})", flush=True)  # fmt: skip
        tracking.end_run(parent, "FINISHED")
    print(f"{len(todo)} imported, {len(checked) - len(todo)} already there; "
          + results_hint(uri, experiment, tracking.target.experiment_id), flush=True)  # fmt: skip
