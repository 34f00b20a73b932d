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
from collections import deque
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.on_policy import obs_as_tensor
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.logger import rollout_metrics
from lit_sb3.core.schedules import get_schedule_fn
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.ars import ARSLinearPolicy, ARSPolicy
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.seed_stack import ParamLink, seed_randn_like

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
    seed_batching: ClassVar[bool] = True
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
        # (K > 1: one flag per seed)
        self._needs_reset: bool | np.ndarray = False
        # K > 1: each seed's env-step count (seeds end episodes at different steps); None at K = 1
        self._seed_timesteps: np.ndarray | None = None
        self._weight_links: list[ParamLink] = []
        self._init_env_and_model(env, _init_setup_model)

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.delta_std_schedule = get_schedule_fn(self.delta_std)
        if self._seed_state is not None:  # K > 1: the members' policies (built as their separate runs), stacked
            self._seed_state.stack_members()
            first = self.members[0].policy
            by_member = {id(link.member_tensors[0]): link for link in self._seed_state.links}
            self._weight_links = [by_member[id(p)] for p in first.parameters()]  # theta's layout
            self.n_params = sum(p.numel() for p in first.parameters())
            self._needs_reset = np.zeros(self.n_seeds, dtype=bool)
            return
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
        """The current ARS weights ``theta``: the policy's parameters as one flat vector (K > 1: ``[K, n_params]``,
        row i laid out as seed i's single policy's ``parameters_to_vector``)."""
        if self._seed_state is None:
            return th.nn.utils.parameters_to_vector(self.policy.parameters()).detach()
        k = self.n_seeds
        return th.cat(
            [
                (link.stacked.transpose(-1, -2) if link.transpose else link.stacked).detach().reshape(k, -1)
                for link in self._weight_links
            ],
            dim=1,
        )

    def _set_weights(self, theta: th.Tensor) -> None:
        """Set the policy's parameters from ``theta`` (``[n_params]``; K > 1 ``[K, n_params]``)."""
        if self._seed_state is None:
            th.nn.utils.vector_to_parameters(theta, self.policy.parameters())
            return
        k, offset = self.n_seeds, 0
        with th.no_grad():
            for link in self._weight_links:
                single = link.member_tensors[0]
                part = theta[:, offset : offset + single.numel()].reshape(k, *single.shape)
                offset += single.numel()
                link.stacked.copy_(part.transpose(-1, -2) if link.transpose else part.reshape(link.stacked.shape))

    def _prepare_fit(self) -> None:
        if self._seed_state is None:
            return
        context = self.fit_context
        if self._seed_timesteps is None or (context is not None and context.reset_num_timesteps):
            self._seed_timesteps = np.full(self.n_seeds, self.num_timesteps, dtype=np.int64)
        self._sync_num_timesteps()

    def _sync_num_timesteps(self) -> None:
        """K > 1: ``num_timesteps`` is the smallest env-step count of the live seeds (the fit ends when every
        seed has spent its budget)."""
        assert self._seed_timesteps is not None
        live = self.active_seeds
        self.num_timesteps = int(self._seed_timesteps[live].min()) if live else int(self._seed_timesteps.max())

    # ------------------------------------------------------------------
    # One ARS iteration
    # ------------------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """One ARS iteration (Mania et al. 2018, Algorithm 2), for every seed that takes it.

        Sample ``delta_1..delta_N ~ N(0, I)`` (N = ``n_delta``), evaluate ``pi_{theta + nu delta_k}`` and
        ``pi_{theta - nu delta_k}`` (nu = ``delta_std``), keep the ``b = n_top`` directions with the largest
        ``max(r+_k, r-_k)``, and step

            theta <- theta + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k

        with ``sigma_R`` the standard deviation of the ``2b`` kept returns and alpha the learning rate (the
        perturbation scale nu is folded into alpha, as in the authors' and sb3-contrib's code). K > 1: every tensor
        has a leading seed dimension; a seed takes the iteration while it is live and its own env-step count is
        below the budget (as its separate run), the others sit it out (no draws, no env steps, weights kept).
        """
        assert self._rl_callback is not None
        start = self.num_timesteps
        taking = self._taking_seeds()
        delta_std, learning_rate = self._seed_schedules(taking)

        theta = self.weights
        size = (self.n_delta, self.n_params)
        if taking is None:  # K = 1: torch's global stream, as sb3-contrib
            deltas = th.normal(mean=0.0, std=1.0, size=size, device=self.device)
        else:  # seed i's directions from its own stream (zeros for a seed sitting out)
            generators = self.seed_generators
            assert generators is not None
            streams = [g if take else None for g, take in zip(generators, taking.tolist())]
            deltas = seed_randn_like(theta.new_empty(self.n_seeds, *size), streams)
        policy_deltas = deltas * (delta_std if taking is None else delta_std.reshape(-1, 1, 1))
        candidates = th.cat([theta.unsqueeze(-2) + policy_deltas, theta.unsqueeze(-2) - policy_deltas], dim=-2)

        with th.no_grad():
            candidate_returns = self.evaluate_candidates(candidates, self._rl_callback)
        if candidate_returns is None:  # a callback stopped training
            self._stop_requested = True
            return None
        self._ars_update(theta, deltas, candidate_returns, learning_rate, taking)
        self.record("train/delta_std", delta_std)
        self.record("train/learning_rate", learning_rate)
        if self._seed_state is not None:
            self._seed_state.update_mask = None

        self._end_cycle()
        self.dump_logs(taking)
        context = self.fit_context
        if context is not None and context.crossed_env_step_boundary(start, self.num_timesteps):
            context.request_boundary()
        return None

    def _taking_seeds(self) -> th.Tensor | None:
        """K > 1: ``[K]`` bool of the seeds that take this iteration (live, own count below the budget); also the
        update mask of the per-seed metrics. None at K = 1 (the trainer decides whether it runs)."""
        state = self._seed_state
        if state is None:
            self._update_current_progress_remaining(self.num_timesteps, self._total_timesteps)
            return None
        assert self._seed_timesteps is not None
        taking = th.tensor([i not in self.failed for i in range(self.n_seeds)])
        taking &= th.as_tensor(self._seed_timesteps < self._total_timesteps)
        state.update_mask = taking
        return taking

    def _seed_schedules(self, taking: th.Tensor | None) -> tuple[Any, Any]:
        """``delta_std`` and the learning rate at the current progress (K > 1: ``[K]``, each seed's own)."""
        if taking is None:
            progress = self._current_progress_remaining
            return self.delta_std_schedule(progress), self.lr_schedule(progress)
        assert self._seed_timesteps is not None
        progress = [1.0 - float(n) / float(self._total_timesteps) for n in self._seed_timesteps]
        delta_std = th.tensor([float(self.delta_std_schedule(p)) for p in progress], device=self.device)
        learning_rate = th.tensor([float(self.lr_schedule(p)) for p in progress], device=self.device)
        self._current_progress_remaining = min(progress)
        return delta_std, learning_rate

    def _ars_update(
        self,
        theta: th.Tensor,
        deltas: th.Tensor,
        candidate_returns: th.Tensor,
        learning_rate: float | th.Tensor,
        taking: th.Tensor | None = None,
    ) -> None:
        """The ARS step from the sampled directions and the candidates' returns; sets the policy's weights.

        Args:
            theta: the current weights ``[n_params]`` (K > 1: ``[K, n_params]``).
            deltas: ``[n_delta, n_params]`` unscaled directions (K > 1: ``[K, n_delta, n_params]``).
            candidate_returns: ``[2 * n_delta]`` returns of ``theta + nu deltas`` then ``theta - nu deltas``
                (K > 1: ``[K, 2 * n_delta]``).
            learning_rate: alpha (K > 1: ``[K]``).
            taking: K > 1: ``[K]`` bool of the seeds that take this update (the others keep their weights).
        """
        plus_returns = candidate_returns[..., : self.n_delta]  # r+_k
        minus_returns = candidate_returns[..., self.n_delta :]  # r-_k
        # the b best directions by max(r+_k, r-_k), each seed its own
        top_returns = th.maximum(plus_returns, minus_returns)
        top_idx = th.argsort(top_returns, dim=-1, descending=True)[..., : self.n_top]
        plus_returns, minus_returns = plus_returns.gather(-1, top_idx), minus_returns.gather(-1, top_idx)
        deltas = th.take_along_dim(deltas, top_idx.unsqueeze(-1), dim=-2)
        # sigma_R: std of the 2b returns used (smaller steps when returns vary a lot)
        return_std = th.cat([plus_returns, minus_returns], dim=-1).std(dim=-1)
        step_size = learning_rate / (self.n_top * return_std + 1e-6)
        # theta <- theta + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k
        if taking is None:
            new_theta = theta + step_size * ((plus_returns - minus_returns) @ deltas)
            self._n_updates += 1
        else:
            direction = th.bmm((plus_returns - minus_returns).unsqueeze(1), deltas).squeeze(1)
            new_theta = th.where(
                taking.to(theta.device).unsqueeze(1), theta + step_size.unsqueeze(1) * direction, theta
            )
            counts = self._n_updates if isinstance(self._n_updates, np.ndarray) else np.zeros(self.n_seeds, np.int64)
            self._n_updates = counts + taking.numpy().astype(np.int64)
        self._set_weights(new_theta)
        self.record("train/iterations", self._n_updates, exclude="tensorboard")
        self.record("train/step_size", step_size)
        self.record("rollout/return_std", return_std)

    def evaluate_candidates(self, candidate_weights: th.Tensor, callback: BaseCallback) -> th.Tensor | None:
        """Episodic return of every candidate (``n_eval_episodes`` each), the population batched over env slots.

        A slot runs its candidate until it finished ``n_eval_episodes`` episodes (the VecEnv resets a finished
        env itself), then takes the next candidate; slots with none left keep stepping (their rewards unused)
        until the last candidate of their seed is done, and the env is reset before the seed's next iteration.
        K > 1: seed i's candidates run on seed i's VecEnv; every running seed's slots act in one population
        forward; a seed whose candidates are all done (or that sits this iteration out) does not step.

        Args:
            candidate_weights: ``[pop_size, n_params]`` (K > 1: ``[K, pop_size, n_params]``).
            callback: called after every (lockstep) VecEnv step.

        Returns:
            ``[pop_size]`` returns (sum of the episodes' rewards plus ``alive_bonus_offset`` per step; K > 1:
            ``[K, pop_size]``, zeros for a seed sitting out), or None if a callback stopped training.
        """
        k, n_envs = self.n_seeds, self.n_envs
        single = self._seed_state is None
        weights = candidate_weights.unsqueeze(0) if single else candidate_weights  # [K, pop, n_params]
        pop_size = weights.shape[1]
        envs = self.envs
        taking = [True] if single else [bool(t) for t in self._seed_state.update_mask.tolist()]  # type: ignore[union-attr]
        needs_reset = np.atleast_1d(np.asarray(self._needs_reset, dtype=bool)).copy()
        if single and self._last_obs is None:
            needs_reset[0] = True
        obs = [self._last_obs] if single else list(self._last_obs)  # type: ignore[arg-type]
        for i in range(k):
            if taking[i] and needs_reset[i]:
                obs[i] = envs[i].reset()
                needs_reset[i] = False
        policy = self.members[0].policy  # the single policy's layout: its population forward takes any weights
        is_box = isinstance(self.action_space, spaces.Box)
        squash = policy.squash_output
        low = self.action_space.low if is_box else None
        high = self.action_space.high if is_box else None

        returns = np.zeros((k, pop_size))
        episodes_done = np.zeros((k, pop_size), dtype=np.int64)
        slot = np.full((k, n_envs), -1)  # candidate of each env slot of each seed (-1: idle)
        first = min(n_envs, pop_size)
        for i in range(k):
            if taking[i]:
                slot[i, :first] = np.arange(first)
        next_candidate = np.full(k, first)
        current_reward = np.zeros((k, n_envs))
        current_length = np.zeros((k, n_envs), dtype=np.int64)
        # idle slots act with the first candidate's weights (their steps are not scored)
        slot_weights = th.stack([weights[i][np.where(slot[i] >= 0, slot[i], 0)] for i in range(k)])
        for i in range(k):
            if taking[i]:  # the logged episode means are this iteration's, as sb3-contrib
                self._ep_info_buffers[i].clear()
        callback.on_rollout_start()
        running = [i for i in range(k) if (slot[i] >= 0).any()]
        while running:
            for i in running:
                if (slot[i] < 0).any():  # an idle slot steps mid-episode: the next iteration starts from a reset
                    needs_reset[i] = True
            # a batch of n_envs per running seed: no shape checks per step
            obs_tensor = obs_as_tensor(obs[0] if single else np.concatenate([obs[i] for i in running]), self.device)
            actions = policy.population_forward(obs_tensor, slot_weights[running].flatten(0, 1)).cpu().numpy()
            if is_box:
                actions = policy.unscale_action(actions) if squash else np.clip(actions, low, high)
            actions = actions.reshape(len(running), n_envs, *actions.shape[1:])
            stepped = []
            for row, i in enumerate(running):
                at = int(self._seed_timesteps[i]) + n_envs if not single else self.num_timesteps + n_envs  # type: ignore[index]
                step = self._step_seed_env(i, envs[i], actions[row], at)
                if step is None:  # the env raised: seed i failed alone
                    slot[i], returns[i], needs_reset[i] = -1, 0.0, True
                    continue
                new_obs, rewards, dones, infos = step
                if not single and not (np.isfinite(rewards).all() and np.isfinite(new_obs).all()):
                    what = "reward" if not np.isfinite(rewards).all() else "observation"
                    at = int(self._seed_timesteps[i]) + n_envs  # type: ignore[index]
                    self.fail_seed(i, f"diverged: non-finite {what} from the env at step {at}")
                    slot[i], returns[i], needs_reset[i] = -1, 0.0, True
                    continue
                obs[i] = new_obs
                stepped.append((i, rewards, dones, infos))
            if single:
                self.num_timesteps += n_envs
            else:
                for i, *_ in stepped:
                    self._seed_timesteps[i] += n_envs  # type: ignore[index]
                self._sync_num_timesteps()
            if single:
                callback.update_locals(locals())
            else:  # each seed's part of the step (a seed that did not step: no reward, no episode end)
                step_rewards = [np.zeros(n_envs, dtype=np.float32) for _ in range(k)]
                step_dones = [np.zeros(n_envs, dtype=bool) for _ in range(k)]
                step_infos: list[list[dict[str, Any]]] = [[{} for _ in range(n_envs)] for _ in range(k)]
                for i, rewards, dones, infos in stepped:
                    step_rewards[i], step_dones[i], step_infos[i] = rewards, dones, infos
                callback.update_locals({"rewards": step_rewards, "dones": step_dones, "infos": step_infos})
            if not callback.on_step():
                self._needs_reset = True if single else np.ones(k, dtype=bool)
                self._last_obs = obs[0] if single else np.stack(obs)
                return None
            for i, rewards, dones, infos in stepped:
                current_reward[i] += rewards
                current_length[i] += 1
                for j in np.flatnonzero(dones):
                    candidate = slot[i, j]
                    if candidate < 0:
                        continue
                    episode = infos[j].get("episode")  # the Monitor's undiscounted, unnormalised return
                    ep_return = float(episode["r"]) if episode is not None else float(current_reward[i, j])
                    ep_length = int(episode["l"]) if episode is not None else int(current_length[i, j])
                    returns[i, candidate] += ep_return + self.alive_bonus_offset * ep_length
                    self._ep_info_buffers[i].append({"r": ep_return, "l": ep_length})
                    episodes_done[i, candidate] += 1
                    if episodes_done[i, candidate] == self.n_eval_episodes:
                        if next_candidate[i] < pop_size:
                            slot[i, j] = next_candidate[i]
                            slot_weights[i, j] = weights[i, next_candidate[i]]
                            next_candidate[i] += 1
                        else:
                            slot[i, j] = -1
                current_reward[i, dones] = 0.0
                current_length[i, dones] = 0
            running = [i for i in running if (slot[i] >= 0).any()]
        self._needs_reset = bool(needs_reset[0]) if single else needs_reset
        self._last_obs = obs[0] if single else np.stack(obs)
        callback.on_rollout_end()
        out = th.as_tensor(returns, dtype=th.float32, device=self.device)
        return out[0] if single else out

    # ------------------------------------------------------------------
    # Logging, members, checkpoints
    # ------------------------------------------------------------------

    def dump_logs(self, taking: th.Tensor | None = None) -> None:
        """Send rollout/time metrics (and the buffered train metrics) to the loggers (sb3-contrib's keys) when the
        iteration count hits the log interval; K > 1: each seed that took this iteration, by its own count, as
        ``seed{i}/<key>``.

        Args:
            taking: K > 1: ``[K]`` bool of the seeds that took this iteration.
        """
        interval = self._log_interval
        if interval is None or interval <= 0:
            return
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, 1e-9)
        counts = np.atleast_1d(self._n_updates)
        seeds = [0] if taking is None else [i for i in self.active_seeds if bool(taking[i])]
        for i in seeds:
            if counts[i] % interval != 0:
                continue
            steps = self.num_timesteps if taking is None else int(self._seed_timesteps[i])  # type: ignore[index]
            metrics: dict[str, Any] = {
                "time/fps": int((steps - self._num_timesteps_at_start) / time_elapsed),
                "time/time_elapsed": int(time_elapsed),
                "time/total_timesteps": steps,
            }
            metrics.update(rollout_metrics(self._ep_info_buffers[i]))
            if self._seed_state is None:
                self.log_metrics(metrics, step=self.num_timesteps)
            else:
                self._seed_state.dump_logs(i, metrics)

    def member(self, i: int) -> BaseAlgorithm:
        member = super().member(i)
        if self._seed_timesteps is not None and member is not self:
            member.num_timesteps = int(self._seed_timesteps[i])  # its own count (seeds are not in lockstep)
        return member

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Seed index i's episode statistics, last observations and reset flag into member i."""
        assert isinstance(member, ARS) and isinstance(self._needs_reset, np.ndarray)
        buffers = self._ep_info_buffers
        if len(buffers) > i:  # after a fit started
            member.ep_info_buffer = deque(buffers[i], maxlen=member.stats_window_size)
        member._needs_reset = bool(self._needs_reset[i])
        if self._last_obs is not None:
            member._last_obs = np.array(self._last_obs[i], copy=True)

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        return {"needs_reset": self._needs_reset}

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        self._needs_reset = bool(state.get("needs_reset", False))
