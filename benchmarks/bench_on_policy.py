"""Throughput: SB3 vs lit_sb3 PPO and A2C on CartPole-v1 (SB3 defaults, 1 and 8 envs), interleaved pairs.

Usage: python benchmarks/bench_on_policy.py [--pairs 3] [--algos ppo,a2c] [--n-envs 1,8] [--timesteps N]

Both libraries get the same hyperparameters (each algorithm's SB3 defaults: PPO n_steps 2048, batch 64,
10 epochs, Adam; A2C n_steps 5, RMSprop), the same seed, ``DummyVecEnv`` with Monitor, CPU, one torch thread
and no logging (SB3: verbose 0, no tensorboard; lit_sb3: ``logger=False``). Runs alternate SB3, lit_sb3, SB3,
... . Model construction is not timed. For every pair it prints env-steps/s of each library and lit/SB3 for

* ``total``: the wall time of ``learn()`` / ``RLTrainer(...)`` + ``fit()`` (includes lit_sb3's Lightning
  start-up), and
* ``loop``: the training loop only (SB3: callback ``on_training_start`` -> ``on_training_end``; lit_sb3:
  Lightning ``on_train_start`` -> ``on_train_end``), i.e. the steady state,

and the same loop ratio in process CPU time (less sensitive to busy neighbours than wall time; one torch
thread, so CPU time is the work done), then the medians. It also prints lit_sb3's fixed start-up cost per fit (fit wall time minus loop time) and
the wall time of ``RLTrainer()`` + ``fit()`` with a tiny budget (one 5-step A2C iteration).
Ratios above 1 mean lit_sb3 is faster.
SB3 is imported here only (never from lit_sb3).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any, NamedTuple

import torch as th

DEFAULT_TIMESTEPS = {("ppo", 1): 8192, ("ppo", 8): 16384, ("a2c", 1): 8000, ("a2c", 8): 16000}


class Run(NamedTuple):
    """Timings of one run: wall and CPU seconds of the whole learn/fit and of the training loop alone."""

    total: float
    loop: float
    cpu_total: float
    cpu_loop: float
    steps: int


def _sb3_run(algo: str, n_envs: int, timesteps: int, seed: int) -> Run:
    """(learn wall s, loop wall s, env steps) of one SB3 run."""
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    marks: dict[str, float] = {}

    class _Timer(BaseCallback):
        def _on_training_start(self) -> None:
            marks["start"] = time.perf_counter()
            marks["cstart"] = time.process_time()

        def _on_step(self) -> bool:
            return True

        def _on_training_end(self) -> None:
            marks["end"] = time.perf_counter()
            marks["cend"] = time.process_time()

    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)
    cls = PPO if algo == "ppo" else A2C
    model = cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, tensorboard_log=None)
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(timesteps, callback=_Timer())
    total, cpu_total = time.perf_counter() - t0, time.process_time() - c0
    env.close()
    return Run(total, marks["end"] - marks["start"], cpu_total, marks["cend"] - marks["cstart"], model.num_timesteps)


def make_lit(algo: str, n_envs: int, seed: int) -> tuple[Any, Any]:
    """A lit_sb3 PPO/A2C with SB3's defaults and its CartPole-v1 datamodule, envs already built (not timed)."""
    from lit_sb3 import A2C, PPO, RLEnvDataModule

    cls = PPO if algo == "ppo" else A2C
    model = cls("MlpPolicy", seed=seed, device="cpu", verbose=0)
    dm = RLEnvDataModule(train_env="CartPole-v1", n_envs=n_envs, seed=seed)
    dm.get_env("fit")  # build the envs outside the timed region (SB3 builds them before learn() too)
    return model, dm


def loop_timer(marks: dict[str, float]) -> Any:
    """A Lightning callback that stores wall and CPU time at ``on_train_start``/``on_train_end`` in ``marks``."""
    from lightning.pytorch.callbacks import Callback

    class _Timer(Callback):
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            marks["start"] = time.perf_counter()
            marks["cstart"] = time.process_time()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            marks["end"] = time.perf_counter()
            marks["cend"] = time.process_time()

    return _Timer()


def _lit_run(algo: str, n_envs: int, timesteps: int, seed: int) -> Run:
    """(fit wall s, loop wall s, env steps) of one lit_sb3 run."""
    from lit_sb3 import RLTrainer

    marks: dict[str, float] = {}
    model, dm = make_lit(algo, n_envs, seed)
    # Trainer construction is part of lit_sb3's per-fit cost (learn() builds one)
    t0, c0 = time.perf_counter(), time.process_time()
    trainer = RLTrainer(max_steps=timesteps, logger=False, callbacks=[loop_timer(marks)])
    trainer.fit(model, datamodule=dm)
    total, cpu_total = time.perf_counter() - t0, time.process_time() - c0
    dm.close()
    return Run(total, marks["end"] - marks["start"], cpu_total, marks["cend"] - marks["cstart"], model.num_timesteps)


def _fmt_pair(i: int, sb3: Run, lit: Run) -> tuple[dict[str, float], str]:
    ratios = {
        "total": (lit.steps / lit.total) / (sb3.steps / sb3.total),
        "loop": (lit.steps / lit.loop) / (sb3.steps / sb3.loop),
        "cpu_loop": (lit.steps / lit.cpu_loop) / (sb3.steps / sb3.cpu_loop),
        "startup": lit.total - lit.loop,
    }
    line = (
        f"  pair {i}: total SB3 {sb3.steps / sb3.total:6.0f} lit {lit.steps / lit.total:6.0f} fps {ratios['total']:.2f}x | "
        f"loop SB3 {sb3.steps / sb3.loop:6.0f} lit {lit.steps / lit.loop:6.0f} fps {ratios['loop']:.2f}x | "
        f"loop CPU-time {ratios['cpu_loop']:.2f}x | lit start-up {ratios['startup']:.3f} s "
        f"(steps SB3 {sb3.steps}, lit {lit.steps})"
    )
    return ratios, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--algos", default="ppo,a2c")
    parser.add_argument("--n-envs", default="1,8")
    parser.add_argument("--timesteps", type=int, default=None, help="budget of every run (default: per config)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    th.set_num_threads(1)
    warnings.filterwarnings("ignore")
    algos = [a.strip().lower() for a in args.algos.split(",") if a.strip()]
    n_envs_list = [int(n) for n in args.n_envs.split(",") if n.strip()]
    print(f"torch {th.__version__}, threads {th.get_num_threads()}, pairs {args.pairs}, CartPole-v1, DummyVecEnv, CPU")

    # warm-up: imports, first-call allocations, Lightning's lazy imports
    _sb3_run("a2c", 1, 200, args.seed)
    _lit_run("a2c", 1, 200, args.seed)

    # lit_sb3's fixed cost per fit: Trainer() + fit() with a tiny budget (one A2C iteration of 5 env steps)
    tiny = [_lit_run("a2c", 1, 5, args.seed) for _ in range(5)]
    print(
        f"lit_sb3 tiny fit (Trainer() + fit(), one 5-step A2C iteration): median "
        f"{statistics.median(t.total for t in tiny) * 1e3:.1f} ms, of which outside the training loop "
        f"{statistics.median(t.total - t.loop for t in tiny) * 1e3:.1f} ms"
    )

    summary = []
    for algo in algos:
        for n_envs in n_envs_list:
            timesteps = args.timesteps or DEFAULT_TIMESTEPS.get((algo, n_envs), 8192 * max(1, n_envs // 4))
            print(f"\n{algo.upper()} n_envs={n_envs} timesteps={timesteps}")
            pairs = []
            for i in range(args.pairs):
                sb3 = _sb3_run(algo, n_envs, timesteps, args.seed)
                lit = _lit_run(algo, n_envs, timesteps, args.seed)
                ratios, line = _fmt_pair(i, sb3, lit)
                print(line, flush=True)
                pairs.append(ratios)
            med = {key: statistics.median(p[key] for p in pairs) for key in pairs[0]}
            print(
                f"  median lit/SB3: total {med['total']:.2f}x, loop (steady state) {med['loop']:.2f}x, "
                f"loop CPU-time {med['cpu_loop']:.2f}x; lit start-up per fit (Trainer() + fit - loop) {med['startup']:.3f} s"
            )
            summary.append((algo, n_envs, med))

    print("\nSummary (median lit/SB3 env-steps/s; floor 1.0x, target 1.5x)")
    for algo, n_envs, med in summary:
        print(
            f"  {algo.upper():3s} n_envs={n_envs}: total {med['total']:.2f}x  loop {med['loop']:.2f}x  loop CPU-time {med['cpu_loop']:.2f}x"
        )


if __name__ == "__main__":
    main()
