"""``bench enjoy``: watch (and record) what a trained run learned, as rl_zoo3's ``enjoy``.

The model comes from a job run of ``bench run`` (``--run-id``, ``--job-id``, or ``--experiment --algo --env
--seed`` for the latest FINISHED run), its artifacts downloaded through MLflow (so a tracking server works as
well as the sqlite store), or from a model file (``--model FILE.zip --env ENV``). The env is rebuilt with the
run's wrappers from its ``config.json`` by the worker's own builder (:func:`lit_sb3.zoo.worker.envs.build_env`,
evaluation form: one env, seed ``seed + 10_000``, VecNormalize frozen and rewards not normalised), its
VecNormalize statistics restored from ``vecnormalize.json``, and N episodes are run (deterministic unless
``--stochastic``): same env seed as the run's evaluations, so an on-policy run (evaluated after its last update)
replays its final evaluation's episodes; off-policy runs evaluate at the last env step, before its gradient steps.
``--record`` writes them to an mp4 (the ``video`` extra) and logs it to the run as ``videos/enjoy-<algo>-s<seed>-<time>.mp4``.

The model is read by the library's safe loader (JSON + ``weights_only`` tensors, no pickle), the config through
the class whitelist; nothing from the run is executed. Every bad input is one line, before anything is loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = ["add_parser", "run"]

DEFAULT_EPISODES = 5


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``enjoy``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    p = subparsers.add_parser(
        "enjoy", help="run (and record) a trained model: a bench run's job from MLflow, or a model file",
        description="Load a trained model with its wrappers and VecNormalize statistics, run N episodes, print "
        "their returns and lengths; --record writes an mp4 and logs it to the run.",
    )  # fmt: skip
    p.add_argument("--run-id", default=None, help="the job's MLflow run id")
    p.add_argument("--job-id", default=None, help="the job id (bench run prints them); its latest FINISHED run")
    p.add_argument("--experiment", default=None, help="with --algo --env --seed: the experiment of the run")
    p.add_argument("--algo", default=None, help="with --experiment: the algorithm (with --model: overrides the file's)")
    p.add_argument("--env", default=None, help="with --experiment or --model: the env id")
    p.add_argument("--seed", type=int, default=None, help="with --experiment: the run's seed (--model: env seed, 0)")
    p.add_argument("--model", default=None, metavar="FILE.zip", help="a model file instead of a run (with --env)")
    p.add_argument("--episodes", type=int, default=DEFAULT_EPISODES, metavar="N",
                   help=f"episodes to run (default {DEFAULT_EPISODES})")  # fmt: skip
    p.add_argument("--stochastic", action="store_true", help="sample actions (default: deterministic)")
    p.add_argument("--record", action="store_true", help="write an mp4 of the episodes (the video extra)")
    p.add_argument("--video-folder", default="videos", metavar="DIR", help="where --record writes (default videos)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="device of the model (default cpu)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default sqlite:///mlflow.db)")
    p.set_defaults(func=run)
    return p


# ---------------------------------------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------------------------------------
def _selector(args: argparse.Namespace) -> str:
    """``run``, ``job``, ``grid`` or ``model``: the one selector given, else a one-line error."""
    grid = [args.experiment, args.algo, args.env, args.seed]
    given = [name for name, on in (("--run-id", args.run_id), ("--job-id", args.job_id), ("--model", args.model))
             if on is not None]  # fmt: skip
    usage = "give one of --run-id ID, --job-id ID, --experiment E --algo A --env ENV --seed S, or --model FILE.zip --env ENV"
    if len(given) > 1:
        raise BenchError(f"{' and '.join(given)} select different things; {usage}")
    if given == ["--model"]:
        if args.env is None:
            raise BenchError(f"--model needs --env ENV; {usage}")
        if args.experiment is not None:
            raise BenchError(f"--experiment selects a run, --model a file; {usage}")
        return "model"
    if given:
        extra = [f for f, v in (("--algo", args.algo), ("--env", args.env), ("--seed", args.seed)) if v is not None]
        if extra:
            raise BenchError(f"{given[0]} selects a run by itself; drop {', '.join(extra)}")
        if given == ["--run-id"] and args.experiment is not None:
            raise BenchError("--run-id selects a run by itself; drop --experiment")
        return "run" if given == ["--run-id"] else "job"
    if all(v is None for v in grid):
        raise BenchError(usage)
    missing = [f for f, v in zip(("--experiment", "--algo", "--env", "--seed"), grid, strict=True) if v is None]
    if missing:
        raise BenchError(f"selecting a run by name needs {', '.join(missing)} too; {usage}")
    return "grid"


def _spec_from_config(path: Path, run_id: str) -> Any:
    """The :class:`~lit_sb3.zoo.jobs.JobSpec` in a run's ``config.json`` (classes through the whitelist)."""
    from lit_sb3.utils.files import BadFileError, check_file, load_json
    from lit_sb3.zoo.jobs import JobSpec

    try:
        check_file(path, 16 * 2**20, "config.json")
        data = load_json(path.read_bytes(), "", "config.json")
    except BadFileError as exc:
        raise BenchError(f"run {run_id}: {' '.join(str(exc).split())}") from None
    try:
        spec = JobSpec.from_json(json.dumps(data["job"]))
        spec.resolved_config()  # decodes the config: only whitelisted classes
    except BenchError as exc:
        raise BenchError(f"run {run_id}: config.json: {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"run {run_id}: config.json is not a bench job description ({exc})") from None
    return spec


def _from_run(args: argparse.Namespace, mode: str, folder: Path) -> tuple[Any, Path, Path | None, Any, Any]:
    """``(spec, model path, vecnormalize path or None, tracking, run)`` of the selected run."""
    from lit_sb3.zoo.tracking import DEFAULT_TRACKING_URI, open_reader
    from lit_sb3.zoo.tracking.artifacts import (
        download_run_artifact,
        find_finished_job_run,
        find_job_run,
        get_run,
        list_run_artifacts,
    )

    tracking = open_reader(args.tracking_uri or DEFAULT_TRACKING_URI)
    if mode == "run":
        run = get_run(tracking, args.run_id)
        if run.info.status != "FINISHED":
            reason = run.data.tags.get("lit_sb3.failure_reason")
            raise BenchError(
                f"run {args.run_id} is {run.info.status}, not FINISHED" + (f": {reason}" if reason else "")
            )
    elif mode == "job":
        run = find_job_run(tracking, args.job_id, args.experiment)
    else:
        run = find_finished_job_run(tracking, args.experiment, args.algo, args.env, args.seed)
    run_id = run.info.run_id
    artifacts = set(list_run_artifacts(tracking, run_id))
    for name in ("model.zip", "config.json"):
        if name not in artifacts:
            raise BenchError(f"run {run_id} has no {name} artifact (not a finished bench run job?)")
    spec = _spec_from_config(download_run_artifact(tracking, run_id, "config.json", folder), run_id)
    model_path = download_run_artifact(tracking, run_id, "model.zip", folder)
    stats = (
        download_run_artifact(tracking, run_id, "vecnormalize.json", folder)
        if "vecnormalize.json" in artifacts
        else None
    )
    return spec, model_path, stats, tracking, run


def _from_file(args: argparse.Namespace, model_file: str) -> tuple[Any, Path, Path | None]:
    """``(spec, model path, vecnormalize path or None)`` for ``--model FILE --env ENV``: the zoo's config entry
    of the file's algorithm on the env gives the wrappers; ``vecnormalize.json`` next to the file the statistics
    (``model_file``: the file, or the private copy of a URL, which has none)."""
    from lit_sb3.utils.serialization import BadFileError, read_archive_data
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.registry import ALGOS, check_algo, get_algo_class
    from lit_sb3.zoo.suites import expand_envs

    path = Path(model_file)
    if not path.is_file():
        raise BenchError(f"--model: no file {args.model!r}")
    try:
        data = read_archive_data(path)  # data.json only: the tensors are read once, by the algorithm's load
    except (BadFileError, OSError, ValueError) as exc:
        raise BenchError(f"--model {args.model}: {' '.join(str(exc).split())}") from None
    if args.algo is not None:
        algo = check_algo(args.algo)
    else:
        names = [name for name in ALGOS if get_algo_class(name).__name__ == data.get("algo")]
        if not names:
            raise BenchError(f"--model {args.model}: algorithm {data.get('algo')!r} is not one of bench's; give --algo")
        algo = names[0]
    _check_extras(args.env)  # before the env id is looked up: ALE ids exist only once ale_py imports
    envs = expand_envs(args.env)
    if len(envs) != 1:
        raise BenchError(f"--env names {len(envs)} envs ({', '.join(envs)}); give one env id")
    env_id = envs[0]
    jobs, skipped = plan_grid([algo], [env_id], [args.seed or 0], default_budgets={env_id: 1_000_000})
    if not jobs:
        raise BenchError(f"--model: {skipped[0].reason}")
    stats = path.with_name("vecnormalize.json")
    return jobs[0], path, stats if model_file == args.model and stats.is_file() else None


def _check_extras(env_id: str) -> None:
    from lit_sb3.zoo.extras import check_env_extras

    check_env_extras([env_id])


# ---------------------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------------------
def _build(spec: Any, stats: Path | None, record: bool) -> Any:
    """The evaluation env of ``spec`` (rendering ``rgb_array`` frames when recording) with its statistics."""
    from lit_sb3.utils.serialization import BadFileError
    from lit_sb3.vec_env import VecNormalize, sync_envs_normalization, unwrap_vec_normalize
    from lit_sb3.zoo.worker.envs import build_env

    env = build_env(spec.with_render_mode("rgb_array") if record else spec, evaluation=True)
    target = unwrap_vec_normalize(env)
    if target is None and stats is None:
        return env
    if stats is None:
        env.close()
        raise BenchError(f"{spec.name} normalizes observations but its vecnormalize.json statistics are missing")
    try:
        saved = VecNormalize.load(stats, env if target is None else target.venv)
    except BadFileError as exc:
        env.close()
        raise BenchError(str(exc)) from None
    if target is None:  # a model file with statistics next to it, on an entry without `normalize` (as rl_zoo3)
        saved.training, saved.norm_reward = False, False
        return saved
    sync_envs_normalization(saved, env)  # statistics only: the env stays frozen, rewards not normalised
    return env


def run(args: argparse.Namespace) -> int:
    """Select, load, run the episodes, print them (and record).

    Args:
        args: parsed arguments.
    """
    mode = _selector(args)
    if args.episodes < 1:
        raise BenchError(f"--episodes must be >= 1, got {args.episodes}")
    if args.record:
        from lit_sb3.vec_env.vec_video_recorder import configure_headless_rendering
        from lit_sb3.zoo.extras import check_extra

        configure_headless_rendering()  # before MuJoCo or pygame is imported
        check_extra("video", "--record")
    from lit_sb3.core.evaluation import evaluate_policy
    from lit_sb3.utils.checkpoint_io import is_url, local_copy
    from lit_sb3.utils.files import BadFileError
    from lit_sb3.zoo.registry import get_algo_class

    tracking = run_info = None
    with tempfile.TemporaryDirectory(prefix="bench-enjoy-") as tmp, contextlib.ExitStack() as stack:
        if mode == "model":
            model_file = args.model
            if is_url(args.model):  # http(s) or fsspec: a bounded private copy, read by the same safe loader
                try:
                    model_file = stack.enter_context(local_copy(args.model, "model archive"))
                except (BadFileError, OSError) as exc:
                    raise BenchError(f"--model {args.model}: {' '.join(str(exc).split())}") from None
            spec, model_path, stats = _from_file(args, model_file)
            source = f"model {args.model}"
        else:
            spec, model_path, stats, tracking, run_info = _from_run(args, mode, Path(tmp))
            _check_extras(spec.env_id)
            source = f"run {run_info.info.run_id} ({spec.name})"
        env = _build(spec, stats, args.record)
        recorder = None
        try:
            try:
                model = get_algo_class(spec.algo).load(model_path, device=args.device)
            except Exception as exc:  # noqa: BLE001 - a bad file is one line
                text = " ".join(str(exc).split()).replace(str(model_path), str(args.model or model_path))
                raise BenchError(f"cannot load the model of {source}: {text[:300]}") from None
            if args.record:
                from lit_sb3.vec_env.vec_video_recorder import VecVideoRecorder

                name = f"enjoy-{spec.algo}-s{spec.seed}-{time.strftime('%Y%m%d-%H%M%S')}.mp4"
                env = recorder = VecVideoRecorder(env, Path(args.video_folder) / name)
            mode_text = "stochastic" if args.stochastic else "deterministic"
            print(f"bench enjoy: {source}: {args.episodes} {mode_text} episode(s) on {spec.env_id}", flush=True)
            rewards, lengths = evaluate_policy(
                model, env, n_eval_episodes=args.episodes, deterministic=not args.stochastic,
                return_episode_rewards=True, warn=False,
                use_masking=bool(getattr(model, "supports_action_masks", False)),
            )  # fmt: skip
        finally:
            env.close()
    for i, (reward, length) in enumerate(zip(rewards, lengths, strict=True)):
        print(f"episode {i + 1}: return {float(reward):.2f}, length {int(length)}")
    mean = sum(float(r) for r in rewards) / len(rewards)
    print(f"mean return {mean:.2f} over {len(rewards)} episode(s), mean length {sum(lengths) / len(lengths):.1f}")
    if recorder is not None:
        print(f"video: {recorder.video_path} ({recorder.n_frames} frames of {recorder.frame_shape})")
        if run_info is not None:
            from lit_sb3.zoo.tracking.artifacts import log_run_artifact

            log_run_artifact(tracking, run_info.info.run_id, recorder.video_path, "videos")
            print(
                f"logged to run {run_info.info.run_id}: {run_info.info.artifact_uri}/videos/{recorder.video_path.name}"
            )
    return 0
