"""Strategies for choosing the goals that relabel HER's virtual transitions."""

from __future__ import annotations

from enum import Enum

__all__ = ["KEY_TO_GOAL_STRATEGY", "GoalSelectionStrategy"]


class GoalSelectionStrategy(Enum):
    """How new goals are picked when creating virtual transitions."""

    # a goal achieved after the current step (inclusive), in the same episode
    FUTURE = 0
    # the goal achieved at the end of the episode
    FINAL = 1
    # any goal achieved in the episode
    EPISODE = 2


# so that a string can select a strategy
KEY_TO_GOAL_STRATEGY: dict[str, GoalSelectionStrategy] = {
    "future": GoalSelectionStrategy.FUTURE,
    "final": GoalSelectionStrategy.FINAL,
    "episode": GoalSelectionStrategy.EPISODE,
}
