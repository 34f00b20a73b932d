"""Seed-batched DQN: K seeds' Q-networks and target networks stacked along a seed dimension (see
:mod:`lit_sb3.algorithms.dqn` for the algorithm).

Per seed: replay slice and minibatch indices, epsilon-greedy draws (the schedule is the same function of the
progress for every seed, as their hyperparameters are), warm-up actions from each seed's seeded action space,
gradient-norm clipping (``max_grad_norm`` per seed, :func:`clip_grad_norm_per_seed`), weights and Adam moments.
The target networks follow every ``target_update_interval`` env steps, as in the single run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from torch import nn
from torch.nn import functional as F

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.dqn import DQN
from lit_sb3.algorithms.seed_batch.base import clip_grad_norm_per_seed, stack_sequential
from lit_sb3.algorithms.seed_batch.off_policy import OffPolicySeedBatch
from lit_sb3.algorithms.seed_batch.sac import check_flat_observations
from lit_sb3.core.schedules import LinearSchedule

__all__ = ["SeedBatchDQN"]


class SeedBatchDQN(OffPolicySeedBatch):
    """K seeds of :class:`~lit_sb3.algorithms.dqn.DQN` (``SeedBatch(DQN, seeds=[...], **dqn_kwargs)``)."""

    algorithm = DQN
    members: list[DQN]  # type: ignore[assignment]
    _PLAIN_HOT_ATTRIBUTES = OffPolicySeedBatch._PLAIN_HOT_ATTRIBUTES | {"_n_calls", "exploration_rate"}

    def __init__(self, algorithm: type[DQN], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        first = self.members[0]
        self.target_update_interval = first.target_update_interval
        self.max_grad_norm = first.max_grad_norm
        self.exploration_schedule = LinearSchedule(
            float(first.exploration_initial_eps), float(first.exploration_final_eps), float(first.exploration_fraction)
        )
        self.exploration_rate = 0.0
        self._n_calls = 0

    def _build_batch(self) -> None:
        members = self.members
        check_flat_observations(self, [m.q_net.features_extractor for m in members])
        self.q_net, links = stack_sequential([m.q_net.q_net for m in members])
        self.q_net_target, target_links = stack_sequential([m.q_net_target.q_net for m in members])
        self.q_net_target.requires_grad_(False)
        self._links = links + target_links
        self._q_params = list(self.q_net.parameters())
        self._q_target_params = list(self.q_net_target.parameters())
        self.optimizer = members[0].policy.make_optimizer(self._q_params, self.lr_schedule(1))

    def _optimizers(self) -> dict[str, th.optim.Optimizer]:
        return {"q": self.optimizer}

    def _on_step(self) -> None:
        """After each lockstep env step: target update every ``target_update_interval // n_envs`` calls, epsilon."""
        self._n_calls += 1
        if self._n_calls % max(self.target_update_interval // self.n_envs, 1) == 0:
            with th.no_grad():
                th._foreach_lerp_(self._q_target_params, self._q_params, self.tau)
            self._restore_failed()
        self.exploration_rate = self.exploration_schedule(self._current_progress_remaining)
        self.record_every_seed("rollout/exploration_rate", self.exploration_rate)

    def _policy_actions(self, observation: Any) -> Any:
        """Epsilon-greedy per seed: each seed draws whether it explores (its whole env batch, as the single run)."""
        explore = np.random.rand(self.n_seeds) < self.exploration_rate
        greedy = None
        if not explore.all():
            with th.inference_mode():
                greedy = self.q_net(self._obs_tensor(observation)).argmax(dim=-1).cpu().numpy()
        actions = np.empty((self.n_seeds, self.n_envs), dtype=np.int64)
        for i in range(self.n_seeds):
            if explore[i]:
                actions[i] = [self._action_spaces[i].sample() for _ in range(self.n_envs)]
            else:
                actions[i] = greedy[i]  # type: ignore[index]
        return actions

    def train(self, gradient_steps: int | bool = True, batch_size: int = 100) -> Any:
        """``gradient_steps`` batched DQN steps (Huber loss, per-seed gradient clipping).

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size per seed.
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        self._update_learning_rate(self.optimizer)
        dtype, losses = self._input_dtype, []
        for _ in range(gradient_steps):
            data = self._sample(batch_size)
            obs, next_obs = data.observations.flatten(2).to(dtype), data.next_observations.flatten(2).to(dtype)
            # target: greedy value of the next state under each seed's target network
            with th.no_grad():
                next_q = self.q_net_target(next_obs).max(dim=-1, keepdim=True).values  # [K, B, 1]
                target_q = data.rewards + (1 - data.dones) * self.gamma * next_q
            current_q = th.gather(self.q_net(obs), dim=2, index=data.actions.long())
            loss = F.smooth_l1_loss(current_q, target_q, reduction="none").mean(dim=(1, 2))  # [K]
            losses.append(loss.detach())
            self.optimizer.zero_grad(set_to_none=True)
            self._backward(self._masked_sum(loss))
            clip_grad_norm_per_seed(self._q_params, self.max_grad_norm, self.n_seeds)
            self.optimizer.step()
        self._n_updates += gradient_steps
        self.record_every_seed("train/n_updates", self._n_updates)
        stacked = th.stack(losses)
        self._check_finite("loss", stacked)
        self.record("train/loss", stacked.mean(0))
        return None

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        super()._sync_member_state(i, member)
        member._n_calls = self._n_calls  # type: ignore[attr-defined]
        member.exploration_rate = self.exploration_rate  # type: ignore[attr-defined]
