"""TQC, QR-DQN and CrossQ against sb3-contrib 2.x, side by side: throughput and learning.

``speed``: sb3-contrib and lit_sb3 run interleaved (A, B, A, B, ...) with the same hyperparameters and seed, one
torch thread, no evaluation; each run warms up for ``learning_starts`` env steps (random actions, untimed) and is
timed over the following steps (``fps``: env steps per second, ratio lit/contrib, higher is better; ``train()``:
seconds per env step inside the gradient updates, ratio lit/contrib, lower is better). The timing helpers are
``bench_off_policy.py``'s.

``learning``: each algorithm on its test env (the settings of ``tests/test_contrib_off_policy.py``'s learning
tests), N seeds per library, final return of 10 deterministic episodes per seed, side by side.

Usage::

    python benchmarks/bench_contrib_off_policy.py speed --pairs 3
    python benchmarks/bench_contrib_off_policy.py speed --pairs 2 --only tqc-halfcheetah,crossq-halfcheetah
    python benchmarks/bench_contrib_off_policy.py learning --seeds 5 --only tqc-pendulum
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch as th

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_off_policy import Config, _make_callback, _Timer  # noqa: E402

NAMES = {"TQC": "TQC", "QRDQN": "QRDQN", "CrossQ": "CrossQ"}
QRDQN_CARTPOLE = dict(  # rl-baselines3-zoo's CartPole-v1 entry (zoo_configs/qrdqn.yml)
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256], n_quantiles=10),
)  # fmt: skip

SPEED = [
    Config("tqc-pendulum", "TQC", "Pendulum-v1", 300, dict(learning_starts=100)),
    Config("crossq-pendulum", "CrossQ", "Pendulum-v1", 300, dict(learning_starts=100)),
    Config("qrdqn-cartpole", "QRDQN", "CartPole-v1", 4000, QRDQN_CARTPOLE),
    Config("tqc-halfcheetah", "TQC", "HalfCheetah-v5", 200, dict(learning_starts=100)),
    Config("crossq-halfcheetah", "CrossQ", "HalfCheetah-v5", 200, dict(learning_starts=100)),
]

# (name, algo, env, budget, kwargs): the slow learning tests' settings (tests/test_contrib_off_policy.py)
TQC_PENDULUM = dict(learning_rate=1e-3, policy_kwargs=dict(net_arch=[64, 64]))
CROSSQ_PENDULUM = dict(policy_delay=2, policy_kwargs=dict(net_arch=[64, 64]))
LEARNING = [
    ("qrdqn-cartpole", "QRDQN", "CartPole-v1", 10_000, QRDQN_CARTPOLE),
    ("tqc-pendulum", "TQC", "Pendulum-v1", 5000, TQC_PENDULUM),
    ("crossq-pendulum", "CrossQ", "Pendulum-v1", 5000, CROSSQ_PENDULUM),
]


def _model(lib: str, algo: str, env_id: str, seed: int, kwargs: dict[str, Any]) -> Any:
    if lib == "contrib":
        import sb3_contrib

        return getattr(sb3_contrib, algo)("MlpPolicy", env_id, seed=seed, device="cpu", **kwargs)
    import lit_sb3

    return getattr(lit_sb3, algo)("MlpPolicy", seed=seed, device="cpu", **kwargs)


def _learn(lib: str, model: Any, env_id: str, total: int, root: str, callback: Any = None) -> None:
    if lib == "contrib":
        model.learn(total, callback=callback)
    else:
        model.learn(total, env=env_id, callback=callback, default_root_dir=root)


def _speed_run(lib: str, cfg: Config, seed: int, root: str) -> tuple[float, float]:
    """One timed run: (env steps per second, seconds per env step inside train())."""
    model = _model(lib, cfg.algo, cfg.env_id, seed, cfg.kwargs)
    timer = _Timer(model.train)
    model.train = timer  # type: ignore[method-assign]
    if lib == "contrib":
        from stable_baselines3.common.callbacks import BaseCallback
    else:
        from lit_sb3.callbacks.base import BaseCallback  # type: ignore[assignment]
    learning_starts = cfg.kwargs["learning_starts"]
    callback = _make_callback(BaseCallback, learning_starts, timer)
    _learn(lib, model, cfg.env_id, learning_starts + cfg.steps, root, callback)
    steps, elapsed = callback.n1 - callback.n0, callback.t1 - callback.t0
    return steps / elapsed, (callback.train1 - callback.train0) / steps


def speed(args: argparse.Namespace) -> None:
    configs = [c for c in SPEED if not args.only or c.name in args.only.split(",")]
    if args.steps is not None:
        configs = [Config(c.name, c.algo, c.env_id, args.steps, c.kwargs) for c in configs]
    summary = []
    with tempfile.TemporaryDirectory() as root:
        # import both libraries (and lightning) before timing anything
        warm = Config("warmup", "TQC", "Pendulum-v1", 2, dict(learning_starts=2))
        for lib in ("contrib", "lit"):
            _speed_run(lib, warm, args.seed, root)
        for cfg in configs:
            fps_ratios, train_ratios = [], []
            print(f"== {cfg.name} ({cfg.algo}, {cfg.env_id}, {cfg.steps} timed steps after learning_starts) ==")
            for pair in range(args.pairs):
                order = ("contrib", "lit") if pair % 2 == 0 else ("lit", "contrib")
                results = {lib: _speed_run(lib, cfg, args.seed, root) for lib in order}
                (fps_c, train_c), (fps_l, train_l) = results["contrib"], results["lit"]
                fps_ratios.append(fps_l / fps_c)
                train_ratios.append(train_l / train_c)
                print(
                    f"  pair {pair}: fps contrib {fps_c:7.1f}  lit {fps_l:7.1f}  ratio {fps_ratios[-1]:.2f}x | "
                    f"train() ms/step contrib {train_c * 1e3:7.3f}  lit {train_l * 1e3:7.3f}  ratio {train_ratios[-1]:.2f}x",
                    flush=True,
                )
            summary.append((cfg.name, statistics.median(fps_ratios), statistics.median(train_ratios), args.pairs))
    print("\n== summary (medians, lit_sb3 / sb3-contrib) ==")
    for name, fps, train, pairs in summary:
        print(f"  {name:20s} fps {fps:.2f}x   time in train() {train:.2f}x   ({pairs} pairs)")


def learning(args: argparse.Namespace) -> None:
    import gymnasium as gym

    configs = [c for c in LEARNING if not args.only or c[0] in args.only.split(",")]
    with tempfile.TemporaryDirectory() as root:
        for name, algo, env_id, budget, kwargs in configs:
            returns: dict[str, list[float]] = {"contrib": [], "lit": []}
            for seed in range(args.seeds):
                for lib in ("contrib", "lit"):
                    if lib == "contrib":
                        from stable_baselines3.common.evaluation import evaluate_policy
                    else:
                        from lit_sb3.core.evaluation import evaluate_policy  # type: ignore[assignment]
                    t0 = time.perf_counter()
                    model = _model(lib, algo, env_id, seed, kwargs)
                    _learn(lib, model, env_id, budget, root)
                    env = gym.make(env_id)
                    env.reset(seed=1000 + seed)
                    mean_return = float(evaluate_policy(model, env, n_eval_episodes=10)[0])
                    returns[lib].append(mean_return)
                    print(json.dumps(dict(config=name, lib=lib, seed=seed, budget=budget, mean_return=mean_return,
                                          seconds=round(time.perf_counter() - t0, 1))), flush=True)  # fmt: skip
            print(
                f"== {name}: {budget} env steps, {args.seeds} seeds, final return (10 episodes) ==\n"
                f"  contrib {' '.join(f'{r:8.1f}' for r in returns['contrib'])}   mean {statistics.mean(returns['contrib']):8.1f}\n"
                f"  lit     {' '.join(f'{r:8.1f}' for r in returns['lit'])}   mean {statistics.mean(returns['lit']):8.1f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_speed = sub.add_parser("speed", help="env steps/s, interleaved pairs")
    p_speed.add_argument("--pairs", type=int, default=3, help="sb3-contrib/lit_sb3 pairs per config")
    p_speed.add_argument("--only", type=str, default="", help=f"comma-separated: {', '.join(c.name for c in SPEED)}")
    p_speed.add_argument("--seed", type=int, default=0)
    p_speed.add_argument("--steps", type=int, default=None, help="timed env steps per run (default: per config)")
    p_learn = sub.add_parser("learning", help="final returns side by side")
    p_learn.add_argument("--seeds", type=int, default=5)
    p_learn.add_argument("--only", type=str, default="", help=f"comma-separated: {', '.join(c[0] for c in LEARNING)}")
    args = parser.parse_args()
    th.set_num_threads(1)
    known = {c.name for c in SPEED} | {c[0] for c in LEARNING}
    unknown = [n for n in args.only.split(",") if n and n not in known]
    if unknown:
        parser.error(f"unknown config {unknown[0]!r}; known: {', '.join(sorted(known))}")
    if args.command == "speed" and args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    speed(args) if args.command == "speed" else learning(args)


if __name__ == "__main__":
    main()
