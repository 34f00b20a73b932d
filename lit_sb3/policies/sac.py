"""SAC policy: squashed-Gaussian actor and an ensemble of Q-critics evaluated in one batched call.

:class:`ContinuousCritic` is shared with TD3 and DDPG.
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.preprocessing import get_action_dim
from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.policies.base import BaseModel, BasePolicy, encode_constructor_parameters
from lit_sb3.policies.distributions import SquashedDiagGaussianDistribution, StateDependentNoiseDistribution
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    create_ensemble_mlp,
    create_mlp,
    ensemble_first_member_forward,
    ensemble_member_forward,
    get_actor_critic_arch,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = [
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "Actor",
    "CnnPolicy",
    "ContinuousCritic",
    "MlpPolicy",
    "MultiInputPolicy",
    "SACPolicy",
]

LOG_STD_MAX = 2
LOG_STD_MIN = -20


def _require_box(action_space: spaces.Space, who: str) -> None:
    if not isinstance(action_space, spaces.Box):
        raise ValueError(f"{who} needs a continuous (gymnasium.spaces.Box) action space, got {action_space}.")


class ContinuousCritic(BaseModel):
    """``n_critics`` Q-networks Q(s, a), stored as one ensemble MLP and evaluated together.

    When the features extractor is shared with the actor, it receives no gradient from the critic loss.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        net_arch: hidden sizes of each Q-network.
        features_extractor: the features extractor.
        features_dim: its output size.
        activation_fn: activation class.
        normalize_images: divide uint8 images by 255.
        n_critics: number of Q-networks.
        share_features_extractor: the extractor is the actor's (then it is trained by the actor loss only).
    """

    features_extractor: BaseFeaturesExtractor

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
    ) -> None:
        super().__init__(
            observation_space, action_space, features_extractor=features_extractor, normalize_images=normalize_images
        )
        _require_box(action_space, "ContinuousCritic")
        if n_critics < 1:
            raise ValueError(f"n_critics must be >= 1, got {n_critics}.")
        self.net_arch = list(net_arch)
        self.features_dim = features_dim
        self.activation_fn = activation_fn
        self.share_features_extractor = share_features_extractor
        self.n_critics = n_critics
        action_dim = get_action_dim(action_space)
        self.qf = nn.Sequential(
            *create_ensemble_mlp(n_critics, features_dim + action_dim, 1, self.net_arch, activation_fn)
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                features_dim=self.features_dim,
                activation_fn=self.activation_fn,
                n_critics=self.n_critics,
                share_features_extractor=self.share_features_extractor,
            )
        )

    def _q_input(self, obs: PyTorchObs, actions: th.Tensor) -> th.Tensor:
        if self.share_features_extractor:
            # the shared extractor is trained by the actor loss only
            with th.no_grad():
                features = self.extract_features(obs, self.features_extractor)
        else:
            features = self.extract_features(obs, self.features_extractor)
        return th.cat([features, actions], dim=-1)

    def forward_stacked(self, obs: PyTorchObs, actions: th.Tensor) -> th.Tensor:
        """All Q-values at once: ``[n_critics, batch, 1]``, or ``[K, n_critics, batch, 1]`` for seed-stacked
        inputs ``[K, batch, ...]`` (a K-seed critic holds ``K * n_critics`` members, seed-major).

        Args:
            obs: batch of observations.
            actions: batch of actions ``[batch, action_dim]`` (or ``[K, batch, action_dim]``).
        """
        x = self._q_input(obs, actions)
        if x.dim() == 2:
            return self.qf(x)
        k, n = x.shape[0], self.n_critics
        if k == 1:  # one seed: the single-seed kernels
            return self.qf(x[0]).unsqueeze(0)
        x = x.unsqueeze(1).expand(k, n, *x.shape[1:]).reshape(k * n, *x.shape[1:])
        q = self.qf(x)
        return q.view(k, n, *q.shape[1:])

    def forward(self, obs: PyTorchObs, actions: th.Tensor) -> tuple[th.Tensor, ...]:
        """One ``[batch, 1]`` tensor per critic (SB3's interface).

        Args:
            obs: batch of observations.
            actions: batch of actions.
        """
        return tuple(self.forward_stacked(obs, actions).unbind(0))

    def q1_forward(self, obs: PyTorchObs, actions: th.Tensor) -> th.Tensor:
        """Q-values of the first critic only, ``[batch, 1]`` (no gradient into the features extractor).

        Args:
            obs: batch of observations.
            actions: batch of actions.
        """
        with th.no_grad():
            features = self.extract_features(obs, self.features_extractor)
        x = th.cat([features, actions], dim=-1)
        if x.dim() == 2:
            return ensemble_member_forward(self.qf, x, 0)
        if x.shape[0] == 1:  # one seed: the single-seed kernels
            return ensemble_member_forward(self.qf, x[0], 0).unsqueeze(0)
        return ensemble_first_member_forward(self.qf, x, self.n_critics)


class Actor(BasePolicy):
    """SAC actor: tanh-squashed Gaussian (or gSDE) policy.

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
        clip_mean: gSDE: clip the mean to [-clip_mean, clip_mean] (0 disables).
        normalize_images: divide uint8 images by 255.
    """

    action_space: spaces.Box

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
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            features_extractor=features_extractor,
            normalize_images=normalize_images,
            squash_output=True,
        )
        _require_box(action_space, "SAC's Actor")
        self.use_sde = use_sde
        self.sde_features_extractor = None
        self.net_arch = list(net_arch)
        self.features_dim = features_dim
        self.activation_fn = activation_fn
        self.log_std_init = log_std_init
        self.use_expln = use_expln
        self.full_std = full_std
        self.clip_mean = clip_mean
        action_dim = get_action_dim(action_space)
        self.latent_pi = nn.Sequential(*create_mlp(features_dim, -1, self.net_arch, activation_fn))
        last_layer_dim = self.net_arch[-1] if self.net_arch else features_dim
        self.action_dist: SquashedDiagGaussianDistribution | StateDependentNoiseDistribution
        if use_sde:
            self.action_dist = StateDependentNoiseDistribution(
                action_dim, full_std=full_std, use_expln=use_expln, learn_features=True, squash_output=True
            )
            self.mu, self.log_std = self.action_dist.proba_distribution_net(
                latent_dim=last_layer_dim, latent_sde_dim=last_layer_dim, log_std_init=log_std_init
            )
            if clip_mean > 0.0:
                self.mu = nn.Sequential(self.mu, nn.Hardtanh(min_val=-clip_mean, max_val=clip_mean))
        else:
            self.action_dist = SquashedDiagGaussianDistribution(action_dim)
            self.mu = nn.Linear(last_layer_dim, action_dim)
            self.log_std = nn.Linear(last_layer_dim, action_dim)  # type: ignore[assignment]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                features_dim=self.features_dim,
                activation_fn=self.activation_fn,
                use_sde=self.use_sde,
                log_std_init=self.log_std_init,
                full_std=self.full_std,
                use_expln=self.use_expln,
                clip_mean=self.clip_mean,
            )
        )

    def get_std(self) -> th.Tensor:
        """Std of the gSDE exploration weights."""
        if not isinstance(self.action_dist, StateDependentNoiseDistribution):
            raise RuntimeError("get_std() is only available when using gSDE (use_sde=True).")
        return self.action_dist.get_std(self.log_std)  # type: ignore[arg-type]

    def reset_noise(self, batch_size: int = 1) -> None:
        """Sample new gSDE exploration matrices.

        Args:
            batch_size: number of parallel environments.
        """
        if not isinstance(self.action_dist, StateDependentNoiseDistribution):
            raise RuntimeError("reset_noise() is only available when using gSDE (use_sde=True).")
        self.action_dist.sample_weights(self.log_std, batch_size=batch_size)  # type: ignore[arg-type]

    def get_action_dist_params(self, obs: PyTorchObs) -> tuple[th.Tensor, th.Tensor, dict[str, th.Tensor]]:
        """Mean, log-std (clamped to [-20, 2]) and extra kwargs (``latent_sde`` for gSDE).

        Args:
            obs: batch of observations.
        """
        latent_pi = self.latent_pi(self.extract_features(obs, self.features_extractor))
        mean_actions = self.mu(latent_pi)
        if self.use_sde:
            return mean_actions, self.log_std, dict(latent_sde=latent_pi)  # type: ignore[return-value]
        log_std = th.clamp(self.log_std(latent_pi), LOG_STD_MIN, LOG_STD_MAX)  # type: ignore[operator]
        return mean_actions, log_std, {}

    def forward(self, obs: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        mean_actions, log_std, kwargs = self.get_action_dist_params(obs)
        return self.action_dist.actions_from_params(mean_actions, log_std, deterministic=deterministic, **kwargs)

    def action_log_prob(self, obs: PyTorchObs) -> tuple[th.Tensor, th.Tensor]:
        """Sampled (reparametrised) actions in [-1, 1] and their log-probabilities ``[batch]``.

        Args:
            obs: batch of observations.
        """
        mean_actions, log_std, kwargs = self.get_action_dist_params(obs)
        return self.action_dist.log_prob_from_params(mean_actions, log_std, **kwargs)

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self(observation, deterministic)


class SACPolicy(BasePolicy):
    """SAC policy: actor, critic (``n_critics`` Q-networks) and critic target, each with its optimizer.

    Args:
        observation_space: the observation space.
        action_space: the (Box) action space.
        lr_schedule: learning-rate schedule.
        net_arch: one list for actor and critic, or ``dict(pi=[...], qf=[...])`` (default [256, 256]).
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
        n_critics: number of Q-networks.
        share_features_extractor: actor and critic share one features extractor.
    """

    actor: Actor
    critic: ContinuousCritic
    critic_target: ContinuousCritic

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
        _require_box(action_space, "SACPolicy")
        if net_arch is None:
            net_arch = [256, 256]
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
        self.actor_kwargs.update(use_sde=use_sde, log_std_init=log_std_init, use_expln=use_expln, clip_mean=clip_mean)
        self.critic_kwargs = self.net_args.copy()
        self.critic_kwargs.update(
            n_critics=n_critics, net_arch=critic_arch, share_features_extractor=share_features_extractor
        )
        self.share_features_extractor = share_features_extractor
        self._build(lr_schedule)

    def _build(self, lr_schedule: Schedule) -> None:
        """Create actor, critic, critic target and the two optimizers."""
        self.actor = self.make_actor()
        self.actor.optimizer = self.make_optimizer(self.actor.parameters(), lr_schedule(1))
        if self.share_features_extractor:
            self.critic = self.make_critic(features_extractor=self.actor.features_extractor)
            # the shared extractor is optimised by the actor only
            critic_parameters = [p for name, p in self.critic.named_parameters() if "features_extractor" not in name]
        else:
            self.critic = self.make_critic(features_extractor=None)
            critic_parameters = list(self.critic.parameters())
        self._build_critic_target()
        self.critic.optimizer = self.make_optimizer(critic_parameters, lr_schedule(1))

    def _build_critic_target(self) -> None:
        """The critic target: a frozen copy of the critic, in evaluation mode (a subclass may have none)."""
        self.critic_target = self.make_critic(features_extractor=None)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_target.requires_grad_(False)
        self.critic_target.set_training_mode(False)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return encode_constructor_parameters(
            dict(
                normalize_images=self.normalize_images,
                net_arch=self.net_arch,
                activation_fn=self.activation_fn,
                use_sde=self.actor_kwargs["use_sde"],
                log_std_init=self.actor_kwargs["log_std_init"],
                use_expln=self.actor_kwargs["use_expln"],
                clip_mean=self.actor_kwargs["clip_mean"],
                n_critics=self.critic_kwargs["n_critics"],
                optimizer_class=self.optimizer_class,
                optimizer_kwargs=self.optimizer_kwargs,
                features_extractor_class=self.features_extractor_class,
                features_extractor_kwargs=self.features_extractor_kwargs,
                share_features_extractor=self.share_features_extractor,
            )
        )

    def reset_noise(self, batch_size: int = 1) -> None:
        """Sample new gSDE exploration matrices.

        Args:
            batch_size: number of parallel environments.
        """
        self.actor.reset_noise(batch_size=batch_size)

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> Actor:
        """A new actor (with a new features extractor unless one is given)."""
        return Actor(**self._update_features_extractor(self.actor_kwargs, features_extractor)).to(self.device)

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> ContinuousCritic:
        """A new critic (with a new features extractor unless one is given)."""
        return ContinuousCritic(**self._update_features_extractor(self.critic_kwargs, features_extractor)).to(
            self.device
        )

    def forward(self, obs: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self._predict(obs, deterministic=deterministic)

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self.actor(observation, deterministic)

    def set_training_mode(self, mode: bool) -> None:
        """Training/evaluation mode of actor and critic (the target stays in evaluation mode).

        Args:
            mode: the mode.
        """
        self.actor.set_training_mode(mode)
        self.critic.set_training_mode(mode)
        self.training = mode


MlpPolicy = SACPolicy


CnnPolicy, MultiInputPolicy = cnn_and_multi_input_variants(SACPolicy, __name__)
