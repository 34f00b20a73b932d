"""Throughput of lit_sb3's off-policy algorithms against SB3 2.x, side by side.

SB3 and lit_sb3 run interleaved (A, B, A, B, ...) with the same hyperparameters and seed, one torch thread,
no evaluation. Each run warms up for ``learning_starts`` env steps (random actions, untimed) and is timed over
the following ``--steps`` env steps (one gradient step per env step for SAC/TD3). Printed per pair:

* ``fps``: env steps per second after ``learning_starts`` (ratio lit/SB3: higher is better);
* ``outside``: time per env step spent outside the gradient updates (``train()``), i.e. action selection,
  env step, replay insertion, callbacks and the Lightning loop (ratio lit/SB3: lower is better).

Usage::

    python benchmarks/bench_off_policy.py                 # all configs, 3 pairs each
    python benchmarks/bench_off_policy.py --pairs 5 --only sac-pendulum,dqn-cartpole
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch as th

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
    Config("td3-pendulum", "TD3", "Pendulum-v1", 400, dict(learning_starts=100), noise_std=0.1),
    Config("sac-halfcheetah", "SAC", "HalfCheetah-v5", 300, dict(learning_starts=100)),
    Config("td3-halfcheetah", "TD3", "HalfCheetah-v5", 300, dict(learning_starts=100), noise_std=0.1),
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


def _make_callback(base_cls: type, learning_starts: int, timer: _Timer) -> Any:
    class TimingCallback(base_cls):  # type: ignore[misc, valid-type]
        """Starts the clock when ``learning_starts`` env steps were collected, stops it at the end of training."""

        def __init__(self) -> None:
            super().__init__()
            self.t0: float | None = None
            self.train0 = 0.0
            self.n0 = 0
            self.t1 = 0.0
            self.n1 = 0
            self.train1 = 0.0

        def _on_step(self) -> bool:
            if self.t0 is None and self.model.num_timesteps >= learning_starts:
                self.t0, self.train0, self.n0 = time.perf_counter(), timer.total, self.model.num_timesteps
            return True

        def _on_training_end(self) -> None:
            self.t1, self.train1, self.n1 = time.perf_counter(), timer.total, self.model.num_timesteps

    return TimingCallback()


def _run(lib: str, cfg: Config, seed: int, root: str) -> tuple[float, float]:
    """One timed run: (env steps per second, seconds per env step outside train())."""
    kwargs = dict(cfg.kwargs)
    learning_starts = kwargs["learning_starts"]
    total = learning_starts + cfg.steps
    if lib == "sb3":
        import gymnasium as gym
        import stable_baselines3 as sb3
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.noise import NormalActionNoise

        env = gym.make(cfg.env_id)
        if cfg.noise_std is not None:
            n = env.action_space.shape[0]
            kwargs["action_noise"] = NormalActionNoise(np.zeros(n), cfg.noise_std * np.ones(n))
        model = getattr(sb3, cfg.algo)("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
        timer = _Timer(model.train)
        model.train = timer  # type: ignore[method-assign]
        callback = _make_callback(BaseCallback, learning_starts, timer)
        model.learn(total, callback=callback)
    else:
        import gymnasium as gym

        import lit_sb3
        from lit_sb3.callbacks.base import BaseCallback as LitBaseCallback
        from lit_sb3.core.noise import NormalActionNoise as LitNormalActionNoise

        if cfg.noise_std is not None:
            n = gym.make(cfg.env_id).action_space.shape[0]
            kwargs["action_noise"] = LitNormalActionNoise(np.zeros(n), cfg.noise_std * np.ones(n))
        model = getattr(lit_sb3, cfg.algo)("MlpPolicy", seed=seed, device="cpu", **kwargs)
        timer = _Timer(model.train)
        model.train = timer  # type: ignore[method-assign]
        callback = _make_callback(LitBaseCallback, learning_starts, timer)
        model.learn(total, env=cfg.env_id, callback=callback, default_root_dir=root)
    steps = callback.n1 - callback.n0
    elapsed = callback.t1 - callback.t0
    return steps / elapsed, (elapsed - (callback.train1 - callback.train0)) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="SB3/lit_sb3 pairs per config")
    parser.add_argument("--only", type=str, default="", help="comma-separated config names")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    th.set_num_threads(1)
    configs = [c for c in CONFIGS if not args.only or c.name in args.only.split(",")]
    summary = []
    with tempfile.TemporaryDirectory() as root:
        # import both libraries (and lightning) before timing anything
        _run("lit", Config("warmup", "SAC", "Pendulum-v1", 2, dict(learning_starts=2)), args.seed, root)
        for cfg in configs:
            fps_ratios, outside_ratios = [], []
            print(f"== {cfg.name} ({cfg.algo}, {cfg.env_id}, {cfg.steps} timed steps after learning_starts) ==")
            for pair in range(args.pairs):
                order = ("sb3", "lit") if pair % 2 == 0 else ("lit", "sb3")
                results = {lib: _run(lib, cfg, args.seed, root) for lib in order}
                (fps_sb3, out_sb3), (fps_lit, out_lit) = results["sb3"], results["lit"]
                fps_ratios.append(fps_lit / fps_sb3)
                outside_ratios.append(out_lit / out_sb3)
                print(
                    f"  pair {pair}: fps sb3 {fps_sb3:7.1f}  lit {fps_lit:7.1f}  ratio {fps_ratios[-1]:.2f}x | "
                    f"outside train() ms/step sb3 {out_sb3 * 1e3:6.3f}  lit {out_lit * 1e3:6.3f}  ratio {outside_ratios[-1]:.2f}x"
                )
            med_fps, med_out = statistics.median(fps_ratios), statistics.median(outside_ratios)
            summary.append((cfg.name, med_fps, med_out))
            print(
                f"  median: fps ratio {med_fps:.2f}x (lit/SB3, higher is better), outside ratio {med_out:.2f}x (lower is better)"
            )
    print("\n== summary (medians, lit_sb3 / SB3) ==")
    for name, med_fps, med_out in summary:
        print(f"  {name:16s} fps {med_fps:.2f}x   time outside train() {med_out:.2f}x")


if __name__ == "__main__":
    main()
