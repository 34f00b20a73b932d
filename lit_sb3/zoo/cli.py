"""``bench`` command line: one sub-command per module in :mod:`lit_sb3.zoo.commands`.

Each command module defines ``add_parser(subparsers) -> argparse.ArgumentParser`` (which sets
``func=run`` as a default) and ``run(args) -> int``. Modules are imported only when listed here, and heavy
libraries (mlflow, optuna, rliable) only inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from lit_sb3.zoo.errors import BenchError

COMMANDS = ("run", "import_zoo", "tune", "report", "list", "show_config", "random_scores", "enjoy")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (exit status 2), like every other ``bench`` error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bench", description="Train, tune and compare RL algorithms (lit_sb3).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"lit_sb3.zoo.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"lit_sb3.zoo.commands.{name}":
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse's status, callers stay in-process
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BenchError as exc:
        print(f"bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
