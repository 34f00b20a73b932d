"""Periodic saving: SB3's CheckpointCallback (model archives) and EnvStepCheckpoint (Lightning checkpoints)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Checkpoint

from lit_sb3.callbacks.base import BaseCallback

__all__ = ["CheckpointCallback", "EnvStepCheckpoint"]


class EnvStepCheckpoint(Checkpoint):
    """Write a Lightning checkpoint every ``every_n_env_steps`` env steps (resumable with ``ckpt_path=``).

    Off-policy algorithms save exactly at each multiple of ``every_n_env_steps`` (mid-cycle if need be: the
    partial cycle is part of the checkpoint); on-policy algorithms at the end of the rollout that reaches it.
    ``ModelCheckpoint(every_n_train_steps=N)`` is the cadence in collect/update cycles.

    Args:
        every_n_env_steps: env steps between two checkpoints.
        dirpath: folder of the files (default: ``<default_root_dir>/checkpoints``).
        filename: file name pattern, formatted with ``env_steps`` (``.ckpt`` is added).
        save_last: also keep a copy as ``last.ckpt``.
    """

    def __init__(
        self,
        every_n_env_steps: int,
        dirpath: str | Path | None = None,
        filename: str = "env_steps={env_steps}",
        save_last: bool = False,
    ) -> None:
        if isinstance(every_n_env_steps, bool) or not isinstance(every_n_env_steps, int) or every_n_env_steps < 1:
            raise ValueError(f"EnvStepCheckpoint needs every_n_env_steps >= 1, got {every_n_env_steps!r}.")
        self.every_n_env_steps = every_n_env_steps
        self.dirpath = None if dirpath is None else Path(dirpath)
        self.filename = filename
        self.save_last = save_last
        self.saved: list[Path] = []
        self._last_env_steps = 0

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = Path(trainer.default_root_dir) / "checkpoints"

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._last_env_steps = int(pl_module.num_timesteps)  # after a checkpoint was restored

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        steps = int(pl_module.num_timesteps)
        if trainer.fast_dev_run or steps // self.every_n_env_steps == self._last_env_steps // self.every_n_env_steps:
            return
        self._last_env_steps = steps
        assert self.dirpath is not None
        path = self.dirpath / f"{self.filename.format(env_steps=steps)}.ckpt"
        trainer.save_checkpoint(path)
        self.saved.append(path)
        if self.save_last:
            trainer.save_checkpoint(self.dirpath / "last.ckpt")

    def state_dict(self) -> dict[str, Any]:
        return {"last_env_steps": self._last_env_steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._last_env_steps = int(state_dict.get("last_env_steps", 0))


class CheckpointCallback(BaseCallback):
    """Save the model every ``save_freq`` calls (one call = one step of all sub-envs).

    Args:
        save_freq: calls between two saves.
        save_path: folder for ``<name_prefix>_<num_timesteps>_steps.zip``.
        name_prefix: file name prefix.
        save_replay_buffer: also save the replay buffer (off-policy).
        save_vecnormalize: also save the VecNormalize statistics.
        verbose: verbosity level.
    """

    def __init__(
        self,
        save_freq: int,
        save_path: str,
        name_prefix: str = "rl_model",
        save_replay_buffer: bool = False,
        save_vecnormalize: bool = False,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if save_freq <= 0:
            raise ValueError(f"CheckpointCallback needs save_freq > 0, got {save_freq}.")
        self.save_freq = save_freq
        self.save_path = save_path
        self.name_prefix = name_prefix
        self.save_replay_buffer = save_replay_buffer
        self.save_vecnormalize = save_vecnormalize

    def _init_callback(self) -> None:
        os.makedirs(self.save_path, exist_ok=True)

    def _checkpoint_path(self, checkpoint_type: str = "", extension: str = "") -> str:
        return os.path.join(
            self.save_path, f"{self.name_prefix}_{checkpoint_type}{self.num_timesteps}_steps.{extension}"
        )

    def _on_step(self) -> bool:
        assert self.model is not None
        if self.n_calls % self.save_freq == 0:
            model_path = self._checkpoint_path(extension="zip")
            self.model.save(model_path)
            if self.verbose >= 2:
                print(f"Saving model checkpoint to {model_path}")
            if self.save_replay_buffer and getattr(self.model, "replay_buffer", None) is not None:
                path = self._checkpoint_path("replay_buffer_", extension="npz")
                self.model.save_replay_buffer(path)  # type: ignore[attr-defined]
            vec_normalize = self.model.get_vec_normalize_env()
            if self.save_vecnormalize and vec_normalize is not None:
                vec_normalize.save(self._checkpoint_path("vecnormalize_", extension="json"))
        return True
