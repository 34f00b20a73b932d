"""Measure the rates ``bench run``'s cost estimates start from (``benchmarks/rates.yml``, :mod:`lit_sb3.zoo.cost`).

Runs small real grids with ``bench run`` (one worker, into a fresh sqlite store in a temporary folder) for each
algorithm on one env of each family it runs on, then reads each pair's phases back from the runs' ``time/*``
metrics exactly as a cost estimate reads a store (:func:`lit_sb3.zoo.cost.rates_from_runs`), and prints the YAML
rows (``--write`` replaces ``benchmarks/rates.yml``'s ``rates``, keeping its other keys)::

    taskset -c 0 python benchmarks/bench_rates.py [--algos sac,ppo] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

#: (algos, env, family, extra bench run arguments): one grid each
GRIDS = [
    ("sac,td3,ddpg,tqc,crossq", "Pendulum-v1", "classic",
     ["--n-timesteps", "1500", "--hyperparams", "learning_starts=500"]),
    ("sac,td3,ddpg,tqc,crossq", "HalfCheetah-v5", "mujoco",
     ["--n-timesteps", "1500", "--hyperparams", "learning_starts=500"]),
    ("dqn,qrdqn", "CartPole-v1", "classic", ["--n-timesteps", "3000", "--hyperparams", "learning_starts=1000"]),
    ("ppo,a2c,trpo,ars", "CartPole-v1", "classic", ["--n-timesteps", "4096"]),
    ("ppo,a2c,trpo,ars", "HalfCheetah-v5", "mujoco", ["--n-timesteps", "4096"]),
    ("ppo_lstm", "CartPoleNoVel-v1", "lit_sb3", ["--n-timesteps", "4096"]),
    ("ppo_mask", "InvalidActionDiscrete-v0", "lit_sb3", ["--n-timesteps", "4096"]),
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", help="only these algorithms (comma list)")
    parser.add_argument("--write", action="store_true", help="write the rows into benchmarks/rates.yml")
    parser.add_argument("--folder", help="keep the store in this folder (default: a temporary one); the rows are read "
                        "from every run in it, so two invocations with different --algos can share it")  # fmt: skip
    args = parser.parse_args()
    only = set(args.algos.split(",")) if args.algos else None
    from lit_sb3.zoo.cost import Rates, rates_from_runs
    from lit_sb3.zoo.tracking import open_tracking

    rows: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rates-") as scratch:
        tmp = args.folder or scratch
        uri = f"sqlite:///{tmp}/mlflow.db"
        for algos, env, family, extra in GRIDS:
            chosen = [a for a in algos.split(",") if only is None or a in only]
            if not chosen:
                continue
            cmd = [sys.executable, "-m", "lit_sb3.zoo.cli", "run", "--algos", ",".join(chosen), "--envs", env,
                   "--jobs", "1", "--eval-freq", "1000", "--eval-episodes", "2", "--tracking-uri", uri,
                   "--experiment", f"rates-{family}", *extra]  # fmt: skip
            t0 = time.monotonic()
            subprocess.run(cmd, cwd=tmp, check=False, stdout=subprocess.DEVNULL)
            print(f"# {','.join(chosen)} on {env}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        runs = open_tracking(uri, "rates-classic", create=False).timed_job_runs(
            sorted({a for algos, *_ in GRIDS for a in algos.split(",")})
        )
        for algos, _env, family, _ in GRIDS:
            for algo in algos.split(","):
                rates: Rates | None = rates_from_runs(runs, algo, family)
                if rates is not None:
                    rows.setdefault(algo, {})[family] = {
                        "update_fps": round(rates.update_fps, 1), "warmup_fps": round(rates.warmup_fps, 1),
                        "eval_fps": round(rates.eval_fps, 1), "startup_s": round(rates.startup_s, 1),
                    }  # fmt: skip
    load = os.getloadavg()
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(yaml.safe_dump({"rates": rows}, sort_keys=True))
    if args.write:
        path = ROOT / "benchmarks" / "rates.yml"
        text = path.read_text()
        head = text.split("\nrates:")[0]
        path.write_text(head.rstrip() + "\n" + yaml.safe_dump({"rates": rows}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
