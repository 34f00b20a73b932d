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

import gymnasium as gym

from tests.envs.faulty import FaultyEnv

__all__ = ["KillOnceEnv", "MARKER_ENV"]

MARKER_ENV = "LIT_SB3_TEST_KILL_ONCE_MARKER"


class KillOnceEnv(FaultyEnv):
    """Kills its process once (see the module docstring).

    Args:
        marker: file whose existence means "already killed once".
        kill_after: steps of this instance before the kill.
    """

    def __init__(self, marker: str = "", kill_after: int = 100) -> None:
        super().__init__(fail_after=kill_after)
        marker = marker or os.environ.get(MARKER_ENV, "")
        self.marker = Path(marker) if marker else None

    def fail(self, reward: float) -> float:
        if self.marker is not None and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return reward


if "KillOnce-v0" not in gym.registry:
    gym.register(id="KillOnce-v0", entry_point=f"{__name__}:KillOnceEnv")
