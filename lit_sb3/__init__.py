"""lit_sb3: Stable-Baselines3's algorithms as PyTorch Lightning modules.

Heavy objects are imported lazily so that ``import lit_sb3`` stays cheap; the benchmarking suite
(``lit_sb3.zoo``: MLflow, Optuna, rliable) is never imported from here.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "PPO": "lit_sb3.algorithms.ppo",
    "A2C": "lit_sb3.algorithms.a2c",
    "SAC": "lit_sb3.algorithms.sac",
    "TD3": "lit_sb3.algorithms.td3",
    "DDPG": "lit_sb3.algorithms.ddpg",
    "DQN": "lit_sb3.algorithms.dqn",
    "HerReplayBuffer": "lit_sb3.algorithms.her.her_replay_buffer",
    "RLTrainer": "lit_sb3.trainer",
    "RLEnvDataModule": "lit_sb3.datamodule",
    "BaseAlgorithm": "lit_sb3.algorithms.base",
    "OnPolicyAlgorithm": "lit_sb3.algorithms.on_policy",
    "OffPolicyAlgorithm": "lit_sb3.algorithms.off_policy",
    "NormalActionNoise": "lit_sb3.core.noise",
    "OrnsteinUhlenbeckActionNoise": "lit_sb3.core.noise",
    "VectorizedActionNoise": "lit_sb3.core.noise",
    "evaluate_policy": "lit_sb3.core.evaluation",
    "make_vec_env": "lit_sb3.vec_env",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lit_sb3' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
