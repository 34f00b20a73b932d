"""``bench run`` throughput: parallel scaling of the local launcher and the cost of MLflow tracking.

1. Scaling: the same small job run alone (1 worker) and as 2 jobs on 2 workers, interleaved (A, B, A, B, ...).
   Each job reports its own env steps per second of training (process start excluded); the ratio is the
   summed env-steps/s of the 2 parallel jobs over the lone job's. Target: >= 1.6x on 2 cores (0.8 * N).
2. Tracking overhead: the same job run in this process with and without MLflow (Lightning's MLFlowLogger on
   a sqlite store, params, the final artifacts), interleaved; ratio of the wall times of the whole
   ``run_job`` call. Target: <= 1.02 (2 %). Identical runs differ by 10-15 % on a shared 2-core machine, so
   it also prints the robust figure: the wall time spent inside MLflow's client (run creation, params,
   metrics, artifacts, status) as a share of the with-MLflow run.

3. Seed batching (``--seed-batch-grid``): the whole command ``bench run --algos A --envs E --seeds N --jobs J
   --seed-batch 1`` (every seed its own job) against the same with ``--seed-batch K`` (default ``auto``, bench
   run's default), each run as a subprocess of the bench CLI into a fresh sqlite store, interleaved and
   alternating which goes first; the ratio of their wall times (imports, planning, worker start, training,
   evaluation, tracking and the summary all included). Targets (issue 34): >= 2.5x for PPO on CartPole-v1, 10
   seeds, 2 jobs; the same command for SAC on Pendulum-v1.

Medians of the per-pair ratios are printed (neighbours on shared machines move absolute figures by +-30 %).

    python benchmarks/bench_grid.py --algo ppo --env CartPole-v1 --steps 8192 --pairs 3
    python benchmarks/bench_grid.py --algo ppo --env CartPole-v1 --steps 65536 --pairs 2 --skip-scaling --log-interval 1
    python benchmarks/bench_grid.py --algo sac --env Pendulum-v1 --steps 1500 --pairs 2 --skip-overhead
    python benchmarks/bench_grid.py --seed-batch-grid --algo ppo --env CartPole-v1 --pairs 3   # the zoo's budget
    python benchmarks/bench_grid.py --seed-batch-grid --algo sac --env Pendulum-v1 --pairs 3
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


LOG_INTERVAL: int | None = None  # --log-interval


def _jobs(algo: str, env: str, steps: int, seeds: list[int], overrides: dict[str, str]):  # noqa: ANN202
    from lit_sb3.zoo.jobs import plan_grid

    jobs, _ = plan_grid([algo], [env], seeds, n_timesteps=steps, eval_freq=steps, eval_episodes=2, overrides=overrides,
                        log_interval=LOG_INTERVAL)  # fmt: skip
    return jobs


def _grid_fps(launcher, jobs, tracking, book) -> list[float]:  # noqa: ANN001
    from lit_sb3.zoo.launchers.base import JobDone

    results = [e.result for e in launcher.submit(jobs, tracking.target, book) if isinstance(e, JobDone)]
    bad = [r for r in results if r.status != "FINISHED"]
    if bad:
        raise SystemExit(f"a job failed: {bad[0].failure_reason}")
    return [r.fps for r in results]


def scaling(args: argparse.Namespace, overrides: dict[str, str], uri: str) -> float:
    """Median of (sum of 2 parallel jobs' fps) / (lone job's fps)."""
    from lit_sb3.zoo.launchers.local import LocalLauncher
    from lit_sb3.zoo.pipeline import RunBook
    from lit_sb3.zoo.tracking import open_tracking

    tracking = open_tracking(uri, "bench-grid-scaling")
    book = RunBook(tracking, tracking.create_parent_run("bench_grid", {}))
    one, two = LocalLauncher(max_workers=1), LocalLauncher(max_workers=2)
    one.warm_up()
    _grid_fps(one, _jobs(args.algo, args.env, max(args.steps // 8, 64), [999], overrides), tracking, book)  # warm-up
    ratios = []
    seed = 0
    for i in range(args.pairs):
        alone = _grid_fps(one, _jobs(args.algo, args.env, args.steps, [seed], overrides), tracking, book)
        pair = _grid_fps(two, _jobs(args.algo, args.env, args.steps, [seed + 1, seed + 2], overrides), tracking, book)
        seed += 3
        ratio = sum(pair) / alone[0]
        ratios.append(ratio)
        print(f"scaling pair {i}: alone {alone[0]:.0f} fps; 2 workers {pair[0]:.0f} + {pair[1]:.0f} = {sum(pair):.0f} fps; "
              f"ratio {ratio:.2f}", flush=True)  # fmt: skip
    return statistics.median(ratios)


class _ClientTimer:
    """Wall seconds spent inside MLflow's client (every public ``MlflowClient`` method, outermost calls only)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls: Counter[str] = Counter()
        self.by_method: Counter[str] = Counter()
        self._depth = 0
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> _ClientTimer:
        from mlflow import MlflowClient

        for name, fn in list(vars(MlflowClient).items()):
            if inspect.isfunction(fn) and not name.startswith("_"):
                self._saved[name] = fn
                setattr(MlflowClient, name, self._wrap(name, fn))
        return self

    def __exit__(self, *exc: object) -> None:
        from mlflow import MlflowClient

        for name, fn in self._saved.items():
            setattr(MlflowClient, name, fn)

    def _wrap(self, name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    seconds = time.perf_counter() - t
                    self.seconds += seconds
                    self.calls[name] += 1
                    self.by_method[name] += seconds

        return timed


def overhead(args: argparse.Namespace, overrides: dict[str, str], uri: str) -> tuple[float, float]:
    """Medians of wall(with MLflow) / wall(without) and of the share of the with-MLflow run spent in MLflow."""
    import torch

    from lit_sb3.zoo.runner import run_job
    from lit_sb3.zoo.tracking import open_tracking

    torch.set_num_threads(1)
    tracking = open_tracking(uri, "bench-grid-overhead")
    job = _jobs(args.algo, args.env, args.steps, [0], overrides)[0]
    run_job(_jobs(args.algo, args.env, max(args.steps // 8, 64), [0], overrides)[0], tracking.target, use_mlflow=True)
    ratios, shares = [], []
    for i in range(args.pairs):
        walls = {}
        for use in (True, False) if i % 2 == 0 else (False, True):
            with _ClientTimer() as timer:
                t = time.perf_counter()
                res = run_job(job, tracking.target, use_mlflow=use)
                walls[use] = time.perf_counter() - t
            assert res.status == "FINISHED", res.failure_reason
            if use:
                in_mlflow, calls, by_method = timer.seconds, timer.calls, timer.by_method
        ratio = walls[True] / walls[False]
        ratios.append(ratio)
        shares.append(in_mlflow / walls[True])
        print(f"overhead pair {i}: with MLflow {walls[True]:.2f} s, without {walls[False]:.2f} s, ratio {ratio:.3f}; "
              f"in MLflow's client {in_mlflow:.3f} s = {shares[-1]:.2%} of the run "
              f"({sum(calls.values())} calls; s by method: "
              f"{', '.join(f'{k} {v:.3f} ({calls[k]})' for k, v in by_method.most_common(5))})", flush=True)  # fmt: skip
    return statistics.median(ratios), statistics.median(shares)


def seed_batch_grid(args: argparse.Namespace) -> float:
    """Median of wall(bench run --seed-batch 1) / wall(with --seed-batch K or auto), each a fresh store."""
    base = [sys.executable, "-m", "lit_sb3.zoo.cli", "run", "--algos", args.algo, "--envs", args.env, "--seeds",
            str(args.seeds), "--jobs", str(args.jobs)]  # fmt: skip
    if args.steps_given:
        base += ["--n-timesteps", str(args.steps)]
    if args.hyperparams:
        base += ["--hyperparams", *args.hyperparams]
    arms = {"separate": [*base, "--seed-batch", "1"], "batched": [*base, "--seed-batch", str(args.seed_batch)]}
    print(f"$ {' '.join(base[2:])} --seed-batch 1 | {args.seed_batch}", flush=True)
    ratios = []
    for i in range(args.pairs):
        walls, loads = {}, {}
        for arm in ("separate", "batched") if i % 2 == 0 else ("batched", "separate"):
            with tempfile.TemporaryDirectory(prefix="bench-grid-sb-") as tmp:
                command = [*arms[arm], "--tracking-uri", f"sqlite:///{tmp}/mlflow.db", "--experiment", arm]
                t = time.perf_counter()
                done = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
                walls[arm] = time.perf_counter() - t
                loads[arm] = os.getloadavg()[0]
            if done.returncode != 0:
                raise RuntimeError(
                    f"{arm}: bench run failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
                )
            if arm == "batched" and i == 0:  # what the batched arm ran: auto's choice and its reason
                for line in done.stdout.splitlines():
                    if line.startswith("--seed-batch"):
                        print(f"  {line}", flush=True)
        ratios.append(walls["separate"] / walls["batched"])
        print(f"seed-batch pair {i}: --seed-batch 1 {walls['separate']:.1f} s (load {loads['separate']:.1f}), "
              f"--seed-batch {args.seed_batch} {walls['batched']:.1f} s (load {loads['batched']:.1f}); ratio "
              f"{ratios[-1]:.2f}x", flush=True)  # fmt: skip
    return statistics.median(ratios)


def main() -> None:
    """Run the measurements and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=8192, help="env steps per job")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--hyperparams", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--log-interval", type=int, default=None, help="bench run --log-interval (default: auto)")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument(
        "--seed-batch-grid", action="store_true", help="only part 3: bench run with/without --seed-batch"
    )
    parser.add_argument("--seeds", type=int, default=10, help="part 3: --seeds")
    parser.add_argument("--seed-batch", default="auto", help="part 3: the batched arm's --seed-batch (default auto)")
    parser.add_argument("--jobs", type=int, default=2, help="part 3: --jobs")
    args = parser.parse_args()
    args.steps_given = any(a == "--steps" or a.startswith("--steps=") for a in sys.argv[1:])
    if args.seed_batch_grid:  # the zoo's budget unless --steps is given
        print(f"bench run --seed-batch wall-time ratio, {args.pairs} pairs, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        print(f"seed batching, median wall-time ratio (--seed-batch 1 / --seed-batch {args.seed_batch}): "
              f"{seed_batch_grid(args):.2f}x  (target >= 2.5 for PPO CartPole-v1)")  # fmt: skip
        return
    overrides = dict(item.split("=", 1) for item in args.hyperparams)
    global LOG_INTERVAL
    LOG_INTERVAL = args.log_interval
    print(f"{args.algo} on {args.env}, {args.steps} env steps per job, {args.pairs} pairs, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-grid-") as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        if not args.skip_scaling:
            print(
                f"scaling, median ratio (2 jobs on 2 workers / 1 job): {scaling(args, overrides, uri):.2f}  (target >= 1.6)"
            )
        if not args.skip_overhead:
            ratio, share = overhead(args, overrides, uri)
            print(f"tracking overhead, median wall-time ratio: {ratio:.3f}; median share of the run in MLflow's client: "
                  f"{share:.2%}  (target <= 2 %)")  # fmt: skip


if __name__ == "__main__":
    main()
