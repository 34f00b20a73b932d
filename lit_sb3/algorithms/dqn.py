"""Deep Q-Network (Mnih et al. 2015) — SB3's DQN as a LightningModule.

Paper: https://arxiv.org/abs/1312.5602, https://www.nature.com/articles/nature14236

The update is in :meth:`DQN.train`; exploration (linear epsilon schedule) and the target-network update
(every ``target_update_interval`` env steps per env, as SB3) are in :meth:`DQN._on_step`. Losses stay tensors
until logged; gradient clipping uses the foreach implementation on a parameter list built once.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.off_policy import OffPolicyAlgorithm
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.schedules import LinearSchedule
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.dqn import CnnPolicy, DQNPolicy, MlpPolicy, MultiInputPolicy, QNetwork
from lit_sb3.policies.seed_stack import clip_grad_norm_per_seed, masked_seed_sum, seed_smooth_l1

__all__ = ["DQN"]


class DQN(OffPolicyAlgorithm):
    """Deep Q-Network, with SB3 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
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
        target_update_interval: update the target network every n env steps (counted per env, as SB3).
        exploration_fraction: fraction of the training over which epsilon decreases.
        exploration_initial_eps: initial epsilon.
        exploration_final_eps: final epsilon.
        max_grad_norm: gradient clipping norm.
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

    zoo_name: ClassVar[str] = "dqn"
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Discrete,)
    default_run_name: ClassVar[str] = "DQN"
    search_space: ClassVar[str | None] = "dqn"
    _loaded_attributes: ClassVar[tuple[str, ...]] = (*OffPolicyAlgorithm._loaded_attributes, "exploration_schedule")
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    policy: DQNPolicy
    q_net: QNetwork
    q_net_target: QNetwork

    def __init__(
        self,
        policy: str | type[DQNPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 1e-4,
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
        exploration_fraction: float = 0.1,
        exploration_initial_eps: float = 1.0,
        exploration_final_eps: float = 0.05,
        max_grad_norm: float = 10,
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
            learning_rate,
            buffer_size,
            learning_starts,
            batch_size,
            tau,
            gamma,
            train_freq,
            gradient_steps,
            action_noise=None,  # no noise: epsilon-greedy exploration
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
        if (
            isinstance(target_update_interval, bool)
            or not isinstance(target_update_interval, int)
            or target_update_interval < 1
        ):
            raise ValueError(
                f"target_update_interval must be an integer >= 1 (env steps), got {target_update_interval!r}."
            )
        for name, value in (
            ("exploration_initial_eps", exploration_initial_eps),
            ("exploration_final_eps", exploration_final_eps),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}.")
        if not 0.0 <= exploration_fraction <= 1.0:
            raise ValueError(f"exploration_fraction must be in [0, 1], got {exploration_fraction}.")
        self.exploration_initial_eps = exploration_initial_eps
        self.exploration_final_eps = exploration_final_eps
        self.exploration_fraction = exploration_fraction
        self.target_update_interval = target_update_interval
        self.max_grad_norm = max_grad_norm
        self.tensorboard_log = tensorboard_log
        # env.step() calls, for the target update
        self._n_calls = 0
        # epsilon of the epsilon-greedy exploration
        self.exploration_rate = 0.0
        self._init_env_and_model(env, _init_setup_model)

    def _setup_model(self) -> None:
        super()._setup_model()
        self._create_aliases()
        self._build_param_lists()
        self.exploration_schedule = LinearSchedule(
            float(self.exploration_initial_eps), float(self.exploration_final_eps), float(self.exploration_fraction)
        )
        if self.n_envs > 1 and self.n_envs > self.target_update_interval:
            warnings.warn(
                "The number of environments used is greater than the target network "
                f"update interval ({self.n_envs} > {self.target_update_interval}), "
                "therefore the target network will be updated after each call to env.step() "
                f"which corresponds to {self.n_envs} steps.",
                stacklevel=2,
            )

    def _create_aliases(self) -> None:
        self.q_net = self.policy.q_net
        self.q_net_target = self.policy.q_net_target

    def _build_param_lists(self) -> None:
        """Parameter lists of the target update and the gradient clipping, built once."""
        self._q_params = list(self.q_net.parameters())
        self._q_target_params = list(self.q_net_target.parameters())
        # BatchNorm running statistics are copied, not averaged (SB3 issue #996)
        self._bn_stats = [b for n, b in self.q_net.named_buffers() if "running_" in n]
        self._bn_stats_target = [b for n, b in self.q_net_target.named_buffers() if "running_" in n]

    def configure_optimizers(self) -> th.optim.Optimizer:
        return self.policy.optimizer

    def _on_step(self) -> None:
        """After each env step: target update every ``target_update_interval // n_envs`` calls, new epsilon."""
        self._n_calls += 1
        if self._n_calls % max(self.target_update_interval // self.n_envs, 1) == 0:
            with th.no_grad():
                th._foreach_lerp_(self._q_target_params, self._q_params, self.tau)
                for stat, stat_target in zip(self._bn_stats, self._bn_stats_target):
                    stat_target.copy_(stat)
        self.exploration_rate = self.exploration_schedule(self._current_progress_remaining)
        self.record("rollout/exploration_rate", self.exploration_rate)

    def train(self, gradient_steps: int | bool = True, batch_size: int = 100) -> Any:
        """DQN update: ``gradient_steps`` Huber-loss steps towards ``r + gamma * (1 - done) * max_a Q_target(s', a)``.

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

        k, active = self.n_seeds, self._active_mask()
        losses = []
        for _ in range(gradient_steps):
            data = self._sample_replay(batch_size)  # [(K,) batch, ...]
            discounts = data.discounts if data.discounts is not None else self.gamma

            # target: greedy value of the next state under the target network
            with th.no_grad():
                next_q_values = self.q_net_target(data.next_observations).max(dim=-1).values.unsqueeze(-1)
                target_q_values = data.rewards + (1 - data.dones) * discounts * next_q_values

            # Q-values of the actions taken
            current_q_values = th.gather(self.q_net(data.observations), dim=-1, index=data.actions.long())

            # Huber loss (less sensitive to outliers), each seed's gradients clipped to max_grad_norm
            loss = seed_smooth_l1(current_q_values, target_q_values, k)
            losses.append(loss.detach())
            optimizer.zero_grad(set_to_none=True)
            self._backward(masked_seed_sum(loss, active))
            clip_grad_norm_per_seed(self._q_params, self.max_grad_norm, k, foreach=True)
            optimizer.step()

        self._n_updates += gradient_steps
        self.record("train/n_updates", self._n_updates)
        self.record("train/loss", losses[0] if len(losses) == 1 else th.stack(losses).mean(0))
        if k > 1:
            self._check_finite("loss", th.stack(losses))
        return None

    def _policy_actions(self, observation: np.ndarray | dict[str, np.ndarray]) -> np.ndarray:
        """Epsilon-greedy actions for a batch of observations (collection path); K seeds: ``[K, n_envs]``, each
        seed drawing whether it explores (for its whole env batch, as its separate run) from its own stream."""
        state = self._seed_state
        if state is not None:
            explore = [rng.rand() < self.exploration_rate for rng in state.np_rngs]
            greedy = None if all(explore) else super()._policy_actions(observation)
            actions = np.empty((self.n_seeds, self.n_envs), dtype=np.int64)
            for i, member in enumerate(state.members):
                if explore[i]:
                    actions[i] = [member.action_space.sample() for _ in range(self.n_envs)]
                else:
                    actions[i] = greedy[i]  # type: ignore[index]
            return actions
        if np.random.rand() < self.exploration_rate:
            n_batch = self.env.num_envs if self.env is not None else 1
            return np.array([self.action_space.sample() for _ in range(n_batch)])
        return super()._policy_actions(observation)

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Greedy action(s), or with probability ``exploration_rate`` random ones when not deterministic.

        Args:
            observation: one observation or a batch.
            state: recurrent state (unused).
            episode_start: episode starts (unused).
            deterministic: always greedy.
        """
        if not self.policy_ready:
            raise RuntimeError("DQN has no policy yet: train it (fit/learn) or load one first.")
        if not deterministic and np.random.rand() < self.exploration_rate:
            if self.policy.is_vectorized_observation(observation):
                if isinstance(observation, dict):
                    n_batch = observation[next(iter(observation.keys()))].shape[0]
                else:
                    n_batch = observation.shape[0]
                action = np.array([self.action_space.sample() for _ in range(n_batch)])
            else:
                action = np.array(self.action_space.sample())
            return action, state
        return self.policy.predict(observation, state, episode_start, deterministic)

    def _sync_member_state(self, i: int, member: Any) -> None:
        member._n_calls = self._n_calls
        member.exploration_rate = self.exploration_rate

    def _extra_save_data(self) -> dict[str, Any]:
        return {"_n_calls": int(self._n_calls), "exploration_rate": float(self.exploration_rate)}

    def _load_extra_save_data(self, data: dict[str, Any]) -> None:
        self._n_calls = int(data.get("_n_calls", 0))
        self.exploration_rate = float(data.get("exploration_rate", 0.0))

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        return {
            **super()._extra_checkpoint_state(),
            "n_calls": self._n_calls,
            "exploration_rate": self.exploration_rate,
        }

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        super()._load_extra_checkpoint_state(state)
        self._n_calls = int(state.get("n_calls", 0))
        self.exploration_rate = float(state.get("exploration_rate", 0.0))
