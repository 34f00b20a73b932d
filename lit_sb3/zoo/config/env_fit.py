"""What a resolved config asks of its env, checked against the env itself at planning (before any job starts).

The values of a config are checked on their own in :mod:`lit_sb3.zoo.config.checks`; here they meet the env:
``env_kwargs`` against the registered entry point's constructor signature, the env built once as a job builds it
(``gym.make`` with ``env_kwargs``, then the ``env_wrapper`` chain: a wrapper argument the wrapper refuses, such as
``TimeLimit(max_episode_steps=-1)``, fails here), and the policy's features extractor against the resulting
observation space (``CnnPolicy`` needs images, ``MultiInputPolicy`` a ``Dict``). Each problem is one
:class:`~lit_sb3.zoo.errors.BenchError` naming where the value came from.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = ["check_config_on_env", "env_constructor_arguments"]

# arguments gym.make takes itself (beside the entry point's)
_MAKE_ARGUMENTS = ("max_episode_steps", "disable_env_checker", "render_mode")


def env_constructor_arguments(env_id: str) -> tuple[str, list[str] | None]:
    """``(entry point, accepted keyword names)`` of a registered env; ``None`` when it takes ``**kwargs`` or its
    signature cannot be read (then anything is passed on).

    Args:
        env_id: a registered gymnasium env id.
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    if ":" in env_id:  # "module:Env-v0", as gym.make reads it: the module registers the env
        import importlib

        module, env_id = env_id.split(":", 1)
        importlib.import_module(module)
    spec = gym.spec(env_id)
    entry = spec.entry_point
    name = (
        entry
        if isinstance(entry, str)
        else f"{getattr(entry, '__module__', '?')}.{getattr(entry, '__qualname__', entry)}"
    )
    try:
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        params = inspect.signature(creator).parameters.values()
    except (ValueError, TypeError, ImportError, AttributeError):
        return name, None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return name, None
    accepted = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return name, list(dict.fromkeys([*accepted, *spec.kwargs, *_MAKE_ARGUMENTS]))


def _where(cfg: Any, key: str) -> str:
    return f"{cfg.provenance.get(key, 'config')}: {key}"


def check_config_on_env(cfg: Any) -> None:
    """Refuse (one-line :class:`BenchError`) a config whose ``env_kwargs``, env wrappers or policy do not fit its env.

    Args:
        cfg: a :class:`~lit_sb3.zoo.config.resolved.ResolvedConfig` (its env id is registered: ``check_pair`` ran).
    """
    import gymnasium as gym

    entry, accepted = env_constructor_arguments(cfg.env_id)
    for key in ("env_kwargs", "eval_env_kwargs"):
        kwargs = getattr(cfg, key, None) or {}
        unknown = [k for k in kwargs if accepted is not None and k not in accepted]
        if unknown:
            raise BenchError(
                f"{_where(cfg, key)}: {cfg.env_id} ({entry}) takes no argument {unknown[0]!r}"
                f"{did_you_mean(unknown[0], accepted or [])}; accepted: {', '.join(accepted or [])}"
            )
    from lit_sb3.zoo.env_warnings import captured

    try:
        with captured(cfg.env_id):  # the env family's warnings are said once by the planning, not printed here
            env = gym.make(cfg.env_id, **dict(cfg.env_kwargs or {}))
    except Exception as exc:  # noqa: BLE001 - the env's own refusal of the arguments, one line
        raise BenchError(f"{_where(cfg, 'env_kwargs')}: {cfg.env_id} cannot be made with {dict(cfg.env_kwargs or {})}: "
                         f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None  # fmt: skip
    try:
        if cfg.env_wrapper:
            from lit_sb3.zoo.wrappers import make_env_wrapper

            try:
                env = make_env_wrapper(cfg.env_wrapper)(env)
            except Exception as exc:  # noqa: BLE001 - a wrapper refusing its arguments or the env, one line
                text = " ".join(str(exc).split())[:200] or "(no message)"
                raise BenchError(
                    f"{_where(cfg, 'env_wrapper')}: cannot wrap {cfg.env_id}: {type(exc).__name__}: {text}"
                ) from None
        _check_policy_space(cfg, env.observation_space)
    finally:
        env.close()


def _check_policy_space(cfg: Any, observation_space: Any) -> None:
    """The policy's features extractor can read the observations (the check SB3's extractors assert later)."""
    from gymnasium import spaces

    from lit_sb3.core.preprocessing import is_image_space
    from lit_sb3.policies.torch_layers import CombinedExtractor, NatureCNN
    from lit_sb3.zoo.registry import get_algo_class

    policy_cls = (getattr(get_algo_class(cfg.algo), "policy_aliases", None) or {}).get(cfg.policy)
    if policy_cls is None:
        return
    policy_kwargs = cfg.algo_kwargs.get("policy_kwargs") or {}
    extractor = policy_kwargs.get("features_extractor_class") if isinstance(policy_kwargs, Mapping) else None
    if extractor is None:
        default = inspect.signature(policy_cls).parameters.get("features_extractor_class")
        extractor = default.default if default is not None else None
    if not isinstance(extractor, type):
        return
    if issubclass(extractor, NatureCNN) and not is_image_space(observation_space, normalized_image=True):
        raise BenchError(
            f"{_where(cfg, 'policy')}: {cfg.policy} ({extractor.__name__}) needs image observations (a 3-D Box); "
            f"{cfg.env_id} has {_show_space(observation_space)}: use MlpPolicy"
        )
    if issubclass(extractor, CombinedExtractor) and not isinstance(observation_space, spaces.Dict):
        raise BenchError(
            f"{_where(cfg, 'policy')}: {cfg.policy} ({extractor.__name__}) needs Dict observations; "
            f"{cfg.env_id} has {_show_space(observation_space)}: use MlpPolicy or CnnPolicy"
        )


def _show_space(space: Any) -> str:
    shape = getattr(space, "shape", None)
    dtype = getattr(space, "dtype", None)
    return f"{type(space).__name__}(shape={shape}, dtype={dtype})" if shape is not None else type(space).__name__
