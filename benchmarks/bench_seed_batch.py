"""Seed batching (issue 17): throughput and learning equivalence of K seeds batched in one process vs K separate runs.

``throughput``: aggregate env steps/s of K seeds trained by one ``SeedBatch`` process against K separate
single-seed processes on the same cores: every process of both arms is pinned to the same ``--cpus`` (default:
one core), runs one torch thread on the CPU, builds its model(s) and env(s), then waits at a barrier; only ``fit``
is timed (imports and construction are not). The separate arm runs two ways: ``concurrent`` (the K processes
started together, sharing the cores: what the issue's benchmark prescribes) and ``sequential`` (one process per
core at a time, as ``bench run``'s worker pool schedules jobs, so no process pays for oversubscription). The
aggregate is ``K * steps / wall`` (wall: first fit start to last fit end; sequential: summed over the waves of one
process per core); the same steps per CPU second of the fits is printed beside it. Pinned to the same
cores, wall and CPU ratios agree unless other load shares those cores. Batched and separate runs alternate (pair by
pair), the load average is printed with each pair, and the ratio of every pair and their median are printed.

``equivalence``: N seeds batched vs the same N seeds run separately (a pool of worker processes), both scored by a
final deterministic evaluation (``--eval-episodes`` episodes on an env seeded ``seed + 10_000``); printed side by
side with P(batched > separate) and its 95 % stratified-bootstrap CI (:func:`lit_sb3.zoo.stats.improvement_intervals`;
0.5 = no difference). A batched seed uses the same initial weights, env seeds and torch streams as its separate run
(PPO/A2C retrace it up to float reassociation; the off-policy batches share one minibatch-index generator), so the
two columns should agree in distribution.

Usage::

    python benchmarks/bench_seed_batch.py throughput                          # K=8, PPO A2C DQN SAC TD3, 2 pairs
    python benchmarks/bench_seed_batch.py throughput --algos ppo,sac --pairs 3 --k 8 --cpus 1
    python benchmarks/bench_seed_batch.py equivalence          # PPO, TRPO CartPole + SAC, TQC Pendulum, 10 seeds
    python benchmarks/bench_seed_batch.py equivalence --algos ppo --seeds 10 --timesteps 30000 --json out.json
    python benchmarks/bench_seed_batch.py compile --algos sac,td3 --k 8                # eager vs torch.compile update
    python benchmarks/bench_seed_batch.py compiled --seeds 10       # learning: 10 SAC seeds compile_update=True vs eager
    python benchmarks/bench_seed_batch.py throughput --algos sac,td3,tqc,crossq --k 8 --pairs 3 --cpus 0 \\
        --write-table benchmarks/seed_batch.yml          # refresh bench run --seed-batch auto's efficiency table
    python benchmarks/bench_seed_batch.py update --algos sac,td3 --ks 1,2,4,8          # per seed-update cost vs K
    python benchmarks/bench_seed_batch.py gpu --k 16 --device cuda                     # SAC HalfCheetah on a GPU

``compile``: the batched update alone (``train(gradient_steps=N)`` of a K-seed SAC/TD3 batch whose replay storage a
short fit filled), eager against the same batch with every stacked network's forward compiled (``torch.compile``,
inductor), in interleaved repeats; CPU time per seed-update and the one-off compile time are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

# algo -> (env id, constructor kwargs, env steps per seed) for the throughput runs: SB3 defaults except the buffer
# sizes (1e6 transitions x 8 seeds does not fit this machine's share) and PPO's n_steps (several rollouts per run).
# MaskablePPO runs on lit_sb3's InvalidActionDiscrete-v0 (the zoo's `masked` suite env: masks are part of its cost);
# ARS and TRPO with sb3-contrib's defaults but shorter rollouts, so that a run holds several updates. The
# off-policy networks are the RL Zoo's Pendulum-v1 sizes (SAC, TQC: the default 256x256; TD3 400x300; CrossQ 256x256).
THROUGHPUT: dict[str, tuple[str, dict[str, Any], int]] = {
    "ppo": ("CartPole-v1", dict(n_steps=256), 2048),
    "a2c": ("CartPole-v1", dict(), 2000),
    "dqn": ("CartPole-v1", dict(buffer_size=50_000, learning_starts=100), 3000),
    "qrdqn": ("CartPole-v1", dict(buffer_size=50_000, learning_starts=100), 3000),
    "trpo": ("CartPole-v1", dict(n_steps=512), 2048),
    "ars": ("CartPole-v1", dict(n_delta=4), 10_000),
    "ppo_mask": ("InvalidActionDiscrete-v0", dict(n_steps=256), 2048),
    "ppo_lstm": ("CartPole-v1", dict(n_steps=128), 1024),
    "sac": ("Pendulum-v1", dict(buffer_size=50_000, learning_starts=100), 400),
    "td3": ("Pendulum-v1", dict(buffer_size=50_000, learning_starts=100, policy_kwargs=dict(net_arch=[400, 300])), 500),
    "tqc": ("Pendulum-v1", dict(buffer_size=50_000, learning_starts=100), 400),
    "crossq": (
        "Pendulum-v1",
        dict(buffer_size=50_000, learning_starts=100, policy_kwargs=dict(net_arch=[256, 256])),
        400,
    ),
}

#: the off-policy algorithms whose hidden layers ``throughput --net-arch`` sets (the others keep their defaults)
NET_ARCH_ALGOS = ("sac", "td3", "tqc", "crossq", "dqn", "qrdqn")

# the GPU check: SAC on HalfCheetah-v5, SB3 defaults except the buffer and warm-up (a throughput run)
GPU: dict[str, tuple[str, dict[str, Any], int]] = {
    "sac": ("HalfCheetah-v5", dict(buffer_size=100_000, learning_starts=100), 1500),
}

# algo -> (env id, n_envs per seed, constructor kwargs, default env steps per seed) for the equivalence runs: the RL
# Zoo's CartPole PPO and Pendulum SAC settings (zoo_configs/), with budgets that run here in minutes
EQUIVALENCE: dict[str, tuple[str, int, dict[str, Any], int]] = {
    "ppo": (
        "CartPole-v1",
        8,
        dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=1e-3),
        30_000,
    ),
    "sac": ("Pendulum-v1", 1, dict(learning_rate=1e-3, buffer_size=50_000), 5_000),
    # sb3-contrib's family: the RL Zoo's CartPole TRPO and Pendulum TQC settings
    "trpo": (
        "CartPole-v1",
        2,
        dict(
            n_steps=512,
            batch_size=512,
            cg_damping=1e-3,
            gae_lambda=0.98,
            gamma=0.99,
            learning_rate=1e-3,
            n_critic_updates=20,
        ),  # fmt: skip
        30_000,
    ),
    "tqc": ("Pendulum-v1", 1, dict(learning_rate=1e-3, buffer_size=50_000), 5_000),
}


def _classes() -> dict[str, Any]:
    from lit_sb3.algorithms.registry import algorithm_class

    return {name: algorithm_class(name) for name in THROUGHPUT}


def _spec(algo: str, gpu_spec: bool = False, net_arch: str | None = None) -> tuple[str, dict[str, Any], int]:
    """(env id, constructor kwargs, env steps per seed) of a throughput run; ``net_arch``: hidden widths such as
    ``256,256`` for the off-policy algorithms (the network-size sweep)."""
    env_id, kwargs, steps = (GPU if gpu_spec else THROUGHPUT)[algo]
    if net_arch and algo in NET_ARCH_ALGOS:
        kwargs = {**kwargs, "policy_kwargs": dict(net_arch=[int(w) for w in net_arch.split(",")])}
    return env_id, kwargs, steps


def _quiet() -> None:
    import logging

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lit_sb3").setLevel(logging.ERROR)


# ----------------------------------------------------------------------
# Throughput
# ----------------------------------------------------------------------


def _worker(args: argparse.Namespace) -> None:
    """One timed process: builds the model (batched over ``--seeds`` or a single seed; lit_sb3, or SB3 itself with
    ``--library sb3``), waits for the go file, fits, writes ``{"start", "end", "cpu", "steps"}`` to ``--out``."""
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    import torch as th

    th.set_num_threads(1)
    _quiet()
    env_id, kwargs, steps = _spec(args.algo, args.gpu_spec, args.net_arch)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.library == "sb3":
        import stable_baselines3
        from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env

        cls = getattr(stable_baselines3, args.algo.upper())
        venv = sb3_make_vec_env(env_id, n_envs=1, seed=seeds[0])
        model = cls("MlpPolicy", venv, seed=seeds[0], device=args.device, **kwargs)
        fit = lambda: model.learn(steps)  # noqa: E731
    else:
        from lit_sb3 import RLEnvDataModule, RLTrainer, SeedBatch
        from lit_sb3.envs import register_masked_envs
        from lit_sb3.vec_env import make_vec_env

        register_masked_envs()
        cls = _classes()[args.algo]
        envs = [make_vec_env(env_id, n_envs=1, seed=s) for s in seeds]
        if args.batched:
            model = SeedBatch(cls, seeds=seeds, device=args.device, **kwargs)
            datamodule = RLEnvDataModule(train_env=envs)
        else:
            model = cls("MlpPolicy", seed=seeds[0], device=args.device, **kwargs)
            datamodule = RLEnvDataModule(train_env=envs[0])
        accelerator = "gpu" if args.device.startswith("cuda") else "cpu"
        trainer = RLTrainer(
            max_steps=steps,
            accelerator=accelerator,
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
        )
        fit = lambda: trainer.fit(model, datamodule=datamodule)  # noqa: E731
    Path(args.out + ".ready").touch()
    parent = os.getppid()
    while not Path(args.go).exists():
        if os.getppid() != parent:  # the benchmark was stopped: do not wait forever
            sys.exit(1)
        time.sleep(0.01)
    start, cpu = time.time(), time.process_time()
    fit()
    if args.device.startswith("cuda"):
        th.cuda.synchronize()
    end, cpu = time.time(), time.process_time() - cpu
    Path(args.out).write_text(json.dumps({"start": start, "end": end, "cpu": cpu, "steps": int(model.num_timesteps)}))


def _start(
    algo: str, seeds: list[int], batched: bool, cpus: list[int], tmp: str, name: str, extra: Sequence[str] = ()
) -> tuple[Any, str]:
    """Start one worker process (pinned to ``cpus`` if any; ``extra``: more worker options); returns it and its
    output path."""
    out = os.path.join(tmp, f"{name}.json")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "_worker", "--algo", algo, "--seeds", ",".join(map(str, seeds))]
    command += ["--out", out, "--go", os.path.join(tmp, f"go-{name}"), *extra]
    if cpus:
        command += ["--cpus", ",".join(map(str, cpus))]
    return subprocess.Popen(command + (["--batched"] if batched else []), env=env), out


def _release(procs: list[tuple[Any, str]], tmp: str, names: list[str]) -> list[dict[str, Any]]:
    """Wait until every worker is built, release them together, wait for their fits; returns their outputs."""
    while not all(Path(out + ".ready").exists() for _, out in procs):
        if any(p.poll() not in (None, 0) for p, _ in procs):
            raise RuntimeError("a benchmark worker failed to start")
        time.sleep(0.05)
    for name in names:
        Path(os.path.join(tmp, f"go-{name}")).touch()
    for p, _ in procs:
        if p.wait() != 0:
            raise RuntimeError(f"a benchmark worker failed (exit {p.returncode})")
    return [json.loads(Path(out).read_text()) for _, out in procs]


def _run_arm(algo: str, seeds: list[int], arm: str, cpus: list[int], extra: Sequence[str] = ()) -> tuple[float, float]:
    """One arm of a pair: ``batched`` (one process, every seed), ``concurrent`` (one process per seed, all at
    once on ``cpus``) or ``sequential`` (one process per seed, one per core at a time, each pinned to its core);
    ``extra``: more worker options. Returns aggregate env steps per wall second of the fits and per CPU second
    (summed over the processes)."""
    with tempfile.TemporaryDirectory() as tmp:
        if arm == "batched":
            waves = [[(seeds, cpus)]]
        elif arm == "concurrent":
            waves = [[([s], cpus) for s in seeds]]
        else:
            waves = [
                [([s], [cpu]) for s, cpu in zip(seeds[i : i + len(cpus)], cpus)]
                for i in range(0, len(seeds), len(cpus))
            ]
        wall, cpu, steps = 0.0, 0.0, 0
        for w, wave in enumerate(waves):
            names = [f"w{w}p{j}" for j in range(len(wave))]
            procs = [_start(algo, group, arm == "batched", pin, tmp, n, extra) for (group, pin), n in zip(wave, names)]
            results = _release(procs, tmp, names)
            wall += max(r["end"] for r in results) - min(r["start"] for r in results)
            cpu += sum(r["cpu"] for r in results)
            steps += sum(r["steps"] * len(group) for r, (group, _) in zip(results, wave))
    return steps / wall, steps / cpu


ARMS = ("batched", "concurrent", "sequential")


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    seeds = list(range(args.k))
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else [sorted(os.sched_getaffinity(0))[-1]]
    print(
        f"throughput: K={args.k} seeds, batched (1 process) vs separate ({args.k} processes: concurrent, and "
        f"sequential one per core), {args.pairs} pairs, every process pinned to CPU(s) {cpus} of "
        f"{os.cpu_count()}, 1 torch thread per process"
    )
    table: dict[str, Any] = {}
    for net_arch in args.net_arch or [None]:
        for algo in args.algos:
            if net_arch and algo not in NET_ARCH_ALGOS:
                continue
            key = f"{algo}@{net_arch}" if net_arch else algo
            table[key] = _throughput_pairs(algo, seeds, cpus, args.pairs, net_arch)
    if args.write_table:
        _write_table(Path(args.write_table), args.k, {a: r for a, r in table.items() if "@" not in a})
    return table


def _write_table(path: Path, k: int, measured: dict[str, dict[str, Any]]) -> None:
    """Rewrite the rows of ``bench run --seed-batch auto``'s efficiency table (``benchmarks/seed_batch.yml``) that
    were measured now (each algorithm on its throughput env: the ``sequential`` median, K batched against K
    processes one after another, as bench run's pool runs unbatched jobs), keeping the other rows and the header."""
    import datetime

    from lit_sb3.zoo.seed_batching import env_family, load_table

    rows = {key: row for key, row in load_table(path).items()} if path.exists() else {}
    today = datetime.date.today().isoformat()
    for algo, result in measured.items():
        family = env_family(result["env"]) or "other"
        pairs = [round(r, 2) for r in result["ratios"]["wall_sequential"]]
        ratio = round(result["medians"]["wall_sequential"], 2)
        rows[(algo, family)] = dict(algo=algo, family=family, env=result["env"], k=k, ratio=ratio, pairs=pairs,
                                    measured=today)  # fmt: skip
    text = path.read_text() if path.exists() else "version: 1\nentries:\n"
    header = text[: text.index("entries:")] + "entries:\n"
    lines = []
    for row in rows.values():
        if not isinstance(row, dict):  # a kept row (an Efficiency read from the file)
            row = dict(algo=row.algo, family=row.family, env=row.env, k=row.k, ratio=row.ratio,
                       pairs=list(row.pairs), measured=row.measured)  # fmt: skip
        fields = ", ".join(
            f'{name}: "{value}"' if name == "measured" else f"{name}: {value}" for name, value in row.items()
        )
        lines.append(f"  - {{{fields}}}\n")
    path.write_text(header + "".join(lines))
    print(f"wrote {len(measured)} measured row(s) into {path} ({len(rows)} rows)")


def _throughput_pairs(algo: str, seeds: list[int], cpus: list[int], pairs: int, net_arch: str | None) -> dict[str, Any]:
    """Interleaved pairs of one algorithm (batched, then the two separate arms, pair by pair); prints each pair's
    ratios with the load average, returns them and their medians."""
    env_id, kwargs, steps = _spec(algo, net_arch=net_arch)
    extra = ["--net-arch", net_arch] if net_arch else []
    print(f"{algo.upper()} {env_id} {kwargs or 'defaults'}, {steps} env steps per seed")
    ratios: dict[str, list[float]] = {f"{kind}_{arm}": [] for kind in ("wall", "cpu") for arm in ARMS[1:]}
    for pair in range(pairs):
        load = os.getloadavg()[0]
        rates = {arm: _run_arm(algo, seeds, arm, cpus, extra) for arm in ARMS}
        line = []
        for arm in ARMS[1:]:
            wall_ratio = rates["batched"][0] / rates[arm][0]
            cpu_ratio = rates["batched"][1] / rates[arm][1]
            ratios[f"wall_{arm}"].append(wall_ratio)
            ratios[f"cpu_{arm}"].append(cpu_ratio)
            line.append(f"{arm} {rates[arm][0]:6.0f} ({wall_ratio:.2f}x, CPU {cpu_ratio:.2f}x)")
        print(
            f"  pair {pair}: env steps/s batched {rates['batched'][0]:6.0f} | " + " | ".join(line) + f" || load "
            f"{load:.1f} -> {os.getloadavg()[0]:.1f}"
        )
    medians = {key: statistics.median(values) for key, values in ratios.items()}
    print(
        "  median batched/separate: "
        + ", ".join(f"{arm} {medians[f'wall_{arm}']:.2f}x (CPU {medians[f'cpu_{arm}']:.2f}x)" for arm in ARMS[1:])
    )
    return {"env": env_id, "kwargs": repr(kwargs), "steps_per_seed": steps, "cpus": cpus, "ratios": ratios,
            "medians": medians}  # fmt: skip


def gpu(args: argparse.Namespace) -> dict[str, Any]:
    """The issue's GPU check: K seeds of SAC on HalfCheetah-v5 batched in one process on ``--device`` against K
    separate SB3 processes on the CPU cores (each pinned to its own core, as many at once as there are cores, one
    torch thread each); ratio of aggregate env steps/s of the fits (target >= 8x for K = 16)."""
    import torch as th

    if args.device.startswith("cuda") and not th.cuda.is_available():
        raise SystemExit(f"--device {args.device}: no CUDA device here (torch.cuda.is_available() is False).")
    cores = sorted(os.sched_getaffinity(0))
    seeds = list(range(args.k))
    env_id, kwargs, steps = GPU["sac"]
    print(
        f"gpu: SAC {env_id} {kwargs}, {steps} env steps per seed; K={args.k} batched on {args.device} vs {args.k} "
        f"SB3 processes on {len(cores)} CPU cores, {args.pairs} pairs"
    )
    ratios = []
    for pair in range(args.pairs):
        batched_rate = _run_arm("sac", seeds, "batched", [], ["--gpu-spec", "--device", args.device])[0]
        sb3_rate = _run_arm("sac", seeds, "sequential", cores, ["--gpu-spec", "--device", "cpu", "--library", "sb3"])[0]
        ratios.append(batched_rate / sb3_rate)
        print(
            f"  pair {pair}: batched {batched_rate:7.0f} env steps/s | SB3 processes {sb3_rate:7.0f} | "
            f"{ratios[-1]:.2f}x"
        )
    print(f"  median {statistics.median(ratios):.2f}x (target >= 8x for K = 16 on a GPU)")
    return {"env": env_id, "k": args.k, "device": args.device, "ratios": ratios}


# ----------------------------------------------------------------------
# Learning equivalence
# ----------------------------------------------------------------------


def _evaluate(model: Any, env_id: str, seed: int, episodes: int) -> float:
    from lit_sb3.core.evaluation import evaluate_policy
    from lit_sb3.vec_env import make_vec_env

    eval_env = make_vec_env(env_id, n_envs=1, seed=seed + 10_000)
    mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
    eval_env.close()
    return float(mean_return)


def _separate_run(algo: str, seed: int, timesteps: int, episodes: int, compiled: bool = False) -> float:
    import torch as th

    th.set_num_threads(1)
    _quiet()
    from lit_sb3 import RLEnvDataModule, RLTrainer
    from lit_sb3.vec_env import make_vec_env

    env_id, n_envs, kwargs, _ = EQUIVALENCE[algo]
    if compiled:
        kwargs = dict(kwargs, compile_update=True)
    model = _classes()[algo]("MlpPolicy", seed=seed, device="cpu", **kwargs)
    RLTrainer(max_steps=timesteps, logger=False, enable_checkpointing=False, enable_progress_bar=False).fit(
        model, datamodule=RLEnvDataModule(train_env=make_vec_env(env_id, n_envs=n_envs, seed=seed))
    )
    return _evaluate(model, env_id, seed, episodes)


def _batched_run(algo: str, seeds: list[int], timesteps: int, episodes: int) -> list[float]:
    import torch as th

    th.set_num_threads(1)
    _quiet()
    from lit_sb3 import RLEnvDataModule, RLTrainer, SeedBatch
    from lit_sb3.vec_env import make_vec_env

    env_id, n_envs, kwargs, _ = EQUIVALENCE[algo]
    batch = SeedBatch(_classes()[algo], seeds=seeds, device="cpu", **kwargs)
    envs = [make_vec_env(env_id, n_envs=n_envs, seed=s) for s in seeds]
    RLTrainer(max_steps=timesteps, logger=False, enable_checkpointing=False, enable_progress_bar=False).fit(
        batch, datamodule=RLEnvDataModule(train_env=envs)
    )
    if batch.failed:
        print(f"  failed seeds: {batch.failed}")
    return [_evaluate(batch.member(i), env_id, s, episodes) for i, s in enumerate(seeds)]


def equivalence(args: argparse.Namespace) -> dict[str, Any]:
    from lit_sb3.zoo.stats import improvement_intervals

    seeds = list(range(args.seed_offset, args.seed_offset + args.seeds))
    table: dict[str, Any] = {}
    for algo in args.algos:
        env_id, n_envs, kwargs, default_steps = EQUIVALENCE[algo]
        timesteps = args.timesteps or default_steps
        print(
            f"equivalence: {algo.upper()} {env_id}, {len(seeds)} seeds {seeds[0]}..{seeds[-1]}, {timesteps} env steps "
            f"per seed, n_envs={n_envs}, {kwargs}; score = mean return of {args.eval_episodes} deterministic episodes"
        )
        t0 = time.time()
        with ProcessPoolExecutor(max_workers=1) as pool:  # a fresh process, one torch thread
            batched = pool.submit(_batched_run, algo, seeds, timesteps, args.eval_episodes).result()
        t_batched = time.time() - t0
        t0 = time.time()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            separate = list(
                pool.map(
                    _separate_run,
                    [algo] * len(seeds),
                    seeds,
                    [timesteps] * len(seeds),
                    [args.eval_episodes] * len(seeds),
                )
            )
        t_separate = time.time() - t0
        for s, b, r in zip(seeds, batched, separate):
            print(f"  seed {s:3d}: batched {b:9.1f} | separate {r:9.1f}")
        interval = improvement_intervals(
            {"batched": np.asarray(batched)[:, None], "separate": np.asarray(separate)[:, None]}, reps=args.reps, seed=0
        )[("batched", "separate")]
        print(
            f"  mean ± std: batched {np.mean(batched):.1f} ± {np.std(batched):.1f} | separate "
            f"{np.mean(separate):.1f} ± {np.std(separate):.1f}"
        )
        print(
            f"  P(batched > separate) = {interval.point:.2f}  95% CI [{interval.low:.2f}, {interval.high:.2f}]  "
            f"(wall: batched {t_batched:.0f} s in 1 process, separate {t_separate:.0f} s on {args.workers} workers)"
        )
        table[algo] = {
            "env": env_id,
            "timesteps": timesteps,
            "seeds": seeds,
            "batched": batched,
            "separate": separate,
            "p_improvement": [interval.point, interval.low, interval.high],
            "wall_s": {"batched": t_batched, "separate": t_separate},
        }
    return table


def compiled_equivalence(args: argparse.Namespace) -> dict[str, Any]:
    """N seeds of SAC with ``compile_update=True`` against the same N seeds eager (separate runs each, on
    ``--workers`` processes), scored like ``equivalence``; P(compiled > eager) with its 95 % CI."""
    from lit_sb3.zoo.stats import improvement_intervals

    seeds = list(range(args.seed_offset, args.seed_offset + args.seeds))
    env_id, _, kwargs, default_steps = EQUIVALENCE["sac"]
    timesteps = args.timesteps or default_steps
    print(f"compiled: SAC {env_id}, {len(seeds)} seeds, {timesteps} env steps per seed, {kwargs}; compile_update=True "
          f"against eager; score = mean return of {args.eval_episodes} deterministic episodes")  # fmt: skip
    scores: dict[str, list[float]] = {}
    walls: dict[str, float] = {}
    for arm in ("eager", "compiled"):
        t0 = time.time()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            n = len(seeds)
            scores[arm] = list(pool.map(_separate_run, ["sac"] * n, seeds, [timesteps] * n, [args.eval_episodes] * n,
                                        [arm == "compiled"] * n))  # fmt: skip
        walls[arm] = time.time() - t0
    for s, c, e in zip(seeds, scores["compiled"], scores["eager"]):
        print(f"  seed {s:3d}: compiled {c:9.1f} | eager {e:9.1f}")
    pair = ("compiled", "eager")
    interval = improvement_intervals(
        {k: np.asarray(v)[:, None] for k, v in scores.items()}, reps=args.reps, seed=0, pairs=[pair]
    )[pair]
    print(f"  mean ± std: compiled {np.mean(scores['compiled']):.1f} ± {np.std(scores['compiled']):.1f} | eager "
          f"{np.mean(scores['eager']):.1f} ± {np.std(scores['eager']):.1f}")  # fmt: skip
    print(f"  P(compiled > eager) = {interval.point:.2f}  95% CI [{interval.low:.2f}, {interval.high:.2f}]  (wall: "
          f"compiled {walls['compiled']:.0f} s, eager {walls['eager']:.0f} s on {args.workers} workers)")  # fmt: skip
    return {"sac": {"env": env_id, "timesteps": timesteps, "seeds": seeds, **scores,
                    "p_improvement": [interval.point, interval.low, interval.high], "wall_s": walls}}  # fmt: skip


# ----------------------------------------------------------------------
# The off-policy update alone: its cost per seed against K, and under torch.compile
# ----------------------------------------------------------------------

# the modes that time ``train(gradient_steps=N)``: the off-policy algorithms
OFF_POLICY = ("dqn", "sac", "td3")


def _filled_batch(algo: str, k: int) -> Any:
    """A K-seed batch (K = 1: the single-seed class) after a short fit (its replay storage holds enough transitions
    for a minibatch)."""
    from lit_sb3 import RLEnvDataModule, RLTrainer, SeedBatch
    from lit_sb3.vec_env import make_vec_env

    env_id, kwargs, _ = THROUGHPUT[algo]
    seeds = list(range(k))
    envs = [make_vec_env(env_id, n_envs=1, seed=s) for s in seeds]
    if k == 1:
        model = _classes()[algo]("MlpPolicy", seed=0, device="cpu", **kwargs)
    else:
        model = SeedBatch(_classes()[algo], seeds=seeds, device="cpu", **kwargs)
    RLTrainer(max_steps=300, logger=False, enable_checkpointing=False, enable_progress_bar=False).fit(
        model, datamodule=RLEnvDataModule(train_env=envs[0] if k == 1 else envs)
    )
    return model


def _time_updates(models: dict[Any, tuple[Any, int]], repeats: int, updates: int) -> dict[Any, list[float]]:
    """CPU ms per seed-update of each ``{key: (model, K)}``, ``repeats`` interleaved rounds of ``updates`` updates."""
    times: dict[Any, list[float]] = {key: [] for key in models}
    for _ in range(repeats):
        for key, (model, k) in models.items():
            cpu = time.process_time()
            model.train(gradient_steps=updates, batch_size=256)
            times[key].append((time.process_time() - cpu) / updates / k * 1e3)
    return times


def update_scaling(args: argparse.Namespace) -> dict[str, Any]:
    """CPU time per seed-update of the off-policy update for each K of ``--ks`` (K = 1: the single-seed class),
    interleaved repeats: how much of a single update stacking saves."""
    import torch as th

    th.set_num_threads(1)
    _quiet()
    ks = [int(k) for k in args.ks.split(",")]
    table: dict[str, Any] = {}
    for algo in args.algos:
        times = _time_updates({k: (_filled_batch(algo, k), k) for k in ks}, args.repeats, args.updates)
        medians = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"{algo.upper()} minibatch 256, {args.repeats} interleaved repeats of {args.updates} updates, ms per "
            "seed-update: " + ", ".join(f"K={k} {m:.2f}" for k, m in medians.items())
        )
        table[algo] = {"ms_per_seed_update": times, "medians": medians}
    return table


def compile_update(args: argparse.Namespace) -> dict[str, Any]:
    import torch as th
    from torch import nn

    th.set_num_threads(1)
    th._dynamo.config.recompile_limit = 64  # one compiled forward per stacked network (they share Sequential.forward)
    _quiet()
    table: dict[str, Any] = {}
    for algo in args.algos:
        eager, compiled = _filled_batch(algo, args.k), _filled_batch(algo, args.k)
        for module in compiled.policy.modules():  # the stacked networks (the members are not submodules)
            if isinstance(module, nn.Sequential):
                module.forward = th.compile(module.forward)
        start = time.time()
        compiled.train(gradient_steps=3, batch_size=256)
        compile_s = time.time() - start
        models = {"eager": (eager, args.k), "compiled": (compiled, args.k)}
        times = _time_updates(models, args.repeats, args.updates)
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(
            f"{algo.upper()} K={args.k}, minibatch 256, {args.repeats} interleaved repeats of {args.updates} updates: "
            f"eager {medians['eager']:.2f} ms per seed-update, compiled {medians['compiled']:.2f} ms "
            f"({medians['eager'] / medians['compiled']:.2f}x; compile {compile_s:.0f} s)"
        )
        table[algo] = {"ms_per_seed_update": times, "medians": medians, "compile_s": compile_s}
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tp = sub.add_parser("throughput", help="aggregate env steps/s, K batched vs K separate processes")
    tp.add_argument("--algos", default="ppo,a2c,dqn,sac,td3")
    tp.add_argument("--k", type=int, default=8)
    tp.add_argument("--pairs", type=int, default=2)
    tp.add_argument(
        "--cpus", default=None, help="cores every process is pinned to, e.g. 0 or 0,1 (default: the last core)"
    )
    tp.add_argument(
        "--net-arch",
        action="append",
        default=None,
        help="hidden widths of the off-policy algorithms, e.g. 256,256; repeat it for a sweep (default: the table's)",
    )
    tp.add_argument("--json", default=None)
    tp.add_argument(
        "--write-table",
        default=None,
        metavar="YAML",
        help="update bench run --seed-batch auto's efficiency table (benchmarks/seed_batch.yml) with the measured rows",
    )
    eq = sub.add_parser("equivalence", help="final returns, N seeds batched vs separate")
    eq.add_argument("--algos", default="ppo,sac,trpo,tqc")
    eq.add_argument("--seeds", type=int, default=10)
    eq.add_argument("--seed-offset", type=int, default=0)
    eq.add_argument("--timesteps", type=int, default=None, help="env steps per seed (default: per algo)")
    eq.add_argument("--eval-episodes", type=int, default=10)
    eq.add_argument("--workers", type=int, default=2, help="processes for the separate runs")
    eq.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    eq.add_argument("--json", default=None)
    ce = sub.add_parser("compiled", help="learning: N SAC seeds with compile_update=True vs the same N eager")
    ce.add_argument("--seeds", type=int, default=10)
    ce.add_argument("--seed-offset", type=int, default=0)
    ce.add_argument("--timesteps", type=int, default=None, help="env steps per seed (default: the SAC equivalence's)")
    ce.add_argument("--eval-episodes", type=int, default=10)
    ce.add_argument("--workers", type=int, default=2, help="processes per arm")
    ce.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    ce.add_argument("--json", default=None)
    cp = sub.add_parser("compile", help="the batched SAC/TD3 update, eager vs torch.compile")
    cp.add_argument("--algos", default="sac,td3")
    cp.add_argument("--k", type=int, default=8)
    cp.add_argument("--updates", type=int, default=30)
    cp.add_argument("--repeats", type=int, default=6)
    cp.add_argument("--json", default=None)
    up = sub.add_parser("update", help="CPU time per seed-update of the off-policy update for several K")
    up.add_argument("--algos", default="sac,td3")
    up.add_argument("--ks", default="1,2,4,8")
    up.add_argument("--updates", type=int, default=50)
    up.add_argument("--repeats", type=int, default=5)
    up.add_argument("--json", default=None)
    gp = sub.add_parser("gpu", help="SAC HalfCheetah: K seeds batched on a GPU vs K SB3 processes on the CPU cores")
    gp.add_argument("--k", type=int, default=16)
    gp.add_argument("--device", default="cuda")
    gp.add_argument("--pairs", type=int, default=1)
    gp.add_argument("--json", default=None)
    wk = sub.add_parser("_worker")
    wk.add_argument("--algo", required=True)
    wk.add_argument("--seeds", required=True)
    wk.add_argument("--out", required=True)
    wk.add_argument("--go", required=True)
    wk.add_argument("--batched", action="store_true")
    wk.add_argument("--cpus", default=None)
    wk.add_argument("--device", default="cpu")
    wk.add_argument("--library", choices=["lit", "sb3"], default="lit")
    wk.add_argument("--gpu-spec", action="store_true", help="use the GPU table (SAC HalfCheetah)")
    wk.add_argument("--net-arch", default=None)
    args = parser.parse_args(argv)
    if args.command == "_worker":
        _worker(args)
        return
    if args.command not in ("gpu", "compiled"):
        args.algos = [a.strip().lower() for a in args.algos.split(",") if a.strip()]
        known: Any = {"throughput": THROUGHPUT, "equivalence": EQUIVALENCE}.get(args.command, OFF_POLICY)
        unknown = [a for a in args.algos if a not in known]
        if unknown:
            parser.error(f"unknown algo {unknown[0]!r} for {args.command}; choose from {', '.join(known)}")
    commands = {
        "throughput": throughput,
        "compile": compile_update,
        "update": update_scaling,
        "equivalence": equivalence,
        "compiled": compiled_equivalence,
        "gpu": gpu,
    }
    table = commands[args.command](args)
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
