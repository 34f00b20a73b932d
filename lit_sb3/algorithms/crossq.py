"""CrossQ (Bhatt et al. 2024) — sb3-contrib's CrossQ as a LightningModule.

Paper: https://arxiv.org/abs/1902.05605 (ICLR 2024, "CrossQ: Batch Normalization in Deep Reinforcement Learning
for Greater Sample Efficiency and Simplicity").

CrossQ is SAC without target networks: the critics carry Batch Renormalization layers and evaluate (s, a) and
(s', a') in ONE joint forward pass, so that the normalisation statistics are those of the mixture of both
batches; the bootstrap target uses the current critics (stopped gradient). The actor (and the entropy
coefficient) is updated every ``policy_delay`` gradient steps. It subclasses :class:`~lit_sb3.algorithms.sac.SAC`
and keeps its entropy-coefficient tuning and optimizers; the update in :meth:`CrossQ.train` reads top to bottom.
Speed: the joint forward of all critics is one batched call, fused Adam, the actor loss back-propagated into the
actor only, BatchRenorm modes switched by flipping a flag on a list built once, losses kept as tensors.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.sac import SAC, _mean
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.noise import ActionNoise
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.batch_renorm import BatchRenorm
from lit_sb3.policies.crossq import CrossQActor, CrossQCritic, CrossQPolicy, MlpPolicy
from lit_sb3.policies.registry import register_class
from lit_sb3.policies.seed_stack import masked_seed_sum, seed_mean, seed_mse

__all__ = ["CrossQ"]

register_class(CrossQPolicy)


def _set_mode(modules: list[nn.Module], mode: bool) -> None:
    """Training (``True``: batch statistics, running statistics updated) or evaluation mode of BatchRenorm layers."""
    for module in modules:
        module.training = mode


def _set_active(modules: list[BatchRenorm], seeds: np.ndarray | None) -> None:
    """K seeds: the seeds (host ``[K]`` bool) whose training-mode passes of these BatchRenorm layers count and move
    their running statistics (None: every seed)."""
    for module in modules:
        module.active = seeds


class CrossQ(SAC):
    """CrossQ, with sb3-contrib 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate (actor, critics and entropy coefficient), constant or schedule.
        buffer_size: replay buffer capacity.
        learning_starts: env steps of uniform random actions before learning.
        batch_size: minibatch size.
        gamma: discount factor.
        train_freq: update every n steps, or ``(n, "episode")``.
        gradient_steps: gradient steps per update (-1: as many as env steps collected).
        action_noise: extra exploration noise.
        replay_buffer_class: replay buffer class (None: chosen automatically).
        replay_buffer_kwargs: replay buffer arguments.
        optimize_memory_usage: memory-efficient replay buffer.
        n_steps: n-step returns.
        ent_coef: entropy coefficient; ``"auto"`` learns it (initial value 1), ``"auto_0.1"`` starts at 0.1.
        target_entropy: target entropy when learning ``ent_coef``; ``"auto"`` is ``-dim(A)``.
        policy_delay: update the actor and the entropy coefficient every n gradient steps.
        use_sde: gSDE exploration instead of Gaussian noise.
        sde_sample_freq: resample the gSDE noise every n steps (-1: once per collection).
        use_sde_at_warmup: gSDE instead of uniform random actions during the warm-up.
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        stats_window_size: episodes averaged for logging.
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        policy_kwargs: policy arguments (``batch_norm_momentum``, ``renorm_warmup_steps``, ...).
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
    """

    zoo_name: ClassVar[str] = "crossq"
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Box,)
    default_run_name: ClassVar[str] = "CrossQ"
    search_space: ClassVar[str | None] = "crossq"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": MlpPolicy}
    policy: CrossQPolicy
    actor: CrossQActor
    critic: CrossQCritic

    def __init__(
        self,
        policy: str | type[CrossQPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 1e-3,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 1,
        gradient_steps: int = 1,
        action_noise: ActionNoise | None = None,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        ent_coef: str | float = "auto",
        target_entropy: str | float = "auto",
        policy_delay: int = 3,
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
        super().__init__(
            policy,
            None,
            learning_rate,
            buffer_size,
            learning_starts,
            batch_size,
            1.0,
            gamma,
            train_freq,
            gradient_steps,
            action_noise,
            replay_buffer_class,
            replay_buffer_kwargs,
            optimize_memory_usage,
            n_steps,
            ent_coef,
            1,
            target_entropy,
            use_sde,
            sde_sample_freq,
            use_sde_at_warmup,
            monitor_wrapper,
            stats_window_size,
            tensorboard_log,
            policy_kwargs,
            verbose,
            seed,
            device,
            False,
        )  # fmt: skip  (tau=1, target_update_interval=1: unused, CrossQ has no target networks; env=None and
        # _init_setup_model=False: the env is attached and the networks built at the end, as in SB3's subclasses)
        if isinstance(policy_delay, bool) or not isinstance(policy_delay, int) or policy_delay < 1:
            raise ValueError(f"policy_delay must be an integer >= 1, got {policy_delay!r}.")
        self.policy_delay = policy_delay
        self._init_env_and_model(env, _init_setup_model)

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Seed i's BatchRenorm warm-up counters into member i."""
        super()._sync_member_state(i, member)
        for mine, theirs in zip(self._all_norms, member._all_norms):  # type: ignore[attr-defined]
            theirs.steps.copy_(mine.steps[i])
            theirs._steps = int(mine._steps[i])

    def _setup_model(self) -> None:
        super()._setup_model()
        # BatchRenorm behaves differently in training and evaluation mode: collection must use evaluation mode.
        # Whether any OTHER module does (a user's extractor with Dropout, say): if not, switching modes only flips
        # the BatchRenorm flags (see _set_policy_training_mode)
        self._other_modes_matter = self._mode_matters
        self._mode_matters = True

    def _set_policy_training_mode(self, mode: bool) -> None:
        """Training/evaluation mode: the BatchRenorm layers' flags (a list built once) rather than the recursive
        ``policy.set_training_mode`` over every module, once per collect/update cycle, unless another module of
        the policy depends on the mode."""
        if self._other_modes_matter:
            self.policy.set_training_mode(mode)
        else:
            _set_mode(self._all_norms, mode)

    def _create_aliases(self) -> None:
        self.actor = self.policy.actor
        self.critic = self.policy.critic

    def _build_param_lists(self) -> None:
        """Parameter and BatchRenorm lists, built once."""
        self._actor_params = list(self.actor.parameters())
        self._actor_norms = [m for m in self.actor.modules() if isinstance(m, BatchRenorm)]
        self._critic_norms = [m for m in self.critic.modules() if isinstance(m, BatchRenorm)]
        self._all_norms = self._actor_norms + self._critic_norms

    def train(self, gradient_steps: int | bool = True, batch_size: int = 64) -> Any:
        """CrossQ update: ``gradient_steps`` critic steps, the actor and entropy coefficient every ``policy_delay``.

        Written once for K >= 1 seeds (as :meth:`SAC.train`): ``[batch, ...]`` tensors at K = 1, ``[K, batch, ...]``
        at K > 1 with per-seed losses ``[K]`` and per-seed BatchRenorm statistics.

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
        actor, critic = self.actor, self.critic
        n_critics, k, active = critic.n_critics, self.n_seeds, self._active_mask()
        batch_dim = 0 if k == 1 else 1  # where (s, s') and (a, a') are joined
        # K seeds on their own update schedules: only the seeds taking this update count BatchRenorm passes
        updating = self._updating_seeds()
        if updating is not None:
            _set_active(self._critic_norms, updating)

        ent_coef_losses, ent_coefs, actor_losses, critic_losses, actor_due = [], [], [], [], []
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = self._sample_replay(batch_size)
            discounts = data.discounts if data.discounts is not None else self.gamma
            if self.use_sde:
                actor.reset_noise()

            # alpha of this step (the entropy coefficient is updated with the actor, below); one per seed
            ent_coef = th.exp(self.log_ent_coef.detach()) if self.log_ent_coef is not None else self.ent_coef_tensor
            ent_coefs.append(ent_coef.reshape(()) if k == 1 else ent_coef.expand(k))
            if k > 1:
                ent_coef = ent_coef.view(-1, 1, 1)

            # a' ~ pi(.|s'), the actor's BatchRenorm in evaluation mode (running statistics)
            with th.no_grad():
                _set_mode(self._actor_norms, False)
                next_actions, next_log_prob = actor.action_log_prob(data.next_observations)

            # joint forward of [s, s'] and [a, a'] through all critics: BatchRenorm statistics of the mixture
            _set_mode(self._critic_norms, True)
            all_q_values = critic.forward_stacked(
                th.cat([data.observations, data.next_observations], dim=batch_dim),
                th.cat([data.actions, next_actions], dim=batch_dim),
            )  # [(K,) n_critics, 2 * batch, 1]
            _set_mode(self._critic_norms, False)
            current_q_values, next_q_values = all_q_values.split(batch_size, dim=-2)

            # target without target networks: y = r + gamma * (1 - done) * (min_i Q_i(s', a') - alpha log pi(a'|s'))
            with th.no_grad():
                next_q_values = next_q_values.detach().min(dim=-3).values - ent_coef * next_log_prob.unsqueeze(-1)
                target_q_values = data.rewards + (1 - data.dones) * discounts * next_q_values

            # critic loss: 0.5 * sum_i MSE(Q_i(s, a), y)
            target_q_values = target_q_values.unsqueeze(-3).expand_as(current_q_values)
            critic_loss = 0.5 * n_critics * seed_mse(current_q_values, target_q_values, k)
            critic_losses.append(critic_loss.detach())
            critic.optimizer.zero_grad(set_to_none=True)
            self._backward(masked_seed_sum(critic_loss, active))
            critic.optimizer.step()

            # delayed actor step; K seeds on their own update counts ([K], train_freq in episodes) take it when
            # their own count is due (`seeds`: [K] bool), the others' actors, alphas and actor statistics stay
            due, seeds = self._due(self.policy_delay)
            if due:
                mask = active if seeds is None else self._active_mask(seeds)
                if seeds is not None:
                    actor_due.append(seeds)
                    _set_active(self._actor_norms, seeds)

                # a ~ pi(.|s), the actor's BatchRenorm in training mode
                _set_mode(self._actor_norms, True)
                actions_pi, log_prob = actor.action_log_prob(data.observations)
                log_prob = log_prob.unsqueeze(-1)
                _set_mode(self._actor_norms, False)

                # entropy coefficient: minimise -log(alpha) * (log pi(a|s) + target_entropy)
                self._update_ent_coef(log_prob, ent_coef_losses, seeds)

                # actor loss: alpha * log pi(a|s) - min_i Q_i(s, a), critics in evaluation mode, gradients into the actor
                min_qf_pi = critic.forward_stacked(data.observations, actions_pi).min(dim=-3).values
                actor_loss = seed_mean(ent_coef * log_prob - min_qf_pi, k)
                actor_losses.append(actor_loss.detach())
                actor.optimizer.zero_grad(set_to_none=True)
                self._backward(masked_seed_sum(actor_loss, mask), inputs=self._actor_params)
                if seeds is None:
                    actor.optimizer.step()
                else:
                    actor.optimizer.step(mask)  # a per-seed optimiser: only the due seeds step

        if updating is not None:
            _set_active(self._all_norms, None)
        self.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.record("train/ent_coef", _mean(ent_coefs))
        if actor_due:  # each seed's mean over its own delayed steps
            self._record_due_steps("train/actor_loss", actor_losses, actor_due)
        elif actor_losses:
            self.record("train/actor_loss", _mean(actor_losses))
        self.record("train/critic_loss", _mean(critic_losses))
        if actor_due and ent_coef_losses:
            self._record_due_steps("train/ent_coef_loss", ent_coef_losses, actor_due)
        elif ent_coef_losses:
            self.record("train/ent_coef_loss", _mean(ent_coef_losses))
        if k > 1:
            self._check_finite("critic loss", th.stack(critic_losses))
            if actor_losses:
                self._check_finite("actor loss", th.stack(actor_losses))
        return None
