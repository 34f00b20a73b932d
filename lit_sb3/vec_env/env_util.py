"""Creating and wrapping environments: make_vec_env, wrap_env, check_env_id, wrapper look-ups."""

from __future__ import annotations

import difflib
import importlib
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from lit_sb3.core.monitor import Monitor, RelayTruncation
from lit_sb3.core.preprocessing import check_for_nested_spaces, is_image_space, is_image_space_channels_first
from lit_sb3.vec_env.base_vec_env import VecEnv
from lit_sb3.vec_env.dummy_vec_env import DummyVecEnv
from lit_sb3.vec_env.util import is_vecenv_wrapped
from lit_sb3.vec_env.vec_monitor import VecMonitor
from lit_sb3.vec_env.vec_transpose import VecTransposeImage

__all__ = [
    "EnvIdNotFoundError",
    "check_env_id",
    "is_wrapped",
    "make_atari_env",
    "make_vec_env",
    "unwrap_wrapper",
    "wrap_env",
]


class EnvIdNotFoundError(ValueError, gym.error.NameNotFound):
    """An environment id that gymnasium does not know (both a ValueError and a gymnasium NameNotFound)."""


def unwrap_wrapper(env: gym.Env, wrapper_class: type[gym.Wrapper]) -> gym.Wrapper | None:
    """The first wrapper of class ``wrapper_class`` around ``env``, or None.

    Args:
        env: the (possibly wrapped) environment.
        wrapper_class: the gym wrapper class to look for.
    """
    env_tmp: Any = env
    while isinstance(env_tmp, gym.Wrapper):
        if isinstance(env_tmp, wrapper_class):
            return env_tmp
        env_tmp = env_tmp.env
    return None


def is_wrapped(env: gym.Env, wrapper_class: type[gym.Wrapper]) -> bool:
    """Whether ``env`` is wrapped with ``wrapper_class``."""
    return unwrap_wrapper(env, wrapper_class) is not None


def check_env_id(env_id: str) -> None:
    """Raise a clear error, with the closest registered ids, when ``env_id`` is not registered in gymnasium.

    Ids of the form ``"module:EnvName-v0"`` import ``module`` first (as ``gym.make`` does).

    Args:
        env_id: a gymnasium environment id.

    Raises:
        EnvIdNotFoundError: (a ValueError) naming the id and suggesting close matches.
        ImportError: an Atari id without ale-py installed (one line naming the ``atari`` extra).
    """
    if not isinstance(env_id, str) or not env_id:
        raise TypeError(f"An environment id must be a non-empty string, got {env_id!r}.")
    name = env_id
    if ":" in env_id:
        module, name = env_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise EnvIdNotFoundError(
                f"Environment id '{env_id}': could not import module '{module}' that should register it ({exc})."
            ) from exc
    if name not in gym.registry:
        from lit_sb3.envs.atari_wrappers import register_atari_if_needed

        register_atari_if_needed(name)
    if name in gym.registry:
        return
    try:  # ids gymnasium resolves another way (e.g. without a version)
        gym.spec(name)
        return
    except gym.error.Error:
        pass
    matches = difflib.get_close_matches(name, list(gym.registry.keys()), n=3, cutoff=0.6)
    if matches:
        quoted = [f"'{m}'" for m in matches]
        hint = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
        msg = f"Environment id '{name}' is not registered in gymnasium (did you mean {hint}?)"
    else:
        msg = (
            f"Environment id '{name}' is not registered in gymnasium "
            "(see gymnasium.pprint_registry() for the registered ids; ids from other packages need "
            "'module:EnvName-vN' or importing the package first)"
        )
    raise EnvIdNotFoundError(msg)


def _check_n_envs(n_envs: Any) -> int:
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
        raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}.")
    return n_envs


def make_vec_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_class: Callable[..., gym.Env] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type[VecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """Create a VecEnv whose sub-envs are each wrapped in a ``Monitor`` (then ``wrapper_class``).

    Args:
        env_id: a registered env id, an env class, or a callable returning a new env (called with ``env_kwargs``).
        n_envs: number of sub-environments.
        seed: env ``rank`` is reset with ``seed + rank`` at the first reset and its action space seeded the same;
            ``None`` for random seeds.
        start_index: rank of the first sub-env.
        monitor_dir: folder for the Monitor CSV files (``None``: no file, the Monitor is still there).
        wrapper_class: wrapper (or function) applied after the Monitor; an episode it truncates (a ``TimeLimit``)
            also ends the Monitor's episode (:class:`~lit_sb3.core.monitor.RelayTruncation`).
        env_kwargs: keyword arguments of the env constructor.
        vec_env_cls: the VecEnv class (default DummyVecEnv).
        vec_env_kwargs: keyword arguments of ``vec_env_cls``.
        monitor_kwargs: keyword arguments of ``Monitor``.
        wrapper_kwargs: keyword arguments of ``wrapper_class``.
    """
    return _make_vec_env(
        env_id,
        n_envs,
        seed,
        start_index,
        monitor_dir,
        wrapper_class,
        env_kwargs,
        vec_env_cls,
        vec_env_kwargs,
        monitor_kwargs,
        wrapper_kwargs,
        monitor=True,
    )


def _make_vec_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int,
    seed: int | None,
    start_index: int,
    monitor_dir: str | None,
    wrapper_class: Callable[..., gym.Env] | None,
    env_kwargs: dict[str, Any] | None,
    vec_env_cls: type[VecEnv] | None,
    vec_env_kwargs: dict[str, Any] | None,
    monitor_kwargs: dict[str, Any] | None,
    wrapper_kwargs: dict[str, Any] | None,
    monitor: bool,
) -> VecEnv:
    n_envs = _check_n_envs(n_envs)
    if isinstance(env_id, str):
        check_env_id(env_id)
    elif isinstance(env_id, gym.Env) or not callable(env_id):
        raise TypeError(
            "make_vec_env expects an env id (str) or a callable returning a new gymnasium.Env, got "
            f"{type(env_id).__name__}; for an env instance use wrap_env(env) (one env only)."
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, got {seed!r}.")
    env_kwargs = dict(env_kwargs or {})
    vec_env_kwargs = dict(vec_env_kwargs or {})
    monitor_kwargs = dict(monitor_kwargs or {})
    wrapper_kwargs = dict(wrapper_kwargs or {})

    def make_env(rank: int) -> Callable[[], gym.Env]:
        def _init() -> gym.Env:
            if isinstance(env_id, str):
                # render_mode="rgb_array" unless asked otherwise (as SB3 does)
                kwargs: dict[str, Any] = {"render_mode": "rgb_array", **env_kwargs}
                try:
                    env = gym.make(env_id, **kwargs)
                except TypeError:
                    env = gym.make(env_id, **env_kwargs)
            else:
                env = env_id(**env_kwargs)
                if not isinstance(env, gym.Env):
                    raise TypeError(f"The env function returned {type(env).__name__}, not a gymnasium.Env.")
            if seed is not None:
                # the env itself is seeded at its first reset (VecEnv.seed)
                env.action_space.seed(seed + rank)
            monitored = None
            if monitor:
                monitor_path = os.path.join(monitor_dir, str(rank)) if monitor_dir is not None else None
                if monitor_dir is not None:
                    os.makedirs(monitor_dir, exist_ok=True)
                env = monitored = Monitor(env, filename=monitor_path, **monitor_kwargs)
            if wrapper_class is not None:
                env = wrapper_class(env, **wrapper_kwargs)
                if monitored is not None:  # a truncation by the wrapper (a TimeLimit) ends the Monitor's episode
                    env = RelayTruncation(env, monitored)
            return env

        return _init

    if vec_env_cls is None:
        vec_env_cls = DummyVecEnv
    vec_env = vec_env_cls([make_env(i + start_index) for i in range(n_envs)], **vec_env_kwargs)  # type: ignore[call-arg]
    vec_env.seed(seed)
    return vec_env


def make_atari_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type[VecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """``make_vec_env`` with each sub-env wrapped in :class:`~lit_sb3.envs.atari_wrappers.AtariWrapper` (SB3's).

    With the default ``terminal_on_life_loss=True`` a lost life ends the episode and ``reset()`` then plays a
    NOOP instead of resetting the game; pass ``wrapper_kwargs=dict(terminal_on_life_loss=False)`` to score whole
    games. Frame stacking (``VecFrameStack``) is up to the caller, as in SB3.

    Args:
        env_id: an ALE env id without frame skip (``"BreakoutNoFrameskip-v4"``), or a callable returning one.
        n_envs: number of sub-environments.
        seed: env ``rank`` is reset with ``seed + rank`` at the first reset.
        start_index: rank of the first sub-env.
        monitor_dir: folder for the Monitor CSV files (``None``: no file).
        wrapper_kwargs: keyword arguments of ``AtariWrapper``.
        env_kwargs: keyword arguments of the env constructor.
        vec_env_cls: the VecEnv class (default DummyVecEnv).
        vec_env_kwargs: keyword arguments of ``vec_env_cls``.
        monitor_kwargs: keyword arguments of ``Monitor``.
    """
    from lit_sb3.envs.atari_wrappers import AtariWrapper

    return make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        start_index=start_index,
        monitor_dir=monitor_dir,
        wrapper_class=AtariWrapper,
        env_kwargs=env_kwargs,
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
        monitor_kwargs=monitor_kwargs,
        wrapper_kwargs=wrapper_kwargs,
    )


def _needs_transpose(observation_space: spaces.Space) -> bool:
    if isinstance(observation_space, spaces.Dict):
        return any(
            is_image_space(space) and not is_image_space_channels_first(space)  # type: ignore[arg-type]
            for space in observation_space.spaces.values()
        )
    return is_image_space(observation_space) and not is_image_space_channels_first(observation_space)  # type: ignore[arg-type]


def wrap_env(
    env_spec: str | gym.Env | VecEnv | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    monitor_wrapper: bool = True,
    vec_env_cls: type[VecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    wrapper_class: Callable[..., gym.Env] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
    monitor_dir: str | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    verbose: int = 0,
) -> VecEnv:
    """Turn any env specification into a ready VecEnv (as SB3's ``BaseAlgorithm._wrap_env`` does).

    - an env id or a callable: ``make_vec_env`` with ``n_envs`` sub-envs (Monitor unless ``monitor_wrapper=False``);
    - a ``gym.Env`` instance: Monitor (if missing) + DummyVecEnv; ``n_envs`` must be 1 (an instance cannot be copied);
    - a ``VecEnv``: kept, with a VecMonitor added when neither Monitor nor VecMonitor is present.
    Channel-last image observations then get a ``VecTransposeImage``.

    Args:
        env_spec: env id, gym.Env, callable returning a gym.Env, or VecEnv.
        n_envs: number of sub-envs (for ids and callables; for a VecEnv, 1 or its ``num_envs``).
        seed: seed of the first reset (env ``i`` gets ``seed + i``) and of the action spaces.
        monitor_wrapper: add a Monitor/VecMonitor when none is present.
        vec_env_cls: VecEnv class for ids and callables (default DummyVecEnv).
        vec_env_kwargs: its keyword arguments.
        env_kwargs: env constructor keyword arguments (ids and callables).
        wrapper_class: gym wrapper applied after the Monitor (ids and callables).
        wrapper_kwargs: its keyword arguments.
        monitor_dir: folder for Monitor CSV files (ids and callables).
        monitor_kwargs: Monitor keyword arguments.
        verbose: 1 prints which wrappers are added.
    """
    n_envs = _check_n_envs(n_envs)
    env: VecEnv
    if isinstance(env_spec, VecEnv):
        if n_envs not in (1, env_spec.num_envs):
            raise ValueError(
                f"n_envs={n_envs} does not match the given VecEnv, which has {env_spec.num_envs} envs "
                "(pass n_envs=1 or the VecEnv's num_envs)."
            )
        env = env_spec
        if seed is not None:
            env.seed(seed)
            env.action_space.seed(seed)
        if monitor_wrapper and not is_vecenv_wrapped(env, VecMonitor):
            try:
                has_monitor = env.env_is_wrapped(Monitor)[0]
            except AttributeError:
                has_monitor = False
            if not has_monitor:
                if verbose >= 1:
                    print("Wrapping the env in a VecMonitor.")
                env = VecMonitor(env)
    elif isinstance(env_spec, gym.Env):
        if n_envs != 1:
            raise ValueError(
                f"Cannot make {n_envs} envs from one gym.Env instance (an instance cannot be copied); "
                "pass an env id or a function that creates a new env, or n_envs=1."
            )
        gym_env: gym.Env = env_spec
        if monitor_wrapper and not is_wrapped(gym_env, Monitor):
            if verbose >= 1:
                print("Wrapping the env with a `Monitor` wrapper")
            gym_env = Monitor(gym_env, **(monitor_kwargs or {}))
        if seed is not None:
            gym_env.action_space.seed(seed)
        if verbose >= 1:
            print("Wrapping the env in a DummyVecEnv.")
        env = DummyVecEnv([lambda: gym_env])
        if seed is not None:
            env.seed(seed)
    elif isinstance(env_spec, str) or callable(env_spec):
        env = _make_vec_env(
            env_spec,
            n_envs,
            seed,
            0,
            monitor_dir,
            wrapper_class,
            env_kwargs,
            vec_env_cls,
            vec_env_kwargs,
            monitor_kwargs,
            wrapper_kwargs,
            monitor=monitor_wrapper,
        )
    else:
        raise TypeError(
            f"Cannot make an environment from {type(env_spec).__name__}: expected an env id (str), a gymnasium.Env, "
            "a callable returning a gymnasium.Env, or a VecEnv."
        )

    check_for_nested_spaces(env.observation_space)
    if not is_vecenv_wrapped(env, VecTransposeImage) and _needs_transpose(env.observation_space):
        if verbose >= 1:
            print("Wrapping the env in a VecTransposeImage.")
        env = VecTransposeImage(env)
    return env
