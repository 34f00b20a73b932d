"""User-facing errors of the suite."""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Iterable

__all__ = ["MAX_SEEDS", "MAX_TRIALS", "BenchError", "check_count", "did_you_mean", "finite_float"]

#: the most seeds of one algo x env a command may ask for (--seeds, --seed-list, --max-seeds, --seed-batch, ...)
MAX_SEEDS = 100_000
#: the most trials a study may ask for (--n-trials)
MAX_TRIALS = 1_000_000


class BenchError(Exception):
    """A user error: ``bench`` prints it as one line and exits with status 2, before any job starts."""


def check_count(name: str, value: int | None, minimum: int = 1, maximum: int = MAX_SEEDS) -> None:
    """A one-line error unless ``value`` (None: not given) is in ``[minimum, maximum]``, checked before any planning
    so that no structure grows with an absurd count.

    Args:
        name: the option (``--seed-batch``).
        value: its value.
        minimum: the smallest allowed.
        maximum: the largest allowed.
    """
    if value is not None and not minimum <= value <= maximum:
        raise BenchError(f"{name} must be in [{minimum:,}, {maximum:,}], got {value:,}")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    matches = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not matches:
        return ""
    return " (did you mean " + " or ".join(repr(m) for m in matches) + "?)"


def finite_float(text: str) -> float:
    """An argparse ``type`` for float options: a finite number (``nan``, ``inf`` and ``1e400`` are refused).

    Args:
        text: the option's value.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value
