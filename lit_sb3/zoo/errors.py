"""User-facing errors of the suite."""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Iterable

__all__ = ["BenchError", "did_you_mean", "finite_float"]


class BenchError(Exception):
    """A user error: ``bench`` prints it as one line and exits with status 2, before any job starts."""


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
