"""Rollout and replay buffers (torch-resident replay storage, n-step returns, npz save/load)."""

from lit_sb3.buffers.base import BaseBuffer
from lit_sb3.buffers.dict_replay import DictReplayBuffer
from lit_sb3.buffers.nstep_replay import NStepReplayBuffer
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.buffers.rollout import DictRolloutBuffer, RolloutBuffer

__all__ = [
    "BaseBuffer",
    "DictReplayBuffer",
    "DictRolloutBuffer",
    "NStepReplayBuffer",
    "ReplayBuffer",
    "RolloutBuffer",
]
