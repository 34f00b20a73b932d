"""Pruners and the evaluation hook that reports to an Optuna trial and stops a pruned run.

Optuna's ``PyTorchLightningPruningCallback`` reports after a validation loop, which the RL training loop never
runs, so it never prunes. Instead :class:`TrialReporter` is given to :func:`lit_sb3.zoo.runner.run_job` as its
evaluation hook: after each periodic evaluation it calls ``trial.report`` and returns ``False`` (stop the fit
cleanly) when ``trial.should_prune()``.

Reporting with several seeds per trial (seeds run one after the other): evaluation ``i`` of seed ``k`` is
reported as the mean of evaluations ``i`` of seeds ``0..k``, at step ``k * n_timesteps + (i + 1) * eval_freq``:
the requested step of the evaluation on the study's grid (``n_timesteps`` is the budget asked per seed, so
every reported step lies within the trial's budget, which is that budget or more when an on-policy trial
rounds it up to whole rollouts). The evaluation itself ran at the first rollout boundary at or after the
requested step (on-policy) and is logged to MLflow at that real step. Every trial of a study uses the same
grid, so the pruner always compares trials at the same (seed, evaluation) point. At most ``n_evaluations``
evaluations per seed are reported.
"""

from __future__ import annotations

import math
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = ["PRUNERS", "make_pruner", "TrialReporter"]

PRUNERS = ("median", "halving", "hyperband", "none")


def make_pruner(name: str, *, n_startup_trials: int, n_warmup_steps: int, eval_freq: int, max_resource: int) -> Any:
    """The Optuna pruner called ``name``.

    Args:
        name: ``median`` (default), ``halving`` (successive halving), ``hyperband`` or ``none``.
        n_startup_trials: trials completed before the median pruner prunes.
        n_warmup_steps: env steps of a trial before the median pruner prunes it.
        eval_freq: env steps between evaluations (the smallest resource of halving/hyperband).
        max_resource: env steps of a whole trial (all seeds) for hyperband.
    """
    import optuna

    key = name.strip().lower()
    if key == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=n_startup_trials, n_warmup_steps=n_warmup_steps)
    if key == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=eval_freq, reduction_factor=4)
    if key == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=eval_freq, max_resource=max_resource, reduction_factor=3)
    if key == "none":
        return optuna.pruners.NopPruner()
    raise BenchError(f"unknown pruner '{name}'{did_you_mean(key, PRUNERS)}; known: {', '.join(PRUNERS)}")


class TrialReporter:
    """Evaluation hook of one seed of a trial: reports the running mean over seeds and asks to prune.

    Args:
        trial: the ``optuna.Trial``.
        seed_index: index ``k`` of the seed within the trial.
        n_timesteps: env-step budget of one seed.
        eval_freq: env steps between evaluations.
        previous: evaluation returns of seeds ``0..k-1`` (one list per seed, in evaluation order).
        n_evaluations: report at most this many evaluations of the seed (None: all).
    """

    def __init__(self, trial: Any, seed_index: int, n_timesteps: int, eval_freq: int,
                 previous: list[list[float]], n_evaluations: int | None = None) -> None:  # fmt: skip
        self.n_evaluations = n_evaluations
        self.reported: list[int] = []
        self.trial = trial
        self.seed_index = seed_index
        self.n_timesteps = n_timesteps
        self.eval_freq = eval_freq
        self.previous = previous
        self.values: list[float] = []
        self.pruned_at: int | None = None
        self.last_reported: float = math.nan

    def report_step(self, index: int) -> int:
        """The step reported for evaluation ``index`` of this seed.

        Args:
            index: 0-based evaluation index.
        """
        return self.seed_index * self.n_timesteps + (index + 1) * self.eval_freq

    def __call__(self, step: int, mean_reward: float) -> bool:
        """Report, and return False when the trial should be pruned.

        Args:
            step: env steps of this seed's run.
            mean_reward: the evaluation's mean return.
        """
        index = len(self.values)
        if self.n_evaluations is not None and index >= self.n_evaluations:
            return True  # past the study's grid (a rounded-up budget can fit one more): not reported
        self.values.append(float(mean_reward))
        column = [v[index] for v in self.previous if len(v) > index] + [float(mean_reward)]
        value = sum(column) / len(column)
        self.last_reported = value
        report_step = self.report_step(index)
        if not math.isfinite(value):
            return True  # the divergence guard fails the run; nothing sensible to report
        self.trial.report(value, report_step)
        self.reported.append(report_step)
        if self.trial.should_prune():
            self.pruned_at = report_step
            return False
        return True
