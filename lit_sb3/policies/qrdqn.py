"""QR-DQN policy: a quantile network (N quantiles of the return per action) and its target.

The quantiles of all actions come from one output layer (``n_actions * n_quantiles`` units), viewed as
``[batch, n_quantiles, n_actions]`` as in sb3-contrib.
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.policies.base import BasePolicy, encode_constructor_parameters
from lit_sb3.policies.dqn import DQNPolicy
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    create_mlp,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy", "QRDQNPolicy", "QuantileNetwork"]


def _check_n_quantiles(n_quantiles: Any) -> int:
    if isinstance(n_quantiles, bool) or not isinstance(n_quantiles, int) or n_quantiles < 1:
        raise ValueError(f"n_quantiles must be an integer >= 1, got {n_quantiles!r}.")
    return n_quantiles


class QuantileNetwork(BasePolicy):
    """Quantiles of the return of every discrete action.

    Args:
        observation_space: the observation space.
        action_space: the (Discrete) action space.
        features_extractor: the features extractor.
        features_dim: its output size.
        n_quantiles: number of quantiles N.
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
        n_quantiles: int = 200,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        normalize_images: bool = True,
    ) -> None:
        super().__init__(
            observation_space, action_space, features_extractor=features_extractor, normalize_images=normalize_images
        )
        if not isinstance(action_space, spaces.Discrete):
            raise ValueError(f"QuantileNetwork needs a gymnasium.spaces.Discrete action space, got {action_space}.")
        self.net_arch = [64, 64] if net_arch is None else list(net_arch)
        self.activation_fn = activation_fn
        self.features_dim = features_dim
        self.n_quantiles = _check_n_quantiles(n_quantiles)
        self.n_actions = int(action_space.n)
        self.quantile_net = nn.Sequential(
            *create_mlp(features_dim, self.n_actions * self.n_quantiles, self.net_arch, activation_fn)
        )

    def forward(self, obs: PyTorchObs) -> th.Tensor:
        """Quantiles ``[batch, n_quantiles, n_actions]`` (``[K, batch, ...]`` for K stacked seeds)."""
        quantiles = self.quantile_net(self.extract_features(obs, self.features_extractor))
        return quantiles.view(*quantiles.shape[:-1], self.n_quantiles, self.n_actions)

    def _predict(self, observation: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        # greedy action: Q(s, a) = mean_i theta_i(s, a)
        return self(observation).mean(dim=-2).argmax(dim=-1).reshape(-1)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                features_dim=self.features_dim,
                n_quantiles=self.n_quantiles,
                activation_fn=self.activation_fn,
            )
        )


class QRDQNPolicy(DQNPolicy):
    """QR-DQN policy: ``quantile_net``, ``quantile_net_target`` and one optimizer.

    Args:
        observation_space: the observation space.
        action_space: the (Discrete) action space.
        lr_schedule: learning-rate schedule.
        n_quantiles: number of quantiles N.
        net_arch: hidden sizes (default [64, 64], none with NatureCNN).
        activation_fn: activation class.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class (fused Adam by default).
        optimizer_kwargs: optimizer kwargs.
    """

    quantile_net: QuantileNetwork
    quantile_net_target: QuantileNetwork

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Discrete,
        lr_schedule: Schedule,
        n_quantiles: int = 200,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        # read by _build(), which DQNPolicy.__init__ calls
        self.n_quantiles = _check_n_quantiles(n_quantiles)
        super().__init__(
            observation_space, action_space, lr_schedule, net_arch, activation_fn, features_extractor_class,
            features_extractor_kwargs, normalize_images, optimizer_class, optimizer_kwargs,
        )  # fmt: skip

    def _build(self, lr_schedule: Schedule) -> None:
        """Create the quantile network, its target and the optimizer."""
        self.net_args["n_quantiles"] = self.n_quantiles
        self.quantile_net, self.quantile_net_target = self._make_net_and_target()  # type: ignore[assignment]
        self.optimizer = self.make_optimizer(self.quantile_net.parameters(), lr_schedule(1))

    def make_q_net(self) -> QuantileNetwork:  # type: ignore[override]
        """A new quantile network with its own features extractor."""
        return QuantileNetwork(**self._update_features_extractor(self.net_args, features_extractor=None)).to(
            self.device
        )

    def _predict(self, obs: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        return self.quantile_net._predict(obs, deterministic=deterministic)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "n_quantiles": self.n_quantiles}

    def set_training_mode(self, mode: bool) -> None:
        """Training/evaluation mode of the quantile network (the target stays in evaluation mode).

        Args:
            mode: the mode.
        """
        self.quantile_net.set_training_mode(mode)
        self.training = mode


MlpPolicy = QRDQNPolicy


CnnPolicy, MultiInputPolicy = cnn_and_multi_input_variants(QRDQNPolicy, __name__)
