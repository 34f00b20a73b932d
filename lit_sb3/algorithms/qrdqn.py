"""Quantile Regression DQN (Dabney et al. 2017) — sb3-contrib's QR-DQN as a LightningModule.

Paper: https://arxiv.org/abs/1710.10044

QR-DQN learns N quantiles ``theta_i(s, a)`` (levels ``tau_i = (2i + 1) / 2N``) of the return distribution
instead of its mean. It is DQN with a distributional head and the quantile Huber loss, so it subclasses
:class:`~lit_sb3.algorithms.dqn.DQN` and keeps its epsilon-greedy schedule and its target-network cadence
(``target_update_interval`` env steps, counted per env); only the networks and the update in :meth:`QRDQN.train`
differ. Losses stay tensors until logged; the target update is one ``torch._foreach_lerp_``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.dqn import DQN
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.qrdqn import CnnPolicy, MlpPolicy, MultiInputPolicy, QRDQNPolicy, QuantileNetwork
from lit_sb3.policies.registry import register_class
from lit_sb3.policies.seed_stack import clip_grad_norm_per_seed, masked_seed_sum
from lit_sb3.utils.quantiles import quantile_huber_loss

__all__ = ["QRDQN"]

for _cls in (QRDQNPolicy, CnnPolicy, MultiInputPolicy):
    register_class(_cls)
del _cls


class QRDQN(DQN):
    """Quantile Regression DQN, with sb3-contrib 2.x arguments and defaults (tuned for Atari, as the paper).

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class
            (``policy_kwargs=dict(n_quantiles=...)`` sets N, default 200).
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate, constant or schedule.
        buffer_size: replay buffer capacity.
        learning_starts: env steps of uniform random actions before learning.
        batch_size: minibatch size.
        tau: soft update coefficient of the target network (1: hard update).
        gamma: discount factor.
        train_freq: update every n steps, or ``(n, "episode")``.
        gradient_steps: gradient steps per update (-1: as many as env steps collected).
        replay_buffer_class: replay buffer class (None: chosen automatically).
        replay_buffer_kwargs: replay buffer arguments.
        optimize_memory_usage: memory-efficient replay buffer.
        n_steps: n-step returns.
        target_update_interval: update the target network every n env steps (counted per env).
        exploration_fraction: fraction of the training over which epsilon decreases.
        exploration_initial_eps: initial epsilon.
        exploration_final_eps: final epsilon.
        max_grad_norm: gradient clipping norm (None: no clipping).
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        stats_window_size: episodes averaged for logging.
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        policy_kwargs: policy arguments; without ``optimizer_class``, Adam with ``eps=0.01 / batch_size``
            (the paper's setting, as sb3-contrib).
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
    """

    zoo_name: ClassVar[str] = "qrdqn"
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Discrete,)
    default_run_name: ClassVar[str] = "QRDQN"
    search_space: ClassVar[str | None] = "qrdqn"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    policy: QRDQNPolicy
    quantile_net: QuantileNetwork
    quantile_net_target: QuantileNetwork

    def __init__(
        self,
        policy: str | type[QRDQNPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 5e-5,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 32,
        tau: float = 1.0,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 4,
        gradient_steps: int = 1,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        target_update_interval: int = 10000,
        exploration_fraction: float = 0.005,
        exploration_initial_eps: float = 1.0,
        exploration_final_eps: float = 0.01,
        max_grad_norm: float | None = None,
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
            gradient_steps, replay_buffer_class, replay_buffer_kwargs, optimize_memory_usage, n_steps,
            target_update_interval, exploration_fraction, exploration_initial_eps, exploration_final_eps,
            max_grad_norm,  # type: ignore[arg-type]
            monitor_wrapper, stats_window_size, tensorboard_log, policy_kwargs, verbose, seed, device, False,
        )  # fmt: skip
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm!r}.")
        if "optimizer_class" not in self.policy_kwargs:
            # the paper's Adam epsilon (0.01 / batch size); fused, as every lit_sb3 Adam
            self.policy_kwargs["optimizer_class"] = th.optim.Adam
            self.policy_kwargs["optimizer_kwargs"] = dict(eps=0.01 / batch_size)
        self._init_env_and_model(env, _init_setup_model)

    def _create_aliases(self) -> None:
        self.quantile_net = self.policy.quantile_net
        self.quantile_net_target = self.policy.quantile_net_target
        self.n_quantiles = self.policy.n_quantiles

    def _build_param_lists(self) -> None:
        """Parameter lists of the target update (DQN's :meth:`_on_step`) and the gradient clipping, built once."""
        self._q_params = list(self.quantile_net.parameters())
        self._q_target_params = list(self.quantile_net_target.parameters())
        # BatchNorm running statistics are copied, not averaged (SB3 issue #996)
        self._bn_stats = [b for n, b in self.quantile_net.named_buffers() if "running_" in n]
        self._bn_stats_target = [b for n, b in self.quantile_net_target.named_buffers() if "running_" in n]

    def train(self, gradient_steps: int | bool = True, batch_size: int = 100) -> Any:
        """QR-DQN update: ``gradient_steps`` quantile-regression steps (Dabney et al. 2017, Algorithm 1).

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size.
        """
        if isinstance(gradient_steps, bool):
            return nn.Module.train(self, gradient_steps)
        assert self.replay_buffer is not None
        self._set_policy_training_mode(True)
        optimizer = self.policy.optimizer
        self._update_learning_rate(optimizer)
        n_quantiles, k, active = self.n_quantiles, self.n_seeds, self._active_mask()

        losses = []
        for _ in range(gradient_steps):
            data = self._sample_replay(batch_size)  # [(K,) batch, ...]
            discounts = data.discounts if data.discounts is not None else self.gamma

            with th.no_grad():
                # a* = argmax_a' Q(s', a'), with Q(s', a') = 1/N sum_j theta_j^target(s', a')
                next_quantiles = self.quantile_net_target(data.next_observations)  # [(K,) batch, N, n_actions]
                next_greedy = next_quantiles.mean(dim=-2, keepdim=True).argmax(dim=-1, keepdim=True)
                next_greedy = next_greedy.expand(*next_greedy.shape[:-2], n_quantiles, 1)
                next_quantiles = next_quantiles.gather(-1, next_greedy).squeeze(-1)
                # T theta_j = r + gamma * (1 - done) * theta_j^target(s', a*)        [(K,) batch, N]
                target_quantiles = data.rewards + (1 - data.dones) * discounts * next_quantiles

            # theta_i(s, a) of the actions taken                                     [(K,) batch, N]
            current_quantiles = self.quantile_net(data.observations)
            actions = data.actions.long().unsqueeze(-2)
            actions = actions.expand(*actions.shape[:-2], n_quantiles, 1)
            current_quantiles = current_quantiles.gather(-1, actions).squeeze(-1)

            # loss = sum_i E_j [rho^kappa_tau_i(T theta_j - theta_i)]   (eq. 10, kappa = 1), per seed
            loss = quantile_huber_loss(current_quantiles, target_quantiles, sum_over_quantiles=True, n_seeds=k)
            losses.append(loss.detach())
            optimizer.zero_grad(set_to_none=True)
            self._backward(masked_seed_sum(loss, active))
            if self.max_grad_norm is not None:
                clip_grad_norm_per_seed(self._q_params, self.max_grad_norm, k, foreach=True)
            optimizer.step()

        self._n_updates += gradient_steps
        self.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.record("train/loss", losses[0] if len(losses) == 1 else th.stack(losses).mean(0))
        if k > 1:
            self._check_finite("loss", th.stack(losses))
        return None
