"""Imported once by the forkserver of :class:`~lit_sb3.zoo.launchers.local.LocalLauncher`.

Every job process is forked from that server, so it starts with torch, Lightning, gymnasium, MLflow's SQL
store and the algorithms already imported (on a loaded 2-core machine importing them costs 10-30 s per
process; forking costs milliseconds). Nothing here opens a file, a database or a thread.
"""

from __future__ import annotations

import importlib

_MODULES = (
    "numpy",
    "torch",
    "gymnasium",
    "lightning",
    "lit_sb3.trainer",
    "lit_sb3.datamodule",
    "lit_sb3.callbacks",
    "lit_sb3.vec_env",
    "lit_sb3.zoo.config",
    "lit_sb3.zoo.wrappers",
    "lit_sb3.zoo.registry",
    "lit_sb3.zoo.runner",
    "lit_sb3.zoo.tracking.logger",  # Lightning's MLFlowLogger and MLflow's client
    "lit_sb3.zoo.worker.callbacks",
    "lit_sb3.zoo.worker.guards",
    "lit_sb3.algorithms.seeds",  # seed batches (--seed-batch)
)


def _warm() -> None:
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional piece only costs time in the job
            pass
    try:
        from lit_sb3.zoo.registry import ALGOS

        for path in ALGOS.values():
            importlib.import_module(path.partition(":")[0])
    except Exception:  # noqa: BLE001
        pass
    try:
        from lit_sb3.zoo.tracking import warm_imports

        warm_imports()
    except Exception:  # noqa: BLE001
        pass


_warm()
