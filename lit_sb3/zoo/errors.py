"""User-facing errors of the suite."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["BenchError", "did_you_mean"]


class BenchError(Exception):
    """A user error: ``bench`` prints it as one line and exits with status 2, before any job starts."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    matches = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not matches:
        return ""
    return " (did you mean " + " or ".join(repr(m) for m in matches) + "?)"
