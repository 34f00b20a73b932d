"""The older seed-batched on-policy classes (PPO, A2C), kept until those algorithms train K seeds themselves.

``SeedBatch`` (:mod:`lit_sb3.algorithms.seeds`) is the one way to ask for K seeds; the off-policy algorithms
(SAC, TD3, DDPG, DQN) train K seeds in their own classes (:mod:`lit_sb3.algorithms.seed_dim`).
"""

from lit_sb3.algorithms.seed_batch.base import SeedBatchModule
from lit_sb3.algorithms.seed_batch.on_policy import OnPolicySeedBatch, SeedBatchA2C, SeedBatchPPO
from lit_sb3.algorithms.seeds import SeedBatch
from lit_sb3.loggers import SeedRoutingLogger
from lit_sb3.optim import PerSeedAdam, PerSeedRMSprop
from lit_sb3.policies.seed_stack import ParamLink, clip_grad_norm_per_seed, stack_sequential

__all__ = [
    "OnPolicySeedBatch",
    "ParamLink",
    "PerSeedAdam",
    "PerSeedRMSprop",
    "SeedBatch",
    "SeedBatchA2C",
    "SeedBatchModule",
    "SeedBatchPPO",
    "SeedRoutingLogger",
    "clip_grad_norm_per_seed",
    "stack_sequential",
]
