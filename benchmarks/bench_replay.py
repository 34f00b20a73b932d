"""Micro-benchmark: replay buffer add + sample(256) on HalfCheetah-v5's spaces, lit_sb3 vs SB3, interleaved.

Usage: python benchmarks/bench_replay.py [--pairs 7] [--iters 2000] [--buffer-size 200000] [--batch-size 256]

Both buffers are pre-filled (so sampling reads from a realistically large buffer), then each pair times, for
SB3 and lit_sb3 in turn: ``iters`` calls of ``add`` alone, ``iters`` calls of ``sample(batch_size)`` alone, and
``iters`` iterations of one add + one sample (the SAC/TD3 loop with one gradient step per env step).
It prints per-pair ratios (lit_sb3 / SB3; below 1 means lit_sb3 is faster), their medians, and the memory per
transition of each. SB3 is imported here only; one torch thread, CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th


def _make_data(obs_space: gym.Space, act_space: gym.Space, n: int, seed: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n + 1, 1, *obs_space.shape))
    acts = rng.uniform(-1, 1, size=(n, 1, *act_space.shape)).astype(np.float32)
    rewards = rng.normal(size=(n, 1))
    dones = rng.random((n, 1)) < 0.001
    return [(obs[i], obs[i + 1], acts[i], rewards[i], dones[i], [{"TimeLimit.truncated": False}]) for i in range(n)]


def _prefill(buf: Any, fill: int, rng: np.random.Generator) -> None:
    """Write random data directly into the storage and mark the buffer full."""
    for name in ("observations", "next_observations", "actions", "rewards"):
        storage = getattr(buf, name)
        arr = rng.normal(size=storage.shape)
        if isinstance(storage, th.Tensor):
            storage.copy_(th.from_numpy(arr))
        else:
            storage[...] = arr
    buf.full = True
    buf.pos = 0


def _time(fn, iters: int) -> float:
    start = time.perf_counter()
    for i in range(iters):
        fn(i)
    return (time.perf_counter() - start) / iters


def _run(buf: Any, data: list[tuple[Any, ...]], iters: int, batch_size: int) -> dict[str, float]:
    n = len(data)

    def add(i: int) -> None:
        buf.add(*data[i % n])

    def sample(i: int) -> None:
        buf.sample(batch_size)

    def both(i: int) -> None:
        buf.add(*data[i % n])
        buf.sample(batch_size)

    for i in range(50):  # warm-up
        both(i)
    return {"add": _time(add, iters), "sample": _time(sample, iters), "add+sample": _time(both, iters)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7, help="number of interleaved (SB3, lit_sb3) pairs")
    parser.add_argument("--iters", type=int, default=2000, help="timed calls per measurement")
    parser.add_argument("--buffer-size", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    th.set_num_threads(1)
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    from lit_sb3.buffers import ReplayBuffer

    env = gym.make("HalfCheetah-v5")
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    data = _make_data(obs_space, act_space, 5000, seed=0)
    rng = np.random.default_rng(1)
    sb3 = SB3ReplayBuffer(args.buffer_size, obs_space, act_space, device="cpu")
    lit = ReplayBuffer(args.buffer_size, obs_space, act_space, device="cpu")
    _prefill(sb3, args.buffer_size, rng)
    _prefill(lit, args.buffer_size, rng)

    sb3_bytes = (
        sb3.observations.itemsize * 2 * int(np.prod(obs_space.shape))
        + sb3.actions.itemsize * int(np.prod(act_space.shape))
        + sb3.rewards.itemsize
        + sb3.dones.itemsize
        + sb3.timeouts.itemsize
    )
    print(f"HalfCheetah-v5 spaces, buffer_size={args.buffer_size}, batch_size={args.batch_size}, iters={args.iters}")
    print(
        f"memory per transition: SB3 {sb3_bytes} B, lit_sb3 {lit.nbytes_per_transition()} B "
        f"(ratio {lit.nbytes_per_transition() / sb3_bytes:.3f})"
    )

    keys = ("add", "sample", "add+sample")
    ratios: dict[str, list[float]] = {k: [] for k in keys}
    for pair in range(args.pairs):
        a = _run(sb3, data, args.iters, args.batch_size)
        b = _run(lit, data, args.iters, args.batch_size)
        line = []
        for k in keys:
            ratios[k].append(b[k] / a[k])
            line.append(f"{k}: SB3 {a[k] * 1e6:7.1f} us, lit {b[k] * 1e6:7.1f} us, ratio {b[k] / a[k]:.3f}")
        print(f"pair {pair}: " + " | ".join(line))
    print("median ratio (lit_sb3 / SB3): " + ", ".join(f"{k} {statistics.median(ratios[k]):.3f}" for k in keys))


if __name__ == "__main__":
    main()
