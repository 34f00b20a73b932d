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
    parser = subparsers.add_parser(
        "list", help="list suites, algorithms and configured algo x env pairs",
        description="One screen: the suites, the extras, and per algorithm and suite how many envs it can run and "
        "how many have a tuned config entry. --all (or --envs/--algos) shows every pair.",
    )  # fmt: skip
    parser.add_argument("--envs", help="comma list of suites/env ids for the pair table (default: every suite's envs)")
    parser.add_argument("--algos", help="comma list of algorithms for the pair table (default: all)")
    parser.add_argument("--all", action="store_true", help="every algo x env pair, the algorithms' classes and why "
                        "a pair cannot run (default: counts per algorithm and suite)")  # fmt: skip
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

    # the terminal's width (80 without one): tables are split to fit, long lines wrap
    console = Console(file=sys.stdout, highlight=False)
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

    if not (getattr(args, "all", False) or args.envs or args.algos):  # a Namespace built by hand may lack --all
        _print_counts(console, suites, probe, algos, envs)
        return 0
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

    problems: list[str] = []
    for env_id in envs:
        for algo, (cell, detail) in zip(algos, probe["cells"][env_id]):
            if cell == "n/a" and detail:
                problems.append(f"{algo} x {env_id}: {detail}")
    # as many algorithm columns as the terminal holds, in as many tables as needed: a cell is never cut
    cell = max(len(c) for c in LEGEND)  # "defaults" ("defau…" at 80 columns otherwise)
    env_width = max((len(e) for e in envs), default=3)
    per_table = max(1, (console.width - env_width - 4) // (cell + 3))
    for start in range(0, len(algos), per_table):
        chunk = list(range(start, min(start + per_table, len(algos))))
        title = "Configured pairs" + (f" ({start + 1}-{chunk[-1] + 1} of {len(algos)} algorithms)"
                                      if len(algos) > per_table else "")  # fmt: skip
        table = Table(title=title, show_lines=False)
        table.add_column("env", no_wrap=True, min_width=env_width)
        for i in chunk:
            table.add_column(algos[i], justify="center", no_wrap=True, min_width=max(len(algos[i]), cell))
        for env_id in envs:
            cells = probe["cells"][env_id]
            table.add_row(Text(env_id), *(Text(cells[i][0]) for i in chunk))
        console.print(table)
    console.print("  " + "; ".join(f"{k}: {v}" for k, v in LEGEND.items()), highlight=False)
    if problems:
        console.print("[bold]Not runnable[/bold]")
        for line in problems:
            console.print(f"  {line}", highlight=False, markup=False)
    return 0


def _print_counts(console: Console, suites: dict[str, Any], probe: dict[str, Any], algos: list[str],
                  envs: list[str]) -> None:  # fmt: skip
    """The one-screen listing: suites, extras, and per algorithm and suite the envs it can run (tuned / runnable).

    Args:
        console: where to print.
        suites: the suites.
        probe: :func:`_probe`'s answer.
        algos: the algorithms.
        envs: every suite's envs.
    """
    from rich import box

    from lit_sb3.zoo.extras import EXTRAS

    console.print("[bold]Suites[/bold] (bench run --envs <suite>): " + ", ".join(
        f"{s.name} ({len(s.envs)} envs)" for s in suites.values()
    ))  # fmt: skip
    states = [name if probe["extras"].get(name) is None else f"{name} missing ({extra.install})"
              for name, extra in EXTRAS.items()]  # fmt: skip
    console.print("[bold]Extras[/bold]: " + ", ".join(states), markup=True)
    table = Table(title="Envs each algorithm can run per suite: tuned entry / runnable (of the suite's envs)",
                  box=box.SIMPLE, title_justify="left")  # fmt: skip
    table.add_column("algo", no_wrap=True)
    index = {e: i for i, e in enumerate(envs)}
    for suite in suites.values():
        table.add_column(suite.name, justify="center", no_wrap=True)
    for a, algo in enumerate(algos):
        row = []
        for suite in suites.values():
            cells = [probe["cells"][e][a][0] for e in suite.envs if e in index]
            runnable = sum(c in ("entry", "v4", "defaults") for c in cells)
            tuned = sum(c in ("entry", "v4") for c in cells)
            row.append(
                "extra" if cells and all(c == "extra" for c in cells) else f"{tuned}/{runnable}" if runnable else "-"
            )
        table.add_row(algo, *row)
    console.print(table)
    console.print("  extra: its optional extra is not installed; -: no env of the suite fits the algorithm. "
                  "Every pair, and why one cannot run: bench list --all (or --envs/--algos)")  # fmt: skip
