"""``bench list``: suites, algorithms, and which algo x env pairs have a config entry or cannot run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lit_sb3.zoo.errors import BenchError

__all__ = ["add_parser", "run", "pair_status"]

#: cell legend of the algo x env table
LEGEND = {
    "entry": "tuned entry in zoo_configs/<algo>.yml",
    "v4": "a -v4 (or -v3) entry applied to the -v5 env",
    "defaults": "no entry: SB3 defaults, --n-timesteps needed",
    "n/a": "cannot run (action space)",
    "extra": "its optional extra is not installed (see Extras)",
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``list``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    parser = subparsers.add_parser("list", help="list suites, algorithms and configured algo x env pairs")
    parser.add_argument("--envs", help="comma list of suites/env ids for the table (default: every suite's envs)")
    parser.add_argument("--algos", help="comma list of algorithms for the table (default: all)")
    parser.set_defaults(func=run)
    return parser


def pair_status(algo: str, env_id: str, entries: dict[str, dict] | None) -> tuple[str, str | None]:
    """``(cell, detail)`` for one pair: ``entry``/``v4``/``defaults``/``n/a`` and the entry name or reason.

    Args:
        algo: algorithm name.
        env_id: env id.
        entries: the loaded built-in zoo file of ``algo`` (None if it has none).
    """
    from lit_sb3.zoo.config import find_entry
    from lit_sb3.zoo.registry import check_pair

    reason = check_pair(algo, env_id)
    if reason is not None:
        return "n/a", reason
    name, note = find_entry(entries or {}, env_id)
    if name is None:
        return "defaults", None
    return ("v4" if note else "entry"), name


def _probe(algos: list[str], envs: list[str]) -> dict[str, Any]:
    """What the listing needs from importing the algorithms, the extras and making the envs (JSON-able): the
    extras' state, each algorithm's class, action spaces and policies, each pair's cell and detail."""
    from lit_sb3.zoo.config import load_zoo_file, zoo_config_path
    from lit_sb3.zoo.extras import EXTRAS, env_extra, extra_status
    from lit_sb3.zoo.registry import ALGOS, get_algo_class

    missing = extra_status()
    described = {}
    for algo in ALGOS:
        cls = get_algo_class(algo)
        described[algo] = {
            "path": ALGOS[algo].replace(":", "."),
            "spaces": ", ".join(c.__name__ for c in cls.supported_action_spaces),
            "policies": ", ".join(cls.policy_aliases),
        }
    entries: dict[str, dict[str, dict] | None] = {}
    for algo in algos:
        path = zoo_config_path(algo)
        entries[algo] = load_zoo_file(path) if path.exists() else None
    cells: dict[str, list[list[str | None]]] = {}
    for env_id in envs:
        extra = env_extra(env_id)
        row: list[list[str | None]] = []
        for algo in algos:
            if extra is not None and missing[extra] is not None:
                row.append(["extra", None])
            else:
                row.append(list(pair_status(algo, env_id, entries[algo])))
        cells[env_id] = row
    return {"extras": {name: missing[name] for name in EXTRAS}, "algos": described, "cells": cells}


def run(args: argparse.Namespace) -> int:
    """Print the suites, algorithms and the pair table (what must be probed is memoised:
    :mod:`lit_sb3.zoo.probe_cache`, so a repeated listing imports no torch, Lightning or env family).

    Args:
        args: parsed arguments.
    """
    from lit_sb3.zoo.config import zoo_config_path
    from lit_sb3.zoo.extras import EXTRAS, findable_extras
    from lit_sb3.zoo.probe_cache import file_digests, memo, silenced
    from lit_sb3.zoo.registry import ALGOS
    from lit_sb3.zoo.suites import expand_algos, expand_envs, load_suites, suites_path

    # as wide as the text: a narrow terminal wraps lines instead of cutting columns
    console = Console(file=sys.stdout, width=max(100, Console(file=sys.stdout).width), soft_wrap=True)
    suites = load_suites()
    algos = expand_algos(args.algos) if args.algos else list(ALGOS)
    if args.envs:
        envs = expand_envs(args.envs, suites)
    else:
        envs = []
        for suite in suites.values():
            envs.extend(e for e in suite.envs if e not in envs)
    if not envs:
        raise BenchError("no env to list")

    def compute() -> dict[str, Any]:
        with silenced():  # the env families' banners (ALE, MuJoCo, pygame) are not the listing
            return _probe(algos, envs)

    key = {"algos": algos, "envs": envs, "registry": dict(ALGOS), "findable": findable_extras(),
           "files": file_digests([suites_path(), *(zoo_config_path(a) for a in algos)])}  # fmt: skip
    probe = memo("list", key, compute) if all(":" not in e for e in envs) else compute()

    console.print("[bold]Suites[/bold]")
    for suite in suites.values():
        parts = [f"{e} ({suite.n_timesteps[e]:,} steps)" if e in suite.n_timesteps else e for e in suite.envs]
        desc = f" - {suite.description}" if suite.description else ""
        console.print(f"  {suite.name}{desc}: {', '.join(parts)}", highlight=False)

    console.print("[bold]Extras[/bold]")
    for name, extra in EXTRAS.items():
        state = "installed" if probe["extras"].get(name) is None else f"missing ({extra.install})"
        console.print(f"  {name}: {extra.description}: {state}", highlight=False, markup=False)

    console.print("[bold]Algorithms[/bold]")
    for algo, info in probe["algos"].items():
        console.print(f"  {algo}: {info['path']} (action spaces: {info['spaces']}; policies: {info['policies']})",
                      highlight=False)  # fmt: skip

    table = Table(title="Configured pairs", show_lines=False)
    table.add_column("env", no_wrap=True, min_width=max((len(e) for e in envs), default=3))
    # wide enough for every env id and algorithm column (13 algorithms do not fit 100 columns)
    cell = max(len(c) for c in LEGEND)  # "defaults": a cell is never cut ("defau…" at 80 columns)
    needed = max(len(e) for e in envs) + 4 + sum(max(len(a), cell) + 3 for a in algos) if envs else 0
    console.width = max(console.width, needed)
    for algo in algos:
        table.add_column(algo, justify="center", no_wrap=True, min_width=max(len(algo), cell))
    problems: list[str] = []
    for env_id in envs:
        cells = probe["cells"][env_id]
        for algo, (cell, detail) in zip(algos, cells):
            if cell == "n/a" and detail:
                problems.append(f"{algo} x {env_id}: {detail}")
        table.add_row(Text(env_id), *(Text(c) for c, _ in cells))
    console.print(table)
    console.print("  " + "; ".join(f"{k}: {v}" for k, v in LEGEND.items()), highlight=False)
    if problems:
        console.print("[bold]Not runnable[/bold]")
        for line in problems:
            console.print(f"  {line}", highlight=False, markup=False)
    return 0
