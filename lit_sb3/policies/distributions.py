"""Probability distributions over actions (SB3's API, with the math written out for speed).

The hot paths (``log_prob``, ``entropy``, ``sample``) compute with plain tensor operations instead of building
``torch.distributions`` objects, which validate their arguments at every construction. The ``distribution``
attribute of each class still returns the equivalent ``torch.distributions`` object for code that wants it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, TypeVar

import torch as th
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from lit_sb3.core.preprocessing import get_action_dim
from lit_sb3.policies.seed_stack import seed_randn_like

__all__ = [
    "BernoulliDistribution",
    "CategoricalDistribution",
    "DiagGaussianDistribution",
    "Distribution",
    "MultiCategoricalDistribution",
    "SquashedDiagGaussianDistribution",
    "StateDependentNoiseDistribution",
    "TanhBijector",
    "kl_divergence",
    "make_proba_distribution",
    "sum_independent_dims",
]

SelfDistribution = TypeVar("SelfDistribution", bound="Distribution")
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def sum_independent_dims(tensor: th.Tensor) -> th.Tensor:
    """Sum over the action dimension (the last): ``[..., batch, n] -> [..., batch]``, ``[n] -> []``.

    Args:
        tensor: per-dimension values (log-probabilities or entropies).
    """
    if tensor.dim() > 1:
        return tensor.sum(dim=-1)
    return tensor.sum()


def _categorical_draw(probs: th.Tensor, generators: list[th.Generator] | None) -> th.Tensor:
    """One draw per row of ``probs`` (``[..., n]`` -> ``[...]``); K seeds: slice i from ``generators[i]``, so seed
    i draws what its separate run draws from torch's global generator (None: the global generator)."""
    n = probs.shape[-1]
    if generators is None:
        return th.multinomial(probs.reshape(-1, n), 1, True).reshape(probs.shape[:-1])
    return th.stack(
        [
            th.multinomial(p.reshape(-1, n), 1, True, generator=g).reshape(p.shape[:-1])
            for p, g in zip(probs, generators)
        ]
    )


def _normal_log_prob(x: th.Tensor, mean: th.Tensor, std: th.Tensor, log_std: th.Tensor) -> th.Tensor:
    """Element-wise log density of N(mean, std**2) at x."""
    z = (x - mean) / std
    return -0.5 * z * z - log_std - _HALF_LOG_2PI


class Distribution(ABC):
    """Base class of the action distributions (SB3's interface)."""

    def __init__(self) -> None:
        super().__init__()

    @abstractmethod
    def proba_distribution_net(self, *args: Any, **kwargs: Any) -> nn.Module | tuple[nn.Module, nn.Parameter]:
        """Create the layers (and parameters) that produce this distribution's parameters."""

    @abstractmethod
    def proba_distribution(self: SelfDistribution, *args: Any, **kwargs: Any) -> SelfDistribution:
        """Set the parameters of the distribution; returns ``self``."""

    @abstractmethod
    def log_prob(self, x: th.Tensor) -> th.Tensor:
        """Log-likelihood of ``x``, summed over action dimensions (shape ``[batch]``)."""

    @abstractmethod
    def entropy(self) -> th.Tensor | None:
        """Entropy (shape ``[batch]``), or ``None`` when there is no analytical form."""

    @abstractmethod
    def sample(self) -> th.Tensor:
        """A sample (reparametrised where the distribution allows it)."""

    @abstractmethod
    def mode(self) -> th.Tensor:
        """The most likely action."""

    def get_actions(self, deterministic: bool = False) -> th.Tensor:
        """``mode()`` when deterministic, else ``sample()``.

        Args:
            deterministic: whether to return the mode.
        """
        if deterministic:
            return self.mode()
        return self.sample()

    @abstractmethod
    def actions_from_params(self, *args: Any, **kwargs: Any) -> th.Tensor:
        """Set the parameters and return actions."""

    @abstractmethod
    def log_prob_from_params(self, *args: Any, **kwargs: Any) -> tuple[th.Tensor, th.Tensor]:
        """Set the parameters and return sampled actions and their log-probability."""


class DiagGaussianDistribution(Distribution):
    """Gaussian with diagonal covariance; the std is a state-independent parameter.

    Args:
        action_dim: dimension of the action space.
    """

    def __init__(self, action_dim: int) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.mean_actions: th.Tensor | None = None
        self.log_std: th.Tensor | None = None
        self.std: th.Tensor | None = None
        # K seeds' own random streams (one generator per seed, seed-major [K, ...] means); None: torch's global one
        self.seed_generators: list[th.Generator] | None = None

    def proba_distribution_net(self, latent_dim: int, log_std_init: float = 0.0) -> tuple[nn.Module, nn.Parameter]:
        """Linear layer for the mean and a log-std parameter vector.

        Args:
            latent_dim: size of the policy latent.
            log_std_init: initial value of the log standard deviation.
        """
        mean_actions = nn.Linear(latent_dim, self.action_dim)
        log_std = nn.Parameter(th.ones(self.action_dim) * log_std_init, requires_grad=True)
        return mean_actions, log_std

    def proba_distribution(self: SelfDistribution, mean_actions: th.Tensor, log_std: th.Tensor) -> SelfDistribution:
        """Set mean and log-std (broadcast against the mean).

        Args:
            mean_actions: ``[batch, action_dim]`` (K seeds: ``[K, batch, action_dim]``).
            log_std: ``[action_dim]`` or ``[batch, action_dim]`` (K seeds: ``[K, action_dim]``, one per seed).
        """
        if log_std.dim() >= 2 and log_std.dim() == mean_actions.dim() - 1:  # a seed's log-std for its whole batch
            log_std = log_std.unsqueeze(-2)
        self.mean_actions = mean_actions
        self.log_std = log_std
        self.std = log_std.exp()
        return self

    @property
    def distribution(self) -> th.distributions.Normal:
        """The equivalent ``torch.distributions.Normal`` (built on demand)."""
        assert self.mean_actions is not None and self.std is not None, "Call proba_distribution() first."
        return th.distributions.Normal(self.mean_actions, self.std.expand_as(self.mean_actions), validate_args=False)

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        assert self.mean_actions is not None and self.std is not None and self.log_std is not None
        return sum_independent_dims(_normal_log_prob(actions, self.mean_actions, self.std, self.log_std))

    def entropy(self) -> th.Tensor | None:
        assert self.mean_actions is not None and self.log_std is not None
        ent = (0.5 + _HALF_LOG_2PI + self.log_std).expand_as(self.mean_actions)
        return sum_independent_dims(ent)

    def sample(self) -> th.Tensor:
        assert self.mean_actions is not None and self.std is not None
        return self.mean_actions + self.std * seed_randn_like(self.mean_actions, self.seed_generators)

    def mode(self) -> th.Tensor:
        assert self.mean_actions is not None
        return self.mean_actions

    def actions_from_params(
        self, mean_actions: th.Tensor, log_std: th.Tensor, deterministic: bool = False
    ) -> th.Tensor:
        self.proba_distribution(mean_actions, log_std)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, mean_actions: th.Tensor, log_std: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(mean_actions, log_std)
        return actions, self.log_prob(actions)


class SquashedDiagGaussianDistribution(DiagGaussianDistribution):
    """Diagonal Gaussian followed by ``tanh`` (SAC), with the change-of-variables correction.

    Args:
        action_dim: dimension of the action space.
        epsilon: added inside ``log(1 - tanh(u)**2 + epsilon)`` to avoid ``log(0)``.
    """

    def __init__(self, action_dim: int, epsilon: float = 1e-6) -> None:
        super().__init__(action_dim)
        self.epsilon = epsilon
        self.gaussian_actions: th.Tensor | None = None

    def log_prob(self, actions: th.Tensor, gaussian_actions: th.Tensor | None = None) -> th.Tensor:
        """Log-likelihood of squashed actions.

        Args:
            actions: actions in [-1, 1].
            gaussian_actions: the pre-tanh values if known (more precise than inverting tanh).
        """
        if gaussian_actions is None:
            gaussian_actions = TanhBijector.inverse(actions)
        log_prob = super().log_prob(gaussian_actions)
        return log_prob - th.sum(th.log(1.0 - actions.pow(2) + self.epsilon), dim=-1)

    def entropy(self) -> th.Tensor | None:
        return None  # no analytical form: estimate it with -log_prob.mean()

    def sample(self) -> th.Tensor:
        self.gaussian_actions = super().sample()
        return th.tanh(self.gaussian_actions)

    def mode(self) -> th.Tensor:
        self.gaussian_actions = super().mode()
        return th.tanh(self.gaussian_actions)

    def log_prob_from_params(self, mean_actions: th.Tensor, log_std: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(mean_actions, log_std)
        return actions, self.log_prob(actions, self.gaussian_actions)


class CategoricalDistribution(Distribution):
    """Categorical distribution over ``action_dim`` discrete actions.

    Args:
        action_dim: number of actions.
    """

    def __init__(self, action_dim: int) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.logits: th.Tensor | None = None  # normalised: log-probabilities
        # K seeds' own random streams (one generator per seed, seed-major [K, ...] logits); None: torch's global one
        self.seed_generators: list[th.Generator] | None = None

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        """Linear layer producing the logits.

        Args:
            latent_dim: size of the policy latent.
        """
        return nn.Linear(latent_dim, self.action_dim)

    def proba_distribution(self: SelfDistribution, action_logits: th.Tensor) -> SelfDistribution:
        """Set the (unnormalised) logits ``[batch, action_dim]``."""
        self.logits = action_logits - action_logits.logsumexp(dim=-1, keepdim=True)
        return self

    @property
    def distribution(self) -> th.distributions.Categorical:
        """The equivalent ``torch.distributions.Categorical``."""
        assert self.logits is not None, "Call proba_distribution() first."
        return th.distributions.Categorical(logits=self.logits, validate_args=False)

    @property
    def probs(self) -> th.Tensor:
        """Action probabilities."""
        assert self.logits is not None
        return self.logits.exp()

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        assert self.logits is not None
        index = actions.long().reshape(*self.logits.shape[:-1], 1)
        return self.logits.gather(-1, index).squeeze(-1)

    def entropy(self) -> th.Tensor:
        assert self.logits is not None
        logits = self.logits.clamp(min=th.finfo(self.logits.dtype).min)
        return -(logits.exp() * logits).sum(-1)

    def sample(self) -> th.Tensor:
        return _categorical_draw(self.probs, self.seed_generators)

    def mode(self) -> th.Tensor:
        assert self.logits is not None
        return th.argmax(self.logits, dim=-1)

    def actions_from_params(self, action_logits: th.Tensor, deterministic: bool = False) -> th.Tensor:
        self.proba_distribution(action_logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, action_logits: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(action_logits)
        return actions, self.log_prob(actions)


class MultiCategoricalDistribution(Distribution):
    """Independent categorical distributions, one per MultiDiscrete dimension.

    Args:
        action_dims: number of choices of each dimension.
    """

    def __init__(self, action_dims: list[int]) -> None:
        super().__init__()
        self.action_dims = [int(n) for n in action_dims]
        # all dimensions equal: one reshaped tensor instead of a Python loop
        self._uniform = len(set(self.action_dims)) == 1
        self.logits: th.Tensor | None = None  # uniform case: [batch, k, n] normalised
        self._split_logits: list[th.Tensor] = []
        # K seeds' own random streams (see CategoricalDistribution)
        self.seed_generators: list[th.Generator] | None = None

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        """Linear layer producing the concatenated logits (``sum(action_dims)``)."""
        return nn.Linear(latent_dim, sum(self.action_dims))

    def proba_distribution(self: SelfDistribution, action_logits: th.Tensor) -> SelfDistribution:
        """Set the concatenated logits ``[batch, sum(action_dims)]``."""
        if self._uniform:
            logits = action_logits.reshape(*action_logits.shape[:-1], len(self.action_dims), self.action_dims[0])
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        else:
            self._split_logits = [
                s - s.logsumexp(dim=-1, keepdim=True) for s in th.split(action_logits, self.action_dims, dim=-1)
            ]
        return self

    @property
    def distribution(self) -> list[th.distributions.Categorical]:
        """One ``torch.distributions.Categorical`` per dimension."""
        if self._uniform:
            assert self.logits is not None, "Call proba_distribution() first."
            return [
                th.distributions.Categorical(logits=self.logits[..., i, :], validate_args=False)
                for i in range(len(self.action_dims))
            ]
        return [th.distributions.Categorical(logits=s, validate_args=False) for s in self._split_logits]

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        actions = actions.long()
        if self._uniform:
            assert self.logits is not None
            return self.logits.gather(-1, actions.reshape(*self.logits.shape[:-1], 1)).squeeze(-1).sum(dim=-1)
        actions = actions.reshape(*self._split_logits[0].shape[:-1], len(self.action_dims))
        return th.stack(
            [s.gather(-1, actions[..., i : i + 1]).squeeze(-1) for i, s in enumerate(self._split_logits)], dim=-1
        ).sum(dim=-1)

    def entropy(self) -> th.Tensor:
        if self._uniform:
            assert self.logits is not None
            return -(self.logits.exp() * self.logits).sum(-1).sum(-1)
        return th.stack([-(s.exp() * s).sum(-1) for s in self._split_logits], dim=-1).sum(dim=-1)

    def sample(self) -> th.Tensor:
        generators = self.seed_generators
        if self._uniform:
            assert self.logits is not None
            return _categorical_draw(self.logits.exp(), generators)
        if generators is None:
            return th.cat([th.multinomial(s.exp(), 1, True) for s in self._split_logits], dim=1)
        # K seeds: seed i's draws in its separate run's order (one dimension after the other) from its own stream
        return th.stack(
            [
                th.cat([th.multinomial(s[i].exp(), 1, True, generator=g) for s in self._split_logits], dim=-1)
                for i, g in enumerate(generators)
            ]
        )

    def mode(self) -> th.Tensor:
        if self._uniform:
            assert self.logits is not None
            return th.argmax(self.logits, dim=-1)
        return th.stack([th.argmax(s, dim=-1) for s in self._split_logits], dim=-1)

    def actions_from_params(self, action_logits: th.Tensor, deterministic: bool = False) -> th.Tensor:
        self.proba_distribution(action_logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, action_logits: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(action_logits)
        return actions, self.log_prob(actions)


class BernoulliDistribution(Distribution):
    """Independent Bernoulli variables (MultiBinary actions).

    Args:
        action_dims: number of binary actions.
    """

    def __init__(self, action_dims: int) -> None:
        super().__init__()
        self.action_dims = action_dims
        self.logits: th.Tensor | None = None
        # K seeds' own random streams (see CategoricalDistribution)
        self.seed_generators: list[th.Generator] | None = None

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        """Linear layer producing one logit per binary action."""
        return nn.Linear(latent_dim, self.action_dims)

    def proba_distribution(self: SelfDistribution, action_logits: th.Tensor) -> SelfDistribution:
        """Set the logits ``[batch, action_dims]``."""
        self.logits = action_logits
        return self

    @property
    def distribution(self) -> th.distributions.Bernoulli:
        """The equivalent ``torch.distributions.Bernoulli``."""
        assert self.logits is not None, "Call proba_distribution() first."
        return th.distributions.Bernoulli(logits=self.logits, validate_args=False)

    @property
    def probs(self) -> th.Tensor:
        """Probabilities of 1."""
        assert self.logits is not None
        return th.sigmoid(self.logits)

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        assert self.logits is not None
        logits, actions = th.broadcast_tensors(self.logits, actions.to(self.logits.dtype))
        return -F.binary_cross_entropy_with_logits(logits, actions, reduction="none").sum(dim=-1)

    def entropy(self) -> th.Tensor:
        assert self.logits is not None
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none").sum(dim=-1)

    def sample(self) -> th.Tensor:
        if self.seed_generators is None:
            return th.bernoulli(self.probs)
        return th.stack([th.bernoulli(p, generator=g) for p, g in zip(self.probs, self.seed_generators)])

    def mode(self) -> th.Tensor:
        return th.round(self.probs)

    def actions_from_params(self, action_logits: th.Tensor, deterministic: bool = False) -> th.Tensor:
        self.proba_distribution(action_logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, action_logits: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(action_logits)
        return actions, self.log_prob(actions)


class TanhBijector:
    """``tanh`` squashing with its inverse and log-det correction.

    Args:
        epsilon: added inside the log of the correction to avoid ``log(0)``.
    """

    def __init__(self, epsilon: float = 1e-6) -> None:
        self.epsilon = epsilon

    @staticmethod
    def forward(x: th.Tensor) -> th.Tensor:
        """``tanh(x)``."""
        return th.tanh(x)

    @staticmethod
    def atanh(x: th.Tensor) -> th.Tensor:
        """Inverse of tanh: ``0.5 * log((1 + x) / (1 - x))``."""
        return 0.5 * (x.log1p() - (-x).log1p())

    @staticmethod
    def inverse(y: th.Tensor) -> th.Tensor:
        """``atanh(y)`` with ``y`` clipped just inside (-1, 1) to avoid infinities."""
        eps = th.finfo(y.dtype).eps
        return TanhBijector.atanh(y.clamp(min=-1.0 + eps, max=1.0 - eps))

    def log_prob_correction(self, x: th.Tensor) -> th.Tensor:
        """``log(1 - tanh(x)**2 + epsilon)`` element-wise."""
        return th.log(1.0 - th.tanh(x) ** 2 + self.epsilon)


class StateDependentNoiseDistribution(Distribution):
    """Generalized State-Dependent Exploration (gSDE, Raffin et al. 2021).

    The noise is ``latent_sde @ W`` with ``W ~ N(0, std**2)`` resampled by :meth:`sample_weights`.

    Args:
        action_dim: dimension of the action space.
        full_std: one std per (feature, action) pair instead of one per feature.
        use_expln: use ``expln`` instead of ``exp`` to keep the std positive and growing slowly.
        squash_output: squash actions with ``tanh``.
        learn_features: let gradients flow into ``latent_sde`` through the noise.
        epsilon: numerical safety constant.
    """

    def __init__(
        self,
        action_dim: int,
        full_std: bool = True,
        use_expln: bool = False,
        squash_output: bool = False,
        learn_features: bool = False,
        epsilon: float = 1e-6,
    ) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.latent_sde_dim: int | None = None
        self.use_expln = use_expln
        self.full_std = full_std
        self.epsilon = epsilon
        self.learn_features = learn_features
        self.bijector: TanhBijector | None = TanhBijector(epsilon) if squash_output else None
        self.mean_actions: th.Tensor | None = None
        self.std: th.Tensor | None = None
        self._latent_sde: th.Tensor | None = None
        self.exploration_mat: th.Tensor | None = None
        self.exploration_matrices: th.Tensor | None = None
        self._weights_std: th.Tensor | None = None
        # K seeds: seed i's exploration matrices from its own stream (None: torch's global generator)
        self.seed_generators: list[th.Generator] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Copies hold the exploration matrices detached (they are redrawn from ``log_std`` before use; a graph
        tensor cannot be deep-copied, which stacking K seeds' policies does)."""
        return {k: v.detach() if isinstance(v, th.Tensor) else v for k, v in self.__dict__.items()}

    def get_std(self, log_std: th.Tensor) -> th.Tensor:
        """Positive std ``[latent_sde_dim, action_dim]`` (K seeds: ``[K, latent_sde_dim, action_dim]``) from the
        log-std parameter.

        Args:
            log_std: the parameter (``[(K,) latent_sde_dim, action_dim]``, or ``[(K,) latent_sde_dim, 1]`` if not
                full_std).
        """
        if self.use_expln:
            below = th.exp(log_std) * (log_std <= 0)
            safe_log_std = log_std * (log_std > 0) + self.epsilon
            above = (th.log1p(safe_log_std) + 1.0) * (log_std > 0)
            std = below + above
        else:
            std = th.exp(log_std)
        if self.full_std:
            return std
        assert self.latent_sde_dim is not None
        return th.ones(self.latent_sde_dim, self.action_dim, device=log_std.device, dtype=log_std.dtype) * std

    def sample_weights(self, log_std: th.Tensor, batch_size: int = 1) -> None:
        """Sample new exploration matrices (one shared, and ``batch_size`` for parallel envs); K seeds: per seed,
        each from its own generator in the order its separate run draws them; a seed whose generator slot is None
        (it sits out: its own update or collection cycle is elsewhere) keeps its matrices.

        Args:
            log_std: the log-std parameter.
            batch_size: number of per-env matrices.
        """
        std = self.get_std(log_std)
        self._weights_std = std
        # reparametrised so that gradients reach log_std
        if self.seed_generators is None:
            self.exploration_mat = std * th.randn_like(std)
            self.exploration_matrices = std * th.randn((batch_size, *std.shape), device=std.device, dtype=std.dtype)
            return
        k = std.shape[0]
        previous, previous_per_env = self.exploration_mat, self.exploration_matrices
        self.exploration_mat = std * seed_randn_like(std, self.seed_generators)  # [K, latent, action]
        per_env = std.unsqueeze(1).expand(k, batch_size, *std.shape[1:])
        self.exploration_matrices = std.unsqueeze(1) * seed_randn_like(per_env, self.seed_generators)
        sitting_out = [g is None for g in self.seed_generators]
        if any(sitting_out) and previous is not None and previous_per_env is not None:
            keep = th.tensor(sitting_out, device=std.device)
            if previous.shape == self.exploration_mat.shape:
                self.exploration_mat = th.where(keep.view(k, 1, 1), previous.detach(), self.exploration_mat)
            if previous_per_env.shape == self.exploration_matrices.shape:
                self.exploration_matrices = th.where(
                    keep.view(k, 1, 1, 1), previous_per_env.detach(), self.exploration_matrices
                )

    @property
    def weights_dist(self) -> th.distributions.Normal:
        """The distribution of the exploration weights, ``N(0, std**2)``."""
        assert self._weights_std is not None, "Call sample_weights() first."
        return th.distributions.Normal(th.zeros_like(self._weights_std), self._weights_std, validate_args=False)

    def proba_distribution_net(
        self, latent_dim: int, log_std_init: float = -2.0, latent_sde_dim: int | None = None
    ) -> tuple[nn.Module, nn.Parameter]:
        """Linear layer for the mean and the log-std parameter of the noise weights.

        Args:
            latent_dim: size of the policy latent.
            log_std_init: initial log-std.
            latent_sde_dim: size of the features used for the noise (default ``latent_dim``).
        """
        mean_actions_net = nn.Linear(latent_dim, self.action_dim)
        self.latent_sde_dim = latent_dim if latent_sde_dim is None else latent_sde_dim
        shape = (self.latent_sde_dim, self.action_dim) if self.full_std else (self.latent_sde_dim, 1)
        log_std = nn.Parameter(th.ones(*shape) * log_std_init, requires_grad=True)
        self.sample_weights(log_std)
        return mean_actions_net, log_std

    def proba_distribution(
        self: SelfDistribution, mean_actions: th.Tensor, log_std: th.Tensor, latent_sde: th.Tensor
    ) -> SelfDistribution:
        """Set the Gaussian ``N(mean, latent_sde**2 @ std**2 + epsilon)``.

        Args:
            mean_actions: ``[batch, action_dim]``.
            log_std: the log-std parameter.
            latent_sde: features used by the noise, ``[batch, latent_sde_dim]``.
        """
        self._latent_sde = latent_sde if self.learn_features else latent_sde.detach()
        matmul = th.mm if latent_sde.dim() == 2 else th.bmm  # K seeds: [K, batch, latent] @ [K, latent, action]
        variance = matmul(self._latent_sde**2, self.get_std(log_std) ** 2)
        self.mean_actions = mean_actions
        self.std = th.sqrt(variance + self.epsilon)
        return self

    @property
    def distribution(self) -> th.distributions.Normal:
        """The equivalent ``torch.distributions.Normal`` of the (pre-squash) actions."""
        assert self.mean_actions is not None and self.std is not None, "Call proba_distribution() first."
        return th.distributions.Normal(self.mean_actions, self.std, validate_args=False)

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        assert self.mean_actions is not None and self.std is not None
        gaussian_actions = self.bijector.inverse(actions) if self.bijector is not None else actions
        log_prob = sum_independent_dims(_normal_log_prob(gaussian_actions, self.mean_actions, self.std, self.std.log()))
        if self.bijector is not None:
            log_prob = log_prob - th.sum(self.bijector.log_prob_correction(gaussian_actions), dim=-1)
        return log_prob

    def entropy(self) -> th.Tensor | None:
        if self.bijector is not None:
            return None
        assert self.std is not None
        return sum_independent_dims(0.5 + _HALF_LOG_2PI + self.std.log())

    def get_noise(self, latent_sde: th.Tensor) -> th.Tensor:
        """Noise ``latent_sde @ W`` (per-env matrices when the batch matches their number); K seeds:
        ``latent_sde`` is ``[K, batch, latent]`` and each seed uses its own matrices."""
        assert self.exploration_mat is not None and self.exploration_matrices is not None
        latent_sde = latent_sde if self.learn_features else latent_sde.detach()
        if latent_sde.dim() == 3:
            k, batch = latent_sde.shape[:2]
            if batch == 1 or batch != self.exploration_matrices.shape[1]:
                return th.bmm(latent_sde, self.exploration_mat)
            matrices = self.exploration_matrices.reshape(k * batch, *self.exploration_matrices.shape[2:])
            return th.bmm(latent_sde.reshape(k * batch, 1, -1), matrices).reshape(k, batch, -1)
        if len(latent_sde) == 1 or len(latent_sde) != len(self.exploration_matrices):
            return th.mm(latent_sde, self.exploration_mat)
        return th.bmm(latent_sde.unsqueeze(1), self.exploration_matrices).squeeze(1)

    def sample(self) -> th.Tensor:
        assert self.mean_actions is not None and self._latent_sde is not None
        actions = self.mean_actions + self.get_noise(self._latent_sde)
        if self.bijector is not None:
            return self.bijector.forward(actions)
        return actions

    def mode(self) -> th.Tensor:
        assert self.mean_actions is not None
        if self.bijector is not None:
            return self.bijector.forward(self.mean_actions)
        return self.mean_actions

    def actions_from_params(
        self, mean_actions: th.Tensor, log_std: th.Tensor, latent_sde: th.Tensor, deterministic: bool = False
    ) -> th.Tensor:
        self.proba_distribution(mean_actions, log_std, latent_sde)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(
        self, mean_actions: th.Tensor, log_std: th.Tensor, latent_sde: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(mean_actions, log_std, latent_sde)
        return actions, self.log_prob(actions)


_SUPPORTED_ACTION_SPACES = "Box, Discrete, MultiDiscrete, MultiBinary"


def make_proba_distribution(
    action_space: spaces.Space, use_sde: bool = False, dist_kwargs: dict[str, Any] | None = None
) -> Distribution:
    """The distribution that fits an action space.

    Args:
        action_space: the action space.
        use_sde: use gSDE instead of a diagonal Gaussian for Box spaces.
        dist_kwargs: keyword arguments for the distribution's constructor.
    """
    dist_kwargs = dist_kwargs or {}
    if isinstance(action_space, spaces.Box):
        cls = StateDependentNoiseDistribution if use_sde else DiagGaussianDistribution
        return cls(get_action_dim(action_space), **dist_kwargs)
    if isinstance(action_space, spaces.Discrete):
        return CategoricalDistribution(int(action_space.n), **dist_kwargs)
    if isinstance(action_space, spaces.MultiDiscrete):
        if action_space.nvec.ndim != 1:
            raise NotImplementedError(
                f"MultiDiscrete action spaces with nvec of shape {action_space.nvec.shape} are not supported; "
                "use a 1-D nvec (flatten the space)."
            )
        return MultiCategoricalDistribution([int(n) for n in action_space.nvec], **dist_kwargs)
    if isinstance(action_space, spaces.MultiBinary):
        if len(action_space.shape) != 1:
            raise NotImplementedError(
                f"Multi-dimensional MultiBinary({action_space.n}) action space is not supported; flatten it instead."
            )
        return BernoulliDistribution(int(action_space.shape[0]), **dist_kwargs)
    raise NotImplementedError(
        f"No probability distribution for action space {action_space} (type {type(action_space).__name__}); "
        f"supported action spaces: {_SUPPORTED_ACTION_SPACES}."
    )


def kl_divergence(dist_true: Distribution, dist_pred: Distribution) -> th.Tensor:
    """KL(dist_true || dist_pred) for two distributions of the same class.

    Args:
        dist_true: the p distribution.
        dist_pred: the q distribution.
    """
    if type(dist_true) is not type(dist_pred):
        raise TypeError(
            f"kl_divergence needs two distributions of the same class, got {type(dist_true).__name__} "
            f"and {type(dist_pred).__name__}."
        )
    if isinstance(dist_pred, MultiCategoricalDistribution):
        assert isinstance(dist_true, MultiCategoricalDistribution)
        return th.stack(
            [th.distributions.kl_divergence(p, q) for p, q in zip(dist_true.distribution, dist_pred.distribution)],
            dim=-1,
        ).sum(dim=-1)
    return th.distributions.kl_divergence(dist_true.distribution, dist_pred.distribution)  # type: ignore[attr-defined]
