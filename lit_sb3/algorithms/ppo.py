"""Proximal Policy Optimization (clip version), Schulman et al. 2017 — SB3's PPO as a LightningModule.

The whole update of one iteration is in :meth:`PPO.train`, readable top to bottom. Losses stay tensors: they
are averaged on the device and turned into numbers only when the logs are flushed (the ``target_kl`` early stop
is the one place that needs a number per minibatch, and only when it is set).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm, seed_average, seed_normalize
from lit_sb3.buffers.rollout import RolloutBuffer
from lit_sb3.core.schedules import get_schedule_fn
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from lit_sb3.policies.seed_stack import masked_seed_sum, seed_mean, seed_mse

__all__ = ["PPO"]


class PPO(OnPolicyAlgorithm):
    """Proximal Policy Optimization (clip), with SB3 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate, constant or a schedule of ``progress_remaining``.
        n_steps: steps per env per update (rollout size ``n_steps * n_envs``).
        batch_size: minibatch size.
        n_epochs: passes over the rollout per update.
        gamma: discount factor.
        gae_lambda: GAE bias/variance trade-off.
        clip_range: clipping parameter (constant or schedule).
        clip_range_vf: value clipping parameter (``None``: no value clipping; not normalised by reward scale).
        normalize_advantage: normalise advantages per minibatch.
        ent_coef: entropy coefficient.
        vf_coef: value loss coefficient.
        max_grad_norm: gradient clipping norm.
        use_sde: gSDE exploration.
        sde_sample_freq: gSDE noise resampling frequency.
        rollout_buffer_class: rollout buffer class.
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

    zoo_name: ClassVar[str] = "ppo"
    # its update is written over the seed dimension (SeedBatch(PPO, seeds=[...]))
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (
        spaces.Box,
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
    )
    default_run_name: ClassVar[str] = "PPO"
    search_space: ClassVar[str | None] = "ppo"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
        "MultiInputPolicy": MultiInputActorCriticPolicy,
    }

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
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
        use_sde: bool = False,
        sde_sample_freq: int = -1,
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
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            monitor_wrapper=monitor_wrapper,
            stats_window_size=stats_window_size,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            device=device,
            seed=seed,
        )
        if normalize_advantage and batch_size <= 1:
            raise ValueError(
                "`batch_size` must be greater than 1 when `normalize_advantage=True` "
                f"(got batch_size={batch_size}), see https://github.com/DLR-RM/stable-baselines3/issues/440"
            )
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self.tensorboard_log = tensorboard_log
        self._init_env_and_model(env, _init_setup_model)

    def _setup_model(self) -> None:
        super()._setup_model()
        buffer_size = self.n_envs * self.n_steps
        if self.normalize_advantage and buffer_size <= 1:
            raise ValueError(
                f"`n_steps * n_envs` must be greater than 1, got n_steps={self.n_steps}, n_envs={self.n_envs}."
            )
        if buffer_size % self.batch_size > 0:
            warnings.warn(
                f"You have specified a mini-batch size of {self.batch_size}, but because the `RolloutBuffer` is of size "
                f"`n_steps * n_envs = {buffer_size}`, after every {buffer_size // self.batch_size} untruncated mini-batches, "
                f"there will be a truncated mini-batch of size {buffer_size % self.batch_size}\n"
                f"We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
                f"Info: (n_steps={self.n_steps} and n_envs={self.n_envs})",
                stacklevel=2,
            )
        self.clip_range_schedule = get_schedule_fn(self.clip_range)
        self.clip_range_vf_schedule = None
        if self.clip_range_vf is not None:
            if isinstance(self.clip_range_vf, (float, int)) and self.clip_range_vf <= 0:
                raise ValueError("`clip_range_vf` must be positive, pass `None` to deactivate value function clipping")
            self.clip_range_vf_schedule = get_schedule_fn(self.clip_range_vf)

    def _evaluate_minibatch(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, Any, Any]:
        """Values, log-probabilities and entropy of a minibatch's actions under the current policy, and the
        minibatch the losses average over.

        PPO returns its minibatch as it is; MaskablePPO passes the stored action masks, RecurrentPPO runs the LSTMs
        over padded sequences and returns only the valid (unpadded) steps, so that the losses below are its masked
        means.

        Args:
            rollout_data: a minibatch from the rollout buffer.
            actions: its actions (long and flat for Discrete spaces).
        """
        values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
        return values, log_prob, entropy, rollout_data

    def train(self, mode: bool | None = None) -> Any:
        """PPO update: ``n_epochs`` passes of clipped-surrogate minibatch steps over the rollout, for every seed.

        Written over the seed dimension K: minibatches are ``[K, batch, ...]`` (K = 1: the single-seed buffer's
        ``[batch, ...]``), every loss is per seed (``[K]``) and the optimiser minimises their sum over the seeds
        still running, so each seed's gradient, clipping and ``target_kl`` stop are its own. At K = 1 every
        reduction is the single-seed one (bitwise SB3's update).

        ``train(True/False)`` is ``nn.Module.train`` (``eval()`` calls it), not an update.
        """
        if mode is not None:
            return th.nn.Module.train(self, mode)
        K = self.n_seeds
        self.policy.set_training_mode(True)
        optimizer = self.policy.optimizer
        self._update_learning_rate(optimizer)
        clip_grad_norm = self._clip_grad_norm_fn()
        clip_range = self.clip_range_schedule(self._current_progress_remaining)
        clip_range_vf = (
            None
            if self.clip_range_vf_schedule is None
            else self.clip_range_vf_schedule(self._current_progress_remaining)
        )

        pg_losses, value_losses, entropy_losses, clip_fractions, approx_kls = [], [], [], [], []
        # K > 1: which seeds took part in each minibatch (a seed stops alone on target_kl or a non-finite loss)
        running = self._live_seed_mask()
        weights: list[th.Tensor] = []
        loss = th.zeros(K)
        continue_training = True
        epoch = 0
        for epoch in range(self.n_epochs):
            epoch_ran = running
            for rollout_data in self._minibatches(self.batch_size, running):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    actions = rollout_data.actions.long().flatten(-2)  # [..., batch, 1] -> [..., batch]
                values, log_prob, entropy, rollout_data = self._evaluate_minibatch(rollout_data, actions)
                values = values.reshape(log_prob.shape)

                # advantages normalised per seed over its minibatch
                advantages = rollout_data.advantages
                if self.normalize_advantage and advantages.shape[-1] > 1:
                    advantages = seed_normalize(advantages, K)

                # clipped surrogate objective: L_pi = -E[min(r A, clip(r, 1 - eps, 1 + eps) A)], r = pi / pi_old
                ratio = th.exp(log_prob - rollout_data.old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -seed_mean(th.min(policy_loss_1, policy_loss_2), K)

                # value loss L_V = E[(R - V)^2], V optionally clipped around the old values
                if clip_range_vf is None:
                    values_pred = values
                else:
                    values_pred = rollout_data.old_values + th.clamp(
                        values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                    )
                value_loss = seed_mse(rollout_data.returns, values_pred, K)

                # entropy bonus L_H = -E[H] (approximated by E[log pi] when the distribution has no closed form)
                entropy_loss = -seed_mean(-log_prob, K) if entropy is None else -seed_mean(entropy, K)

                # L = L_pi + c_H L_H + c_V L_V, one per seed: [K]
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

                with th.no_grad():
                    # approx KL(pi_old || pi) = E[(r - 1) - log r]
                    log_ratio = log_prob - rollout_data.old_log_prob
                    approx_kl = seed_mean((th.exp(log_ratio) - 1) - log_ratio, K)
                    clip_fractions.append(seed_mean((th.abs(ratio - 1) > clip_range).float(), K))
                pg_losses.append(policy_loss.detach())
                value_losses.append(value_loss.detach())
                entropy_losses.append(entropy_loss.detach())
                approx_kls.append(approx_kl)

                if running is None:  # K = 1: the single-seed stop
                    if self.target_kl is not None and float(approx_kl) > 1.5 * self.target_kl:
                        continue_training = False
                        if self.verbose >= 1:
                            print(f"Early stopping at step {epoch} due to reaching max kl: {float(approx_kl):.2f}")
                        break
                    optimizer.zero_grad(set_to_none=True)
                    self._backward(loss.sum())
                    clip_grad_norm()
                    optimizer.step()
                    continue

                weights.append(running)
                # a non-finite loss (or gradient) stops its seed alone, which is failed after this update
                self._check_finite("loss", loss)
                running = running & th.isfinite(loss.detach())
                if self.target_kl is not None:
                    stop = running & (approx_kl > 1.5 * self.target_kl)
                    if bool(stop.any()):  # one sync per minibatch, as the single run's float(approx_kl)
                        if self.verbose >= 1:
                            for i in th.nonzero(stop).flatten().tolist():
                                print(
                                    f"seed index {i}: early stopping at step {epoch} due to reaching max kl: "
                                    f"{float(approx_kl[i]):.2f}"
                                )
                        running = running & ~stop
                if not bool(running.any()):
                    continue_training = False
                    break
                optimizer.zero_grad(set_to_none=True)
                self._backward(masked_seed_sum(loss, running))
                grad_norms = clip_grad_norm()
                self._check_finite("gradient", grad_norms)
                running = running & th.isfinite(grad_norms)
                optimizer.step(running)

            self._count_updates(epoch_ran)
            if not continue_training:
                break

        self.record("train/entropy_loss", seed_average(entropy_losses, weights))
        self.record("train/policy_gradient_loss", seed_average(pg_losses, weights))
        self.record("train/value_loss", seed_average(value_losses, weights))
        self.record("train/approx_kl", seed_average(approx_kls, weights))
        self.record("train/clip_fraction", seed_average(clip_fractions, weights))
        self.record("train/loss", self._seed_metric(loss.detach()))
        self.record("train/explained_variance", self._explained_variance())
        if hasattr(self.policy, "log_std"):
            self.record("train/std", self._policy_std())
        self.record("train/n_updates", self._n_updates)
        self.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.record("train/clip_range_vf", clip_range_vf)
