"""Throughput of lit_sb3's off-policy algorithms against SB3 2.x (and SBX, the JAX port), side by side.

The implementations run interleaved (the order rotates each repetition) with the same hyperparameters and seed,
one thread (torch: ``set_num_threads(1)``; JAX: XLA's single-threaded CPU runtime, set before JAX is imported),
no evaluation. Each run warms up for ``learning_starts`` env steps (random actions) plus ``--warm-updates`` steps
with updates (so that JIT compilation, SBX's ``jax.jit`` and lit_sb3's ``compile_update=True``, is not timed), and
is timed over the following ``--steps`` env steps (one gradient step per env step for SAC/TD3). Arms
(``--arms``): ``sb3``, ``lit`` (eager), ``lit-compiled`` (``compile_update=True``; SAC/TD3 only) and ``sbx`` (when
sbx-rl is installed: the ``bench`` extra; SAC/TD3/DQN). Printed per repetition, for each arm:

* ``fps``: env steps per second in the timed window, and each arm's ratio to SB3 (higher is better);
* ``outside``: time per env step spent outside the gradient updates (``train()``), i.e. action selection,
  env step, replay insertion, callbacks and the Lightning loop (ratio to SB3: lower is better).

and per config the median of each ratio (lit / SB3, lit / SBX, ...), with the load average at the start and end.

Usage::

    python benchmarks/bench_off_policy.py                 # all configs, 3 repetitions, every arm available
    python benchmarks/bench_off_policy.py --pairs 5 --only sac-pendulum,dqn-cartpole --arms sb3,lit
    taskset -c 0 python benchmarks/bench_off_policy.py --only sac-halfcheetah,td3-halfcheetah,sac-pendulum,td3-pendulum \\
        --arms sb3,sbx,lit,lit-compiled --steps 3000 --pairs 3     # the issue-34 table
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# JAX (SBX) on one CPU thread, like torch below; must be set before jax is imported
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import torch as th  # noqa: E402

warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)


@dataclass
class Config:
    name: str
    algo: str
    env_id: str
    steps: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    noise_std: float | None = None


CONFIGS = [
    Config("sac-pendulum", "SAC", "Pendulum-v1", 400, dict(learning_starts=100)),
    # TD3 at SB3's default network (400-300), given explicitly: SBX's default is 256-256
    Config(
        "td3-pendulum",
        "TD3",
        "Pendulum-v1",
        400,
        dict(learning_starts=100, policy_kwargs=dict(net_arch=[400, 300])),
        noise_std=0.1,
    ),
    Config("sac-halfcheetah", "SAC", "HalfCheetah-v5", 300, dict(learning_starts=100)),
    Config(
        "td3-halfcheetah",
        "TD3",
        "HalfCheetah-v5",
        300,
        dict(learning_starts=100, policy_kwargs=dict(net_arch=[400, 300])),
        noise_std=0.1,
    ),
    # rl-baselines3-zoo's CartPole-v1 hyperparameters
    Config(
        "dqn-cartpole",
        "DQN",
        "CartPole-v1",
        4000,
        dict(
            learning_rate=2.3e-3,
            batch_size=64,
            buffer_size=100_000,
            learning_starts=1000,
            gamma=0.99,
            target_update_interval=10,
            train_freq=256,
            gradient_steps=128,
            exploration_fraction=0.16,
            exploration_final_eps=0.04,
            policy_kwargs=dict(net_arch=[256, 256]),
        ),
    ),
]


class _Timer:
    """Wraps ``model.train`` to accumulate the time spent in gradient updates."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.total = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = self.fn(*args, **kwargs)
        self.total += time.perf_counter() - t0
        return out


def _make_callback(base_cls: type, start_at: int, timer: _Timer) -> Any:
    class TimingCallback(base_cls):  # type: ignore[misc, valid-type]
        """Starts the clock when ``start_at`` env steps were collected, stops it at the end of training."""

        def __init__(self) -> None:
            super().__init__()
            self.t0: float | None = None
            self.train0 = 0.0
            self.n0 = 0
            self.t1 = 0.0
            self.n1 = 0
            self.train1 = 0.0

        def _on_step(self) -> bool:
            if self.t0 is None and self.model.num_timesteps >= start_at:
                self.t0, self.train0, self.n0 = time.perf_counter(), timer.total, self.model.num_timesteps
            return True

        def _on_training_end(self) -> None:
            self.t1, self.train1, self.n1 = time.perf_counter(), timer.total, self.model.num_timesteps

    return TimingCallback()


def _sb3_style(module: Any, cfg: Config, kwargs: dict[str, Any], seed: int) -> Any:
    """An SB3-API model (SB3 or SBX) of ``cfg`` on a gymnasium env."""
    import gymnasium as gym
    from stable_baselines3.common.noise import NormalActionNoise

    env = gym.make(cfg.env_id)
    if cfg.noise_std is not None:
        n = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n), cfg.noise_std * np.ones(n))
    extra = {} if module.__name__ == "sbx" else {"device": "cpu"}
    return getattr(module, cfg.algo)("MlpPolicy", env, seed=seed, **extra, **kwargs)


def _run(arm: str, cfg: Config, seed: int, root: str, steps: int, warm: int) -> tuple[float, float]:
    """One timed run of ``arm``: (env steps per second, seconds per env step outside train())."""
    kwargs = copy.deepcopy(cfg.kwargs)  # libraries write into policy_kwargs
    start_at = kwargs["learning_starts"] + warm
    total = start_at + steps
    if arm in ("sb3", "sbx"):
        from stable_baselines3.common.callbacks import BaseCallback

        if arm == "sb3":
            import stable_baselines3 as module
        else:
            import sbx as module
        model = _sb3_style(module, cfg, kwargs, seed)
        timer = _Timer(model.train)
        model.train = timer  # type: ignore[method-assign]
        callback = _make_callback(BaseCallback, start_at, timer)
        model.learn(total, callback=callback)
    else:
        import gymnasium as gym

        import lit_sb3
        from lit_sb3.callbacks.base import BaseCallback as LitBaseCallback
        from lit_sb3.core.noise import NormalActionNoise as LitNormalActionNoise

        if cfg.noise_std is not None:
            n = gym.make(cfg.env_id).action_space.shape[0]
            kwargs["action_noise"] = LitNormalActionNoise(np.zeros(n), cfg.noise_std * np.ones(n))
        if arm == "lit-compiled":
            kwargs["compile_update"] = True
        model = getattr(lit_sb3, cfg.algo)("MlpPolicy", seed=seed, device="cpu", **kwargs)
        timer = _Timer(model.train)
        model.train = timer  # type: ignore[method-assign]
        callback = _make_callback(LitBaseCallback, start_at, timer)
        model.learn(total, env=cfg.env_id, callback=callback, default_root_dir=root)
    n_steps = callback.n1 - callback.n0
    elapsed = callback.t1 - callback.t0
    return n_steps / elapsed, (elapsed - (callback.train1 - callback.train0)) / n_steps


def _arms(requested: str, cfg: Config) -> list[str]:
    """The arms that run ``cfg``: SBX only where it is installed and has the algorithm, the compiled lit_sb3 arm
    only for the algorithms that take ``compile_update``."""
    arms = []
    for arm in requested.split(","):
        if arm == "sbx":
            try:
                import sbx
            except ImportError:
                print("  (sbx-rl is not installed: no SBX arm; pip install sbx-rl, or the bench extra)")
                continue
            if not hasattr(sbx, cfg.algo) or cfg.algo == "DQN":
                continue
        if arm == "lit-compiled" and cfg.algo not in ("SAC", "TD3", "DDPG"):
            continue
        arms.append(arm)
    return arms


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="repetitions per config (each runs every arm once)")
    parser.add_argument("--only", type=str, default="", help="comma-separated config names")
    parser.add_argument("--arms", type=str, default="sb3,lit,lit-compiled,sbx",
                        help="comma-separated: sb3, lit, lit-compiled, sbx (default: all)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=None, help="timed env steps per run (default: the config's)")
    parser.add_argument("--warm-updates", type=int, default=20,
                        help="env steps with updates after learning_starts before the clock starts (JIT warm-up)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    known = {"sb3", "lit", "lit-compiled", "sbx"}
    bad = [a for a in args.arms.split(",") if a not in known]
    if bad or "sb3" not in args.arms.split(","):
        parser.error(f"--arms: expected a comma-separated subset of {sorted(known)} including sb3, got {args.arms!r}")
    th.set_num_threads(1)
    configs = [c for c in CONFIGS if not args.only or c.name in args.only.split(",")]
    summary = []
    with tempfile.TemporaryDirectory() as root:
        # import both libraries (and lightning) before timing anything
        _run("lit", Config("warmup", "SAC", "Pendulum-v1", 2, dict(learning_starts=2)), args.seed, root, 2, 0)
        for cfg in configs:
            steps = args.steps or cfg.steps
            arms = _arms(args.arms, cfg)
            print(f"== {cfg.name} ({cfg.algo}, {cfg.env_id}, {steps} timed steps after learning_starts + "
                  f"{args.warm_updates}; arms {', '.join(arms)}; {_load()}) ==", flush=True)  # fmt: skip
            ratios: dict[str, list[float]] = {}
            for rep in range(args.pairs):
                order = arms[rep % len(arms) :] + arms[: rep % len(arms)]
                results = {arm: _run(arm, cfg, args.seed, root, steps, args.warm_updates) for arm in order}
                fps_sb3, out_sb3 = results["sb3"]
                parts = []
                for arm in arms:
                    fps, out = results[arm]
                    parts.append(f"{arm} {fps:7.1f} fps ({fps / fps_sb3:.2f}x), outside {out * 1e3:6.3f} ms "
                                 f"({out / out_sb3:.2f}x)")  # fmt: skip
                    if arm != "sb3":
                        ratios.setdefault(f"{arm}/sb3", []).append(fps / fps_sb3)
                        ratios.setdefault(f"{arm}/sb3 outside", []).append(out / out_sb3)
                    if arm.startswith("lit") and "sbx" in results:
                        ratios.setdefault(f"{arm}/sbx", []).append(fps / results["sbx"][0])
                print(f"  rep {rep}: " + " | ".join(parts), flush=True)
            medians = {name: statistics.median(values) for name, values in ratios.items()}
            summary.append((cfg.name, medians))
            print("  median fps ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in medians.items()) + f" ({_load()})")
    print("\n== summary (median env-steps/s ratios; 'outside' = time outside train(), lower is better) ==")
    for name, medians in summary:
        print(f"  {name:16s} " + ", ".join(f"{k} {v:.2f}x" for k, v in medians.items()))


if __name__ == "__main__":
    main()
