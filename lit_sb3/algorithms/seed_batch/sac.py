"""Seed-batched SAC: K seeds' actors, critics, target critics and entropy coefficients stacked along a seed
dimension, updated with one optimiser step for all seeds (see :mod:`lit_sb3.algorithms.sac` for the algorithm).

Shapes: observations ``[K, B, F]``, actions ``[K, B, A]``, Q-values ``[K, n_critics, B, 1]``; every loss is
computed per seed (``[K]``) and the optimisers minimise their sum over the active seeds, so each seed's gradient
is exactly its own loss's gradient.
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.sac import SAC
from lit_sb3.algorithms.seed_batch.base import ParamLink, stack_sequential
from lit_sb3.algorithms.seed_batch.off_policy import OffPolicySeedBatch
from lit_sb3.core.preprocessing import is_image_space
from lit_sb3.policies.distributions import SquashedDiagGaussianDistribution
from lit_sb3.policies.sac import LOG_STD_MAX, LOG_STD_MIN
from lit_sb3.policies.torch_layers import FlattenExtractor

__all__ = ["SeedBatchSAC", "check_flat_observations", "stacked_q_values"]


def check_flat_observations(batch: OffPolicySeedBatch, extractors: list[nn.Module]) -> None:
    """Seed batching stacks MLPs on flat (vector) observations: refuse anything else with a clear error."""
    space = batch.observation_space
    if not isinstance(space, spaces.Box) or is_image_space(space):
        raise NotImplementedError(f"seed batching supports vector (Box) observations only, got {space}.")
    for extractor in extractors:
        if type(extractor) is not FlattenExtractor:
            raise NotImplementedError(
                f"seed batching supports the FlattenExtractor (MlpPolicy) only, got {type(extractor).__name__}."
            )


def stacked_q_values(qf: nn.Module, n_critics: int, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
    """Q-values of K seeds' ``n_critics`` critics, ``[K, n_critics, B, 1]``.

    Args:
        qf: the stacked critic MLP (``K * n_critics`` members, seed-major).
        n_critics: critics per seed.
        obs: ``[K, B, F]``.
        actions: ``[K, B, A]``.
    """
    x = th.cat([obs, actions], dim=-1)
    k, b, d = x.shape
    x = x.unsqueeze(1).expand(k, n_critics, b, d).reshape(k * n_critics, b, d)
    return qf(x).view(k, n_critics, b, 1)


class SeedBatchSAC(OffPolicySeedBatch):
    """K seeds of :class:`~lit_sb3.algorithms.sac.SAC` (``SeedBatch(SAC, seeds=[...], **sac_kwargs)``).

    Per seed: replay slice and minibatch indices, actor/critic/target weights and Adam moments, the entropy
    coefficient (``ent_coef="auto"``: K ``log_alpha``), warm-up actions (each seed's seeded action space).
    """

    algorithm = SAC
    members: list[SAC]  # type: ignore[assignment]

    def __init__(self, algorithm: type[SAC], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        first = self.members[0]
        self.target_update_interval = first.target_update_interval
        self.log_ent_coef: nn.Parameter | None = None
        self.ent_coef_optimizer: th.optim.Optimizer | None = None

    def _build_batch(self) -> None:
        members = self.members
        check_flat_observations(self, [m.actor.features_extractor for m in members])
        first = members[0]
        self.n_critics = first.critic.n_critics
        self.target_entropy = float(first.target_entropy)
        self.latent_pi, links = stack_sequential([m.actor.latent_pi for m in members])
        self.mu, mu_links = stack_sequential([m.actor.mu for m in members])
        self.log_std, log_std_links = stack_sequential([m.actor.log_std for m in members])
        self.qf, qf_links = stack_sequential([m.critic.qf for m in members])
        self.qf_target, target_links = stack_sequential([m.critic_target.qf for m in members])
        self.qf_target.requires_grad_(False)
        self._links = links + mu_links + log_std_links + qf_links + target_links
        self.action_dist = SquashedDiagGaussianDistribution(int(self.action_space.shape[0]))  # type: ignore[index]
        self._actor_params = [*self.latent_pi.parameters(), *self.mu.parameters(), *self.log_std.parameters()]
        self._critic_params = list(self.qf.parameters())
        self._critic_target_params = list(self.qf_target.parameters())
        lr = self.lr_schedule(1)
        self.actor_optimizer = first.policy.make_optimizer(self._actor_params, lr)
        self.critic_optimizer = first.policy.make_optimizer(self._critic_params, lr)
        if first.log_ent_coef is not None:
            self.log_ent_coef = nn.Parameter(th.stack([m.log_ent_coef.detach() for m in members]))  # [K, 1]
            self._links.append(ParamLink(self.log_ent_coef, [m.log_ent_coef for m in members]))  # type: ignore[misc]
            self.ent_coef_optimizer = th.optim.Adam([self.log_ent_coef], lr=lr, fused=True)
        else:
            self.register_buffer("ent_coef_tensor", th.stack([m.ent_coef_tensor for m in members]).reshape(-1, 1))

    def _optimizers(self) -> dict[str, th.optim.Optimizer]:
        optimizers = {"actor": self.actor_optimizer, "critic": self.critic_optimizer}
        if self.ent_coef_optimizer is not None:
            optimizers["ent_coef"] = self.ent_coef_optimizer
        return optimizers

    # ------------------------------------------------------------------
    # The stacked actor
    # ------------------------------------------------------------------

    def _dist_params(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        latent = self.latent_pi(obs)
        return self.mu(latent), th.clamp(self.log_std(latent), LOG_STD_MIN, LOG_STD_MAX)

    def action_log_prob(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Reparametrised squashed actions ``[K, B, A]`` and their log-probabilities ``[K, B, 1]``.

        Args:
            obs: ``[K, B, F]`` observations.
        """
        mean, log_std = self._dist_params(obs)
        k, b, a = mean.shape
        actions, log_prob = self.action_dist.log_prob_from_params(mean.reshape(-1, a), log_std.reshape(-1, a))
        return actions.view(k, b, a), log_prob.view(k, b, 1)

    def _policy_actions(self, observation: Any) -> Any:
        obs = self._obs_tensor(observation)
        with th.inference_mode():
            mean, log_std = self._dist_params(obs)
            k, n, a = mean.shape
            actions = self.action_dist.actions_from_params(mean.reshape(-1, a), log_std.reshape(-1, a))
        return actions.float().view(k, n, a).cpu().numpy()

    # ------------------------------------------------------------------
    # The update
    # ------------------------------------------------------------------

    def train(self, gradient_steps: int | bool = True, batch_size: int = 64) -> Any:
        """``gradient_steps`` batched SAC steps: entropy coefficient, critics, actor, target critics (per seed).

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size per seed.
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        self._update_learning_rate(list(self._optimizers().values()))
        losses: dict[str, list[th.Tensor]] = {"ent_coef": [], "ent_coef_loss": [], "actor_loss": [], "critic_loss": []}
        for gradient_step in range(gradient_steps):
            self._gradient_step(self._sample(batch_size), losses)
            if gradient_step % self.target_update_interval == 0:
                with th.no_grad():
                    th._foreach_lerp_(self._critic_target_params, self._critic_params, self.tau)
        self._n_updates += gradient_steps
        self.record_every_seed("train/n_updates", self._n_updates)
        stacked = {key: th.stack(values) for key, values in losses.items() if values}  # [steps, K]
        self._check_finite("critic loss", stacked["critic_loss"])
        self._check_finite("actor loss", stacked["actor_loss"])
        for key, values in stacked.items():
            self.record(f"train/{key}", values.mean(0))
        return None

    def _gradient_step(self, data: Any, losses: dict[str, list[th.Tensor]]) -> None:
        """One SAC gradient step of every seed on its minibatch (``data``: :class:`SeedBatchSamples`)."""
        n_critics, k = self.n_critics, self.n_seeds
        dtype = self._input_dtype
        obs, next_obs = data.observations.flatten(2).to(dtype), data.next_observations.flatten(2).to(dtype)
        actions_pi, log_prob = self.action_log_prob(obs)

        # entropy coefficient of each seed: minimise -log(alpha) * (log pi(a|s) + target_entropy)
        if self.ent_coef_optimizer is not None and self.log_ent_coef is not None:
            ent_coef = th.exp(self.log_ent_coef.detach())  # [K, 1]
            ent_coef_loss = -(self.log_ent_coef.unsqueeze(1) * (log_prob + self.target_entropy).detach()).mean(
                dim=(1, 2)
            )
            losses["ent_coef_loss"].append(ent_coef_loss.detach())
            self.ent_coef_optimizer.zero_grad(set_to_none=True)
            self._backward(self._masked_sum(ent_coef_loss))
            self.ent_coef_optimizer.step()
        else:
            ent_coef = self.ent_coef_tensor
        losses["ent_coef"].append(ent_coef.reshape(k))
        alpha = ent_coef.view(k, 1, 1)

        # critic target: r + gamma * (1 - done) * (min_i Q_target_i(s', a') - alpha * log pi(a'|s'))
        with th.no_grad():
            next_actions, next_log_prob = self.action_log_prob(next_obs)
            next_q = stacked_q_values(self.qf_target, n_critics, next_obs, next_actions).min(dim=1).values
            next_q = next_q - alpha * next_log_prob
            target_q = data.rewards + (1 - data.dones) * self.gamma * next_q  # [K, B, 1]

        # critic loss of each seed: 0.5 * sum_i MSE(Q_i(s, a), target)
        current_q = stacked_q_values(self.qf, n_critics, obs, data.actions)  # [K, n_critics, B, 1]
        critic_loss = 0.5 * n_critics * (current_q - target_q.unsqueeze(1)).pow(2).mean(dim=(1, 2, 3))
        losses["critic_loss"].append(critic_loss.detach())
        self.critic_optimizer.zero_grad(set_to_none=True)
        self._backward(self._masked_sum(critic_loss))
        self.critic_optimizer.step()

        # actor loss of each seed: alpha * log pi(a|s) - min_i Q_i(s, a) (gradients into the actor only)
        min_qf_pi = stacked_q_values(self.qf, n_critics, obs, actions_pi).min(dim=1).values
        actor_loss = (alpha * log_prob - min_qf_pi).mean(dim=(1, 2))
        losses["actor_loss"].append(actor_loss.detach())
        self.actor_optimizer.zero_grad(set_to_none=True)
        self._backward(self._masked_sum(actor_loss), inputs=self._actor_params)
        self.actor_optimizer.step()
