"""Score normalisation with a versioned table of random and reference scores (``benchmarks/scores.yml``).

``normalized = (score - random) / (reference - random)``: 0 is a uniform random policy, 1 the published
reference. Each entry carries its sources (``random_source``: the exact ``bench random-scores`` command that
measured it; ``reference_source``: the publication).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = ["ScoreEntry", "ScoreTable", "default_table_path", "load_table", "normalize", "save_table"]


@dataclass
class ScoreEntry:
    """Random and reference score of one env.

    Args:
        random: mean return of a uniform random policy.
        reference: published reference return.
        random_source: command that measured ``random``.
        reference_source: citation of ``reference``.
        extra: other fields kept as they are (e.g. ``random_std``, ``random_episodes``).
    """

    random: float | None
    reference: float | None
    random_source: str = ""
    reference_source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScoreTable:
    """The whole table.

    Args:
        version: table version (bumped whenever a number changes).
        entries: env id -> entry.
        path: file it was read from, if any.
    """

    version: int
    entries: dict[str, ScoreEntry]
    path: Path | None = None

    def has(self, env_id: str) -> bool:
        """Whether ``env_id`` can be normalised (random and reference known and distinct).

        Args:
            env_id: gymnasium id.
        """
        e = self.entries.get(env_id)
        return e is not None and e.random is not None and e.reference is not None and e.reference != e.random


def default_table_path() -> Path:
    """The installed ``benchmarks/scores.yml`` (:func:`lit_sb3.zoo.data.data_path`)."""
    from lit_sb3.zoo.data import data_path

    return data_path("scores.yml")


def load_table(path: str | Path | None = None) -> ScoreTable:
    """Read a scores table.

    Args:
        path: YAML file; default :func:`default_table_path`.
    """

    p = Path(path) if path is not None else default_table_path()
    if not p.is_file():
        raise BenchError(f"score table {p} not found")
    from lit_sb3.zoo.config.loading import load_yaml_file

    raw = load_yaml_file(p, "score table") or {}
    if not isinstance(raw, dict) or "version" not in raw or not isinstance(raw.get("envs"), dict):
        raise BenchError(f"score table {p} needs 'version:' and an 'envs:' mapping")
    entries = {}
    for env_id, fields in raw["envs"].items():
        fields = dict(fields or {})
        entries[env_id] = ScoreEntry(
            random=_num(fields.pop("random", None)),
            reference=_num(fields.pop("reference", None)),
            random_source=str(fields.pop("random_source", "")),
            reference_source=str(fields.pop("reference_source", "")),
            extra=fields,
        )
    return ScoreTable(int(raw["version"]), entries, p)


def save_table(table: ScoreTable, path: str | Path, header: str = "") -> None:
    """Write a scores table as YAML.

    Args:
        table: the table.
        path: destination.
        header: comment lines put on top.
    """
    import yaml

    envs = {}
    for env_id, e in table.entries.items():
        envs[env_id] = {
            "random": e.random,
            "random_source": e.random_source,
            **e.extra,
            "reference": e.reference,
            "reference_source": e.reference_source,
        }
    body = yaml.safe_dump({"version": table.version, "envs": envs}, sort_keys=False, width=200)
    Path(path).write_text(header + body)


def normalize(score: float, env_id: str, table: ScoreTable) -> float:
    """``(score - random) / (reference - random)``.

    Args:
        score: raw return.
        env_id: gymnasium id.
        table: the scores table.

    Raises:
        KeyError: when ``env_id`` has no usable entry (check :meth:`ScoreTable.has` first).
    """
    if not table.has(env_id):
        raise KeyError(env_id)
    e = table.entries[env_id]
    assert e.random is not None and e.reference is not None
    return (score - e.random) / (e.reference - e.random)


def _num(value: Any) -> float | None:
    return None if value is None else float(value)
