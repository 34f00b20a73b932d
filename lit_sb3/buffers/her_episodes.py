"""HER's episode bookkeeping and random draws over one replay storage's ``(slot, env)`` grid: :class:`HerEpisodes`.

The one implementation of Hindsight Experience Replay's index logic: which transitions can be sampled (those of
finished episodes), which are relabelled, and which achieved goal replaces each relabelled desired goal.
:class:`~lit_sb3.buffers.seed_replay.SeedReplayBuffer` holds one per seed: the K-seed storage draws seed i's from
its own ``RandomState``, the one-seed storage of :class:`~lit_sb3.algorithms.her.HerReplayBuffer` from numpy's global
stream as SB3 does, the same calls in the same order, so a seed draws what its separate run draws.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import numpy as np

__all__ = ["HerDraw", "HerEpisodes", "her_rewards", "infos_json_default"]

#: goal selection strategies by name (``GoalSelectionStrategy.<NAME>.name.lower()``)
STRATEGIES = ("future", "final", "episode")


class HerDraw(NamedTuple):
    """One minibatch's indices: real transitions first, then the virtual (relabelled) ones."""

    slots: np.ndarray  # [batch] storage slot of each transition
    envs: np.ndarray  # [batch] sub-env of each transition
    n_real: int  # the first n_real are real, the rest virtual
    goal_slots: np.ndarray  # [batch - n_real] slot whose next achieved goal is the virtual transition's new goal


class HerEpisodes:
    """Episode start and length of every ``(slot, env)`` of a storage of ``buffer_size`` slots (length 0: the
    transition belongs to an unfinished or overwritten episode and is not sampled).

    Args:
        buffer_size: slots of the storage.
        n_envs: sub-envs.
    """

    def __init__(self, buffer_size: int, n_envs: int) -> None:
        self.buffer_size, self.n_envs = buffer_size, n_envs
        self.ep_start = np.zeros((buffer_size, n_envs), dtype=np.int64)
        self.ep_length = np.zeros((buffer_size, n_envs), dtype=np.int64)
        self.current_ep_start = np.zeros(n_envs, dtype=np.int64)

    def start_slot(self, pos: int) -> None:
        """Before slot ``pos`` is written: overwriting an old episode invalidates the whole of it, and the slot
        belongs to each env's current episode."""
        for env_idx in range(self.n_envs):
            episode_length = self.ep_length[pos, env_idx]
            if episode_length > 0:
                episode_end = self.ep_start[pos, env_idx] + episode_length
                episode_indices = np.arange(pos, episode_end) % self.buffer_size
                self.ep_length[episode_indices, env_idx] = 0
        self.ep_start[pos] = self.current_ep_start

    def end_episode(self, env_idx: int, pos: int) -> None:
        """Env ``env_idx``'s episode ended with the slot before ``pos`` (the next write position): store its length
        on its slots and start a new one at ``pos``."""
        episode_start = self.current_ep_start[env_idx]
        episode_end = pos
        if episode_end < episode_start:  # the write position wrapped around during the episode
            episode_end += self.buffer_size
        episode_indices = np.arange(episode_start, episode_end) % self.buffer_size
        self.ep_length[episode_indices, env_idx] = episode_end - episode_start
        self.current_ep_start[env_idx] = pos

    def unfinished(self, pos: int) -> np.ndarray:
        """The envs whose current episode has transitions (before write position ``pos``)."""
        return np.flatnonzero(self.current_ep_start != pos)

    def _sample_valid(self, batch_size: int, upper: int, rng: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(slot, env)`` of ``batch_size`` transitions drawn uniformly among those of finished episodes."""
        if upper > 0:
            # rejection sampling: nearly every stored transition is valid, so this is O(batch_size)
            n_candidates = 2 * batch_size + 16
            cand_b = rng.randint(0, upper, size=n_candidates)
            cand_e = rng.randint(0, self.n_envs, size=n_candidates)
            accepted = np.flatnonzero(self.ep_length[cand_b, cand_e] > 0)
            if len(accepted) >= batch_size:
                keep = accepted[:batch_size]
                return cand_b[keep], cand_e[keep]
        is_valid = self.ep_length > 0
        valid_indices = np.flatnonzero(is_valid)
        if len(valid_indices) == 0:
            raise RuntimeError(
                "Unable to sample before the end of the first episode. We recommend choosing a value "
                "for learning_starts that is greater than the maximum number of timesteps in the environment."
            )
        sampled = rng.choice(valid_indices, size=batch_size, replace=True)
        batch_indices, env_indices = np.unravel_index(sampled, is_valid.shape)
        return batch_indices, env_indices

    def _goal_slots(self, slots: np.ndarray, envs: np.ndarray, strategy: str, rng: Any) -> np.ndarray:
        """Slots of the achieved goals that relabel the transitions at ``(slots, envs)``."""
        ep_start = self.ep_start[slots, envs]
        ep_length = self.ep_length[slots, envs]
        if strategy == "final":
            in_episode = ep_length - 1
        elif strategy == "future":  # inclusive: the current transition can be chosen
            current = (slots - ep_start) % self.buffer_size
            in_episode = rng.randint(current, ep_length)
        elif strategy == "episode":
            in_episode = rng.randint(0, ep_length)
        else:
            raise ValueError(f"Invalid goal selection strategy {strategy!r}; allowed: {list(STRATEGIES)}")
        return (in_episode + ep_start) % self.buffer_size

    def draw(self, batch_size: int, upper: int, her_ratio: float, strategy: str, rng: Any) -> HerDraw:
        """A minibatch's indices, drawn from ``rng`` (``np.random`` or a ``RandomState``) in SB3's order: the
        transitions, then the new goals of the virtual ones (the first ``int(her_ratio * batch_size)`` drawn).

        Args:
            batch_size: transitions.
            upper: slots written so far (``buffer_size`` when full).
            her_ratio: fraction of virtual transitions.
            strategy: ``"future"``, ``"final"`` or ``"episode"``.
            rng: the random stream.
        """
        slots, envs = self._sample_valid(batch_size, upper, rng)
        nb_virtual = int(her_ratio * batch_size)
        goal_slots = (
            self._goal_slots(slots[:nb_virtual], envs[:nb_virtual], strategy, rng)
            if nb_virtual > 0
            else np.zeros(0, dtype=np.int64)
        )
        return HerDraw(
            slots=np.concatenate([slots[nb_virtual:], slots[:nb_virtual]]),
            envs=np.concatenate([envs[nb_virtual:], envs[:nb_virtual]]),
            n_real=batch_size - nb_virtual,
            goal_slots=goal_slots,
        )

    def state(self) -> dict[str, np.ndarray]:
        """The bookkeeping arrays (to save)."""
        return {"ep_start": self.ep_start, "ep_length": self.ep_length, "current_ep_start": self.current_ep_start}


def infos_json_default(obj: Any) -> Any:
    """``json.dumps`` ``default`` for stored info dicts: numpy arrays and scalars as plain values."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def her_rewards(env: Any, next_achieved_goal: np.ndarray, desired_goal: np.ndarray, infos: Any) -> np.ndarray:
    """Rewards of virtual transitions from the env's vectorised ``compute_reward`` (float32, one per row).

    Args:
        env: the VecEnv (its first env computes the rewards: all are assumed identical).
        next_achieved_goal: achieved goals of the next observations (r_t = reward(s_{t+1}) in a goal env).
        desired_goal: the new desired goals.
        infos: the transitions' info dicts (deep-copied), or None for empty ones.
    """
    n = len(desired_goal)
    infos = copy.deepcopy(infos) if infos is not None else [{} for _ in range(n)]
    rewards = env.env_method("compute_reward", next_achieved_goal, desired_goal, infos, indices=[0])
    values = np.asarray(rewards[0], dtype=np.float32).reshape(-1)
    if values.shape[0] != n:
        raise ValueError(
            f"compute_reward returned {values.shape[0]} rewards for {n} goals: it must be vectorised "
            "(accept a batch of achieved/desired goals and return one reward per row)."
        )
    return values
