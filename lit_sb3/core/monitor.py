"""Monitor: record episode returns, lengths and times (SB3's wrapper and its CSV format)."""

from __future__ import annotations

import csv
import json
import os
import time
from glob import glob
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym
from gymnasium.core import ActType, ObsType

if TYPE_CHECKING:
    import pandas

__all__ = [
    "LoadMonitorResultsError",
    "Monitor",
    "RelayTruncation",
    "ResultsWriter",
    "get_monitor_files",
    "load_results",
]


class Monitor(gym.Wrapper[ObsType, ActType, ObsType, ActType]):
    """Track episode returns, lengths and times; put them in ``info["episode"] = {"r", "l", "t"}`` at episode end.

    Args:
        env: the environment.
        filename: a CSV log file (``monitor.csv`` is appended when missing); ``None`` writes nothing.
        allow_early_resets: allow ``reset`` before the episode is over.
        reset_keywords: extra ``reset`` keyword arguments to record per episode.
        info_keywords: extra keys of the last ``info`` to record per episode.
        override_existing: overwrite an existing file (``False`` appends to it).
    """

    EXT = "monitor.csv"

    def __init__(
        self,
        env: gym.Env,
        filename: str | None = None,
        allow_early_resets: bool = True,
        reset_keywords: tuple[str, ...] = (),
        info_keywords: tuple[str, ...] = (),
        override_existing: bool = True,
    ) -> None:
        super().__init__(env=env)
        self.t_start = time.time()
        self.results_writer: ResultsWriter | None = None
        if filename is not None:
            env_id = env.spec.id if env.spec is not None else None
            self.results_writer = ResultsWriter(
                filename,
                header={"t_start": self.t_start, "env_id": str(env_id)},
                extra_keys=tuple(reset_keywords) + tuple(info_keywords),
                override_existing=override_existing,
            )
        self.reset_keywords = tuple(reset_keywords)
        self.info_keywords = tuple(info_keywords)
        self.allow_early_resets = allow_early_resets
        self.rewards: list[float] = []
        self.needs_reset = True
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.episode_times: list[float] = []
        self.total_steps = 0
        # extra info about the current episode, passed to reset()
        self.current_reset_info: dict[str, Any] = {}

    def reset(self, **kwargs) -> tuple[ObsType, dict[str, Any]]:
        """Reset the env (only when the episode is over, unless ``allow_early_resets``).

        Args:
            kwargs: passed to the env's ``reset``; those named in ``reset_keywords`` are recorded.
        """
        if not self.allow_early_resets and not self.needs_reset:
            raise RuntimeError(
                "Tried to reset an environment before done. If you want to allow early resets, "
                "wrap your env with Monitor(env, path, allow_early_resets=True)"
            )
        self.rewards = []
        self.needs_reset = False
        for key in self.reset_keywords:
            value = kwargs.get(key)
            if value is None:
                raise ValueError(f"Expected you to pass keyword argument {key} into reset")
            self.current_reset_info[key] = value
        return self.env.reset(**kwargs)

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and record the reward; at episode end add ``info["episode"]``."""
        if self.needs_reset:
            raise RuntimeError("Tried to step environment that needs reset")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        if terminated or truncated:
            self.needs_reset = True
            self.end_episode(info)
        self.total_steps += 1
        return observation, reward, terminated, truncated, info

    def end_episode(self, info: dict[str, Any]) -> None:
        """Record the current episode (its rewards so far) and put it in ``info["episode"]``; the next step starts
        a new one. :meth:`step` calls it at the env's own episode ends; :class:`RelayTruncation` when a wrapper
        outside the Monitor truncates the episode (a ``TimeLimit`` in a zoo ``env_wrapper``).

        Args:
            info: the info dict of the episode's last step (``info_keywords`` are read from it).
        """
        ep_rew = sum(self.rewards)
        ep_len = len(self.rewards)
        elapsed = time.time() - self.t_start
        ep_info: dict[str, Any] = {"r": round(ep_rew, 6), "l": ep_len, "t": round(elapsed, 6)}
        for key in self.info_keywords:
            if key not in info:
                raise KeyError(f"Monitor info_keywords has {key!r}, but the env's last info only has {sorted(info)}.")
            ep_info[key] = info[key]
        self.episode_returns.append(ep_rew)
        self.episode_lengths.append(ep_len)
        self.episode_times.append(elapsed)
        ep_info.update(self.current_reset_info)
        if self.results_writer:
            self.results_writer.write_row(ep_info)
        info["episode"] = ep_info
        self.rewards = []

    def close(self) -> None:
        """Close the env and the log file."""
        super().close()
        if self.results_writer is not None:
            self.results_writer.close()

    def get_total_steps(self) -> int:
        """Number of steps taken in total."""
        return self.total_steps

    def get_episode_rewards(self) -> list[float]:
        """Return of every finished episode."""
        return self.episode_returns

    def get_episode_lengths(self) -> list[int]:
        """Length of every finished episode."""
        return self.episode_lengths

    def get_episode_times(self) -> list[float]:
        """Wall time (s since creation) at the end of every finished episode."""
        return self.episode_times


class RelayTruncation(gym.Wrapper[ObsType, ActType, ObsType, ActType]):
    """Tell the :class:`Monitor` inside about episodes that a wrapper outside it truncates.

    ``make_vec_env`` applies ``wrapper_class`` after (outside) the Monitor, as SB3 and the RL Zoo do, so the
    Monitor records true episodes (a lost life of an Atari game is not an episode end). A ``TimeLimit`` among those
    wrappers truncates episodes the Monitor never sees end: no ``info["episode"]``, so ``evaluate_policy`` never
    counts an episode and waits forever on an env that does not end episodes itself (Pendulum), or on a policy
    that keeps CartPole up (SB3's ``evaluate_policy`` hangs the same way). This outermost wrapper closes the
    Monitor's episode when the outer env reports ``truncated`` and the Monitor has not ended it. Terminations by
    outer wrappers stay unrecorded, as in SB3 (they mark lost lives, not episode ends).

    Args:
        env: the env with its outer wrappers.
        monitor: the Monitor inside ``env``.
    """

    def __init__(self, env: gym.Env, monitor: Monitor) -> None:
        super().__init__(env)
        self.monitor = monitor

    def __getattr__(self, name: str) -> Any:
        """Transparent to attribute reads: ``vec_env.envs[i].x`` still reaches the user's outermost wrapper."""
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; close the Monitor's episode on a truncation it did not see."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and not self.monitor.needs_reset and "episode" not in info:
            self.monitor.end_episode(info)
        return observation, reward, terminated, truncated, info


class LoadMonitorResultsError(Exception):
    """Raised when no monitor log can be loaded."""


class ResultsWriter:
    """Write episode rows to a monitor CSV file: a ``#{json header}`` line, then ``r,l,t,...`` rows.

    Args:
        filename: the file; ``monitor.csv`` is appended when it does not end with it (inside it, if a folder).
        header: the JSON header (``t_start``, ``env_id``).
        extra_keys: extra columns (reset and info keywords).
        override_existing: overwrite the file (``False`` appends to it).
    """

    def __init__(
        self,
        filename: str = "",
        header: dict[str, float | str] | None = None,
        extra_keys: tuple[str, ...] = (),
        override_existing: bool = True,
    ) -> None:
        header = header or {}
        filename = os.fspath(filename)
        if not filename.endswith(Monitor.EXT):
            if os.path.isdir(filename):
                filename = os.path.join(filename, Monitor.EXT)
            else:
                filename = filename + "." + Monitor.EXT
        filename = os.path.realpath(filename)
        os.makedirs(os.path.dirname(filename), exist_ok=True)
        mode = "w" if override_existing else "a"
        self.filename = filename
        self.file_handler = open(filename, f"{mode}t", newline="\n")  # noqa: SIM115
        self.logger = csv.DictWriter(self.file_handler, fieldnames=("r", "l", "t", *extra_keys))
        if override_existing:
            self.file_handler.write(f"#{json.dumps(header)}\n")
            self.logger.writeheader()
        self.file_handler.flush()

    def write_row(self, epinfo: dict[str, Any]) -> None:
        """Write one episode row."""
        if self.logger:
            self.logger.writerow(epinfo)
            self.file_handler.flush()

    def close(self) -> None:
        """Close the file."""
        self.file_handler.close()


def get_monitor_files(path: str) -> list[str]:
    """All ``*monitor.csv`` files in ``path``."""
    return glob(os.path.join(path, "*" + Monitor.EXT))


def load_results(path: str) -> pandas.DataFrame:
    """Load all monitor logs of a folder into one DataFrame (``t`` made absolute, sorted by time).

    Args:
        path: the folder holding ``*monitor.csv`` files.
    """
    import pandas

    monitor_files = get_monitor_files(path)
    if len(monitor_files) == 0:
        raise LoadMonitorResultsError(f"No monitor files of the form *{Monitor.EXT} found in {path}")
    data_frames, t_starts = [], []
    for file_name in monitor_files:
        with open(file_name) as file_handler:
            first_line = file_handler.readline()
            if not first_line.startswith("#"):
                raise LoadMonitorResultsError(f"{file_name} does not start with the '#{{json header}}' line.")
            header = json.loads(first_line[1:])
            data_frame = pandas.read_csv(file_handler, index_col=None)
            data_frame["t"] += header["t_start"]
            t_starts.append(header["t_start"])
        data_frames.append(data_frame)
    data_frames = [df for df in data_frames if not df.empty]
    if not data_frames:
        return pandas.DataFrame(columns=["r", "l", "t"])
    data_frame = pandas.concat(data_frames)
    data_frame.sort_values("t", inplace=True)
    data_frame.reset_index(inplace=True)
    data_frame["t"] -= min(t_starts)
    return data_frame
