"""The datasets that drive Lightning's fit loop for RL."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from torch.utils.data import IterableDataset

__all__ = ["InfiniteReplayBufferDataset"]


class InfiniteReplayBufferDataset(IterableDataset):
    """Yields ``0, 1, 2, ...`` forever.

    Each token makes Lightning call ``training_step`` once; the step itself collects experience and updates the
    networks (the data lives in the algorithm's buffers, not in the dataloader). The run stops when the
    RLTrainer's env-step budget is reached (``trainer.should_stop``).
    """

    def __iter__(self) -> Iterator[int]:
        return iter(itertools.count())
