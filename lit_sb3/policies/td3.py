"""TD3 (and DDPG) policy: deterministic tanh actor with target, ensemble critic with target."""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.preprocessing import get_action_dim
from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.policies.base import BasePolicy, encode_constructor_parameters
from lit_sb3.policies.sac import ContinuousCritic, _require_box
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    NatureCNN,
    create_mlp,
    get_actor_critic_arch,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = ["Actor", "CnnPolicy", "MlpPolicy", "MultiInputPolicy", "TD3Policy"]


class Actor(BasePolicy):
    """Deterministic actor: MLP with a tanh output (actions in [-1, 1]).

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        net_arch: hidden sizes.
        features_extractor: the features extractor.
        features_dim: its output size.
        activation_fn: activation class.
        normalize_images: divide uint8 images by 255.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        net_arch: list[int],
        features_extractor: nn.Module,
        features_dim: int,
        activation_fn: type[nn.Module] = nn.ReLU,
        normalize_images: bool = True,
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            features_extractor=features_extractor,
            normalize_images=normalize_images,
            squash_output=True,
        )
        _require_box(action_space, "TD3's Actor")
        self.net_arch = list(net_arch)
        self.features_dim = features_dim
        self.activation_fn = activation_fn
        action_dim = get_action_dim(action_space)
        self.mu = nn.Sequential(*create_mlp(features_dim, action_dim, self.net_arch, activation_fn, squash_output=True))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                features_dim=self.features_dim,
                activation_fn=self.activation_fn,
            )
        )

    def forward(self, obs: PyTorchObs) -> th.Tensor:
        return self.mu(self.extract_features(obs, self.features_extractor))

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        # always deterministic: exploration noise is added by the algorithm
        return self(observation)


class TD3Policy(BasePolicy):
    """TD3 policy: actor and actor target, critic (``n_critics`` Q-networks) and critic target.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        lr_schedule: learning-rate schedule.
        net_arch: one list for actor and critic, or ``dict(pi=[...], qf=[...])``
            (default [400, 300], [256, 256] with NatureCNN, as SB3).
        activation_fn: activation class.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class (fused Adam by default).
        optimizer_kwargs: optimizer kwargs.
        n_critics: number of Q-networks.
        share_features_extractor: actor and critic share one features extractor.
    """

    actor: Actor
    actor_target: Actor
    critic: ContinuousCritic
    critic_target: ContinuousCritic

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        n_critics: int = 2,
        share_features_extractor: bool = False,
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            features_extractor_class,
            features_extractor_kwargs,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
            squash_output=True,
            normalize_images=normalize_images,
        )
        _require_box(action_space, "TD3Policy")
        if net_arch is None:
            net_arch = [256, 256] if features_extractor_class == NatureCNN else [400, 300]
        actor_arch, critic_arch = get_actor_critic_arch(net_arch)
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.net_args: dict[str, Any] = dict(
            observation_space=observation_space,
            action_space=action_space,
            net_arch=actor_arch,
            activation_fn=activation_fn,
            normalize_images=normalize_images,
        )
        self.actor_kwargs = self.net_args.copy()
        self.critic_kwargs = self.net_args.copy()
        self.critic_kwargs.update(
            n_critics=n_critics, net_arch=critic_arch, share_features_extractor=share_features_extractor
        )
        self.share_features_extractor = share_features_extractor
        self._build(lr_schedule)

    def _build(self, lr_schedule: Schedule) -> None:
        """Create actor, critic, their targets and the two optimizers."""
        self.actor = self.make_actor(features_extractor=None)
        self.actor_target = self.make_actor(features_extractor=None)
        self.actor_target.load_state_dict(self.actor.state_dict())
        self.actor.optimizer = self.make_optimizer(self.actor.parameters(), lr_schedule(1))
        if self.share_features_extractor:
            self.critic = self.make_critic(features_extractor=self.actor.features_extractor)
            # the target critic shares the target actor's extractor (its polyak rate is then effectively 2 * tau)
            self.critic_target = self.make_critic(features_extractor=self.actor_target.features_extractor)
            critic_parameters = [p for name, p in self.critic.named_parameters() if "features_extractor" not in name]
        else:
            self.critic = self.make_critic(features_extractor=None)
            self.critic_target = self.make_critic(features_extractor=None)
            critic_parameters = list(self.critic.parameters())
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic.optimizer = self.make_optimizer(critic_parameters, lr_schedule(1))
        self.actor_target.requires_grad_(False)
        self.critic_target.requires_grad_(False)
        self.actor_target.set_training_mode(False)
        self.critic_target.set_training_mode(False)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                activation_fn=self.activation_fn,
                n_critics=self.critic_kwargs["n_critics"],
                optimizer_class=self.optimizer_class,
                optimizer_kwargs=self.optimizer_kwargs,
                features_extractor_class=self.features_extractor_class,
                features_extractor_kwargs=self.features_extractor_kwargs,
                share_features_extractor=self.share_features_extractor,
            )
        )

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> Actor:
        """A new actor (with a new features extractor unless one is given)."""
        return Actor(**self._update_features_extractor(self.actor_kwargs, features_extractor)).to(self.device)

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> ContinuousCritic:
        """A new critic (with a new features extractor unless one is given)."""
        return ContinuousCritic(**self._update_features_extractor(self.critic_kwargs, features_extractor)).to(
            self.device
        )

    def forward(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self._predict(observation, deterministic=deterministic)

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self.actor(observation)

    def set_training_mode(self, mode: bool) -> None:
        """Training/evaluation mode of actor and critic (targets stay in evaluation mode).

        Args:
            mode: the mode.
        """
        self.actor.set_training_mode(mode)
        self.critic.set_training_mode(mode)
        self.training = mode


MlpPolicy = TD3Policy


CnnPolicy, MultiInputPolicy = cnn_and_multi_input_variants(TD3Policy, __name__)
