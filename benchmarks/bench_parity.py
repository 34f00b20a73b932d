"""Learning parity of lit_sb3 with Stable-Baselines3 2.x: final returns side by side, many seeds.

For one (algo, env) pair, both libraries train at the RL Zoo's settings (``zoo_configs/<algo>.yml`` resolved by
:func:`lit_sb3.zoo.config.resolve`; SB3 gets the very same values), interleaved (seed i of lit_sb3, then seed i
of SB3, ...), on CPU with one torch thread. The score of a run is its final deterministic evaluation over
``--eval-episodes`` (10) episodes on a separate env seeded ``seed + 10_000``. Printed: the final return of every
seed, mean ± std per library, P(lit_sb3 > SB3) with its 95 % stratified-bootstrap CI
(:func:`lit_sb3.zoo.stats.improvement_intervals`), and the fps ratio lit/SB3 (env steps per second of
``learn``/``fit``, evaluation excluded). ``--json OUT`` writes the whole table.

Usage::

    python benchmarks/bench_parity.py --algo dqn --env CartPole-v1 --seeds 10
    python benchmarks/bench_parity.py --algo a2c --env CartPole-v1 --seeds 5 --n-timesteps 100000 --json a2c.json
    python benchmarks/bench_parity.py --algo ppo --env CartPole-v1 --seeds 10 --seed-offset 10   # seeds 10-19
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

ALGOS = ("ppo", "a2c", "sac", "td3", "ddpg", "dqn")
LIBRARIES = ("lit_sb3", "sb3")


def _sb3_value(value: Any) -> Any:
    """A resolved hyperparameter value as SB3 takes it (lit_sb3 schedules -> SB3 schedules)."""
    from stable_baselines3.common.utils import ConstantSchedule, LinearSchedule

    from lit_sb3.core import schedules

    if isinstance(value, schedules.LinearSchedule):
        return LinearSchedule(value.start, value.end, value.end_fraction)
    if isinstance(value, schedules.ConstantSchedule):
        return ConstantSchedule(value.value)
    if isinstance(value, dict):
        return {k: _sb3_value(v) for k, v in value.items()}
    if isinstance(value, type) and value.__module__.startswith("lit_sb3"):
        raise ValueError(
            f"bench_parity: hyperparameter value {value!r} is a lit_sb3 class with no SB3 counterpart here"
        )
    return value


def _action_noise(spec: dict[str, Any] | None, n_actions: int, library: str) -> Any:
    """The zoo's ``noise_type``/``noise_std`` for either library (normal or Ornstein-Uhlenbeck)."""
    if spec is None:
        return None
    if library == "sb3":
        from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
    else:
        from lit_sb3.core.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
    mean, sigma = spec["mean"] * np.ones(n_actions), spec["sigma"] * np.ones(n_actions)
    if spec["kind"] == "normal":
        return NormalActionNoise(mean, sigma)
    if spec["kind"] == "ornstein-uhlenbeck":
        return OrnsteinUhlenbeckActionNoise(mean, sigma)
    raise ValueError(
        f"bench_parity: unsupported action noise kind {spec['kind']!r}; allowed: normal, ornstein-uhlenbeck"
    )


def resolve_config(algo: str, env_id: str) -> Any:
    """The zoo's settings for (algo, env), checked for what this benchmark supports (errors before training)."""
    from lit_sb3.zoo.config import resolve

    if algo not in ALGOS:
        import difflib

        close = difflib.get_close_matches(algo, ALGOS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SystemExit(f"bench_parity: unknown --algo {algo!r}{hint}; allowed: {', '.join(ALGOS)}")
    cfg = resolve(algo, env_id)
    unsupported = [
        name
        for name in ("env_wrapper", "vec_env_wrapper", "frame_stack", "callback", "env_kwargs", "monitor_kwargs")
        if getattr(cfg, name)
    ]
    if unsupported:
        raise SystemExit(
            f"bench_parity: the zoo entry of {algo} on {env_id} sets {', '.join(unsupported)}, which this benchmark "
            "does not reproduce for SB3; use a classic-control env without wrappers"
        )
    return cfg


def _make_envs(library: str, cfg: Any, seed: int) -> tuple[Any, Any]:
    """Training VecEnv (``n_envs`` copies, Monitor) and evaluation VecEnv (1 copy, seed + 10,000) of a library."""
    if library == "sb3":
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import VecNormalize
    else:
        from lit_sb3.vec_env import VecNormalize, make_vec_env
    env = make_vec_env(cfg.env_id, n_envs=cfg.n_envs, seed=seed)
    eval_env = make_vec_env(cfg.env_id, n_envs=1, seed=seed + 10_000)
    if cfg.normalize:
        env = VecNormalize(env, **cfg.normalize_kwargs)
        eval_env = VecNormalize(eval_env, **{**cfg.normalize_kwargs, "training": False, "norm_reward": False})
    return env, eval_env


def run_one(library: str, algo: str, cfg: Any, seed: int, n_timesteps: int, eval_episodes: int) -> dict[str, Any]:
    """Train one seed of one library and evaluate it: ``{"return", "fps", "seconds"}``."""
    kwargs = dict(cfg.algo_kwargs)
    noise = kwargs.pop("action_noise", None)
    env, eval_env = _make_envs(library, cfg, seed)
    if noise is not None:
        kwargs["action_noise"] = _action_noise(noise, int(env.action_space.shape[0]), library)
    if library == "sb3":
        import stable_baselines3 as sb3
        from stable_baselines3.common.evaluation import evaluate_policy

        sb3_kwargs = {k: (v if k == "action_noise" else _sb3_value(v)) for k, v in kwargs.items()}
        model = getattr(sb3, algo.upper())(cfg.policy, env, seed=seed, device="cpu", verbose=0, **sb3_kwargs)
        start = time.perf_counter()
        model.learn(n_timesteps)
        seconds = time.perf_counter() - start
    else:
        import lit_sb3
        from lit_sb3.core.evaluation import evaluate_policy
        from lit_sb3.datamodule import RLEnvDataModule

        model = getattr(lit_sb3, algo.upper())(cfg.policy, seed=seed, device="cpu", verbose=0, **kwargs)
        trainer = model.create_trainer(max_steps=n_timesteps, logger=False)
        start = time.perf_counter()
        trainer.fit(model, datamodule=RLEnvDataModule(train_env=env))
        seconds = time.perf_counter() - start
    if cfg.normalize:
        eval_env.obs_rms = env.obs_rms
    mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=True)
    env.close()
    eval_env.close()
    return {"return": float(mean_return), "fps": model.num_timesteps / seconds, "seconds": seconds}


def parity(
    algo: str,
    env_id: str,
    seeds: int,
    n_timesteps: int | None = None,
    seed_offset: int = 0,
    eval_episodes: int = 10,
    reps: int = 10_000,
    verbose: bool = True,
) -> dict[str, Any]:
    """Run the interleaved comparison and return the table (what ``--json`` writes).

    Args:
        algo: one of ``ppo, a2c, sac, td3, ddpg, dqn``.
        env_id: gymnasium env id (classic control).
        seeds: number of seeds per library.
        n_timesteps: env-step budget (None: the zoo's ``n_timesteps``).
        seed_offset: first seed.
        eval_episodes: deterministic evaluation episodes at the end of each run.
        reps: bootstrap replications of the CI.
        verbose: print one line per run.
    """
    from lit_sb3.zoo.stats import improvement_intervals

    if seeds < 1:
        raise SystemExit(f"bench_parity: --seeds must be >= 1, got {seeds}")
    cfg = resolve_config(algo, env_id)
    budget = n_timesteps if n_timesteps is not None else cfg.n_timesteps
    if budget is None or budget < 1:
        raise SystemExit(f"bench_parity: no n_timesteps for {algo} on {env_id} in the zoo configs; pass --n-timesteps")
    th.set_num_threads(1)
    runs: dict[str, list[dict[str, Any]]] = {lib: [] for lib in LIBRARIES}
    for seed in range(seed_offset, seed_offset + seeds):
        for lib in LIBRARIES:
            out = run_one(lib, algo, cfg, seed, budget, eval_episodes)
            runs[lib].append({"seed": seed, **out})
            if verbose:
                print(f"  seed {seed:3d} {lib:8s} return {out['return']:9.2f}  fps {out['fps']:8.1f}", flush=True)
    returns = {lib: np.array([r["return"] for r in runs[lib]]) for lib in LIBRARIES}
    ci = improvement_intervals({lib: returns[lib][:, None] for lib in LIBRARIES}, reps=reps, seed=0)[LIBRARIES]
    fps_ratio = sum(r["fps"] for r in runs["lit_sb3"]) / sum(r["fps"] for r in runs["sb3"])
    return {
        "algo": algo,
        "env": env_id,
        "n_timesteps": budget,
        "seeds": list(range(seed_offset, seed_offset + seeds)),
        "eval_episodes": eval_episodes,
        "hyperparameters": cfg.to_jsonable()["algo_kwargs"],
        "runs": runs,
        "summary": {
            lib: {
                "mean": float(returns[lib].mean()),
                "std": float(returns[lib].std(ddof=1)) if seeds > 1 else 0.0,
                "fps": float(np.mean([r["fps"] for r in runs[lib]])),
            }
            for lib in LIBRARIES
        },
        "p_lit_better": {"value": ci.point, "low": ci.low, "high": ci.high},
        "fps_ratio": fps_ratio,
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    import stable_baselines3

    import lit_sb3

    return {
        "stable_baselines3": stable_baselines3.__version__,
        "lit_sb3": getattr(lit_sb3, "__version__", "?"),
        "torch": th.__version__,
    }


def format_table(table: dict[str, Any]) -> str:
    """The table as text: per-seed returns, mean ± std, P(lit_sb3 > SB3) [CI], fps ratio."""
    lines = [
        f"{table['algo']} on {table['env']}, {table['n_timesteps']} env steps, seeds {table['seeds'][0]}..{table['seeds'][-1]}"
    ]
    lines.append(f"{'seed':>5} {'lit_sb3':>10} {'sb3':>10}")
    for a, b in zip(table["runs"]["lit_sb3"], table["runs"]["sb3"], strict=True):
        lines.append(f"{a['seed']:5d} {a['return']:10.2f} {b['return']:10.2f}")
    for lib in LIBRARIES:
        s = table["summary"][lib]
        lines.append(f"{lib:8s} mean {s['mean']:9.2f} ± {s['std']:7.2f}   fps {s['fps']:8.1f}")
    p = table["p_lit_better"]
    lines.append(f"P(lit_sb3 > SB3) = {p['value']:.2f}  95% CI [{p['low']:.2f}, {p['high']:.2f}]")
    lines.append(f"fps ratio lit_sb3/SB3 = {table['fps_ratio']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", required=True, help=f"one of {', '.join(ALGOS)}")
    parser.add_argument("--env", required=True, help="gymnasium env id (classic control)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per library (default 5)")
    parser.add_argument("--n-timesteps", type=int, default=None, help="env-step budget (default: the zoo's)")
    parser.add_argument("--seed-offset", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--eval-episodes", type=int, default=10, help="final deterministic episodes (default 10)")
    parser.add_argument("--json", type=Path, default=None, help="write the table to this JSON file")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    table = parity(args.algo.lower(), args.env, args.seeds, args.n_timesteps, args.seed_offset, args.eval_episodes)
    print(format_table(table))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(table, indent=1, allow_nan=True))
    return table


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
