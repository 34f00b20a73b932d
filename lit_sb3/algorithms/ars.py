"""Augmented Random Search — sb3-contrib's ARS as a LightningModule.

Papers and references:
    * Mania, Guy, Recht 2018, "Simple random search provides a competitive approach to reinforcement learning",
      https://arxiv.org/abs/1803.07055 (Algorithm 2, "ARS V1-t/V2-t")
    * the authors' implementation, https://github.com/modestyachts/ARS

One Lightning ``training_step`` is one ARS iteration (:meth:`ARS.training_step`): sample ``n_delta`` directions,
evaluate the ``2 * n_delta`` perturbed policies, step along the best directions. The population is evaluated in
parallel over the training VecEnv's ``n_envs`` slots: each slot runs one candidate at a time (its own weights, all
slots batched into one forward, :meth:`ARSPolicy.population_forward <lit_sb3.policies.ars.ARSPolicy.population_forward>`)
and takes the next candidate when it has finished ``n_eval_episodes`` episodes. With ``n_envs = 2 * n_delta`` the
whole population runs at once; with ``n_envs = 1`` (the zoo's setting) candidates run one after the other, as in
sb3-contrib. Every env step of the VecEnv counts towards the env-step budget.

Argument names, defaults and logged keys are sb3-contrib 2.9's; the policy's parameters are the ARS weights
(``theta``), so saving, loading and checkpoints need nothing more than the policy.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.on_policy import obs_as_tensor
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.schedules import get_schedule_fn
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.ars import ARSLinearPolicy, ARSPolicy
from lit_sb3.policies.base import BasePolicy
from lit_sb3.utils.math import safe_mean

__all__ = ["ARS"]

# derivative-free: no optimizer, on purpose (Lightning would warn once per fit)
warnings.filterwarnings(
    "ignore", message=r".*configure_optimizers. returned .None., this fit will run with no optimizer"
)


class ARS(BaseAlgorithm):
    """Augmented Random Search, with sb3-contrib 2.9's arguments and defaults.

    Args:
        policy: ``"LinearPolicy"``, ``"MlpPolicy"`` or an :class:`~lit_sb3.policies.ars.ARSPolicy` class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        n_delta: random directions sampled per iteration (``2 * n_delta`` candidate policies).
        n_top: best directions used in the update (default ``n_delta``).
        learning_rate: step size (constant or schedule).
        delta_std: exploration noise of the perturbations (constant or schedule).
        zero_policy: start from all-zero weights.
        alive_bonus_offset: added to every step's reward (cancels an env's alive bonus).
        n_eval_episodes: episodes per candidate.
        policy_kwargs: policy arguments.
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        stats_window_size: accepted for SB3 compatibility (the logged episode means are those of one iteration).
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        seed: random seed.
        verbose: verbosity level.
        device: torch device (``"cpu"`` by default, as sb3-contrib).
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
    """

    zoo_name: ClassVar[str] = "ars"
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (spaces.Box, spaces.Discrete)
    supported_observation_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (
        spaces.Box,
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
    )
    default_run_name: ClassVar[str] = "ARS"
    search_space: ClassVar[str | None] = "ars"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": ARSPolicy, "LinearPolicy": ARSLinearPolicy}
    policy: ARSPolicy

    def __init__(
        self,
        policy: str | type[ARSPolicy],
        env: GymEnv | str | None = None,
        n_delta: int = 8,
        n_top: int | None = None,
        learning_rate: float | Schedule = 0.02,
        delta_std: float | Schedule = 0.05,
        zero_policy: bool = True,
        alive_bonus_offset: float = 0,
        n_eval_episodes: int = 1,
        policy_kwargs: dict[str, Any] | None = None,
        monitor_wrapper: bool = True,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        seed: int | None = None,
        verbose: int = 0,
        device: th.device | str = "cpu",
        _init_setup_model: bool = True,
    ) -> None:
        super().__init__(
            policy=policy,
            learning_rate=learning_rate,
            policy_kwargs=policy_kwargs,
            monitor_wrapper=monitor_wrapper,
            stats_window_size=stats_window_size,
            verbose=verbose,
            device=device,
            support_multi_env=True,
            seed=seed,
        )
        if n_delta < 1:
            raise ValueError(f"ARS: n_delta must be >= 1, got {n_delta!r}.")
        if n_eval_episodes < 1:
            raise ValueError(f"ARS: n_eval_episodes must be >= 1, got {n_eval_episodes!r}.")
        if n_top is None:
            n_top = n_delta
        if n_top < 1:
            raise ValueError(f"ARS: n_top must be >= 1 (or None for n_delta), got {n_top!r}.")
        if n_top > n_delta:
            warnings.warn(f"n_top = {n_top} > n_delta = {n_delta}, setting n_top = n_delta", stacklevel=2)
            n_top = n_delta
        self.n_delta = n_delta
        self.n_top = n_top
        self.pop_size = 2 * n_delta
        self.delta_std = delta_std
        self.zero_policy = zero_policy
        self.alive_bonus_offset = alive_bonus_offset
        self.n_eval_episodes = n_eval_episodes
        self.tensorboard_log = tensorboard_log
        # an iteration left some env slots mid-episode (idle slots keep stepping): reset before the next one
        self._needs_reset = False
        self._init_env_and_model(env, _init_setup_model)

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.delta_std_schedule = get_schedule_fn(self.delta_std)
        self.set_random_seed(self.seed)
        self.policy = self.policy_class(self.observation_space, self.action_space, **self.policy_kwargs).to(self.device)
        self.n_params = sum(p.numel() for p in self.policy.parameters())
        if self.zero_policy:
            with th.no_grad():
                for param in self.policy.parameters():
                    param.zero_()

    def configure_optimizers(self):
        return None  # derivative-free: the update sets the weights directly

    @property
    def weights(self) -> th.Tensor:
        """The current ARS weights ``theta`` (the policy's parameters as one flat vector)."""
        return th.nn.utils.parameters_to_vector(self.policy.parameters()).detach()

    # ------------------------------------------------------------------
    # One ARS iteration
    # ------------------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """One ARS iteration (Mania et al. 2018, Algorithm 2).

        Sample ``delta_1..delta_N ~ N(0, I)`` (N = ``n_delta``), evaluate ``pi_{theta + nu delta_k}`` and
        ``pi_{theta - nu delta_k}`` (nu = ``delta_std``), keep the ``b = n_top`` directions with the largest
        ``max(r+_k, r-_k)``, and step

            theta <- theta + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k

        with ``sigma_R`` the standard deviation of the ``2b`` kept returns and alpha the learning rate (the
        perturbation scale nu is folded into alpha, as in the authors' and sb3-contrib's code).
        """
        assert self.env is not None and self._rl_callback is not None
        self._update_current_progress_remaining(self.num_timesteps, self._total_timesteps)
        start = self.num_timesteps
        delta_std = self.delta_std_schedule(self._current_progress_remaining)
        learning_rate = self.lr_schedule(self._current_progress_remaining)

        theta = self.weights
        deltas = th.normal(mean=0.0, std=1.0, size=(self.n_delta, self.n_params), device=self.device)
        policy_deltas = deltas * delta_std
        candidates = th.cat([theta + policy_deltas, theta - policy_deltas])  # [2N, n_params]

        with th.no_grad():
            candidate_returns = self.evaluate_candidates(candidates, self._rl_callback)
        if candidate_returns is None:  # a callback stopped training
            self._stop_requested = True
            return None
        self._ars_update(theta, deltas, candidate_returns, learning_rate)
        self.record("train/delta_std", delta_std)
        self.record("train/learning_rate", learning_rate)

        self._end_cycle()
        if self._log_interval is not None and self._log_interval > 0 and self._n_updates % self._log_interval == 0:
            self.dump_logs()
        context = self.fit_context
        if context is not None and context.crossed_env_step_boundary(start, self.num_timesteps):
            context.request_boundary()
        return None

    def _ars_update(
        self, theta: th.Tensor, deltas: th.Tensor, candidate_returns: th.Tensor, learning_rate: float
    ) -> None:
        """The ARS step from the sampled directions and the candidates' returns; sets the policy's weights.

        Args:
            theta: the current weights.
            deltas: ``[n_delta, n_params]`` unscaled directions.
            candidate_returns: ``[2 * n_delta]`` returns of ``theta + nu deltas`` then ``theta - nu deltas``.
            learning_rate: alpha.
        """
        plus_returns = candidate_returns[: self.n_delta]  # r+_k
        minus_returns = candidate_returns[self.n_delta :]  # r-_k
        # the b best directions by max(r+_k, r-_k)
        top_returns, _ = th.max(th.vstack((plus_returns, minus_returns)), dim=0)
        top_idx = th.argsort(top_returns, descending=True)[: self.n_top]
        plus_returns, minus_returns, deltas = plus_returns[top_idx], minus_returns[top_idx], deltas[top_idx]
        # sigma_R: std of the 2b returns used (smaller steps when returns vary a lot)
        return_std = th.cat([plus_returns, minus_returns]).std()
        step_size = learning_rate / (self.n_top * return_std + 1e-6)
        # theta <- theta + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k
        new_theta = theta + step_size * ((plus_returns - minus_returns) @ deltas)
        th.nn.utils.vector_to_parameters(new_theta, self.policy.parameters())
        self._n_updates += 1
        self.record("train/iterations", self._n_updates, exclude="tensorboard")
        self.record("train/step_size", step_size)
        self.record("rollout/return_std", return_std)

    def evaluate_candidates(self, candidate_weights: th.Tensor, callback: BaseCallback) -> th.Tensor | None:
        """Episodic return of every candidate (``n_eval_episodes`` each), the population batched over env slots.

        A slot runs its candidate until it finished ``n_eval_episodes`` episodes (the VecEnv resets a finished
        env itself), then takes the next candidate; slots with none left keep stepping (their rewards unused)
        until the last candidate is done, and the env is reset before the next iteration.

        Args:
            candidate_weights: ``[pop_size, n_params]``.
            callback: called after every VecEnv step.

        Returns:
            ``[pop_size]`` returns (sum of the episodes' rewards plus ``alive_bonus_offset`` per step), or None if a
            callback stopped training.
        """
        env = self.env
        assert env is not None
        n_envs, pop_size = env.num_envs, candidate_weights.shape[0]
        if self._needs_reset or self._last_obs is None:
            self._last_obs = env.reset()
            self._needs_reset = False
        is_box = isinstance(self.action_space, spaces.Box)
        squash = self.policy.squash_output
        low = self.action_space.low if is_box else None
        high = self.action_space.high if is_box else None

        returns = np.zeros(pop_size)
        episodes_done = np.zeros(pop_size, dtype=np.int64)
        slot = np.full(n_envs, -1)  # candidate of each env slot (-1: idle)
        first = min(n_envs, pop_size)
        slot[:first] = np.arange(first)
        next_candidate = first
        current_reward = np.zeros(n_envs)
        current_length = np.zeros(n_envs, dtype=np.int64)
        # idle slots act with the first candidate's weights (their steps are not scored)
        slot_weights = candidate_weights[np.where(slot >= 0, slot, 0)]
        self.ep_info_buffer.clear()  # the logged episode means are this iteration's, as sb3-contrib
        callback.on_rollout_start()
        obs = self._last_obs
        while (slot >= 0).any():
            if (slot < 0).any():  # an idle slot steps mid-episode: the next iteration starts from a reset
                self._needs_reset = True
            obs_tensor = obs_as_tensor(obs, self.device)  # a batch of n_envs: no shape checks per step
            actions = self.policy.population_forward(obs_tensor, slot_weights).cpu().numpy()
            if is_box:
                actions = self.policy.unscale_action(actions) if squash else np.clip(actions, low, high)
            obs, rewards, dones, infos = env.step(actions)
            self.num_timesteps += n_envs
            callback.update_locals(locals())
            if not callback.on_step():
                self._last_obs = obs
                self._needs_reset = True
                return None
            current_reward += rewards
            current_length += 1
            for i in np.flatnonzero(dones):
                candidate = slot[i]
                if candidate < 0:
                    continue
                episode = infos[i].get("episode")  # the Monitor's undiscounted, unnormalised return
                ep_return = float(episode["r"]) if episode is not None else float(current_reward[i])
                ep_length = int(episode["l"]) if episode is not None else int(current_length[i])
                returns[candidate] += ep_return + self.alive_bonus_offset * ep_length
                self.ep_info_buffer.append({"r": ep_return, "l": ep_length})
                episodes_done[candidate] += 1
                if episodes_done[candidate] == self.n_eval_episodes:
                    if next_candidate < pop_size:
                        slot[i] = next_candidate
                        slot_weights[i] = candidate_weights[next_candidate]
                        next_candidate += 1
                    else:
                        slot[i] = -1
            current_reward[dones] = 0.0
            current_length[dones] = 0
        self._last_obs = obs
        callback.on_rollout_end()
        return th.as_tensor(returns, dtype=th.float32, device=self.device)

    # ------------------------------------------------------------------
    # Logging, checkpoints
    # ------------------------------------------------------------------

    def dump_logs(self) -> None:
        """Send rollout/time metrics (and the buffered train metrics) to the loggers (sb3-contrib's keys)."""
        assert self.ep_info_buffer is not None
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, 1e-9)
        metrics: dict[str, Any] = {
            "time/fps": int((self.num_timesteps - self._num_timesteps_at_start) / time_elapsed),
            "time/time_elapsed": int(time_elapsed),
            "time/total_timesteps": self.num_timesteps,
        }
        if len(self.ep_info_buffer) > 0:
            metrics["rollout/ep_rew_mean"] = safe_mean([ep["r"] for ep in self.ep_info_buffer])
            metrics["rollout/ep_len_mean"] = safe_mean([ep["l"] for ep in self.ep_info_buffer])
        self.log_metrics(metrics, step=self.num_timesteps)

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        return {"needs_reset": self._needs_reset}

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        self._needs_reset = bool(state.get("needs_reset", False))
