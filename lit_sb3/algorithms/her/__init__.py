"""Hindsight Experience Replay: a replay buffer that relabels goals (use it with any off-policy algorithm)."""

from lit_sb3.algorithms.her.goal_selection_strategy import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy
from lit_sb3.algorithms.her.her_replay_buffer import HerReplayBuffer

__all__ = ["KEY_TO_GOAL_STRATEGY", "GoalSelectionStrategy", "HerReplayBuffer"]
