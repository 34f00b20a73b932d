"""Rollout buffers for RecurrentPPO: the LSTM states of every step are stored, and minibatches are sequences.

Minibatches follow sb3-contrib's ``RecurrentRolloutBuffer``: the rollout is flattened env after env (order kept),
rotated by a random split point (``np.random.randint``), and cut into ``batch_size`` chunks; each chunk is split into
sequences wherever an episode starts or the env changes, and the sequences are padded with zeros to the longest
one. Samples carry the LSTM states at each sequence's first step, the episode starts, and ``mask`` (1 on real steps,
0 on padding). Here the padding is one gather with an index matrix on tensors prepared once per rollout (no
per-sequence tensor copies).

K seeds (``n_seeds``, seed batching): the columns are ``K * n_envs``, seed-major, as in
:class:`~lit_sb3.buffers.rollout.RolloutBuffer`, and the stored LSTM states ``[n_steps, n_layers, K * n_envs,
hidden]``. :meth:`~_RecurrentMixin.get_seed_sequences` cuts each seed's own rollout exactly as its separate run's
buffer does (its split point from its own numpy stream, its chunks, its sequences and padding), then pads the K
seeds' minibatches to a common number of sequences and length (more padding, ``mask`` 0), so that each field is
``[K, n_seq * length, ...]`` and the initial states ``[n_layers, K * n_seq, hidden]``. Padding at the end of a
sequence or as whole extra sequences changes no real step's LSTM output, and every seed's minibatch holds the
same number of real steps (its ``batch_size``).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.buffers.rollout import DictRolloutBuffer, RolloutBuffer
from lit_sb3.core.types import TensorDict
from lit_sb3.policies.recurrent import RNNStates

__all__ = [
    "RecurrentDictRolloutBuffer",
    "RecurrentDictRolloutBufferSamples",
    "RecurrentRolloutBuffer",
    "RecurrentRolloutBufferSamples",
    "sequence_layout",
]


class RecurrentRolloutBufferSamples(NamedTuple):
    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    lstm_states: RNNStates
    episode_starts: th.Tensor
    mask: th.Tensor


class RecurrentDictRolloutBufferSamples(NamedTuple):
    observations: TensorDict
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    lstm_states: RNNStates
    episode_starts: th.Tensor
    mask: th.Tensor


def sequence_layout(episode_starts: np.ndarray, env_change: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut a chunk of consecutive transitions into sequences and lay them out padded.

    Args:
        episode_starts: ``[n]`` episode starts of the chunk's transitions.
        env_change: ``[n]`` 1 where the transition comes from another env than the previous one.

    Returns:
        ``(seq_starts, index, valid)``: the positions of the first transition of each sequence, and two
        ``[n_seq, max_length]`` matrices: the position in the chunk of each padded slot (0 on padding) and whether
        the slot is a real transition.
    """
    seq_start = np.logical_or(episode_starts, env_change).reshape(-1)
    seq_start[0] = True
    seq_starts = np.flatnonzero(seq_start)
    lengths = np.diff(np.append(seq_starts, len(seq_start)))
    steps = np.arange(int(lengths.max()))
    valid = steps[None, :] < lengths[:, None]
    index = np.where(valid, seq_starts[:, None] + steps[None, :], 0)
    return seq_starts, index, valid


class _RecurrentMixin:
    """Stores the LSTM states and samples padded sequences (see the module docstring)."""

    hidden_state_shape: tuple[int, int, int, int]
    _samples_class: type

    def _reset_common(self) -> None:
        super()._reset_common()  # type: ignore[misc]
        # (n_steps, n_layers, n_envs, hidden), as sb3-contrib
        self.hidden_states_pi = np.zeros(self.hidden_state_shape, dtype=np.float32)
        self.cell_states_pi = np.zeros(self.hidden_state_shape, dtype=np.float32)
        self.hidden_states_vf = np.zeros(self.hidden_state_shape, dtype=np.float32)
        self.cell_states_vf = np.zeros(self.hidden_state_shape, dtype=np.float32)

    def add(self, *args: Any, lstm_states: RNNStates, **kwargs: Any) -> None:
        """Store one step of every env (see :meth:`RolloutBuffer.add`) and the LSTM states before it.

        Args:
            args: the arguments of :meth:`RolloutBuffer.add`.
            lstm_states: actor and critic ``(h, c)``, each ``[n_layers, n_envs, hidden]``.
            kwargs: the keyword arguments of :meth:`RolloutBuffer.add`.
        """
        pos = self.pos  # type: ignore[attr-defined]
        self.hidden_states_pi[pos] = lstm_states.pi[0].detach().cpu().numpy()
        self.cell_states_pi[pos] = lstm_states.pi[1].detach().cpu().numpy()
        self.hidden_states_vf[pos] = lstm_states.vf[0].detach().cpu().numpy()
        self.cell_states_vf[pos] = lstm_states.vf[1].detach().cpu().numpy()
        super().add(*args, **kwargs)  # type: ignore[misc]

    def _prepare_tensors(self) -> None:
        super()._prepare_tensors()  # type: ignore[misc]
        flat = self._flat  # type: ignore[attr-defined]
        for name in ("hidden_states_pi", "cell_states_pi", "hidden_states_vf", "cell_states_vf"):
            # (n_steps, n_layers, n_envs, hidden) -> (n_steps, n_envs, n_layers, hidden) -> (n_envs * n_steps, ...)
            flat[name] = self._flat_tensor(getattr(self, name).swapaxes(1, 2))  # type: ignore[attr-defined]
        flat["episode_starts"] = self._flat_tensor(self.episode_starts).flatten()  # type: ignore[attr-defined]

    def get(self, batch_size: int | None = None) -> Generator[Any, None, None]:
        """Yield padded sequence minibatches covering the rollout once (sb3-contrib's sampling).

        Args:
            batch_size: transitions per minibatch before padding (None: the whole rollout).
        """
        if not self.full:  # type: ignore[attr-defined]
            raise RuntimeError(f"{type(self).__name__}.get() needs a full rollout.")
        if not self._flat:  # type: ignore[attr-defined]
            self._prepare_tensors()
        self.generator_ready = True
        total = self.buffer_size * self.n_envs  # type: ignore[attr-defined]
        if batch_size is None:
            batch_size = total
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size}")
        # keep the order, rotate by a random split point
        split_index = np.random.randint(total)
        indices = np.concatenate((np.arange(total)[split_index:], np.arange(total)[:split_index]))
        env_change = np.zeros((self.buffer_size, self.n_envs))  # type: ignore[attr-defined]
        env_change[0, :] = 1.0
        env_change = self.swap_and_flatten(env_change).reshape(-1)  # type: ignore[attr-defined]
        episode_starts = self.swap_and_flatten(self.episode_starts).reshape(-1)  # type: ignore[attr-defined]
        for start in range(0, total, batch_size):
            batch_inds = indices[start : start + batch_size]
            seq_starts, index, valid = sequence_layout(episode_starts[batch_inds], env_change[batch_inds])
            yield self._padded_samples(batch_inds[index].reshape(-1), valid.reshape(-1), batch_inds[seq_starts])

    def get_seed_sequences(
        self, batch_size: int | None, rngs: Sequence[np.random.RandomState | None]
    ) -> Generator[Any, None, None]:
        """Yield the K seeds' padded sequence minibatches at once (one pass over each seed's rollout): seed k's are
        those its own buffer's :meth:`get` yields, its split point drawn from ``rngs[k]`` (the numpy stream its
        separate run draws from), each field ``[K, n_seq * length, ...]`` (see the module docstring).

        Args:
            batch_size: transitions per minibatch and seed before padding (None: the seed's whole rollout).
            rngs: one numpy ``RandomState`` per seed; a None entry: a seed sitting out, which draws nothing (its
                rollout is not rotated).
        """
        if not self.full:  # type: ignore[attr-defined]
            raise RuntimeError(f"{type(self).__name__}.get_seed_sequences() needs a full rollout.")
        n_seeds, n_envs = self.n_seeds, self.envs_per_seed  # type: ignore[attr-defined]
        if len(rngs) != n_seeds:
            raise ValueError(
                f"get_seed_sequences() needs one random stream per seed: {n_seeds} seeds, {len(rngs)} given."
            )
        if not self._flat:  # type: ignore[attr-defined]
            self._prepare_tensors()
        self.generator_ready = True
        per_seed = self.buffer_size * n_envs  # type: ignore[attr-defined]
        if batch_size is None:
            batch_size = per_seed
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size}")
        orders = []  # each seed's rollout rotated by its own split point, offset to its block of rows
        for k, rng in enumerate(rngs):
            split_index = rng.randint(per_seed) if rng is not None else 0
            order = np.concatenate((np.arange(per_seed)[split_index:], np.arange(per_seed)[:split_index]))
            orders.append(order + k * per_seed)
        env_change = np.zeros((self.buffer_size, n_envs))  # type: ignore[attr-defined]
        env_change[0, :] = 1.0
        env_change = np.tile(self.swap_and_flatten(env_change).reshape(-1), n_seeds)  # type: ignore[attr-defined]
        episode_starts = self.swap_and_flatten(self.episode_starts).reshape(-1)  # type: ignore[attr-defined]
        for start in range(0, per_seed, batch_size):
            chunks = [order[start : start + batch_size] for order in orders]
            layouts = [sequence_layout(episode_starts[inds], env_change[inds]) for inds in chunks]
            n_seq = max(len(seq_starts) for seq_starts, _, _ in layouts)
            length = max(index.shape[1] for _, index, _ in layouts)
            rows = np.zeros((n_seeds, n_seq, length), dtype=np.int64)
            valid = np.zeros((n_seeds, n_seq, length), dtype=bool)
            # a padding sequence starts from its own seed's first row (its outputs are never used)
            firsts = np.repeat(np.arange(n_seeds) * per_seed, n_seq).reshape(n_seeds, n_seq)
            for k, (inds, (seq_starts, index, seq_valid)) in enumerate(zip(chunks, layouts)):
                rows[k, : index.shape[0], : index.shape[1]] = np.where(seq_valid, inds[index], k * per_seed)
                valid[k, : index.shape[0], : index.shape[1]] = seq_valid
                firsts[k, : len(seq_starts)] = inds[seq_starts]
            yield self._padded_samples(rows.reshape(n_seeds, -1), valid.reshape(n_seeds, -1), firsts.reshape(-1))

    def _padded_samples(self, rows: np.ndarray, valid: np.ndarray, firsts: np.ndarray) -> Any:
        """The samples of padded sequences: each field gathered at ``rows`` (zero where not ``valid``), shaped as
        ``valid`` (``[n_seq * length]``, or ``[K, n_seq * length]`` for K seeds), the LSTM states at ``firsts``.

        Args:
            rows: the rollout row of each padded slot.
            valid: whether the slot is a real transition.
            firsts: the rollout row of each sequence's first step (seed-major for K seeds).
        """
        device = self.device  # type: ignore[attr-defined]
        flat = self._flat  # type: ignore[attr-defined]
        index = th.as_tensor(rows.reshape(-1), device=device)
        mask = th.as_tensor(valid.reshape(-1), device=device)

        def padded(tensor: th.Tensor) -> th.Tensor:
            values = tensor[index]
            keep = mask.reshape(-1, *([1] * (values.dim() - 1)))
            values = th.where(keep, values, th.zeros((), dtype=values.dtype, device=device))
            return values.reshape(*valid.shape, *values.shape[1:])

        first_rows = th.as_tensor(firsts, device=device)

        def initial(name: str) -> th.Tensor:  # (n_seq, n_layers, hidden) -> (n_layers, n_seq, hidden)
            return flat[name][first_rows].swapaxes(0, 1).contiguous()

        observations = flat["observations"]
        return self._samples_class(
            observations=(
                {key: padded(obs) for key, obs in observations.items()}
                if isinstance(observations, dict)
                else padded(observations)
            ),
            actions=padded(flat["actions"]),
            old_values=padded(flat["values"]),
            old_log_prob=padded(flat["log_probs"]),
            advantages=padded(flat["advantages"]),
            returns=padded(flat["returns"]),
            lstm_states=RNNStates(
                (initial("hidden_states_pi"), initial("cell_states_pi")),
                (initial("hidden_states_vf"), initial("cell_states_vf")),
            ),
            episode_starts=padded(flat["episode_starts"]),
            mask=mask.reshape(valid.shape).float(),
        )


class RecurrentRolloutBuffer(_RecurrentMixin, RolloutBuffer):
    """:class:`RolloutBuffer` with LSTM states and padded sequence minibatches.

    Args:
        buffer_size: steps per env in a rollout.
        observation_space: observation space.
        action_space: action space.
        hidden_state_shape: ``(n_steps, n_lstm_layers, n_seeds * n_envs, lstm_hidden_size)``.
        device: torch device of the samples.
        gae_lambda: GAE lambda.
        gamma: discount factor.
        n_envs: number of parallel environments (per seed).
        n_seeds: number of seeds K (their columns side by side, seed-major).
    """

    _samples_class = RecurrentRolloutBufferSamples

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        hidden_state_shape: tuple[int, int, int, int],
        device: th.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
        n_seeds: int = 1,
    ) -> None:
        self.hidden_state_shape = tuple(int(n) for n in hidden_state_shape)  # type: ignore[assignment]
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs, n_seeds)


class RecurrentDictRolloutBuffer(_RecurrentMixin, DictRolloutBuffer):
    """:class:`DictRolloutBuffer` with LSTM states and padded sequence minibatches.

    Args:
        buffer_size: steps per env in a rollout.
        observation_space: a Dict observation space.
        action_space: action space.
        hidden_state_shape: ``(n_steps, n_lstm_layers, n_seeds * n_envs, lstm_hidden_size)``.
        device: torch device of the samples.
        gae_lambda: GAE lambda.
        gamma: discount factor.
        n_envs: number of parallel environments (per seed).
        n_seeds: number of seeds K (their columns side by side, seed-major).
    """

    _samples_class = RecurrentDictRolloutBufferSamples

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        hidden_state_shape: tuple[int, int, int, int],
        device: th.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
        n_seeds: int = 1,
    ) -> None:
        self.hidden_state_shape = tuple(int(n) for n in hidden_state_shape)  # type: ignore[assignment]
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs, n_seeds)
