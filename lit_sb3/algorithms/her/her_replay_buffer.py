"""Hindsight Experience Replay buffer (SB3 2.x semantics, torch-resident storage).

Paper: https://arxiv.org/abs/1707.01495
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.her.goal_selection_strategy import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy
from lit_sb3.buffers.dict_replay import DictReplayBuffer
from lit_sb3.buffers.her_episodes import HerEpisodes, infos_json_default
from lit_sb3.core.types import DictReplayBufferSamples

if TYPE_CHECKING:
    from lit_sb3.vec_env.base_vec_env import VecEnv
    from lit_sb3.vec_env.vec_normalize import VecNormalize

__all__ = ["HerReplayBuffer"]

_GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


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
        # info dicts are only kept when they are needed by compute_reward
        self.copy_info_dict = copy_info_dict
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

    def _storage_options(self) -> dict[str, Any]:
        return {
            "goal_selection_strategy": self.goal_selection_strategy.name.lower(),
            "n_sampled_goal": self.n_sampled_goal,
            "copy_info_dict": self.copy_info_dict,
        }

    @property
    def her_ratio(self) -> float:
        """Fraction of virtual (relabelled) transitions in a batch."""
        return self.storage.her_ratio

    @property
    def episodes(self) -> HerEpisodes:
        """The episode bookkeeping: start and length of the episode of each ``(slot, env)``."""
        assert self.storage.her is not None
        return self.storage.her[0]

    @property
    def infos(self) -> np.ndarray | None:
        """The stored info dicts ``[buffer_size, n_envs]`` (None without ``copy_info_dict``)."""
        return None if self.storage.infos is None else self.storage.infos[0]

    @property
    def ep_start(self) -> np.ndarray:
        """Start slot of the episode of each ``(slot, env)``."""
        return self.episodes.ep_start

    @property
    def ep_length(self) -> np.ndarray:
        """Length of the episode of each ``(slot, env)`` (0: not sampleable)."""
        return self.episodes.ep_length

    @property
    def _current_ep_start(self) -> np.ndarray:
        return self.episodes.current_ep_start

    def set_env(self, env: VecEnv) -> None:
        """Set the env used for ``compute_reward`` (after loading).

        Args:
            env: the training VecEnv.
        """
        if self.env is not None:
            raise ValueError("Trying to set env of already initialized environment.")
        self.env = env

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> DictReplayBufferSamples:
        """Sample real transitions and relabelled (virtual) ones: real first, then virtual, drawn from numpy's
        global stream as SB3 draws them.

        Args:
            batch_size: number of transitions; ``int(her_ratio * batch_size)`` of them are virtual.
            env: VecNormalize used to normalise observations/rewards (None: raw values).
        """
        if self.env is None and int(self.her_ratio * batch_size) > 0:
            raise RuntimeError(
                "HerReplayBuffer has no env to compute rewards of virtual transitions: pass env= or call set_env()."
            )
        data = self.storage.sample_her(batch_size, [np.random], [self.env], self._reward_normalizer(env))
        return self._to_samples(self._one_seed(data), env)

    def truncate_last_trajectory(self) -> None:
        """Mark the unfinished episode of each env as ended (timeout), so its transitions can be sampled.

        Call it after loading a buffer when a new episode starts; do not call it to continue the same episode.
        """
        unfinished = self.episodes.unfinished(self.pos)
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
            self.episodes.end_episode(int(env_idx), self.pos)
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
        rows = self.storage._rows(self.pos, self.full)
        meta: dict[str, Any] = {}
        if self.infos is not None:
            try:
                meta["infos"] = json.dumps(self.infos[:rows].tolist(), default=infos_json_default)
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
