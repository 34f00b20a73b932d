"""``bench show-config``: the resolved hyperparameters of one algo x env pair, each with its source."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = ["add_parser", "run", "parse_overrides"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``show-config``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    parser = subparsers.add_parser("show-config", help="show the resolved hyperparameters of one algo x env pair")
    from lit_sb3.algorithms.registry import ALGORITHMS

    parser.add_argument("--algo", required=True, help=f"algorithm ({', '.join(ALGORITHMS)})")
    parser.add_argument("--env", required=True, help="gymnasium env id")
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="extra zoo-format YAML file (repeatable; later files win)")  # fmt: skip
    parser.add_argument("--hyperparams", nargs="+", default=[], metavar="KEY=VALUE",
                        help="overrides, e.g. learning_rate=lin_1e-3 'policy_kwargs=dict(net_arch=[64])'")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON (values, provenance, hash)")
    parser.set_defaults(func=run)
    return parser


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}`` (value text parsed later by the config resolver).

    Args:
        items: ``KEY=VALUE`` strings.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"--hyperparams: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def _answer(algo: str, env_id: str, config_files: list[str], overrides: dict[str, str]) -> dict[str, Any]:
    """The resolved config as JSON-able data: header facts, notes, ``rows`` (key, value as the zoo writes it,
    source) and the ``--json`` form."""
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.registry import check_env_id, check_pair
    from lit_sb3.zoo.tracking.names import readable

    check_env_id(env_id)
    reason = check_pair(algo, env_id)
    if reason is not None:
        raise BenchError(reason)
    cfg = resolve(algo, env_id, config_files=config_files, overrides=overrides)
    data = cfg.to_jsonable(include_provenance=True)
    data["config_hash"] = cfg.config_hash()
    prov = dict(cfg.provenance)
    rows = []
    for key, value in cfg.hyperparameters().items():
        source = prov.get(key)
        if source is None and key == "normalize_kwargs":
            source = prov.get("normalize", "")
        if source is None:
            source = "SB3 default" if key != "n_timesteps" else "not set: give --n-timesteps"
        rows.append([key, readable(value), source])  # schedules as the zoo writes them: lin_0.001
    return {"hash": cfg.config_hash(), "notes": list(cfg.notes), "rows": rows, "json": data}


def run(args: argparse.Namespace) -> int:
    """Resolve and print (the answer is memoised, :mod:`lit_sb3.zoo.probe_cache`: a repeated question imports no
    torch or Lightning).

    Args:
        args: parsed arguments.
    """
    from lit_sb3.zoo.config.loading import zoo_config_dir
    from lit_sb3.zoo.probe_cache import file_digests, memo, silenced
    from lit_sb3.zoo.registry import ALGOS, check_algo

    algo = check_algo(args.algo)
    env_id = args.env.strip()
    overrides = parse_overrides(args.hyperparams)

    def compute() -> dict[str, Any]:
        with silenced():  # an env family's banner (ALE, MuJoCo) is not the config; an error is raised after it
            return _answer(algo, env_id, args.config, overrides)

    key = {"algo": algo, "registered": ALGOS[algo], "env": env_id, "overrides": sorted(overrides.items()),
           "files": file_digests([zoo_config_dir() / f"{algo}.yml", *args.config])}  # fmt: skip
    # an env module ("module:Env-v0") or a plugin algorithm can change without the key seeing it: never memoised
    memoised = ":" not in env_id and ALGOS[algo].startswith("lit_sb3.")
    result = memo("show-config", key, compute) if memoised else compute()
    if args.json:
        print(json.dumps(result["json"], indent=2, sort_keys=False))
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=sys.stdout, width=max(120, Console(file=sys.stdout).width), soft_wrap=True)
    console.print(f"[bold]{algo}[/bold] on [bold]{env_id}[/bold]  (config hash {result['hash'][:12]})",
                  highlight=False)  # fmt: skip
    for note in result["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)
    table = Table(show_lines=False)
    table.add_column("hyperparameter")
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for key_, value, source in result["rows"]:
        table.add_row(Text(key_), Text(value), Text(source))
    console.print(table)
    return 0
