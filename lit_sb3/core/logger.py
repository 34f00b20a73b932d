"""SB3's ``Logger`` API over a model's buffered logging: what SB3 code reaches for as ``self.logger`` in a callback.

In SB3 a callback's ``self.logger`` is the algorithm's logger: ``record`` stores a value, the algorithm's next
automatic dump (every ``log_interval``) or an explicit ``dump(step)`` writes everything stored to the output
formats. Here the values go into the model's log buffer (:meth:`BaseAlgorithm.record
<lit_sb3.algorithms.base.BaseAlgorithm.record>`), which is sent to every logger of the run (``trainer.loggers``:
TensorBoard, CSV, MLflow, ...) with ``step = env steps``. The logger keeps no state of its own: every callback
bound to the same model sees the same values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th

from lit_sb3.utils.math import safe_mean

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

__all__ = ["Logger", "console_table", "rollout_metrics", "send_dump"]


class Logger:
    """SB3's ``Logger`` (``record``, ``record_mean``, ``dump``, ``name_to_value``, ...) for one model.

    Scalars (numbers, numpy scalars, 0-d tensors) reach the run's loggers; other values (strings, SB3's
    ``Figure``/``Image``/``Video``) stay readable in :attr:`name_to_value` but are not sent, since Lightning's
    ``log_metrics`` takes scalars only.

    Args:
        model: the algorithm whose log buffer this logger writes to.
    """

    def __init__(self, model: BaseAlgorithm) -> None:
        self.model = model

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        """Store ``value`` under ``key`` until the next dump (a later value replaces it).

        Args:
            key: the metric name (``"train/my_value"``).
            value: the value.
            exclude: output formats that must not receive it (``"tensorboard"``, ``"csv"``, ``"mlflow"``, ...:
                matched against the logger class names).
        """
        self.model.record(key, value, exclude)

    def record_mean(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        """Store the running mean of the values recorded under ``key`` since the last dump (``None`` is skipped).

        Args:
            key: the metric name.
            value: one more value.
            exclude: output formats that must not receive it.
        """
        self.model.record_mean(key, value, exclude)

    def dump(self, step: int = 0) -> None:
        """Send every stored value to the run's loggers at ``step`` (SB3 callbacks pass ``self.num_timesteps``).

        Args:
            step: the x-axis value (env steps).
        """
        self.model.dump_records(int(step))

    @property
    def name_to_value(self) -> defaultdict[str, Any]:
        """The values stored since the last dump (a copy; tensors as Python numbers; a missing key reads 0.0, as
        in SB3)."""
        values: defaultdict[str, Any] = defaultdict(float)
        for key, (value, _, _) in self.model._log_buffer.items():
            values[key] = value.item() if isinstance(value, th.Tensor) and value.numel() == 1 else value
        return values

    @property
    def name_to_count(self) -> defaultdict[str, int]:
        """How many values :meth:`record_mean` averaged under each key since the last dump (a copy)."""
        return defaultdict(int, self.model._log_counts)

    @property
    def name_to_excluded(self) -> defaultdict[str, tuple[str, ...]]:
        """The output formats excluded for each stored key (a copy)."""
        return defaultdict(tuple, {key: formats for key, (_, _, formats) in self.model._log_buffer.items()})

    def get_dir(self) -> str | None:
        """The log folder of the run's first logger that has one, else None."""
        try:
            loggers = self.model.trainer.loggers
        except RuntimeError:  # not attached to a trainer
            return None
        for logger in loggers:
            log_dir = getattr(logger, "log_dir", None)
            if log_dir is not None:
                return str(log_dir)
        return None


def send_dump(
    entries: dict[str, tuple[Any, tuple[str, ...]]], step: int, trainer: Any, console: bool
) -> dict[str, float]:
    """One dump of a model's log buffer (SB3's ``logger.dump(step)``): tensors read with one device sync, SB3's
    console table printed (``console``), each Lightning logger of ``trainer`` sent the values whose excluded formats
    do not match its class name, ``trainer.callback_metrics`` updated (so that ``ModelCheckpoint(monitor=...)`` sees
    them). Values that are not scalars (strings, figures) are dropped: Lightning's ``log_metrics`` takes scalars.

    Args:
        entries: key -> (value, output formats excluded).
        step: the env step of every value.
        trainer: the model's trainer, or None (not attached: nothing is sent).
        console: print the table.

    Returns:
        The scalar values of the dump, as floats.
    """
    tensors = [k for k, (v, _) in entries.items() if isinstance(v, th.Tensor)]
    if tensors:  # one device sync for all tensors
        values = th.stack([entries[k][0].detach().float().reshape(()) for k in tensors]).cpu().tolist()
        for key, value in zip(tensors, values):
            entries[key] = (value, entries[key][1])
    numbers = {k: (v, f) for k, (v, f) in entries.items() if isinstance(v, (int, float, np.number, bool))}
    clean = {k: float(v) for k, (v, _) in numbers.items()}
    if console:
        shown = {
            k: int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else float(v)
            for k, (v, _) in numbers.items()
        }
        table = console_table(shown, {k: f for k, (_, f) in numbers.items()})
        if table is not None:
            print(table, flush=True)
    if trainer is None:
        return clean
    trainer.callback_metrics.update({k: th.tensor(v) for k, v in clean.items()})
    for logger in trainer.loggers:
        name = type(logger).__name__.lower()
        sent = {k: clean[k] for k, (_, formats) in numbers.items() if not any(f.lower() in name for f in formats)}
        if sent:
            logger.log_metrics(sent, step=step)
    return clean


def rollout_metrics(ep_infos: Sequence[dict[str, Any]], successes: Sequence[bool] = ()) -> dict[str, float]:
    """SB3's ``rollout/`` values of a dump: the mean episode return and length over the episode statistics window
    (when it holds episodes), and the success rate (when episodes reported ``is_success``).

    Args:
        ep_infos: the window of Monitor episode infos (``{"r": return, "l": length, ...}``).
        successes: the window of episode successes.
    """
    metrics: dict[str, float] = {}
    if len(ep_infos) > 0 and len(ep_infos[0]) > 0:
        metrics["rollout/ep_rew_mean"] = safe_mean([ep_info["r"] for ep_info in ep_infos])
        metrics["rollout/ep_len_mean"] = safe_mean([ep_info["l"] for ep_info in ep_infos])
    if len(successes) > 0:
        metrics["rollout/success_rate"] = safe_mean(successes)
    return metrics


def _truncate(text: str, max_length: int) -> str:
    return text if len(text) <= max_length else text[: max_length - 3] + "..."


def console_table(
    values: Mapping[str, Any], excluded: Mapping[str, tuple[str, ...]] | None = None, max_length: int = 36
) -> str | None:
    """SB3's console table of one dump (``HumanOutputFormat.write``: keys sorted, grouped under their
    ``tag/``, floats as ``%-8.3g``, other values as ``str``, keys and values cut at ``max_length``), or None when
    nothing is left to show.

    Args:
        values: key -> value (ints stay ints: SB3 prints ``800``, not ``800``'s float form).
        excluded: key -> output formats excluded (a value excluding ``stdout`` or ``log`` is not shown).
        max_length: longest key or value shown (SB3's default 36: at most 79 characters wide).
    """
    excluded = excluded or {}
    rows: dict[tuple[str, str], str] = {}
    tag = ""
    for key in sorted(values):
        formats = excluded.get(key) or ()
        if "stdout" in formats or "log" in formats:
            continue
        value = values[key]
        text = f"{value:<8.3g}" if isinstance(value, float) else str(value)
        if key.find("/") > 0:
            tag = key[: key.find("/") + 1]
            rows[(tag, _truncate(tag, max_length))] = ""
        shown = f"{'':3}{key[len(tag) :]}" if tag and tag in key else key
        cut = _truncate(shown, max_length)
        if (tag, cut) in rows:
            raise ValueError(
                f"Key '{shown}' truncated to '{cut}' that already exists. Consider increasing `max_length`."
            )
        rows[(tag, cut)] = _truncate(text, max_length)
    if not rows:
        return None
    key_width = max(len(k) for _, k in rows)
    value_width = max(len(v) for v in rows.values())
    dashes = "-" * (key_width + value_width + 7)
    lines = [dashes]
    lines += [f"| {k}{' ' * (key_width - len(k))} | {v}{' ' * (value_width - len(v))} |" for (_, k), v in rows.items()]
    lines.append(dashes)
    return "\n".join(lines)
