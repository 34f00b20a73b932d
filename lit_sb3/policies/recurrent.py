"""Recurrent (LSTM) actor-critic policies for RecurrentPPO, with sb3-contrib 2.9's arguments.

Features go through an LSTM before the actor's (and, by default, a separate LSTM before the critic's) MLP. The
LSTM state is reset (multiplied by 0) wherever ``episode_starts`` is 1. A batch of ``n_seq`` sequences is laid
out sequence after sequence (``[n_seq * length, ...]``); during collection each env is a sequence of length 1.

K > 1 seeds (a policy stacked by :func:`~lit_sb3.policies.seed_stack.stack_module`, ``n_seeds = K``): inputs are
``[K, n_seq * length, ...]`` (each seed's sequences after one another), the LSTMs are
:class:`~lit_sb3.policies.seed_stack.SeedLSTM` and the states ``[n_layers, K * n_seq, hidden]``, seed-major along
the batch (seed i's sequences are columns ``i * n_seq`` to ``(i + 1) * n_seq - 1``); the same code runs both.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.policies.base import ActorCriticPolicy
from lit_sb3.policies.distributions import Distribution
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    MlpExtractor,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = [
    "RNNStates",
    "RecurrentActorCriticCnnPolicy",
    "RecurrentActorCriticPolicy",
    "RecurrentMultiInputActorCriticPolicy",
]


class RNNStates(NamedTuple):
    """Hidden and cell states ``([n_layers, batch, hidden], [n_layers, batch, hidden])`` of actor and critic."""

    pi: tuple[th.Tensor, ...]
    vf: tuple[th.Tensor, ...]


def process_sequence(
    features: th.Tensor, lstm_states: tuple[th.Tensor, th.Tensor], episode_starts: th.Tensor, lstm: nn.Module
) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
    """Run ``lstm`` over sequences, resetting its state where an episode starts.

    Args:
        features: ``[n_seq * length, features_dim]``, sequence after sequence (K > 1 seeds: ``[K, n_seq * length,
            features_dim]``).
        lstm_states: ``(h, c)`` at the start of each sequence, ``[n_layers, n_seq, hidden]`` (K > 1: ``[n_layers,
            K * n_seq, hidden]``, seed-major).
        episode_starts: ``[n_seq * length]`` (K > 1: ``[K, n_seq * length]``), 1 where the state must be reset
            before the step.
        lstm: the LSTM (K > 1: a :class:`~lit_sb3.policies.seed_stack.SeedLSTM`).

    Returns:
        The outputs, shaped as ``features`` with ``hidden`` features, and the final states.
    """
    n_seq = lstm_states[0].shape[1]
    # (n_seq * length, dim) -> (length, n_seq, dim)
    sequence = features.reshape((n_seq, -1, lstm.input_size)).swapaxes(0, 1)
    starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)
    # a reset at the first step only (always so in training minibatches, whose sequences are cut at episode
    # starts, and in collection) is applied to the initial state, and the whole sequence is one LSTM call
    keep = (1.0 - starts[0]).view(1, n_seq, 1)
    state = (keep * lstm_states[0], keep * lstm_states[1])
    # (length, n_seq, hidden) -> (n_seq * length, hidden), or (K, n_seq * length, hidden) for K seeds
    shape = (*features.shape[:-1], lstm.hidden_size)
    if starts.shape[0] == 1 or not bool(starts[1:].any()):
        output, state = lstm(sequence, state)
        return output.transpose(0, 1).reshape(shape), state
    outputs = []
    for t in range(sequence.shape[0]):
        if t > 0:
            keep = (1.0 - starts[t]).view(1, n_seq, 1)
            state = (keep * state[0], keep * state[1])
        hidden, state = lstm(sequence[t].unsqueeze(0), state)
        outputs.append(hidden)
    return th.cat(outputs).transpose(0, 1).reshape(shape), state


class RecurrentActorCriticPolicy(ActorCriticPolicy):
    """Actor-critic policy with LSTMs between the features extractor and the MLPs.

    Args:
        observation_space: the observation space.
        action_space: the action space.
        lr_schedule: learning-rate schedule.
        net_arch: MLP after the LSTM, ``dict(pi=[...], vf=[...])`` or one list for both.
        activation_fn: activation class.
        ortho_init: orthogonal initialisation of the extractor and MLPs (the LSTMs keep torch's).
        use_sde: gSDE exploration (Box actions).
        log_std_init: initial log-std.
        full_std: gSDE: one std per (feature, action).
        use_expln: gSDE: ``expln`` instead of ``exp``.
        squash_output: gSDE: tanh-squash actions.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        share_features_extractor: one extractor for actor and critic.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class.
        optimizer_kwargs: optimizer kwargs.
        lstm_hidden_size: hidden units of each LSTM layer.
        n_lstm_layers: number of LSTM layers.
        shared_lstm: the critic reuses the actor's LSTM (without back-propagating through it).
        enable_critic_lstm: a separate LSTM for the critic (default); with neither, the critic has a linear layer.
        lstm_kwargs: more keyword arguments of ``nn.LSTM``.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        use_sde: bool = False,
        log_std_init: float = 0.0,
        full_std: bool = True,
        use_expln: bool = False,
        squash_output: bool = False,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        lstm_hidden_size: int = 256,
        n_lstm_layers: int = 1,
        shared_lstm: bool = False,
        enable_critic_lstm: bool = True,
        lstm_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if shared_lstm and enable_critic_lstm:
            raise ValueError(
                "shared_lstm=True and enable_critic_lstm=True exclude each other: choose a shared LSTM, a separate "
                "critic LSTM or none (enable_critic_lstm=False)"
            )
        if shared_lstm and not share_features_extractor:
            raise ValueError("shared_lstm=True needs share_features_extractor=True")
        self.lstm_output_dim = lstm_hidden_size
        super().__init__(
            observation_space, action_space, lr_schedule, net_arch, activation_fn, ortho_init, use_sde, log_std_init,
            full_std, use_expln, squash_output, features_extractor_class, features_extractor_kwargs,
            share_features_extractor, normalize_images, optimizer_class, optimizer_kwargs,
        )  # fmt: skip
        self.lstm_kwargs = lstm_kwargs or {}
        self.lstm_hidden_size = lstm_hidden_size
        self.n_lstm_layers = n_lstm_layers
        self.shared_lstm = shared_lstm
        self.enable_critic_lstm = enable_critic_lstm
        self.lstm_actor = nn.LSTM(self.features_dim, lstm_hidden_size, num_layers=n_lstm_layers, **self.lstm_kwargs)
        # (n_layers, 1, hidden): predict() starts from zeros of this shape per env
        self.lstm_hidden_state_shape = (n_lstm_layers, 1, lstm_hidden_size)
        self.critic: nn.Module | None = None
        self.lstm_critic: nn.LSTM | None = None
        if enable_critic_lstm:
            self.lstm_critic = nn.LSTM(
                self.features_dim, lstm_hidden_size, num_layers=n_lstm_layers, **self.lstm_kwargs
            )
        elif not shared_lstm:
            # no LSTM for the critic: a linear layer to the size of the actor's LSTM output
            self.critic = nn.Linear(self.features_dim, lstm_hidden_size)
        self.optimizer = self.make_optimizer(self.parameters(), lr_schedule(1))
        self._pending_states: tuple[np.ndarray, ...] | None = None
        self._pending_starts: np.ndarray | None = None
        self._predicted_states: tuple[np.ndarray, ...] | None = None

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = MlpExtractor(
            self.lstm_output_dim, net_arch=self.net_arch, activation_fn=self.activation_fn, device=self.device
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            lstm_hidden_size=self.lstm_hidden_size,
            n_lstm_layers=self.n_lstm_layers,
            shared_lstm=self.shared_lstm,
            enable_critic_lstm=self.enable_critic_lstm,
            lstm_kwargs=self.lstm_kwargs,
        )
        return data

    def _both_features(self, obs: PyTorchObs) -> tuple[th.Tensor, th.Tensor]:
        if self.share_features_extractor:
            features = self._features(obs, self.features_extractor)
            return features, features
        return self._features(obs, self.pi_features_extractor), self._features(obs, self.vf_features_extractor)

    def _critic_latent(
        self, vf_features: th.Tensor, latent_pi: th.Tensor, states: RNNStates, starts: th.Tensor, new_pi: Any
    ) -> tuple[th.Tensor, Any]:
        if self.lstm_critic is not None:
            return process_sequence(vf_features, states.vf, starts, self.lstm_critic)
        if self.shared_lstm:  # reuse the actor's LSTM output without back-propagating through it
            return latent_pi.detach(), (new_pi[0].detach(), new_pi[1].detach())
        assert self.critic is not None
        return self.critic(vf_features), new_pi

    def forward(  # type: ignore[override]
        self, obs: PyTorchObs, lstm_states: RNNStates, episode_starts: th.Tensor, deterministic: bool = False
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, RNNStates]:
        """Actions, values ``[batch, 1]``, log-probabilities and the new LSTM states.

        Args:
            obs: observations (one per sequence and step).
            lstm_states: states at the start of each sequence.
            episode_starts: 1 where an episode starts (the state is reset there).
            deterministic: deterministic actions.
        """
        pi_features, vf_features = self._both_features(obs)
        latent_pi, states_pi = process_sequence(pi_features, lstm_states.pi, episode_starts, self.lstm_actor)
        latent_vf, states_vf = self._critic_latent(vf_features, latent_pi, lstm_states, episode_starts, states_pi)
        values = self.value_net(self.mlp_extractor.forward_critic(latent_vf))
        distribution = self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(latent_pi))
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        actions = actions.reshape((*log_prob.shape, *self.action_space.shape))  # type: ignore[misc]
        return actions, values, log_prob, RNNStates(states_pi, states_vf)

    def get_distribution(  # type: ignore[override]
        self, obs: PyTorchObs, lstm_states: tuple[th.Tensor, th.Tensor], episode_starts: th.Tensor
    ) -> tuple[Distribution, tuple[th.Tensor, th.Tensor]]:
        """The action distribution and the actor's new LSTM states.

        Args:
            obs: observations.
            lstm_states: the actor's states at the start of each sequence.
            episode_starts: 1 where an episode starts.
        """
        features = self._features(obs, self.pi_features_extractor)
        latent_pi, states = process_sequence(features, lstm_states, episode_starts, self.lstm_actor)
        return self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(latent_pi)), states

    def predict_values(  # type: ignore[override]
        self, obs: PyTorchObs, lstm_states: tuple[th.Tensor, th.Tensor], episode_starts: th.Tensor
    ) -> th.Tensor:
        """State values ``[batch, 1]``.

        Args:
            obs: observations.
            lstm_states: the critic's states (the actor's with ``shared_lstm``) at the start of each sequence.
            episode_starts: 1 where an episode starts.
        """
        features = self._features(obs, self.vf_features_extractor)
        if self.lstm_critic is not None:
            latent_vf, _ = process_sequence(features, lstm_states, episode_starts, self.lstm_critic)
        elif self.shared_lstm:
            latent_vf = process_sequence(features, lstm_states, episode_starts, self.lstm_actor)[0].detach()
        else:
            assert self.critic is not None
            latent_vf = self.critic(features)
        return self.value_net(self.mlp_extractor.forward_critic(latent_vf))

    def evaluate_actions(  # type: ignore[override]
        self, obs: PyTorchObs, actions: th.Tensor, lstm_states: RNNStates, episode_starts: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        """Values, log-probabilities and entropy of ``actions`` over (padded) sequences.

        Args:
            obs: observations, sequence after sequence.
            actions: the actions taken.
            lstm_states: states at the start of each sequence.
            episode_starts: 1 where an episode starts.
        """
        pi_features, vf_features = self._both_features(obs)
        latent_pi, states_pi = process_sequence(pi_features, lstm_states.pi, episode_starts, self.lstm_actor)
        latent_vf, _ = self._critic_latent(vf_features, latent_pi, lstm_states, episode_starts, states_pi)
        distribution = self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(latent_pi))
        values = self.value_net(self.mlp_extractor.forward_critic(latent_vf))
        return values, distribution.log_prob(actions), distribution.entropy()

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        # called by BasePolicy.predict with the states set by predict() below
        obs = observation if not isinstance(observation, dict) else next(iter(observation.values()))
        n_envs = obs.shape[0]
        if self._pending_states is None:
            zeros = th.zeros((self.n_lstm_layers, n_envs, self.lstm_hidden_size), device=self.device)
            states = (zeros, zeros)
        else:
            states = tuple(th.as_tensor(s, dtype=th.float32, device=self.device) for s in self._pending_states[:2])
        starts = th.zeros(n_envs, device=self.device)
        if self._pending_starts is not None:
            starts = th.as_tensor(np.asarray(self._pending_starts), dtype=th.float32, device=self.device).reshape(-1)
        distribution, new_states = self.get_distribution(observation, states, starts)  # type: ignore[arg-type]
        self._predicted_states = (new_states[0].cpu().numpy(), new_states[1].cpu().numpy())
        return distribution.get_actions(deterministic=deterministic)

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Actions (numpy) and the new LSTM state ``(h, c)``, each ``[n_layers, n_envs, hidden]``.

        Args:
            observation: the observation(s).
            state: the state returned by the previous call (None: zeros, a new episode).
            episode_start: 1/True for the envs whose episode starts with this observation (state reset).
            deterministic: deterministic actions.
        """
        # BasePolicy.predict does the numpy/tensor plumbing and calls _predict, which reads and writes these
        self._pending_states, self._pending_starts = state, episode_start
        try:
            actions, _ = super().predict(observation, None, None, deterministic)
            return actions, self._predicted_states
        finally:
            self._pending_states = self._pending_starts = self._predicted_states = None


RecurrentActorCriticCnnPolicy, RecurrentMultiInputActorCriticPolicy = cnn_and_multi_input_variants(
    RecurrentActorCriticPolicy, __name__, ("RecurrentActorCriticCnnPolicy", "RecurrentMultiInputActorCriticPolicy")
)
