"""lit_sb3: Stable-Baselines3's algorithms as PyTorch Lightning modules.

Heavy objects are imported lazily so that ``import lit_sb3`` stays cheap; the benchmarking suite
(``lit_sb3.zoo``: MLflow, Optuna, rliable) is never imported from here.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from lit_sb3.algorithms.registry import algorithm_exports

# the algorithms (PPO, SAC, ...) come from lit_sb3.algorithms.registry; these are the other public names
_LAZY = {
    "HerReplayBuffer": "lit_sb3.algorithms.her.her_replay_buffer",
    "RLTrainer": "lit_sb3.trainer",
    "RLEnvDataModule": "lit_sb3.datamodule",
    "SeedBatch": "lit_sb3.algorithms.seeds",
    "SeedRoutingLogger": "lit_sb3.loggers",
    "BaseAlgorithm": "lit_sb3.algorithms.base",
    "OnPolicyAlgorithm": "lit_sb3.algorithms.on_policy",
    "OffPolicyAlgorithm": "lit_sb3.algorithms.off_policy",
    "NormalActionNoise": "lit_sb3.core.noise",
    "OrnsteinUhlenbeckActionNoise": "lit_sb3.core.noise",
    "VectorizedActionNoise": "lit_sb3.core.noise",
    "evaluate_policy": "lit_sb3.core.evaluation",
    "make_vec_env": "lit_sb3.vec_env",
    "make_atari_env": "lit_sb3.vec_env",
}

__all__ = ["__version__", *algorithm_exports(), *_LAZY]


def __getattr__(name: str) -> Any:
    module = algorithm_exports().get(name) or _LAZY.get(name)
    if module is not None:
        # algorithms are not cached in globals(): one registered (or unregistered) later is seen as it is now
        value = getattr(importlib.import_module(module), name)
        if name in _LAZY:
            globals()[name] = value
        return value
    raise AttributeError(f"module 'lit_sb3' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({"__version__", *algorithm_exports(), *_LAZY})
