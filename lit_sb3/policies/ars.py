"""ARS policies (sb3-contrib's ``MlpPolicy`` and ``LinearPolicy``): deterministic MLP/linear maps from observations to
actions, plus a *population* forward that evaluates many weight vectors at once (one per env slot).
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.types import PyTorchObs
from lit_sb3.policies.base import BasePolicy, encode_constructor_parameters
from lit_sb3.policies.torch_layers import create_mlp
from lit_sb3.utils.serialization import register_class

__all__ = ["ARSPolicy", "ARSLinearPolicy", "MlpPolicy", "LinearPolicy"]


class ARSPolicy(BasePolicy):
    """Deterministic policy network of ARS.

    Args:
        observation_space: the observation space.
        action_space: ``Box`` or ``Discrete``.
        net_arch: hidden layer sizes (default ``[64, 64]``).
        activation_fn: activation class.
        with_bias: learn additive biases.
        squash_output: Box actions: tanh-squash to [-1, 1] (rescaled to the bounds by ``predict``); otherwise
            the raw output is clipped to the bounds.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        with_bias: bool = True,
        squash_output: bool = True,
    ) -> None:
        super().__init__(
            observation_space, action_space, squash_output=isinstance(action_space, spaces.Box) and squash_output
        )
        self.net_arch = [64, 64] if net_arch is None else list(net_arch)
        self.activation_fn = activation_fn
        self.with_bias = with_bias
        self.features_extractor = self.make_features_extractor()
        self.features_dim = self.features_extractor.features_dim
        if isinstance(action_space, spaces.Box):
            layers = create_mlp(
                self.features_dim,
                int(action_space.shape[0]),
                self.net_arch,
                activation_fn,
                with_bias=with_bias,
                squash_output=squash_output,
            )
        elif isinstance(action_space, spaces.Discrete):
            layers = create_mlp(
                self.features_dim, int(action_space.n), self.net_arch, activation_fn, with_bias=with_bias
            )
        else:
            raise NotImplementedError(
                f"ARS policies support Box and Discrete action spaces, not {type(action_space).__name__}."
            )
        self.action_net = nn.Sequential(*layers)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(net_arch=self.net_arch, activation_fn=self.activation_fn, with_bias=self.with_bias)
        )

    def forward(self, obs: PyTorchObs) -> th.Tensor:
        """Actions (Box: the network output; Discrete: the argmax of the logits)."""
        out = self.action_net(self.extract_features(obs, self.features_extractor))
        return th.argmax(out, dim=1) if isinstance(self.action_space, spaces.Discrete) else out

    def _predict(self, observation: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        return self(observation)  # ARS policies are deterministic

    def population_forward(self, obs: PyTorchObs, weights: th.Tensor) -> th.Tensor:
        """Actions of ``P`` policies with their own flat weight vectors, one observation each.

        Row ``i`` of ``obs`` is acted on by the network whose parameters are ``weights[i]`` (laid out as
        ``parameters_to_vector(self.parameters())``): every Linear layer becomes one batched matmul, so the whole
        population costs one forward.

        Args:
            obs: ``[P, ...]`` observations.
            weights: ``[P, n_params]`` flat parameter vectors.
        """
        x = self.extract_features(obs, self.features_extractor).to(weights.dtype)  # [P, features]
        offset = 0
        for module in self.action_net:
            if isinstance(module, nn.Linear):
                n_w = module.weight.numel()
                w = weights[:, offset : offset + n_w].view(-1, module.out_features, module.in_features)
                offset += n_w
                y = th.bmm(w, x.unsqueeze(-1)).squeeze(-1)  # y_i = W_i x_i (+ b_i)
                if module.bias is not None:
                    y = y + weights[:, offset : offset + module.out_features]
                    offset += module.out_features
                x = y
            else:  # activations, tanh: no parameters
                x = module(x)
        if offset != weights.shape[1]:
            raise ValueError(f"population_forward: weights have {weights.shape[1]} columns, the network {offset}")
        return th.argmax(x, dim=1) if isinstance(self.action_space, spaces.Discrete) else x


class ARSLinearPolicy(ARSPolicy):
    """Linear policy of ARS (no hidden layer; by default no bias and no squashing, as the ARS paper's).

    Args:
        observation_space: the observation space.
        action_space: ``Box`` or ``Discrete``.
        with_bias: learn an additive bias.
        squash_output: Box actions: tanh-squash instead of clipping.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        with_bias: bool = False,
        squash_output: bool = False,
    ) -> None:
        super().__init__(observation_space, action_space, net_arch=[], with_bias=with_bias, squash_output=squash_output)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(dict(with_bias=self.with_bias))


MlpPolicy = ARSPolicy
LinearPolicy = ARSLinearPolicy

register_class(ARSPolicy)
register_class(ARSLinearPolicy)
