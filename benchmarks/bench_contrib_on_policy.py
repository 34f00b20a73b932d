"""MaskablePPO and RecurrentPPO: lit_sb3 against sb3-contrib 2.9 side by side, throughput and learning.

Usage:
  python benchmarks/bench_contrib_on_policy.py speed [--pairs 3] [--algos ppo_mask,ppo_lstm] [--n-envs 1,8]
  python benchmarks/bench_contrib_on_policy.py learn [--seeds 5 | --seed-list 0,3] [--algos ppo_mask,ppo_lstm]
  python benchmarks/bench_contrib_on_policy.py lockstep [--seed 5] [--iterations 80]      # RecurrentPPO, forced

``speed``: env steps/s of lit_sb3 over sb3-contrib at the same settings (sb3-contrib's defaults: MaskablePPO
n_steps 2048, batch 64, 10 epochs on ``InvalidActionDiscrete-v0``; RecurrentPPO n_steps 128, batch 128, 10 epochs,
LSTM 256 on ``CartPoleNoVel-v1``), same seed, DummyVecEnv with Monitor, CPU, one torch thread, no logging, runs
interleaved (contrib, lit, contrib, ...), model construction not timed. Per pair: ``total`` (learn / Trainer + fit
wall time) and ``loop`` (training loop only) ratios, then medians. Floor 1.0x, target 1.5x.

``learn``: final returns (10 deterministic evaluation episodes on a separate env, masks used for the maskable
models) of each seed, side by side, at the same settings (:data:`LEARN`), plus lit_sb3's plain PPO at the same budget
as the baseline that masking / memory must beat.

Reading the RecurrentPPO comparison: with the same seed both libraries start from the same weights, the same env
seeds and the same sampled actions, and collect and update identically (tests/test_ppo_recurrent.py,
``test_collection_and_learn_lockstep_with_sb3_contrib``); they drift apart only by float rounding (fused Adam,
``foreach`` norms: ~1e-7 after a few updates) until one sampled action flips, after which the runs are independent
draws (seed 1, traced per iteration: 2.5e-7 apart after 10 updates, no action differs until update 22, then
apart; lit_sb3 with non-fused Adam alone scores 81.7 instead of 137.7 on that seed). At 20k steps the final
return of a seed swings from ~70 to ~430 on such flips, so 5 seeds separate the two
libraries poorly; the per-seed pairs are what to compare. Runs are deterministic on one machine (same numbers on a rerun).

Measured (2026-12-01, quiet machine, ``learn --algos ppo_lstm --seed-list 5,...,14``): sb3-contrib 185.3 +- 100.0,
lit_sb3 124.7 +- 76.1 over 10 new seeds; lit_sb3 lower on 7 of them (with seeds 0-4: 12 of 15, two-sided sign test
p ~ 0.035). ``lockstep`` (teacher forcing, same settings, seed 5, 80 iterations; seed 7, 250 iterations) finds every
rollout buffer field exactly equal and the weights after each update equal to about 1e-6 of the update (a few
iterations 1e-4 to 5e-3: a PPO-clip boundary crossed after rounding differences), including the 4 iterations of
seed 7 with 500-step time-outs; ``lockstep --seed 5 --max-episode-steps 40`` (267 time-out bootstraps in 80
iterations) agrees as well: bootstrapped rewards to 3.8e-6, weights to at most 1e-5 of the update. No differing
computation was found: the gap is either chance (one comparison of many) or beyond what per-iteration forcing sees.

sb3-contrib and SB3 are imported here only (never from lit_sb3). Run it nice'd on a shared machine.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_on_policy import Run, loop_timer  # noqa: E402

import lit_sb3.envs  # noqa: E402,F401 - registers InvalidActionDiscrete-v0 and CartPoleNoVel-v1 for both libraries

ENV = {"ppo_mask": "InvalidActionDiscrete-v0", "ppo_lstm": "CartPoleNoVel-v1"}
SPEED_TIMESTEPS = {("ppo_mask", 1): 8192, ("ppo_mask", 8): 16384, ("ppo_lstm", 1): 2048, ("ppo_lstm", 8): 8192}

# learning comparison: (budget, n_envs, constructor kwargs) -- sb3-contrib names, used by both libraries
LEARN: dict[str, tuple[int, int, dict[str, Any]]] = {
    "ppo_mask": (8192, 4, dict(policy="MlpPolicy", n_steps=256, batch_size=64, policy_kwargs=dict(net_arch=[32, 32]))),
    # the RL Zoo's tuned CartPoleNoVel-v1 entry (zoo_configs/ppo_lstm.yml) without VecNormalize, at a small budget
    "ppo_lstm": (
        20480,
        8,
        dict(
            policy="MlpLstmPolicy",
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=1e-3,
            policy_kwargs=dict(
                ortho_init=False,
                activation_fn=th.nn.ReLU,
                lstm_hidden_size=64,
                enable_critic_lstm=True,
                net_arch=dict(pi=[64], vf=[64]),
            ),
        ),  # fmt: skip
    ),
}


def _contrib_class(algo: str) -> Any:
    from sb3_contrib import MaskablePPO, RecurrentPPO

    return MaskablePPO if algo == "ppo_mask" else RecurrentPPO


def _lit_class(algo: str) -> Any:
    from lit_sb3 import MaskablePPO, RecurrentPPO

    return MaskablePPO if algo == "ppo_mask" else RecurrentPPO


def _default_policy(algo: str) -> str:
    return "MlpPolicy" if algo == "ppo_mask" else "MlpLstmPolicy"


def _contrib_run(algo: str, n_envs: int, timesteps: int, seed: int) -> Run:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    marks: dict[str, float] = {}

    class _Timer(BaseCallback):
        def _on_training_start(self) -> None:
            marks["start"], marks["cstart"] = time.perf_counter(), time.process_time()

        def _on_step(self) -> bool:
            return True

        def _on_training_end(self) -> None:
            marks["end"], marks["cend"] = time.perf_counter(), time.process_time()

    env = make_vec_env(ENV[algo], n_envs=n_envs, seed=seed)
    model = _contrib_class(algo)(_default_policy(algo), env, seed=seed, device="cpu", verbose=0)
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(timesteps, callback=_Timer())
    total, cpu_total = time.perf_counter() - t0, time.process_time() - c0
    env.close()
    return Run(total, marks["end"] - marks["start"], cpu_total, marks["cend"] - marks["cstart"], model.num_timesteps)


def _lit_run(algo: str, n_envs: int, timesteps: int, seed: int) -> Run:
    from lit_sb3 import RLEnvDataModule, RLTrainer

    marks: dict[str, float] = {}
    model = _lit_class(algo)(_default_policy(algo), seed=seed, device="cpu", verbose=0)
    dm = RLEnvDataModule(train_env=ENV[algo], n_envs=n_envs, seed=seed)
    dm.get_env("fit")
    t0, c0 = time.perf_counter(), time.process_time()
    trainer = RLTrainer(max_steps=timesteps, logger=False, callbacks=[loop_timer(marks)])
    trainer.fit(model, datamodule=dm)
    total, cpu_total = time.perf_counter() - t0, time.process_time() - c0
    dm.close()
    return Run(total, marks["end"] - marks["start"], cpu_total, marks["cend"] - marks["cstart"], model.num_timesteps)


def speed(args: argparse.Namespace) -> None:
    print(f"torch {th.__version__}, threads {th.get_num_threads()}, pairs {args.pairs}, DummyVecEnv, CPU")
    summary = []
    for algo in args.algos:
        for n_envs in args.n_envs:
            timesteps = args.timesteps or SPEED_TIMESTEPS[(algo, n_envs)]
            print(f"\n{algo} on {ENV[algo]} n_envs={n_envs} timesteps={timesteps}")
            pairs = []
            for i in range(args.pairs):
                ref = _contrib_run(algo, n_envs, timesteps, args.seed)
                lit = _lit_run(algo, n_envs, timesteps, args.seed)
                ratio = {
                    "total": (lit.steps / lit.total) / (ref.steps / ref.total),
                    "loop": (lit.steps / lit.loop) / (ref.steps / ref.loop),
                    "cpu_loop": (lit.steps / lit.cpu_loop) / (ref.steps / ref.cpu_loop),
                }
                print(
                    f"  pair {i}: total contrib {ref.steps / ref.total:6.0f} lit {lit.steps / lit.total:6.0f} fps "
                    f"{ratio['total']:.2f}x | loop contrib {ref.steps / ref.loop:6.0f} lit {lit.steps / lit.loop:6.0f} "
                    f"fps {ratio['loop']:.2f}x | loop CPU-time {ratio['cpu_loop']:.2f}x",
                    flush=True,
                )
                pairs.append(ratio)
            med = {key: statistics.median(p[key] for p in pairs) for key in pairs[0]}
            summary.append((algo, n_envs, med))
    print("\nSummary (median lit/contrib env-steps/s; floor 1.0x, target 1.5x)")
    for algo, n_envs, med in summary:
        print(
            f"  {algo:8s} n_envs={n_envs}: total {med['total']:.2f}x  loop {med['loop']:.2f}x  "
            f"loop CPU-time {med['cpu_loop']:.2f}x"
        )


def _final_return(lib: str, algo: str, model: Any, seed: int) -> float:
    if lib == "contrib":
        from stable_baselines3.common.env_util import make_vec_env

        env = make_vec_env(ENV[algo], n_envs=1, seed=10_000 + seed)
        if algo == "ppo_mask":
            from sb3_contrib.common.maskable.evaluation import evaluate_policy

            return float(evaluate_policy(model, env, n_eval_episodes=10, use_masking=True)[0])
        from stable_baselines3.common.evaluation import evaluate_policy

        return float(evaluate_policy(model, env, n_eval_episodes=10)[0])
    from lit_sb3.core.evaluation import evaluate_policy
    from lit_sb3.vec_env import make_vec_env

    env = make_vec_env(ENV[algo], n_envs=1, seed=10_000 + seed)
    masking = bool(getattr(model, "supports_action_masks", False))
    return float(evaluate_policy(model, env, n_eval_episodes=10, use_masking=masking)[0])


def learn(args: argparse.Namespace) -> None:
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env

    from lit_sb3 import PPO
    from lit_sb3.vec_env import make_vec_env

    for algo in args.algos:
        budget, n_envs, kwargs = LEARN[algo]
        kwargs = dict(kwargs)
        policy = kwargs.pop("policy")
        print(f"\n{algo} on {ENV[algo]}: {budget} env steps, {n_envs} envs, {policy} {kwargs}")
        rows = []
        for seed in args.seed_list:
            t0 = time.perf_counter()
            ref = _contrib_class(algo)(
                policy, sb3_make_vec_env(ENV[algo], n_envs=n_envs, seed=seed), seed=seed, device="cpu", **kwargs
            )
            ref.learn(budget)
            t1 = time.perf_counter()
            lit = _lit_class(algo)(policy, seed=seed, device="cpu", **kwargs)
            lit.learn(budget, env=make_vec_env(ENV[algo], n_envs=n_envs, seed=seed))
            t2 = time.perf_counter()
            plain_kwargs = {k: v for k, v in kwargs.items() if k != "policy_kwargs"}
            plain_kwargs["policy_kwargs"] = {
                k: v for k, v in kwargs["policy_kwargs"].items() if k not in ("lstm_hidden_size", "enable_critic_lstm")
            }
            plain = PPO("MlpPolicy", seed=seed, device="cpu", **plain_kwargs)
            plain.learn(budget, env=make_vec_env(ENV[algo], n_envs=n_envs, seed=seed))
            row = (
                _final_return("contrib", algo, ref, seed),
                _final_return("lit", algo, lit, seed),
                _final_return("lit", algo, plain, seed),  # plain PPO: no masks (it cannot take them), no LSTM
            )
            rows.append(row)
            print(
                f"  seed {seed}: sb3-contrib {row[0]:7.1f}  lit_sb3 {row[1]:7.1f}  lit_sb3 PPO (no mask/no LSTM) "
                f"{row[2]:7.1f}   (wall contrib {t1 - t0:.0f} s, lit {t2 - t1:.0f} s)",
                flush=True,
            )
        arr = np.array(rows)
        print(
            f"  mean over {len(args.seed_list)} seeds: sb3-contrib {arr[:, 0].mean():.1f} +- {arr[:, 0].std():.1f}, "
            f"lit_sb3 {arr[:, 1].mean():.1f} +- {arr[:, 1].std():.1f}, plain PPO {arr[:, 2].mean():.1f} +- {arr[:, 2].std():.1f}"
        )


def lockstep(args: argparse.Namespace) -> None:
    """RecurrentPPO teacher-forced against sb3-contrib over a whole run at the :data:`LEARN` settings: before every
    iteration lit_sb3 gets sb3-contrib's weights, Adam state and LSTM states, both collect with the same torch seed
    and update with the same numpy seed; the rollout buffers and the weights after the update are compared. Any
    computation that differs shows up as a gap above float rounding at the iteration where it first matters."""
    import copy

    import sb3_contrib
    from stable_baselines3.common.callbacks import CallbackList as TheirCallbacks
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env

    from lit_sb3 import RecurrentPPO
    from lit_sb3.callbacks import CallbackList
    from lit_sb3.vec_env import make_vec_env

    budget, n_envs, kwargs = LEARN["ppo_lstm"]
    kwargs = dict(kwargs)
    policy, n_steps = kwargs.pop("policy"), kwargs["n_steps"]
    iterations = args.iterations or budget // (n_steps * n_envs)
    seed = args.seed
    env_id: Any = ENV["ppo_lstm"]
    if args.max_episode_steps:  # shorter episodes: time-out bootstraps in most rollouts
        import gymnasium as gym

        env_id = functools.partial(gym.make, ENV["ppo_lstm"], max_episode_steps=args.max_episode_steps)
    theirs = sb3_contrib.RecurrentPPO(
        policy, sb3_make_vec_env(env_id, n_envs=n_envs, seed=seed), seed=seed, device="cpu", **kwargs
    )
    theirs.learn(n_steps * n_envs)  # builds everything; the forced run starts from fresh envs below
    ours = RecurrentPPO(policy, seed=seed, device="cpu", **kwargs)
    ours.learn(n_steps * n_envs, env=make_vec_env(env_id, n_envs=n_envs, seed=seed))
    callbacks = []
    for model, callback in ((theirs, TheirCallbacks([])), (ours, CallbackList([]))):
        model.env.seed(seed + 123)
        model._last_obs = model.env.reset()
        model._last_episode_starts = np.ones(n_envs, dtype=bool)
        for state in (*model._last_lstm_states.pi, *model._last_lstm_states.vf):
            state.zero_()
        callback.init_callback(model)
        callbacks.append(callback)
    fields = ("observations", "actions", "rewards", "episode_starts", "values", "log_probs", "advantages", "returns")
    print(f"ppo_lstm lockstep (teacher-forced), seed {seed}, {iterations} iterations of {n_steps} x {n_envs} steps")
    buffer_gaps, weight_gaps, timeouts = [], [], 0
    for it in range(iterations):
        ours.policy.load_state_dict(theirs.policy.state_dict())
        ours.policy.optimizer.load_state_dict(copy.deepcopy(theirs.policy.optimizer.state_dict()))
        for a, b in zip(
            (*theirs._last_lstm_states.pi, *theirs._last_lstm_states.vf),
            (*ours._last_lstm_states.pi, *ours._last_lstm_states.vf),
        ):
            b.copy_(a)
        for model, callback in zip((theirs, ours), callbacks):
            th.manual_seed(1000 + it)
            model.collect_rollouts(model.env, callback, model.rollout_buffer, n_steps)
        gap = 0.0
        for name in fields:
            a = np.asarray(getattr(theirs.rollout_buffer, name))
            b = getattr(ours.rollout_buffer, name)
            b = b.cpu().numpy() if isinstance(b, th.Tensor) else np.asarray(b)
            gap = max(gap, float(np.abs(b.reshape(a.shape) - a).max()))
        timeouts += int((np.abs(np.asarray(theirs.rollout_buffer.rewards) - 1.0) > 1e-6).sum())
        before = {k: v.clone() for k, v in theirs.policy.state_dict().items()}
        for model in (theirs, ours):
            np.random.seed(7 + it)
            model.train()
        after = theirs.policy.state_dict()
        weight_gap = max(float((ours.policy.state_dict()[k] - v).abs().max()) for k, v in after.items())
        size = max(float((v - before[k]).abs().max()) for k, v in after.items())
        buffer_gaps.append(gap)
        weight_gaps.append(weight_gap / size)
        if args.verbose or gap > 0 or weight_gap / size > 1e-4:
            print(f"  iteration {it:3d}: buffer gap {gap:.1e}, weight gap {weight_gap:.1e} (update size {size:.1e})")
    print(
        f"  buffers: largest gap {max(buffer_gaps):.1e}; weights after the update, gap / update size: median "
        f"{np.median(weight_gaps):.1e}, largest {max(weight_gaps):.1e}; time-out bootstraps in the rollouts: {timeouts}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["speed", "learn", "lockstep"])
    parser.add_argument("--algos", default="ppo_mask,ppo_lstm")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--n-envs", default="1,8")
    parser.add_argument("--timesteps", type=int, default=None)
    parser.add_argument("--seeds", type=int, default=5, help="learn: seeds 0..N-1")
    parser.add_argument("--seed-list", default=None, help="learn: explicit seeds, e.g. 3,4 (one process per seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=None, help="lockstep: iterations (default: the budget's)")
    parser.add_argument("--verbose", action="store_true", help="lockstep: print every iteration")
    parser.add_argument("--max-episode-steps", type=int, default=None, help="lockstep: shorter episodes (time-outs)")
    args = parser.parse_args()
    args.algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = sorted(set(args.algos) - set(ENV))
    if unknown:
        parser.error(f"unknown algo {unknown[0]!r}; allowed: {', '.join(ENV)}")
    args.n_envs = [int(n) for n in args.n_envs.split(",") if n.strip()]
    try:
        args.seed_list = (
            list(range(args.seeds))
            if args.seed_list is None
            else [int(s) for s in args.seed_list.split(",") if s.strip()]
        )
    except ValueError:
        parser.error(f"--seed-list takes comma-separated integers, got {args.seed_list!r}")
    th.set_num_threads(1)
    warnings.filterwarnings("ignore")
    {"speed": speed, "learn": learn, "lockstep": lockstep}[args.mode](args)


if __name__ == "__main__":
    main()
