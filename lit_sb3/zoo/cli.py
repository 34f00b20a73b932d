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


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``bench`` parser and each sub-command's parser by its name."""
    parser = _Parser(prog="bench", description="Train, tune and compare RL algorithms (lit_sb3).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, argparse.ArgumentParser] = {}
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"lit_sb3.zoo.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"lit_sb3.zoo.commands.{name}":
                continue
            raise
        sub = module.add_parser(subparsers)
        commands[sub.prog.rsplit(" ", 1)[-1]] = sub
    return parser, commands


def build_parser() -> argparse.ArgumentParser:
    return _parsers()[0]


def command_line(args: argparse.Namespace) -> str:
    """The invocation as a command line derived from the parser: every option of ``args.command`` whose parsed value
    differs from the parser's default (those the user gave, and those a command filled in while checking; one given
    with its default value changes nothing and is left out), under its first long flag, in the parser's order,
    after the positionals, quoted for a POSIX shell. Parsed again, it gives the same values.

    Args:
        args: the parsed arguments of a ``bench`` sub-command.
    """
    import shlex

    parser = _parsers()[1][args.command]
    options: list[str] = []
    positionals: list[str] = []
    for action in parser._actions:  # noqa: SLF001 - argparse lists a parser's arguments no other way
        if action.default == argparse.SUPPRESS or not hasattr(args, action.dest):  # --help, --version
            continue
        value = getattr(args, action.dest)
        if value == action.default:
            continue
        if not action.option_strings:
            positionals += [str(v) for v in value] if isinstance(value, list) else [str(value)]
            continue
        flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])  # its name
        if isinstance(value, str) and value.startswith("-"):  # one value that argparse would take for a flag
            options.append(f"{flag}={value}")
        elif action.nargs == 0:  # store_true, store_false, store_const
            options.append(flag)
        elif action.nargs is None and isinstance(value, list):  # action="append": the flag once per value
            for item in value[len(action.default or []) :]:
                options += [flag, str(item)]
        elif isinstance(value, list):  # nargs="+" or "*"
            options += [flag, *map(str, value)]
        else:
            options += [flag, str(value)]
    return "bench " + shlex.join([args.command, *positionals, *options])


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
