"""CrossQ policy: SAC's actor and critics with Batch Renormalization layers, and no target critics.

The critics are one ensemble MLP (``[n_critics, batch, ...]``) with a :class:`BatchRenorm` per member before each
linear layer, so that CrossQ's joint forward of (s, a) and (s', a') is one batched call whose statistics are
those of the concatenated batch, per critic, as in sb3-contrib.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.preprocessing import get_action_dim
from lit_sb3.core.types import Schedule
from lit_sb3.policies.batch_renorm import BatchRenorm
from lit_sb3.policies.sac import Actor, ContinuousCritic, SACPolicy
from lit_sb3.policies.torch_layers import BaseFeaturesExtractor, EnsembleLinear, FlattenExtractor, create_mlp

__all__ = ["CrossQActor", "CrossQCritic", "CrossQPolicy", "MlpPolicy"]


def _bn_kwargs(momentum: float, eps: float, warmup_steps: int) -> dict[str, Any]:
    return dict(momentum=momentum, eps=eps, warmup_steps=warmup_steps)


class CrossQActor(Actor):
    """SAC's actor with a :class:`BatchRenorm` before each linear layer of its MLP and after the last one.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        net_arch: hidden sizes.
        features_extractor: the features extractor.
        features_dim: its output size.
        activation_fn: activation class.
        use_sde: gSDE exploration.
        log_std_init: initial log-std (gSDE).
        full_std: gSDE: one std per (feature, action).
        use_expln: gSDE: ``expln`` instead of ``exp``.
        clip_mean: gSDE: clip the mean.
        normalize_images: divide uint8 images by 255.
        batch_norm: use Batch Renormalization.
        batch_norm_momentum: its running-statistics momentum.
        batch_norm_eps: its epsilon.
        renorm_warmup_steps: its BatchNorm warm-up (training-mode passes).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        net_arch: list[int],
        features_extractor: nn.Module,
        features_dim: int,
        activation_fn: type[nn.Module] = nn.ReLU,
        use_sde: bool = False,
        log_std_init: float = -3,
        full_std: bool = True,
        use_expln: bool = False,
        clip_mean: float = 2.0,
        normalize_images: bool = True,
        batch_norm: bool = True,
        batch_norm_momentum: float = 0.01,
        batch_norm_eps: float = 0.001,
        renorm_warmup_steps: int = 100_000,
    ) -> None:
        super().__init__(
            observation_space, action_space, net_arch, features_extractor, features_dim, activation_fn, use_sde,
            log_std_init, full_std, use_expln, clip_mean, normalize_images,
        )  # fmt: skip
        if batch_norm:
            norm = partial(BatchRenorm, **_bn_kwargs(batch_norm_momentum, batch_norm_eps, renorm_warmup_steps))
            layers = create_mlp(features_dim, -1, self.net_arch, activation_fn, pre_linear_modules=[norm])  # type: ignore[list-item]
            if self.net_arch:
                layers.append(norm(self.net_arch[-1]))
            self.latent_pi = nn.Sequential(*layers)


class CrossQCritic(ContinuousCritic):
    """``n_critics`` Q-networks with Batch Renormalization, one ensemble MLP evaluated in one call.

    Layers per critic (as sb3-contrib's): ``[BatchRenorm, Linear, activation] * len(net_arch)``, then
    ``BatchRenorm, Linear(1)``.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        net_arch: hidden sizes of each critic.
        features_extractor: the features extractor.
        features_dim: its output size.
        activation_fn: activation class.
        normalize_images: divide uint8 images by 255.
        n_critics: number of critics.
        share_features_extractor: the extractor is the actor's.
        batch_norm: use Batch Renormalization.
        batch_norm_momentum: its running-statistics momentum.
        batch_norm_eps: its epsilon.
        renorm_warmup_steps: its BatchNorm warm-up (training-mode passes).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        net_arch: list[int],
        features_extractor: BaseFeaturesExtractor,
        features_dim: int,
        activation_fn: type[nn.Module] = nn.ReLU,
        normalize_images: bool = True,
        n_critics: int = 2,
        share_features_extractor: bool = True,
        batch_norm: bool = True,
        batch_norm_momentum: float = 0.01,
        batch_norm_eps: float = 0.001,
        renorm_warmup_steps: int = 100_000,
    ) -> None:
        super().__init__(
            observation_space, action_space, net_arch, features_extractor, features_dim, activation_fn,
            normalize_images, n_critics, share_features_extractor,
        )  # fmt: skip
        bn = _bn_kwargs(batch_norm_momentum, batch_norm_eps, renorm_warmup_steps)
        layers: list[nn.Module] = []
        dims = [features_dim + get_action_dim(action_space), *self.net_arch]
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            if batch_norm:
                layers.append(BatchRenorm(d_in, n_members=n_critics, **bn))
            layers += [EnsembleLinear(n_critics, d_in, d_out), activation_fn()]
        if batch_norm:
            layers.append(BatchRenorm(dims[-1], n_members=n_critics, **bn))
        layers.append(EnsembleLinear(n_critics, dims[-1], 1))
        self.qf = nn.Sequential(*layers)


class CrossQPolicy(SACPolicy):
    """CrossQ policy: actor and critics with Batch Renormalization, no target critics.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        lr_schedule: learning-rate schedule.
        net_arch: one list for actor and critics, or ``dict(pi=[...], qf=[...])``
            (default ``dict(pi=[256, 256], qf=[1024, 1024])``).
        activation_fn: activation class.
        batch_norm: use Batch Renormalization.
        batch_norm_momentum: its running-statistics momentum.
        batch_norm_eps: its epsilon.
        renorm_warmup_steps: its BatchNorm warm-up (training-mode passes).
        use_sde: gSDE exploration.
        log_std_init: initial log-std (gSDE).
        use_expln: gSDE: ``expln`` instead of ``exp``.
        clip_mean: gSDE: clip the mean.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class (fused Adam by default).
        optimizer_kwargs: optimizer kwargs (default for Adam/AdamW: ``betas=(0.5, 0.999)``).
        n_critics: number of Q-networks.
        share_features_extractor: actor and critics share one features extractor.
    """

    actor: CrossQActor
    critic: CrossQCritic

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        batch_norm: bool = True,
        batch_norm_momentum: float = 0.01,
        batch_norm_eps: float = 0.001,
        renorm_warmup_steps: int = 100_000,
        use_sde: bool = False,
        log_std_init: float = -3,
        use_expln: bool = False,
        clip_mean: float = 2.0,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        n_critics: int = 2,
        share_features_extractor: bool = False,
    ) -> None:
        if optimizer_kwargs is None and optimizer_class in (th.optim.Adam, th.optim.AdamW):
            optimizer_kwargs = {"betas": (0.5, 0.999)}  # the CrossQ paper's beta1
        if net_arch is None:
            net_arch = {"pi": [256, 256], "qf": [1024, 1024]}
        # read by make_actor()/make_critic(), which SACPolicy.__init__ calls
        self.batch_norm_params = dict(
            batch_norm=batch_norm,
            batch_norm_momentum=batch_norm_momentum,
            batch_norm_eps=batch_norm_eps,
            renorm_warmup_steps=renorm_warmup_steps,
        )
        super().__init__(
            observation_space, action_space, lr_schedule, net_arch, activation_fn, use_sde, log_std_init, use_expln,
            clip_mean, features_extractor_class, features_extractor_kwargs, normalize_images, optimizer_class,
            optimizer_kwargs, n_critics, share_features_extractor,
        )  # fmt: skip

    def _build(self, lr_schedule: Schedule) -> None:
        """Create actor and critics with their optimizers (no target critics)."""
        self.actor = self.make_actor()
        self.actor.optimizer = self.make_optimizer(self.actor.parameters(), lr_schedule(1))
        if self.share_features_extractor:
            self.critic = self.make_critic(features_extractor=self.actor.features_extractor)
            critic_parameters = [p for name, p in self.critic.named_parameters() if "features_extractor" not in name]
        else:
            self.critic = self.make_critic(features_extractor=None)
            critic_parameters = list(self.critic.parameters())
        self.critic.optimizer = self.make_optimizer(critic_parameters, lr_schedule(1))

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> CrossQActor:
        """A new actor (with a new features extractor unless one is given)."""
        kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
        return CrossQActor(**kwargs, **self.batch_norm_params).to(self.device)

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> CrossQCritic:  # type: ignore[override]
        """New critics (with a new features extractor unless one is given)."""
        kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        return CrossQCritic(**kwargs, **self.batch_norm_params).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), **self.batch_norm_params}


MlpPolicy = CrossQPolicy
