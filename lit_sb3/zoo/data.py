"""Where the suite's data lives: the zoo configs (``zoo_configs/``), the suites (``benchmarks/suites.yml``),
the score table (``benchmarks/scores.yml``), the measured seed-batching efficiency (``benchmarks/seed_batch.yml``)
and the measured rates the cost estimates start from (``benchmarks/rates.yml``).

They stay where they are in the repository and are installed with the package: the wheel build copies them
into ``lit_sb3/zoo/_data/`` (``setup.py``, ``build_py``), and they are read through :mod:`importlib.resources`.
In a source checkout (an editable install) there is no ``_data`` and the repository's files are used. The
environment variables ``LIT_SB3_ZOO_CONFIGS`` and ``LIT_SB3_SUITES`` override the defaults (read by
:mod:`lit_sb3.zoo.config` and :mod:`lit_sb3.zoo.suites`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from lit_sb3.zoo.errors import BenchError

__all__ = ["DATA", "data_path"]

DATA: dict[str, str] = {
    "zoo_configs": "zoo_configs",
    "suites.yml": "benchmarks/suites.yml",
    "scores.yml": "benchmarks/scores.yml",
    "seed_batch.yml": "benchmarks/seed_batch.yml",
    "rates.yml": "benchmarks/rates.yml",
}
"""Name under ``lit_sb3/zoo/_data/`` -> path in the repository (``setup.py`` copies them at build time)."""


def data_path(name: str) -> Path:
    """The installed data file or folder ``name`` (see :data:`DATA`), else the source checkout's.

    Args:
        name: ``zoo_configs``, ``suites.yml``, ``scores.yml``, ``seed_batch.yml`` or ``rates.yml``.
    """
    if name not in DATA:
        raise KeyError(f"unknown data {name!r}; known: {', '.join(DATA)}")
    packaged = resources.files("lit_sb3.zoo") / "_data" / name
    if packaged.is_file() or packaged.is_dir():
        return Path(str(packaged))  # a regular install (the package is not imported from a zip)
    checkout = Path(__file__).resolve().parents[2] / DATA[name]
    if checkout.exists():
        return checkout
    raise BenchError(f"the suite's {name} is missing: neither installed ({packaged}) nor in a checkout ({checkout})")
