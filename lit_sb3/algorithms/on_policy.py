"""On-policy algorithm base class (PPO, A2C) as a LightningModule.

One collect/update cycle = one iteration: collect ``n_steps`` steps on each of the ``n_envs`` envs into the
rollout buffer, then run the algorithm's update (``train``); a Lightning ``training_step`` runs whole iterations.
The run stops when the RLTrainer's env-step budget is reached, after the rollout that crosses it, as in SB3: the
budget is rounded up to whole rollouts of ``n_steps x n_envs`` (SB3#1150), which is logged once per fit.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.seed_dim import _copy_obs, _obs_at, _set_obs
from lit_sb3.buffers.rollout import DictRolloutBuffer, RolloutBuffer
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.logger import rollout_metrics
from lit_sb3.core.types import Schedule
from lit_sb3.policies.base import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from lit_sb3.policies.seed_stack import clip_grad_norm_per_seed
from lit_sb3.utils.math import explained_variance
from lit_sb3.vec_env import VecEnv

__all__ = ["OnPolicyAlgorithm", "run_iterations", "seed_average", "seed_normalize"]


def seed_normalize(x: th.Tensor, n_seeds: int) -> th.Tensor:
    """Advantages normalised per seed over its samples (the last dimension): ``(x - mean) / (std + 1e-8)``
    (K = 1: over the whole tensor, the single-seed run's reduction).

    Args:
        x: per-seed values ``[K, batch]`` (K = 1: ``[batch]``).
        n_seeds: K.
    """
    if n_seeds == 1:
        return (x - x.mean()) / (x.std() + 1e-8)
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-8)


def seed_average(values: list[th.Tensor], weights: list[th.Tensor]) -> th.Tensor | float:
    """Each seed's mean of per-minibatch values over the minibatches it took part in (NaN if none).

    Args:
        values: ``[K]`` values (K = 1: ``[1]``), one per minibatch.
        weights: K > 1: ``[K]`` booleans per minibatch, whether the seed took part (empty: every seed did all).
    """
    if not values:
        return np.nan
    stacked = th.stack(values)
    if not weights:
        return stacked.mean()
    took_part = th.stack(weights)
    total = th.where(took_part, stacked, th.zeros_like(stacked)).sum(0)
    return total / took_part.sum(0)


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

    K seeds (``SeedBatch(PPO, seeds=[...])``, see :mod:`lit_sb3.algorithms.seed_dim`): one VecEnv per seed stepped
    in lockstep (one forward pass acts for all seeds), one rollout storage with the seeds' columns side by side
    (GAE per seed), and the subclass's ``train`` over ``[K, batch, ...]`` minibatches, each seed shuffled by its own
    stream, with per-seed losses, clipping, optimiser steps and ``target_kl`` stops.

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

    def _seeds_sit_out(self) -> bool:
        return True  # a seed stops alone on target_kl (or a non-finite loss): per-seed optimiser steps

    def _check_seed_batchable(self) -> None:
        unsupported = {
            "rollout_buffer_class": self.rollout_buffer_class is not None,
            "rollout_buffer_kwargs": bool(self.rollout_buffer_kwargs),
        }
        bad = [name for name, flag in unsupported.items() if flag]
        if bad:
            raise NotImplementedError(
                f"{type(self).__name__} with K > 1 seeds does not support {', '.join(bad)} yet (K = 1 does)."
            )

    def _setup_seed_model(self) -> None:
        """K > 1: build the members as their separate runs, stack their policies (the optimiser per seed: a seed
        sits out the rest of an update after its ``target_kl`` stop), one rollout storage for all seeds."""
        space = self.observation_space
        if isinstance(space, spaces.Dict) and not all(isinstance(sub, spaces.Box) for sub in space.spaces.values()):
            raise NotImplementedError(
                f"{type(self).__name__} with K > 1 seeds supports Dict observations of Box entries only yet, got "
                f"{space} (K = 1 supports every space)."
            )
        self._setup_lr_schedule()
        assert self._seed_state is not None
        self._seed_state.stack_members()
        self.policy.n_seeds = self.n_seeds
        self.rollout_buffer = self._default_rollout_buffer_class()(
            self.n_steps,
            self.observation_space,
            self.action_space,
            device=self.device,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            n_envs=self.n_envs,
            n_seeds=self.n_seeds,
            **self._rollout_buffer_build_kwargs(),
        )

    def _setup_model(self) -> None:
        if self._seed_state is not None:
            return self._setup_seed_model()
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
        self, env: VecEnv | None, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        """Fill ``rollout_buffer`` with ``n_rollout_steps`` steps per env of every live seed; False if a callback
        stopped training or every seed has failed.

        One loop for K >= 1 seeds. K = 1 steps ``env`` as SB3 does (observations ``[n_envs, ...]``); K > 1 steps
        every live seed's VecEnv (:attr:`envs`) in lockstep, one forward pass acting for all seeds (observations,
        rewards and dones ``[K, n_envs, ...]``), each seed sampling from its own stream, GAE per seed. Time-outs are
        bootstrapped with ``gamma * V(terminal obs)``. A failed seed's env does not step (its columns are unused:
        its update is masked).

        Args:
            env: the training VecEnv (None for K > 1 seeds: their envs are :attr:`envs`).
            callback: called after every env step.
            rollout_buffer: the buffer to fill.
            n_rollout_steps: steps per env.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        self._apply_finite_checks()  # K > 1: a seed whose last update was not finite stops before acting again
        if not self.active_seeds:
            return False
        self.policy.set_training_mode(False)
        n_envs = self.n_envs if env is None else env.num_envs
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:  # K > 1: each seed's exploration matrices from its own stream
            self.policy.reset_noise(n_envs)
        callback.on_rollout_start()
        device = self.device
        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(n_envs)
            actions, clipped_actions, values, log_probs, add_kwargs = self._rollout_actions(env)
            new_obs, rewards, dones, infos = self._step_envs(env, clipped_actions)
            self.num_timesteps += n_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_seed_info(infos, dones)
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(*actions.shape, 1)
            self._bootstrap_timeouts(new_obs, rewards, dones, infos)
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

    def _bootstrap_timeouts(self, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[Any]) -> None:
        """Add ``gamma * V(terminal observation)`` to the rewards of time-outs, in place. K = 1: one value call per
        time-out (SB3's, bitwise); K > 1: one batched call for all seeds' time-outs of this step, the terminal
        observations written into a copy of ``new_obs`` (:meth:`_seed_terminal_values`).

        Args:
            new_obs: the step's observations (K > 1: ``[K, n_envs, ...]``).
            rewards: the step's rewards (K > 1: ``[K, n_envs]``).
            dones: the step's dones.
            infos: the step's infos (K > 1: one list per seed).
        """
        if not dones.any():
            return
        single = self.n_seeds == 1
        seed_infos, seed_dones = ([infos], [dones]) if single else (infos, dones)
        where = [
            (i, j)
            for i in ([0] if single else self.active_seeds)
            for j in np.flatnonzero(seed_dones[i])
            if seed_infos[i][j].get("terminal_observation") is not None
            and seed_infos[i][j].get("TimeLimit.truncated", False)
        ]
        if not where:
            return
        if single:
            for _, j in where:
                terminal_obs = self.policy.obs_to_tensor(infos[j]["terminal_observation"])[0]
                with th.no_grad():
                    terminal_value = self._terminal_value(terminal_obs, j)
                rewards[j] += self.gamma * float(terminal_value)
            return
        terminal = _copy_obs(new_obs)
        for i, j in where:
            _set_obs(terminal, (i, j), infos[i][j]["terminal_observation"])
        with th.no_grad():
            values = self._seed_terminal_values(obs_as_tensor(terminal, self.device)).float().cpu().numpy()
        for i, j in where:
            rewards[i, j] += self.gamma * float(values[i, j, 0])

    def _rollout_actions(
        self, env: VecEnv | None
    ) -> tuple[np.ndarray, np.ndarray, th.Tensor, th.Tensor, dict[str, Any]]:
        """One collection step of the policy on :attr:`_last_obs` (one seed or K): the actions as stored, the
        actions sent to the env (clipped to a Box, or unscaled when the policy squashes), values, log-probabilities
        and the extra fields of ``rollout_buffer.add``.

        Args:
            env: the training VecEnv (None for K > 1 seeds).
        """
        with th.no_grad():
            obs_tensor = obs_as_tensor(self._last_obs, self.device)
            actions, values, log_probs, add_kwargs = self._rollout_policy_step(env, obs_tensor)
        if values.dtype != th.float32:  # bf16 autocast or 64-true: the buffers hold float32
            actions = actions.float() if actions.is_floating_point() else actions
            values, log_probs = values.float(), log_probs.float()
        actions = actions.cpu().numpy()
        clipped_actions = actions
        if isinstance(self.action_space, spaces.Box):
            if self.policy.squash_output:
                clipped_actions = self.policy.unscale_action(clipped_actions)
            else:
                clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
        return actions, clipped_actions, values, log_probs, add_kwargs

    def _rollout_policy_step(
        self, env: VecEnv, obs_tensor: th.Tensor | dict[str, th.Tensor]
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, dict[str, Any]]:
        """Hook: actions, values and log-probabilities for the current observations, and the extra keyword
        arguments of ``rollout_buffer.add`` for this step (MaskablePPO: the action masks; RecurrentPPO: the LSTM
        states before the step). Called under ``no_grad``.

        Args:
            env: the training VecEnv (before its step); None for K > 1 seeds (their envs are :attr:`envs`).
            obs_tensor: the current observations as tensors (``[K, n_envs, ...]`` for K > 1).
        """
        actions, values, log_probs = self.policy(obs_tensor)
        return actions, values, log_probs, {}

    def _terminal_value(self, terminal_obs: th.Tensor | dict[str, th.Tensor], env_idx: int) -> th.Tensor:
        """Hook: value of the terminal observation of env ``env_idx`` (time-out bootstrap), under ``no_grad``."""
        return self.policy.predict_values(terminal_obs)[0]

    def _last_values(self, obs_tensor: th.Tensor | dict[str, th.Tensor], dones: np.ndarray) -> th.Tensor:
        """Hook: values of the observations after the rollout's last step, under ``no_grad`` (K > 1 seeds:
        ``[K, n_envs, ...]`` observations and dones)."""
        return self.policy.predict_values(obs_tensor)

    def _seed_terminal_values(self, terminal_obs: th.Tensor | dict[str, th.Tensor]) -> th.Tensor:
        """Hook (K > 1 seeds): values ``[K, n_envs, 1]`` of observations ``[K, n_envs, ...]`` holding this step's
        terminal observations (the time-out bootstrap of every seed at once, as :meth:`_terminal_value` per env),
        under ``no_grad``."""
        return self.policy.predict_values(terminal_obs)

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
        assert self._rl_callback is not None
        env, callback, buffer = self.env, self._rl_callback, self.rollout_buffer  # env: None for K > 1 seeds
        run_iterations(self, lambda: self.collect_rollouts(env, callback, buffer, n_rollout_steps=self.n_steps))
        self._apply_finite_checks()

    def train(self, mode: bool | None = None) -> Any:
        """The algorithm's update from the filled rollout buffer (``train(bool)`` is ``nn.Module.train``)."""
        raise NotImplementedError

    def _clip_grad_norm_fn(self) -> Callable[[], Any]:
        """Gradient-norm clipping of the policy's parameters (``max_grad_norm``), as SB3; K > 1: each seed's
        gradients by their own norm (:func:`~lit_sb3.policies.seed_stack.clip_grad_norm_per_seed`).

        The parameter list is built once per update and the norms use torch's ``foreach`` kernels on CPU/CUDA
        (one call for all tensors instead of one per tensor; same result).
        """
        params = [p for p in self.policy.parameters()]
        max_norm = self.max_grad_norm
        if self.n_seeds > 1:
            n_seeds = self.n_seeds
            return lambda: clip_grad_norm_per_seed(params, max_norm, n_seeds)
        foreach = True if self.device.type in ("cpu", "cuda") else None
        return lambda: th.nn.utils.clip_grad_norm_(params, max_norm, foreach=foreach)

    # ------------------------------------------------------------------
    # The update over the seed dimension (K = 1: the single-seed objects and reductions)
    # ------------------------------------------------------------------

    def _minibatches(self, batch_size: int | None, running: th.Tensor | None = None) -> Iterator[Any]:
        """The rollout's shuffled minibatches: K = 1 the buffer's own (``[batch, ...]``, global torch stream);
        K > 1 ``[K, batch, ...]``, each seed shuffled by its own stream.

        Args:
            batch_size: minibatch size per seed (None: the whole rollout).
            running: K > 1: ``[K]`` bool of the seeds still in the update (None: all). The others (stopped by
                ``target_kl``, or failed) draw nothing, as their separate runs draw no more permutations, so that
                their streams stay their separate runs'; their minibatches are in order and unused.
        """
        if self.n_seeds == 1:
            return self.rollout_buffer.get(batch_size)
        return self.rollout_buffer.get_seeds(batch_size, self._drawing_streams(self.seed_generators, running))

    def _drawing_streams(self, streams: Sequence[Any] | None, running: th.Tensor | None) -> list[Any]:
        """``streams`` (one random stream per seed) with None for the seeds not in ``running``.

        Args:
            streams: the seeds' random streams (torch generators or numpy ``RandomState`` s).
            running: ``[K]`` bool, or None (every seed draws).
        """
        assert streams is not None
        if running is None:
            return list(streams)
        return [stream if taking else None for stream, taking in zip(streams, running.tolist(), strict=True)]

    def _live_seed_mask(self) -> th.Tensor | None:
        """K > 1: ``[K]`` bool of the seeds that update (not failed); None at K = 1."""
        if self.n_seeds == 1:
            return None
        mask = self._active_mask()
        return th.ones(self.n_seeds, dtype=th.bool, device=self.device) if mask is None else mask

    def _count_updates(self, took_part: th.Tensor | None) -> None:
        """Count one update (SB3's ``_n_updates``); K > 1: ``_n_updates`` is each seed's count (``[K]`` integers,
        what ``member(i)`` gets), and only the seeds in ``took_part`` count (a seed stopped by ``target_kl`` counts
        as its separate run does).

        Args:
            took_part: ``[K]`` bool (None at K = 1).
        """
        if took_part is None:
            self._n_updates += 1
            return
        counts = self._n_updates if isinstance(self._n_updates, np.ndarray) else np.zeros(self.n_seeds, dtype=np.int64)
        self._n_updates = counts + took_part.cpu().numpy().astype(np.int64)

    def _seed_metric(self, value: th.Tensor) -> th.Tensor:
        """A per-seed value ``[K]`` as recorded: K = 1 the single run's 0-d tensor."""
        return value.reshape(()) if self.n_seeds == 1 else value

    def _explained_variance(self) -> float | th.Tensor:
        """``train/explained_variance`` of the rollout: a float (K = 1), or each seed's over its own columns."""
        buffer = self.rollout_buffer
        if self.n_seeds == 1:
            return explained_variance(buffer.values.flatten(), buffer.returns.flatten())
        return th.tensor(
            [
                explained_variance(
                    buffer.seed_slice(buffer.values, i).flatten(), buffer.seed_slice(buffer.returns, i).flatten()
                )
                for i in range(self.n_seeds)
            ]
        )

    def _policy_std(self) -> th.Tensor:
        """``train/std``: the mean std of the Gaussian policy (each seed's at K > 1)."""
        std = th.exp(self.policy.log_std.detach())
        return std.mean() if self.n_seeds == 1 else std.reshape(self.n_seeds, -1).mean(1)

    def dump_logs(self, iteration: int = 0) -> None:
        """Send rollout/time metrics (and the buffered train metrics) to the loggers; K > 1: each live seed's as
        ``seed{i}/<key>``."""
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, 1e-9)
        state = self._seed_state
        for i in self.active_seeds:
            metrics: dict[str, Any] = {
                "time/iterations": iteration,
                "time/fps": int((self.num_timesteps - self._num_timesteps_at_start) / time_elapsed),
                "time/time_elapsed": int(time_elapsed),
                "time/total_timesteps": self.num_timesteps,
            }
            infos = self.ep_info_buffer if state is None else state.ep_info_buffers[i]
            successes = self.ep_success_buffer if state is None else state.ep_success_buffers[i]
            assert infos is not None and successes is not None
            metrics.update(rollout_metrics(infos, successes))
            if state is None:
                self.log_metrics(metrics, step=self.num_timesteps)
            else:
                state.dump_logs(i, metrics)

    # ------------------------------------------------------------------
    # Members and checkpoints
    # ------------------------------------------------------------------

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Seed index i's counters, episode statistics and last observations into member i."""
        state = self._seed_state
        assert state is not None and isinstance(member, OnPolicyAlgorithm)
        member._iteration = self._iteration
        member.ep_info_buffer = (
            deque(state.ep_info_buffers[i], maxlen=member.stats_window_size) if state.ep_info_buffers else None
        )
        member.ep_success_buffer = (
            deque(state.ep_success_buffers[i], maxlen=member.stats_window_size) if state.ep_success_buffers else None
        )
        if self._last_obs is not None:
            member._last_obs = _copy_obs(_obs_at(self._last_obs, i))
            member._last_episode_starts = np.array(self._last_episode_starts[i], copy=True)

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        return {"iteration": self._iteration}

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        self._iteration = int(state.get("iteration", 0))
