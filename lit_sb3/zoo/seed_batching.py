"""``--seed-batch auto``: how many seeds of one (algo, env) pair to train together, from measured efficiency.

The table ``benchmarks/seed_batch.yml`` (shipped as package data, refreshed by
``benchmarks/bench_seed_batch.py throughput --write-table``) holds, per algorithm and env family (a suite of
``benchmarks/suites.yml``), the measured ratio of K seeds in one process over the same K seeds as separate
processes one after another. A pair is batched when its ratio is at least :data:`MIN_RATIO`, with the measured K,
lowered where smaller batches end the grid sooner on its workers (:func:`lower_for_workers`); every choice is said
in one plan line.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = [
    "AUTO",
    "MIN_RATIO",
    "Efficiency",
    "auto_seed_batches",
    "choose_k",
    "env_family",
    "load_table",
    "lower_for_workers",
    "parse_seed_batch",
]

AUTO = "auto"
#: batch a pair only where K seeds in one process measured at least this much faster than K processes
MIN_RATIO = 1.1
#: suites that are not env families (their envs belong to another suite)
_NOT_FAMILIES = frozenset({"smoke"})


@dataclass(frozen=True)
class Efficiency:
    """One measured row: K seeds batched against K separate runs one after another."""

    algo: str
    family: str
    env: str
    k: int
    ratio: float
    measured: str
    pairs: tuple[float, ...] = ()


def parse_seed_batch(value: str) -> str | int:
    """``--seed-batch``'s value: ``"auto"`` or an integer (argparse ``type``; the command checks that it is >= 1).

    Args:
        value: the command-line text.
    """
    if value.strip().lower() == AUTO:
        return AUTO
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 1, got {value!r}") from None


def load_table(path: str | Path | None = None) -> dict[tuple[str, str], Efficiency]:
    """The efficiency table, keyed by (algo, family).

    Args:
        path: the YAML file (default: the shipped ``seed_batch.yml``).
    """
    from lit_sb3.zoo.config.loading import load_yaml_file
    from lit_sb3.zoo.data import data_path

    p = Path(path) if path is not None else data_path("seed_batch.yml")
    data = load_yaml_file(p, "seed-batch efficiency table")
    rows = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise BenchError(f"{p}: must hold a list 'entries' of {{algo, family, env, k, ratio, measured}}")
    table: dict[tuple[str, str], Efficiency] = {}
    for i, row in enumerate(rows):
        try:
            entry = Efficiency(str(row["algo"]), str(row["family"]), str(row["env"]), int(row["k"]),
                               float(row["ratio"]), str(row["measured"]), tuple(float(x) for x in row.get("pairs", ())))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchError(
                f"{p}: entry {i + 1} needs algo, family, env, k (int), ratio (float), measured: {exc}"
            ) from None
        if entry.k < 1 or not math.isfinite(entry.ratio) or entry.ratio <= 0:
            raise BenchError(f"{p}: entry {i + 1} ({entry.algo}, {entry.family}): k must be >= 1 and ratio > 0")
        table[(entry.algo, entry.family)] = entry
    return table


def env_family(env_id: str, suites: dict[str, Any] | None = None) -> str | None:
    """The first suite (in ``suites.yml`` order, ``smoke`` aside) that lists ``env_id``; None if none does.

    Args:
        env_id: the gymnasium env id.
        suites: the suites (default: :func:`lit_sb3.zoo.suites.load_suites`).
    """
    if suites is None:
        from lit_sb3.zoo.suites import load_suites

        suites = load_suites()
    for name, suite in suites.items():
        if name not in _NOT_FAMILIES and env_id in suite.envs:
            return name
    return None


def lookup(algo: str, family: str | None, table: dict[tuple[str, str], Efficiency]) -> tuple[Efficiency | None, str]:
    """The row that decides ``algo`` on ``family`` (its own, else the algorithm's best measured) and where it comes
    from (for the plan line); (None, "") for an algorithm without a row.

    Args:
        algo: the algorithm's bench name.
        family: the env family (None: not in a suite).
        table: the efficiency table (:func:`load_table`).
    """
    if family is not None and (algo, family) in table:
        return table[(algo, family)], ""
    rows = [row for (a, _), row in table.items() if a == algo]
    if not rows:
        return None, ""
    row = max(rows, key=lambda r: r.ratio)
    return row, f"; {family or 'this env family'} not measured, using {row.family}'s"


def choose_k(
    algo: str, env_id: str, n_seeds: int, table: dict[tuple[str, str], Efficiency] | None = None,
    suites: dict[str, Any] | None = None,
) -> tuple[int, str]:  # fmt: skip
    """K for ``n_seeds`` seeds of ``algo`` on ``env_id`` (the measured K, at most ``n_seeds``, where the measured
    ratio is at least :data:`MIN_RATIO`; else 1) and why, in words.

    Args:
        algo: the algorithm's bench name.
        env_id: the env id.
        n_seeds: the seeds to group.
        table: the efficiency table (default: :func:`load_table`).
        suites: the suites (default: :func:`lit_sb3.zoo.suites.load_suites`).
    """
    table = load_table() if table is None else table
    row, note = lookup(algo, env_family(env_id, suites), table)
    if row is None:
        return 1, f"no measured efficiency for {algo}"
    if row.ratio < MIN_RATIO:
        return 1, f"K={row.k} measured {row.ratio:.2f}x on {row.env}, under {MIN_RATIO}x{note}"
    return max(1, min(row.k, n_seeds)), f"K={row.k} measured {row.ratio:.2f}x on {row.env}{note}"


def auto_seed_batches(
    todo: Sequence[Any], workers: int, table: dict[tuple[str, str], Efficiency] | None = None
) -> tuple[list[list[Any]], list[str]]:
    """Seed batches for ``--seed-batch auto`` and one line per (algo, env) group saying what was chosen and why.

    Each group of jobs that differ only by their seed gets :func:`choose_k`'s K, then lowered where that shortens
    the grid's estimated wall time over ``workers`` (:func:`lower_for_workers`: a batch occupies one worker, so
    batching must not leave workers idle).

    Args:
        todo: the jobs to run (:class:`~lit_sb3.zoo.jobs.JobSpec`).
        workers: parallel worker slots.
        table: the efficiency table (default: :func:`load_table`).
    """
    from lit_sb3.zoo.jobs import DEFAULT_IMPL, seed_batches
    from lit_sb3.zoo.suites import load_suites

    table = load_table() if table is None else table
    suites = load_suites()
    units: list[list[Any]] = []
    lines: list[str] = []
    groups: list[list[Any]] = []
    reference: dict[tuple[str, str, str], int] = {}
    for group in seed_batches(todo, max(1, len(todo))):  # one unit per group of jobs differing only by their seed
        if group[0].impl != DEFAULT_IMPL:  # the reference side: one rl_zoo3 process per seed (never batched)
            units.append(group)
            key = (group[0].impl, group[0].algo, group[0].env_id)
            reference[key] = reference.get(key, 0) + len(group)
        else:
            groups.append(group)
    for (impl, algo, env_id), n in reference.items():
        lines.append(f"--seed-batch auto: {impl} side of {algo} on {env_id}: {n} seed(s), each in its own process")
    chosen, reasons = [], []
    for group in groups:
        k, why = choose_k(group[0].algo, group[0].env_id, len(group), table, suites)
        chosen.append(k)
        reasons.append(why)
    capped = lower_for_workers(groups, chosen, units, workers)
    single = 0  # (algo, env) groups of one seed: nothing to choose, said in one line
    for group, k, first_k, why in zip(groups, capped, chosen, reasons):
        batches = seed_batches(group, k)
        units += batches
        if len(group) == 1:
            single += 1
            continue
        sizes = "+".join(str(len(b)) for b in batches)
        cap = f"; lowered from {first_k} to keep {workers} worker(s) busy" if k < first_k else ""
        lines.append(f"--seed-batch auto: {group[0].algo} on {group[0].env_id}: {len(group)} seed(s) as {sizes} "
                     f"(K <= {k}: {why}{cap})")  # fmt: skip
    if single:
        lines.append(f"--seed-batch auto: {single} algo x env pair(s) of one seed each: nothing to batch")
    return units, lines


def lower_for_workers(groups: Sequence[Sequence[Any]], chosen: Sequence[int], fixed: Sequence[Sequence[Any]],
                      workers: int) -> list[int]:  # fmt: skip
    """Each group's K, lowered from ``chosen`` while that shortens the grid's estimated wall time: every unit's
    seconds from the cost model (:func:`lit_sb3.zoo.cost.unit_seconds`: the shipped rates and batching speed-ups),
    laid out longest first over ``workers`` slots; each step tries every smaller K of the group holding the longest
    unit. A K worth its speed-up on one core is not worth an idle one: 5 SAC seeds as one batch (1.2x) beside 5
    quick A2C seeds on 2 workers leave the second worker idle most of the time; as 3 + 2 they share both.

    Args:
        groups: the jobs of each (algo, env) group (they differ only by their seed).
        chosen: each group's K before lowering.
        fixed: units that are not batched (the reference side's jobs).
        workers: parallel worker slots.
    """
    from lit_sb3.zoo.cost import job_costs, schedule_eta, unit_seconds
    from lit_sb3.zoo.jobs import seed_batches

    costs, _ = job_costs([j for g in (*groups, *fixed) for j in g])
    fixed_seconds = [unit_seconds([costs[j.job_id] for j in u], 1, u[0].algo) for u in fixed]
    memo: dict[tuple[int, int], list[float]] = {}

    def units_of(i: int, k: int) -> list[float]:  # group i's units' seconds at K = k
        if (i, k) not in memo:
            group = groups[i]
            memo[i, k] = [unit_seconds([costs[j.job_id] for j in b], k, group[0].algo) for b in seed_batches(group, k)]
        return memo[i, k]

    def wall(ks: Sequence[int]) -> float:
        seconds = fixed_seconds + [s for i, k in enumerate(ks) for s in units_of(i, k)]
        return schedule_eta([], sorted(seconds, reverse=True), workers)

    ks = [max(1, min(k, len(g))) for g, k in zip(groups, chosen)]
    best = wall(ks)
    while any(k > 1 for k in ks):
        i = max((i for i, k in enumerate(ks) if k > 1), key=lambda i: max(units_of(i, ks[i])))
        seconds, k = min((wall(ks[:i] + [k] + ks[i + 1 :]), k) for k in range(1, ks[i]))
        if seconds >= best * 0.99:  # lower only for a real gain (each step costs batching efficiency)
            break
        best, ks[i] = seconds, k
    return ks
