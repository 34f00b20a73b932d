"""Lightning-facing datasets that drive the RL loop."""

from lit_sb3.data.replay import InfiniteReplayBufferDataset

__all__ = ["InfiniteReplayBufferDataset"]
