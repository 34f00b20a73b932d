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

__all__ = [
    "DEFAULT_ENTRY",
    "REPO_ROOT",
    "ENV_VAR",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "zoo_config_dir",
    "zoo_config_path",
    "load_zoo_file",
    "load_yaml_file",
    "parse_yaml",
    "read_yaml_text",
    "check_yaml_file",
]

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


#: Largest YAML file read (bytes); the zoo's biggest published hyperparameter file is ~20 KB.
MAX_YAML_BYTES = 1 << 20
#: Most nodes a YAML document may expand to, aliases counted at their full size (a "billion laughs" of 350
#: bytes expands to 10**9 nodes; the zoo's published files expand to a few thousand).
MAX_YAML_NODES = 200_000


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts the nodes a document expands to (each alias at the size of its anchor).

    The count is kept while composing, before any Python object is built, so an alias bomb is refused after
    composing a few thousand nodes instead of expanding in later code (hashing, JSON, printing).
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.events.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None and id(node) not in self._sizes:
                raise yaml.composer.ComposerError(
                    None, None, f"recursive alias *{event.anchor} (a structure containing itself)", event.start_mark
                )
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes.get(id(v), 1) for v in node.value)
        else:
            size = 1
        if size > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None,
                f"the document expands to more than {MAX_YAML_NODES:,} nodes (nested aliases?)", node.start_mark,
            )  # fmt: skip
        self._sizes[id(node)] = size
        return node


def check_yaml_file(path: str | Path, shown: str | None = None, what: str = "file") -> None:
    """Refuse (one-line :class:`BenchError`) a YAML file the user named that is missing, not a regular file
    (``/dev/zero``, a fifo, a folder) or over :data:`MAX_YAML_BYTES`, before anything is read.

    Args:
        path: the file.
        shown: the name used in messages (default: the path).
        what: what the file is, for messages.
    """
    from lit_sb3.utils.files import BadFileError, check_file

    shown = shown if shown is not None else str(path)
    try:
        check_file(path, MAX_YAML_BYTES, what)
    except BadFileError as exc:
        raise BenchError(f"{shown}: {str(exc).split(': ', 1)[-1]}") from None
    except FileNotFoundError:
        raise BenchError(f"{shown}: no such file") from None


def read_yaml_text(path: str | Path, shown: str | None = None, what: str = "file") -> str:
    """The text of a YAML file, refused (one-line :class:`BenchError`) above :data:`MAX_YAML_BYTES`.

    Args:
        path: the file.
        shown: the name used in messages (default: the path).
        what: what the file is, for messages (``config file``, ``suites file``).
    """
    shown = shown if shown is not None else str(path)
    check_yaml_file(path, shown, what)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise BenchError(f"{shown}: cannot read {what}: {exc.strerror or exc}") from exc
    if len(data) > MAX_YAML_BYTES:
        raise BenchError(f"{shown}: {what} too large (over {MAX_YAML_BYTES:,} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchError(f"{shown}: {what} is not UTF-8 text (byte {exc.start})") from exc


def parse_yaml(text: str, shown: str, loader: type[yaml.SafeLoader] = _BoundedLoader, with_line: bool = True) -> Any:
    """Parse YAML with a safe, bounded loader; errors are one-line :class:`BenchError` with file:line.

    Args:
        text: the document.
        shown: the name used in messages (a file, or ``--hyperparams key=value``).
        loader: a :class:`_BoundedLoader` subclass.
        with_line: add ``:line`` after ``shown`` in messages (False for one-line texts).
    """
    if len(text) > MAX_YAML_BYTES:
        raise BenchError(f"{shown}: YAML text too large (over {MAX_YAML_BYTES:,} characters)")
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None and with_line else ""
        problem = " ".join(" ".join(str(p).split()) for p in (exc.context, exc.problem) if p)
        raise BenchError(f"{shown}{line}: invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise BenchError(f"{shown}: invalid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError:
        raise BenchError(f"{shown}: invalid YAML: nested too deeply") from None


def load_yaml_file(path: str | Path, what: str = "file", shown: str | None = None) -> Any:
    """Read and parse a YAML file with the bounds of :func:`read_yaml_text` and :func:`parse_yaml`.

    Args:
        path: the file.
        what: what the file is, for messages.
        shown: the name used in messages (default: the path).
    """
    shown = shown if shown is not None else str(path)
    return parse_yaml(read_yaml_text(path, shown, what), shown)


class _LineDict(dict):
    """A dict that remembers the line of the mapping and of each key (1-based)."""

    line: int | None = None
    key_lines: dict[Any, int]


class _LineLoader(_BoundedLoader):
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
    """The built-in config folder: ``$LIT_SB3_ZOO_CONFIGS`` if set, else the installed ``zoo_configs/``
    (:func:`lit_sb3.zoo.data.data_path`)."""
    from lit_sb3.zoo.data import data_path

    env = os.environ.get(ENV_VAR)
    return Path(env) if env else data_path("zoo_configs")


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
    data = parse_yaml(read_yaml_text(path, shown, "config file"), shown, _LineLoader)
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
