"""Twin Delayed DDPG (Fujimoto et al. 2018) — SB3's TD3 as a LightningModule.

Paper: https://arxiv.org/abs/1802.09477

The whole update is in :meth:`TD3.train`, readable top to bottom. Critics are evaluated in one batched call,
optimizers are fused Adam, the actor loss back-propagates into the actor only, targets are updated with
``torch._foreach_lerp_`` over parameter lists built once, and losses stay tensors until logged.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.off_policy import OffPolicyAlgorithm
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.noise import ActionNoise
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.sac import ContinuousCritic
from lit_sb3.policies.seed_stack import masked_seed_lerp_, masked_seed_sum, seed_mean, seed_mse, seed_randn_like
from lit_sb3.policies.td3 import Actor, CnnPolicy, MlpPolicy, MultiInputPolicy, TD3Policy

__all__ = ["TD3"]


def _mean(values: list[th.Tensor]) -> th.Tensor:
    """Mean over gradient steps of per-step values (scalars, or ``[K]`` per seed)."""
    return values[0] if len(values) == 1 else th.stack(values).mean(0)


class TD3(OffPolicyAlgorithm):
    """Twin Delayed DDPG, with SB3 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate (actor and critics), constant or schedule.
        buffer_size: replay buffer capacity.
        learning_starts: env steps of uniform random actions before learning.
        batch_size: minibatch size.
        tau: soft update coefficient of the targets.
        gamma: discount factor.
        train_freq: update every n steps, or ``(n, "episode")``.
        gradient_steps: gradient steps per update (-1: as many as env steps collected).
        action_noise: exploration noise (e.g. ``NormalActionNoise``); None explores only through warm-up.
        replay_buffer_class: replay buffer class (None: chosen automatically).
        replay_buffer_kwargs: replay buffer arguments.
        optimize_memory_usage: memory-efficient replay buffer.
        n_steps: n-step returns.
        policy_delay: update the actor and the targets every ``policy_delay`` critic updates.
        target_policy_noise: std of the Gaussian noise added to the target actions (smoothing).
        target_noise_clip: clip of that noise.
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        stats_window_size: episodes averaged for logging.
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        policy_kwargs: policy arguments.
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
        compile_update: run each gradient step (losses, backward, optimiser steps, target update) through
            ``torch.compile`` (opt-in; the first update pays the compilation; same random streams as eager; on one
            CPU core measured 0.88-0.97x of eager, see benchmarks/README.md).
    """

    zoo_name: ClassVar[str] = "td3"
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Box,)
    default_run_name: ClassVar[str] = "TD3"
    search_space: ClassVar[str | None] = "td3"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    policy: TD3Policy
    actor: Actor
    actor_target: Actor
    critic: ContinuousCritic
    critic_target: ContinuousCritic

    def __init__(
        self,
        policy: str | type[TD3Policy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 1e-3,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 1,
        gradient_steps: int = 1,
        action_noise: ActionNoise | None = None,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        policy_delay: int = 2,
        target_policy_noise: float = 0.2,
        target_noise_clip: float = 0.5,
        monitor_wrapper: bool = True,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        compile_update: bool = False,
    ) -> None:
        super().__init__(
            policy,
            learning_rate,
            buffer_size,
            learning_starts,
            batch_size,
            tau,
            gamma,
            train_freq,
            gradient_steps,
            action_noise=action_noise,
            replay_buffer_class=replay_buffer_class,
            replay_buffer_kwargs=replay_buffer_kwargs,
            optimize_memory_usage=optimize_memory_usage,
            n_steps=n_steps,
            policy_kwargs=policy_kwargs,
            monitor_wrapper=monitor_wrapper,
            stats_window_size=stats_window_size,
            verbose=verbose,
            device=device,
            seed=seed,
            sde_support=False,
            support_multi_env=True,
        )
        if isinstance(policy_delay, bool) or not isinstance(policy_delay, int) or policy_delay < 1:
            raise ValueError(f"policy_delay must be an integer >= 1, got {policy_delay!r}.")
        if target_policy_noise < 0 or target_noise_clip < 0:
            raise ValueError(
                f"target_policy_noise and target_noise_clip must be >= 0, got {target_policy_noise} and {target_noise_clip}."
            )
        self.policy_delay = policy_delay
        self.target_noise_clip = target_noise_clip
        self.target_policy_noise = target_policy_noise
        if not isinstance(compile_update, bool):
            raise ValueError(f"compile_update must be True or False, got {compile_update!r}.")
        self.compile_update = compile_update
        self.tensorboard_log = tensorboard_log
        self._init_env_and_model(env, _init_setup_model)

    def _setup_model(self) -> None:
        super()._setup_model()
        self._create_aliases()
        self._build_param_lists()

    def _create_aliases(self) -> None:
        self.actor = self.policy.actor
        self.actor_target = self.policy.actor_target
        self.critic = self.policy.critic
        self.critic_target = self.policy.critic_target

    def _build_param_lists(self) -> None:
        """Source/target parameter lists of the soft updates and the actor's parameters, built once."""
        self._actor_params = list(self.actor.parameters())
        self._source_params = self._actor_params + list(self.critic.parameters())
        self._target_params = list(self.actor_target.parameters()) + list(self.critic_target.parameters())
        # BatchNorm running statistics are copied, not averaged (SB3 issue #996)
        self._bn_stats = [b for m in (self.actor, self.critic) for n, b in m.named_buffers() if "running_" in n]
        self._bn_stats_target = [
            b for m in (self.actor_target, self.critic_target) for n, b in m.named_buffers() if "running_" in n
        ]

    def configure_optimizers(self) -> list[th.optim.Optimizer]:
        return [self.actor.optimizer, self.critic.optimizer]

    def _optimizers_to_save(self) -> dict[str, th.optim.Optimizer]:
        return {"actor.optimizer": self.actor.optimizer, "critic.optimizer": self.critic.optimizer}

    def _gradient_step(
        self, data: Any, active: th.Tensor | None, actor_due: bool, actor_mask: th.Tensor | None
    ) -> tuple[th.Tensor, th.Tensor | None]:
        """One TD3 gradient step on a sampled minibatch: the critic step and, when due, the actor step and the
        soft updates (the optimiser steps included: the unit :meth:`_update_step` compiles).

        Args:
            data: the minibatch (``[batch, ...]`` tensors, ``[K, batch, ...]`` at K > 1).
            active: ``[K]`` bool of the seeds taking the update (None: all).
            actor_due: the delayed actor step is due at this update.
            actor_mask: ``[K]`` bool of the seeds whose own update count makes it due (None: every seed taking
                the update).

        Returns:
            The detached critic loss and actor loss (None when the actor step was not due).
        """
        actor, actor_target, critic, critic_target = self.actor, self.actor_target, self.critic, self.critic_target
        n_critics, k = critic.n_critics, self.n_seeds
        discounts = data.discounts if data.discounts is not None else self.gamma

        # target: r + gamma * (1 - done) * min_i Q_target_i(s', clip(mu_target(s') + clip(eps, -c, c), -1, 1))
        with th.no_grad():
            next_actions = actor_target(data.next_observations)
            if self.target_policy_noise > 0 and self.target_noise_clip > 0:
                noise = seed_randn_like(data.actions, self.seed_generators).mul_(self.target_policy_noise)
                noise = noise.clamp_(-self.target_noise_clip, self.target_noise_clip)
                next_actions = (next_actions + noise).clamp(-1, 1)
            next_q_values = critic_target.forward_stacked(data.next_observations, next_actions).min(dim=-3).values
            target_q_values = data.rewards + (1 - data.dones) * discounts * next_q_values

        # critic loss: sum_i MSE(Q_i(s, a), target), all critics in one batched call
        current_q_values = critic.forward_stacked(data.observations, data.actions)  # [(K,) n_critics, batch, 1]
        target_q_values = target_q_values.unsqueeze(-3).expand_as(current_q_values)
        critic_loss = n_critics * seed_mse(current_q_values, target_q_values, k)
        critic.optimizer.zero_grad(set_to_none=True)
        self._backward(masked_seed_sum(critic_loss, active))
        critic.optimizer.step()
        if not actor_due:
            return critic_loss.detach(), None

        # delayed policy update: maximise Q_1(s, mu(s)), then soft-update actor and critic targets
        mask = active if actor_mask is None else actor_mask
        actor_loss = -seed_mean(critic.q1_forward(data.observations, actor(data.observations)), k)
        actor.optimizer.zero_grad(set_to_none=True)
        self._backward(masked_seed_sum(actor_loss, mask), inputs=self._actor_params)
        if actor_mask is None:
            actor.optimizer.step()
            with th.no_grad():
                th._foreach_lerp_(self._target_params, self._source_params, self.tau)
                for stat, stat_target in zip(self._bn_stats, self._bn_stats_target):
                    stat_target.copy_(stat)
        else:
            actor.optimizer.step(mask)  # a per-seed optimiser (seeds sit out): only the due seeds step
            with th.no_grad():
                masked_seed_lerp_(self._target_params, self._source_params, self.tau, mask)
                masked_seed_lerp_(self._bn_stats_target, self._bn_stats, 1.0, mask)
        return critic_loss.detach(), actor_loss.detach()

    def train(self, gradient_steps: int | bool = True, batch_size: int = 100) -> Any:
        """TD3 update: critic steps, and every ``policy_delay`` of them an actor step and the soft updates.

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size.
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        assert self.replay_buffer is not None
        self._set_policy_training_mode(True)
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])
        k, active = self.n_seeds, self._active_mask()
        step = self._update_step()

        actor_losses, critic_losses, actor_due = [], [], []
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = self._sample_replay(batch_size)
            # delayed policy update: K seeds on their own update counts ([K], train_freq in episodes) take it when
            # their own count is due (`seeds`: [K] bool), the other seeds' actors, Adam states and targets stay
            due, seeds = (True, None) if self.policy_delay == 1 else self._due(self.policy_delay)
            actor_mask = None
            if due and seeds is not None:
                actor_mask = self._active_mask(seeds)
                actor_due.append(seeds)
            critic_loss, actor_loss = step(data, active, bool(due), actor_mask)
            critic_losses.append(critic_loss)
            if actor_loss is not None:
                actor_losses.append(actor_loss)

        self.record("train/n_updates", self._n_updates)
        if actor_due:  # each seed's mean over its own delayed steps
            self._record_due_steps("train/actor_loss", actor_losses, actor_due)
        elif actor_losses:
            self.record("train/actor_loss", _mean(actor_losses))
        self.record("train/critic_loss", _mean(critic_losses))
        if k > 1:
            self._check_finite("critic loss", th.stack(critic_losses))
            if actor_losses:
                self._check_finite("actor loss", th.stack(actor_losses))
        return None
