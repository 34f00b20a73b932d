"""Read the job runs of a ``bench run`` experiment from MLflow into score matrices and aligned curves.

Only child runs tagged ``lit_sb3.run_type="job"`` are read (tune trials and reports are ignored), through the
tracking gateway (:mod:`lit_sb3.zoo.tracking`). FINISHED runs are data; FAILED/KILLED (and still RUNNING) runs
are left out and counted per algo × env, except the superseded attempts of a job (same ``lit_sb3.job_id``)
that a later run FINISHED (after a resumed grid): those are not failures and are not counted.

Curve alignment: each algorithm is drawn at its own evaluation steps, never at another's (A2C evaluating every
1,000 steps and PPO every 1,024 are two grids, not one union of both). Within one algorithm and env, when every run
evaluated at the same steps (same ``eval_freq`` and budget), those steps are its grid; otherwise its grid is the
sorted union of its runs' steps and each run is linearly interpolated onto it inside its own first..last evaluation
(NaN outside: never extrapolated), and the curve says it is interpolated. For the aggregate curve of an algorithm
over envs with different grids, the axis is training progress (fraction of each env's last step): measured points
when every env's fractions coincide (the default protocol's budget/20 steps do), else ``n`` points interpolated
(``n`` the smallest number of evaluations of any env) and marked so. Steps where some run has no value are dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.tracking import fail_fast

__all__ = ["AlgoCurves", "RunRecord", "Results", "load_results", "check_tracking_uri"]


@dataclass(frozen=True)
class AlgoCurves:
    """One algorithm's evaluation curves on its own axis.

    Args:
        x: the axis (env steps, or fraction of the training budget).
        label: the axis' name.
        mats: per env, ``[runs, evals]`` values at ``x``.
        interpolated: some values are interpolated between a run's evaluations (not all measured at ``x``).
    """

    x: NDArray[np.float64]
    label: str
    mats: list[NDArray[np.float64]]
    interpolated: bool = False

    @property
    def n_runs(self) -> int:
        """Runs over all envs."""
        return sum(m.shape[0] for m in self.mats)


JOB = "job"
SCORE_KEY = "final/mean_reward"
EVAL_KEY = "eval/mean_reward"


@dataclass
class RunRecord:
    """One FINISHED job run.

    Args:
        run_id: MLflow run id.
        algo: algorithm tag.
        env: env id tag.
        seed: seed tag.
        score: ``final/mean_reward`` (or the last ``eval/mean_reward``).
        steps: eval steps (env steps).
        curve: ``eval/mean_reward`` at ``steps``.
        wall_seconds: ``time/wall_seconds`` (NaN if absent).
        fps: ``time/fps`` (last value; NaN if absent).
        config_hash: ``lit_sb3.config_hash`` tag.
        tags: all tags.
        params: all params (the resolved hyperparameters, budget and evaluation protocol).
        total_timesteps: ``time/total_timesteps``: env steps the run really trained (NaN if absent).
        cpu_seconds: ``time/cpu_seconds``: CPU time of the process that trained it (NaN if absent).
    """

    run_id: str
    algo: str
    env: str
    seed: int
    score: float
    steps: NDArray[np.float64]
    curve: NDArray[np.float64]
    wall_seconds: float
    fps: float
    config_hash: str
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    total_timesteps: float = float("nan")
    cpu_seconds: float = float("nan")


@dataclass
class Results:
    """Everything the report needs from one experiment.

    Args:
        tracking_uri: where it was read.
        experiment: experiment name.
        experiment_id: experiment id.
        runs: FINISHED job runs.
        not_finished: (algo, env) -> count of FAILED/KILLED/RUNNING job runs.
        failure_reasons: (algo, env) -> ``lit_sb3.failure_reason`` tags of failed runs.
        sequential_plan: the plan of the latest ``bench run --until-verdict`` of the experiment (None: none).
        earlier_reports: runs per algo x env of each earlier ``bench report`` of the experiment (its
            ``lit_sb3.report_runs`` tag), oldest first.
    """

    tracking_uri: str
    experiment: str
    experiment_id: str
    runs: list[RunRecord]
    not_finished: dict[tuple[str, str], int] = field(default_factory=dict)
    failure_reasons: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    sequential_plan: dict[str, Any] | None = None
    earlier_reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def algos(self) -> list[str]:
        """Algorithms with at least one FINISHED run, sorted."""
        return sorted({r.algo for r in self.runs})

    @property
    def envs(self) -> list[str]:
        """Envs with at least one FINISHED run, sorted."""
        return sorted({r.env for r in self.runs})

    def select(self, algo: str, env: str) -> list[RunRecord]:
        """FINISHED runs of one algo × env, by seed.

        Args:
            algo: algorithm.
            env: env id.
        """
        return sorted((r for r in self.runs if r.algo == algo and r.env == env), key=lambda r: r.seed)

    def common_envs(self) -> list[str]:
        """Envs where every algorithm has at least one FINISHED run (the tasks of aggregate metrics)."""
        return [e for e in self.envs if all(self.select(a, e) for a in self.algos)]

    def scores(
        self, algo: str, envs: Sequence[str], transform: Callable[[str, NDArray[np.float64]], Any] | None = None
    ) -> list[NDArray[np.float64]]:
        """Final scores per env (a ragged list: one array of runs per env).

        Args:
            algo: algorithm.
            envs: envs, in order.
            transform: ``(env, scores) -> scores`` (e.g. normalisation).
        """
        out = []
        for env in envs:
            s = np.array([r.score for r in self.select(algo, env)], dtype=np.float64)
            out.append(np.asarray(transform(env, s) if transform else s, dtype=np.float64))
        return out

    def env_curves(self, env: str) -> dict[str, AlgoCurves]:
        """Eval curves of one env, each algorithm on its own grid: ``{algo: AlgoCurves(steps, [[runs, evals]])}``
        (NaN = no value).

        Args:
            env: env id.
        """
        out: dict[str, AlgoCurves] = {}
        for algo in self.algos:
            runs = [r for r in self.select(algo, env) if r.steps.size]
            if not runs:
                continue
            grids = {tuple(r.steps.tolist()) for r in runs}
            grid = runs[0].steps if len(grids) == 1 else np.unique(np.concatenate([r.steps for r in runs]))
            mat = np.stack([_on_grid(r, grid) for r in runs])
            out[algo] = AlgoCurves(grid.astype(np.float64), "env steps", [mat], len(grids) > 1)
        return out

    def aggregate_curves(
        self, envs: Sequence[str], transform: Callable[[str, NDArray[np.float64]], Any] | None = None
    ) -> dict[str, AlgoCurves]:
        """Each algorithm's curves over ``envs`` on its own axis: ``{algo: AlgoCurves(x, label, per-env
        [runs, evals], interpolated)}``; an algorithm missing an env is left out.

        Args:
            envs: the tasks.
            transform: ``(env, values) -> values`` applied to curve values (e.g. normalisation).
        """
        per_env = {env: self.env_curves(env) for env in envs}
        out: dict[str, AlgoCurves] = {}
        for algo in self.algos:
            if not envs or any(algo not in per_env[e] for e in envs):
                continue
            curves = [per_env[e][algo] for e in envs]
            interpolated = any(c.interpolated for c in curves)
            grids = {tuple(c.x.tolist()) for c in curves}
            fractions = [c.x / c.x[-1] for c in curves]
            if len(grids) == 1:
                x, label, mats = curves[0].x, "env steps", [c.mats[0] for c in curves]
            elif all(f.size == fractions[0].size and np.allclose(f, fractions[0], rtol=1e-9) for f in fractions):
                x, label, mats = fractions[0], "fraction of training budget", [c.mats[0] for c in curves]
            else:
                n = min(c.x.size for c in curves)
                x, label = np.linspace(1.0 / n, 1.0, n), "fraction of training budget"
                mats = [np.stack([_interp(c.x, row, x * c.x[-1]) for row in c.mats[0]]) for c in curves]
                interpolated = True
            if transform is not None:
                mats = [np.asarray(transform(e, m)) for e, m in zip(envs, mats, strict=True)]
            keep = np.ones(x.size, dtype=bool)
            for m in mats:
                keep &= ~np.isnan(m).any(axis=0)
            if keep.any():
                out[algo] = AlgoCurves(x[keep], label, [m[:, keep] for m in mats], interpolated)
        return out


def _interp(steps: NDArray[np.float64], values: NDArray[np.float64], at: NDArray[np.float64]) -> NDArray[np.float64]:
    ok = ~np.isnan(values)
    if not ok.any():
        return np.full(at.shape, np.nan)
    s, v = steps[ok], values[ok]
    out = np.interp(at, s, v)
    out[(at < s[0]) | (at > s[-1])] = np.nan
    return out


def _on_grid(run: RunRecord, grid: NDArray[np.float64]) -> NDArray[np.float64]:
    if run.steps.size == grid.size and np.array_equal(run.steps, grid):
        return run.curve.astype(np.float64)
    return _interp(run.steps, run.curve, grid)


def check_tracking_uri(uri: str) -> Any:
    """A :class:`~lit_sb3.zoo.tracking.Tracking` reader for ``uri`` after checking it can be read, else a
    one-line :class:`BenchError`.

    Args:
        uri: tracking URI.
    """
    from lit_sb3.zoo.tracking import open_reader

    return open_reader(uri)


def _check_filter(kind: str, wanted: Sequence[str] | None, present: set[str]) -> None:
    for name in wanted or ():
        if name not in present:
            raise BenchError(
                f"{kind} {name!r} has no runs in this experiment{did_you_mean(name, present)};"
                f" present: {', '.join(sorted(present)) or 'none'}"
            )


def _curve(store: Any, run_id: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    history = store.metric_history(run_id, EVAL_KEY)
    last: dict[int, tuple[int, float]] = {}
    for m in history:  # keep the latest value logged at each step
        if m.step not in last or m.timestamp >= last[m.step][0]:
            last[m.step] = (m.timestamp, m.value)
    steps = np.array(sorted(last), dtype=np.float64)
    return steps, np.array([last[int(s)][1] for s in steps], dtype=np.float64)


REPORT_RUNS_TAG = "lit_sb3.report_runs"
"""Tag of a report run: ``{"algo env": runs}`` it rested on (a later report sees whether the experiment grew)."""


def _design(store: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The latest sequential plan of the experiment's grid runs, and the looks of its earlier reports."""
    import json

    from lit_sb3.zoo.waves import PLAN_TAG

    plan, latest = None, -1
    for run in store.search_runs(f"tags.`lit_sb3.run_type` = 'grid' and tags.`{PLAN_TAG}` != ''"):
        text = run.data.tags.get(PLAN_TAG, "")
        if text and run.info.start_time > latest:
            try:
                plan, latest = json.loads(text), run.info.start_time
            except ValueError:
                continue
    reports = []
    for run in sorted(store.search_runs("tags.`lit_sb3.run_type` = 'report'"), key=lambda r: r.info.start_time):
        text = run.data.tags.get(REPORT_RUNS_TAG, "")
        try:
            counts = json.loads(text) if text else None
        except ValueError:
            counts = None
        if isinstance(counts, dict):
            reports.append({"run_id": run.info.run_id, "name": run.info.run_name, "runs": counts})
    return plan, reports


def load_results(
    tracking_uri: str, experiment: str, algos: Sequence[str] | None = None, envs: Sequence[str] | None = None
) -> Results:
    """Read the job runs of ``experiment``.

    Args:
        tracking_uri: MLflow tracking URI.
        experiment: experiment name.
        algos: keep only these algorithms (each must be present).
        envs: keep only these envs (each must be present).
    """
    store = check_tracking_uri(tracking_uri)
    with fail_fast():
        experiment_id = store.use_experiment(experiment)
        raw = store.search_runs(f"tags.`lit_sb3.run_type` = '{JOB}'")
        _check_filter("algorithm", algos, {r.data.tags.get("lit_sb3.algo", "") for r in raw})
        _check_filter("env", envs, {r.data.tags.get("lit_sb3.env", "") for r in raw})
        results = Results(tracking_uri, experiment, experiment_id, [])
        not_finished: Counter[tuple[str, str]] = Counter()
        done = {r.data.tags.get("lit_sb3.job_id") for r in raw if r.info.status == "FINISHED"} - {None, ""}
        for r in raw:
            tags = dict(r.data.tags)
            algo, env = tags.get("lit_sb3.algo", "?"), tags.get("lit_sb3.env", "?")
            if (algos and algo not in algos) or (envs and env not in envs):
                continue
            if r.info.status != "FINISHED" and tags.get("lit_sb3.job_id") in done:
                continue  # a superseded attempt (killed, failed) of a job that a later run FINISHED
            if r.info.status != "FINISHED":
                not_finished[(algo, env)] += 1
                if "lit_sb3.failure_reason" in tags:
                    results.failure_reasons.setdefault((algo, env), []).append(tags["lit_sb3.failure_reason"])
                continue
            steps, curve = _curve(store, r.info.run_id)
            metrics = r.data.metrics
            score = metrics.get(SCORE_KEY, curve[-1] if curve.size else None)
            if score is None:
                not_finished[(algo, env)] += 1
                results.failure_reasons.setdefault((algo, env), []).append("FINISHED without any score")
                continue
            results.runs.append(
                RunRecord(
                    run_id=r.info.run_id,
                    algo=algo,
                    env=env,
                    seed=int(tags.get("lit_sb3.seed", "-1")),
                    score=float(score),
                    steps=steps,
                    curve=curve,
                    wall_seconds=float(metrics.get("time/wall_seconds", np.nan)),
                    fps=float(metrics.get("time/fps", np.nan)),
                    config_hash=tags.get("lit_sb3.config_hash", ""),
                    tags=tags,
                    params=dict(r.data.params),
                    total_timesteps=float(metrics.get("time/total_timesteps", np.nan)),
                    cpu_seconds=float(metrics.get("time/cpu_seconds", np.nan)),
                )
            )
        results.sequential_plan, results.earlier_reports = _design(store)
    results.not_finished = dict(not_finished)
    if not results.runs:
        what = f" matching algos={list(algos)}" if algos else ""
        what += f" envs={list(envs)}" if envs else ""
        raise BenchError(
            f"experiment {experiment!r} has no FINISHED job runs{what} ({sum(not_finished.values())} not finished)"
        )
    return results
