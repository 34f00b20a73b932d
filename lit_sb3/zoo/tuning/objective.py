"""The objective of a ``bench tune`` trial: sample, resolve, train K seeds, report, prune, score.

One trial = one MLflow run (tag ``lit_sb3.run_type=trial``, child of the study's run) with one child run per seed
(``lit_sb3.run_type=trial_seed``). Seeds ``0..K-1`` (the same seeds for every trial: trials are compared on common
random numbers) run in seed batches of up to ``--seed-batch B`` seeds (default 1: one after the other), each batch
trained by :func:`lit_sb3.zoo.runner.run_jobs` (the suite's one job path), each seed with its own seed run; the
trial reports once per evaluation of a batch: the mean over the batch's seeds (and the seeds before it), at the
grid step of the batch's first seed (so the pruner's warm-up counts as for seed-by-seed trials); a pruned trial
stops the batch.

Objective value (maximised):

- ``final`` (default): the mean over the trial's seeds of the final evaluation return;
- ``last_mean``: the mean over seeds of the mean of the last :data:`LAST_N` evaluations (the final one
  included), which is less noisy.

A pruned trial raises ``optuna.TrialPruned`` (state PRUNED) after tagging its runs
``lit_sb3.trial_state=pruned`` (MLflow status KILLED). A trial whose training diverges or raises is tagged
``lit_sb3.trial_state=failed`` with ``lit_sb3.failure_reason`` (MLflow status FAILED), gets the user attribute
``failure_reason`` and raises :class:`TrialFailed`, which the study catches (state FAIL, not counted).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.tracking import FAILURE_TAG, TrackingTarget, job_params, readable
from lit_sb3.zoo.tracking.mlflow_compat import note_tags
from lit_sb3.zoo.tracking.names import job_run_name

__all__ = ["TuneSettings", "Objective", "TrialFailed", "LAST_N", "OBJECTIVES", "override_text"]

LAST_N = 3
OBJECTIVES = ("final", "last_mean")
STATE_TAG = "lit_sb3.trial_state"


class TrialFailed(RuntimeError):
    """A trial's training diverged or raised (Optuna records it as FAIL; the study goes on)."""


@dataclass(frozen=True)
class TuneSettings:
    """Everything a worker process needs to run trials of a study (picklable).

    Args:
        algo: algorithm name.
        env_id: gymnasium env id.
        study_name: Optuna study name.
        storage: storage spec (journal file path or RDB URL).
        n_trials: finished (COMPLETE + PRUNED) trials the study should hold.
        n_timesteps: env-step budget per seed.
        eval_freq: env steps between evaluations.
        eval_episodes: episodes per evaluation.
        seeds_per_trial: seeds per trial (run sequentially).
        objective: ``final`` or ``last_mean``.
        space: the search space (:func:`~lit_sb3.zoo.tuning.search_spaces.space_to_jsonable`).
        sampler: sampler name.
        pruner: pruner name.
        n_startup_trials: sampler/pruner startup trials.
        n_warmup_steps: median pruner warm-up in env steps.
        seed: sampler seed (None: random); worker ``w`` uses ``seed + w``.
        timeout: seconds per worker (None: no limit).
        tracking: MLflow target.
        parent_run_id: the study invocation's MLflow run.
        device: torch device of the jobs.
        n_evaluations: evaluations reported per seed (0: every periodic evaluation).
        seed_batch: seeds of a trial trained together as one seed batch (1: one after the other).
    """

    algo: str
    env_id: str
    study_name: str
    storage: str
    n_trials: int
    n_timesteps: int
    eval_freq: int
    eval_episodes: int
    seeds_per_trial: int
    objective: str
    space: dict[str, Any]
    sampler: str
    pruner: str
    n_startup_trials: int
    n_warmup_steps: int
    seed: int | None
    timeout: float | None
    tracking: TrackingTarget
    parent_run_id: str | None
    device: str = "cpu"
    n_evaluations: int = 0
    seed_batch: int = 1


def override_text(value: Any) -> str:
    """A zoo-format value as ``--hyperparams`` text for :func:`lit_sb3.zoo.config.resolve`.

    Args:
        value: number, bool, None or string (strings such as ``"dict(...)"`` are kept as they are).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def objective_value(kind: str, evaluations: list[list[float]], scores: list[float]) -> float:
    """The trial's value from its seeds' evaluation curves and final scores.

    Args:
        kind: ``final`` or ``last_mean``.
        evaluations: per seed, the evaluation returns in order (the final evaluation last).
        scores: per seed, the final evaluation return.
    """
    if kind == "final":
        values = scores
    else:
        values = [sum(curve[-LAST_N:]) / len(curve[-LAST_N:]) for curve in evaluations if curve]
    return sum(values) / len(values) if values else math.nan


class Objective:
    """``objective(trial) -> float`` for ``study.optimize``.

    Args:
        settings: the study settings.
    """

    def __init__(self, settings: TuneSettings) -> None:
        self.settings = settings
        self._store: Any = None
        self._base: Any = None
        self._env_tags: dict[str, str] | None = None

    # -- helpers -------------------------------------------------------------------------------------------
    @property
    def store(self) -> Any:
        """The :class:`~lit_sb3.zoo.tracking.Tracking` of the study's experiment (made once per process)."""
        if self._store is None:
            from lit_sb3.zoo.tracking import connect

            self._store = connect(self.settings.tracking)
        return self._store

    def base_config(self) -> Any:
        """The algo/env zoo config before tuning."""
        if self._base is None:
            from lit_sb3.zoo.config import resolve

            self._base = resolve(self.settings.algo, self.settings.env_id)
        return self._base

    def _create_trial_run(self, trial: Any, sampled: Mapping[str, Any], first_seed: Any) -> str:
        s = self.settings
        tags = {
            "lit_sb3.algo": s.algo,
            "lit_sb3.env": s.env_id,
            "lit_sb3.study_name": s.study_name,
            "lit_sb3.trial_number": str(trial.number),
            STATE_TAG: "running",
        }
        params = job_params(first_seed)  # the resolved config in one namespace, as a job run's
        params.pop("seed", None)  # the trial's seed runs have their own
        for name, value in sampled.items():
            params.setdefault(name, readable(value))
        params.update(seeds_per_trial=str(s.seeds_per_trial), objective=s.objective, eval_freq=str(s.eval_freq),
                      eval_episodes=str(s.eval_episodes))  # fmt: skip
        return self.store.create_run("trial", f"trial-{trial.number}", tags, s.parent_run_id, params)

    def _seed_chunks(self, jobs: list[Any]) -> list[list[Any]]:
        """The trial's seeds in the order they run: seed batches of at most ``seed_batch``."""
        size = self.settings.seed_batch
        return [jobs[i : i + size] for i in range(0, len(jobs), size)]

    def _end(self, run_id: str, state: str, status: str, metrics: Mapping[str, float],
             extra_tags: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.store.set_tags(run_id, {STATE_TAG: state, **(extra_tags or {})})
        self.store.log_metrics(run_id, metrics)
        self.store.end_run(run_id, status)

    # -- the objective -------------------------------------------------------------------------------------
    def __call__(self, trial: Any) -> float:
        """Run one trial.

        Args:
            trial: ``optuna.Trial``.
        """
        import optuna

        from lit_sb3.zoo.jobs import plan_grid
        from lit_sb3.zoo.runner import run_jobs
        from lit_sb3.zoo.tracking import run_environment_tags
        from lit_sb3.zoo.tuning.pruning import TrialReporter
        from lit_sb3.zoo.tuning.search_spaces import sample_params, space_from_jsonable, to_hyperparameters

        s = self.settings
        space = space_from_jsonable(s.space)
        sampled = sample_params(trial, space)
        base = self.base_config()
        try:
            hp, notes = to_hyperparameters(s.algo, sampled, space.fixed, base.algo_kwargs, base.n_envs)
            trial.set_user_attr("hyperparameters", hp)
            if notes:
                trial.set_user_attr("fixups", notes)
            jobs, _ = plan_grid(
                [s.algo], [s.env_id], range(s.seeds_per_trial), n_timesteps=s.n_timesteps, eval_freq=s.eval_freq,
                eval_episodes=s.eval_episodes, overrides={k: override_text(v) for k, v in hp.items()},
                device=s.device, overrides_label=space.source,
            )  # fmt: skip
            _check_grid(s, jobs[0])
        except BenchError as exc:
            trial.set_user_attr("failure_reason", f"invalid hyperparameters: {exc}")
            raise TrialFailed(f"invalid hyperparameters: {exc}") from exc
        trial.set_user_attr("budget_per_seed", jobs[0].n_timesteps)

        run_id = self._create_trial_run(trial, sampled, jobs[0])
        trial.set_user_attr("mlflow_run_id", run_id)
        tracking = self.store
        if self._env_tags is None:
            self._env_tags = run_environment_tags()
        curves: list[list[float]] = []
        scores: list[float] = []
        env_steps = 0
        try:
            k = 0
            for chunk in self._seed_chunks(jobs):
                seed_runs = [
                    tracking.create_job_run(spec, run_id, self._env_tags, run_type="trial_seed", tags={
                        "lit_sb3.study_name": s.study_name, "lit_sb3.trial_number": str(trial.number),
                        "lit_sb3.seed_index": str(k + j),
                    })
                    for j, spec in enumerate(chunk)
                ]  # fmt: skip
                siblings: list[list[float]] = [[] for _ in chunk[1:]]  # the batch's seeds before its last one
                # a batch reports the mean over its seeds (and the seeds before it) at its first seed's grid step
                reporter = TrialReporter(
                    trial, k, s.n_timesteps, s.eval_freq, curves + siblings, s.n_evaluations or None
                )
                hooks = [[_recorder(values)] for values in siblings] + [[reporter]]
                results = run_jobs(chunk, s.tracking, run_ids=seed_runs, seed_hooks=hooks, stopped_status="KILLED")
                env_steps += sum(int(r.env_steps) for r in results)
                for spec, seed_run, result in zip(chunk, seed_runs, results):
                    if result.status != "FINISHED" and reporter.pruned_at is None:
                        reason = result.failure_reason or f"seed {spec.seed} ended {result.status}"
                        tracking.set_tags(seed_run, {STATE_TAG: "failed"})
                        raise TrialFailed(f"seed {spec.seed}: {reason}")
                if reporter.pruned_at is not None:
                    for spec, seed_run in zip(chunk, seed_runs):  # KILLED is drawn like FAILED: the name says it
                        name = f"{job_run_name(spec.algo, spec.env_id, spec.seed)} (pruned)"
                        tracking.set_tags(seed_run, {STATE_TAG: "pruned"})
                        tracking.rename_run(seed_run, name)
                    trial.set_user_attr("env_steps", env_steps)
                    trial.set_user_attr("pruned_at_step", reporter.pruned_at)
                    # MLflow has no "pruned" status (KILLED is the nearest): the name and the note say it
                    tracking.rename_run(run_id, f"trial-{trial.number} (pruned)")
                    note = note_tags(f"Pruned by Optuna's pruner at env step {reporter.pruned_at}: stopped early "
                                     "because it was behind, not a failure.")  # fmt: skip
                    self._end(run_id, "pruned", "KILLED",
                              {"trial/env_steps": env_steps, "trial/last_reported": reporter.last_reported},
                              {"lit_sb3.pruned_at_step": str(reporter.pruned_at), **note})  # fmt: skip
                    raise optuna.TrialPruned(f"pruned at step {reporter.pruned_at} (seed {chunk[-1].seed})")
                for seed_run, result in zip(seed_runs, results):
                    tracking.set_tags(seed_run, {STATE_TAG: "complete"})
                    curves.append([float(v) for _, v in result.evaluations])
                    scores.append(float(result.score))
                k += len(chunk)
            value = objective_value(s.objective, curves, scores)
            if not math.isfinite(value):
                raise TrialFailed(f"objective is {value}")
        except TrialFailed as exc:
            trial.set_user_attr("failure_reason", str(exc))
            trial.set_user_attr("env_steps", env_steps)
            self._end(run_id, "failed", "FAILED", {"trial/env_steps": env_steps}, {FAILURE_TAG: str(exc)[:5000]})
            raise
        except optuna.TrialPruned:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. the tracking store failed: the trial fails, the study goes on
            reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            trial.set_user_attr("failure_reason", reason)
            try:
                self._end(run_id, "failed", "FAILED", {"trial/env_steps": env_steps}, {FAILURE_TAG: reason[:5000]})
            except Exception:  # noqa: BLE001
                pass
            raise TrialFailed(reason) from exc
        except BaseException:
            try:
                self._end(run_id, "interrupted", "KILLED", {"trial/env_steps": env_steps})
            except Exception:  # noqa: BLE001
                pass
            raise
        trial.set_user_attr("env_steps", env_steps)
        trial.set_user_attr("seed_scores", scores)
        metrics = {"trial/value": value, "trial/env_steps": env_steps}
        metrics.update({f"trial/seed_{k}_score": v for k, v in enumerate(scores)})
        self._end(run_id, "complete", "FINISHED", metrics)
        return value


def _recorder(values: list[float]) -> Any:
    """An evaluation hook that keeps a seed's evaluation returns in ``values`` (the seeds of a batch before the
    one that reports)."""

    def record(step: int, mean_reward: float) -> None:
        values.append(float(mean_reward))

    return record


def _check_grid(s: TuneSettings, spec: Any) -> None:
    """Fail a trial at once when its sampled rollout or warm-up does not fit the evaluation grid.

    Each requested evaluation (every ``eval_freq`` env steps) must see an updated policy and, on-policy, fall
    on its own rollout boundary: one rollout (``n_steps x n_envs``) <= ``eval_freq``; off-policy, the first
    update (:func:`lit_sb3.zoo.budget.first_update_step`) <= ``eval_freq``.
    """
    from lit_sb3.zoo.budget import first_update_step, rollout_size

    cfg = spec.resolved_config()
    rollout = rollout_size(s.algo, cfg.algo_kwargs, cfg.n_envs)
    if rollout is not None and rollout > s.eval_freq:
        raise BenchError(
            f"a rollout of n_steps x n_envs = {rollout:,} env steps is longer than the {s.eval_freq:,} env steps "
            "between two evaluations"
        )
    first = first_update_step(s.algo, cfg.algo_kwargs, cfg.n_envs)
    if rollout is None and first > s.eval_freq:
        raise BenchError(
            f"the first update comes after {first:,} env steps (learning_starts + 2 x train_freq x n_envs), "
            f"after the first evaluation at {s.eval_freq:,}"
        )
