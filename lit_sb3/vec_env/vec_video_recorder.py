"""Record the frames of a VecEnv's ``rgb_array`` renderer to an mp4 file (SB3's ``VecVideoRecorder``, headless).

Frames are streamed to ffmpeg through imageio (the ``video`` extra: ``pip install "lit_sb3[video]"``, imported
only when a recording starts), so a long recording holds one frame in memory, not the whole episode.
:func:`configure_headless_rendering` picks an off-screen OpenGL backend for MuJoCo (EGL, else OSMesa) and a
dummy SDL video driver for pygame (classic control, Box2D); call it before MuJoCo or pygame is imported.
"""

from __future__ import annotations

import ctypes.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lit_sb3.vec_env.base_vec_env import VecEnv, VecEnvObs, VecEnvStepReturn, VecEnvWrapper

__all__ = ["VecVideoRecorder", "configure_headless_rendering"]

DEFAULT_FPS = 30


def configure_headless_rendering() -> dict[str, str]:
    """Set ``MUJOCO_GL`` (``egl`` where libEGL loads, else ``osmesa`` where libOSMesa does; an existing value is
    kept), the matching ``PYOPENGL_PLATFORM``, and ``SDL_VIDEODRIVER=dummy`` when no display is set.

    Returns the variables it set. MuJoCo reads ``MUJOCO_GL`` when it is imported and gymnasium's renderer when its
    first off-screen context is made: call this before either.
    """
    changed: dict[str, str] = {}
    if "MUJOCO_GL" not in os.environ:
        for backend, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
            if ctypes.util.find_library(library) is not None:
                changed["MUJOCO_GL"] = backend
                if "PYOPENGL_PLATFORM" not in os.environ:
                    changed["PYOPENGL_PLATFORM"] = backend
                break
    if not os.environ.get("DISPLAY") and "SDL_VIDEODRIVER" not in os.environ:
        changed["SDL_VIDEODRIVER"] = "dummy"
    os.environ.update(changed)
    return changed


class VecVideoRecorder(VecEnvWrapper):
    """Write ``venv.render()`` (the sub-envs' frames, tiled) after every reset and step to ``video_path``.

    Recording starts at the first ``reset`` for which ``start_trigger()`` is true (None: the first reset) and goes
    on until :meth:`close_video` or :meth:`close`. Sub-envs reset inside ``step`` (episode ends) keep recording,
    so the file holds every episode run after the start.

    Args:
        venv: the env; its sub-envs must have ``render_mode="rgb_array"``.
        video_path: the mp4 file to write (its folder is created).
        fps: frames per second (default: the env's ``render_fps`` metadata, else 30).
        start_trigger: checked at each reset while not recording; True starts the recording.
    """

    def __init__(
        self,
        venv: VecEnv,
        video_path: str | Path,
        fps: int | None = None,
        start_trigger: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(venv)
        if venv.render_mode != "rgb_array":
            raise ValueError(
                f"VecVideoRecorder needs envs made with render_mode='rgb_array', got render_mode={venv.render_mode!r}"
            )
        self.video_path = Path(video_path)
        if fps is None:
            metadata = venv.get_attr("metadata", [0])[0] or {}
            fps = int(metadata.get("render_fps") or DEFAULT_FPS)
        self.fps = int(fps)
        self.start_trigger = start_trigger
        self.recording = False
        self.n_frames = 0
        self.frame_shape: tuple[int, ...] | None = None
        self._writer: Any = None
        self._finished = False

    def reset(self) -> VecEnvObs:
        obs = self.venv.reset()
        if not self.recording and not self._finished and (self.start_trigger is None or self.start_trigger()):
            self._start()
        self._capture()
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        result = self.venv.step_wait()
        self._capture()
        return result

    def _start(self) -> None:
        try:
            import imageio
        except ImportError as exc:
            raise ImportError(
                'VecVideoRecorder needs imageio and imageio-ffmpeg: pip install "lit_sb3[video]"'
            ) from exc
        self.video_path.parent.mkdir(parents=True, exist_ok=True)
        # macro_block_size=2: frames keep their size (H.264 in yuv420p only needs even sides)
        self._writer = imageio.v2.get_writer(
            self.video_path, format="FFMPEG", mode="I", fps=self.fps, codec="libx264", macro_block_size=2,
            ffmpeg_log_level="error",
        )  # fmt: skip
        self.recording = True

    def _capture(self) -> None:
        if not self.recording:
            return
        frame = self.venv.render()
        if frame is None:
            raise RuntimeError("VecVideoRecorder: the env rendered no frame (is render_mode='rgb_array'?)")
        frame = np.asarray(frame)
        if self.frame_shape is None:
            self.frame_shape = tuple(frame.shape)
        self._writer.append_data(frame)
        self.n_frames += 1

    def close_video(self) -> None:
        """Finish the file (later resets do not start a new one)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self.recording:
            self._finished = True
        self.recording = False

    def close(self) -> None:
        self.close_video()
        self.venv.close()
