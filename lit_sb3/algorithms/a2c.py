"""Advantage Actor Critic (A2C), Mnih et al. 2016 — SB3's A2C as a LightningModule.

One update per rollout over the whole batch, readable top to bottom in :meth:`A2C.train`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm, seed_normalize
from lit_sb3.buffers.rollout import RolloutBuffer
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from lit_sb3.policies.seed_stack import masked_seed_sum, seed_mean, seed_mse

__all__ = ["A2C"]


class A2C(OnPolicyAlgorithm):
    """Advantage Actor Critic with SB3 2.x arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate, constant or schedule.
        n_steps: steps per env per update.
        gamma: discount factor.
        gae_lambda: GAE lambda (1.0 = classic advantage).
        ent_coef: entropy coefficient.
        vf_coef: value loss coefficient.
        max_grad_norm: gradient clipping norm.
        rms_prop_eps: RMSprop epsilon.
        use_rms_prop: RMSprop (SB3's default) instead of Adam.
        use_sde: gSDE exploration.
        sde_sample_freq: gSDE noise resampling frequency.
        rollout_buffer_class: rollout buffer class.
        rollout_buffer_kwargs: rollout buffer kwargs.
        normalize_advantage: normalise advantages.
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

    zoo_name: ClassVar[str] = "a2c"
    # its update is written over the seed dimension (SeedBatch(A2C, seeds=[...]))
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (
        spaces.Box,
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
    )
    default_run_name: ClassVar[str] = "A2C"
    search_space: ClassVar[str | None] = "a2c"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
        "MultiInputPolicy": MultiInputActorCriticPolicy,
    }

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 7e-4,
        n_steps: int = 5,
        gamma: float = 0.99,
        gae_lambda: float = 1.0,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        rms_prop_eps: float = 1e-5,
        use_rms_prop: bool = True,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        normalize_advantage: bool = False,
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
        self.normalize_advantage = normalize_advantage
        self.rms_prop_eps = rms_prop_eps
        self.use_rms_prop = use_rms_prop
        self.tensorboard_log = tensorboard_log
        # SB3: RMSprop with TF-like settings unless the user chose an optimizer
        self._derived_optimizer = use_rms_prop and "optimizer_class" not in self.policy_kwargs
        if self._derived_optimizer:
            self.policy_kwargs["optimizer_class"] = th.optim.RMSprop
            self.policy_kwargs["optimizer_kwargs"] = dict(alpha=0.99, eps=rms_prop_eps, weight_decay=0)
        self._init_env_and_model(env, _init_setup_model)

    @property
    def _default_log_every_n_steps(self) -> int:
        return 100

    def _constructor_params(self) -> dict[str, Any]:
        params = super()._constructor_params()
        if self._derived_optimizer:  # re-derived by the constructor on load (a chosen optimizer is kept)
            kwargs = dict(params.get("policy_kwargs") or {})
            kwargs.pop("optimizer_class", None)
            kwargs.pop("optimizer_kwargs", None)
            params["policy_kwargs"] = kwargs
        return params

    def train(self, mode: bool | None = None) -> Any:
        """A2C update: one gradient step on the whole rollout, for every seed.

        Written over the seed dimension K (see :meth:`PPO.train <lit_sb3.algorithms.ppo.PPO.train>`): losses are
        per seed (``[K]``), their sum over the live seeds is minimised; K = 1 is the single-seed update, bitwise.

        ``train(True/False)`` is ``nn.Module.train`` (``eval()`` calls it), not an update.
        """
        if mode is not None:
            return th.nn.Module.train(self, mode)
        K = self.n_seeds
        self.policy.set_training_mode(True)
        optimizer = self.policy.optimizer
        self._update_learning_rate(optimizer)
        clip_grad_norm = self._clip_grad_norm_fn()
        running = self._live_seed_mask()
        for rollout_data in self._minibatches(None):
            actions = rollout_data.actions
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.long().flatten(-2)  # [..., batch, 1] -> [..., batch]
            values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
            values = values.reshape(log_prob.shape)

            advantages = rollout_data.advantages
            if self.normalize_advantage:
                advantages = seed_normalize(advantages, K)

            # L = -E[A log pi] + c_V E[(R - V)^2] - c_H E[H], one per seed: [K]
            policy_loss = -seed_mean(advantages * log_prob, K)
            value_loss = seed_mse(rollout_data.returns, values, K)
            entropy_loss = -seed_mean(-log_prob, K) if entropy is None else -seed_mean(entropy, K)
            loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

            optimizer.zero_grad(set_to_none=True)
            if running is None:  # K = 1
                self._backward(loss.sum())
                clip_grad_norm()
                optimizer.step()
            else:
                # a non-finite loss (or gradient) stops its seed alone, which is failed after this update
                self._check_finite("loss", loss)
                running = running & th.isfinite(loss.detach())
                self._backward(masked_seed_sum(loss, running))
                grad_norms = clip_grad_norm()
                self._check_finite("gradient", grad_norms)
                running = running & th.isfinite(grad_norms)
                optimizer.step(running)

        explained_var = self._explained_variance()
        self._count_updates(running)
        self.record("train/n_updates", self._n_updates)
        self.record("train/explained_variance", explained_var)
        self.record("train/entropy_loss", self._seed_metric(entropy_loss.detach()))
        self.record("train/policy_loss", self._seed_metric(policy_loss.detach()))
        self.record("train/value_loss", self._seed_metric(value_loss.detach()))
        if hasattr(self.policy, "log_std"):
            self.record("train/std", self._policy_std())
