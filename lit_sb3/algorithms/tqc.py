"""Truncated Quantile Critics (Kuznetsov et al. 2020) — sb3-contrib's TQC as a LightningModule.

Paper: https://arxiv.org/abs/2005.04269

TQC is SAC with distributional critics: each of the ``n_critics`` critics predicts ``n_quantiles`` atoms of the
return distribution; the target pools the atoms of all target critics, sorts them and drops the
``top_quantiles_to_drop_per_net * n_critics`` largest (the truncation that controls overestimation). It subclasses
:class:`~lit_sb3.algorithms.sac.SAC` and keeps its entropy-coefficient tuning, optimizers and target updates; the
update in :meth:`TQC.train` reads top to bottom. Speed as SAC's: all critics in one batched call, fused Adam, the
actor loss back-propagated into the actor only, ``torch._foreach_lerp_`` target updates, losses kept as tensors.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.sac import SAC, _mean
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.noise import ActionNoise
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.registry import register_class
from lit_sb3.policies.seed_stack import masked_seed_sum, seed_mean
from lit_sb3.policies.tqc import CnnPolicy, MlpPolicy, MultiInputPolicy, QuantileCritic, TQCPolicy
from lit_sb3.utils.quantiles import quantile_huber_loss

__all__ = ["TQC"]

for _cls in (TQCPolicy, CnnPolicy, MultiInputPolicy):
    register_class(_cls)
del _cls


class TQC(SAC):
    """Truncated Quantile Critics, with sb3-contrib 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class
            (``policy_kwargs=dict(n_quantiles=25, n_critics=2)`` by default).
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
        action_noise: extra exploration noise.
        replay_buffer_class: replay buffer class (None: chosen automatically).
        replay_buffer_kwargs: replay buffer arguments.
        optimize_memory_usage: memory-efficient replay buffer.
        n_steps: n-step returns.
        ent_coef: entropy coefficient; ``"auto"`` learns it (initial value 1), ``"auto_0.1"`` starts at 0.1.
        target_update_interval: update the target critics every n gradient steps (within an update).
        target_entropy: target entropy when learning ``ent_coef``; ``"auto"`` is ``-dim(A)``.
        top_quantiles_to_drop_per_net: atoms dropped per critic from the top of the pooled target distribution.
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
    """

    zoo_name: ClassVar[str] = "tqc"
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Box,)
    default_run_name: ClassVar[str] = "TQC"
    search_space: ClassVar[str | None] = "tqc"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    policy: TQCPolicy
    critic: QuantileCritic
    critic_target: QuantileCritic

    def __init__(
        self,
        policy: str | type[TQCPolicy],
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
        top_quantiles_to_drop_per_net: int = 2,
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
    ) -> None:
        # env=None, _init_setup_model=False: the env is attached and the networks built at the end
        super().__init__(
            policy, None, learning_rate, buffer_size, learning_starts, batch_size, tau, gamma, train_freq,
            gradient_steps, action_noise, replay_buffer_class, replay_buffer_kwargs, optimize_memory_usage, n_steps,
            ent_coef, target_update_interval, target_entropy, use_sde, sde_sample_freq, use_sde_at_warmup,
            monitor_wrapper, stats_window_size, tensorboard_log, policy_kwargs, verbose, seed, device, False,
        )  # fmt: skip
        if (
            isinstance(top_quantiles_to_drop_per_net, bool)
            or not isinstance(top_quantiles_to_drop_per_net, int)
            or top_quantiles_to_drop_per_net < 0
        ):
            raise ValueError(
                f"top_quantiles_to_drop_per_net must be an integer >= 0, got {top_quantiles_to_drop_per_net!r}."
            )
        n_quantiles = self.policy_kwargs.get("n_quantiles", 25)
        if isinstance(n_quantiles, int) and top_quantiles_to_drop_per_net >= n_quantiles:
            raise ValueError(
                f"top_quantiles_to_drop_per_net={top_quantiles_to_drop_per_net} would drop every atom: it must be "
                f"smaller than n_quantiles={n_quantiles}."
            )
        self.top_quantiles_to_drop_per_net = top_quantiles_to_drop_per_net
        self._init_env_and_model(env, _init_setup_model)

    def train(self, gradient_steps: int | bool = True, batch_size: int = 64) -> Any:
        """TQC update: ``gradient_steps`` steps of entropy-coefficient, critic and actor updates.

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size.
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        assert self.replay_buffer is not None
        self._set_policy_training_mode(True)
        optimizers = [self.actor.optimizer, self.critic.optimizer]
        if self.ent_coef_optimizer is not None:
            optimizers.append(self.ent_coef_optimizer)
        self._update_learning_rate(optimizers)
        actor, critic, critic_target = self.actor, self.critic, self.critic_target
        # k = N * M - d * M atoms kept out of the M critics' N atoms each (d dropped per critic)
        n_target_quantiles = critic.quantiles_total - self.top_quantiles_to_drop_per_net * critic.n_critics
        k, active = self.n_seeds, self._active_mask()

        ent_coef_losses, ent_coefs, actor_losses, critic_losses = [], [], [], []
        for gradient_step in range(gradient_steps):
            data = self._sample_replay(batch_size)  # [(K,) batch, ...]
            discounts = data.discounts if data.discounts is not None else self.gamma
            if self.use_sde:
                actor.reset_noise()

            # a ~ pi(.|s), reparametrised
            actions_pi, log_prob = actor.action_log_prob(data.observations)
            log_prob = log_prob.unsqueeze(-1)

            # entropy coefficient (as SAC): minimise -log(alpha) * (log pi(a|s) + target_entropy)
            if self.ent_coef_optimizer is not None and self.log_ent_coef is not None:
                ent_coef = th.exp(self.log_ent_coef.detach())
                self._update_ent_coef(log_prob, ent_coef_losses)
            else:
                ent_coef = self.ent_coef_tensor
            ent_coefs.append(ent_coef.reshape(()) if k == 1 else ent_coef.expand(k))
            if k > 1:
                ent_coef = ent_coef.view(-1, 1, 1)  # one alpha per seed

            with th.no_grad():
                # pooled atoms of all target critics at (s', a'), a' ~ pi(.|s'): Z(s', a') = {z_m^(n)}  [batch, N*M]
                next_actions, next_log_prob = actor.action_log_prob(data.next_observations)
                next_quantiles = critic_target.forward_stacked(data.next_observations, next_actions)
                lead = next_quantiles.shape[:-3]  # (K,) at K > 1
                next_quantiles = next_quantiles.transpose(-3, -2).reshape(*lead, batch_size, -1)
                # truncation: keep the k smallest atoms z_(1) <= ... <= z_(k)  (eq. 10)
                next_quantiles = th.sort(next_quantiles, dim=-1).values[..., :n_target_quantiles]
                # y_i = r + gamma * (1 - done) * (z_(i) - alpha * log pi(a'|s'))  (eq. 11)
                target_quantiles = next_quantiles - ent_coef * next_log_prob.unsqueeze(-1)
                target_quantiles = data.rewards + (1 - data.dones) * discounts * target_quantiles

            # critic loss: 1/(kNM) sum_{n,m,i} rho^H_{tau_m}(y_i - theta_m^(n)(s, a))  (eq. 12), all critics at once
            current_quantiles = critic.forward_stacked(data.observations, data.actions)  # [(K,) n_critics, batch, N]
            critic_loss = quantile_huber_loss(
                current_quantiles, target_quantiles.unsqueeze(-3), sum_over_quantiles=False, n_seeds=k
            )
            critic_losses.append(critic_loss.detach())
            critic.optimizer.zero_grad(set_to_none=True)
            self._backward(masked_seed_sum(critic_loss, active))
            critic.optimizer.step()

            # actor loss: alpha * log pi(a|s) - 1/(NM) sum_{n,m} theta_m^(n)(s, a)  (eq. 13; gradients into the actor)
            qf_pi = critic.forward_stacked(data.observations, actions_pi).mean(dim=(-3, -1)).unsqueeze(-1)
            actor_loss = seed_mean(ent_coef * log_prob - qf_pi, k)
            actor_losses.append(actor_loss.detach())
            actor.optimizer.zero_grad(set_to_none=True)
            self._backward(masked_seed_sum(actor_loss, active), inputs=self._actor_params)
            actor.optimizer.step()

            # soft update of the target critics
            if gradient_step % self.target_update_interval == 0:
                with th.no_grad():
                    th._foreach_lerp_(self._critic_target_params, self._critic_params, self.tau)
                    for stat, stat_target in zip(self._bn_stats, self._bn_stats_target):
                        stat_target.copy_(stat)

        self._n_updates += gradient_steps
        self.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.record("train/ent_coef", _mean(ent_coefs))
        self.record("train/actor_loss", _mean(actor_losses))
        self.record("train/critic_loss", _mean(critic_losses))
        if ent_coef_losses:
            self.record("train/ent_coef_loss", _mean(ent_coef_losses))
        if k > 1:
            self._check_finite("critic loss", th.stack(critic_losses))
            self._check_finite("actor loss", th.stack(actor_losses))
        return None
