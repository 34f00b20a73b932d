"""Seed-batched TD3 and DDPG (DDPG is TD3's special case, as in the library): K seeds' actors, target actors,
critics and target critics stacked along a seed dimension (see :mod:`lit_sb3.algorithms.td3` for the algorithm).

Per seed: replay slice and minibatch indices, exploration noise (each seed's own copy of ``action_noise``), the
target policy smoothing noise, weights and Adam moments. Losses are per seed (``[K]``), minimised as their sum
over the active seeds.
"""

from __future__ import annotations

from typing import Any

import torch as th
from torch import nn

from lit_sb3.algorithms.ddpg import DDPG
from lit_sb3.algorithms.seed_batch.base import stack_sequential
from lit_sb3.algorithms.seed_batch.off_policy import OffPolicySeedBatch
from lit_sb3.algorithms.seed_batch.sac import check_flat_observations, stacked_q_values
from lit_sb3.algorithms.td3 import TD3
from lit_sb3.policies.torch_layers import EnsembleLinear

__all__ = ["SeedBatchDDPG", "SeedBatchTD3", "first_critic_q_values"]


def first_critic_q_values(qf: nn.Sequential, n_critics: int, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
    """Q-values of each seed's first critic only, ``[K, B, 1]`` (TD3's actor loss), without evaluating the others.

    Args:
        qf: the stacked critic MLP (``K * n_critics`` members, seed-major).
        n_critics: critics per seed.
        obs: ``[K, B, F]``.
        actions: ``[K, B, A]``.
    """
    x = th.cat([obs, actions], dim=-1)
    k = x.shape[0]
    for layer in qf:
        if isinstance(layer, EnsembleLinear):
            weight = layer.weight.view(k, n_critics, *layer.weight.shape[1:])[:, 0]
            if layer.bias is None:
                x = th.bmm(x, weight)
            else:
                x = th.baddbmm(layer.bias.view(k, n_critics, *layer.bias.shape[1:])[:, 0], x, weight)
        else:
            x = layer(x)
    return x


class SeedBatchTD3(OffPolicySeedBatch):
    """K seeds of :class:`~lit_sb3.algorithms.td3.TD3` (``SeedBatch(TD3, seeds=[...], **td3_kwargs)``)."""

    algorithm = TD3
    members: list[TD3]  # type: ignore[assignment]

    def __init__(self, algorithm: type[TD3], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        first = self.members[0]
        self.policy_delay = first.policy_delay
        self.target_policy_noise = first.target_policy_noise
        self.target_noise_clip = first.target_noise_clip

    def _build_batch(self) -> None:
        members = self.members
        check_flat_observations(self, [m.actor.features_extractor for m in members])
        first = members[0]
        self.n_critics = first.critic.n_critics
        self.mu, links = stack_sequential([m.actor.mu for m in members])
        self.mu_target, target_links = stack_sequential([m.actor_target.mu for m in members])
        self.qf, qf_links = stack_sequential([m.critic.qf for m in members])
        self.qf_target, qf_target_links = stack_sequential([m.critic_target.qf for m in members])
        self.mu_target.requires_grad_(False)
        self.qf_target.requires_grad_(False)
        self._links = links + target_links + qf_links + qf_target_links
        self._actor_params = list(self.mu.parameters())
        self._source_params = self._actor_params + list(self.qf.parameters())
        self._target_params = list(self.mu_target.parameters()) + list(self.qf_target.parameters())
        lr = self.lr_schedule(1)
        self.actor_optimizer = first.policy.make_optimizer(self._actor_params, lr)
        self.critic_optimizer = first.policy.make_optimizer(list(self.qf.parameters()), lr)

    def _optimizers(self) -> dict[str, th.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    def _policy_actions(self, observation: Any) -> Any:
        with th.inference_mode():
            actions = self.mu(self._obs_tensor(observation))
        return actions.float().cpu().numpy()

    def train(self, gradient_steps: int | bool = True, batch_size: int = 100) -> Any:
        """``gradient_steps`` batched TD3 steps: critics, and every ``policy_delay`` steps the actors and the soft
        target updates (per seed).

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size per seed.
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        self._update_learning_rate([self.actor_optimizer, self.critic_optimizer])
        n_critics, dtype = self.n_critics, self._input_dtype
        add_target_noise = self.target_policy_noise > 0 and self.target_noise_clip > 0
        actor_losses, critic_losses = [], []
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = self._sample(batch_size)
            obs, next_obs = data.observations.flatten(2).to(dtype), data.next_observations.flatten(2).to(dtype)

            # target: r + gamma * (1 - done) * min_i Q_target_i(s', clip(mu_target(s') + clip(eps, -c, c), -1, 1))
            with th.no_grad():
                next_actions = self.mu_target(next_obs)
                if add_target_noise:
                    noise = th.randn_like(data.actions).mul_(self.target_policy_noise)
                    noise = noise.clamp_(-self.target_noise_clip, self.target_noise_clip)
                    next_actions = (next_actions + noise).clamp(-1, 1)
                next_q = stacked_q_values(self.qf_target, n_critics, next_obs, next_actions).min(dim=1).values
                target_q = data.rewards + (1 - data.dones) * self.gamma * next_q

            # critic loss of each seed: sum_i MSE(Q_i(s, a), target)
            current_q = stacked_q_values(self.qf, n_critics, obs, data.actions)
            critic_loss = n_critics * (current_q - target_q.unsqueeze(1)).pow(2).mean(dim=(1, 2, 3))
            critic_losses.append(critic_loss.detach())
            self.critic_optimizer.zero_grad(set_to_none=True)
            self._backward(self._masked_sum(critic_loss))
            self.critic_optimizer.step()

            # delayed policy update: maximise Q_1(s, mu(s)), then soft-update actor and critic targets
            if self._n_updates % self.policy_delay == 0:
                actor_loss = -first_critic_q_values(self.qf, n_critics, obs, self.mu(obs)).mean(dim=(1, 2))
                actor_losses.append(actor_loss.detach())
                self.actor_optimizer.zero_grad(set_to_none=True)
                self._backward(self._masked_sum(actor_loss), inputs=self._actor_params)
                self.actor_optimizer.step()
                with th.no_grad():
                    th._foreach_lerp_(self._target_params, self._source_params, self.tau)

        self.record_every_seed("train/n_updates", self._n_updates)
        critic = th.stack(critic_losses)
        self._check_finite("critic loss", critic)
        self.record("train/critic_loss", critic.mean(0))
        if actor_losses:
            actor = th.stack(actor_losses)
            self._check_finite("actor loss", actor)
            self.record("train/actor_loss", actor.mean(0))
        return None


class SeedBatchDDPG(SeedBatchTD3):
    """K seeds of :class:`~lit_sb3.algorithms.ddpg.DDPG` (TD3 with one critic, no delay, no target noise)."""

    algorithm = DDPG
