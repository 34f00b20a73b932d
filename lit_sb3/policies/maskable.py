"""Actor-critic policies with invalid-action masking (MaskablePPO), sb3-contrib's ``MaskableActorCriticPolicy``.

The networks are :class:`~lit_sb3.policies.base.ActorCriticPolicy`'s; the action distribution is a masked one
(:mod:`lit_sb3.policies.maskable_distributions`), and every method that builds it takes ``action_masks``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.policies.base import ActorCriticPolicy
from lit_sb3.policies.maskable_distributions import MaskableDistribution, make_masked_proba_distribution
from lit_sb3.policies.torch_layers import BaseFeaturesExtractor, FlattenExtractor
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = [
    "MaskableActorCriticCnnPolicy",
    "MaskableActorCriticPolicy",
    "MaskableMultiInputActorCriticPolicy",
]

# ActorCriticPolicy's arguments that a masked (discrete) policy does not take
_NOT_MASKABLE = ("use_sde", "log_std_init", "squash_output", "full_std", "use_expln")


class MaskableActorCriticPolicy(ActorCriticPolicy):
    """Actor-critic policy whose action distribution honours invalid-action masks (sb3-contrib 2.9 arguments).

    Args:
        observation_space: the observation space.
        action_space: a Discrete, MultiDiscrete or MultiBinary action space.
        lr_schedule: learning-rate schedule.
        net_arch: ``dict(pi=[...], vf=[...])`` or one list for both.
        activation_fn: activation class.
        ortho_init: orthogonal initialisation.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        share_features_extractor: one extractor for actor and critic.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class.
        optimizer_kwargs: optimizer kwargs (default for Adam: ``eps=1e-5``).
    """

    action_dist: MaskableDistribution  # type: ignore[assignment]

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        make_masked_proba_distribution(action_space)  # a clear error for a Box space before any network is built
        self._pending_masks: np.ndarray | th.Tensor | None = None
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            net_arch=net_arch,
            activation_fn=activation_fn,
            ortho_init=ortho_init,
            features_extractor_class=features_extractor_class,
            features_extractor_kwargs=features_extractor_kwargs,
            share_features_extractor=share_features_extractor,
            normalize_images=normalize_images,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
        )

    def _build(self, lr_schedule: Schedule) -> None:
        self.action_dist = make_masked_proba_distribution(self.action_space)
        super()._build(lr_schedule)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        for key in _NOT_MASKABLE:
            data.pop(key, None)
        return data

    def forward(  # type: ignore[override]
        self, obs: PyTorchObs, deterministic: bool = False, action_masks: np.ndarray | th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Actions, values ``[batch, 1]`` and log-probabilities ``[batch]``, choosing only allowed actions.

        Args:
            obs: batch of observations.
            deterministic: deterministic actions.
            action_masks: allowed choices (None: all).
        """
        latent_pi, latent_vf = self._latents(obs)
        values = self.value_net(latent_vf)
        distribution = self._get_action_dist_from_latent(latent_pi)
        if action_masks is not None:
            distribution.apply_masking(action_masks)
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        return actions.reshape((*log_prob.shape, *self.action_space.shape)), values, log_prob  # type: ignore[misc]

    def get_distribution(  # type: ignore[override]
        self, obs: PyTorchObs, action_masks: np.ndarray | th.Tensor | None = None
    ) -> MaskableDistribution:
        """The masked action distribution for observations.

        Args:
            obs: batch of observations.
            action_masks: allowed choices (None: all).
        """
        distribution = super().get_distribution(obs)
        if action_masks is not None:
            distribution.apply_masking(action_masks)  # type: ignore[attr-defined]
        return distribution  # type: ignore[return-value]

    def evaluate_actions(  # type: ignore[override]
        self, obs: PyTorchObs, actions: th.Tensor, action_masks: th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        """Values, log-probabilities and (masked) entropy of ``actions``.

        Args:
            obs: batch of observations.
            actions: batch of actions.
            action_masks: the masks the actions were chosen under (None: all allowed).
        """
        latent_pi, latent_vf = self._latents(obs)
        distribution = self._get_action_dist_from_latent(latent_pi)
        if action_masks is not None:
            distribution.apply_masking(action_masks)
        return self.value_net(latent_vf), distribution.log_prob(actions), distribution.entropy()

    def _predict(  # type: ignore[override]
        self, observation: PyTorchObs, deterministic: bool = False, action_masks: np.ndarray | None = None
    ) -> th.Tensor:
        masks = self._pending_masks if action_masks is None else action_masks
        return self.get_distribution(observation, masks).get_actions(deterministic=deterministic)

    def predict(  # type: ignore[override]
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Actions (numpy) for observations, chosen among the allowed ones.

        Args:
            observation: the observation(s).
            state: recurrent state (unused, returned as is).
            episode_start: episode starts (unused).
            deterministic: deterministic actions.
            action_masks: allowed choices, ``[n_envs, mask_dims]`` or ``[mask_dims]`` (None: all).
        """
        # BasePolicy.predict does the numpy/tensor plumbing and calls _predict, which reads these masks
        self._pending_masks = action_masks
        try:
            return super().predict(observation, state, episode_start, deterministic)
        finally:
            self._pending_masks = None


MaskableActorCriticCnnPolicy, MaskableMultiInputActorCriticPolicy = cnn_and_multi_input_variants(
    MaskableActorCriticPolicy, __name__, ("MaskableActorCriticCnnPolicy", "MaskableMultiInputActorCriticPolicy")
)
