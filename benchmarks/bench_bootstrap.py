"""Stratified-bootstrap CIs for 4 aggregate metrics: rliable 1.2 vs lit_sb3.zoo.stats, side by side.

3 algorithms × 10 runs × 6 tasks, 50,000 reps (rliable's default). Prints both timings, the speed-up and the
largest difference between the two sets of CI bounds. Run: ``python benchmarks/bench_bootstrap.py [reps]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from lit_sb3.zoo import stats


def main(reps: int = 50_000) -> None:
    """Time both and compare.

    Args:
        reps: bootstrap replications.
    """
    rng = np.random.default_rng(0)
    data = {f"algo{i}": rng.beta(2 + i, 3, size=(10, 6)) for i in range(3)}

    start = time.perf_counter()
    ours = stats.aggregate_intervals(data, reps=reps, seed=0)
    t_ours = time.perf_counter() - start

    from rliable import library, metrics

    funcs = [metrics.aggregate_median, metrics.aggregate_iqm, metrics.aggregate_mean, metrics.aggregate_optimality_gap]

    np.random.seed(0)
    start = time.perf_counter()
    _, cis = {}, {}
    for metric_index in range(len(stats.METRICS)):  # rliable's usual use: one call per metric
        _, ci = library.get_interval_estimates(data, lambda x, f=funcs[metric_index]: np.array([f(x)]), reps=reps)
        for algo, bounds in ci.items():
            cis.setdefault(algo, []).append(bounds[:, 0])
    t_rl = time.perf_counter() - start

    diff = max(
        max(abs(ours[a][m].low - cis[a][i][0]), abs(ours[a][m].high - cis[a][i][1]))
        for a in data
        for i, m in enumerate(stats.METRICS)
    )
    print(f"reps={reps}, 3 algos x 10 runs x 6 tasks, 4 metrics")
    print(f"rliable 1.2      : {t_rl:8.2f} s")
    print(f"lit_sb3.zoo.stats: {t_ours:8.2f} s   ({t_rl / t_ours:.0f}x faster)")
    print(f"max |CI bound difference|: {diff:.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
