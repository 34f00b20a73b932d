"""CrossQ policy: SAC's actor and critics with Batch Renormalization layers, and no target critics.

The critics are one ensemble MLP (``[n_critics, batch, ...]``) with a :class:`BatchRenorm` per member before each
linear layer, so that CrossQ's joint forward of (s, a) and (s', a') is one batched call whose statistics are
those of the concatenated batch, per critic, as in sb3-contrib.
"""

from __future__ import annotations

from collections.abc import Callable
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


class CrossQActor(Actor):
    """SAC's actor with a :class:`BatchRenorm` before each linear layer of its MLP and after the last one.

    Args:
        *args: :class:`~lit_sb3.policies.sac.Actor`'s arguments.
        norm: ``norm(num_features)`` makes a normalisation layer (``partial(BatchRenorm, momentum=...)``); None:
            none (SAC's actor).
        **kwargs: :class:`~lit_sb3.policies.sac.Actor`'s keyword arguments.
    """

    def __init__(self, *args: Any, norm: Callable[..., BatchRenorm] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if norm is not None:  # latent_pi again, with the normalisation layers
            layers = create_mlp(self.features_dim, -1, self.net_arch, self.activation_fn, pre_linear_modules=[norm])  # type: ignore[list-item]
            if self.net_arch:
                layers.append(norm(self.net_arch[-1]))
            self.latent_pi = nn.Sequential(*layers)


class CrossQCritic(ContinuousCritic):
    """``n_critics`` Q-networks with Batch Renormalization, one ensemble MLP evaluated in one call.

    Layers per critic (as sb3-contrib's): ``[BatchRenorm, Linear, activation] * len(net_arch)``, then
    ``BatchRenorm, Linear(1)``.

    Args:
        *args: :class:`~lit_sb3.policies.sac.ContinuousCritic`'s arguments.
        norm: ``norm(num_features, n_members=n_critics)`` makes a normalisation layer; None: none.
        **kwargs: :class:`~lit_sb3.policies.sac.ContinuousCritic`'s keyword arguments.
    """

    def __init__(self, *args: Any, norm: Callable[..., BatchRenorm] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n_critics = self.n_critics
        layers: list[nn.Module] = []
        dims = [self.features_dim + get_action_dim(self.action_space), *self.net_arch]
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            if norm is not None:
                layers.append(norm(d_in, n_members=n_critics))
            layers += [EnsembleLinear(n_critics, d_in, d_out), self.activation_fn()]
        if norm is not None:
            layers.append(norm(dims[-1], n_members=n_critics))
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

    def _build_critic_target(self) -> None:
        """No target critics: CrossQ bootstraps from the current critics (SACPolicy's ``_build`` calls this)."""

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> CrossQActor:
        """A new actor (with a new features extractor unless one is given)."""
        kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
        return CrossQActor(**kwargs, norm=self._norm()).to(self.device)

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> CrossQCritic:  # type: ignore[override]
        """New critics (with a new features extractor unless one is given)."""
        kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        return CrossQCritic(**kwargs, norm=self._norm()).to(self.device)

    def _norm(self) -> Callable[..., BatchRenorm] | None:
        """The BatchRenorm factory of actor and critics (None without ``batch_norm``)."""
        params = self.batch_norm_params
        if not params["batch_norm"]:
            return None
        return partial(BatchRenorm, momentum=params["batch_norm_momentum"], eps=params["batch_norm_eps"],
                       warmup_steps=params["renorm_warmup_steps"])  # fmt: skip

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), **self.batch_norm_params}


MlpPolicy = CrossQPolicy
