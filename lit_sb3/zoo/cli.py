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


def _private_matplotlib_config() -> None:
    """Point matplotlib's config and cache folder at a temporary one, removed at exit, unless the user chose one.

    Lightning imports torchmetrics, which imports ``matplotlib.pyplot``: that writes ``~/.config/matplotlib`` and a
    font cache under ``~/.cache`` in every command that plans, so a refused command would leave files in the home
    folder. Only ``bench report`` draws (it keeps the user's matplotlib folder and settings); elsewhere the font
    list is rebuilt per process (~1 s, measured on a loaded core) instead.
    """
    import os

    if "MPLCONFIGDIR" in os.environ or "matplotlib" in sys.modules:
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="lit_sb3-matplotlib-")
    os.environ["MPLCONFIGDIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse's status, callers stay in-process
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if args.command != "report":
        _private_matplotlib_config()
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
