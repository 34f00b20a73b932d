"""Periodic model saving (SB3's CheckpointCallback)."""

from __future__ import annotations

import os

from lit_sb3.callbacks.base import BaseCallback

__all__ = ["CheckpointCallback"]


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
