"""Tolerances of the equivalence tests, derived from the computation instead of measured on one CPU.

Two runs that do the same arithmetic in a different order (K seeds as one ``baddbmm`` against K ``addmm``; another
``ATEN_CPU_CAPABILITY`` or BLAS kernel blocking the sums differently) differ by float reassociation only. The bound:

- one float32 sum of ``n`` terms, in any order, is within ``gamma(n) * sum(|t_i|)`` of the exact sum, with
  ``gamma(n) = n u / (1 - n u)`` and ``u = 2**-24`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1);
  two orders therefore differ by at most ``2 gamma(n) sum(|t_i|)``;
- a gradient whose terms do not cancel by more than ``CONDITIONING`` (``sum(|t_i|) <= CONDITIONING * |sum t_i|``)
  is then known to a relative ``2 gamma(n) CONDITIONING``; that is the relative tolerance of anything computed from
  the same data in one pass (a gradient, Adam's moments, a running statistic, a loss);
- Adam's step is ``lr * m / (sqrt(v) + eps)``: scale-free, at most ``(1 - beta1) / sqrt(1 - beta2)`` lr in size, so
  a relative gradient error ``delta`` moves it by at most ``lr * bound * delta``; over ``N`` updates the parameters
  of the two runs drift apart by at most ``N * lr * bound * delta`` (summing the per-step bounds; the feedback of a
  drift into later gradients is second order while ``N * lr`` is small, ``<= 0.5`` in every test here). SGD-like
  updates (RMSprop, plain gradient steps) are bounded the same way with their own step bound.

A parameter whose gradient is a pure cancellation (``CONDITIONING`` infinite) is chaotic under this arithmetic: a
Linear bias feeding a BatchRenorm layer gets no true gradient (the batch mean removes it), so its Adam steps are
round-off divided by ``sqrt(v) + eps``, up to ``lr`` each whatever the order. The tests remove the chaos rather than
widen the bound: with ``eps = 1e-4`` such a step is at most ``lr * 2 gamma(n) sum(|t_i|) / eps`` (``sum(|t_i|)`` is a
gradient-sized ``~1e-2``: ``<= 1e-5 lr`` per step), far inside the bound of the well-conditioned parameters.

A wrong seed, a skipped or repeated update or a wrong stream moves parameters by ``~lr`` per update or ``~1e-1``
overall, above every bound computed here (each test's bound is checked against ``lr`` where it matters).
"""

from __future__ import annotations

import math

UNIT_ROUNDOFF = 2.0**-24  # float32
CONDITIONING = 100.0  # the cancellation a well-conditioned gradient sum may have (terms up to 100x the sum)


def gamma(n: int) -> float:
    """Higham's ``gamma(n)``: the relative error bound of an ``n``-term float32 sum.

    Args:
        n: the length of the longest reduction (batch size, fan-in + 1 for the bias, rollout length).
    """
    return n * UNIT_ROUNDOFF / (1.0 - n * UNIT_ROUNDOFF)


def reassociation_rtol(reduction: int) -> float:
    """Relative tolerance of a quantity computed in one pass over ``reduction``-long sums in two orders.

    Args:
        reduction: the length of the longest reduction.
    """
    return 2.0 * gamma(reduction) * CONDITIONING


def adam_step_bound(betas: tuple[float, float] = (0.9, 0.999)) -> float:
    """The largest ``|m_hat / sqrt(v_hat)|`` of Adam (in units of lr), reached by a gradient that flips sign.

    Args:
        betas: Adam's ``(beta1, beta2)``.
    """
    beta1, beta2 = betas
    return max(1.0, (1.0 - beta1) / math.sqrt(1.0 - beta2))


def parameter_atol(updates: int, lr: float, reduction: int, step_bound: float = 1.0) -> float:
    """Absolute tolerance on parameters after ``updates`` steps of two runs that differ by reassociation only.

    Args:
        updates: the number of optimiser steps (the run's ``_n_updates`` times the optimisers stepped per update).
        lr: the largest learning rate used.
        reduction: the length of the longest reduction in a gradient (batch size, widest fan-in + 1).
        step_bound: the optimiser's largest step in units of lr (``adam_step_bound`` for Adam).
    """
    assert updates * lr <= 0.5, "the first-order bound assumes a short run (updates * lr <= 0.5)"
    return updates * lr * step_bound * reassociation_rtol(reduction)


def longest_reduction(model) -> int:
    """The longest float sum in ``model``'s update: twice its batch (CrossQ's joint pass; an upper bound for the
    others) or its widest fan-in + 1.

    Args:
        model: a single-seed algorithm after setup (its policy's weights give the fan-ins).
    """
    fan_ins = [1]
    for p in model.policy.parameters():
        if p.dim() == 2 or p.dim() == 4:  # Linear (out, in), Conv2d (out, in, kh, kw)
            fan_ins.append(p[0].numel() + 1)
        elif p.dim() == 3:  # critics stacked along a leading dim, in either layout: the wider inner side
            fan_ins.append(max(p.shape[1], p.shape[2]) + 1)
    fan_in = max(fan_ins)
    batch = int(getattr(model, "batch_size", None) or getattr(model, "n_steps", 1) or 1)
    return max(fan_in, 2 * batch)


def model_parameter_atol(model) -> float:
    """``parameter_atol`` for a fitted single-seed model, from its own update count, learning rate and optimiser.

    Args:
        model: the separate run a batch member is compared with, after its fit.
    """
    optimizers = list(model._optimizers_to_save().values())
    betas = [tuple(g["betas"]) for o in optimizers for g in o.param_groups if "betas" in g]
    bound = max((adam_step_bound(b) for b in betas), default=1.0)
    lr = max(g["lr"] for o in optimizers for g in o.param_groups)
    lr = max(lr, float(model.lr_schedule(1.0)))
    return parameter_atol(int(model._n_updates), lr, longest_reduction(model), bound)
