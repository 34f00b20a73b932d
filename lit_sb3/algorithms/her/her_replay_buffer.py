"""Hindsight Experience Replay buffer (SB3 2.x semantics, torch-resident storage).

Paper: https://arxiv.org/abs/1707.01495
"""

from __future__ import annotations

import copy
import json
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.her.goal_selection_strategy import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy
from lit_sb3.buffers.dict_replay import DictReplayBuffer
from lit_sb3.core.types import DictReplayBufferSamples

if TYPE_CHECKING:
    from lit_sb3.vec_env.base_vec_env import VecEnv
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = ["HerReplayBuffer"]

_GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


class HerReplayBuffer(DictReplayBuffer):
    """Replay buffer that adds virtual transitions whose desired goal is replaced by an achieved one.

    A fraction ``her_ratio = 1 - 1 / (n_sampled_goal + 1)`` of each batch is relabelled; the rewards of those
    transitions are recomputed with the env's ``compute_reward(achieved_goal, desired_goal, infos)`` in one
    vectorised call. Only transitions of finished episodes are sampled. The ``future`` strategy is inclusive
    (the current transition can provide the goal), as in SB3.

    Args:
        buffer_size: maximum number of transitions (shared by all envs).
        observation_space: a goal Dict space with keys ``observation``, ``achieved_goal``, ``desired_goal``.
        action_space: action space.
        env: the training VecEnv (used for ``compute_reward``); None until :meth:`set_env` is called.
        device: torch device of the samples.
        n_envs: number of parallel environments.
        optimize_memory_usage: not supported (must be False).
        replay_buffer_kwargs: extra :class:`DictReplayBuffer` arguments (``obs_dtype``, ``storage_device``).
        goal_selection_strategy: ``"future"``, ``"final"`` or ``"episode"`` (or a GoalSelectionStrategy).
        n_sampled_goal: number of virtual transitions per real transition.
        copy_info_dict: store the info dicts and pass them to ``compute_reward`` (slower).
        handle_timeout_termination: treat ``"TimeLimit.truncated"`` as a timeout, not a termination.
    """

    env: VecEnv | None

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: VecEnv | None,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        goal_selection_strategy: GoalSelectionStrategy | str = "future",
        n_sampled_goal: int = 4,
        copy_info_dict: bool = False,
        handle_timeout_termination: bool = True,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict) or not all(k in observation_space.spaces for k in _GOAL_KEYS):
            keys = list(observation_space.spaces) if isinstance(observation_space, spaces.Dict) else None
            raise ValueError(
                f"HerReplayBuffer needs a goal Dict observation space with keys {list(_GOAL_KEYS)}; got "
                + (
                    f"a Dict space with keys {keys}"
                    if keys is not None
                    else f"a {type(observation_space).__name__} space"
                )
            )
        if optimize_memory_usage:
            raise ValueError("HerReplayBuffer does not support optimize_memory_usage=True; use False.")
        kwargs = dict(replay_buffer_kwargs or {})
        forbidden = set(kwargs) - {"obs_dtype", "storage_device"}
        if forbidden:
            raise ValueError(
                f"replay_buffer_kwargs has unsupported keys {sorted(forbidden)}; allowed: ['obs_dtype', 'storage_device']"
            )
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            optimize_memory_usage=False,
            handle_timeout_termination=handle_timeout_termination,
            **kwargs,
        )
        self.env = env
        self.copy_info_dict = copy_info_dict

        if isinstance(goal_selection_strategy, str):
            key = goal_selection_strategy.lower()
            if key not in KEY_TO_GOAL_STRATEGY:
                raise ValueError(
                    f"Invalid goal selection strategy {goal_selection_strategy!r}; allowed: {list(KEY_TO_GOAL_STRATEGY)}"
                )
            self.goal_selection_strategy = KEY_TO_GOAL_STRATEGY[key]
        elif isinstance(goal_selection_strategy, GoalSelectionStrategy):
            self.goal_selection_strategy = goal_selection_strategy
        else:
            raise ValueError(
                f"Invalid goal selection strategy {goal_selection_strategy!r}; allowed: {list(KEY_TO_GOAL_STRATEGY)} "
                "or a GoalSelectionStrategy"
            )
        if isinstance(n_sampled_goal, bool) or not isinstance(n_sampled_goal, (int, np.integer)) or n_sampled_goal < 0:
            raise ValueError(f"n_sampled_goal must be an integer >= 0, got {n_sampled_goal!r}")
        self.n_sampled_goal = int(n_sampled_goal)
        # fraction of virtual (relabelled) transitions in a batch
        self.her_ratio = 1 - (1.0 / (self.n_sampled_goal + 1))
        # info dicts are only kept when they are needed by compute_reward
        self.infos: np.ndarray | None = (
            np.array([[{} for _ in range(self.n_envs)] for _ in range(self.buffer_size)]) if copy_info_dict else None
        )
        # episode bookkeeping: start index and length of the episode of each (slot, env); length 0 = not sampleable
        self.ep_start = np.zeros((self.buffer_size, self.n_envs), dtype=np.int64)
        self.ep_length = np.zeros((self.buffer_size, self.n_envs), dtype=np.int64)
        self._current_ep_start = np.zeros(self.n_envs, dtype=np.int64)

    def set_env(self, env: VecEnv) -> None:
        """Set the env used for ``compute_reward`` (after loading).

        Args:
            env: the training VecEnv.
        """
        if self.env is not None:
            raise ValueError("Trying to set env of already initialized environment.")
        self.env = env

    # adding -------------------------------------------------------------

    def add(  # type: ignore[override]
        self,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one transition per env and update the episode bookkeeping (see :meth:`ReplayBuffer.add`)."""
        # overwriting an old episode invalidates the whole of it, not only the overwritten slot
        for env_idx in range(self.n_envs):
            episode_length = self.ep_length[self.pos, env_idx]
            if episode_length > 0:
                episode_end = self.ep_start[self.pos, env_idx] + episode_length
                episode_indices = np.arange(self.pos, episode_end) % self.buffer_size
                self.ep_length[episode_indices, env_idx] = 0

        self.ep_start[self.pos] = self._current_ep_start
        if self.infos is not None:
            self.infos[self.pos] = np.array(list(infos), dtype=object)
        super().add(obs, next_obs, action, reward, done, infos)

        for env_idx in np.flatnonzero(np.asarray(done).reshape(self.n_envs)):
            self._compute_episode_length(int(env_idx))

    def _compute_episode_length(self, env_idx: int) -> None:
        """Store the length of the episode of env ``env_idx`` that just ended and start a new one."""
        episode_start = self._current_ep_start[env_idx]
        episode_end = self.pos
        if episode_end < episode_start:
            # the write position wrapped around during the episode
            episode_end += self.buffer_size
        episode_indices = np.arange(episode_start, episode_end) % self.buffer_size
        self.ep_length[episode_indices, env_idx] = episode_end - episode_start
        self._current_ep_start[env_idx] = self.pos

    # sampling -----------------------------------------------------------

    def _sample_valid(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices ``(slot, env)`` of ``batch_size`` transitions drawn uniformly among those of finished episodes."""
        upper = self.buffer_size if self.full else self.pos
        if upper > 0:
            # rejection sampling: nearly every stored transition is valid, so this is O(batch_size)
            n_candidates = 2 * batch_size + 16
            cand_b = np.random.randint(0, upper, size=n_candidates)
            cand_e = np.random.randint(0, self.n_envs, size=n_candidates)
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
        sampled = np.random.choice(valid_indices, size=batch_size, replace=True)
        batch_indices, env_indices = np.unravel_index(sampled, is_valid.shape)
        return batch_indices, env_indices

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> DictReplayBufferSamples:  # type: ignore[override]
        """Sample real transitions and relabelled (virtual) ones: real first, then virtual.

        Args:
            batch_size: number of transitions; ``int(her_ratio * batch_size)`` of them are virtual.
            env: VecNormalize used to normalise observations/rewards (None: raw values).
        """
        batch_indices, env_indices = self._sample_valid(batch_size)
        nb_virtual = int(self.her_ratio * batch_size)
        n_real = batch_size - nb_virtual
        # virtual transitions are drawn first (as SB3 splits), but returned after the real ones
        virtual_b, real_b = batch_indices[:nb_virtual], batch_indices[nb_virtual:]
        virtual_e, real_e = env_indices[:nb_virtual], env_indices[nb_virtual:]
        order_b = np.concatenate([real_b, virtual_b])
        order_e = np.concatenate([real_e, virtual_e])

        dev = self.storage_device
        flat_idx = th.as_tensor(order_b * self.n_envs + order_e, dtype=th.long, device=dev)
        obs, next_obs = self._gather_obs(flat_idx)
        rewards = self._gather(self.rewards, flat_idx)
        if nb_virtual > 0:
            new_goals = self._sample_goals(virtual_b, virtual_e)
            # the desired goal of the next observation must be the same new goal
            obs["desired_goal"][n_real:] = new_goals
            next_obs["desired_goal"][n_real:] = new_goals
            rewards[n_real:] = self._compute_rewards(
                next_obs["achieved_goal"][n_real:], new_goals, virtual_b, virtual_e
            )

        obs = self._normalize_obs_tensor(obs, env)
        next_obs = self._normalize_obs_tensor(next_obs, env)
        return DictReplayBufferSamples(
            observations={k: self._to_device(v) for k, v in obs.items()},
            actions=self._to_device(self._gather(self.actions, flat_idx)),
            next_observations={k: self._to_device(v) for k, v in next_obs.items()},
            # only dones that are not due to timeouts
            dones=self._to_device(self._dones_without_timeouts(flat_idx).unsqueeze(1)),
            rewards=self._to_device(self._normalize_reward_tensor(rewards.unsqueeze(1), env)),
        )

    def _compute_rewards(
        self, next_achieved_goal: th.Tensor, desired_goal: th.Tensor, batch_indices: np.ndarray, env_indices: np.ndarray
    ) -> th.Tensor:
        """Rewards of the virtual transitions from the env's vectorised ``compute_reward``."""
        if self.env is None:
            raise RuntimeError(
                "HerReplayBuffer has no env to compute rewards of virtual transitions: pass env= or call set_env()."
            )
        if self.infos is not None:
            infos: Any = copy.deepcopy(self.infos[batch_indices, env_indices])
        else:
            infos = [{} for _ in range(len(batch_indices))]
        rewards = self.env.env_method(
            "compute_reward",
            # r_t = reward(s_{t+1}) in a goal env: use the achieved goal of the NEXT observation
            next_achieved_goal.cpu().numpy(),
            desired_goal.cpu().numpy(),
            infos,
            # all envs are assumed identical: use the first one
            indices=[0],
        )
        values = np.asarray(rewards[0], dtype=np.float32).reshape(-1)
        if values.shape[0] != len(batch_indices):
            raise ValueError(
                f"compute_reward returned {values.shape[0]} rewards for {len(batch_indices)} goals: it must be vectorised "
                "(accept a batch of achieved/desired goals and return one reward per row)."
            )
        return th.from_numpy(values).to(self.storage_device)

    def _sample_goals(self, batch_indices: np.ndarray, env_indices: np.ndarray) -> th.Tensor:
        """New desired goals (achieved goals of the same episode) per the goal selection strategy."""
        batch_ep_start = self.ep_start[batch_indices, env_indices]
        batch_ep_length = self.ep_length[batch_indices, env_indices]
        if self.goal_selection_strategy == GoalSelectionStrategy.FINAL:
            transition_indices_in_episode = batch_ep_length - 1
        elif self.goal_selection_strategy == GoalSelectionStrategy.FUTURE:
            # inclusive: the current transition can be chosen
            current_indices_in_episode = (batch_indices - batch_ep_start) % self.buffer_size
            transition_indices_in_episode = np.random.randint(current_indices_in_episode, batch_ep_length)
        elif self.goal_selection_strategy == GoalSelectionStrategy.EPISODE:
            transition_indices_in_episode = np.random.randint(0, batch_ep_length)
        else:  # pragma: no cover - the constructor validates the strategy
            raise ValueError(f"Strategy {self.goal_selection_strategy} for sampling goals not supported!")
        transition_indices = (transition_indices_in_episode + batch_ep_start) % self.buffer_size
        flat = th.as_tensor(transition_indices * self.n_envs + env_indices, dtype=th.long, device=self.storage_device)
        return self._gather(self.next_observations["achieved_goal"], flat)

    def truncate_last_trajectory(self) -> None:
        """Mark the unfinished episode of each env as ended (timeout), so its transitions can be sampled.

        Call it after loading a buffer when a new episode starts; do not call it to continue the same episode.
        """
        unfinished = np.flatnonzero(self._current_ep_start != self.pos)
        if len(unfinished) == 0:
            return
        warnings.warn(
            "The last trajectory in the replay buffer will be truncated.\n"
            "If you are in the same episode as when the replay buffer was saved,\n"
            "you should use `truncate_last_trajectory=False` to avoid that issue.",
            stacklevel=2,
        )
        last = (self.pos - 1) % self.buffer_size
        for env_idx in unfinished:
            self.dones[last, int(env_idx)] = 1.0
            self._compute_episode_length(int(env_idx))
            if self.handle_timeout_termination:
                # not an actual timeout, but it allows bootstrapping
                self.timeouts[last, int(env_idx)] = 1.0

    # save / load ----------------------------------------------------------

    def _init_kwargs(self) -> dict[str, Any]:
        base = super()._init_kwargs()
        return {
            "buffer_size": base["buffer_size"],
            "n_envs": base["n_envs"],
            "handle_timeout_termination": base["handle_timeout_termination"],
            "replay_buffer_kwargs": {"obs_dtype": base["obs_dtype"], "storage_device": base["storage_device"]},
            "goal_selection_strategy": self.goal_selection_strategy.name.lower(),
            "n_sampled_goal": self.n_sampled_goal,
            "copy_info_dict": self.copy_info_dict,
        }

    def _extra_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        rows = self._saved_rows()
        meta: dict[str, Any] = {}
        if self.infos is not None:
            try:
                meta["infos"] = json.dumps(self.infos[:rows].tolist(), default=_json_default)
            except (TypeError, ValueError) as e:
                warnings.warn(
                    f"HerReplayBuffer.save: info dicts are not JSON-serialisable ({e}); they are not saved.",
                    stacklevel=2,
                )
        arrays = {
            "ep_start": self.ep_start[:rows],
            "ep_length": self.ep_length[:rows],
            "current_ep_start": self._current_ep_start,
        }
        return meta, arrays

    def _load_extra_state(self, meta: dict[str, Any], arrays: Any) -> None:
        rows = int(meta["rows"])
        self.ep_start[:rows] = arrays["ep_start"]
        self.ep_length[:rows] = arrays["ep_length"]
        self._current_ep_start[:] = arrays["current_ep_start"]
        if self.infos is not None and "infos" in meta:
            loaded = json.loads(meta["infos"])
            for i, row in enumerate(loaded):
                for j, info in enumerate(row):
                    self.infos[i, j] = info

    @classmethod
    def load(  # type: ignore[override]
        cls,
        path: Any,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        env: VecEnv | None = None,
        **kwargs: Any,
    ) -> HerReplayBuffer:
        """Rebuild a buffer saved with :meth:`save` (see :meth:`ReplayBuffer.load`).

        Args:
            path: file path or readable binary file object.
            observation_space: the goal Dict space the buffer was created with.
            action_space: the action space.
            device: torch device of the samples.
            env: the VecEnv for ``compute_reward`` (or call :meth:`set_env` later).
            **kwargs: constructor arguments overriding the saved ones.
        """
        return super().load(path, observation_space, action_space, device=device, env=env, **kwargs)
