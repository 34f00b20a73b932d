"""Sequential comparisons of P(X > Y) with error control: seeds in waves, a decision after every wave.

The rule (``bench run --until-verdict``, ``bench report``), for one comparison of algorithm X with Y on one env
(or on several envs at once, the *aggregate*: P(X > Y) averaged over envs, as rliable defines it):

* **Looks.** Seeds run in waves: the first wave has ``min_seeds`` seeds per algorithm, each later one
  ``wave`` more, the last stops at ``max_seeds``. The looks (seeds per algorithm after each wave) are fixed by
  the plan before any run, so the information fraction ``t_k = n_k / max_seeds`` of look k is known.
* **Statistic.** The Mann-Whitney estimate of P(X > Y) with ties counted half (``U / (n_x n_y)`` with
  mid-ranks; CartPole's 500-against-500 is a tie), averaged over envs for the aggregate.
* **Superiority ("X credibly better", "Y credibly better"): a group-sequential permutation test** with a
  Lan-DeMets alpha-spending function (O'Brien-Fleming type ``2 - 2 Phi(z_{1-a/2} / sqrt(t))`` by default,
  Pocock type ``a ln(1 + (e - 1) t)`` on request), half of the level for each direction. Under the null
  (X and Y have the same score distribution) the runs of one wave are exchangeable, so conditional on the
  values of each wave the X/Y labels are uniform within each wave, independently across waves (and envs).
  At look k the boundary is the smallest value whose crossing probability under those within-wave label
  permutations, added to the probability of having crossed at an earlier look (with the earlier looks'
  boundaries), stays within the cumulative spending ``a(t_k) / 2``: the false "credibly better" rate is at
  most ``alpha`` however often the data are looked at, in finite samples, with any ties. Label sets are
  enumerated exactly when the plan's product of ``C(2w, w)`` is at most :data:`EXACT_LIMIT`, else drawn
  (:data:`MC_DRAWS` per wave, fixed seeds: the same data always give the same decision).
* **Many comparisons: Holm (family-wise error).** Each comparison carries its *repeated p-value* (the
  smallest level from which on its group-sequential test, run at that level, would have crossed at some look
  so far; Jennison & Turnbull 2000, ch. 9), valid at any look: ``p <= a`` implies that the level-``a`` test
  crossed, for ``a`` = ``alpha`` and each of Holm's ``alpha / j``, which are always evaluated exactly. Holm's step-down over all pairs x envs (+ the aggregates) at
  every look keeps the probability of *any* false "credibly better" at ``alpha`` under any dependence
  between comparisons (they share algorithms and envs, so BH's positive-dependence condition is not given).
* **Equivalence ("credibly equivalent", |P(X > Y) - 0.5| < margin) and the intervals shown: an anytime-valid
  confidence sequence** (Waudby-Smith & Ramdas 2023, hedged betting) for P(X > Y) from the seed-paired
  kernel ``k(x_i, y_i)`` in {0, 1/2, 1} (its mean is P(X > Y), ties half), at level ``alpha / m`` for ``m``
  comparisons (Bonferroni): it covers P(X > Y) at every wave at once, so stopping when it fits inside the
  margin keeps a false "equivalent" below ``alpha`` too. It uses n pairs where the rank test uses n^2
  comparisons, so it is the slower of the two: it never decides superiority here.
* **Why not only a confidence sequence**: an e-process for P(X > Y) on n pairs (the one here) needs 10 seeds per
  algorithm to call even a perfect separation at 5 %; the permutation test calls it at 5-6 (the exact
  one-look p-value of 5 runs against 5 is 2/252). RL comparisons live at 3-10 seeds, so the rank test decides.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import comb
from scipy.stats import norm, rankdata

__all__ = [
    "SPENDING",
    "EXACT_LIMIT",
    "MC_DRAWS",
    "SequentialPlan",
    "Look",
    "Comparison",
    "spend",
    "paired_kernel",
    "confidence_sequence",
    "group_sequential",
    "first_crossing",
    "holm",
    "decide",
    "fixed_design",
]

SPENDING = ("pocock", "obrien-fleming")
#: the largest number of label sets enumerated exactly (over all planned waves and envs of a comparison)
EXACT_LIMIT = 200_000
#: label sets drawn per wave otherwise
MC_DRAWS = 20_000
#: levels at which the repeated p-value is searched (log-spaced; the reported p-value is the smallest crossing one)
_P_GRID = np.geomspace(1e-5, 1.0, 241)
OUTCOMES = ("x_better", "y_better", "equivalent", "open")


def spend(t: float, alpha: ArrayLike, kind: str = "pocock") -> NDArray[np.float64]:
    """Cumulative two-sided level spent by information fraction ``t`` (Lan & DeMets 1983).

    Args:
        t: information fraction in [0, 1] (seeds so far / max seeds).
        alpha: total level (or an array of levels).
        kind: ``pocock`` (``alpha ln(1 + (e - 1) t)``) or ``obrien-fleming``
            (``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``).
    """
    a = np.asarray(alpha, dtype=np.float64)
    t = min(max(float(t), 0.0), 1.0)
    if kind not in SPENDING:
        raise ValueError(f"unknown spending function {kind!r}; allowed: {', '.join(SPENDING)}")
    if t <= 0.0:
        return np.zeros_like(a)
    if kind == "obrien-fleming":
        return np.minimum(a, 2.0 - 2.0 * norm.cdf(norm.ppf(1.0 - a / 2.0) / math.sqrt(t)))
    return np.minimum(a, a * math.log(1.0 + (math.e - 1.0) * t))


@dataclass(frozen=True)
class SequentialPlan:
    """The looks of a sequential comparison, fixed before any run.

    Args:
        min_seeds: seeds per algorithm of the first wave (the first look).
        max_seeds: seeds per algorithm at the last look.
        wave: seeds per algorithm added by each later wave.
        alpha: level of a false "credibly better" over all looks (and over the family, with Holm).
        margin: equivalence margin on P(X > Y): equivalent when the interval lies inside 0.5 +- margin.
        spending: alpha-spending function (:data:`SPENDING`).
    """

    min_seeds: int
    max_seeds: int
    wave: int
    alpha: float = 0.05
    margin: float = 0.1
    spending: str = "pocock"

    def __post_init__(self) -> None:
        if self.min_seeds < 2:
            raise ValueError(
                f"--min-seeds must be >= 2 (a rank comparison needs 2 runs per side), got {self.min_seeds}"
            )
        if self.max_seeds < self.min_seeds:
            raise ValueError(f"--max-seeds ({self.max_seeds}) must be >= --min-seeds ({self.min_seeds})")
        if self.wave < 1:
            raise ValueError(f"--wave must be >= 1 seed per wave, got {self.wave}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"--alpha must be in (0, 1), got {self.alpha:g}")
        if not 0.0 < self.margin < 0.5:
            raise ValueError(f"--equivalence-margin must be in (0, 0.5) (on P(X > Y)), got {self.margin:g}")
        if self.spending not in SPENDING:
            from lit_sb3.zoo.errors import did_you_mean

            raise ValueError(
                f"--spending: unknown spending function {self.spending!r}{did_you_mean(self.spending, SPENDING)}; "
                f"allowed: {', '.join(SPENDING)}"
            )

    @property
    def looks(self) -> tuple[int, ...]:
        """Seeds per algorithm at each look: min, min + wave, ..., max."""
        out = list(range(self.min_seeds, self.max_seeds, self.wave)) or [self.min_seeds]
        if out[-1] != self.max_seeds:
            out.append(self.max_seeds)
        return tuple(out)

    @property
    def n_looks(self) -> int:
        """How many looks :attr:`looks` has (counted, not listed)."""
        return 1 + max(0, -(-(self.max_seeds - self.min_seeds) // self.wave))

    def look(self, k: int) -> int:
        """Seeds per algorithm at look ``k`` (0-based): ``looks[k]``, computed.

        Args:
            k: look index, in ``[0, n_looks)``.
        """
        if not 0 <= k < self.n_looks:
            raise IndexError(f"look {k} of a plan with {self.n_looks} looks")
        return min(self.min_seeds + k * self.wave, self.max_seeds)

    def wave_seeds(self, k: int) -> range:
        """Seed indices (0-based, in seed order) of wave ``k`` (0-based).

        Args:
            k: wave index.
        """
        return range(0 if k == 0 else self.look(k - 1), self.look(k))

    def cumulative(self, alpha: ArrayLike | None = None) -> NDArray[np.float64]:
        """Cumulative two-sided level spent at each look: ``[looks]``, or ``[levels, looks]`` for an array.

        Args:
            alpha: the level, or an array of levels (default the plan's).
        """
        a = np.asarray(self.alpha if alpha is None else alpha, dtype=np.float64)
        return np.stack([spend(n / self.max_seeds, a, self.spending) for n in self.looks], axis=-1)

    def as_dict(self) -> dict[str, Any]:
        """The plan as plain data (with its looks)."""
        return {**asdict(self), "looks": list(self.looks)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SequentialPlan:
        """Read :meth:`as_dict` back (unknown keys ignored).

        Args:
            data: the dict.
        """
        keys = ("min_seeds", "max_seeds", "wave", "alpha", "margin", "spending")
        return cls(**{k: data[k] for k in keys if k in data})

    def describe_looks(self, most: int = 12) -> str:
        """The looks as text: all of them, or with more than ``most`` the first few, ``...`` and the last two.

        Args:
            most: the most looks written out.
        """
        n = self.n_looks
        shown = range(n) if n <= most else [*range(most - 3), n - 2, n - 1]
        parts = [str(self.look(k)) for k in shown]
        if n > most:
            parts.insert(most - 3, "...")
            return ", ".join(parts) + f" ({n:,} looks, every {self.wave} seed(s))"
        return ", ".join(parts)

    def describe(self) -> str:
        """One line: the rule and its looks."""
        return (
            f"group-sequential permutation test of P(X > Y) (Mann-Whitney, ties half), Lan-DeMets {self.spending} "
            f"spending, alpha {self.alpha:g} two-sided, Holm over all comparisons; looks at "
            f"{self.describe_looks()} seeds per algorithm; equivalent when the anytime-valid confidence "
            f"sequence lies inside 0.5 +- {self.margin:g}"
        )


# ---------------------------------------------------------------------------------------------------------
# the permutation group-sequential test
# ---------------------------------------------------------------------------------------------------------
def _exact_sets(n: int, k: int) -> NDArray[np.bool_]:
    """All ways to label ``k`` of ``n`` slots X: ``[C(n, k), n]``; row 0 is the observed labelling (the first k)."""
    rows = np.zeros((int(comb(n, k, exact=True)), n), dtype=bool)
    for i, chosen in enumerate(itertools.combinations(range(n), k)):
        rows[i, list(chosen)] = True
    return rows


def _drawn_sets(n: int, k: int, draws: int, seed: Sequence[int]) -> NDArray[np.bool_]:
    rng = np.random.default_rng(list(seed))
    ranks = np.argsort(rng.random((draws, n)), axis=1)
    return ranks < k


@dataclass
class _Labels:
    """Label sets of every (env, wave) unit of a comparison, row-aligned (row b of every unit is one joint set)."""

    units: dict[tuple[int, int], NDArray[np.bool_]]
    exact: bool
    count: int


@functools.lru_cache(maxsize=32)
def _labels(sizes: tuple[tuple[tuple[int, int], ...], ...]) -> _Labels:
    """Label sets for ``sizes[env][wave] = (n_x, n_y)``: the full product when small, else per-unit draws (cached:
    the same plan gives the same sets)."""
    total = 1.0
    for env in sizes:
        for nx, ny in env:
            total *= comb(nx + ny, nx, exact=True)
    units: dict[tuple[int, int], NDArray[np.bool_]] = {}
    if total <= EXACT_LIMIT:
        count, stride = int(total), 1
        for e, env in enumerate(sizes):
            for w, (nx, ny) in enumerate(env):
                sets = _exact_sets(nx + ny, nx)
                idx = (np.arange(count) // stride) % len(sets)
                units[(e, w)] = sets[idx]
                stride *= len(sets)
        return _Labels(units, True, count)
    for e, env in enumerate(sizes):
        for w, (nx, ny) in enumerate(env):
            units[(e, w)] = _drawn_sets(nx + ny, nx, MC_DRAWS, (2025, e, w, nx, ny))
    return _Labels(units, False, MC_DRAWS)


def _statistic(
    x: Sequence[NDArray[np.float64]], y: Sequence[NDArray[np.float64]], cuts: Sequence[Sequence[tuple[int, int]]],
    look: int, labels: _Labels,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:  # fmt: skip
    """P(X > Y) (mean over envs of U / (n_x n_y), mid-ranks) on waves ``<= look`` for a batch of C comparisons
    (``x[env]``: ``[C, runs]`` in seed order): observed ``[C]`` and per label set ``[C, count]``."""
    n_batch = x[0].shape[0]
    perm = np.zeros((n_batch, labels.count))
    obs = np.zeros(n_batch)
    for e, (xe, ye) in enumerate(zip(x, y, strict=True)):
        values, slots, obs_x = [], [], []
        sx = sy = 0
        for w in range(look + 1):
            nx, ny = cuts[e][w]
            values += [xe[:, sx : sx + nx], ye[:, sy : sy + ny]]
            slots.append(labels.units[(e, w)])
            obs_x += [np.ones(nx, dtype=bool), np.zeros(ny, dtype=bool)]
            sx, sy = sx + nx, sy + ny
        ranks = rankdata(np.concatenate(values, axis=1), method="average", axis=1)
        is_x = np.concatenate(slots, axis=1).astype(np.float64)
        base = sx * (sx + 1) / 2.0
        perm += (ranks @ is_x.T - base) / (sx * sy)
        obs += (ranks[:, np.concatenate(obs_x)].sum(axis=1) - base) / (sx * sy)
    return obs / len(x), perm / len(x)


def _first_crossings(
    perm: NDArray[np.float64], obs: NDArray[np.float64], cum: NDArray[np.float64], count: int
) -> NDArray[np.int64]:
    """The first look at which the observed path crosses the boundaries a spending sets, and the side (0: X
    better, 1: Y better), ``-1`` where it never crosses: ``[rows, 2]``, one row per comparison of a batch or per
    level.

    Args:
        perm: the statistic per label set and look, ``[P, count, looks]`` (P comparisons, or 1).
        obs: the observed statistic, ``[P, looks]``.
        cum: cumulative two-sided spending at each look, ``[L, looks]`` (L levels, or 1; P == L if both > 1).
        count: label sets.
    """
    n_p, n_l, n_looks = perm.shape[0], cum.shape[0], cum.shape[1]
    n_rows = max(n_p, n_l)
    out = np.full((n_rows, 2), -1, dtype=np.int64)
    chunk = max(1, 4_000_000 // max(count, 1))
    positions = np.arange(count)
    for start in range(0, n_rows, chunk):
        rows = slice(start, min(n_rows, start + chunk))
        n = rows.stop - rows.start
        pr, ob = (perm, obs) if n_p == 1 else (perm[rows], obs[rows])
        c = cum if n_l == 1 else cum[rows]
        alive = np.ones((n, count), dtype=bool)
        spent = np.zeros((n, 2))  # label sets that crossed up / down so far
        first = np.full((n, 2), -1, dtype=np.int64)
        for j in range(n_looks):
            crossed_any = np.zeros_like(alive)
            for side, sign in ((0, 1.0), (1, -1.0)):
                v = sign * pr[:, :, j]  # crossing means v >= boundary
                order = np.argsort(-v, axis=1, kind="stable")
                sv = np.take_along_axis(v, order, axis=1)
                is_last = np.concatenate([sv[:, 1:] != sv[:, :-1], np.ones((sv.shape[0], 1), dtype=bool)], axis=1)
                ends = np.where(is_last, positions, count)
                group_end = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]  # the last index of each tie group
                alive_sorted = np.take_along_axis(alive, np.broadcast_to(order, alive.shape), axis=1)
                ge = np.take_along_axis(
                    np.cumsum(alive_sorted, axis=1), np.broadcast_to(group_end, alive.shape), axis=1
                )
                budget = c[:, j, None] / 2.0 * count - spent[:, side, None] + 1e-9
                n_ok = (ge <= budget).sum(axis=1)  # a prefix of the sorted values may cross
                svb = np.broadcast_to(sv, alive.shape)
                bound = np.where(n_ok > 0, svb[np.arange(n), np.maximum(n_ok - 1, 0)], np.inf)
                crossed = alive & (v >= bound[:, None])
                spent[:, side] += crossed.sum(axis=1)
                crossed_any |= crossed
                hit = (sign * ob[:, j] >= bound) & (first[:, 0] < 0)
                first[hit, 0], first[hit, 1] = j, side
            alive &= ~crossed_any
        out[rows] = first
    return out


def _batch(
    x: Sequence[ArrayLike], y: Sequence[ArrayLike], plan: SequentialPlan, looks: int | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], _Labels, int]:
    xs = [np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in x]
    ys = [np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in y]
    n_avail = min(min(v.shape[1] for v in xs), min(v.shape[1] for v in ys))
    plan_looks = plan.looks
    k_max = sum(n <= n_avail for n in plan_looks) if looks is None else looks
    bounds = [0, *plan_looks]
    cuts = tuple(tuple((bounds[w + 1] - bounds[w],) * 2 for w in range(len(plan_looks))) for _ in xs)
    labels = _labels(cuts)  # over all planned waves: the same sets at every look
    if k_max < 1:
        return np.zeros((xs[0].shape[0], 0)), np.zeros((xs[0].shape[0], labels.count, 0)), labels, 0
    per_look = [_statistic(xs, ys, cuts, j, labels) for j in range(k_max)]
    obs = np.stack([s[0] for s in per_look], axis=-1)
    perm = np.stack([s[1] for s in per_look], axis=-1)
    return obs, perm, labels, k_max


def first_crossing(
    x: Sequence[ArrayLike], y: Sequence[ArrayLike], plan: SequentialPlan, alpha: float | None = None
) -> NDArray[np.int64]:
    """For a batch of comparisons, the look (0-based) at which the group-sequential test at level ``alpha`` first
    calls a difference, and its side (0: X better, 1: Y better); -1 where it never does: ``[C, 2]``.

    Args:
        x: per env, X's scores ``[C, runs]`` in seed order.
        y: per env, Y's scores ``[C, runs]``.
        plan: the looks and spending.
        alpha: level (default the plan's).
    """
    obs, perm, labels, k_max = _batch(x, y, plan, None)
    cum = plan.cumulative(plan.alpha if alpha is None else alpha)[None, :k_max]
    return _first_crossings(perm, obs, cum, labels.count)


@dataclass(frozen=True)
class Look:
    """One comparison at one look.

    Args:
        n: seeds per algorithm (per env) the look rests on.
        point: P(X > Y) (Mann-Whitney, ties half; mean over envs for the aggregate).
        low: lower end of the confidence sequence.
        high: upper end of the confidence sequence.
        p_value: repeated p-value of the group-sequential test so far (two-sided).
        direction: ``x`` or ``y``: the side the test leans to (the one that crossed at the smallest level).
    """

    n: int
    point: float
    low: float
    high: float
    p_value: float
    direction: str


def group_sequential(
    x: Sequence[ArrayLike],
    y: Sequence[ArrayLike],
    plan: SequentialPlan,
    looks: int | None = None,
    extra_levels: Sequence[float] = (),
    levels: Sequence[float] | None = None,
) -> list[tuple[float, float, str]]:
    """The group-sequential permutation test at each look: ``(point, repeated p-value, direction)``.

    Args:
        x: per env, X's scores in seed order (at least ``plan.looks[looks - 1]`` of them).
        y: per env, Y's scores in seed order.
        plan: the looks and spending.
        looks: how many looks to evaluate (default: all the data allows).
        extra_levels: levels at which the repeated p-value is resolved exactly (e.g. Holm's ``alpha / j``); it is
            otherwise the smallest of 241 log-spaced levels in [1e-5, 1] (and ``plan.alpha``) at which the test
            crosses, never below the exact one.
        levels: search only these levels (and ``plan.alpha``) instead of the 241 (the p-value is then the smallest
            of them that crosses, else 1: enough to apply Holm or a fixed level, and much faster).
    """
    obs, perm, labels, k_max = _batch(x, y, plan, looks)
    if k_max < 1:
        return []
    obs, perm = obs[0], perm[:1]
    grid = _P_GRID if levels is None else np.asarray(levels, dtype=np.float64)
    exact = np.concatenate([np.asarray(extra_levels, dtype=np.float64), [plan.alpha]])
    levels_ = np.unique(np.concatenate([grid, exact]))
    first = np.full((levels_.size, 2), -2, dtype=np.int64)  # -2: not evaluated

    def evaluate(idx: NDArray[np.int64]) -> None:
        idx = idx[first[idx, 0] == -2]
        if idx.size:
            cum = plan.cumulative(levels_[idx])[:, :k_max]
            first[idx] = _first_crossings(perm, obs[None, :], cum, labels.count)

    # the repeated p-value at look k: the smallest evaluated level from which on every evaluated level crosses by
    # look k (crossing is not exactly monotone in the level with discrete statistics; this reading is, so that
    # "p <= alpha / j" implies "the test at alpha / j crosses": Holm's levels and alpha are always evaluated).
    # A coarse pass (every 8th level and those), then the levels between the last coarse one that does not cross
    # and the next one.
    coarse = np.unique(np.r_[np.arange(0, levels_.size, 8), levels_.size - 1, np.searchsorted(levels_, exact)])
    evaluate(coarse)

    def p_index(k: int, among: NDArray[np.int64]) -> int | None:
        crossed = (first[among, 0] >= 0) & (first[among, 0] <= k)
        misses = np.nonzero(~crossed)[0]
        if misses.size == 0:
            return int(among[0])
        return None if misses[-1] == among.size - 1 else int(among[misses[-1] + 1])

    out = []
    for k in range(k_max):
        i = p_index(k, coarse)
        if i is not None:
            below = coarse[coarse < i]
            evaluate(np.arange(below[-1] + 1 if below.size else 0, i))
            i = p_index(k, np.nonzero(first[:, 0] != -2)[0])
        if i is not None:
            p, direction = float(levels_[i]), ("x" if first[i, 1] == 0 else "y")
        else:
            p, direction = 1.0, ("x" if obs[k] >= 0.5 else "y")
        out.append((float(obs[k]), p, direction))
    return out


# ---------------------------------------------------------------------------------------------------------
# the confidence sequence (equivalence, and the intervals shown)
# ---------------------------------------------------------------------------------------------------------
def paired_kernel(x: Sequence[ArrayLike], y: Sequence[ArrayLike], n: int) -> NDArray[np.float64]:
    """``Z_i`` = mean over envs of ``k(x_i, y_i)`` (1 if x > y, 1/2 if equal, else 0) for the first ``n`` seeds.

    Args:
        x: per env, X's scores in seed order.
        y: per env, Y's scores in seed order.
        n: seeds.
    """
    z = np.zeros(n)
    for xe, ye in zip(x, y, strict=True):
        a, b = np.asarray(xe, dtype=np.float64)[:n], np.asarray(ye, dtype=np.float64)[:n]
        z += (a > b) + 0.5 * (a == b)
    return z / len(x)


_THETA = np.linspace(0.0, 1.0, 2001)


def confidence_sequence(z: ArrayLike, alpha: float) -> list[tuple[float, float]]:
    """Anytime-valid (1 - alpha) confidence sequence for the mean of i.i.d. values in [0, 1] (hedged betting
    capital with predictable plug-in bets, Waudby-Smith & Ramdas 2023, Thm 3 / eq. 26), running intersection.

    Args:
        z: the values in order.
        alpha: level.

    Returns:
        ``(low, high)`` after each value.
    """
    z = np.asarray(z, dtype=np.float64)
    theta = _THETA[None, :]
    log_plus = np.zeros(_THETA.size)
    log_minus = np.zeros(_THETA.size)
    alive = np.ones(_THETA.size, dtype=bool)
    mean_prev, var_prev = 0.5, 0.25
    total = sq = 0.0
    out = []
    for i, zi in enumerate(z, start=1):
        lam = math.sqrt(2.0 * math.log(2.0 / alpha) / (var_prev * i * math.log(1.0 + i)))
        with np.errstate(divide="ignore"):
            lp = np.minimum(lam, 0.5 / np.maximum(theta[0], 1e-12))
            lm = np.minimum(lam, 0.5 / np.maximum(1.0 - theta[0], 1e-12))
        log_plus += np.log1p(lp * (zi - _THETA))
        log_minus += np.log1p(-lm * (zi - _THETA))
        capital = np.maximum(0.5 * np.exp(log_plus), 0.5 * np.exp(log_minus))
        alive &= capital < 1.0 / alpha
        total += zi
        mean_prev = (0.5 + total) / (i + 1)
        sq += (zi - mean_prev) ** 2
        var_prev = (0.25 + sq) / (i + 1)
        inside = _THETA[alive]
        out.append((float(inside.min()), float(inside.max())) if inside.size else (float(zi), float(zi)))
    return out


# ---------------------------------------------------------------------------------------------------------
# a family of comparisons, decided look by look
# ---------------------------------------------------------------------------------------------------------
def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected at family-wise level ``alpha`` (any dependence).

    Args:
        p_values: one per hypothesis.
        alpha: family-wise level.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [False] * m
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        out[i] = True
    return out


@dataclass
class Comparison:
    """One comparison of the family, look by look.

    Args:
        x: algorithm X.
        y: algorithm Y.
        env: env id, or ``aggregate`` (P(X > Y) averaged over ``envs``).
        envs: the envs it rests on.
        looks: the looks evaluated (one per wave while it is open).
        outcome: ``x_better``, ``y_better``, ``equivalent`` or ``open``.
        settled_at: the look (0-based) where it settled (None: open).
        reason: why it stopped (or why it is open).
    """

    x: str
    y: str
    env: str
    envs: list[str]
    looks: list[Look] = field(default_factory=list)
    outcome: str = "open"
    settled_at: int | None = None
    reason: str = ""

    @property
    def seeds(self) -> int:
        """Seeds per algorithm the comparison used."""
        return self.looks[-1].n if self.looks else 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {**asdict(self), "seeds": self.seeds}


def decide(
    scores: Mapping[tuple[str, str], ArrayLike],
    pairs: Sequence[tuple[str, str]],
    envs: Sequence[str],
    plan: SequentialPlan,
    aggregate: bool | None = None,
) -> list[Comparison]:
    """Replay the sequential decisions of a family of comparisons from the runs' scores, look by look.

    A deterministic function of the scores in seed order: at each look, every open comparison gets its point,
    confidence sequence (level ``alpha / m``) and repeated p-value; Holm over the ``m`` comparisons' repeated
    p-values decides "credibly better", the confidence sequence inside ``0.5 +- margin`` decides
    "equivalent"; a settled comparison keeps its outcome and its data (later seeds of its algorithms, run for
    other comparisons, are not used). A look is evaluated only when every open comparison has its seeds.

    Args:
        scores: ``(algo, env) -> scores in seed order`` (seeds 0, 1, ...; a missing seed ends the data).
        pairs: ``(X, Y)`` pairs.
        envs: envs, in order.
        plan: the looks.
        aggregate: add one comparison per pair over all envs (default: when there are several envs).
        min_runs: seeds per algorithm and env below which a comparison gets its numbers but no verdict (its
            p-value still counts in Holm's family, which only makes the others more conservative).
    """
    family = _family(pairs, envs, aggregate)
    m = len(family)
    holm_levels = [plan.alpha / j for j in range(1, m + 1)]
    data = {k: np.asarray(v, dtype=np.float64) for k, v in scores.items()}
    tests: dict[int, list[tuple[float, float, str]]] = {}
    cs: dict[int, list[tuple[float, float]]] = {}
    for i, c in enumerate(family):
        xs = [data.get((c.x, e), np.zeros(0)) for e in c.envs]
        ys = [data.get((c.y, e), np.zeros(0)) for e in c.envs]
        tests[i] = group_sequential(xs, ys, plan, extra_levels=holm_levels)
        n_avail = min(v.size for v in xs + ys)
        cs[i] = confidence_sequence(paired_kernel(xs, ys, n_avail), plan.alpha / m) if n_avail else []
    p_now = [1.0] * m
    for k, n in enumerate(plan.looks):
        open_ = [i for i, c in enumerate(family) if c.outcome == "open"]
        if not open_ or any(len(tests[i]) <= k for i in open_):
            break
        for i in open_:
            point, p, direction = tests[i][k]
            low, high = cs[i][n - 1]
            family[i].looks.append(Look(n, point, low, high, p, direction))
            p_now[i] = p
        rejected = holm(p_now, plan.alpha)
        last = k == len(plan.looks) - 1
        for i in open_:
            _settle(family[i], rejected[i], k, plan.alpha, plan.margin, m, last)
    return family


def _settle(c: Comparison, rejected: bool, k: int, alpha: float, margin: float, m: int, last: bool) -> None:
    """Set the outcome of comparison ``c`` after look ``k`` (its last look)."""
    lk = c.looks[-1]
    if rejected:
        c.outcome = "x_better" if lk.direction == "x" else "y_better"
        winner, loser = (c.x, c.y) if lk.direction == "x" else (c.y, c.x)
        c.reason = (
            f"settled at look {k + 1} ({lk.n} seeds): {winner} credibly better than {loser} "
            f"(repeated p = {lk.p_value:.2g}, Holm over {m} comparisons at {alpha:g})"
        )
    elif 0.5 - margin < lk.low and lk.high < 0.5 + margin:
        c.outcome = "equivalent"
        c.reason = (
            f"settled at look {k + 1} ({lk.n} seeds): credibly equivalent, P(X > Y) in "
            f"[{lk.low:.3f}, {lk.high:.3f}] inside 0.5 +- {margin:g}"
        )
    else:
        c.reason = f"max seeds reached ({lk.n}) and still open" if last else f"open after look {k + 1} ({lk.n} seeds)"
        return
    c.settled_at = k


def _family(pairs: Sequence[tuple[str, str]], envs: Sequence[str], aggregate: bool | None) -> list[Comparison]:
    aggregate = len(envs) > 1 if aggregate is None else aggregate
    family: list[Comparison] = []
    for x, y in pairs:
        family += [Comparison(x, y, e, [e]) for e in envs]
        if aggregate:
            family.append(Comparison(x, y, "aggregate", list(envs)))
    return family


def fixed_design(
    scores: Mapping[tuple[str, str], ArrayLike],
    pairs: Sequence[tuple[str, str]],
    envs: Sequence[str],
    alpha: float = 0.05,
    margin: float = 0.1,
    aggregate: bool | None = None,
    min_runs: int = 2,
) -> list[Comparison]:
    """The same family of comparisons for an experiment run with a fixed number of seeds: one look each, at the
    seeds both algorithms have on every env of the comparison (the first n in seed order), the exact permutation
    test's p-value (no spending: one look), Holm over the family, the confidence sequence at ``alpha / m``.

    Args:
        scores: ``(algo, env) -> scores in seed order``.
        pairs: ``(X, Y)`` pairs.
        envs: envs, in order.
        alpha: family-wise level.
        margin: equivalence margin on P(X > Y).
        aggregate: add one comparison per pair over all envs (default: when there are several envs).
        min_runs: seeds per algorithm and env below which a comparison gets its numbers but no verdict (its
            p-value still counts in Holm's family, which only makes the others more conservative).
    """
    family = _family(pairs, envs, aggregate)
    m = len(family)
    holm_levels = [alpha / j for j in range(1, m + 1)]
    data = {k: np.asarray(v, dtype=np.float64) for k, v in scores.items()}
    too_few: dict[int, str] = {}
    for i, c in enumerate(family):
        xs = [data.get((c.x, e), np.zeros(0)) for e in c.envs]
        ys = [data.get((c.y, e), np.zeros(0)) for e in c.envs]
        n = min(v.size for v in xs + ys)
        too_few[i] = (
            f"too few runs for a verdict (n={min(v.size for v in xs)} {c.x}, n={min(v.size for v in ys)} {c.y} per "
            f"env; a verdict needs >= {max(2, min_runs)})"
        )
        if n < 2:
            c.reason = too_few[i]
            continue
        plan = SequentialPlan(n, n, 1, alpha, margin)
        point, p, direction = group_sequential([v[:n] for v in xs], [v[:n] for v in ys], plan,
                                               extra_levels=holm_levels)[0]  # fmt: skip
        low, high = confidence_sequence(paired_kernel(xs, ys, n), alpha / m)[-1]
        c.looks.append(Look(n, point, low, high, p, direction))
    rejected = holm([c.looks[-1].p_value if c.looks else 1.0 for c in family], alpha)
    for i, (c, r) in enumerate(zip(family, rejected, strict=True)):
        if c.looks and c.looks[-1].n < min_runs:
            c.reason = too_few[i]
        elif c.looks:
            _settle(c, r, 0, alpha, margin, m, last=True)
            if c.outcome == "open":
                c.reason = f"no verdict at {c.looks[-1].n} seeds (one look, fixed design)"
    return family
