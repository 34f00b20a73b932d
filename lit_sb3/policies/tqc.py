"""TQC policy: SAC's squashed-Gaussian actor and ``n_critics`` quantile critics (``n_quantiles`` atoms each),
all critics evaluated in one batched call (``[n_critics, batch, n_quantiles]``)."""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.preprocessing import get_action_dim
from lit_sb3.core.types import Schedule
from lit_sb3.policies.sac import ContinuousCritic, SACPolicy
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    create_ensemble_mlp,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy", "QuantileCritic", "TQCPolicy"]


class QuantileCritic(ContinuousCritic):
    """``n_critics`` networks Z(s, a) of ``n_quantiles`` return atoms each, stored as one ensemble MLP.

    ``forward_stacked`` returns ``[n_critics, batch, n_quantiles]``; ``forward`` returns sb3-contrib's layout
    ``[batch, n_critics, n_quantiles]``.

    Args:
        *args: :class:`~lit_sb3.policies.sac.ContinuousCritic`'s arguments.
        n_quantiles: atoms per critic.
        **kwargs: :class:`~lit_sb3.policies.sac.ContinuousCritic`'s keyword arguments.
    """

    def __init__(self, *args: Any, n_quantiles: int = 25, **kwargs: Any) -> None:
        if isinstance(n_quantiles, bool) or not isinstance(n_quantiles, int) or n_quantiles < 1:
            raise ValueError(f"n_quantiles must be an integer >= 1, got {n_quantiles!r}.")
        super().__init__(*args, **kwargs)
        self.n_quantiles = n_quantiles
        self.quantiles_total = n_quantiles * self.n_critics
        # the ensemble head outputs n_quantiles atoms per critic (ContinuousCritic's has one Q-value)
        in_dim = self.features_dim + get_action_dim(self.action_space)
        self.qf = nn.Sequential(
            *create_ensemble_mlp(self.n_critics, in_dim, n_quantiles, self.net_arch, self.activation_fn)
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "n_quantiles": self.n_quantiles}

    def forward(self, obs: Any, actions: th.Tensor) -> th.Tensor:  # type: ignore[override]
        """Atoms ``[batch, n_critics, n_quantiles]`` (sb3-contrib's layout)."""
        return self.forward_stacked(obs, actions).transpose(0, 1)


class TQCPolicy(SACPolicy):
    """TQC policy: SAC's actor, ``n_critics`` quantile critics and their targets.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        lr_schedule: learning-rate schedule.
        net_arch: one list for actor and critics, or ``dict(pi=[...], qf=[...])`` (default [256, 256]).
        activation_fn: activation class.
        use_sde: gSDE exploration.
        log_std_init: initial log-std (gSDE).
        use_expln: gSDE: ``expln`` instead of ``exp``.
        clip_mean: gSDE: clip the mean.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class (fused Adam by default).
        optimizer_kwargs: optimizer kwargs.
        n_quantiles: atoms per critic.
        n_critics: number of critics.
        share_features_extractor: actor and critics share one features extractor.
    """

    critic: QuantileCritic
    critic_target: QuantileCritic

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        use_sde: bool = False,
        log_std_init: float = -3,
        use_expln: bool = False,
        clip_mean: float = 2.0,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        n_quantiles: int = 25,
        n_critics: int = 2,
        share_features_extractor: bool = False,
    ) -> None:
        self.n_quantiles = n_quantiles  # read by make_critic(), which SACPolicy.__init__ calls
        super().__init__(
            observation_space, action_space, lr_schedule, net_arch, activation_fn, use_sde, log_std_init, use_expln,
            clip_mean, features_extractor_class, features_extractor_kwargs, normalize_images, optimizer_class,
            optimizer_kwargs, n_critics, share_features_extractor,
        )  # fmt: skip

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> QuantileCritic:  # type: ignore[override]
        """A new set of quantile critics (with a new features extractor unless one is given)."""
        kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        return QuantileCritic(**kwargs, n_quantiles=self.n_quantiles).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "n_quantiles": self.n_quantiles}


MlpPolicy = TQCPolicy


CnnPolicy, MultiInputPolicy = cnn_and_multi_input_variants(TQCPolicy, __name__)
