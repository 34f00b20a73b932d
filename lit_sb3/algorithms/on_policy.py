"""On-policy algorithm base class (PPO, A2C) as a LightningModule.

One collect/update cycle = one iteration: collect ``n_steps`` steps on each of the ``n_envs`` envs into the
rollout buffer, then run the algorithm's update (``train``); a Lightning ``training_step`` runs whole iterations.
The run stops when the RLTrainer's env-step budget is reached, after the rollout that crosses it, as in SB3: the
budget is rounded up to whole rollouts of ``n_steps x n_envs`` (SB3#1150), which is logged once per fit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.buffers.rollout import DictRolloutBuffer, RolloutBuffer
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.types import Schedule
from lit_sb3.policies.base import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from lit_sb3.utils.math import safe_mean
from lit_sb3.vec_env import VecEnv

__all__ = ["OnPolicyAlgorithm", "run_iterations"]


def run_iterations(model: BaseAlgorithm, collect: Callable[[], bool]) -> None:
    """One ``training_step`` of an on-policy model: iterations (``collect()`` a rollout, then ``model.train()``)
    until the budget, a stop (``collect()`` returning False, or ``model._stop_requested``), a step boundary or
    ``min_env_steps_per_training_step`` env steps. Shared by :class:`OnPolicyAlgorithm` and the seed-batched
    on-policy models (``num_timesteps`` counts env steps per seed there).

    Args:
        model: the on-policy model (SB3's ``_iteration``, ``_log_interval``, ``dump_logs``, ``train``).
        collect: collects one rollout; False stops training.
    """
    context = model.fit_context
    collected = 0
    while True:
        start = model.num_timesteps
        if not collect():
            model._stop_requested = True
            return
        model._iteration += 1
        model._update_current_progress_remaining(model.num_timesteps, model._total_timesteps)
        if model._log_interval is not None and model._log_interval > 0 and model._iteration % model._log_interval == 0:
            model.dump_logs(model._iteration)
        model.train()
        model._end_cycle()
        collected += model.num_timesteps - start
        if context is not None and context.crossed_env_step_boundary(start, model.num_timesteps):
            context.request_boundary()
        if model._stop_requested or model._should_end_training_step(collected):
            return


log = logging.getLogger(__name__)


def obs_as_tensor(obs: np.ndarray | dict[str, np.ndarray], device: th.device) -> th.Tensor | dict[str, th.Tensor]:
    """Numpy observation(s) to tensor(s) on ``device`` without an extra copy on CPU."""
    if isinstance(obs, dict):
        return {key: th.as_tensor(_obs, device=device) for key, _obs in obs.items()}
    return th.as_tensor(obs, device=device)


class OnPolicyAlgorithm(BaseAlgorithm):
    """Base class for on-policy algorithms.

    Args:
        policy: policy class or alias.
        learning_rate: learning rate (constant or schedule).
        n_steps: steps per env per rollout.
        gamma: discount factor.
        gae_lambda: GAE lambda.
        ent_coef: entropy coefficient.
        vf_coef: value loss coefficient.
        max_grad_norm: gradient clipping norm.
        use_sde: gSDE exploration.
        sde_sample_freq: gSDE noise resampling frequency.
        rollout_buffer_class: rollout buffer class (auto: Dict or plain).
        rollout_buffer_kwargs: kwargs for the rollout buffer.
        stats_window_size: episodes averaged for logging.
        policy_kwargs: policy arguments.
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        monitor_wrapper: wrap plain envs in a Monitor.
        supported_action_spaces: supported action spaces.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
        "MultiInputPolicy": MultiInputActorCriticPolicy,
    }
    rollout_buffer: RolloutBuffer
    policy: ActorCriticPolicy
    # one training_step runs whole iterations until at least this many env steps were collected
    min_env_steps_per_training_step: ClassVar[int] = 256

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        learning_rate: float | Schedule,
        n_steps: int,
        gamma: float,
        gae_lambda: float,
        ent_coef: float,
        vf_coef: float,
        max_grad_norm: float,
        use_sde: bool,
        sde_sample_freq: int,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        monitor_wrapper: bool = True,
        supported_action_spaces: tuple[type[spaces.Space], ...] | None = None,
    ) -> None:
        super().__init__(
            policy=policy,
            learning_rate=learning_rate,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            device=device,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            support_multi_env=True,
            monitor_wrapper=monitor_wrapper,
            seed=seed,
            stats_window_size=stats_window_size,
            supported_action_spaces=supported_action_spaces,
        )
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}.")
        self.n_steps = n_steps
        self.gamma = gamma
        self.gae_lambda = gae_lambda
        self.ent_coef = ent_coef
        self.vf_coef = vf_coef
        self.max_grad_norm = max_grad_norm
        self.rollout_buffer_class = rollout_buffer_class
        self.rollout_buffer_kwargs = rollout_buffer_kwargs or {}
        self._iteration = 0

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        # the policy first (building the buffer draws no random numbers): a recurrent buffer's shape needs its LSTM
        self.policy = self._make_policy().to(self.device)
        buffer_class = self.rollout_buffer_class
        if buffer_class is None:
            buffer_class = self._default_rollout_buffer_class()
        self.rollout_buffer = buffer_class(
            self.n_steps,
            self.observation_space,
            self.action_space,
            device=self.device,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            n_envs=self.n_envs,
            **self._rollout_buffer_build_kwargs(),
        )

    def _default_rollout_buffer_class(self) -> type[RolloutBuffer]:
        """Hook: the rollout buffer class when ``rollout_buffer_class`` is None (Dict or plain)."""
        return DictRolloutBuffer if isinstance(self.observation_space, spaces.Dict) else RolloutBuffer

    def _rollout_buffer_build_kwargs(self) -> dict[str, Any]:
        """Hook: more keyword arguments of the rollout buffer (default: ``rollout_buffer_kwargs``)."""
        return self.rollout_buffer_kwargs

    def _make_policy(self) -> ActorCriticPolicy:
        """Hook: build the policy (on the CPU; ``_setup_model`` moves it to the device)."""
        return self.policy_class(
            self.observation_space, self.action_space, self.lr_schedule, use_sde=self.use_sde, **self.policy_kwargs
        )

    def _on_device_ready(self) -> None:
        self.rollout_buffer.device = self.device

    def _prepare_fit(self) -> None:
        context = self.fit_context
        assert context is not None
        rollout = self.n_steps * self.n_envs
        remaining = context.target_timesteps - self.num_timesteps
        if remaining > 0 and remaining % rollout != 0:
            end = self.num_timesteps + -(-remaining // rollout) * rollout
            message = (
                f"{type(self).__name__}: the budget of {context.total_timesteps} env steps is rounded up to whole "
                f"rollouts of n_steps x n_envs = {self.n_steps} x {self.n_envs} = {rollout} env steps, as in SB3: "
                f"this fit stops at {end} env steps."
            )
            log.info(message)
            if self.verbose >= 1:
                print(message)

    def configure_optimizers(self):
        return self.policy.optimizer

    # ------------------------------------------------------------------
    # Collection
    # ------------------------------------------------------------------

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        """Fill ``rollout_buffer`` with ``n_rollout_steps`` steps per env; False if a callback stopped training.

        Args:
            env: the training VecEnv.
            callback: called after every env step.
            rollout_buffer: the buffer to fill.
            n_rollout_steps: steps per env.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        self.policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:
            self.policy.reset_noise(env.num_envs)
        callback.on_rollout_start()
        clip_actions = isinstance(self.action_space, spaces.Box)
        device = self.device
        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
            with th.no_grad():
                obs_tensor = obs_as_tensor(self._last_obs, device)
                actions, values, log_probs, add_kwargs = self._rollout_policy_step(env, obs_tensor)
            if values.dtype != th.float32:  # bf16 autocast or 64-true: the buffers hold float32
                actions = actions.float() if actions.is_floating_point() else actions
                values, log_probs = values.float(), log_probs.float()
            actions = actions.cpu().numpy()
            clipped_actions = actions
            if clip_actions:
                if self.policy.squash_output:
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
            new_obs, rewards, dones, infos = env.step(clipped_actions)
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)
            # bootstrap with the value of the terminal observation on time-outs
            for idx, done in enumerate(dones):
                if (
                    done
                    and infos[idx].get("terminal_observation") is not None
                    and infos[idx].get("TimeLimit.truncated", False)
                ):
                    terminal_obs = self.policy.obs_to_tensor(infos[idx]["terminal_observation"])[0]
                    with th.no_grad():
                        terminal_value = self._terminal_value(terminal_obs, idx)
                    rewards[idx] += self.gamma * float(terminal_value)
            rollout_buffer.add(
                self._last_obs, actions, rewards, self._last_episode_starts, values, log_probs, **add_kwargs
            )
            self._last_obs = new_obs
            self._last_episode_starts = dones
        with th.no_grad():
            values = self._last_values(obs_as_tensor(new_obs, device), dones).float()
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _rollout_policy_step(
        self, env: VecEnv, obs_tensor: th.Tensor | dict[str, th.Tensor]
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, dict[str, Any]]:
        """Hook: actions, values and log-probabilities for the current observations, and the extra keyword
        arguments of ``rollout_buffer.add`` for this step (MaskablePPO: the action masks; RecurrentPPO: the LSTM
        states before the step). Called under ``no_grad``.

        Args:
            env: the training VecEnv (before its step).
            obs_tensor: the current observations as tensors.
        """
        actions, values, log_probs = self.policy(obs_tensor)
        return actions, values, log_probs, {}

    def _terminal_value(self, terminal_obs: th.Tensor | dict[str, th.Tensor], env_idx: int) -> th.Tensor:
        """Hook: value of the terminal observation of env ``env_idx`` (time-out bootstrap), under ``no_grad``."""
        return self.policy.predict_values(terminal_obs)[0]

    def _last_values(self, obs_tensor: th.Tensor | dict[str, th.Tensor], dones: np.ndarray) -> th.Tensor:
        """Hook: values of the observations after the rollout's last step, under ``no_grad``."""
        return self.policy.predict_values(obs_tensor)

    # ------------------------------------------------------------------
    # Lightning loop
    # ------------------------------------------------------------------

    @property
    def _default_log_every_n_steps(self) -> int:
        return 1

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """Iterations (a rollout of ``n_steps`` per env, then the update) until at least
        ``min_env_steps_per_training_step`` env steps were collected, the budget is reached or a callback stops.

        Lightning costs ~0.7-1.3 ms per ``training_step``; with small rollouts (A2C's 5 steps) one iteration per
        step would pay it every few env steps. Several iterations per step keep SB3's semantics exactly: callbacks
        fire per env step, the budget is checked after every rollout, logs are dumped every ``log_interval``
        iterations.
        """
        assert self.env is not None and self._rl_callback is not None
        env, callback, buffer = self.env, self._rl_callback, self.rollout_buffer
        run_iterations(self, lambda: self.collect_rollouts(env, callback, buffer, n_rollout_steps=self.n_steps))

    def train(self, mode: bool | None = None) -> Any:
        """The algorithm's update from the filled rollout buffer (``train(bool)`` is ``nn.Module.train``)."""
        raise NotImplementedError

    def _clip_grad_norm_fn(self) -> Callable[[], Any]:
        """Gradient-norm clipping of the policy's parameters (``max_grad_norm``), as SB3.

        The parameter list is built once per update and the norms use torch's ``foreach`` kernels on CPU/CUDA
        (one call for all tensors instead of one per tensor; same result).
        """
        params = [p for p in self.policy.parameters()]
        foreach = True if self.device.type in ("cpu", "cuda") else None
        max_norm = self.max_grad_norm
        return lambda: th.nn.utils.clip_grad_norm_(params, max_norm, foreach=foreach)

    def dump_logs(self, iteration: int = 0) -> None:
        """Send rollout/time metrics (and the buffered train metrics) to the loggers."""
        assert self.ep_info_buffer is not None and self.ep_success_buffer is not None
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, 1e-9)
        metrics: dict[str, Any] = {
            "time/iterations": iteration,
            "time/fps": int((self.num_timesteps - self._num_timesteps_at_start) / time_elapsed),
            "time/time_elapsed": int(time_elapsed),
            "time/total_timesteps": self.num_timesteps,
        }
        if len(self.ep_info_buffer) > 0:
            metrics["rollout/ep_rew_mean"] = safe_mean([ep["r"] for ep in self.ep_info_buffer])
            metrics["rollout/ep_len_mean"] = safe_mean([ep["l"] for ep in self.ep_info_buffer])
        if len(self.ep_success_buffer) > 0:
            metrics["rollout/success_rate"] = safe_mean(self.ep_success_buffer)
        self.log_metrics(metrics, step=self.num_timesteps)

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        return {"iteration": self._iteration}

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        self._iteration = int(state.get("iteration", 0))
