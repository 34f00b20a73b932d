"""Lightning's cost: lit_sb3 through ``RLTrainer.fit`` vs the same update code in a plain Python loop.

Usage: python benchmarks/bench_lightning_overhead.py [--pairs 5] [--configs ppo1,a2c1,a2c8] [--timesteps N]

For each configuration the same lit_sb3 model class, hyperparameters, env (``RLEnvDataModule``, DummyVecEnv,
CartPole-v1) and seed are run, alternating (A, B, A, B, ...):

* ``lightning``: ``RLTrainer(max_steps=T, logger=False).fit(model, datamodule=dm)``;
* ``plain``: the same model methods called directly in a ``while`` loop, without a Trainer:
  ``setup_fit(env, FitContext(total_timesteps=T))`` (the trainer/algorithm contract), then ``training_step``
  (= ``collect_rollouts`` + ``train``, the exact code Lightning calls) until the env-step budget is reached.
  ``manual_backward`` needs a Trainer, so the plain loop binds it to ``loss.backward()``.

It prints, per pair, the wall time of each (L = lightning, P = plain) and Lightning's overhead
``lightning / plain - 1`` measured two ways:
``total`` (Trainer construction + fit, i.e. including Lightning's fixed start-up, vs the plain loop including
its own set-up) and ``loop`` (Lightning's ``on_train_start`` -> ``on_train_end`` vs the plain ``while`` loop:
the per-``training_step`` cost), each in wall time and in process CPU time (one torch thread: CPU time is the
work done, and it is less sensitive to busy neighbours), then the medians. Goal: floor <= +10 %, target <= +3 %.

Two identical runs of the same process differ by +-10-15 % on a shared 2-core machine, more than the effect, so
it also prints ``in situ``: inside the Lightning run, the loop's wall time not spent in ``training_step``
(Lightning's loop, hooks, data fetching, our budget check) over the time spent in it. That is Lightning's
cost measured on the same run, free of run-to-run noise.

Configurations: ``ppo1`` = PPO, SB3 defaults (n_steps 2048, 10 epochs of batch 64), 1 env -- few, long
training_steps; ``a2c1`` / ``a2c8`` = A2C, SB3 defaults (n_steps 5, RMSprop), 1 / 8 envs -- many small
training_steps, where a per-step overhead dominates. One torch thread, CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any, NamedTuple

import torch as th
from bench_on_policy import loop_timer, make_lit  # same model, env and timer as the SB3 comparison

CONFIGS = {
    # name: (algo, n_envs, default timesteps)
    "ppo1": ("ppo", 1, 8192),
    "ppo8": ("ppo", 8, 16384),
    "a2c1": ("a2c", 1, 5000),
    "a2c8": ("a2c", 8, 16000),
}


class Run(NamedTuple):
    """Wall and CPU seconds of the whole run and of its training loop, env steps and training_steps."""

    total: float
    loop: float
    cpu_total: float
    cpu_loop: float
    steps: int
    iterations: int
    inside: float = 0.0
    calls: int = 0


def run_lightning(algo: str, n_envs: int, timesteps: int, seed: int) -> Run:
    """(total s, loop s, env steps, training_steps) through RLTrainer.fit."""
    from lit_sb3 import RLTrainer

    marks: dict[str, float] = {}
    model, dm = make_lit(algo, n_envs, seed)
    inside = [0.0, 0]  # wall seconds spent inside training_step, number of calls
    training_step = model.training_step

    def timed_training_step(batch: Any, batch_idx: int) -> Any:
        t = time.perf_counter()
        try:
            return training_step(batch, batch_idx)
        finally:
            inside[0] += time.perf_counter() - t
            inside[1] += 1

    model.training_step = timed_training_step  # Lightning calls the instance attribute
    t0, c0 = time.perf_counter(), time.process_time()
    trainer = RLTrainer(max_steps=timesteps, logger=False, callbacks=[loop_timer(marks)])
    trainer.fit(model, datamodule=dm)
    total, cpu_total = time.perf_counter() - t0, time.process_time() - c0
    dm.close()
    loop = marks["end"] - marks["start"]
    cpu_loop = marks["cend"] - marks["cstart"]
    return Run(total, loop, cpu_total, cpu_loop, model.num_timesteps, model._iteration, inside[0], inside[1])


def run_plain(algo: str, n_envs: int, timesteps: int, seed: int) -> Run:
    """(total s, loop s, env steps, training_steps) with the same model methods in a plain loop."""
    from lit_sb3.algorithms.fit_context import FitContext

    model, dm = make_lit(algo, n_envs, seed)
    env = dm.get_env("fit")
    t0, c0 = time.perf_counter(), time.process_time()
    context = FitContext(total_timesteps=timesteps)
    callback = model.setup_fit(env, context)
    callback.on_training_start(locals(), globals())
    model.manual_backward = lambda loss, *args, **kwargs: loss.backward()  # no Trainer: plain autograd
    model.on_train_start()
    t_loop, c_loop = time.perf_counter(), time.process_time()
    batch_idx = 0
    while True:
        model.training_step(None, batch_idx)
        batch_idx += 1
        if context.update(model.num_timesteps) or model._stop_requested:
            break
    model.on_train_end()
    end, c_end = time.perf_counter(), time.process_time()
    dm.close()
    return Run(end - t0, end - t_loop, c_end - c0, c_end - c_loop, model.num_timesteps, model._iteration)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--configs", default="ppo1,a2c1,a2c8", help=f"comma-separated, from {sorted(CONFIGS)}")
    parser.add_argument("--timesteps", type=int, default=None, help="budget of every run (default: per config)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    th.set_num_threads(1)
    warnings.filterwarnings("ignore")
    print(f"torch {th.__version__}, threads {th.get_num_threads()}, pairs {args.pairs}, CartPole-v1, DummyVecEnv, CPU")
    run_lightning("a2c", 1, 100, args.seed)  # warm-up (lazy imports, first allocations)
    run_plain("a2c", 1, 100, args.seed)

    summary = []
    for name in [c.strip() for c in args.configs.split(",") if c.strip()]:
        algo, n_envs, default_steps = CONFIGS[name]
        timesteps = args.timesteps or default_steps
        print(f"\n{name}: {algo.upper()} n_envs={n_envs} timesteps={timesteps}")
        pairs = []
        for i in range(args.pairs):
            # alternate which variant goes first so that a slow-down drifting in time hits both equally
            if i % 2 == 0:
                lit = run_lightning(algo, n_envs, timesteps, args.seed)
                plain = run_plain(algo, n_envs, timesteps, args.seed)
            else:
                plain = run_plain(algo, n_envs, timesteps, args.seed)
                lit = run_lightning(algo, n_envs, timesteps, args.seed)
            assert (lit.steps, lit.iterations) == (plain.steps, plain.iterations), (lit, plain)
            res = {
                "total": lit.total / plain.total - 1,
                "loop": lit.loop / plain.loop - 1,
                "cpu_total": lit.cpu_total / plain.cpu_total - 1,
                "cpu_loop": lit.cpu_loop / plain.cpu_loop - 1,
                "cpu_us_step": (lit.cpu_loop - plain.cpu_loop) / lit.calls * 1e6,
                "in_situ": (lit.loop - lit.inside) / lit.inside,
                "in_situ_us": (lit.loop - lit.inside) / lit.calls * 1e6,
            }
            pairs.append(res)
            print(
                f"  pair {i}: wall total L {lit.total:.3f} s P {plain.total:.3f} s {res['total']:+.1%} | "
                f"wall loop L {lit.loop:.3f} s P {plain.loop:.3f} s {res['loop']:+.1%} | "
                f"CPU total {res['cpu_total']:+.1%} loop {res['cpu_loop']:+.1%} "
                f"({res['cpu_us_step']:+.0f} us CPU per training_step) | in situ {res['in_situ']:+.2%} "
                f"({res['in_situ_us']:.0f} us per training_step; {lit.calls} training_steps, {lit.iterations} "
                f"iterations, {lit.steps} env steps)",
                flush=True,
            )
        med = {key: statistics.median(p[key] for p in pairs) for key in pairs[0]}
        print(
            f"  median overhead: wall total {med['total']:+.1%}, wall loop {med['loop']:+.1%}, "
            f"CPU total {med['cpu_total']:+.1%}, CPU loop {med['cpu_loop']:+.1%} "
            f"({med['cpu_us_step']:+.0f} us per training_step); "
            f"in situ {med['in_situ']:+.2%} ({med['in_situ_us']:.0f} us per training_step)"
        )
        summary.append((name, med))

    print("\nSummary (median Lightning overhead vs plain loop; floor <= +10 %, target <= +3 %)")
    for name, med in summary:
        print(
            f"  {name}: wall total {med['total']:+.1%}  wall loop {med['loop']:+.1%}  "
            f"CPU total {med['cpu_total']:+.1%}  CPU loop {med['cpu_loop']:+.1%}  in situ {med['in_situ']:+.2%}"
        )


if __name__ == "__main__":
    main()
