"""SubprocVecEnv: one worker process per sub-environment, for expensive environments."""

from __future__ import annotations

import multiprocessing as mp
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lit_sb3.vec_env.base_vec_env import CloudpickleWrapper, VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

__all__ = ["SubprocVecEnv"]


def _worker(remote: Connection, parent_remote: Connection, env_fn_wrapper: CloudpickleWrapper) -> None:  # noqa: C901
    """Worker loop: owns one env and answers the parent's commands."""
    from lit_sb3.vec_env.env_util import is_wrapped

    parent_remote.close()
    env: gym.Env = env_fn_wrapper.var()
    reset_info: dict[str, Any] = {}
    while True:
        try:
            cmd, data = remote.recv()
            if cmd == "step":
                observation, reward, terminated, truncated, info = env.step(data)
                done = bool(terminated or truncated)
                info["TimeLimit.truncated"] = bool(truncated and not terminated)
                if done:
                    info["terminal_observation"] = observation
                    observation, reset_info = env.reset()
                remote.send((observation, reward, done, info, reset_info))
            elif cmd == "reset":
                maybe_options = {"options": data[1]} if data[1] else {}
                observation, reset_info = env.reset(seed=data[0], **maybe_options)
                remote.send((observation, reset_info))
            elif cmd == "render":
                remote.send(env.render())
            elif cmd == "close":
                env.close()
                remote.close()
                break
            elif cmd == "get_spaces":
                remote.send((env.observation_space, env.action_space))
            elif cmd == "env_method":
                try:  # a missing method is the caller's AttributeError, not the end of this worker
                    method = env.get_wrapper_attr(data[0])
                except AttributeError as exc:
                    remote.send(("attribute_error", str(exc)))
                else:
                    remote.send(("ok", method(*data[1], **data[2])))
            elif cmd == "get_attr":
                try:
                    remote.send(("ok", env.get_wrapper_attr(data)))
                except AttributeError as exc:
                    remote.send(("attribute_error", str(exc)))
            elif cmd == "has_attr":
                try:
                    env.get_wrapper_attr(data)
                    remote.send(True)
                except AttributeError:
                    remote.send(False)
            elif cmd == "set_attr":
                setattr(env, data[0], data[1])
                remote.send(None)
            elif cmd == "is_wrapped":
                remote.send(is_wrapped(env, data))
            else:
                raise NotImplementedError(f"`{cmd}` is not implemented in the worker")
        except (EOFError, KeyboardInterrupt):
            break


def _stack_obs(obs_list: Sequence[Any], space: spaces.Space) -> VecEnvObs:
    """Stack per-env observations into one batch (dict/tuple of arrays for Dict/Tuple spaces)."""
    if isinstance(space, spaces.Dict):
        return {key: np.stack([single_obs[key] for single_obs in obs_list]) for key in space.spaces.keys()}
    if isinstance(space, spaces.Tuple):
        return tuple(np.stack([single_obs[i] for single_obs in obs_list]) for i in range(len(space.spaces)))
    return np.stack(obs_list)


class SubprocVecEnv(VecEnv):
    """Run each sub-environment in its own process.

    With the ``forkserver``/``spawn`` start methods the calling script must be import-safe
    (``if __name__ == "__main__":``). Env functions are sent with cloudpickle (lambdas work).

    Args:
        env_fns: functions that each create a new environment.
        start_method: a method of ``multiprocessing.get_all_start_methods()``; default ``"forkserver"`` when
            available, else ``"spawn"``.
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]], start_method: str | None = None) -> None:
        if len(env_fns) == 0:
            raise ValueError("SubprocVecEnv needs at least one env function, got an empty list.")
        self.waiting = False
        self.closed = False
        n_envs = len(env_fns)
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        elif start_method not in mp.get_all_start_methods():
            raise ValueError(
                f"start_method={start_method!r} is not available here; allowed: {mp.get_all_start_methods()}."
            )
        ctx = mp.get_context(start_method)

        pipes = [ctx.Pipe() for _ in range(n_envs)]
        self.remotes: list[Connection] = [p[0] for p in pipes]
        self.work_remotes: list[Connection] = [p[1] for p in pipes]
        self.processes = []
        for work_remote, remote, env_fn in zip(self.work_remotes, self.remotes, env_fns):
            args = (work_remote, remote, CloudpickleWrapper(env_fn))
            # daemon: if the main process crashes, workers do not keep it alive
            process = ctx.Process(target=_worker, args=args, daemon=True)  # type: ignore[attr-defined]
            process.start()
            self.processes.append(process)
            work_remote.close()

        self.remotes[0].send(("get_spaces", None))
        observation_space, action_space = self.remotes[0].recv()
        super().__init__(n_envs, observation_space, action_space)

    def step_async(self, actions: np.ndarray) -> None:
        for remote, action in zip(self.remotes, actions):
            remote.send(("step", action))
        self.waiting = True

    def step_wait(self) -> VecEnvStepReturn:
        results = [remote.recv() for remote in self.remotes]
        self.waiting = False
        obs, rews, dones, infos, reset_infos = zip(*results)
        self.reset_infos = list(reset_infos)
        return (
            _stack_obs(obs, self.observation_space),
            np.array(rews, dtype=np.float32),
            np.array(dones, dtype=bool),
            list(infos),
        )

    def reset(self) -> VecEnvObs:
        for env_idx, remote in enumerate(self.remotes):
            remote.send(("reset", (self._seeds[env_idx], self._options[env_idx])))
        results = [remote.recv() for remote in self.remotes]
        obs, reset_infos = zip(*results)
        self.reset_infos = list(reset_infos)
        self._reset_seeds()
        self._reset_options()
        return _stack_obs(obs, self.observation_space)

    def close(self) -> None:
        if self.closed:
            return
        if self.waiting:
            for remote in self.remotes:
                remote.recv()
        for remote in self.remotes:
            remote.send(("close", None))
        for process in self.processes:
            process.join()
        for remote in self.remotes:
            remote.close()
        self.closed = True

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images.",
                stacklevel=2,
            )
            return [None for _ in self.remotes]
        for pipe in self.remotes:
            pipe.send(("render", None))
        return [pipe.recv() for pipe in self.remotes]

    def has_attr(self, attr_name: str) -> bool:
        """Whether every sub-environment has the attribute."""
        for remote in self.remotes:
            remote.send(("has_attr", attr_name))
        return all([remote.recv() for remote in self.remotes])

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Values of an attribute of the sub-environments (AttributeError if one lacks it)."""
        target_remotes = self._get_target_remotes(indices)
        for remote in target_remotes:
            remote.send(("get_attr", attr_name))
        answers = [remote.recv() for remote in target_remotes]
        for status, value in answers:
            if status == "attribute_error":
                raise AttributeError(value)
        return [value for _, value in answers]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute on the outermost wrapper of the sub-environments."""
        target_remotes = self._get_target_remotes(indices)
        for remote in target_remotes:
            remote.send(("set_attr", (attr_name, value)))
        for remote in target_remotes:
            remote.recv()

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        """Call a method of the sub-environments (AttributeError if one lacks it; the workers live on)."""
        target_remotes = self._get_target_remotes(indices)
        for remote in target_remotes:
            remote.send(("env_method", (method_name, method_args, method_kwargs)))
        answers = [remote.recv() for remote in target_remotes]
        for status, value in answers:
            if status == "attribute_error":
                raise AttributeError(value)
        return [value for _, value in answers]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each sub-environment is wrapped with ``wrapper_class``."""
        target_remotes = self._get_target_remotes(indices)
        for remote in target_remotes:
            remote.send(("is_wrapped", wrapper_class))
        return [remote.recv() for remote in target_remotes]

    def _get_target_remotes(self, indices: VecEnvIndices) -> list[Connection]:
        idx = list(self._get_indices(indices))
        for i in idx:
            if not -self.num_envs <= i < self.num_envs:
                raise IndexError(f"Environment index {i} is out of range: this VecEnv has {self.num_envs} envs.")
        return [self.remotes[i] for i in idx]
