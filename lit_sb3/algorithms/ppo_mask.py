"""MaskablePPO: PPO with invalid-action masking (Huang & Ontañón 2020), sb3-contrib's ``MaskablePPO`` as a
LightningModule.

What differs from :class:`~lit_sb3.algorithms.ppo.PPO`, top to bottom:

1. collection: before each step the env's masks are read (``env.env_method("action_masks")``), the action is
   sampled among the allowed ones only, and the masks are stored in the rollout buffer with the step;
2. update: PPO's clipped-surrogate update (:meth:`PPO.train`, unchanged), with the log-probabilities and the
   entropy of each minibatch computed under the masks its actions were chosen under;
3. inference: ``predict(obs, action_masks=...)``; ``evaluate_policy(..., use_masking=True)`` and the library's
   EvalCallback read the masks from the evaluation env.

Training uses the masks unless told not to (sb3-contrib's ``learn(..., use_masking=False)``; through
``RLTrainer.fit``: set ``model.use_masking = False`` first): then every action is allowed in collection and in the
update, and the env needs no ``action_masks()``. With masks, an env without ``action_masks()`` is refused when the
fit starts.
"""

from __future__ import annotations

import pathlib
from typing import Any, ClassVar, Literal

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.ppo import PPO
from lit_sb3.buffers.maskable import MaskableDictRolloutBuffer, MaskableRolloutBuffer
from lit_sb3.buffers.rollout import RolloutBuffer
from lit_sb3.core.masking import get_action_masks, is_masking_supported
from lit_sb3.core.types import GymEnv, MaybeCallback, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.maskable import (
    MaskableActorCriticCnnPolicy,
    MaskableActorCriticPolicy,
    MaskableMultiInputActorCriticPolicy,
)
from lit_sb3.vec_env import VecEnv

__all__ = ["MaskablePPO"]


class MaskablePPO(PPO):
    """PPO (clip) with invalid-action masking, with sb3-contrib 2.9 arguments and defaults (no gSDE).

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a MaskableActorCriticPolicy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate, constant or a schedule of ``progress_remaining``.
        n_steps: steps per env per update.
        batch_size: minibatch size.
        n_epochs: passes over the rollout per update.
        gamma: discount factor.
        gae_lambda: GAE bias/variance trade-off.
        clip_range: clipping parameter (constant or schedule).
        clip_range_vf: value clipping parameter (None: none).
        normalize_advantage: normalise advantages per minibatch.
        ent_coef: entropy coefficient.
        vf_coef: value loss coefficient.
        max_grad_norm: gradient clipping norm.
        rollout_buffer_class: rollout buffer class (None: MaskableRolloutBuffer or MaskableDictRolloutBuffer).
        rollout_buffer_kwargs: rollout buffer kwargs.
        target_kl: stop the epochs early when the approximate KL exceeds ``1.5 * target_kl``.
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

    zoo_name: ClassVar[str] = "ppo_mask"
    # its collection and update are written over the seed dimension (SeedBatch(MaskablePPO, seeds=[...]))
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
    )
    default_run_name: ClassVar[str] = "MaskablePPO"
    search_space: ClassVar[str | None] = "ppo"  # the zoo tunes MaskablePPO with PPO's sampler
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MaskableActorCriticPolicy,
        "CnnPolicy": MaskableActorCriticCnnPolicy,
        "MultiInputPolicy": MaskableMultiInputActorCriticPolicy,
    }
    #: ``predict`` takes ``action_masks``; evaluations read them from the env (``use_masking``)
    supports_action_masks: ClassVar[bool] = True
    policy: MaskableActorCriticPolicy
    #: train with the env's action masks (sb3-contrib's ``learn(use_masking=...)``); set it before ``RLTrainer.fit``
    use_masking: bool = True

    def __init__(
        self,
        policy: str | type[MaskableActorCriticPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule = 0.2,
        clip_range_vf: None | float | Schedule = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float | None = None,
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
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            gae_lambda=gae_lambda,
            clip_range=clip_range,
            clip_range_vf=clip_range_vf,
            normalize_advantage=normalize_advantage,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=False,
            sde_sample_freq=-1,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            target_kl=target_kl,
            monitor_wrapper=monitor_wrapper,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        self._init_env_and_model(env, _init_setup_model)

    # ------------------------------------------------------------------
    # Set-up: masked policy and buffer
    # ------------------------------------------------------------------

    def _default_rollout_buffer_class(self) -> type[RolloutBuffer]:
        return MaskableDictRolloutBuffer if isinstance(self.observation_space, spaces.Dict) else MaskableRolloutBuffer

    def _make_policy(self) -> MaskableActorCriticPolicy:
        policy = self.policy_class(self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs)
        if not isinstance(policy, MaskableActorCriticPolicy):
            raise ValueError(f"MaskablePPO needs a MaskableActorCriticPolicy, got {type(policy).__name__}")
        return policy

    def _prepare_fit(self) -> None:
        for env in self.envs:  # K > 1: every seed's env
            if self.use_masking and not is_masking_supported(env):
                get_action_masks(env)  # raises the one-line error naming the env
        if not isinstance(self.rollout_buffer, (MaskableRolloutBuffer, MaskableDictRolloutBuffer)):
            raise ValueError(
                f"MaskablePPO needs a rollout buffer that stores action masks, got {type(self.rollout_buffer).__name__}"
            )
        super()._prepare_fit()

    # ------------------------------------------------------------------
    # 1. collection: sample among the allowed actions, store the masks
    # ------------------------------------------------------------------

    def _rollout_policy_step(
        self, env: VecEnv, obs_tensor: th.Tensor | dict[str, th.Tensor]
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, dict[str, Any]]:
        action_masks = None  # None: all allowed, stored as such
        if self.use_masking:  # K > 1 (env None): each seed's env's masks, [K, n_envs, mask_dims]
            action_masks = (
                get_action_masks(env) if env is not None else np.stack([get_action_masks(e) for e in self.envs])
            )
        actions, values, log_probs = self.policy(obs_tensor, action_masks=action_masks)
        return actions, values, log_probs, {"action_masks": action_masks}

    # ------------------------------------------------------------------
    # 2. update: PPO's losses under the stored masks
    # ------------------------------------------------------------------

    def _evaluate_minibatch(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, Any, Any]:
        values, log_prob, entropy = self.policy.evaluate_actions(
            rollout_data.observations, actions, action_masks=rollout_data.action_masks
        )
        return values, log_prob, entropy, rollout_data

    # ------------------------------------------------------------------
    # 3. learn (sb3-contrib's use_masking) and inference
    # ------------------------------------------------------------------

    def learn(  # type: ignore[override]
        self,
        total_timesteps: int,
        env: Any = None,
        callback: MaybeCallback = None,
        log_every_n_steps: int | None = None,
        tb_log_name: str | None = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        default_root_dir: str | pathlib.Path | None = None,
        use_masking: bool = True,
        log_interval: int | None | Literal["default"] = "default",
    ) -> MaskablePPO:
        """Train for ``total_timesteps`` env steps (see :meth:`BaseAlgorithm.learn`), with or without the masks.

        Args:
            total_timesteps: env steps to collect.
            env: the training env (id, gym env, callable or VecEnv); defaults to the env already attached.
            callback: SB3-style callback(s).
            log_every_n_steps: log interval (iterations).
            tb_log_name: run name of the default TensorBoard logger.
            reset_num_timesteps: reset the step counter (False continues it).
            progress_bar: show a progress bar over env steps.
            default_root_dir: folder for logs.
            use_masking: sample and train under the env's action masks (False: every action allowed, as
                sb3-contrib's ``learn(use_masking=False)``; sets :attr:`use_masking`).
            log_interval: SB3's name of the log interval (iterations; None: no automatic dump).
        """
        self.use_masking = bool(use_masking)
        return super().learn(  # type: ignore[return-value]
            total_timesteps,
            env=env,
            callback=callback,
            log_every_n_steps=log_every_n_steps,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
            default_root_dir=default_root_dir,
            log_interval=log_interval,
        )

    def predict(  # type: ignore[override]
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Action(s) for ``observation``, chosen among those ``action_masks`` allows.

        Args:
            observation: one observation or a batch of them.
            state: recurrent state (unused, returned as is).
            episode_start: episode starts (unused).
            deterministic: return the mode instead of a sample.
            action_masks: allowed choices (``[n_envs, mask_dims]`` or ``[mask_dims]``; None: all).
        """
        if not self.policy_ready:
            raise RuntimeError("MaskablePPO has no policy yet: train it (fit/learn) or load one first.")
        return self.policy.predict(observation, state, episode_start, deterministic, action_masks=action_masks)
