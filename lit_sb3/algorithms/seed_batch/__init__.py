"""Seed batching: K seeds of one algorithm trained together by one LightningModule (see docs/seed_batching.md).

``SeedBatch(SAC, seeds=[0, 1, 2, 3], **sac_kwargs)`` returns the batched class registered for the algorithm.
"""

from lit_sb3.algorithms.seed_batch.base import SeedBatchModule
from lit_sb3.algorithms.seed_batch.dqn import SeedBatchDQN
from lit_sb3.algorithms.seed_batch.off_policy import OffPolicySeedBatch, SeedReplayStorage
from lit_sb3.algorithms.seed_batch.on_policy import OnPolicySeedBatch, SeedBatchA2C, SeedBatchPPO
from lit_sb3.algorithms.seed_batch.sac import SeedBatchSAC
from lit_sb3.algorithms.seed_batch.td3 import SeedBatchDDPG, SeedBatchTD3
from lit_sb3.algorithms.seeds import SeedBatch
from lit_sb3.loggers import SeedRoutingLogger
from lit_sb3.optim import PerSeedAdam, PerSeedRMSprop
from lit_sb3.policies.seed_stack import ParamLink, clip_grad_norm_per_seed, stack_sequential

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
    "SeedBatchModule",
    "SeedBatchPPO",
    "SeedBatchSAC",
    "SeedBatchTD3",
    "SeedReplayStorage",
    "SeedRoutingLogger",
    "clip_grad_norm_per_seed",
    "stack_sequential",
]
