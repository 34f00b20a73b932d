"""Throughput of a small ``bench run`` grid on a local Ray cluster against the local process pool, and Ray's
start-up cost (``ray.init`` time), on the same machine with the same jobs.

    python benchmarks/bench_ray.py --jobs 2 --algos a2c,ppo --seeds 2 --n-timesteps 4000 --repeats 1

Each measurement is a full ``bench run`` (planning, MLflow runs in a fresh sqlite store, training, evaluation,
artifacts) timed from the call to its return; the Ray run reuses a Ray instance started (and timed) beforehand,
so ``ray.init`` is reported on its own. Throughput is total env steps / wall seconds. Prints a Markdown table
and writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _grid(launcher: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One timed ``bench run`` in a fresh store.

    Args:
        launcher: ``local`` or ``ray``.
        args: benchmark options.
        folder: a fresh folder for the store.
    """
    from lit_sb3.zoo.cli import main
    from lit_sb3.zoo.tracking import open_tracking

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    open_tracking(uri, "bench")  # migrations are not part of the measure
    argv = ["run", "--launcher", launcher, "--algos", args.algos, "--envs", args.envs, "--seeds", str(args.seeds),
            "--jobs", str(args.jobs), "--n-timesteps", str(args.n_timesteps), "--eval-freq", str(args.n_timesteps // 4),
            "--eval-episodes", "5", "--tracking-uri", uri, "--experiment", "bench"]  # fmt: skip
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
        wall = time.perf_counter() - t0
    finally:
        os.chdir(cwd)
    runs = open_tracking(uri, "bench", create=False).job_runs()
    steps = sum(int(r.data.metrics.get("time/total_timesteps", 0)) for r in runs if r.info.status == "FINISHED")
    return {"launcher": launcher, "code": code, "jobs": len(runs), "env_steps": steps, "wall_s": wall,
            "steps_per_s": steps / wall}  # fmt: skip


def main() -> int:
    """Run the benchmark."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=2, help="parallel jobs (and the local Ray instance's CPUs)")
    p.add_argument("--algos", default="a2c,ppo")
    p.add_argument("--envs", default="CartPole-v1")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--n-timesteps", type=int, default=4000)
    p.add_argument("--repeats", type=int, default=1, help="alternate local/ray this many times")
    p.add_argument("--out", default=None, help="JSON output file")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)

    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=args.jobs, include_dashboard=False, log_to_driver=False, configure_logging=False)
    init_s = time.perf_counter() - t0

    @ray.remote(num_cpus=0)
    def noop() -> int:
        return 1

    t0 = time.perf_counter()
    ray.get(noop.remote())
    first_task_s = time.perf_counter() - t0
    results: list[dict[str, Any]] = []
    try:
        for _ in range(args.repeats):
            for launcher in ("local", "ray"):
                folder = Path(tempfile.mkdtemp(prefix=f"bench-ray-{launcher}-"))
                try:
                    results.append(_grid(launcher, args, folder))
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
    finally:
        ray.shutdown()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    mean = {k: sum(r["steps_per_s"] for r in results if r["launcher"] == k) / args.repeats for k in ("local", "ray")}
    print(f"ray.init(num_cpus={args.jobs}): {init_s:.1f} s; first task on a fresh worker: {first_task_s:.1f} s; "
          f"cpus {os.cpu_count()}, load average {load:.2f}")  # fmt: skip
    print("| launcher | exit | jobs | env steps | wall (s) | env steps/s |\n|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['launcher']} | {r['code']} | {r['jobs']} | {r['env_steps']} | {r['wall_s']:.1f} | {r['steps_per_s']:.0f} |"
        )
    print(f"ray / local throughput: {mean['ray'] / mean['local']:.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"ray_init_s": init_s, "first_task_s": first_task_s, "load": load,
                                              "args": vars(args), "runs": results,
                                              "ratio": mean["ray"] / mean["local"]}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
