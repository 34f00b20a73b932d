"""Which env families need which optional dependency, and the one check that names the extra to install.

``bench run`` (at planning, before any job starts), ``bench enjoy`` and ``bench list`` ask here instead of
letting a job die on ``gym.make``: a grid with ``LunarLander-v3`` on a machine without Box2D stops with one line,
``env 'LunarLander-v3' needs the 'box2d' extra: pip install "lit_sb3[box2d]"``.

An env id's family comes from its registered entry point (``gymnasium.envs.box2d``, ``gymnasium.envs.mujoco``,
``ale_py``) and, for ids that are only registered once their package is importable (the ALE registers its games
on ``import ale_py``), from its name (``ALE/...``, ``...NoFrameskip-v4``, ``LunarLander...``).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from lit_sb3.zoo.errors import BenchError

__all__ = [
    "EXTRAS",
    "Extra",
    "check_env_extras",
    "check_extra",
    "env_extra",
    "extra_status",
    "findable_extras",
    "missing_module",
]


@dataclass(frozen=True)
class Extra:
    """An optional dependency group.

    Args:
        name: the extra's name (``box2d``).
        modules: modules that must import for it to work.
        install: the command that installs it.
        description: what it is for (one line).
    """

    name: str
    modules: tuple[str, ...]
    install: str
    description: str


EXTRAS: dict[str, Extra] = {
    "box2d": Extra("box2d", ("Box2D", "pygame"), 'pip install "lit_sb3[box2d]"',
                   "Box2D envs (LunarLander, BipedalWalker, CarRacing)"),
    "atari": Extra("atari", ("ale_py", "cv2"), 'pip install "lit_sb3[atari]"', "Atari games (ale-py, ROMs included)"),
    "mujoco": Extra("mujoco", ("mujoco",), 'pip install "gymnasium[mujoco]"',
                    "MuJoCo envs (a dependency of lit_sb3; missing only in a broken install)"),
    "video": Extra("video", ("imageio", "imageio_ffmpeg"), 'pip install "lit_sb3[video]"',
                   "mp4 videos (bench enjoy --record, bench run --record-final)"),
}  # fmt: skip
"""The extras by name."""

_ENTRY_POINTS = (("gymnasium.envs.box2d", "box2d"), ("ale_py", "atari"), ("gymnasium.envs.mujoco", "mujoco"))
_NAMES = (
    (re.compile(r"^(ALE/|.*NoFrameskip-v\d+$)"), "atari"),
    (re.compile(r"^(LunarLander|BipedalWalker|CarRacing)"), "box2d"),  # incl. LunarLanderNoVel (lit_sb3.envs)
)


def env_extra(env_id: str) -> str | None:
    """The extra ``env_id`` needs (``box2d``, ``atari``, ``mujoco``), or None for the core envs.

    Args:
        env_id: gymnasium env id (registered or not).
    """
    import gymnasium as gym

    spec = gym.registry.get(env_id)
    entry = spec.entry_point if spec is not None else None
    if isinstance(entry, str):
        for prefix, extra in _ENTRY_POINTS:
            if entry.startswith(prefix):
                return extra
    for pattern, extra in _NAMES:
        if pattern.match(env_id):
            return extra
    return None


def missing_module(extra: str) -> str | None:
    """The first module of ``extra`` that does not import (None: all import).

    Args:
        extra: a name in :data:`EXTRAS`.
    """
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # pygame's banner on stdout
    for module in EXTRAS[extra].modules:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - ImportError, or a broken install (missing shared library)
            return module
    return None


def check_extra(extra: str, what: str) -> None:
    """Raise a one-line :class:`BenchError` if ``extra`` is not installed.

    Args:
        extra: a name in :data:`EXTRAS`.
        what: what needs it, for the message (``env 'LunarLander-v3'``, ``--record``).
    """
    module = missing_module(extra)
    if module is not None:
        raise BenchError(
            f"{what} needs the '{extra}' extra: {EXTRAS[extra].install} (module {module!r} does not import)"
        )


def check_env_extras(envs: str | Iterable[str]) -> None:
    """Check the extras of every env of a ``--envs`` spec (suite names expanded; unknown names are left to
    :func:`lit_sb3.zoo.suites.expand_envs`), before any env is made.

    Args:
        envs: a comma-separated ``--envs`` value or env ids.
    """
    from lit_sb3.zoo.suites import load_suites

    names = [s.strip() for s in envs.split(",")] if isinstance(envs, str) else list(envs)
    suites = load_suites()
    ids: list[str] = []
    for name in filter(None, names):
        ids.extend(suites[name].envs if name in suites else [name])
    checked: set[str] = set()
    for env_id in dict.fromkeys(ids):
        extra = env_extra(env_id)
        if extra is not None and extra not in checked:
            check_extra(extra, f"env '{env_id}'")
            checked.add(extra)


def findable_extras() -> list[list[object]]:
    """``[[module, findable], ...]`` for every module of every extra, found without importing it (a memo key:
    :mod:`lit_sb3.zoo.probe_cache`)."""
    import importlib.util
    import sys

    out: list[list[object]] = []
    for extra in EXTRAS.values():
        for module in extra.modules:
            try:
                found = sys.modules.get(module, 0) is not None and importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            out.append([module, found])
    return out


def extra_status() -> dict[str, str | None]:
    """``extra -> None`` (installed) or the module that does not import, for every extra."""
    return {name: missing_module(name) for name in EXTRAS}
