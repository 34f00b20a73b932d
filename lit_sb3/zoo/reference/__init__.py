"""The reference side of a comparison: SB3 / sb3-contrib trained by rl_zoo3, inside the suite.

- :mod:`~lit_sb3.zoo.reference.entry`: the zoo-format entry rl_zoo3 reads for a job (the same files and overrides
  the lit_sb3 side resolves, merged the same way);
- :mod:`~lit_sb3.zoo.reference.zoo_train`: the process that trains one job with rl_zoo3's own ``train`` (the one
  adapter over rl_zoo3's internals: its evaluation callback made env-step based for every algorithm, MaskablePPO
  added);
- :mod:`~lit_sb3.zoo.reference.zoo_logs`: reads and checks an RL Zoo log folder (``logs/<algo>/<env>_<n>/``);
- :mod:`~lit_sb3.zoo.reference.importer`: records such a folder as a run of the store, with the metrics, params
  and tags of ``bench run``'s own runs plus ``impl=sb3`` (``bench import``, and each finished reference job);
- :mod:`~lit_sb3.zoo.reference.job`: a reference job as the launchers run it (``bench run --impl sb3``).

rl_zoo3 and sb3-contrib are the optional extra ``[reference]``; the library never imports them, and only
:mod:`~lit_sb3.zoo.reference.zoo_train` does, in its own process.
"""

from __future__ import annotations

__all__ = ["IMPL_TAG", "REFERENCE_EXTRA", "check_reference_installed"]

IMPL_TAG = "impl"
"""Tag of every job run: the implementation that trained it (``lit_sb3`` or ``sb3``)."""

REFERENCE_EXTRA = 'pip install "lit_sb3[reference]"'


def check_reference_installed() -> None:
    """Raise a one-line :class:`~lit_sb3.zoo.errors.BenchError` when rl_zoo3 or sb3-contrib is missing (the
    ``[reference]`` extra), before anything is planned. Looks the packages up without importing them."""
    from importlib.util import find_spec

    from lit_sb3.zoo.errors import BenchError

    missing = [name for name in ("rl_zoo3", "sb3_contrib", "stable_baselines3") if find_spec(name) is None]
    if missing:
        raise BenchError(f"--impl sb3 needs {', '.join(missing)} (the reference extra): {REFERENCE_EXTRA}")
