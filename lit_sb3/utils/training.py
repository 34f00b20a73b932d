"""Training-loop helpers: the collection stopping rule (target networks are updated in each algorithm with one
``torch._foreach_lerp_``)."""

from __future__ import annotations

from lit_sb3.core.types import TrainFreq, TrainFrequencyUnit

__all__ = ["should_collect_more_steps"]


def should_collect_more_steps(train_freq: TrainFreq, num_collected_steps: int, num_collected_episodes: int) -> bool:
    """Whether a rollout of ``train_freq`` is not complete yet."""
    if train_freq.unit == TrainFrequencyUnit.STEP:
        return num_collected_steps < train_freq.frequency
    if train_freq.unit == TrainFrequencyUnit.EPISODE:
        return num_collected_episodes < train_freq.frequency
    raise ValueError(f"The unit of the `train_freq` must be either 'step' or 'episode' not '{train_freq.unit}'!")
