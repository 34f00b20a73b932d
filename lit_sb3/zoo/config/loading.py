"""Zoo-format YAML files: where the built-in ones live, and loading with the line of every key.

YAML is read with a :class:`yaml.SafeLoader` subclass (no tags that build objects) whose mappings remember
their lines, so that errors can say ``file:line``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

import lit_sb3
from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.registry import check_algo

__all__ = ["DEFAULT_ENTRY", "REPO_ROOT", "ENV_VAR", "zoo_config_dir", "zoo_config_path", "load_zoo_file"]

DEFAULT_ENTRY = "default"
REPO_ROOT = Path(lit_sb3.__file__).resolve().parent.parent
ENV_VAR = "LIT_SB3_ZOO_CONFIGS"


def _display(path: Path | str) -> str:
    """Path as shown in messages: relative to the repository root when inside it."""
    p = Path(path)
    try:
        return p.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


class _LineDict(dict):
    """A dict that remembers the line of the mapping and of each key (1-based)."""

    line: int | None = None
    key_lines: dict[Any, int]


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose mappings are :class:`_LineDict` (anchors, aliases and ``<<`` merges work)."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> Iterable[_LineDict]:
    data = _LineDict()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark,
                )  # fmt: skip
            seen[key] = line
        except TypeError:
            pass  # unhashable key: construct_mapping reports it
    value = loader.construct_mapping(node, deep=True)  # flattens `<<` merges into node.value
    data.update(value)
    for key_node, _ in node.value:
        try:
            data.key_lines[loader.construct_object(key_node, deep=True)] = key_node.start_mark.line + 1
        except TypeError:
            pass


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def zoo_config_dir() -> Path:
    """The built-in config folder: ``$LIT_SB3_ZOO_CONFIGS`` if set, else the repository's ``zoo_configs/``."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else REPO_ROOT / "zoo_configs"


def zoo_config_path(algo: str) -> Path:
    """Path of the built-in zoo file of ``algo``.

    Args:
        algo: algorithm name.
    """
    return zoo_config_dir() / f"{check_algo(algo)}.yml"


def load_zoo_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a zoo-format YAML file: ``{env id or 'default': {key: value}}``.

    Values are plain YAML (``yaml.safe_load`` semantics); the returned mappings also carry the line of
    each key (attribute ``key_lines``) for error messages.

    Args:
        path: the YAML file.
    """
    shown = _display(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"{shown}: cannot read config file: {exc.strerror or exc}") from exc
    try:
        data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - _LineLoader is a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise BenchError(f"{shown}{line}: invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise BenchError(f"{shown}: invalid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchError(f"{shown}:1: a zoo config must map env ids (or 'default') to hyperparameters")
    lines = getattr(data, "key_lines", {})
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data.items():
        line = lines.get(name)
        if not isinstance(name, str):
            raise BenchError(f"{shown}:{line}: entry names must be env ids or 'default', got {name!r}")
        if entry is None:
            entry = _LineDict()
            entry.line, entry.key_lines = line, {}
        if not isinstance(entry, dict):
            raise BenchError(f"{shown}:{line}: {name}: expected a mapping of hyperparameters, got {entry!r}")
        for key in entry:
            if not isinstance(key, str):
                raise BenchError(f"{shown}:{entry.key_lines.get(key, line)}: {name}: bad hyperparameter name {key!r}")
        out[name] = entry
    return out
