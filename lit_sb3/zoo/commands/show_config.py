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
    parser.add_argument("--algo", required=True, help="algorithm (ppo, a2c, sac, td3, ddpg, dqn)")
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


def _fmt(value: Any) -> str:
    from lit_sb3.zoo.config import _jsonable

    data = _jsonable(value)
    return data if isinstance(data, str) else json.dumps(data)


def run(args: argparse.Namespace) -> int:
    """Resolve and print.

    Args:
        args: parsed arguments.
    """
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.registry import check_algo, check_env_id, check_pair

    algo = check_algo(args.algo)
    env_id = check_env_id(args.env)
    reason = check_pair(algo, env_id)
    if reason is not None:
        raise BenchError(reason)
    cfg = resolve(algo, env_id, config_files=args.config, overrides=parse_overrides(args.hyperparams))
    if args.json:
        data = cfg.to_jsonable(include_provenance=True)
        data["config_hash"] = cfg.config_hash()
        print(json.dumps(data, indent=2, sort_keys=False))
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=sys.stdout, width=max(120, Console(file=sys.stdout).width), soft_wrap=True)
    console.print(f"[bold]{algo}[/bold] on [bold]{env_id}[/bold]  (config hash {cfg.config_hash()[:12]})",
                  highlight=False)  # fmt: skip
    for note in cfg.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    table = Table(show_lines=False)
    table.add_column("hyperparameter")
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    prov = dict(cfg.provenance)
    for key, value in cfg.hyperparameters().items():
        source = prov.get(key)
        if source is None and key == "normalize_kwargs":
            source = prov.get("normalize", "")
        if source is None:
            source = "SB3 default" if key != "n_timesteps" else "not set: give --n-timesteps"
        table.add_row(Text(key), Text(_fmt(value)), Text(source))
    console.print(table)
    return 0
