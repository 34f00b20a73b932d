"""RLEnvDataModule: the environments of a run, for fit / validate / test / predict."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import gymnasium as gym
import lightning as L

from lit_sb3.core.types import EnvSpec
from lit_sb3.vec_env import VecEnv, VecNormalize

__all__ = ["RLEnvDataModule"]

Stage = Literal["fit", "validate", "test", "predict"]
_STAGES = ("fit", "validate", "test", "predict")


class RLEnvDataModule(L.LightningDataModule):
    """Provides the envs of a run as VecEnvs, built lazily and cached.

    Each env may be an env id, a ``gym.Env``, a callable returning one, or a ``VecEnv`` (used as is).
    Evaluation envs default to a fresh copy of the training env id (never the training env itself), and share
    its VecNormalize statistics (synced, frozen, reward not normalised) when ``normalize`` is on.

    Args:
        train_env: the training env (a list of VecEnvs, one per seed, for a ``SeedBatch``).
        val_env: env for ``validate`` (defaults to a new instance of ``train_env`` when it is an id/callable).
        test_env: env for ``test`` (defaults like ``val_env``).
        predict_env: env for ``predict`` (defaults like ``val_env``).
        n_envs: number of parallel training envs.
        seed: seed for the training envs (evaluation envs use ``seed + 10_000``).
        env_kwargs: kwargs for ``gym.make``.
        vec_env_cls: ``DummyVecEnv`` (default) or ``SubprocVecEnv``.
        vec_env_kwargs: kwargs for the VecEnv class.
        wrapper_class: gym wrapper applied to each env (after Monitor).
        wrapper_kwargs: kwargs for ``wrapper_class``.
        normalize: wrap the training env in ``VecNormalize``.
        normalize_kwargs: kwargs for ``VecNormalize`` (``norm_obs``, ``norm_reward``, ``gamma``, ...).
        n_eval_envs: number of envs for evaluation.
        verbose: verbosity level.
    """

    def __init__(
        self,
        train_env: EnvSpec | None = None,
        val_env: EnvSpec | None = None,
        test_env: EnvSpec | None = None,
        predict_env: EnvSpec | None = None,
        n_envs: int = 1,
        seed: int | None = None,
        env_kwargs: dict[str, Any] | None = None,
        vec_env_cls: type[VecEnv] | None = None,
        vec_env_kwargs: dict[str, Any] | None = None,
        wrapper_class: Callable[..., gym.Env] | None = None,
        wrapper_kwargs: dict[str, Any] | None = None,
        normalize: bool = False,
        normalize_kwargs: dict[str, Any] | None = None,
        n_eval_envs: int = 1,
        verbose: int = 0,
    ) -> None:
        super().__init__()
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}.")
        if isinstance(train_env, (list, tuple)):  # one env per seed of a SeedBatch
            if not train_env or not all(isinstance(e, VecEnv) for e in train_env):
                raise TypeError("train_env as a list must hold one VecEnv per seed (for a SeedBatch).")
            if normalize:
                raise ValueError(
                    "normalize=True with a list of envs: wrap each seed's VecEnv in VecNormalize yourself."
                )
        for name, spec in (
            ("train_env", None if isinstance(train_env, (list, tuple)) else train_env),
            ("val_env", val_env),
            ("test_env", test_env),
            ("predict_env", predict_env),
        ):
            if spec is not None and not isinstance(spec, (str, gym.Env, VecEnv)) and not callable(spec):
                raise TypeError(
                    f"{name} must be an env id, a gym.Env, a callable returning one, or a VecEnv; got {type(spec).__name__}."
                )
        if isinstance(train_env, str):
            from lit_sb3.vec_env.env_util import check_env_id

            check_env_id(train_env)
        self.specs: dict[str, EnvSpec | None] = {
            "fit": train_env,
            "validate": val_env,
            "test": test_env,
            "predict": predict_env,
        }
        self.n_envs = n_envs
        self.seed = seed
        self.env_kwargs = env_kwargs or {}
        self.vec_env_cls = vec_env_cls
        self.vec_env_kwargs = vec_env_kwargs or {}
        self.wrapper_class = wrapper_class
        self.wrapper_kwargs = wrapper_kwargs
        self.normalize = normalize
        self.normalize_kwargs = normalize_kwargs or {}
        self.n_eval_envs = n_eval_envs
        self.verbose = verbose
        self._envs: dict[str, VecEnv | None] = {}

    def _build(self, spec: EnvSpec, n_envs: int, seed: int | None, monitor_wrapper: bool = True) -> VecEnv:
        from lit_sb3.vec_env.env_util import wrap_env

        return wrap_env(
            spec,
            n_envs=n_envs,
            seed=seed,
            monitor_wrapper=monitor_wrapper,
            env_kwargs=self.env_kwargs,
            vec_env_cls=self.vec_env_cls,
            vec_env_kwargs=self.vec_env_kwargs,
            wrapper_class=self.wrapper_class,
            wrapper_kwargs=self.wrapper_kwargs,
        )

    def get_env(self, stage: Stage = "fit", *, monitor_wrapper: bool = True) -> VecEnv | None:
        """The VecEnv for ``stage`` (``"fit"``, ``"validate"``, ``"test"`` or ``"predict"``), built on first use.

        Args:
            stage: which env.
            monitor_wrapper: wrap the training env in a Monitor when it is built (``RLTrainer.fit`` passes the
                model's ``monitor_wrapper``); evaluation envs always get one (episode returns are read from it).
        """
        if stage not in _STAGES:
            raise ValueError(f"Unknown stage {stage!r}; expected one of {_STAGES}.")
        if stage in self._envs:
            return self._envs[stage]
        spec = self.specs[stage]
        if stage == "fit" and isinstance(spec, (list, tuple)):
            env = list(spec)  # type: ignore[assignment]
        elif stage == "fit":
            env = None if spec is None else self._build(spec, self.n_envs, self.seed, monitor_wrapper)
            if env is not None and self.normalize and not isinstance(env, VecNormalize):
                env = VecNormalize(env, **self.normalize_kwargs)
        else:
            train_spec = self.specs["fit"]
            if spec is None and (
                isinstance(train_spec, str) or (callable(train_spec) and not isinstance(train_spec, (gym.Env, VecEnv)))
            ):
                spec = train_spec
            eval_seed = None if self.seed is None else self.seed + 10_000
            env = None if spec is None else self._build(spec, self.n_eval_envs, eval_seed)
            train_env = self.get_env("fit") if self.specs["fit"] is not None else None
            if env is not None and isinstance(train_env, VecNormalize) and not isinstance(env, VecNormalize):
                from lit_sb3.vec_env import sync_envs_normalization

                env = VecNormalize(
                    env, training=False, norm_reward=False, norm_obs=train_env.norm_obs, clip_obs=train_env.clip_obs
                )
                sync_envs_normalization(train_env, env)
        self._envs[stage] = env
        return env

    def setup(self, stage: str | None = None) -> None:  # Lightning hook; envs are built lazily
        return None

    def teardown(self, stage: str | None = None) -> None:
        return None

    def close(self) -> None:
        """Close every env built by this datamodule."""
        for env in self._envs.values():
            for one in env if isinstance(env, list) else [env]:
                if one is not None:
                    one.close()
        self._envs = {}
