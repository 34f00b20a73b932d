"""Asking for K seeds: ``SeedBatch(algo, seeds=[...], **kwargs)`` (docs/seed_batching.md).

What it offers:

* :func:`SeedBatch` — ``SeedBatch(SAC, seeds=[0, 1, 2], policy="MlpPolicy", **sac_kwargs)`` is one model of K seeds
  trained together; ``SeedBatch(SAC, seeds=[5], ...)`` is exactly ``SAC(..., seed=5)``. An algorithm whose class
  trains K seeds itself (class attribute ``seed_batching = True``: its math is written over a leading seed
  dimension) returns an instance of that class.
* :func:`check_seeds` — the one validation of a seed list (one-line errors).
* :func:`supports_seed_batch` — whether ``SeedBatch(algo, seeds=[a, b])`` works for an algorithm class.

Every model (:class:`~lit_sb3.algorithms.base.BaseAlgorithm`) has the seed API: ``n_seeds`` (K), ``seeds``,
``member(i)``, ``failed`` (``{i: reason}``), ``fail_seed(i, reason)``; per-seed metrics are routed to per-seed
loggers by :class:`~lit_sb3.loggers.SeedRoutingLogger`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

__all__ = ["SeedBatch", "check_seeds", "supports_seed_batch"]


def check_seeds(seeds: Any) -> list[int]:
    """The seeds as a list of distinct ints, or a one-line ``ValueError`` saying what is wrong.

    Args:
        seeds: a non-empty sequence of distinct integers.
    """
    seeds = list(seeds) if isinstance(seeds, (list, tuple, range, np.ndarray)) else seeds
    if not isinstance(seeds, list) or not seeds:
        raise ValueError(f"seeds must be a non-empty list of integers, got {seeds!r}.")
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) for s in seeds):
        raise ValueError(f"seeds must be integers, got {seeds!r}.")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds!r}.")
    return [int(s) for s in seeds]


def supports_seed_batch(algorithm: type) -> bool:
    """Whether ``algorithm`` can train K > 1 seeds as one model.

    Args:
        algorithm: an algorithm class.
    """
    return bool(getattr(algorithm, "seed_batching", False))


def SeedBatch(algorithm: type[BaseAlgorithm], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any) -> Any:  # noqa: N802 - reads as a class
    """K seeds of ``algorithm`` as one model, each seed what its separate run ``algorithm(policy, seed=s, **kwargs)``
    would be (its initial weights, env, replay, exploration, optimiser state, metrics).

    Args:
        algorithm: the algorithm class (SAC, TD3, DQN, PPO, ...).
        seeds: distinct integer seeds; seed index ``i`` is the position in this list.
        policy: the policy alias or class.
        kwargs: the algorithm's constructor arguments (the same for every seed; ``seed`` is not one of them).

    Raises:
        ValueError: bad seeds, or an algorithm that cannot batch K > 1 seeds (the ones that can are named).
    """
    seeds = check_seeds(seeds)
    if "seed" in kwargs:
        raise TypeError("SeedBatch takes seeds=[...], not seed= (each seed is one of them).")
    if not isinstance(algorithm, type):
        raise ValueError(f"SeedBatch needs an algorithm class (SAC, PPO, ...), got {algorithm!r}.")
    if len(seeds) == 1:
        return algorithm(policy, seed=seeds[0], **kwargs)
    if not supports_seed_batch(algorithm):
        raise ValueError(
            f"{algorithm.__name__} cannot train K > 1 seeds as one model yet; batched algorithms: "
            f"{', '.join(_batched_names())} (K = 1, seeds=[s], works for every algorithm)."
        )
    model = algorithm(policy, seed=seeds[0], **kwargs)
    model.set_seeds(seeds, policy, kwargs)
    return model


def _batched_names() -> list[str]:
    from lit_sb3.algorithms.registry import ALGORITHMS, algorithm_class

    names = set()
    for name in ALGORITHMS:
        try:
            cls = algorithm_class(name)
        except Exception:  # noqa: BLE001 - a broken registration is reported where it is used, not here
            continue
        if supports_seed_batch(cls):
            names.add(cls.__name__)
    return sorted(names)
