"""Rollout buffers that also keep the action masks each action was chosen under (MaskablePPO)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch as th

from lit_sb3.buffers.rollout import DictRolloutBuffer, RolloutBuffer
from lit_sb3.core.types import TensorDict
from lit_sb3.policies.maskable_distributions import mask_dims

__all__ = [
    "MaskableDictRolloutBuffer",
    "MaskableDictRolloutBufferSamples",
    "MaskableRolloutBuffer",
    "MaskableRolloutBufferSamples",
]


class MaskableRolloutBufferSamples(NamedTuple):
    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    action_masks: th.Tensor


class MaskableDictRolloutBufferSamples(NamedTuple):
    observations: TensorDict
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    action_masks: th.Tensor


class _MasksMixin:
    """Stores ``action_masks`` (``[n_steps, n_envs, mask_dims]``, all allowed unless given) beside the rollout."""

    action_masks: np.ndarray
    mask_dims: int
    _samples_class: type

    def _reset_common(self) -> None:
        super()._reset_common()  # type: ignore[misc]
        self.mask_dims = mask_dims(self.action_space)  # type: ignore[attr-defined]
        self.action_masks = np.ones((self.buffer_size, self.n_envs, self.mask_dims), dtype=np.float32)  # type: ignore[attr-defined]

    def add(self, *args: Any, action_masks: np.ndarray | None = None, **kwargs: Any) -> None:
        """Store one step of every env (see :meth:`RolloutBuffer.add`) and the masks its actions were chosen under.

        Args:
            args: the arguments of :meth:`RolloutBuffer.add`.
            action_masks: ``[n_envs, mask_dims]`` booleans (None: every action allowed).
            kwargs: the keyword arguments of :meth:`RolloutBuffer.add`.
        """
        if action_masks is not None:
            self.action_masks[self.pos] = np.asarray(action_masks).reshape((self.n_envs, self.mask_dims))  # type: ignore[attr-defined]
        super().add(*args, **kwargs)  # type: ignore[misc]

    def _prepare_tensors(self) -> None:
        super()._prepare_tensors()  # type: ignore[misc]
        self._flat["action_masks"] = self._flat_tensor(self.action_masks)  # type: ignore[attr-defined]

    def _get_samples(self, batch_inds: th.Tensor | np.ndarray, env: Any = None) -> Any:
        samples = super()._get_samples(batch_inds, env)  # type: ignore[misc]
        idx = th.as_tensor(batch_inds, device=self.device)  # type: ignore[attr-defined]
        return self._samples_class(*samples, action_masks=self._flat["action_masks"][idx])  # type: ignore[attr-defined]


class MaskableRolloutBuffer(_MasksMixin, RolloutBuffer):
    """:class:`RolloutBuffer` with the action masks of each step (samples carry ``action_masks``).

    Args:
        buffer_size: steps per env in a rollout.
        observation_space: observation space.
        action_space: a Discrete, MultiDiscrete or MultiBinary action space.
        device: torch device of the samples.
        gae_lambda: GAE lambda.
        gamma: discount factor.
        n_envs: number of parallel environments.
    """

    _samples_class = MaskableRolloutBufferSamples


class MaskableDictRolloutBuffer(_MasksMixin, DictRolloutBuffer):
    """:class:`DictRolloutBuffer` with the action masks of each step (samples carry ``action_masks``).

    Args:
        buffer_size: steps per env in a rollout.
        observation_space: a Dict observation space.
        action_space: a Discrete, MultiDiscrete or MultiBinary action space.
        device: torch device of the samples.
        gae_lambda: GAE lambda.
        gamma: discount factor.
        n_envs: number of parallel environments.
    """

    _samples_class = MaskableDictRolloutBufferSamples
