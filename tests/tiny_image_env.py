"""Tiny image and Dict envs for the seed-batching tests (registered on import as ``SeedBatchTinyImage-v0`` and
``SeedBatchTinyDict-v0``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class TinyImageEnv(gym.Env):
    """Channel-last uint8 36x36x3 images (NatureCNN's smallest) that depend on the action, Box actions."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)
        self.action_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self._t = 0

    def _obs(self, shift: float = 0.0) -> np.ndarray:
        noise = self.np_random.integers(0, 64, (36, 36, 3))
        return np.clip(noise + int(96 * (shift + 1)), 0, 255).astype(np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        return self._obs(float(action[0])), -float(np.square(action).sum()), False, self._t >= 15, {}


TINY_IMAGE_ENV = "SeedBatchTinyImage-v0"
if TINY_IMAGE_ENV not in gym.registry:
    gym.register(TINY_IMAGE_ENV, entry_point=TinyImageEnv)


class TinyDictEnv(TinyImageEnv):
    """Dict observations: a vector and a channel-last image (MultiInputPolicy: CombinedExtractor with a NatureCNN)."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode)
        self.observation_space = gym.spaces.Dict(
            {"vec": gym.spaces.Box(-1, 1, (3,), np.float32), "img": self.observation_space}
        )

    def _obs(self, shift: float = 0.0) -> dict[str, np.ndarray]:  # type: ignore[override]
        vec = self.np_random.uniform(-1, 1, 3).astype(np.float32) * 0.5 + np.float32(shift) * 0.5
        return {"vec": vec, "img": super()._obs(shift)}


TINY_DICT_ENV = "SeedBatchTinyDict-v0"
if TINY_DICT_ENV not in gym.registry:
    gym.register(TINY_DICT_ENV, entry_point=TinyDictEnv)
