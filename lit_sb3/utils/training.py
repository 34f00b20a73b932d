"""Training-loop helpers: collection stopping rule and fused target-network updates."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch as th

from lit_sb3.core.types import TrainFreq, TrainFrequencyUnit

__all__ = ["polyak_update", "should_collect_more_steps", "zip_strict"]


def should_collect_more_steps(train_freq: TrainFreq, num_collected_steps: int, num_collected_episodes: int) -> bool:
    """Whether a rollout of ``train_freq`` is not complete yet."""
    if train_freq.unit == TrainFrequencyUnit.STEP:
        return num_collected_steps < train_freq.frequency
    if train_freq.unit == TrainFrequencyUnit.EPISODE:
        return num_collected_episodes < train_freq.frequency
    raise ValueError(f"The unit of the `train_freq` must be either 'step' or 'episode' not '{train_freq.unit}'!")


def zip_strict(*iterables: Iterable):
    """``zip`` that raises when the iterables differ in length."""
    return zip(*iterables, strict=True)


@th.no_grad()
def polyak_update(params: Sequence[th.Tensor], target_params: Sequence[th.Tensor], tau: float) -> None:
    """``target = (1 - tau) * target + tau * params`` for all tensors at once (``torch._foreach_lerp_``).

    Args:
        params: source tensors (parameters, or running stats with ``tau=1``).
        target_params: tensors updated in place, same order and shapes.
        tau: interpolation factor in [0, 1].
    """
    params, target_params = list(params), list(target_params)
    if len(params) != len(target_params):
        raise ValueError(f"polyak_update got {len(params)} source and {len(target_params)} target tensors.")
    if not params:
        return
    floats = [(p, t) for p, t in zip(params, target_params) if t.is_floating_point()]
    others = [(p, t) for p, t in zip(params, target_params) if not t.is_floating_point()]
    if floats:
        th._foreach_lerp_([t for _, t in floats], [p for p, _ in floats], tau)
    for p, t in others:  # integer buffers (e.g. BatchNorm's num_batches_tracked) are copied
        t.copy_(p)
