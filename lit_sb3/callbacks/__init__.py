"""SB3-style callbacks (also Lightning callbacks)."""

from lit_sb3.callbacks.base import (
    BaseCallback,
    CallbackList,
    ConvertCallback,
    EventCallback,
    EveryNTimesteps,
    LogEveryNTimesteps,
    StopTrainingOnMaxEpisodes,
)
from lit_sb3.callbacks.checkpoint import CheckpointCallback, EnvStepCheckpoint
from lit_sb3.callbacks.progress import ProgressBarCallback
from lit_sb3.callbacks.summary_writer import SummaryWriterCallback


def __getattr__(name: str):
    # EvalCallback & co. import the VecEnv stack; load them on first use.
    if name in ("EvalCallback", "StopTrainingOnNoModelImprovement", "StopTrainingOnRewardThreshold"):
        from lit_sb3.callbacks import eval as _eval

        return getattr(_eval, name)
    raise AttributeError(name)


__all__ = [
    "BaseCallback",
    "CallbackList",
    "CheckpointCallback",
    "ConvertCallback",
    "EnvStepCheckpoint",
    "EvalCallback",
    "EventCallback",
    "EveryNTimesteps",
    "LogEveryNTimesteps",
    "ProgressBarCallback",
    "StopTrainingOnMaxEpisodes",
    "StopTrainingOnNoModelImprovement",
    "StopTrainingOnRewardThreshold",
    "SummaryWriterCallback",
]
