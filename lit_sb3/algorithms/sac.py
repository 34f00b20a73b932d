"""Soft Actor-Critic (Haarnoja et al. 2018) — SB3's SAC as a LightningModule.

Paper: https://arxiv.org/abs/1801.01290 (automatic entropy tuning: https://arxiv.org/abs/1812.05905).

The whole update is in :meth:`SAC.train`, readable top to bottom. Written for speed: all critics are evaluated
in one batched call (``forward_stacked``), optimizers are fused Adam, the actor loss back-propagates into the
actor's parameters only (``backward(inputs=...)``: the critic's weight gradients, which SB3 computes and throws
away, are skipped), target networks are updated with one ``torch._foreach_lerp_`` over parameter lists built
once, and losses and the entropy coefficient stay tensors (no ``.item()`` per gradient step).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.off_policy import OffPolicyAlgorithm
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.noise import ActionNoise
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.optim import build_optimizer
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.sac import Actor, CnnPolicy, ContinuousCritic, MlpPolicy, MultiInputPolicy, SACPolicy
from lit_sb3.policies.seed_stack import ParamLink, masked_seed_sum, seed_mean, seed_mse

__all__ = ["SAC"]


def _mean(values: list[th.Tensor]) -> th.Tensor:
    """Mean over gradient steps of per-step values (scalars, or ``[K]`` per seed)."""
    return values[0] if len(values) == 1 else th.stack(values).mean(0)


def _check_ent_coef(ent_coef: str | float) -> None:
    if isinstance(ent_coef, str):
        if ent_coef == "auto":
            return
        if ent_coef.startswith("auto_"):
            try:
                init_value = float(ent_coef.split("_", 1)[1])
            except ValueError:
                init_value = float("nan")
            if not init_value > 0.0:
                raise ValueError(
                    f"The initial value of ent_coef must be a number greater than 0, got {ent_coef!r} (e.g. 'auto_0.1')."
                )
            return
        try:
            float(ent_coef)
        except ValueError:
            raise ValueError(
                f"ent_coef must be a float, 'auto' or 'auto_<initial value>' (e.g. 'auto_0.1'), got {ent_coef!r}."
            ) from None
    elif isinstance(ent_coef, bool) or not isinstance(ent_coef, (int, float, np.floating)):
        raise ValueError(f"ent_coef must be a float, 'auto' or 'auto_<initial value>', got {ent_coef!r}.")


class SAC(OffPolicyAlgorithm):
    """Soft Actor-Critic, with SB3 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate (actor, critics and entropy coefficient), constant or schedule.
        buffer_size: replay buffer capacity.
        learning_starts: env steps of uniform random actions before learning.
        batch_size: minibatch size.
        tau: soft update coefficient of the target critics.
        gamma: discount factor.
        train_freq: update every n steps, or ``(n, "episode")``.
        gradient_steps: gradient steps per update (-1: as many as env steps collected).
        action_noise: extra exploration noise (rarely used with SAC).
        replay_buffer_class: replay buffer class (None: chosen automatically).
        replay_buffer_kwargs: replay buffer arguments.
        optimize_memory_usage: memory-efficient replay buffer.
        n_steps: n-step returns.
        ent_coef: entropy coefficient; ``"auto"`` learns it (initial value 1), ``"auto_0.1"`` starts at 0.1.
        target_update_interval: update the target critics every n gradient steps (within an update).
        target_entropy: target entropy when learning ``ent_coef``; ``"auto"`` is ``-dim(A)``.
        use_sde: gSDE exploration instead of Gaussian noise.
        sde_sample_freq: resample the gSDE noise every n steps (-1: once per collection).
        use_sde_at_warmup: gSDE instead of uniform random actions during the warm-up.
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

    zoo_name: ClassVar[str] = "sac"
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Box,)
    default_run_name: ClassVar[str] = "SAC"
    search_space: ClassVar[str | None] = "sac"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    policy: SACPolicy
    actor: Actor
    critic: ContinuousCritic
    critic_target: ContinuousCritic

    def __init__(
        self,
        policy: str | type[SACPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 3e-4,
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
        ent_coef: str | float = "auto",
        target_update_interval: int = 1,
        target_entropy: str | float = "auto",
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
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
            action_noise,
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
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            use_sde_at_warmup=use_sde_at_warmup,
            support_multi_env=True,
        )
        _check_ent_coef(ent_coef)
        if target_entropy != "auto":
            try:
                float(target_entropy)
            except (TypeError, ValueError):
                raise ValueError(f"target_entropy must be 'auto' or a float, got {target_entropy!r}.") from None
        if (
            isinstance(target_update_interval, bool)
            or not isinstance(target_update_interval, int)
            or target_update_interval < 1
        ):
            raise ValueError(f"target_update_interval must be an integer >= 1, got {target_update_interval!r}.")
        self.target_entropy = target_entropy
        self.log_ent_coef: nn.Parameter | None = None
        self.ent_coef = ent_coef
        self.target_update_interval = target_update_interval
        self.ent_coef_optimizer: th.optim.Optimizer | None = None
        if not isinstance(compile_update, bool):
            raise ValueError(f"compile_update must be True or False, got {compile_update!r}.")
        self.compile_update = compile_update
        self.tensorboard_log = tensorboard_log
        self._init_env_and_model(env, _init_setup_model)

    def _setup_model(self) -> None:
        super()._setup_model()
        self._create_aliases()
        if self.target_entropy == "auto":
            self.target_entropy = float(-np.prod(self.action_space.shape).astype(np.float32))  # type: ignore[arg-type]
        else:
            self.target_entropy = float(self.target_entropy)

        # the entropy coefficient (alpha) is learned through its log (https://arxiv.org/abs/1812.05905)
        # (K seeds: K of them, [K], each seed's initial value its separate run's)
        if isinstance(self.ent_coef, str) and self.ent_coef.startswith("auto"):
            init_value = float(self.ent_coef.split("_", 1)[1]) if "_" in self.ent_coef else 1.0
            self.log_ent_coef = nn.Parameter(th.log(th.ones(self.n_seeds, device=self.device) * init_value))
            self.ent_coef_optimizer = build_optimizer(
                th.optim.Adam, [self.log_ent_coef], self.lr_schedule(1), {}, self.n_seeds, self._seeds_sit_out()
            )
            if self._seed_state is not None:
                members = self._seed_state.members
                self._seed_state.links.append(ParamLink(self.log_ent_coef, [m.log_ent_coef for m in members]))
        else:
            self.register_buffer("ent_coef_tensor", th.tensor(float(self.ent_coef), device=self.device))
        self._build_param_lists()

    def _create_aliases(self) -> None:
        self.actor = self.policy.actor
        self.critic = self.policy.critic
        self.critic_target = self.policy.critic_target

    def _build_param_lists(self) -> None:
        """Parameter lists for the target update and the actor backward, built once."""
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._critic_target_params = list(self.critic_target.parameters())
        # BatchNorm running statistics are copied, not averaged (SB3 issue #996)
        self._bn_stats = [b for n, b in self.critic.named_buffers() if "running_" in n]
        self._bn_stats_target = [b for n, b in self.critic_target.named_buffers() if "running_" in n]

    def configure_optimizers(self) -> list[th.optim.Optimizer]:
        return list(self._optimizers_to_save().values())

    def _optimizers_to_save(self) -> dict[str, th.optim.Optimizer]:
        optimizers = {"actor.optimizer": self.actor.optimizer, "critic.optimizer": self.critic.optimizer}
        if self.ent_coef_optimizer is not None:
            optimizers["ent_coef_optimizer"] = self.ent_coef_optimizer
        return optimizers

    def _update_ent_coef(self, log_prob: th.Tensor, losses: list[th.Tensor], due: np.ndarray | None = None) -> None:
        """One step on log(alpha): minimise -log(alpha) * (log pi(a|s) + target_entropy) (none for a fixed alpha).

        Args:
            log_prob: log pi(a|s) of the reparametrised actions, ``[batch, 1]`` (``[K, batch, 1]``).
            losses: where the (detached) per-seed loss is appended for logging.
            due: only these seeds step (host ``[K]`` bool: CrossQ's delayed step, seeds on their own update counts).
        """
        if self.ent_coef_optimizer is None or self.log_ent_coef is None:
            return
        log_ent_coef = self.log_ent_coef if self._seed_state is None else self.log_ent_coef.view(-1, 1, 1)
        ent_coef_loss = -seed_mean(log_ent_coef * (log_prob + self.target_entropy).detach(), self.n_seeds)
        losses.append(ent_coef_loss.detach())
        self.ent_coef_optimizer.zero_grad(set_to_none=True)
        mask = self._active_mask(due)
        self._backward(masked_seed_sum(ent_coef_loss, mask))
        if due is None:
            self.ent_coef_optimizer.step()
        else:
            self.ent_coef_optimizer.step(mask)  # a per-seed optimiser: only the due seeds step

    def _gradient_step(
        self, data: Any, active: th.Tensor | None, update_target: bool
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor | None]:
        """One SAC gradient step on a sampled minibatch: entropy coefficient, critic, actor, target update
        (the optimiser steps included: the unit :meth:`_update_step` compiles).

        Args:
            data: the minibatch (``[batch, ...]`` tensors, ``[K, batch, ...]`` at K > 1).
            active: ``[K]`` bool of the seeds taking the update (None: all).
            update_target: soft-update the target critics after this step.

        Returns:
            The detached critic loss, actor loss, entropy coefficient and entropy-coefficient loss (None when alpha
            is fixed), each a scalar (``[K]`` at K > 1).
        """
        actor, critic, critic_target = self.actor, self.critic, self.critic_target
        n_critics, k = critic.n_critics, self.n_seeds
        # n-step returns carry their own discount gamma ** k
        discounts = data.discounts if data.discounts is not None else self.gamma

        # actions of the current policy (reparametrised) for the sampled states
        actions_pi, log_prob = actor.action_log_prob(data.observations)
        log_prob = log_prob.unsqueeze(-1)

        # entropy coefficient: minimise -log(alpha) * (log_prob + target_entropy)
        ent_coef_losses: list[th.Tensor] = []
        if self.ent_coef_optimizer is not None and self.log_ent_coef is not None:
            ent_coef = th.exp(self.log_ent_coef.detach())
            self._update_ent_coef(log_prob, ent_coef_losses)
        else:
            ent_coef = self.ent_coef_tensor
        logged_ent_coef = ent_coef.reshape(()) if k == 1 else ent_coef.expand(k)
        if k > 1:
            ent_coef = ent_coef.view(-1, 1, 1)  # one alpha per seed

        # critic target: r + gamma * (1 - done) * (min_i Q_target_i(s', a') - alpha * log pi(a'|s'))
        with th.no_grad():
            next_actions, next_log_prob = actor.action_log_prob(data.next_observations)
            next_q_values = critic_target.forward_stacked(data.next_observations, next_actions).min(dim=-3).values
            next_q_values = next_q_values - ent_coef * next_log_prob.unsqueeze(-1)
            target_q_values = data.rewards + (1 - data.dones) * discounts * next_q_values

        # critic loss: 0.5 * sum_i MSE(Q_i(s, a), target), all critics in one batched call
        current_q_values = critic.forward_stacked(data.observations, data.actions)  # [(K,) n_critics, batch, 1]
        target_q_values = target_q_values.unsqueeze(-3).expand_as(current_q_values)
        critic_loss = 0.5 * n_critics * seed_mse(current_q_values, target_q_values, k)
        critic.optimizer.zero_grad(set_to_none=True)
        self._backward(masked_seed_sum(critic_loss, active))
        critic.optimizer.step()

        # actor loss: alpha * log pi(a|s) - min_i Q_i(s, a), a ~ pi (gradients into the actor only)
        min_qf_pi = critic.forward_stacked(data.observations, actions_pi).min(dim=-3).values
        actor_loss = seed_mean(ent_coef * log_prob - min_qf_pi, k)
        actor.optimizer.zero_grad(set_to_none=True)
        self._backward(masked_seed_sum(actor_loss, active), inputs=self._actor_params)
        actor.optimizer.step()

        # soft update of the target critics
        if update_target:
            with th.no_grad():
                th._foreach_lerp_(self._critic_target_params, self._critic_params, self.tau)
                for stat, stat_target in zip(self._bn_stats, self._bn_stats_target):
                    stat_target.copy_(stat)
        ent_coef_loss = ent_coef_losses[0] if ent_coef_losses else None
        return critic_loss.detach(), actor_loss.detach(), logged_ent_coef, ent_coef_loss

    def train(self, gradient_steps: int | bool = True, batch_size: int = 64) -> Any:
        """SAC update: ``gradient_steps`` steps of entropy-coefficient, critic and actor updates.

        Written once for K >= 1 seeds: at K = 1 the tensors are the single-seed ones (``[batch, ...]``), at K > 1
        ``[K, batch, ...]`` with every loss per seed (``[K]``) and the optimisers minimising their sum over the live
        seeds, so that each seed's gradient is its own loss's.

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size (per seed).
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        assert self.replay_buffer is not None
        self._set_policy_training_mode(True)
        optimizers = [self.actor.optimizer, self.critic.optimizer]
        if self.ent_coef_optimizer is not None:
            optimizers.append(self.ent_coef_optimizer)
        self._update_learning_rate(optimizers)
        actor, k, active = self.actor, self.n_seeds, self._active_mask()

        step = self._update_step()
        ent_coef_losses, ent_coefs, actor_losses, critic_losses = [], [], [], []
        for gradient_step in range(gradient_steps):
            data = self._sample_replay(batch_size)
            # log_std may have changed since the last step: resample the gSDE noise
            if self.use_sde:
                actor.reset_noise()
            critic_loss, actor_loss, ent_coef, ent_coef_loss = step(
                data, active, gradient_step % self.target_update_interval == 0
            )
            critic_losses.append(critic_loss)
            actor_losses.append(actor_loss)
            ent_coefs.append(ent_coef)
            if ent_coef_loss is not None:
                ent_coef_losses.append(ent_coef_loss)

        self._n_updates += gradient_steps
        self.record("train/n_updates", self._n_updates)
        self.record("train/ent_coef", _mean(ent_coefs))
        self.record("train/actor_loss", _mean(actor_losses))
        self.record("train/critic_loss", _mean(critic_losses))
        if ent_coef_losses:
            self.record("train/ent_coef_loss", _mean(ent_coef_losses))
        if k > 1:
            self._check_finite("critic loss", th.stack(critic_losses))
            self._check_finite("actor loss", th.stack(actor_losses))
        return None
