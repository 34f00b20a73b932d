"""Deep Deterministic Policy Gradient (Lillicrap et al. 2016) — SB3's DDPG as a LightningModule.

Paper: https://arxiv.org/abs/1509.02971

As in SB3, DDPG is TD3 without its tricks: one critic (``n_critics=1`` unless ``policy_kwargs`` says
otherwise), the actor updated at every critic update (``policy_delay=1``) and no target policy smoothing
(``target_noise_clip=0``). The update is :meth:`lit_sb3.algorithms.td3.TD3.train`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch as th

from lit_sb3.algorithms.td3 import TD3
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.core.noise import ActionNoise
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.td3 import TD3Policy

__all__ = ["DDPG"]


class DDPG(TD3):
    """Deep Deterministic Policy Gradient, with SB3 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate (actor and critic), constant or schedule.
        buffer_size: replay buffer capacity.
        learning_starts: env steps of uniform random actions before learning.
        batch_size: minibatch size.
        tau: soft update coefficient of the targets.
        gamma: discount factor.
        train_freq: update every n steps, or ``(n, "episode")``.
        gradient_steps: gradient steps per update (-1: as many as env steps collected).
        action_noise: exploration noise (e.g. ``NormalActionNoise``).
        replay_buffer_class: replay buffer class (None: chosen automatically).
        replay_buffer_kwargs: replay buffer arguments.
        optimize_memory_usage: memory-efficient replay buffer.
        n_steps: n-step returns.
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        policy_kwargs: policy arguments (``n_critics`` defaults to 1).
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
        compile_update: run each gradient step (losses, backward, optimiser steps, target update) through
            ``torch.compile`` (opt-in; the first update pays the compilation; same random streams as eager; on one
            CPU core measured 0.88-0.97x of eager, see benchmarks/README.md).
    """

    zoo_name: ClassVar[str] = "ddpg"
    default_run_name: ClassVar[str] = "DDPG"
    search_space: ClassVar[str | None] = "td3"  # the zoo tunes DDPG in TD3's space

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
        monitor_wrapper: bool = True,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        compile_update: bool = False,
    ) -> None:
        super().__init__(
            policy=policy,
            learning_rate=learning_rate,
            buffer_size=buffer_size,
            learning_starts=learning_starts,
            batch_size=batch_size,
            tau=tau,
            gamma=gamma,
            train_freq=train_freq,
            gradient_steps=gradient_steps,
            action_noise=action_noise,
            replay_buffer_class=replay_buffer_class,
            replay_buffer_kwargs=replay_buffer_kwargs,
            optimize_memory_usage=optimize_memory_usage,
            n_steps=n_steps,
            policy_kwargs=policy_kwargs,
            monitor_wrapper=monitor_wrapper,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            device=device,
            _init_setup_model=False,
            seed=seed,
            compile_update=compile_update,
            # TD3 without its tricks
            policy_delay=1,
            target_noise_clip=0.0,
            target_policy_noise=0.1,
        )
        # a single critic
        if "n_critics" not in self.policy_kwargs:
            self.policy_kwargs["n_critics"] = 1
        self._init_env_and_model(env, _init_setup_model)
