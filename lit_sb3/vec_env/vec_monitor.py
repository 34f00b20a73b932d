"""VecMonitor: the Monitor wrapper at the VecEnv level (for envs that come already vectorized)."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from lit_sb3.core.monitor import Monitor, ResultsWriter
from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvObs, VecEnvStepReturn, VecEnvWrapper

__all__ = ["VecMonitor"]


class VecMonitor(VecEnvWrapper):
    """Record episode return, length and time of each sub-env into ``info["episode"]`` at episode end.

    Args:
        venv: the vectorized environment.
        filename: a monitor CSV log file, or ``None`` for no file.
        info_keywords: extra keys of the last ``info`` to record per episode.
    """

    def __init__(self, venv: VecEnv, filename: str | None = None, info_keywords: tuple[str, ...] = ()) -> None:
        try:
            is_wrapped_with_monitor = venv.env_is_wrapped(Monitor)[0]
        except AttributeError:
            is_wrapped_with_monitor = False
        if is_wrapped_with_monitor:
            warnings.warn(
                "The environment is already wrapped with a `Monitor` wrapper but you are wrapping it with a "
                "`VecMonitor` wrapper, the `Monitor` statistics will be overwritten by the `VecMonitor` ones.",
                UserWarning,
                stacklevel=2,
            )
        VecEnvWrapper.__init__(self, venv)
        self.episode_count = 0
        self.t_start = time.time()
        env_id = None
        spec = getattr(venv, "spec", None)
        if spec is not None:
            env_id = spec.id
        self.results_writer: ResultsWriter | None = None
        if filename:
            self.results_writer = ResultsWriter(
                filename, header={"t_start": self.t_start, "env_id": str(env_id)}, extra_keys=tuple(info_keywords)
            )
        self.info_keywords = tuple(info_keywords)
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)

    def reset(self) -> VecEnvObs:
        obs = self.venv.reset()
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.episode_returns += rewards
        self.episode_lengths += 1
        new_infos = list(infos)
        for i in np.flatnonzero(dones):
            info: dict[str, Any] = dict(infos[i])
            episode_info: dict[str, Any] = {
                "r": self.episode_returns[i],
                "l": self.episode_lengths[i],
                "t": round(time.time() - self.t_start, 6),
            }
            for key in self.info_keywords:
                episode_info[key] = info[key]
            info["episode"] = episode_info
            self.episode_count += 1
            self.episode_returns[i] = 0
            self.episode_lengths[i] = 0
            if self.results_writer:
                self.results_writer.write_row(episode_info)
            new_infos[i] = info
        return obs, rewards, dones, new_infos

    def close(self) -> None:
        if self.results_writer:
            self.results_writer.close()
        return self.venv.close()
