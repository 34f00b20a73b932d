"""Micro-benchmark: DummyVecEnv.step on CartPole-v1, lit_sb3 vs stable_baselines3, interleaved.

Usage: python benchmarks/bench_vec_env.py [--pairs 7] [--steps 4000]

Prints, for 1 and 8 envs, the time per ``step`` call of each implementation in every pair, the per-pair ratio
(lit_sb3 / SB3; below 1 means lit_sb3 is faster) and the median ratio. SB3 is imported here only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch


def _time_steps(vec_env_cls: type, n_envs: int, n_steps: int, seed: int) -> float:
    """Seconds per step() call over ``n_steps`` calls (after a short warm-up)."""
    env_fns: list[Callable[[], gym.Env]] = [lambda: gym.make("CartPole-v1") for _ in range(n_envs)]
    venv = vec_env_cls(env_fns)
    venv.seed(seed)
    venv.reset()
    actions = np.random.default_rng(seed).integers(0, 2, size=(n_steps + 100, n_envs))
    for i in range(100):
        venv.step(actions[i])
    start = time.perf_counter()
    for i in range(100, n_steps + 100):
        venv.step(actions[i])
    elapsed = time.perf_counter() - start
    venv.close()
    return elapsed / n_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7, help="number of interleaved (SB3, lit_sb3) pairs")
    parser.add_argument("--steps", type=int, default=4000, help="step() calls timed per run")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv

    from lit_sb3.vec_env import DummyVecEnv as LitDummyVecEnv

    for n_envs in (1, 8):
        n_steps = max(args.steps // n_envs, 200)
        print(f"\nCartPole-v1, {n_envs} env(s), {n_steps} step() calls per run (us per step() call)")
        print(f"{'pair':>4} {'sb3':>9} {'lit_sb3':>9} {'ratio':>7}")
        ratios = []
        for pair in range(args.pairs):
            # alternate which one goes first, so drifts in machine load cancel out
            order = [("sb3", SB3DummyVecEnv), ("lit", LitDummyVecEnv)]
            if pair % 2:
                order.reverse()
            times = {name: _time_steps(cls, n_envs, n_steps, seed=pair) for name, cls in order}
            ratio = times["lit"] / times["sb3"]
            ratios.append(ratio)
            print(f"{pair:>4} {times['sb3'] * 1e6:>9.1f} {times['lit'] * 1e6:>9.1f} {ratio:>7.3f}")
        print(f"median ratio lit_sb3/sb3 (n_envs={n_envs}): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
