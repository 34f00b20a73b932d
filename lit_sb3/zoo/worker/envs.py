"""The envs and the model of a job, built from its :class:`~lit_sb3.zoo.jobs.JobSpec`."""

from __future__ import annotations

import importlib
from typing import Any

from lit_sb3.zoo.jobs import JobSpec

__all__ = ["build_env", "build_model", "import_path", "model_arguments"]


def import_path(path: str) -> Any:
    """The object at ``package.module.Name`` (paths come from the validated config, never from a run).

    Args:
        path: dotted path.
    """
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def build_env(spec: JobSpec, *, evaluation: bool = False) -> Any:
    """The train (or eval) VecEnv of a job, wrapped as the zoo does: env wrappers, VecEnv wrappers,
    VecNormalize (eval: frozen, rewards not normalised), VecFrameStack.

    Args:
        spec: the job.
        evaluation: build the single-env evaluation env (seed ``seed + spec.eval_seed_offset``, 10,000 by
            default; the RL Zoo uses the run's seed).
    """
    import sys

    from lit_sb3.vec_env import VecFrameStack, VecNormalize, make_vec_env
    from lit_sb3.zoo.env_warnings import captured, drain
    from lit_sb3.zoo.wrappers import make_env_wrapper

    cfg = spec.resolved_config()
    wrapper = make_env_wrapper(cfg.env_wrapper) if cfg.env_wrapper else None
    env_kwargs = cfg.eval_env_kwargs if evaluation and cfg.eval_env_kwargs is not None else cfg.env_kwargs
    with captured(cfg.env_id):  # MuJoCo's warnings go to the job's log once, not to MUJOCO_LOG.TXT in the cwd
        env = make_vec_env(
            cfg.env_id,
            n_envs=1 if evaluation else cfg.n_envs,
            seed=spec.seed + (spec.eval_seed_offset if evaluation else 0),
            wrapper_class=wrapper,
            env_kwargs=dict(env_kwargs or {}),
            monitor_kwargs=dict(cfg.monitor_kwargs or {}),
        )
    for line in drain():
        print(f"note (building {cfg.env_id}): {line}", file=sys.stderr)
    for path, kwargs in cfg.vec_env_wrapper:
        if path.rsplit(".", 1)[-1] == "VecNormalize":
            continue  # normalisation is handled below (normalize: ...)
        env = import_path(path)(env, **kwargs)
    if cfg.normalize:
        kwargs = dict(cfg.normalize_kwargs)
        if evaluation:
            kwargs.update(training=False, norm_reward=False)
        env = VecNormalize(env, **kwargs)
    if cfg.frame_stack:
        env = VecFrameStack(env, cfg.frame_stack)
    return env


def model_arguments(spec: JobSpec, action_space: Any) -> tuple[type, Any, dict[str, Any]]:
    """The algorithm class of a job, its policy and its constructor keywords (action noise built for the
    action space's size; ``seed``, ``device`` and ``verbose=0`` included).

    Args:
        spec: the job.
        action_space: the train env's action space.
    """
    from lit_sb3.zoo.config import build_action_noise
    from lit_sb3.zoo.registry import get_algo_class

    cfg = spec.resolved_config()
    kwargs = dict(cfg.algo_kwargs)
    noise = kwargs.pop("action_noise", None)
    if noise is not None:
        kwargs["action_noise"] = build_action_noise(noise, int(action_space.shape[0]))
    kwargs.update(seed=spec.seed, device=spec.device, verbose=0)
    return get_algo_class(spec.algo), cfg.policy, kwargs


def build_model(spec: JobSpec, action_space: Any) -> Any:
    """The algorithm object of a job (action noise built for the action space's size).

    Args:
        spec: the job.
        action_space: the train env's action space.
    """
    cls, policy, kwargs = model_arguments(spec, action_space)
    return cls(policy, **kwargs)
