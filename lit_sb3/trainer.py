"""RLTrainer — a ``lightning.Trainer`` subclass for reinforcement learning.

Usage::

    from lit_sb3 import PPO, RLEnvDataModule, RLTrainer

    model = PPO("MlpPolicy")
    dm = RLEnvDataModule(train_env="CartPole-v1")
    trainer = RLTrainer(max_steps=100_000, enable_progress_bar=True)
    trainer.fit(model, datamodule=dm)

``max_steps`` is the budget in ENV steps. Lightning's ``trainer.global_step`` counts collect/update *cycles*
(off-policy: ``train_freq`` steps or episodes then ``gradient_steps`` updates; on-policy: one rollout then its
update), so ``ModelCheckpoint(every_n_train_steps=N)`` saves every N cycles. The SB3-style
``model.learn(total_timesteps, env=...)`` delegates here. The trainer and the algorithm share one
:class:`~lit_sb3.algorithms.fit_context.FitContext` per fit (budget, reset flag, callbacks, progress bar, env-step
counter); see its docstring for the contract.
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
from lightning.pytorch.callbacks import Callback, Checkpoint, ModelCheckpoint
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from lightning.pytorch.profilers import Profiler
from lightning.pytorch.strategies import Strategy

from lit_sb3.algorithms.fit_context import FitContext
from lit_sb3.callbacks.checkpoint import EnvStepCheckpoint
from lit_sb3.callbacks.summary_writer import SummaryWriterCallback
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.core.types import MaybeCallback
from lit_sb3.lightning_compat import (
    checkpoint_every_n_train_steps,
    checkpoint_has_own_cadence,
    save_monitored_checkpoint,
)
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
    # a checkpoint after the cycle's update is the state to resume from (global_step counts completed cycles)
    warnings.filterwarnings("ignore", message=r".*ModelCheckpoint with manual optimization and every_n_train_steps.*")
    # target networks are kept in eval mode on purpose
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training.*")


_OWN_OPTIMIZERS = "the algorithms step their own optimizers on RL data"
_NO_EPOCHS = "fit has no epochs and no validation loop"

# Lightning arguments with no meaning under manual optimisation or in RL:
# name -> (value that means "unset", why it has no RL meaning, what to do instead)
_NO_RL_MEANING: dict[str, tuple[Any, str, str]] = {
    "gradient_clip_val": (None, _OWN_OPTIMIZERS, "use the algorithm's `max_grad_norm` (PPO, A2C, DQN) instead"),
    "gradient_clip_algorithm": (None, _OWN_OPTIMIZERS, "use the algorithm's `max_grad_norm` (PPO, A2C, DQN) instead"),
    "accumulate_grad_batches": (1, _OWN_OPTIMIZERS, "use the algorithm's `batch_size` instead"),
    "limit_train_batches": (None, _OWN_OPTIMIZERS, "use `max_steps` (the env-step budget) instead"),
    "overfit_batches": (0.0, _OWN_OPTIMIZERS, "use `max_steps` (the env-step budget) instead"),
    "limit_val_batches": (
        None,
        _OWN_OPTIMIZERS,
        "use `EvalCallback(n_eval_episodes=...)` or `trainer.validate(n_eval_episodes=...)` instead",
    ),
    "val_check_interval": (None, _OWN_OPTIMIZERS, "use `EvalCallback(eval_freq=...)` instead"),
    "num_sanity_val_steps": (
        0,
        "fit runs no validation loop to check",
        "call `trainer.validate(model, env=...)` first",
    ),
    "check_val_every_n_epoch": (1, _NO_EPOCHS, "use `EvalCallback(eval_freq=...)` instead"),
    "reload_dataloaders_every_n_epochs": (
        0,
        "the envs come from the datamodule once per fit and the loop has no epochs",
        "pass a new `RLEnvDataModule` to each `fit` instead",
    ),
    "sync_batchnorm": (
        False,
        "each run collects its own env steps in one process, there are no per-device batches to synchronise",
        "use `devices=1` and run seeds in parallel with `bench run`",
    ),
    "use_distributed_sampler": (
        True,
        "the train loader yields one token per collect/update cycle, there is no dataset to shard",
        "leave it unset",
    ),
    "inference_mode": (
        True,
        "evaluation and prediction run the policy under `torch.inference_mode()` themselves",
        "leave it unset",
    ),
    "limit_test_batches": (
        None,
        "`trainer.test` plays episodes, not batches",
        "use `trainer.test(n_eval_episodes=...)`",
    ),
    "limit_predict_batches": (
        None,
        "`trainer.predict` answers one observation (batch) per call",
        "pass the observations to `trainer.predict(observation=...)`",
    ),
}


def _refuse_without_rl_meaning(**kwargs: Any) -> None:
    """One-line error for a Lightning argument that RLTrainer cannot honour, naming what to use instead."""
    for name, value in kwargs.items():
        unset, reason, instead = _NO_RL_MEANING[name]
        if value is not None and value != unset:
            raise ValueError(f"RLTrainer does not support `{name}={value!r}` ({reason}); {instead}.")


class _RLLoopCallback(Callback):
    """RLTrainer's own hook into Lightning's loop: after a ``training_step`` in which an evaluation ran, the
    ``ModelCheckpoint`` callbacks that monitor a metric (``eval/mean_reward``) save their top-k, as Lightning does
    after a validation loop."""

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        context = getattr(trainer, "fit_context", None)
        if context is None or not context.evaluated or trainer.fast_dev_run:
            return
        for callback in trainer.checkpoint_callbacks:
            if not isinstance(callback, ModelCheckpoint) or callback.monitor is None:
                continue
            if checkpoint_has_own_cadence(callback):
                continue  # saved on its own cadence
            save_monitored_checkpoint(callback, trainer)


class RLTrainer(L.Trainer):
    """A :class:`lightning.Trainer` that drives reinforcement-learning runs.

    The ``lightning.Trainer`` keyword arguments are accepted and forwarded (loggers, callbacks, precision, devices,
    checkpoints, profilers), with these RL meanings:

    * ``max_steps``: the budget in env steps. Off-policy runs stop exactly there; on-policy runs round up to whole
      rollouts (``n_steps x n_envs``, as SB3 does), which is logged once.
    * ``trainer.global_step``: completed collect/update cycles (SB3's gradient steps stay in ``train/n_updates``).
      ``ModelCheckpoint(every_n_train_steps=N)`` saves every N cycles; ``enable_checkpointing=True`` saves at the
      end of the fit; ``ModelCheckpoint(monitor="eval/mean_reward", mode="max", save_top_k=k)`` keeps the k best
      evaluations of an ``EvalCallback``; :class:`~lit_sb3.callbacks.EnvStepCheckpoint` saves every N env steps.
      A checkpoint callback in ``callbacks`` turns checkpointing on (``enable_checkpointing`` defaults to it).
    * ``fast_dev_run=True | n``: 1 or n cycles, each with a real update (also during the warm-up), then stop.
    * ``precision``: ``"32-true"`` (default), ``"64-true"``, ``"bf16-mixed"``, ``"bf16-true"``; precisions that
      need loss scaling (``"16-mixed"``) are refused by the off-policy algorithms.
    * refused at construction when set (they have no meaning under manual optimisation or in RL), each with a
      one-line ``ValueError`` naming what to use: ``gradient_clip_val`` and ``gradient_clip_algorithm`` (use the
      algorithm's ``max_grad_norm``), ``accumulate_grad_batches`` (use ``batch_size``), ``limit_train_batches``
      and ``overfit_batches`` (use ``max_steps``), ``limit_val_batches``/``val_check_interval``/
      ``check_val_every_n_epoch`` (use ``EvalCallback``), ``num_sanity_val_steps`` (call ``validate`` first),
      ``limit_test_batches`` (use ``test(n_eval_episodes=...)``), ``limit_predict_batches``,
      ``reload_dataloaders_every_n_epochs``, ``sync_batchnorm``, ``use_distributed_sampler=False`` and
      ``inference_mode=False``.
    * ``barebones=True``: no logger (not even the default TensorBoard one), no progress bar, no checkpoints;
      ``enable_autolog_hparams=False``: the model's hyperparameters are not logged.
    * ``validate``/``test`` send their scalar results to the trainer's loggers at ``step = num_timesteps``.
    * checkpoints (``ckpt_path=``) always load with torch's safe loader (``weights_only=True``), whatever the source.

    Args:
        max_steps: total environment steps to collect (the RL budget). Lightning's step-based stopping is
            disabled; the budget is enforced with env-step accounting.
        rl_callback: SB3-style callback(s) fired at each env step.
        run_name: run name of the default TensorBoard logger (``<run_name>_<id>``).
        logger: Lightning logger(s); ``None`` gives a TensorBoard logger under
            ``default_root_dir/lightning_logs/<run_name>_<id>``, ``False`` disables logging.
        enable_progress_bar: show a progress bar over env steps (replaces Lightning's batch bar).
        log_every_n_steps: log interval (episodes for off-policy, iterations for on-policy).
        enable_checkpointing: Lightning's default ``ModelCheckpoint`` (saves at the end of the fit); ``None``: on
            when a checkpoint callback is passed in ``callbacks``, else off.

    Attributes:
        reset_num_timesteps: ``True`` (default): ``fit`` counts env steps from 0 (or from a checkpoint);
            ``False``: it continues the model's count for ``max_steps`` more steps (SB3's ``learn`` semantics,
            set by ``model.learn(reset_num_timesteps=False)``).
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
        _refuse_without_rl_meaning(
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            accumulate_grad_batches=accumulate_grad_batches,
            limit_train_batches=limit_train_batches,
            overfit_batches=overfit_batches,
            limit_val_batches=limit_val_batches,
            val_check_interval=val_check_interval,
            num_sanity_val_steps=num_sanity_val_steps,
            check_val_every_n_epoch=check_val_every_n_epoch,
            reload_dataloaders_every_n_epochs=reload_dataloaders_every_n_epochs,
            sync_batchnorm=sync_batchnorm,
            use_distributed_sampler=use_distributed_sampler,
            inference_mode=inference_mode,
            limit_test_batches=limit_test_batches,
            limit_predict_batches=limit_predict_batches,
        )
        _quiet_lightning()

        self._rl_total_timesteps = int(max_steps)
        self._rl_callback = rl_callback
        self._rl_log_every_n_steps = log_every_n_steps
        self._rl_run_name = run_name
        self.reset_num_timesteps = True
        self._rl_env: Any = None
        self._rl_context: FitContext | None = None
        self._rl_progress_bar = bool(enable_progress_bar)
        # barebones=True: no logger at all (Lightning refuses a given one), so no default TensorBoard logger either
        self._rl_auto_logger = logger is None and not barebones
        trainer_logger = False if self._rl_auto_logger else logger
        if enable_checkpointing is None:
            given = callbacks if isinstance(callbacks, list) else [] if callbacks is None else [callbacks]
            enable_checkpointing = any(isinstance(cb, Checkpoint) for cb in given)

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
            enable_checkpointing=enable_checkpointing,
            # Lightning's bar counts training_step calls; the RL bar counts env steps (ProgressBarCallback)
            # (under barebones=True, Lightning's own check refuses enable_progress_bar=True)
            enable_progress_bar=enable_progress_bar if barebones else False,
            enable_model_summary=False if enable_model_summary is None else enable_model_summary,
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
        from lightning.pytorch.plugins.io import TorchCheckpointIO

        from lit_sb3.utils.checkpoint_io import SafeCheckpointIO

        if type(self.strategy.checkpoint_io) is TorchCheckpointIO:  # ckpt_path: local, http(s), fsspec, all safe
            self.strategy.checkpoint_io = SafeCheckpointIO()

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
        return 0 if self._rl_context is None else self._rl_context.num_timesteps

    @property
    def rl_budget_reached(self) -> bool:
        """Whether the env-step budget has been reached."""
        return False if self._rl_context is None else self._rl_context.budget_reached

    @property
    def rl_progress(self) -> float:
        """Progress of this fit's budget in ``[0, 1]`` (env steps done in this run of ``max_steps``).

        As in seed 001, ``rl_num_timesteps / max_steps`` for a fresh run and for a run resumed from a checkpoint
        (the restored count is part of the same budget); a run continued with ``reset_num_timesteps=False``
        (SB3's ``learn`` semantics: ``max_steps`` *more* steps) measures the steps done since it started.
        """
        return 0.0 if self._rl_context is None else self._rl_context.progress

    @property
    def fit_context(self) -> FitContext | None:
        """The :class:`FitContext` of the current (or last) fit."""
        return self._rl_context

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
        lightning_inputs: dict[str, Any],
        datamodule: Any,
        env: gym.Env | Any | None,
        n_eval_episodes: int,
        deterministic: bool,
        render: bool,
        reward_threshold: float | None,
        return_episode_rewards: bool,
        use_masking: bool,
    ) -> list[Mapping[str, float | int | list[float] | list[int]]]:
        """:meth:`validate` and :meth:`test`: ``stage`` names the keys and the datamodule's env."""
        self._reject_unsupported_kwargs(stage, **lightning_inputs)
        if env is None and datamodule is not None:
            env = self._resolve_datamodule_env(datamodule, stage)
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
        self._log_evaluation(resolved_model, result)
        if return_episode_rewards:
            result[f"{stage}/episode_rewards"] = [float(r) for r in rewards]
            result[f"{stage}/episode_lengths"] = [int(n) for n in lengths]
        return [result]

    def _log_evaluation(self, model: BaseAlgorithm, result: dict[str, Any]) -> None:
        """Send ``validate``/``test`` results to the trainer's loggers (as Lightning does after its evaluation
        loops) at the model's env step; they also land in ``callback_metrics``."""
        import torch

        self._configure_lightning_logger()
        metrics = {k: float(v) for k, v in result.items()}
        self.callback_metrics.update({k: torch.tensor(v) for k, v in metrics.items()})
        for logger in self.loggers:
            logger.log_metrics(metrics, step=int(model.num_timesteps))
            logger.save()

    def _attach_callback(self, callback: Any) -> None:
        callbacks = cast(list[Any], self.callbacks)
        if callback not in callbacks:
            callbacks.append(callback)

    def _configure_lightning_logger(self) -> None:
        existing = [logger for logger in self.loggers if logger not in (None, False)]
        if not existing and self._rl_auto_logger and not self.fast_dev_run:
            logger_root = Path(self.default_root_dir) / "lightning_logs"
            latest_run_id = get_latest_run_id(logger_root, self._rl_run_name)
            run_id = latest_run_id + 1 if self.reset_num_timesteps or latest_run_id == 0 else latest_run_id
            self.loggers = [
                TensorBoardLogger(
                    save_dir=str(self.default_root_dir),
                    name="lightning_logs",
                    version=f"{self._rl_run_name}_{run_id}",
                    default_hp_metric=False,
                )
            ]
        callbacks = cast(list[Any], self.callbacks)
        if not any(isinstance(callback, SummaryWriterCallback) for callback in callbacks):
            callbacks.append(SummaryWriterCallback())

    @staticmethod
    def _resolve_datamodule_env(
        datamodule: Any, stage: Literal["fit", "validate", "test", "predict"], monitor_wrapper: bool = True
    ) -> Any:
        from lit_sb3.datamodule import RLEnvDataModule

        if not isinstance(datamodule, RLEnvDataModule):
            raise TypeError(f"RLTrainer expects an RLEnvDataModule, got {type(datamodule).__name__}.")
        return datamodule.get_env(stage, monitor_wrapper=monitor_wrapper)

    def _new_fit_context(self) -> FitContext:
        callbacks = cast(list[Any], self.callbacks)
        return FitContext(
            total_timesteps=self._rl_total_timesteps,
            reset_num_timesteps=self.reset_num_timesteps,
            callback=self._rl_callback,
            progress_bar=self._rl_progress_bar,
            log_interval=self._rl_log_every_n_steps,
            run_name=self._rl_run_name,
            single_cycle=bool(self.fast_dev_run),
            cycle_cadences=tuple(
                sorted(
                    {
                        checkpoint_every_n_train_steps(cb)
                        for cb in callbacks
                        if isinstance(cb, ModelCheckpoint) and checkpoint_every_n_train_steps(cb) >= 1
                    }
                )
            ),
            env_step_cadences=tuple(
                sorted({cb.every_n_env_steps for cb in callbacks if isinstance(cb, EnvStepCheckpoint)})
            ),
        )

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
            ckpt_path: a Lightning checkpoint to resume from (weights, optimizers, env-step count, RNG, env state):
                a local path, an http(s) or fsspec URL; it is always read with torch's safe loader.
            weights_only: ``None`` or ``True`` (checkpoints are always loaded with ``weights_only=True``);
                ``False`` is refused, since it would let the file run code.

        Returns:
            The trained model (same object).
        """
        self._reject_unsupported_kwargs("fit", train_dataloaders=train_dataloaders, val_dataloaders=val_dataloaders)
        if weights_only is False:
            raise ValueError(
                "RLTrainer.fit() loads checkpoints only with torch's safe loader (weights_only=True): "
                "weights_only=False is refused because it lets the checkpoint run code."
            )
        if datamodule is None:
            raise TypeError(
                "RLTrainer.fit() requires a datamodule (RLEnvDataModule) that provides the training environment."
            )
        self._resolve_model(model)
        resolved_env = self._resolve_datamodule_env(datamodule, "fit", monitor_wrapper=model.monitor_wrapper)
        if resolved_env is None:
            raise ValueError(
                "The RLEnvDataModule has no train_env. Provide train_env when constructing the RLEnvDataModule."
            )

        self._rl_env = resolved_env
        if model.verbose >= 1 and str(self.strategy.root_device) != str(model.device):
            print(f"Using {self.strategy.root_device} device")  # the constructor announced the model's own
        self._configure_lightning_logger()
        if not any(isinstance(cb, _RLLoopCallback) for cb in cast(list[Any], self.callbacks)):
            self._attach_callback(_RLLoopCallback())
        context = self._new_fit_context()
        self._rl_context = context
        rl_callback = model.setup_fit(resolved_env, context)
        self._attach_callback(rl_callback)
        rl_callback.on_training_start(locals(), globals())
        try:
            super().fit(
                model,
                train_dataloaders=None,
                val_dataloaders=None,
                datamodule=None,
                ckpt_path=ckpt_path,
                weights_only=True,
            )
        finally:
            callbacks = cast(list[Any], self.callbacks)
            if rl_callback in callbacks:
                callbacks.remove(rl_callback)
        context.update(model.num_timesteps)
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
        inputs = dict(dataloaders=dataloaders, ckpt_path=ckpt_path, weights_only=weights_only)
        return self._evaluate("validate", model, inputs, datamodule, env, n_eval_episodes, deterministic, render,
                              reward_threshold, return_episode_rewards, use_masking)  # fmt: skip

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
        inputs = dict(dataloaders=dataloaders, ckpt_path=ckpt_path, weights_only=weights_only)
        return self._evaluate("test", model, inputs, datamodule, env, n_eval_episodes, deterministic, render,
                              reward_threshold, return_episode_rewards, use_masking)  # fmt: skip

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
        from lit_sb3.core.masking import check_masking_model

        check_masking_model(resolved_model)
        predict_fn = cast(Any, resolved_model.predict)
        return predict_fn(
            observation,
            state=state,
            episode_start=episode_start,
            deterministic=deterministic,
            action_masks=action_masks,
        )
