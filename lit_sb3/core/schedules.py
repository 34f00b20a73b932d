"""Schedules of ``progress_remaining`` (1 at the start of training, 0 at the end).

Schedules are small data classes rather than closures, so that a saved model stores them as JSON
(``to_dict``/``from_dict``) and loading never unpickles code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Union

__all__ = [
    "ConstantSchedule",
    "LinearSchedule",
    "get_schedule_fn",
    "linear_schedule",
    "constant_fn",
    "schedule_from_dict",
    "schedule_to_dict",
]


@dataclass(frozen=True)
class ConstantSchedule:
    """Always ``value``.

    Args:
        value: the constant value.
    """

    value: float

    def __call__(self, progress_remaining: float) -> float:
        return self.value


@dataclass(frozen=True)
class LinearSchedule:
    """Linear interpolation from ``start`` to ``end`` over the first ``end_fraction`` of training.

    Args:
        start: value at the beginning (progress_remaining = 1).
        end: value reached once ``1 - progress_remaining >= end_fraction``.
        end_fraction: fraction of training over which the value moves.
    """

    start: float
    end: float = 0.0
    end_fraction: float = 1.0

    def __call__(self, progress_remaining: float) -> float:
        progress = 1.0 - progress_remaining
        if self.end_fraction <= 0 or progress > self.end_fraction:
            return self.end
        return self.start + progress * (self.end - self.start) / self.end_fraction


def linear_schedule(initial_value: float, final_value: float = 0.0, end_fraction: float = 1.0) -> LinearSchedule:
    """RL Zoo's ``lin_<x>``: from ``initial_value`` to ``final_value`` (0 by default)."""
    return LinearSchedule(float(initial_value), float(final_value), float(end_fraction))


def constant_fn(value: float) -> ConstantSchedule:
    """A schedule that always returns ``value``."""
    return ConstantSchedule(float(value))


ScheduleLike = Union[float, int, Callable[[float], float]]


def get_schedule_fn(value_schedule: ScheduleLike) -> Callable[[float], float]:
    """Turn a float into a constant schedule; pass callables (schedules) through.

    Args:
        value_schedule: a number or a callable of ``progress_remaining``.
    """
    if isinstance(value_schedule, bool):
        raise TypeError(f"A schedule must be a number or a callable, not a bool ({value_schedule!r}).")
    if isinstance(value_schedule, (float, int)):
        return ConstantSchedule(float(value_schedule))
    if isinstance(value_schedule, str):
        raise TypeError(
            f"A schedule given as a string ({value_schedule!r}) must be resolved first, "
            "e.g. by lit_sb3.zoo's config parser (`lin_3e-4`)."
        )
    if not callable(value_schedule):
        raise TypeError(f"A schedule must be a number or a callable, not {type(value_schedule).__name__}.")
    return value_schedule


def schedule_to_dict(schedule: Any) -> dict[str, Any] | None:
    """JSON form of a known schedule, ``None`` for an arbitrary callable (which cannot be stored safely)."""
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        return {"type": "ConstantSchedule", "value": float(schedule)}
    if isinstance(schedule, (ConstantSchedule, LinearSchedule)):
        return {"type": type(schedule).__name__, **asdict(schedule)}
    return None


def schedule_from_dict(data: dict[str, Any]) -> ConstantSchedule | LinearSchedule:
    """Rebuild a schedule stored by :func:`schedule_to_dict`."""
    kinds = {"ConstantSchedule": ConstantSchedule, "LinearSchedule": LinearSchedule}
    kind = data.get("type")
    if kind not in kinds:
        raise ValueError(f"Unknown schedule type {kind!r}; known: {sorted(kinds)}")
    return kinds[kind](**{k: float(v) for k, v in data.items() if k != "type"})
