"""FitContext: the one contract between :class:`~lit_sb3.trainer.RLTrainer` and an algorithm.

``RLTrainer.fit`` builds a :class:`FitContext` and hands it to :meth:`BaseAlgorithm.setup_fit
<lit_sb3.algorithms.base.BaseAlgorithm.setup_fit>`; the algorithm keeps it as ``model.fit_context`` for the
duration of the fit. Nothing else crosses the boundary: the trainer reads the context (and public model
attributes such as ``num_timesteps``), the algorithm reads the context and Lightning's own ``self.trainer``
(loggers, precision, ``global_step``). New algorithms plug into it through the family hooks of
:class:`~lit_sb3.algorithms.base.BaseAlgorithm`:

* ``_setup_model()``: build policy, optimizers and buffers once the spaces are known;
* ``_prepare_fit()``: per-fit work after the counters were set (optional);
* ``training_step(batch, batch_idx)``: run one or more collect/update *cycles*; after each completed cycle call
  ``self._end_cycle()`` (one Lightning ``global_step``) and return when ``self._should_end_training_step(...)``
  says so (budget reached, a step boundary requested, or enough env steps collected);
* ``collect_rollouts(...)`` and ``train(...)``: the algorithm's collection and update (SB3 signatures);
* ``_extra_checkpoint_state()`` / ``_load_extra_checkpoint_state(state)``: anything more a Lightning checkpoint
  needs to resume exactly.

Vocabulary: a *cycle* is one collection followed by its update (off-policy: ``train_freq`` steps or episodes then
``gradient_steps`` updates; on-policy: one rollout of ``n_steps x n_envs`` then ``n_epochs`` of minibatches).
Lightning's ``trainer.global_step`` counts completed cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FitContext"]


@dataclass
class FitContext:
    """What one ``RLTrainer.fit`` hands to the algorithm.

    Args:
        total_timesteps: the env-step budget of this fit (``RLTrainer(max_steps=...)``).
        reset_num_timesteps: count env steps from 0 (``True``) or continue the model's count (``False``, as
            SB3's ``learn(reset_num_timesteps=False)``).
        callback: the trainer's SB3-style callback(s) (``rl_callback``), any form SB3 accepts.
        progress_bar: show a progress bar over env steps.
        log_interval: dump logs every n episodes (off-policy) or iterations (on-policy); ``None``: the
            algorithm's default; ``0``: no automatic dump (SB3's ``learn(log_interval=None)``).
        run_name: name of the run (default TensorBoard logger folder).
        single_cycle: one cycle per ``training_step``, with its update even during the warm-up
            (``fast_dev_run``).
        cycle_cadences: a ``training_step`` ends when ``global_step`` (completed cycles) is a multiple of one of
            these (``ModelCheckpoint(every_n_train_steps=N)`` then saves at every N cycles exactly).
        env_step_cadences: a ``training_step`` ends when the env-step count crosses a multiple of one of these
            (exactly at that env step off-policy, at the end of the rollout that crosses it on-policy).

    Attributes set during the fit:
        target_timesteps: the env-step count at which the fit stops (``total_timesteps``, plus the model's count
            when continuing); set by ``setup_fit``.
        start_timesteps: the model's env-step count when the fit started (after a checkpoint was restored).
        num_timesteps: the latest env-step count reported by the algorithm (:meth:`update`).
        boundary_requested: a callback asked to end the current ``training_step`` as soon as the state is
            consistent (:meth:`request_boundary`); reset by the trainer after each ``training_step``.
        evaluated: an evaluation ran during the current ``training_step`` (its metrics are in
            ``trainer.callback_metrics``: ``ModelCheckpoint(monitor="eval/mean_reward")`` can save).
    """

    total_timesteps: int
    reset_num_timesteps: bool = True
    callback: Any = None
    progress_bar: bool = False
    log_interval: int | None = None
    run_name: str = "run"
    single_cycle: bool = False
    cycle_cadences: tuple[int, ...] = ()
    env_step_cadences: tuple[int, ...] = ()
    target_timesteps: int = field(default=0, init=False)
    start_timesteps: int = field(default=0, init=False)
    num_timesteps: int = field(default=0, init=False)
    boundary_requested: bool = field(default=False, init=False)
    evaluated: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.target_timesteps = int(self.total_timesteps)

    @property
    def budget_reached(self) -> bool:
        """Whether the env-step count reached ``target_timesteps``."""
        return self.num_timesteps >= self.target_timesteps

    @property
    def progress(self) -> float:
        """Progress of this fit's budget in ``[0, 1]``: env steps done towards ``total_timesteps``."""
        if self.total_timesteps <= 0:
            return 0.0
        done = self.num_timesteps - (self.target_timesteps - self.total_timesteps)
        return min(1.0, max(0.0, done / self.total_timesteps))

    def update(self, num_timesteps: int) -> bool:
        """Report the model's env-step count; returns whether the budget is reached."""
        self.num_timesteps = int(num_timesteps)
        return self.num_timesteps >= self.target_timesteps

    def request_boundary(self, evaluated: bool = False) -> None:
        """End the current ``training_step`` as soon as the state is consistent (e.g. after an evaluation).

        Args:
            evaluated: an evaluation just ran (monitored checkpoints may save).
        """
        self.boundary_requested = True
        self.evaluated = self.evaluated or evaluated

    def at_cycle_boundary(self, global_step: int) -> bool:
        """Whether a ``training_step`` must end after the cycle that made ``global_step``."""
        return self.single_cycle or any(global_step % n == 0 for n in self.cycle_cadences)

    def crossed_env_step_boundary(self, before: int, after: int) -> bool:
        """Whether going from ``before`` to ``after`` env steps crossed a multiple of an env-step cadence."""
        return any(before // n != after // n for n in self.env_step_cadences)
