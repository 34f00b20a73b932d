"""A memo of what ``bench list`` and ``bench show-config`` must probe, so that they answer without importing torch,
Lightning or the env families (MuJoCo, the ALE, Box2D).

Both print facts that come from importing the algorithm classes (their action and observation spaces, policies,
constructor signatures for the resolved config) and from making envs (their spaces): seconds of imports, and the
MuJoCo/ALE banners. Those facts are a pure function of the code, the installed packages and the config files, so
the answer is recorded as one small JSON file per question and replayed while every input is the same. The key
is the question (command, algos, envs, overrides, ...), the contents of the files it reads (zoo configs, suites,
``--config`` files) and :func:`lit_sb3.zoo.plan_cache.code_fingerprint` (the ``lit_sb3`` sources, every
``site-packages`` folder's modification time: an install or removal changes it, the Python version). A miss
computes the answer as before, with the process's stdout/stderr silenced at the file-descriptor level while the
env families import (their banners are printed by C code), and records it; errors are never recorded.

Where: ``$LIT_SB3_CACHE_DIR/probes`` (beside :mod:`~lit_sb3.zoo.plan_cache`'s ``plans``), off when that variable is
set empty. Entries are plain JSON read with a size bound, used only when verified
(:func:`lit_sb3.zoo.plan_cache.sealed_read`: a private folder and a MAC over the key and the answer).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lit_sb3.zoo.plan_cache import cache_dir, code_fingerprint, sealed_read, sealed_write

__all__ = ["file_digests", "memo", "silenced"]

VERSION = 1
_MAX_ENTRY_BYTES = 4 << 20


def file_digests(paths: Sequence[str | Path]) -> list[list[str]]:
    """``[[resolved path, sha256 or "missing"], ...]`` of ``paths`` (a memo key part).

    Args:
        paths: files the answer reads.
    """
    out = []
    for p in paths:
        path = Path(p)
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = "missing"
        out.append([str(path.resolve()), digest])
    return out


def _path(kind: str, key: Mapping[str, Any]) -> Path | None:
    plans = cache_dir()
    if plans is None:
        return None
    full = {"version": VERSION, "kind": kind, "code": code_fingerprint(), **key}
    digest = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    return plans.parent / "probes" / f"{kind}-{digest[:32]}.json"


def memo(kind: str, key: Mapping[str, Any], compute: Callable[[], Any]) -> Any:
    """The recorded answer to ``(kind, key)``, else ``compute()`` recorded (atomically; an unwritable folder records
    nothing; an exception is raised, not recorded).

    Args:
        kind: the question (``list``, ``show-config``).
        key: what the answer depends on besides the code (JSON-able).
        compute: makes the answer (JSON-able).
    """
    path = _path(kind, key)
    if path is not None:
        data = sealed_read(path, _MAX_ENTRY_BYTES)
        if isinstance(data, dict) and data.get("kind") == kind and "answer" in data:
            return data["answer"]
    answer = compute()
    if path is not None:
        sealed_write(path, {"kind": kind, "answer": answer})
    return answer


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """stdout and stderr to ``/dev/null`` at the file-descriptor level (C code's banners included)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)
