"""RLTrainer — a ``lightning.Trainer`` subclass for reinforcement learning.

Usage::

    from lit_sb3 import PPO, RLEnvDataModule, RLTrainer

    model = PPO("MlpPolicy")
    dm = RLEnvDataModule(train_env="CartPole-v1")
    trainer = RLTrainer(max_steps=100_000, enable_progress_bar=True)
    trainer.fit(model, datamodule=dm)

``max_steps`` is the budget in ENV steps (Lightning's ``global_step`` counts optimizer steps under manual
optimization, so it cannot be the budget). The SB3-style ``model.learn(total_timesteps, env=...)`` delegates here.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import gymnasium as gym
import lightning as L
import numpy as np
from lightning.pytorch.accelerators import Accelerator
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from lightning.pytorch.profilers import Profiler
from lightning.pytorch.strategies import Strategy

from lit_sb3.callbacks.summary_writer import SummaryWriterCallback
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.core.types import MaybeCallback
from lit_sb3.utils.system import get_latest_run_id

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

__all__ = ["RLTrainer"]


def _quiet_lightning() -> None:
    """Silence Lightning's per-Trainer banner (GPU/TPU availability, tips); warnings still show."""
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric.utilities.rank_zero").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    # target networks are kept in eval mode on purpose
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training.*")


class RLTrainer(L.Trainer):
    """A :class:`lightning.Trainer` that drives reinforcement-learning runs.

    All standard ``lightning.Trainer`` keyword arguments are accepted and forwarded, giving access to
    Lightning's loggers, callbacks, precision, devices and checkpoints.

    Args:
        max_steps: total environment steps to collect (the RL budget). Lightning's step-based stopping is
            disabled; the budget is enforced with env-step accounting.
        rl_callback: SB3-style callback(s) fired at each env step.
        run_name: run name of the default TensorBoard logger (``<run_name>_<id>``).
        logger: Lightning logger(s); ``None`` gives a TensorBoard logger under
            ``default_root_dir/lightning_logs/<run_name>_<id>``, ``False`` disables logging.
        enable_progress_bar: show a progress bar over env steps (replaces Lightning's batch bar).
        log_every_n_steps: log interval (episodes for off-policy, iterations for on-policy).
    """

    def __init__(
        self,
        max_steps: int,
        rl_callback: MaybeCallback = None,
        run_name: str = "run",
        *,
        accelerator: str | Accelerator = "auto",
        strategy: str | Strategy = "auto",
        devices: list[int] | str | int = "auto",
        num_nodes: int = 1,
        precision: Any = None,
        logger: Logger | Iterable[Logger] | bool | None = None,
        callbacks: list[Callback] | Callback | None = None,
        fast_dev_run: int | bool = False,
        max_epochs: int | None = None,
        min_epochs: int | None = None,
        min_steps: int | None = None,
        max_time: str | timedelta | dict[str, int] | None = None,
        limit_train_batches: int | float | None = None,
        limit_val_batches: int | float | None = None,
        limit_test_batches: int | float | None = None,
        limit_predict_batches: int | float | None = None,
        overfit_batches: int | float = 0.0,
        val_check_interval: int | float | str | timedelta | dict[str, int] | None = None,
        check_val_every_n_epoch: int | None = 1,
        num_sanity_val_steps: int | None = None,
        log_every_n_steps: int | None = None,
        enable_checkpointing: bool | None = None,
        enable_progress_bar: bool | None = None,
        enable_model_summary: bool | None = None,
        accumulate_grad_batches: int = 1,
        gradient_clip_val: int | float | None = None,
        gradient_clip_algorithm: str | None = None,
        deterministic: bool | Literal["warn"] | None = None,
        benchmark: bool | None = None,
        inference_mode: bool = True,
        use_distributed_sampler: bool = True,
        profiler: Profiler | str | None = None,
        detect_anomaly: bool = False,
        barebones: bool = False,
        plugins: Any = None,
        sync_batchnorm: bool = False,
        reload_dataloaders_every_n_epochs: int = 0,
        default_root_dir: str | Path | None = None,
        enable_autolog_hparams: bool = True,
        model_registry: str | None = None,
    ) -> None:
        self._validate_trainer_init(max_epochs, min_epochs, max_steps, min_steps)
        _quiet_lightning()

        self._rl_total_timesteps = int(max_steps)
        self._rl_callback = rl_callback
        self._rl_log_every_n_steps = log_every_n_steps
        self._rl_run_name = run_name
        self._rl_reset_num_timesteps = True
        self._rl_env: Any = None
        self._rl_num_timesteps = 0
        self._rl_start_timesteps = 0
        self._rl_target_timesteps = int(max_steps)
        self._rl_budget_reached = False
        self._rl_progress_bar = bool(enable_progress_bar)
        self._rl_auto_logger = logger is None
        trainer_logger = False if self._rl_auto_logger else logger

        super().__init__(
            accelerator=accelerator,
            strategy=strategy,
            devices=devices,
            num_nodes=num_nodes,
            precision=precision,
            logger=trainer_logger,
            callbacks=callbacks,
            fast_dev_run=fast_dev_run,
            max_epochs=-1,
            min_epochs=None,
            max_steps=-1,
            min_steps=None,
            max_time=max_time,
            limit_train_batches=limit_train_batches,
            limit_val_batches=limit_val_batches,
            limit_test_batches=limit_test_batches,
            limit_predict_batches=limit_predict_batches,
            overfit_batches=overfit_batches,
            val_check_interval=val_check_interval,
            check_val_every_n_epoch=check_val_every_n_epoch,
            num_sanity_val_steps=0 if num_sanity_val_steps is None else num_sanity_val_steps,
            log_every_n_steps=log_every_n_steps,
            enable_checkpointing=False if enable_checkpointing is None else enable_checkpointing,
            # Lightning's bar counts training_step calls; the RL bar counts env steps (ProgressBarCallback)
            enable_progress_bar=False,
            enable_model_summary=False if enable_model_summary is None else enable_model_summary,
            accumulate_grad_batches=accumulate_grad_batches,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            deterministic=deterministic,
            benchmark=benchmark,
            inference_mode=inference_mode,
            use_distributed_sampler=use_distributed_sampler,
            profiler=profiler,
            detect_anomaly=detect_anomaly,
            barebones=barebones,
            plugins=plugins,
            sync_batchnorm=sync_batchnorm,
            reload_dataloaders_every_n_epochs=reload_dataloaders_every_n_epochs,
            default_root_dir=default_root_dir,
            enable_autolog_hparams=enable_autolog_hparams,
            model_registry=model_registry,
        )

    # ------------------------------------------------------------------
    # Public API
    # ------------------------------------------------------------------

    @property
    def rl_total_timesteps(self) -> int:
        """The env-step budget of this trainer (``max_steps``)."""
        return self._rl_total_timesteps

    @property
    def rl_num_timesteps(self) -> int:
        """The latest observed env-step count of the model being trained."""
        return self._rl_num_timesteps

    @property
    def rl_budget_reached(self) -> bool:
        """Whether the env-step budget has been reached."""
        return self._rl_budget_reached

    @property
    def rl_progress(self) -> float:
        """Budget progress in ``[0, 1]``."""
        if self._rl_total_timesteps <= 0:
            return 0.0
        done = self._rl_num_timesteps - (self._rl_target_timesteps - self._rl_total_timesteps)
        return min(1.0, max(0.0, done / self._rl_total_timesteps))

    def _reset_rl_budget_tracking(self) -> None:
        self._rl_num_timesteps = 0
        self._rl_budget_reached = False

    def _update_rl_timesteps(self, num_timesteps: int) -> None:
        self._rl_num_timesteps = max(0, int(num_timesteps))
        self._rl_budget_reached = self._rl_num_timesteps >= self._rl_target_timesteps

    @staticmethod
    def _validate_trainer_init(
        max_epochs: int | None, min_epochs: int | None, max_steps: int, min_steps: int | None
    ) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps <= 0:
            raise ValueError("RLTrainer requires `max_steps` to be a positive integer.")
        unsupported = []
        if max_epochs is not None:
            unsupported.append("max_epochs")
        if min_epochs is not None:
            unsupported.append("min_epochs")
        if min_steps is not None:
            unsupported.append("min_steps")
        if unsupported:
            names = ", ".join(unsupported)
            raise ValueError(
                f"RLTrainer manages Lightning loop limits from `max_steps`; unsupported constructor args: {names}."
            )

    @staticmethod
    def _reject_unsupported_kwargs(stage: str, **kwargs: Any) -> None:
        provided = [name for name, value in kwargs.items() if value is not None]
        if provided:
            joined = ", ".join(provided)
            raise TypeError(f"RLTrainer.{stage}() does not support Lightning data/checkpoint inputs ({joined}).")

    def _resolve_model(self, model: BaseAlgorithm | None) -> BaseAlgorithm:
        resolved = model if model is not None else self.lightning_module
        if resolved is None:
            raise ValueError("No model provided and no model is attached to this trainer.")
        if not isinstance(resolved, L.LightningModule) or not hasattr(resolved, "predict"):
            raise TypeError("RLTrainer expects a lit-sb3 algorithm model.")
        return resolved  # type: ignore[return-value]

    @staticmethod
    def _reset_env(env: gym.Env | Any) -> Any:
        observation = env.reset()
        if isinstance(observation, tuple):
            return observation[0]
        return observation

    def _resolve_eval_env(self, model: BaseAlgorithm, env: gym.Env | Any | None) -> gym.Env | Any:
        resolved_env = env if env is not None else self._rl_env
        if resolved_env is None:
            resolved_env = model.get_env()
        if resolved_env is None:
            raise ValueError("No evaluation environment was provided and no environment is attached to the trainer.")
        if isinstance(resolved_env, str):
            from lit_sb3.vec_env.env_util import wrap_env

            resolved_env = wrap_env(resolved_env)
        return resolved_env

    def _evaluate(
        self,
        stage: str,
        model: BaseAlgorithm | None,
        *,
        env: gym.Env | Any | None = None,
        n_eval_episodes: int = 10,
        deterministic: bool = True,
        render: bool = False,
        reward_threshold: float | None = None,
        return_episode_rewards: bool = False,
        use_masking: bool = False,
    ) -> list[Mapping[str, float | int | list[float] | list[int]]]:
        resolved_model = self._resolve_model(model)
        eval_env = self._resolve_eval_env(resolved_model, env)
        episode_rewards, episode_lengths = evaluate_policy(
            resolved_model,
            eval_env,
            n_eval_episodes=n_eval_episodes,
            deterministic=deterministic,
            render=render,
            reward_threshold=reward_threshold,
            return_episode_rewards=True,
            use_masking=use_masking,
        )
        rewards = cast(list[float], episode_rewards)
        lengths = cast(list[int], episode_lengths)
        result: dict[str, float | int | list[float] | list[int]] = {
            f"{stage}/mean_reward": float(np.mean(rewards)),
            f"{stage}/std_reward": float(np.std(rewards)),
            f"{stage}/mean_episode_length": float(np.mean(lengths)),
            f"{stage}/std_episode_length": float(np.std(lengths)),
            f"{stage}/n_eval_episodes": int(len(rewards)),
        }
        if return_episode_rewards:
            result[f"{stage}/episode_rewards"] = [float(r) for r in rewards]
            result[f"{stage}/episode_lengths"] = [int(n) for n in lengths]
        return [result]

    def _attach_rl_callback(self, rl_callback: Any) -> None:
        callbacks = cast(list[Any], self.callbacks)
        if rl_callback not in callbacks:
            callbacks.append(rl_callback)

    def _ensure_summary_writer_callback(self) -> None:
        callbacks = cast(list[Any], self.callbacks)
        if not any(isinstance(callback, SummaryWriterCallback) for callback in callbacks):
            callbacks.append(SummaryWriterCallback())

    def _set_runtime_logger(self, logger: Any) -> None:
        self.loggers = [] if logger in (None, False) else [logger]

    def _configure_lightning_logger(self, model: BaseAlgorithm) -> None:
        existing = [logger for logger in self.loggers if logger not in (None, False)]
        if existing:
            self._ensure_summary_writer_callback()
            return
        logger = model._trainer_logger
        if logger is None and self._rl_auto_logger:
            logger_root = Path(self.default_root_dir) / "lightning_logs"
            latest_run_id = get_latest_run_id(logger_root, self._rl_run_name)
            run_id = latest_run_id + 1 if self._rl_reset_num_timesteps or latest_run_id == 0 else latest_run_id
            logger = TensorBoardLogger(
                save_dir=str(self.default_root_dir),
                name="lightning_logs",
                version=f"{self._rl_run_name}_{run_id}",
                default_hp_metric=False,
            )
        if logger is not None:
            self._set_runtime_logger(logger)
        self._ensure_summary_writer_callback()

    @staticmethod
    def _resolve_datamodule_env(datamodule: Any, stage: Literal["fit", "validate", "test", "predict"]) -> Any:
        from lit_sb3.datamodule import RLEnvDataModule

        if not isinstance(datamodule, RLEnvDataModule):
            raise TypeError(f"RLTrainer expects an RLEnvDataModule, got {type(datamodule).__name__}.")
        return datamodule.get_env(stage)

    def fit(  # type: ignore[override]
        self,
        model: BaseAlgorithm,
        *,
        datamodule: Any = None,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        weights_only: bool | None = None,
    ) -> BaseAlgorithm:
        """Train ``model`` for ``max_steps`` env steps on the datamodule's ``train_env``.

        Args:
            model: the RL algorithm (a LightningModule).
            datamodule: an :class:`~lit_sb3.datamodule.RLEnvDataModule` with the training env.
            train_dataloaders: unsupported (TypeError).
            val_dataloaders: unsupported (TypeError).
            ckpt_path: a Lightning checkpoint to resume from (weights, optimizers, env-step count, RNG, env state).
            weights_only: Lightning's checkpoint loading flag.

        Returns:
            The trained model (same object).
        """
        self._reject_unsupported_kwargs("fit", train_dataloaders=train_dataloaders, val_dataloaders=val_dataloaders)
        if datamodule is None:
            raise TypeError(
                "RLTrainer.fit() requires a datamodule (RLEnvDataModule) that provides the training environment."
            )
        resolved_env = self._resolve_datamodule_env(datamodule, "fit")
        if resolved_env is None:
            raise ValueError(
                "The RLEnvDataModule has no train_env. Provide train_env when constructing the RLEnvDataModule."
            )
        self._resolve_model(model)

        self._rl_env = resolved_env
        self._reset_rl_budget_tracking()
        model._init_env_metadata(resolved_env)
        model._rl_trainer_ref = self
        if model.verbose >= 1:
            print(f"Using {self.strategy.root_device} device")
        if not model.policy_ready:
            model._setup_model()
        self._configure_lightning_logger(model)

        total_timesteps, rl_callback = model._setup_learn(
            self._rl_total_timesteps, self._rl_callback, self._rl_run_name
        )
        self._rl_target_timesteps = int(total_timesteps)
        self._update_rl_timesteps(model.num_timesteps)
        log_every_n_steps = (
            self._rl_log_every_n_steps if self._rl_log_every_n_steps is not None else model._default_log_every_n_steps
        )
        model._prepare_fit(rl_callback, log_every_n_steps)
        self.fit_loop.max_epochs = model._rl_max_epochs(total_timesteps)
        self._attach_rl_callback(rl_callback)
        rl_callback.on_training_start(locals(), globals())
        model._pre_fit_hook(rl_callback)
        try:
            super().fit(
                model,
                train_dataloaders=None,
                val_dataloaders=None,
                datamodule=None,
                ckpt_path=ckpt_path,
                weights_only=weights_only,
            )
        finally:
            callbacks = cast(list[Any], self.callbacks)
            if rl_callback in callbacks:
                callbacks.remove(rl_callback)
        self._update_rl_timesteps(model.num_timesteps)
        return model

    def validate(  # type: ignore[override]
        self,
        model: BaseAlgorithm | None = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        datamodule: Any = None,
        weights_only: bool | None = None,
        *,
        env: gym.Env | Any | None = None,
        n_eval_episodes: int = 10,
        deterministic: bool = True,
        render: bool = False,
        reward_threshold: float | None = None,
        return_episode_rewards: bool = False,
        use_masking: bool = False,
    ) -> list[Mapping[str, float | int | list[float] | list[int]]]:
        """Evaluate ``model`` for ``n_eval_episodes`` episodes: ``[{"validate/mean_reward": ..., ...}]``."""
        self._reject_unsupported_kwargs(
            "validate", dataloaders=dataloaders, ckpt_path=ckpt_path, weights_only=weights_only
        )
        if env is None and datamodule is not None:
            env = self._resolve_datamodule_env(datamodule, "validate")
        return self._evaluate(
            "validate",
            model,
            env=env,
            n_eval_episodes=n_eval_episodes,
            deterministic=deterministic,
            render=render,
            reward_threshold=reward_threshold,
            return_episode_rewards=return_episode_rewards,
            use_masking=use_masking,
        )

    def test(  # type: ignore[override]
        self,
        model: BaseAlgorithm | None = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        datamodule: Any = None,
        weights_only: bool | None = None,
        *,
        env: gym.Env | Any | None = None,
        n_eval_episodes: int = 10,
        deterministic: bool = True,
        render: bool = False,
        reward_threshold: float | None = None,
        return_episode_rewards: bool = False,
        use_masking: bool = False,
    ) -> list[Mapping[str, float | int | list[float] | list[int]]]:
        """Like :meth:`validate` with ``test/`` keys and the datamodule's ``test_env``."""
        self._reject_unsupported_kwargs("test", dataloaders=dataloaders, ckpt_path=ckpt_path, weights_only=weights_only)
        if env is None and datamodule is not None:
            env = self._resolve_datamodule_env(datamodule, "test")
        return self._evaluate(
            "test",
            model,
            env=env,
            n_eval_episodes=n_eval_episodes,
            deterministic=deterministic,
            render=render,
            reward_threshold=reward_threshold,
            return_episode_rewards=return_episode_rewards,
            use_masking=use_masking,
        )

    def predict(  # type: ignore[override]
        self,
        model: BaseAlgorithm | None = None,
        dataloaders: Any = None,
        datamodule: Any = None,
        return_predictions: bool | None = None,
        ckpt_path: str | Path | None = None,
        weights_only: bool | None = None,
        *,
        observation: np.ndarray | dict[str, np.ndarray] | None = None,
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
        env: gym.Env | Any | None = None,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """``model.predict`` on ``observation`` (or on a fresh reset of the env): ``(actions, state)``."""
        self._reject_unsupported_kwargs(
            "predict", dataloaders=dataloaders, ckpt_path=ckpt_path, weights_only=weights_only
        )
        if env is None and datamodule is not None:
            env = self._resolve_datamodule_env(datamodule, "predict")
        if return_predictions is False:
            raise TypeError("RLTrainer.predict() always returns policy predictions.")
        resolved_model = self._resolve_model(model)
        if observation is None:
            observation = self._reset_env(self._resolve_eval_env(resolved_model, env))
        if action_masks is None:
            return resolved_model.predict(
                observation, state=state, episode_start=episode_start, deterministic=deterministic
            )
        predict_fn = cast(Any, resolved_model.predict)
        return predict_fn(
            observation,
            state=state,
            episode_start=episode_start,
            deterministic=deterministic,
            action_masks=action_masks,
        )
