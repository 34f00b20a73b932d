"""An env that SIGKILLs its own process the first time it runs, for the distributed (Ray retry) tests.

``"tests.envs.kill_once:KillOnce-v0"`` with ``env_kwargs=dict(marker='/tmp/x/killed')``: a 4-d observation,
2-action task with 20-step episodes; after ``kill_after`` steps, if ``marker`` does not exist yet, the env creates
it and kills its process with SIGKILL (a lost worker); once the marker exists it behaves normally, so a retry
succeeds. Without ``marker`` the environment variable ``LIT_SB3_TEST_KILL_ONCE_MARKER`` names it (for ``bench tune``,
which takes no env kwargs); with neither the env never kills.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["KillOnceEnv", "MARKER_ENV"]

MARKER_ENV = "LIT_SB3_TEST_KILL_ONCE_MARKER"


class KillOnceEnv(gym.Env):
    """Kills its process once (see the module docstring).

    Args:
        marker: file whose existence means "already killed once".
        kill_after: steps of this instance before the kill.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, marker: str = "", kill_after: int = 100) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        marker = marker or os.environ.get(MARKER_ENV, "")
        self.marker = Path(marker) if marker else None
        self.kill_after = kill_after
        self.total_steps = 0
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, size=4).astype(np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.total_steps += 1
        if self.marker is not None and self.total_steps > self.kill_after and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        obs = self.np_random.uniform(-1, 1, size=4).astype(np.float32)
        return obs, float(action == 1), self.t >= 20, False, {}


if "KillOnce-v0" not in gym.registry:
    gym.register(id="KillOnce-v0", entry_point=f"{__name__}:KillOnceEnv")
