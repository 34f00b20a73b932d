"""RecurrentPPO: PPO with LSTM policies (partially observed envs), sb3-contrib's ``RecurrentPPO`` as a
LightningModule.

What differs from :class:`~lit_sb3.algorithms.ppo.PPO`, top to bottom:

1. collection: the policy carries the LSTM states of the training envs from step to step (reset where an episode
   starts); the states before each step are stored in the rollout buffer; the time-out bootstrap and the last
   values use the critic's current states;
2. update: minibatches are sequences cut at episode starts and env changes, padded to the same length
   (:class:`~lit_sb3.buffers.recurrent.RecurrentRolloutBuffer`); the LSTMs re-run over each sequence from its stored
   initial state; PPO's clipped-surrogate losses (:meth:`PPO.train`, unchanged) are averaged over the real
   (unpadded) steps only;
3. inference: ``predict(obs, state, episode_start)`` returns the new state; ``evaluate_policy`` and
   ``RLTrainer.predict/validate/test`` carry it across steps.

K seeds (``SeedBatch(RecurrentPPO, seeds=[...])``): the members' LSTMs are stacked per seed
(:class:`~lit_sb3.policies.seed_stack.SeedLSTM`), the training envs' states are ``[n_layers, K * n_envs, hidden]``
(seed-major columns, as the rollout storage's), and each seed's minibatches are its separate run's padded sequences
(:meth:`~lit_sb3.buffers.recurrent.RecurrentRolloutBuffer.get_seed_sequences`, split points from the seed's own
numpy stream), padded to a common shape across seeds; :meth:`PPO.train` is the one update.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.ppo import PPO
from lit_sb3.buffers.recurrent import RecurrentDictRolloutBuffer, RecurrentRolloutBuffer
from lit_sb3.buffers.rollout import RolloutBuffer
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.recurrent import (
    RecurrentActorCriticCnnPolicy,
    RecurrentActorCriticPolicy,
    RecurrentMultiInputActorCriticPolicy,
    RNNStates,
)
from lit_sb3.vec_env import VecEnv

__all__ = ["RecurrentPPO"]


class RecurrentPPO(PPO):
    """PPO (clip) with recurrent (LSTM) policies, with sb3-contrib 2.9 arguments and defaults.

    Args:
        policy: ``"MlpLstmPolicy"``, ``"CnnLstmPolicy"``, ``"MultiInputLstmPolicy"`` or a recurrent policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate, constant or a schedule of ``progress_remaining``.
        n_steps: steps per env per update.
        batch_size: transitions per minibatch (before padding into sequences).
        n_epochs: passes over the rollout per update.
        gamma: discount factor.
        gae_lambda: GAE bias/variance trade-off.
        clip_range: clipping parameter (constant or schedule).
        clip_range_vf: value clipping parameter (None: none).
        normalize_advantage: normalise advantages per minibatch (over its real steps).
        ent_coef: entropy coefficient.
        vf_coef: value loss coefficient.
        max_grad_norm: gradient clipping norm.
        use_sde: gSDE exploration.
        sde_sample_freq: gSDE noise resampling frequency.
        target_kl: stop the epochs early when the approximate KL exceeds ``1.5 * target_kl``.
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        stats_window_size: episodes averaged for logging.
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        policy_kwargs: policy arguments (``lstm_hidden_size``, ``n_lstm_layers``, ``shared_lstm``,
            ``enable_critic_lstm``, ``lstm_kwargs``, ...).
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
    """

    zoo_name: ClassVar[str] = "ppo_lstm"
    # PPO's update over the seed dimension, with per-seed LSTMs, states and sequence minibatches
    seed_batching: ClassVar[bool] = True
    default_run_name: ClassVar[str] = "RecurrentPPO"
    search_space: ClassVar[str | None] = "ppo"  # the zoo's ppo_lstm sampler is PPO's (its LSTM part is disabled)
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpLstmPolicy": RecurrentActorCriticPolicy,
        "CnnLstmPolicy": RecurrentActorCriticCnnPolicy,
        "MultiInputLstmPolicy": RecurrentMultiInputActorCriticPolicy,
        # the RL Zoo's published ppo_lstm.yml gives `default: policy: 'MlpPolicy'` (sb3-contrib has no such alias and
        # fails on every env without an entry); here the plain names mean the LSTM policies
        "MlpPolicy": RecurrentActorCriticPolicy,
        "CnnPolicy": RecurrentActorCriticCnnPolicy,
        "MultiInputPolicy": RecurrentMultiInputActorCriticPolicy,
    }
    policy: RecurrentActorCriticPolicy

    def __init__(
        self,
        policy: str | type[RecurrentActorCriticPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 128,
        batch_size: int = 128,
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
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
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
        self._last_lstm_states: RNNStates | None = None
        self._init_env_and_model(env, _init_setup_model)

    # ------------------------------------------------------------------
    # Set-up: recurrent policy, buffer and the training envs' LSTM states
    # ------------------------------------------------------------------

    def _default_rollout_buffer_class(self) -> type[RolloutBuffer]:
        return RecurrentDictRolloutBuffer if isinstance(self.observation_space, spaces.Dict) else RecurrentRolloutBuffer

    def _make_policy(self) -> RecurrentActorCriticPolicy:
        policy = super()._make_policy()
        if not isinstance(policy, RecurrentActorCriticPolicy):
            raise ValueError(f"RecurrentPPO needs a RecurrentActorCriticPolicy, got {type(policy).__name__}")
        return policy

    def _rollout_buffer_build_kwargs(self) -> dict[str, Any]:
        lstm = self.policy.lstm_actor
        return {"hidden_state_shape": (self.n_steps, lstm.num_layers, self.n_seeds * self.n_envs, lstm.hidden_size)}

    def _setup_model(self) -> None:
        super()._setup_model()
        lstm = self.policy.lstm_actor
        # the training envs' states; K > 1: every seed's envs, seed-major
        shape = (lstm.num_layers, self.n_seeds * self.n_envs, lstm.hidden_size)
        self._last_lstm_states = RNNStates(
            (th.zeros(shape, device=self.device), th.zeros(shape, device=self.device)),
            (th.zeros(shape, device=self.device), th.zeros(shape, device=self.device)),
        )

    def _on_device_ready(self) -> None:
        super()._on_device_ready()
        if self._last_lstm_states is not None:
            self._last_lstm_states = RNNStates(
                tuple(s.to(self.device) for s in self._last_lstm_states.pi),
                tuple(s.to(self.device) for s in self._last_lstm_states.vf),
            )

    # ------------------------------------------------------------------
    # 1. collection: carry the LSTM states, store those before each step
    # ------------------------------------------------------------------

    def _rollout_policy_step(
        self, env: VecEnv, obs_tensor: th.Tensor | dict[str, th.Tensor]
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, dict[str, Any]]:
        assert self._last_lstm_states is not None
        before = self._last_lstm_states
        episode_starts = th.as_tensor(self._last_episode_starts, dtype=th.float32, device=self.device)
        actions, values, log_probs, self._last_lstm_states = self.policy(obs_tensor, before, episode_starts)
        return actions, values, log_probs, {"lstm_states": before}

    def _terminal_value(self, terminal_obs: th.Tensor | dict[str, th.Tensor], env_idx: int) -> th.Tensor:
        assert self._last_lstm_states is not None
        h, c = self._last_lstm_states.vf
        states = (h[:, env_idx : env_idx + 1].contiguous(), c[:, env_idx : env_idx + 1].contiguous())
        return self.policy.predict_values(terminal_obs, states, th.zeros(1, device=self.device))[0]

    def _last_values(self, obs_tensor: th.Tensor | dict[str, th.Tensor], dones: np.ndarray) -> th.Tensor:
        assert self._last_lstm_states is not None
        episode_starts = th.as_tensor(dones, dtype=th.float32, device=self.device)
        return self.policy.predict_values(obs_tensor, self._last_lstm_states.vf, episode_starts)

    def _seed_terminal_values(self, terminal_obs: th.Tensor | dict[str, th.Tensor]) -> th.Tensor:
        # every env's critic state after the step, no reset: each time-out's value is _terminal_value's
        assert self._last_lstm_states is not None
        starts = th.zeros(self.n_seeds * self.n_envs, device=self.device)
        return self.policy.predict_values(terminal_obs, self._last_lstm_states.vf, starts)

    # ------------------------------------------------------------------
    # 2. update: PPO's losses over the real steps of padded sequences
    # ------------------------------------------------------------------

    def _minibatches(self, batch_size: int | None, running: th.Tensor | None = None) -> Iterator[Any]:
        """Padded sequence minibatches: K = 1 the buffer's own (numpy's global stream picks the split point, as in
        sb3-contrib); K > 1 each seed's own, its split point from its own numpy stream (the one its separate run
        seeds with ``np.random.seed(seed)``), ``[K, n_seq * length, ...]``.

        Args:
            batch_size: transitions per minibatch and seed before padding.
            running: K > 1: the seeds still in the update (the others draw no split point).
        """
        state = self._seed_state
        if state is None:
            return super()._minibatches(batch_size, running)
        assert isinstance(self.rollout_buffer, (RecurrentRolloutBuffer, RecurrentDictRolloutBuffer))
        return self.rollout_buffer.get_seed_sequences(batch_size, self._drawing_streams(state.np_rngs, running))

    def _evaluate_minibatch(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, Any, Any]:
        values, log_prob, entropy = self.policy.evaluate_actions(
            rollout_data.observations, actions, rollout_data.lstm_states, rollout_data.episode_starts
        )
        real = rollout_data.mask > 1e-8  # [n_seq * length]; K > 1: [K, n_seq * length]

        def real_steps(x: th.Tensor) -> th.Tensor:
            # the unpadded steps in order: [n]; K > 1: [K, n] (every seed's minibatch has n = batch_size real steps)
            return x.reshape(real.shape)[real].reshape(*real.shape[:-1], -1)

        # PPO's means over these steps are sb3-contrib's masked means (th.mean(x[mask]))
        minibatch = rollout_data._replace(
            advantages=real_steps(rollout_data.advantages),
            old_log_prob=real_steps(rollout_data.old_log_prob),
            old_values=real_steps(rollout_data.old_values),
            returns=real_steps(rollout_data.returns),
        )
        return real_steps(values), real_steps(log_prob), None if entropy is None else real_steps(entropy), minibatch

    def _sync_member_state(self, i: int, member: Any) -> None:
        """Seed index i's counters, episodes, last observations and its envs' LSTM states into member i."""
        super()._sync_member_state(i, member)
        if self._last_lstm_states is not None:
            cols = slice(i * self.n_envs, (i + 1) * self.n_envs)
            pi, vf = self._last_lstm_states
            member._last_lstm_states = RNNStates(
                tuple(t[:, cols].clone() for t in pi), tuple(t[:, cols].clone() for t in vf)
            )

    # ------------------------------------------------------------------
    # Checkpoints: the training envs' LSTM states resume too
    # ------------------------------------------------------------------

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        state = super()._extra_checkpoint_state()
        if self._last_lstm_states is not None:
            pi, vf = self._last_lstm_states
            state["lstm_states"] = [t.detach().cpu().clone() for t in (*pi, *vf)]
        return state

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        super()._load_extra_checkpoint_state(state)
        saved = state.get("lstm_states")
        if saved is not None:
            h_pi, c_pi, h_vf, c_vf = (th.as_tensor(t, device=self.device) for t in saved)
            self._last_lstm_states = RNNStates((h_pi, c_pi), (h_vf, c_vf))
