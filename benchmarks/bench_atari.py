"""Atari facts, lit_sb3 vs SB3: replay memory per transition (DQN, 1M buffer) and CnnPolicy env steps/s.

Usage: python benchmarks/bench_atari.py [--pairs 3] [--env BreakoutNoFrameskip-v4] [--algos ppo,dqn]
       [--ppo-timesteps 2048] [--dqn-timesteps 3000] [--memory-only]

Memory: a ``ReplayBuffer`` of each library for the zoo's DQN Atari observations (4 stacked 84x84 uint8 frames,
channel first, as VecTransposeImage gives them) and Discrete actions, with and without
``optimize_memory_usage``. Bytes per transition are the ``nbytes`` of the buffer's arrays divided by
``buffer_size`` (per-transition storage does not depend on the size; a 10,000-slot buffer is measured and the
1M-buffer total is that times 1e6, since allocating 28 GB here is not possible).

Speed: PPO and DQN with ``CnnPolicy`` on one game, each library's ``make_atari_env`` + ``VecFrameStack(4)``,
the zoo's Atari hyperparameters (PPO: 8 envs, n_steps 128, 4 epochs, batch 256; DQN: 1 env, train_freq 4,
batch 32, buffer 10,000 here, learning_starts 1,000), same seed, CPU, one torch thread, no logging. Runs
alternate SB3, lit_sb3, SB3, ... (interleaved pairs). For each pair: env steps/s of the training loop (SB3:
``on_training_start`` -> ``on_training_end``; lit_sb3: Lightning ``on_train_start`` -> ``on_train_end``) and
the ratio lit/SB3 (above 1: lit_sb3 is faster), then the medians. SB3 is imported here only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch as th

PPO_KWARGS = dict(n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4, clip_range=0.1, vf_coef=0.5,
                  ent_coef=0.01)  # fmt: skip
DQN_KWARGS = dict(buffer_size=10_000, learning_rate=1e-4, batch_size=32, learning_starts=1000,
                  target_update_interval=1000, train_freq=4, gradient_steps=1, exploration_fraction=0.1,
                  exploration_final_eps=0.01, optimize_memory_usage=False)  # fmt: skip
N_ENVS = {"ppo": 8, "dqn": 1}


def replay_bytes(buffer_size: int = 10_000) -> dict[str, dict[str, float]]:
    """Bytes per stored transition of SB3's and lit_sb3's ReplayBuffer for the zoo's DQN Atari data.

    Args:
        buffer_size: slots of the measured buffers.
    """
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    from lit_sb3.buffers import ReplayBuffer

    obs_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    act_space = spaces.Discrete(4)
    out: dict[str, dict[str, float]] = {}
    for optimize in (False, True):
        kwargs = dict(optimize_memory_usage=optimize, handle_timeout_termination=not optimize)
        for name, cls in (("sb3", SB3ReplayBuffer), ("lit_sb3", ReplayBuffer)):
            buf = cls(buffer_size, obs_space, act_space, device="cpu", **kwargs)
            arrays = [getattr(buf, a, None) for a in ("observations", "next_observations", "actions", "rewards", "dones",
                                                 "timeouts")]  # fmt: skip
            nbytes = sum(int(a.nbytes) for a in arrays if a is not None)
            obs_dtype = str(buf.observations.dtype)
            out[f"{name}{' (optimize_memory_usage)' if optimize else ''}"] = {
                "bytes_per_transition": nbytes / buffer_size,
                "obs_dtype": obs_dtype,  # type: ignore[dict-item]
            }
    return out


def _sb3_run(algo: str, env_id: str, timesteps: int, seed: int) -> tuple[float, int]:
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    marks: dict[str, float] = {}

    class _Timer(BaseCallback):
        def _on_training_start(self) -> None:
            marks["start"] = time.perf_counter()

        def _on_step(self) -> bool:
            return True

        def _on_training_end(self) -> None:
            marks["end"] = time.perf_counter()

    env = VecFrameStack(make_atari_env(env_id, n_envs=N_ENVS[algo], seed=seed), 4)
    cls, kwargs = (PPO, PPO_KWARGS) if algo == "ppo" else (DQN, DQN_KWARGS)
    model = cls("CnnPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)  # type: ignore[arg-type]
    model.learn(timesteps, callback=_Timer())
    env.close()
    return marks["end"] - marks["start"], int(model.num_timesteps)


def _lit_run(algo: str, env_id: str, timesteps: int, seed: int) -> tuple[float, int]:
    from lightning.pytorch.callbacks import Callback

    from lit_sb3 import DQN, PPO, RLEnvDataModule, RLTrainer
    from lit_sb3.vec_env import VecFrameStack, make_atari_env

    marks: dict[str, float] = {}

    class _Timer(Callback):
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            marks["start"] = time.perf_counter()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            marks["end"] = time.perf_counter()

    env = VecFrameStack(make_atari_env(env_id, n_envs=N_ENVS[algo], seed=seed), 4)
    cls, kwargs = (PPO, PPO_KWARGS) if algo == "ppo" else (DQN, DQN_KWARGS)
    model = cls("CnnPolicy", seed=seed, device="cpu", verbose=0, **kwargs)  # type: ignore[arg-type]
    dm = RLEnvDataModule(train_env=env, seed=seed)
    trainer = RLTrainer(max_steps=timesteps, logger=False, callbacks=[_Timer()])
    trainer.fit(model, datamodule=dm)
    dm.close()
    return marks["end"] - marks["start"], int(model.num_timesteps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--env", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--algos", default="ppo,dqn")
    parser.add_argument("--ppo-timesteps", type=int, default=2048)
    parser.add_argument("--dqn-timesteps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory-only", action="store_true")
    args = parser.parse_args()
    th.set_num_threads(1)

    print("replay memory per transition (4x84x84 uint8 obs, Discrete actions); 1M buffer = x 1e6:")
    for name, row in replay_bytes().items():
        per = row["bytes_per_transition"]
        print(f"  {name:40s} {per:10,.0f} B/transition  {per * 1e6 / 2**30:6.1f} GiB per 1M  obs {row['obs_dtype']}")
    if args.memory_only:
        return

    from lit_sb3.vec_env import check_env_id

    check_env_id(args.env)  # registers the ALE ids (SB3's make_atari_env needs them registered)

    for algo in [a.strip() for a in args.algos.split(",") if a.strip()]:
        timesteps = args.ppo_timesteps if algo == "ppo" else args.dqn_timesteps
        ratios = []
        print(f"{algo} CnnPolicy on {args.env}, {timesteps} env steps per run, {N_ENVS[algo]} env(s):")
        for pair in range(args.pairs):
            t_sb3, n_sb3 = _sb3_run(algo, args.env, timesteps, args.seed)
            t_lit, n_lit = _lit_run(algo, args.env, timesteps, args.seed)
            fps_sb3, fps_lit = n_sb3 / t_sb3, n_lit / t_lit
            ratios.append(fps_lit / fps_sb3)
            print(f"  pair {pair}: SB3 {fps_sb3:7.1f} lit {fps_lit:7.1f} env steps/s  ratio {ratios[-1]:.2f}x "
                  f"(steps SB3 {n_sb3}, lit {n_lit})", flush=True)  # fmt: skip
        print(f"  median ratio lit/SB3 over {len(ratios)} pairs: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
