"""Categorical distributions with invalid-action masking (MaskablePPO), after sb3-contrib's.

A mask holds one boolean per choice (True: allowed). The logits of masked choices are replaced by ``-1e8``
before normalising, so their probability is exactly 0 in float32 (never sampled), and their terms are zeroed
in the entropy (a masked choice carries no uncertainty). ``apply_masking(None)`` restores the unmasked logits.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.policies.distributions import CategoricalDistribution, Distribution, MultiCategoricalDistribution

__all__ = [
    "MaskableBernoulliDistribution",
    "MaskableCategoricalDistribution",
    "MaskableDistribution",
    "MaskableMultiCategoricalDistribution",
    "make_masked_proba_distribution",
]

MaybeMasks = th.Tensor | np.ndarray | None
SelfMaskable = TypeVar("SelfMaskable", bound="MaskableCategoricalDistribution")
SelfMaskableMulti = TypeVar("SelfMaskableMulti", bound="MaskableMultiCategoricalDistribution")

HUGE_NEG = -1e8


def _masked_normalised(raw: th.Tensor, masks: th.Tensor | None) -> th.Tensor:
    """Log-probabilities from raw logits ``[..., n]``, with masked choices at ``-1e8`` before normalising."""
    logits = raw if masks is None else th.where(masks, raw, th.full((), HUGE_NEG, dtype=raw.dtype, device=raw.device))
    return logits - logits.logsumexp(dim=-1, keepdim=True)


def _batched(action_logits: th.Tensor, n: int) -> th.Tensor:
    """Logits with a batch dimension: ``[n]`` -> ``[1, n]``; ``[batch, n]`` and ``[K, batch, n]`` (K seeds) as they
    are."""
    return action_logits.reshape(-1, n) if action_logits.dim() < 3 else action_logits


def _masked_entropy(logits: th.Tensor, masks: th.Tensor | None) -> th.Tensor:
    """Entropy over the last dim of normalised ``logits``; masked choices contribute nothing."""
    p_log_p = logits.exp() * logits
    if masks is not None:
        p_log_p = th.where(masks, p_log_p, th.zeros((), dtype=p_log_p.dtype, device=p_log_p.device))
    return -p_log_p.sum(-1)


class MaskableDistribution(Distribution):
    """A distribution whose choices can be masked out with :meth:`apply_masking`."""

    def apply_masking(self, masks: MaybeMasks) -> None:
        """Mask out choices (False: never chosen); ``None`` removes the masks.

        Args:
            masks: booleans of the concatenated logits' shape (any leading batch shape that reshapes to it).
        """
        raise NotImplementedError


class MaskableCategoricalDistribution(CategoricalDistribution, MaskableDistribution):
    """Categorical distribution over ``action_dim`` actions with invalid-action masking.

    Args:
        action_dim: number of actions.
    """

    def __init__(self, action_dim: int) -> None:
        super().__init__(action_dim)
        self._raw_logits: th.Tensor | None = None
        self.masks: th.Tensor | None = None

    def proba_distribution(self: SelfMaskable, action_logits: th.Tensor) -> SelfMaskable:
        """Set the unnormalised logits ``[batch, action_dim]`` (K seeds: ``[K, batch, action_dim]``; no mask until
        :meth:`apply_masking`)."""
        self._raw_logits = _batched(action_logits, self.action_dim)
        self.masks = None
        self.logits = _masked_normalised(self._raw_logits, None)
        return self

    def apply_masking(self, masks: MaybeMasks) -> None:
        assert self._raw_logits is not None, "Call proba_distribution() first."
        raw = self._raw_logits
        self.masks = None if masks is None else th.as_tensor(masks, dtype=th.bool, device=raw.device).reshape(raw.shape)
        self.logits = _masked_normalised(raw, self.masks)

    def entropy(self) -> th.Tensor:
        assert self.logits is not None
        return _masked_entropy(self.logits, self.masks)


class MaskableMultiCategoricalDistribution(MultiCategoricalDistribution, MaskableDistribution):
    """Independent masked categorical distributions, one per MultiDiscrete dimension; the mask is the
    concatenation of each dimension's mask (``sum(action_dims)`` booleans).

    Args:
        action_dims: number of choices of each dimension.
    """

    def __init__(self, action_dims: list[int]) -> None:
        super().__init__(action_dims)
        self._raw_logits: th.Tensor | None = None
        self.masks: th.Tensor | None = None

    def proba_distribution(self: SelfMaskableMulti, action_logits: th.Tensor) -> SelfMaskableMulti:
        """Set the concatenated unnormalised logits ``[batch, sum(action_dims)]`` (K seeds: ``[K, batch, ...]``; no
        mask yet)."""
        self._raw_logits = _batched(action_logits, sum(self.action_dims))
        self.masks = None
        super().proba_distribution(self._raw_logits)
        return self

    def apply_masking(self, masks: MaybeMasks) -> None:
        raw = self._raw_logits
        assert raw is not None, "Call proba_distribution() first."
        self.masks = None if masks is None else th.as_tensor(masks, dtype=th.bool, device=raw.device).reshape(raw.shape)
        if self._uniform:
            shape = (*raw.shape[:-1], len(self.action_dims), self.action_dims[0])
            self.logits = _masked_normalised(
                raw.reshape(shape), None if self.masks is None else self.masks.reshape(shape)
            )
        else:
            split_masks = (
                [None] * len(self.action_dims) if self.masks is None else th.split(self.masks, self.action_dims, -1)
            )
            self._split_logits = [
                _masked_normalised(s, m)
                for s, m in zip(th.split(raw, self.action_dims, dim=-1), split_masks, strict=True)
            ]

    def entropy(self) -> th.Tensor:
        if self._uniform:
            assert self.logits is not None
            masks = None if self.masks is None else self.masks.reshape(self.logits.shape)
            return _masked_entropy(self.logits, masks).sum(-1)
        split_masks = (
            [None] * len(self.action_dims) if self.masks is None else th.split(self.masks, self.action_dims, -1)
        )
        return th.stack(
            [_masked_entropy(s, m) for s, m in zip(self._split_logits, split_masks, strict=True)], dim=-1
        ).sum(dim=-1)


class MaskableBernoulliDistribution(MaskableMultiCategoricalDistribution):
    """MultiBinary actions as ``n`` masked two-way categoricals (mask: ``2 * n`` booleans, [off, on] per action).

    Args:
        action_dim: number of binary actions.
    """

    def __init__(self, action_dim: int) -> None:
        super().__init__([2] * action_dim)


def make_masked_proba_distribution(action_space: spaces.Space) -> MaskableDistribution:
    """The masked distribution for a Discrete, MultiDiscrete or (1-D) MultiBinary action space.

    Args:
        action_space: the action space.
    """
    if isinstance(action_space, spaces.Discrete):
        return MaskableCategoricalDistribution(int(action_space.n))
    if isinstance(action_space, spaces.MultiDiscrete):
        if action_space.nvec.ndim != 1:
            raise NotImplementedError(
                f"MultiDiscrete action spaces with nvec of shape {action_space.nvec.shape} are not supported; flatten it"
            )
        return MaskableMultiCategoricalDistribution([int(n) for n in action_space.nvec])
    if isinstance(action_space, spaces.MultiBinary):
        if len(action_space.shape) != 1:
            raise NotImplementedError(
                f"Multi-dimensional MultiBinary({action_space.n}) action space is not supported; flatten it instead."
            )
        return MaskableBernoulliDistribution(int(action_space.shape[0]))
    raise NotImplementedError(
        f"action masking needs a Discrete, MultiDiscrete or MultiBinary action space, got {action_space}"
    )


def mask_dims(action_space: spaces.Space) -> int:
    """Number of mask entries for an action space (``n``, ``sum(nvec)`` or ``2 * n``)."""
    if isinstance(action_space, spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    if isinstance(action_space, spaces.MultiBinary):
        return 2 * int(action_space.shape[0])
    raise NotImplementedError(f"no action masks for the action space {action_space}")
