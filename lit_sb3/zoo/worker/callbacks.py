"""The SB3-style callbacks of a job: periodic evaluation, evaluation hooks, progress and reward checks.

:func:`job_callbacks` builds the three of one seed, wired to each other: the evaluation callback calls the hook
callback after each evaluation, which records the curve, forces a progress snapshot and calls the hooks; the
progress callback reads the last evaluation from the evaluation callback. They see the seed through a
:class:`SeedView` (the same for a single model, a batch of one, and for seed ``i`` of a seed batch), and the
model's trainer calls them through one :class:`SeedsCallback`.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lit_sb3.callbacks import BaseCallback
from lit_sb3.callbacks.eval import EvalCallback
from lit_sb3.zoo.worker.protocol import DivergenceError, EvaluationHook, JobProgress, failure_reason

__all__ = [
    "EvalClock",
    "HookCallback",
    "JobEvalCallback",
    "ProgressCallback",
    "SeedView",
    "SeedsCallback",
    "job_callbacks",
]

EvalRow = tuple[int, float, float, float]
"""``(env steps, mean reward, std reward, mean episode length)`` of one evaluation."""


class EvalClock:
    """Seconds the seeds of one process spent evaluating (they share the training's wall time).

    Args:
        batch: seeds trained together in the process.
    """

    def __init__(self, batch: int = 1) -> None:
        self.seconds = 0.0
        self.batch = batch


class ProgressCallback(BaseCallback):
    """Progress snapshots about once a second; NaN/inf rewards raise :class:`DivergenceError`.

    Args:
        job_id: the job.
        total: its env-step budget.
        progress: receives the snapshots (None: none are made).
        warmup_steps: env steps before the first update (the time they take is measured; 0: none).
        clock: the process's evaluation seconds (default: this seed's own).
    """

    def __init__(self, job_id: str, total: int, progress: Callable[[JobProgress], None] | None,
                 warmup_steps: int = 0, clock: EvalClock | None = None) -> None:  # fmt: skip
        super().__init__()
        self.job_id = job_id
        self.total = total
        self.progress = progress
        self.eval_cb: JobEvalCallback | None = None
        self.last_sent = 0.0
        self.t0 = time.monotonic()
        self.warmup_steps = min(int(warmup_steps), int(total))
        self.warmup_seconds = math.nan
        self.clock = clock or EvalClock()

    def _on_training_start(self) -> None:
        self.t0 = time.monotonic()

    def train_seconds(self) -> float:
        """Seconds of training so far (evaluations excluded)."""
        return time.monotonic() - self.t0 - self.clock.seconds

    def report(self, force: bool = False) -> None:
        """Send a snapshot (at most one a second unless ``force``)."""
        now = time.monotonic()
        if self.progress is None or (not force and now - self.last_sent < 1.0):
            return
        self.last_sent = now
        model = self.model
        assert model is not None
        last_return = float(model.last_return)  # type: ignore[attr-defined]
        evaluated = self.eval_cb is not None and self.eval_cb.last_eval_step
        last_eval = float(self.eval_cb.last_mean_reward) if evaluated else math.nan
        steps = int(model.num_timesteps)
        fps = steps / max(now - self.t0, 1e-9)
        ev = self.eval_cb
        self.progress(JobProgress(
            self.job_id, steps, self.total, fps, last_return, last_eval, elapsed=now - self.t0,
            eval_seconds=self.clock.seconds, eval_steps=ev.eval_steps if ev else 0, n_evals=ev.n_evals if ev else 0,
            warmup_steps=self.warmup_steps, warmup_seconds=self.warmup_seconds, batch=self.clock.batch,
        ))  # fmt: skip

    def _on_step(self) -> bool:
        if self.warmup_steps and math.isnan(self.warmup_seconds) and self.num_timesteps >= self.warmup_steps:
            self.warmup_seconds = self.train_seconds()
        rewards = self.locals.get("rewards")
        if rewards is not None and not np.all(np.isfinite(rewards)):
            bad = float(np.asarray(rewards)[~np.isfinite(rewards)][0])
            raise DivergenceError("rollout/reward", int(self.num_timesteps), bad)
        if self.n_calls % 32 == 0:
            self.report()
        return True


class HookCallback(BaseCallback):
    """After each evaluation: record the curve, report progress, call the hooks (one returning ``False`` stops
    the run).

    Args:
        hooks: the evaluation hooks.
        progress_cb: forced to report after each evaluation.
    """

    def __init__(self, hooks: Sequence[EvaluationHook], progress_cb: ProgressCallback) -> None:
        super().__init__()
        self.hooks = list(hooks)
        self.progress_cb = progress_cb
        self.rows: list[EvalRow] = []
        self.stopped = False

    def record(self) -> None:
        """Append the parent's last evaluation to :attr:`rows`."""
        parent = self.parent
        mean = float(parent.last_mean_reward)
        std = float(np.std(parent.last_rewards)) if getattr(parent, "last_rewards", None) else math.nan
        length = float(np.mean(parent.last_lengths)) if getattr(parent, "last_lengths", None) else math.nan
        self.rows.append((int(self.num_timesteps), mean, std, length))
        self.progress_cb.report(force=True)

    def _on_step(self) -> bool:
        self.record()
        step, mean = self.rows[-1][0], self.rows[-1][1]
        keep = True
        for hook in self.hooks:
            if hook(step, mean) is False:
                keep = False
        if not keep:
            self.stopped = True
        return keep


class JobEvalCallback(EvalCallback):
    """Evaluates at the first env step at or past each multiple of ``eval_freq`` total env steps,
    deterministically, syncing VecNormalize statistics first; logs ``eval/*`` at ``step = env steps`` (where
    the evaluation really happened) and keeps the last episode returns and lengths.

    Off-policy: at the env step itself (exact when ``n_envs`` divides ``eval_freq``). On-policy (a model with a
    rollout buffer): at rollout boundaries, after the rollout's update (at the start of the next rollout, or at
    the end of training for the last one), so every evaluation sees a policy trained on all the steps it is
    logged at, and none comes before the first update. A hook that stops the run at a boundary stops it at the
    next env step (``n_envs`` steps later).

    Args:
        eval_env: the evaluation env.
        hook_cb: called after each evaluation.
        n_eval_episodes: episodes per evaluation.
        eval_freq: env steps between evaluations.
        clock: the process's evaluation seconds (default: this seed's own).
    """

    def __init__(self, eval_env: object, hook_cb: HookCallback, n_eval_episodes: int, eval_freq: int,
                 clock: EvalClock | None = None) -> None:  # fmt: skip
        super().__init__(
            eval_env,
            callback_after_eval=hook_cb,
            n_eval_episodes=n_eval_episodes,
            eval_freq=eval_freq,
            verbose=0,
            warn=False,
        )
        self.next_eval = eval_freq
        self.last_eval_step = 0
        self.last_rewards: list[float] = []
        self.last_lengths: list[int] = []
        self._stop_at_next_step = False
        # (env step, returns, lengths, this seed's share of the seconds) of an evaluation run in lockstep with
        # other seeds' (SeedsCallback)
        self.precomputed: tuple[int, list[float], list[int], float] | None = None
        self.clock = clock or EvalClock()
        self.eval_seconds = 0.0  # this seed's evaluations: their seconds, env steps and number
        self.eval_steps = 0
        self.n_evals = 0

    @property
    def at_boundaries(self) -> bool:
        """True for on-policy models (evaluations at rollout boundaries)."""
        return hasattr(self.model, "rollout_buffer")

    def due_at(self, num_timesteps: int, boundary: bool) -> bool:
        """Whether this callback evaluates at ``num_timesteps``: at an env step (``boundary`` False, off-policy)
        or at a rollout boundary (on-policy)."""
        return boundary == self.at_boundaries and not self._stop_at_next_step and num_timesteps >= self.next_eval

    def sync_normalization(self) -> None:
        """Copy the train env's VecNormalize statistics into the eval env (before an evaluation)."""
        from lit_sb3.vec_env import sync_envs_normalization

        assert self.model is not None
        if self.model.get_vec_normalize_env() is not None:
            sync_envs_normalization(self.training_env, self.eval_env)

    def _due(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return False
        while self.next_eval <= self.num_timesteps:
            self.next_eval += self.eval_freq
        return True

    def _on_step(self) -> bool:
        if self._stop_at_next_step:
            return False
        if self.at_boundaries or not self._due():
            return True
        self.evaluate()
        return self._on_event()

    def _boundary(self) -> None:
        assert self.model is not None
        self.num_timesteps = self.model.num_timesteps
        if self.at_boundaries and not self._stop_at_next_step and self._due():
            self.evaluate()
            if not self._on_event():
                self._stop_at_next_step = True

    def _on_rollout_start(self) -> None:
        self._boundary()

    def _on_training_end(self) -> None:
        self._boundary()

    def evaluate(self) -> tuple[float, float]:
        """Run the evaluation now; returns ``(mean, std)`` of the episode returns."""
        from lit_sb3.core.evaluation import evaluate_policy

        assert self.model is not None
        t0 = time.monotonic()
        shared = 0.0  # seconds spent before this call for this evaluation (its share of a lockstep evaluation)
        precomputed, self.precomputed = self.precomputed, None
        if precomputed is not None and precomputed[0] == self.num_timesteps:
            # evaluated in lockstep with the batch's other seeds: its share of that time was spent there
            _, rewards, lengths, shared = precomputed
        else:
            self.sync_normalization()
            rewards, lengths = evaluate_policy(
                self.model,
                self.eval_env,
                n_eval_episodes=self.n_eval_episodes,
                deterministic=True,
                return_episode_rewards=True,
                warn=False,
                use_masking=bool(getattr(self.model, "supports_action_masks", False)),
            )
        self.last_rewards, self.last_lengths = list(rewards), list(lengths)  # type: ignore[arg-type]
        seconds = time.monotonic() - t0 + shared
        self.eval_seconds += seconds
        self.clock.seconds += seconds
        self.eval_steps += int(np.sum(lengths))
        self.n_evals += 1
        mean, std = float(np.mean(rewards)), float(np.std(rewards))
        self.last_mean_reward = mean
        self.last_eval_step = self.num_timesteps
        metrics = {"eval/mean_reward": mean, "eval/std_reward": std, "eval/mean_ep_length": float(np.mean(lengths))}
        self.model.log_metrics(metrics, step=self.num_timesteps)
        return mean, std


def job_callbacks(
    job_id: str,
    total: int,
    eval_env: object,
    n_eval_episodes: int,
    eval_freq: int,
    hooks: Sequence[EvaluationHook],
    progress: Callable[[JobProgress], None] | None,
    warmup_steps: int = 0,
    clock: EvalClock | None = None,
) -> tuple[JobEvalCallback, HookCallback, ProgressCallback]:
    """The job's (evaluation, hook, progress) callbacks, wired to each other.

    Args:
        job_id: the job.
        total: its env-step budget.
        eval_env: the evaluation env.
        n_eval_episodes: episodes per evaluation.
        eval_freq: env steps between evaluations.
        hooks: evaluation hooks.
        progress: receives progress snapshots.
        warmup_steps: env steps before the first update (its time is measured).
        clock: the evaluation seconds of the process (shared by a seed batch's seeds).
    """
    clock = clock or EvalClock()
    progress_cb = ProgressCallback(job_id, total, progress, warmup_steps, clock)
    hook_cb = HookCallback(hooks, progress_cb)
    eval_cb = JobEvalCallback(eval_env, hook_cb, n_eval_episodes, eval_freq, clock)
    progress_cb.eval_cb = eval_cb
    return eval_cb, hook_cb, progress_cb


# ---------------------------------------------------------------------------------------------------------
# one seed of the model, as its callbacks see it; the one callback that drives every seed's callbacks
# ---------------------------------------------------------------------------------------------------------
class SeedView:
    """Seed ``index`` of a model, seen by its job callbacks as a single model: env steps, its train env and
    VecNormalize, its last ``rollout/ep_rew_mean``, metric logging (to the seed's logger) and ``predict`` (of
    ``model.member(index)``, extracted once per env step, i.e. once per evaluation; for a single model that is the
    model itself).

    Args:
        model: the algorithm (``n_seeds`` seeds; a single model has one).
        index: the seed's index in the model.
        train_env: the seed's train env.
        logger: the seed's :class:`~lit_sb3.zoo.worker.guards.SeedLogger`.
    """

    def __init__(self, model: Any, index: int, train_env: Any, logger: Any) -> None:
        from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm

        self.model = model
        self.index = index
        self.train_env = train_env
        self.logger = logger
        cls = type(model.member(index))
        if issubclass(cls, OnPolicyAlgorithm):
            self.rollout_buffer = None  # the job callbacks evaluate on-policy models at rollout boundaries
        self.supports_action_masks = bool(getattr(cls, "supports_action_masks", False))
        self._member: Any = None
        self._member_step = -1

    @property
    def num_timesteps(self) -> int:
        return int(self.model.num_timesteps)

    @property
    def last_return(self) -> float:
        """The seed's last logged ``rollout/ep_rew_mean`` (NaN before the first)."""
        return float(self.logger.last.get("rollout/ep_rew_mean", math.nan))

    def get_env(self) -> Any:
        return self.train_env

    def get_vec_normalize_env(self) -> Any:
        from lit_sb3.vec_env import unwrap_vec_normalize

        return unwrap_vec_normalize(self.train_env)

    def member(self) -> Any:
        """``model.member(index)`` at the current env step."""
        if self._member is None or self._member_step != self.num_timesteps:
            self._member, self._member_step = self.model.member(self.index), self.num_timesteps
        return self._member

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        return self.member().predict(*args, **kwargs)

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self.logger.log_metrics(metrics, self.num_timesteps if step is None else step)


class SeedsCallback(BaseCallback):
    """The model's one SB3-style callback: runs each running seed's job callbacks (progress and its NaN-reward
    check, evaluation, hooks) on that seed's :class:`SeedView`, with that seed's part of the step's locals; a
    seed whose callbacks raise (:class:`DivergenceError`, or any other ``Exception``: its evaluation env, a hook,
    its logger), or that the model failed (``model.failed``), is failed alone through ``fail`` with its own
    reason, and the other seeds go on; a hook's ``False`` stops the model (every seed).

    Args:
        seeds: ``(index, view, callbacks)`` of each seed; ``callbacks`` in the order a single job's trainer calls
            them (progress, then evaluation, which calls the hook callback after each evaluation).
        ended: ``ended(index)``: whether that seed's run has ended.
        fail: ``fail(index, reason, traceback_text)`` fails a seed (masks it in the model, ends its run).
    """

    def __init__(self, seeds: Sequence[tuple[int, SeedView, Sequence[BaseCallback]]], ended: Callable[[int], bool],
                 fail: Callable[[int, str, str], None]) -> None:  # fmt: skip
        super().__init__()
        self.seeds = list(seeds)
        self.ended = ended
        self.fail = fail

    def _init_callback(self) -> None:
        for _, view, callbacks in self.seeds:
            for cb in callbacks:
                cb.init_callback(view)  # type: ignore[arg-type]

    def running(self) -> list[tuple[int, SeedView, Sequence[BaseCallback]]]:
        """The seeds still training (those the model failed since the last call are failed first)."""
        assert self.model is not None
        failed = self.model.failed
        for index, _, _ in self.seeds:
            if not self.ended(index) and index in failed:
                self.fail(index, failed[index], "")
        return [seed for seed in self.seeds if not self.ended(seed[0])]

    def _each(self, call: Callable[[BaseCallback], Any], with_locals: bool = False) -> bool:
        keep = True
        n_seeds = len(self.seeds)
        for index, _, callbacks in self.running():
            local = _seed_locals(self.locals, index, n_seeds) if with_locals else None
            try:
                for cb in callbacks:
                    if local is not None:
                        cb.locals = local
                    keep = call(cb) is not False and keep
            except Exception as exc:  # noqa: BLE001 - a seed's own callbacks (its evaluation, checkpoint, hooks,
                # logger): whatever they raise is that seed's failure; the other seeds go on
                reason = failure_reason(exc)
                if not isinstance(exc, DivergenceError):
                    reason = f"callback raised at step {int(self.model.num_timesteps)}: {reason}"[:500]
                self.fail(index, reason, traceback.format_exc())
        self.running()
        return keep

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        pass  # each seed gets its part in _on_step

    def _evaluate_together(self, boundary: bool) -> None:
        """Run the evaluations due now for two or more running seeds of a seed batch in lockstep, their K eval
        envs stepped together and their actions from one call of the stacked policy per step
        (:func:`~lit_sb3.core.evaluation.evaluate_seeds`), and hand each seed's evaluation callback its results;
        each seed's returns are those its own evaluation would give (up to float reassociation in the stacked
        policy). Models whose policies the stacked call cannot serve (recurrent state, action masks) evaluate seed
        by seed as before.

        Args:
            boundary: called at a rollout boundary (on-policy evaluations) rather than at an env step.
        """
        model = self.model
        if model is None or getattr(model, "n_seeds", 1) < 2 or not _stacked_predict_serves(model):
            return
        steps = int(model.num_timesteps)
        due = []
        for index, _, callbacks in self.running():
            eval_cb = next((cb for cb in callbacks if isinstance(cb, JobEvalCallback)), None)
            if eval_cb is not None and eval_cb.due_at(steps, boundary):
                due.append((index, eval_cb))
        if len(due) < 2 or len({cb.n_eval_episodes for _, cb in due}) != 1:
            return
        from lit_sb3.core.evaluation import evaluate_seeds

        for _, eval_cb in due:
            eval_cb.sync_normalization()
        indices = [index for index, _ in due]
        n_seeds = int(model.n_seeds)

        def predict(observations: Any) -> np.ndarray:  # the due seeds' observations -> their actions
            def full(x: np.ndarray) -> np.ndarray:  # the other seeds' rows are zeros (their actions unused)
                out = np.zeros((n_seeds, *x.shape[1:]), dtype=x.dtype)
                out[indices] = x
                return out

            stacked = (
                {k: full(v) for k, v in observations.items()} if isinstance(observations, dict) else full(observations)
            )
            return model.predict_stacked(stacked, deterministic=True)[indices]

        t0 = time.monotonic()
        try:
            results = evaluate_seeds(predict, [cb.eval_env for _, cb in due], due[0][1].n_eval_episodes)
        except Exception:  # noqa: BLE001 - a seed's eval env raised: evaluate seed by seed (each resets its env),
            return  # where what fails is that seed's own evaluation
        share = (time.monotonic() - t0) / len(due)  # each seed's part of the shared evaluation's seconds
        for (_, eval_cb), (rewards, lengths) in zip(due, results):
            eval_cb.precomputed = (steps, rewards, lengths, share)

    def _on_training_start(self) -> None:
        self._each(lambda cb: cb.on_training_start({}, self.globals))

    def _on_rollout_start(self) -> None:
        self._evaluate_together(boundary=True)
        self._each(lambda cb: cb.on_rollout_start())

    def _on_step(self) -> bool:
        self._evaluate_together(boundary=False)
        keep = self._each(lambda cb: cb.on_step(), with_locals=True)
        return keep and bool(self.running())

    def _on_rollout_end(self) -> None:
        self._each(lambda cb: cb.on_rollout_end())

    def _on_training_end(self) -> None:
        self._evaluate_together(boundary=True)
        self._each(lambda cb: cb.on_training_end())


def _stacked_predict_serves(model: Any) -> bool:
    """Whether ``model.predict_stacked`` gives each seed what its member's deterministic ``predict`` gives: an
    on- or off-policy seed batch whose members predict through their policy (not a recurrent or masking
    ``predict``; DQN's is its policy's when deterministic)."""
    from lit_sb3.algorithms.base import BaseAlgorithm
    from lit_sb3.algorithms.dqn import DQN
    from lit_sb3.algorithms.off_policy import OffPolicyAlgorithm
    from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm
    from lit_sb3.algorithms.ppo_recurrent import RecurrentPPO

    if not isinstance(model, (OnPolicyAlgorithm, OffPolicyAlgorithm)) or isinstance(model, RecurrentPPO):
        return False
    if getattr(model, "supports_action_masks", False):
        return False
    return type(model).predict in (BaseAlgorithm.predict, DQN.predict)


def _seed_locals(locals_: dict[str, Any], index: int, n_seeds: int) -> dict[str, Any]:
    """Seed ``index``'s part of the model's step locals: all of them for a single model; of a seed batch's,
    the values with one entry per seed."""
    if n_seeds == 1:
        return dict(locals_)
    out: dict[str, Any] = {}
    for key, value in locals_.items():
        if isinstance(value, (list, tuple)) and len(value) == n_seeds:
            out[key] = value[index]
    return out
