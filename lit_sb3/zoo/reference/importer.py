"""Record an RL Zoo run folder as a job run of the store: the metrics, params and tags of ``bench run``'s own
runs, plus ``impl=sb3``.

The folder's ``config.yml`` is resolved by the suite's own config code (its entry alone, no built-in file), so the
run's params, config hash and job id are those ``bench run --impl sb3`` gives the same job: importing a folder the
suite itself trained, or re-importing any folder, finds the FINISHED run of that job id and adds nothing.

One score for both implementations: a run's score is its final evaluation, the last row of ``evaluations.npz``
(deterministic episodes on one evaluation env, every ``eval_freq`` env steps), logged as ``final/mean_reward``
exactly as a lit_sb3 run logs its own.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.reference.zoo_logs import ZooFolderError, ZooRun

__all__ = ["ROLLOUT_POINTS", "import_zoo_run", "zoo_job_spec"]

ROLLOUT_POINTS = 200
"""At most this many points of ``rollout/ep_rew_mean`` per imported run (the monitor files hold every episode)."""

SB3_EP_INFO_BUFFER = 100
"""SB3's ``rollout/ep_rew_mean`` is the mean over the last 100 training episodes (``ep_info_buffer``)."""


def zoo_job_spec(run: ZooRun) -> Any:
    """The :class:`~lit_sb3.zoo.jobs.JobSpec` of an RL Zoo run: ``impl="sb3"``, its own config, budget, seed and
    evaluation protocol (the zoo seeds its evaluation env with the run's seed: ``eval_seed_offset=0``).

    Args:
        run: the checked folder.

    Raises:
        ZooFolderError: its config or arguments are not what the suite can describe.
    """
    from lit_sb3.zoo.jobs import JobSpec, _plan_pair

    args = run.args
    if int(args.get("n_eval_envs", 1) or 1) != 1:
        raise ZooFolderError(f"{run.path}: evaluated on {args.get('n_eval_envs')} envs; the suite's protocol uses 1")
    n_timesteps = int(args.get("n_timesteps") or -1)
    with tempfile.TemporaryDirectory(prefix="lit_sb3-import-") as tmp:
        conf = Path(tmp) / "config.yml"
        import yaml

        conf.write_text(yaml.safe_dump({run.env_id: run.config}, sort_keys=False))
        try:
            outcome = _plan_pair(run.algo, run.env_id, n_timesteps if n_timesteps > 0 else None, [str(conf)], None,
                                 None, builtin=False)  # fmt: skip
        except BenchError as exc:
            raise ZooFolderError(f"{run.path}: {' '.join(str(exc).split())}") from None
    if "skip" in outcome:
        raise ZooFolderError(f"{run.path}: {outcome['skip']}")
    threads = int(args.get("num_threads", -1) or -1)
    return JobSpec(
        algo=run.algo, env_id=run.env_id, seed=run.seed, n_timesteps=int(outcome["budget"]), config=outcome["config"],
        eval_freq=int(args["eval_freq"]), eval_episodes=int(args["eval_episodes"]),
        device=str(args.get("device") or "cpu"), torch_threads=threads if threads > 0 else 1,
        config_hash=outcome["config_hash"], requested_timesteps=int(outcome["requested"]), impl="sb3",
        eval_seed_offset=0, zoo_entry=dict(run.config),
    )  # fmt: skip


def _default_params(spec: Any) -> dict[str, str]:
    """The params a lit_sb3 run of the job adds to the job's own (:class:`~lit_sb3.zoo.tracking.logger.JobMLFlowLogger`):
    its model's constructor arguments as the model holds them once built for the job's env, in the logger's text.
    SB3 and lit_sb3 take the same arguments with the same defaults and resolve them alike when the model is set up
    (``target_entropy="auto"`` to -dim(A), ``train_freq=1`` to ``(1, 'step')``, ``replay_buffer_class=None`` to the
    buffer the observation space needs, ``use_sde`` into ``policy_kwargs``), so building the lit_sb3 model (on the
    evaluation env: one env, nothing trained) gives both sides the same params, by one code path.

    Args:
        spec: the job.
    """
    from lit_sb3.zoo.tracking.names import hyperparameter_params, job_params
    from lit_sb3.zoo.worker.envs import build_env, model_arguments

    env = build_env(spec, evaluation=True)
    try:
        with warnings.catch_warnings():  # e.g. a batch size that does not divide n_steps * 1 env: not used here
            warnings.simplefilter("ignore")
            cls, policy, kwargs = model_arguments(spec, env.action_space)
            model = cls(policy, env=env, **kwargs)
        text = hyperparameter_params(model.hyperparameters_for_logging())
    finally:
        env.close()
    logged = job_params(spec)
    return {k: v for k, v in text.items() if k not in logged}


def _rollout_curve(run: ZooRun, budget: int) -> list[tuple[int, float]]:
    """``(env step, rollout/ep_rew_mean)`` from the monitor files, as SB3 computes it (mean of the last 100
    training episodes), at most :data:`ROLLOUT_POINTS` points. An episode of sub-env ``i`` ending after its
    ``c``-th step ended at env step ``c * n_envs`` (the sub-envs step in lockstep)."""
    per_env: dict[int, int] = {}
    ends: list[tuple[int, float]] = []
    for index, ret, length, _ in sorted(run.episodes, key=lambda e: e[3]):
        per_env[index] = per_env.get(index, 0) + length
        ends.append((per_env[index] * run.n_envs, ret))
    ends.sort(key=lambda e: e[0])
    every = max(1, budget // ROLLOUT_POINTS)
    points: list[tuple[int, float]] = []
    window: list[float] = []
    for step, ret in ends:
        window = [*window[-(SB3_EP_INFO_BUFFER - 1) :], ret]
        if not points or step // every > points[-1][0] // every:
            points.append((step, float(np.mean(window))))
        else:
            points[-1] = (step, float(np.mean(window)))
    return points


def import_zoo_run(run: ZooRun, tracking: Any, *, run_id: str | None = None, parent_run_id: str | None = None,
                   spec: Any = None, wall_seconds: float | None = None, cpu_seconds: float | None = None,
                   extra_tags: dict[str, str] | None = None) -> str:  # fmt: skip
    """Record ``run`` in the store and end the run FINISHED; returns its run id.

    Args:
        run: the checked folder.
        tracking: the experiment's :class:`~lit_sb3.zoo.tracking.store.Tracking`.
        run_id: an existing run to fill (a reference job's, created by the launcher); None: a new child of
            ``parent_run_id``.
        parent_run_id: the ``bench import`` run.
        spec: the job (default :func:`zoo_job_spec` of the folder).
        wall_seconds: measured wall time of the process that trained it (default: the monitor files' span,
            tagged ``lit_sb3.time_source=monitor``).
        cpu_seconds: measured CPU time of that process (unknown for a folder made elsewhere).
        extra_tags: more tags.
    """
    from lit_sb3.zoo.tracking import run_environment_tags

    spec = spec if spec is not None else zoo_job_spec(run)
    tags = {"impl": "sb3", "lit_sb3.seed_batch": "1", "lit_sb3.zoo_folder": str(run.path), **(extra_tags or {})}
    if wall_seconds is None:
        tags["lit_sb3.time_source"] = "monitor"
        wall_seconds = run.training_seconds
    if run_id is None:
        env_tags = {k: v for k, v in run_environment_tags().items() if k == "git.commit"}
        run_id = tracking.create_job_run(spec, parent_run_id, env_tags, tags=tags)
    else:
        tracking.set_tags(run_id, tags)
    tracking.log_params(run_id, _default_params(spec))
    means, stds = run.results.mean(axis=1), run.results.std(axis=1)  # as SB3's evaluate_policy: np.std
    lengths = run.ep_lengths.mean(axis=1)
    for step, mean, std, length in zip(run.timesteps, means, stds, lengths):
        tracking.log_metrics(run_id, {"eval/mean_reward": mean, "eval/std_reward": std,
                                      "eval/mean_ep_length": length}, step=int(step))  # fmt: skip
    for step, value in _rollout_curve(run, spec.n_timesteps):
        tracking.log_metrics(run_id, {"rollout/ep_rew_mean": value}, step=step)
    final = {
        "final/mean_reward": float(means[-1]),
        "final/std_reward": float(stds[-1]),
        "time/total_timesteps": float(spec.n_timesteps),
        "time/wall_seconds": wall_seconds,
        "time/cpu_seconds": cpu_seconds,
        "time/fps": spec.n_timesteps / wall_seconds if wall_seconds else None,
    }
    tracking.log_metrics(run_id, final, step=int(spec.n_timesteps))
    with tempfile.TemporaryDirectory(prefix="lit_sb3-import-") as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps({"job_id": spec.job_id, "job": json.loads(spec.to_json()),
                                                         "zoo_args": run.args}, indent=2, sort_keys=True, default=str))  # fmt: skip
        with open(folder / "evaluations.csv", "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["step", "mean_reward", "std_reward", "mean_ep_length"])
            writer.writerows(zip(run.timesteps.tolist(), means.tolist(), stds.tolist(), lengths.tolist()))
        if run.model_file is not None:  # copied as bytes for the user; never loaded by the suite
            shutil.copy2(run.model_file, folder / f"sb3-{run.model_file.name}")
        tracking.log_artifacts(run_id, folder)
    tracking.end_run(run_id, "FINISHED")
    return run_id
