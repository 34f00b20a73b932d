"""DQN policy: Q-network and its target."""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.policies.base import BasePolicy, encode_constructor_parameters
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    NatureCNN,
    create_mlp,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = ["CnnPolicy", "DQNPolicy", "MlpPolicy", "MultiInputPolicy", "QNetwork"]


def _require_discrete(action_space: spaces.Space, who: str) -> None:
    if not isinstance(action_space, spaces.Discrete):
        raise ValueError(f"{who} needs a gymnasium.spaces.Discrete action space, got {action_space}.")


class QNetwork(BasePolicy):
    """Action-value network: one Q-value per discrete action.

    Args:
        observation_space: the observation space.
        action_space: the (Discrete) action space.
        features_extractor: the features extractor.
        features_dim: its output size.
        net_arch: hidden sizes (default [64, 64]).
        activation_fn: activation class.
        normalize_images: divide uint8 images by 255.
    """

    action_space: spaces.Discrete

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Discrete,
        features_extractor: BaseFeaturesExtractor,
        features_dim: int,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        normalize_images: bool = True,
    ) -> None:
        super().__init__(
            observation_space, action_space, features_extractor=features_extractor, normalize_images=normalize_images
        )
        _require_discrete(action_space, "QNetwork")
        if net_arch is None:
            net_arch = [64, 64]
        self.net_arch = list(net_arch)
        self.activation_fn = activation_fn
        self.features_dim = features_dim
        self.q_net = nn.Sequential(*create_mlp(features_dim, int(action_space.n), self.net_arch, activation_fn))

    def forward(self, obs: PyTorchObs) -> th.Tensor:
        """Q-values ``[batch, n_actions]``."""
        return self.q_net(self.extract_features(obs, self.features_extractor))

    def _predict(self, observation: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        return self(observation).argmax(dim=-1).reshape(-1)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                features_dim=self.features_dim,
                activation_fn=self.activation_fn,
            )
        )


class DQNPolicy(BasePolicy):
    """DQN policy: ``q_net``, ``q_net_target`` and one optimizer.

    Args:
        observation_space: the observation space.
        action_space: the (Discrete) action space.
        lr_schedule: learning-rate schedule.
        net_arch: hidden sizes (default [64, 64], none with NatureCNN).
        activation_fn: activation class.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class (fused Adam by default).
        optimizer_kwargs: optimizer kwargs.
    """

    q_net: QNetwork
    q_net_target: QNetwork

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Discrete,
        lr_schedule: Schedule,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            features_extractor_class,
            features_extractor_kwargs,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
            normalize_images=normalize_images,
        )
        _require_discrete(action_space, "DQNPolicy")
        if net_arch is None:
            net_arch = [] if features_extractor_class == NatureCNN else [64, 64]
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.net_args: dict[str, Any] = dict(
            observation_space=observation_space,
            action_space=action_space,
            net_arch=net_arch,
            activation_fn=activation_fn,
            normalize_images=normalize_images,
        )
        self._build(lr_schedule)

    def _build(self, lr_schedule: Schedule) -> None:
        """Create the Q-network, its target and the optimizer."""
        self.q_net, self.q_net_target = self._make_net_and_target()
        self.optimizer = self.make_optimizer(self.q_net.parameters(), lr_schedule(1))

    def _make_net_and_target(self) -> tuple[QNetwork, QNetwork]:
        """A new network (:meth:`make_q_net`) and its target: a frozen copy, in evaluation mode."""
        net, target = self.make_q_net(), self.make_q_net()
        target.load_state_dict(net.state_dict())
        target.requires_grad_(False)
        target.set_training_mode(False)
        return net, target

    def make_q_net(self) -> QNetwork:
        """A new Q-network with its own features extractor."""
        return QNetwork(**self._update_features_extractor(self.net_args, features_extractor=None)).to(self.device)

    def forward(self, obs: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        return self._predict(obs, deterministic=deterministic)

    def _predict(self, obs: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        return self.q_net._predict(obs, deterministic=deterministic)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_args["net_arch"],
                activation_fn=self.net_args["activation_fn"],
                optimizer_class=self.optimizer_class,
                optimizer_kwargs=self.optimizer_kwargs,
                features_extractor_class=self.features_extractor_class,
                features_extractor_kwargs=self.features_extractor_kwargs,
            )
        )

    def set_training_mode(self, mode: bool) -> None:
        """Training/evaluation mode of the Q-network (the target stays in evaluation mode).

        Args:
            mode: the mode.
        """
        self.q_net.set_training_mode(mode)
        self.training = mode


MlpPolicy = DQNPolicy


CnnPolicy, MultiInputPolicy = cnn_and_multi_input_variants(DQNPolicy, __name__)
