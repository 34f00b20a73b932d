"""``bench random-scores``: measure the return of a uniform random policy (the 0 of normalised scores)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from lit_sb3.zoo.errors import BenchError, did_you_mean

__all__ = ["FALLBACK_SUITES", "add_parser", "expand_envs", "random_returns", "run"]

# Used only while lit_sb3.zoo.suites is not importable.
FALLBACK_SUITES: dict[str, list[str]] = {
    "classic": ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"],
    "mujoco": ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5", "Swimmer-v5"],
}


def expand_envs(spec: str) -> list[str]:
    """Expand a comma list of suite names and env ids (``lit_sb3.zoo.suites`` when present).

    Args:
        spec: e.g. ``"classic,mujoco,CartPole-v1"``.
    """
    try:
        from lit_sb3.zoo.suites import expand_envs as suites_expand
    except ImportError:
        suites_expand = None
    if suites_expand is not None:
        return list(suites_expand(spec))
    import gymnasium as gym

    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        ids = FALLBACK_SUITES.get(item)
        if ids is None:
            if item not in gym.registry:
                raise BenchError(
                    f"unknown env or suite {item!r}{did_you_mean(item, [*FALLBACK_SUITES, *gym.registry])}"
                )
            ids = [item]
        out.extend(i for i in ids if i not in out)
    return out


def random_returns(env_id: str, episodes: int, seed: int) -> np.ndarray:
    """Undiscounted returns of ``episodes`` episodes of ``action_space.sample()``.

    Args:
        env_id: gymnasium id.
        episodes: number of episodes.
        seed: seeds the first ``reset`` and the action space.
    """
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = np.zeros(episodes)
    try:
        for ep in range(episodes):
            env.reset(seed=seed if ep == 0 else None)
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                total += float(reward)
                done = terminated or truncated
            returns[ep] = total
    finally:
        env.close()
    return returns


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``random-scores``.

    Args:
        subparsers: the CLI's sub-parsers.
    """
    parser = subparsers.add_parser(
        "random-scores", help="measure uniform-random-policy returns (normalisation baseline)"
    )
    parser.add_argument("--envs", required=True, help="comma list of env ids and suites (classic, mujoco)")
    parser.add_argument("--episodes", type=int, default=100, help="episodes per env (>= 100 for the table)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", metavar="YAML", help="update the random fields of this scores table")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Measure, print a table, optionally update the scores table.

    Args:
        args: parsed arguments.
    """
    if args.episodes < 1:
        raise BenchError(f"--episodes must be >= 1, got {args.episodes}")
    envs = expand_envs(args.envs)
    if not envs:
        raise BenchError("--envs named no env")
    command = "bench random-scores " + shlex.join(
        ["--envs", args.envs, "--episodes", str(args.episodes), "--seed", str(args.seed)]
    )
    results: dict[str, np.ndarray] = {}
    print(f"{'env':<28} {'episodes':>8} {'mean':>12} {'std':>10}")
    for env_id in envs:
        r = random_returns(env_id, args.episodes, args.seed)
        results[env_id] = r
        print(f"{env_id:<28} {r.size:>8} {r.mean():>12.3f} {r.std():>10.3f}", flush=True)
    if args.write:
        from lit_sb3.zoo.normalization import ScoreEntry, ScoreTable, load_table, save_table

        path = Path(args.write)
        table = load_table(path) if path.exists() else ScoreTable(1, {})
        header = _header(path)
        changed = False
        for env_id, r in results.items():
            entry = table.entries.setdefault(env_id, ScoreEntry(None, None))
            new = round(float(r.mean()), 3)
            changed |= entry.random is not None and entry.random != new  # filling a blank keeps the version
            entry.random = new
            entry.random_source = command
            entry.extra.update({"random_std": round(float(r.std()), 3), "random_episodes": int(r.size)})
        if changed and path.exists():
            table.version += 1
        save_table(table, path, header)
        print(f"wrote {path} (version {table.version})", file=sys.stderr)
    return 0


def _header(path: Path) -> str:
    """Leading comment lines of an existing file, kept on rewrite."""
    if not path.exists():
        return ""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""
