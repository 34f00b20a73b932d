"""Seed batching: K seeds of one algorithm trained together by one LightningModule (see docs/seed_batching.md).

``SeedBatch(SAC, seeds=[0, 1, 2, 3], **sac_kwargs)`` returns the batched class registered for the algorithm.
"""

from lit_sb3.algorithms.seed_batch.base import (
    ParamLink,
    SeedBatch,
    SeedRoutingLogger,
    clip_grad_norm_per_seed,
    stack_sequential,
)
from lit_sb3.algorithms.seed_batch.dqn import SeedBatchDQN
from lit_sb3.algorithms.seed_batch.off_policy import OffPolicySeedBatch, SeedReplayStorage
from lit_sb3.algorithms.seed_batch.on_policy import OnPolicySeedBatch, SeedBatchA2C, SeedBatchPPO
from lit_sb3.algorithms.seed_batch.optim import PerSeedAdam, PerSeedRMSprop
from lit_sb3.algorithms.seed_batch.sac import SeedBatchSAC
from lit_sb3.algorithms.seed_batch.td3 import SeedBatchDDPG, SeedBatchTD3

__all__ = [
    "OffPolicySeedBatch",
    "OnPolicySeedBatch",
    "ParamLink",
    "PerSeedAdam",
    "PerSeedRMSprop",
    "SeedBatch",
    "SeedBatchA2C",
    "SeedBatchDDPG",
    "SeedBatchDQN",
    "SeedBatchPPO",
    "SeedBatchSAC",
    "SeedBatchTD3",
    "SeedReplayStorage",
    "SeedRoutingLogger",
    "clip_grad_norm_per_seed",
    "stack_sequential",
]
