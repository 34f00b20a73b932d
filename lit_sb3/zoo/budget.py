"""Exact env-step budgets and evaluation grids for ``bench run`` and ``bench tune``.

A job's budget is what the user gave, rounded only where the algorithm forces it: on-policy algorithms (PPO,
A2C, TRPO, MaskablePPO, RecurrentPPO) train in whole rollouts of ``n_steps x n_envs`` env steps, so their budget is rounded *up* to the next
whole rollout (the last requested evaluation then falls on the last rollout boundary); a budget smaller than
one rollout is an error that names the rollout size. Off-policy budgets are exact.

Periodic evaluations of on-policy algorithms happen at rollout boundaries, after the update of the rollout
(:class:`lit_sb3.zoo.worker.callbacks.JobEvalCallback`): the first boundary at or after each requested step,
logged at the env step where they really happened. The first update of an off-policy algorithm comes after
``learning_starts`` env steps plus one collection (``train_freq x n_envs``); :func:`first_update_step` says
when, so ``bench tune`` can keep every reported evaluation after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = ["ON_POLICY", "rollout_size", "exact_budget", "first_update_step", "collect_size"]

ON_POLICY = ("ppo", "a2c", "trpo", "ppo_mask", "ppo_lstm")
"""The registered algorithms that train in whole rollouts of ``n_steps x n_envs`` (the subclasses of
:class:`lit_sb3.algorithms.on_policy.OnPolicyAlgorithm`; a test checks the two agree). TRPO, MaskablePPO and
RecurrentPPO were missing until the classic benchmark showed their planned budgets (100,000) differing from what
trained (100,352 / 100,096)."""


def _takes(algo: str, key: str) -> bool:
    """Whether ``algo``'s constructor has the argument ``key``."""
    from lit_sb3.zoo.registry import algo_arg_names

    return key in algo_arg_names(algo)


def _default(algo: str, key: str) -> Any:
    from lit_sb3.zoo.registry import algo_defaults

    return algo_defaults(algo)[key]


def rollout_size(algo: str, algo_kwargs: Mapping[str, Any], n_envs: int) -> int | None:
    """Env steps of one on-policy rollout (``n_steps x n_envs``); None for off-policy algorithms.

    Args:
        algo: algorithm name.
        algo_kwargs: the resolved constructor arguments.
        n_envs: number of training envs.
    """
    if algo not in ON_POLICY:
        return None
    return int(algo_kwargs.get("n_steps", _default(algo, "n_steps"))) * int(n_envs)


def exact_budget(algo: str, env_id: str, budget: int, rollout: int | None, n_steps: int = 0) -> tuple[int, str | None]:
    """The budget a job really trains, and one line when it differs from ``budget``.

    Args:
        algo: algorithm name (for messages).
        env_id: env id (for messages).
        budget: env steps the user asked for.
        rollout: :func:`rollout_size` (None: exact budget).
        n_steps: ``n_steps`` (for messages).

    Raises:
        BenchError: the budget is smaller than one rollout.
    """
    if rollout is None or budget % rollout == 0:
        if rollout is not None and budget < rollout:
            raise AssertionError  # pragma: no cover - budget % rollout == 0 with budget >= 1
        return int(budget), None
    what = f"n_steps {n_steps} x n_envs {rollout // n_steps}" if n_steps else "n_steps x n_envs"
    if budget < rollout:
        raise BenchError(
            f"{algo} on {env_id}: the budget of {budget:,} env steps is smaller than one rollout "
            f"({what} = {rollout:,} env steps); give --n-timesteps >= {rollout:,} or a smaller n_steps/n_envs"
        )
    rounded = -(-budget // rollout) * rollout
    return rounded, (
        f"{algo} on {env_id}: budget {budget:,} env steps rounded up to {rounded:,} "
        f"(whole rollouts of {what} = {rollout:,} env steps)"
    )


def collect_size(algo: str, algo_kwargs: Mapping[str, Any], n_envs: int) -> int | None:
    """Env steps collected between two updates: a rollout on-policy, ``train_freq x n_envs`` off-policy
    (None when ``train_freq`` counts episodes).

    Args:
        algo: algorithm name.
        algo_kwargs: the resolved constructor arguments.
        n_envs: number of training envs.
    """
    rollout = rollout_size(algo, algo_kwargs, n_envs)
    if rollout is not None:
        return rollout
    if not _takes(algo, "train_freq"):  # ARS: an iteration is whole episodes of every candidate
        return None
    freq = algo_kwargs.get("train_freq", _default(algo, "train_freq"))
    if isinstance(freq, (tuple, list)):
        if len(freq) > 1 and str(freq[1]).startswith("episode"):
            return None
        freq = freq[0]
    return int(freq) * int(n_envs)


def first_update_step(algo: str, algo_kwargs: Mapping[str, Any], n_envs: int) -> int:
    """The earliest env step at which an evaluation sees a policy updated at least once.

    On-policy: one rollout (evaluations run at rollout boundaries, after the update). Off-policy: updates
    start once more than ``learning_starts`` steps were collected, after a whole collection (``train_freq x
    n_envs``), and an evaluation runs inside the next collection: ``learning_starts + 2 x collection`` (one env
    step per env stands for a collection when ``train_freq`` counts episodes: a lower bound).

    Args:
        algo: algorithm name.
        algo_kwargs: the resolved constructor arguments.
        n_envs: number of training envs.
    """
    collect = collect_size(algo, algo_kwargs, n_envs)
    if algo in ON_POLICY:
        assert collect is not None
        return collect
    if not _takes(algo, "learning_starts"):  # ARS: updates after its first iteration (a lower bound)
        return collect if collect is not None else int(n_envs)
    starts = int(algo_kwargs.get("learning_starts", _default(algo, "learning_starts")))
    return starts + 2 * (collect if collect is not None else int(n_envs))
