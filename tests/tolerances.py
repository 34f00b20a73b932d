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
  drift into later gradients is second order while ``N * lr`` is small, ``<= 0.5`` in every test here). ``N`` is
  the optimiser's own step count (its state's ``step``: PPO's ``_n_updates`` counts epochs, not minibatch steps).
  RMSprop (A2C) is bounded the same way with its own step bound, ``1 / sqrt(1 - alpha)``;
- plain gradient steps (SGD) are not scale-free: the displacement ``theta - theta_0 = -lr sum_t g_t`` is compared,
  within ``reassociation_rtol`` of the network's largest displacement (``sgd_tolerances``);
- the moments an optimiser keeps are computed in one pass from the gradients: relative ``reassociation_rtol``, and
  absolutely that times the tensor's largest entry (an entry near zero is a cancellation, its error is that of the
  tensor's scale: ``state_tolerances``);
- an episode's return is a sum of rewards, each a smooth function of the policy's outputs, which the two runs
  compute within ``reassociation_rtol`` of each other: the returns of continuous-action episodes are compared at
  that relative tolerance (``return_rtol``); with discrete actions each action is a discrete decision (an
  inverse-CDF draw): the two runs take the same one unless a probability lies within round-off of a threshold, so
  their returns are compared exactly (a flip would be a stream or seed error as often as round-off);
- ARS's step ``lr / (b sigma_R) sum_k (r+_k - r-_k) delta_k`` is, per weight, at most ``lr sqrt(2 (2b - 1)) * 6``:
  ``sum_k (r+_k - r-_k)^2 <= 2 (2b - 1) sigma_R^2`` (each pair's gap is at most twice the deviation from the mean of
  the ``2b`` returns), Cauchy-Schwarz over the ``b`` directions, and ``|delta| <= 6`` for the N(0, 1) draws (the
  seed's own draws, the same on every CPU; ``P(|N(0, 1)| > 6) = 2e-9``): ``ars_step_bound``. The choice of the ``b``
  best directions (a ranking of returns) is a discrete decision: equal returns (discrete actions) rank equally;
- TRPO's actor step ``coef * sqrt(2 delta / (x^T A x)) x`` with ``A = F + cg_damping I`` (``F`` the Fisher matrix)
  and ``x`` the conjugate-gradient solution of ``A x = g``: its Euclidean length is at most ``sqrt(2 delta /
  cg_damping)`` (``x^T A x >= cg_damping |x|^2``), and its relative error is the condition number ``kappa(A)`` times
  the relative error of ``g`` and ``A v`` (the perturbation bound of a linear solve, Higham 7.1; finite-precision CG
  behaves as exact CG on a nearby problem, Greenbaum 1989), doubled for the normalisation by ``x^T A x``. ``trpo_recorder`` measures ``kappa(A)`` of each update (``A`` formed from the update's own
  Fisher-vector products, in float64) and the step's length; ``trpo_actor_distance`` sums the per-update bounds, a
  Euclidean one, so the actor's parameters are compared as one vector. The line search's accept/reject and shrink
  count are discrete decisions: asserted equal, not bounded.

A parameter whose gradient is a pure cancellation (``CONDITIONING`` infinite) is chaotic under this arithmetic: a
Linear bias feeding a BatchRenorm layer gets no true gradient (the batch mean removes it), so its Adam steps are
round-off divided by ``sqrt(v) + eps``, up to ``lr`` each whatever the order. The tests remove the chaos rather than
widen the bound: with ``eps = 1e-4`` such a step is at most ``lr * 2 gamma(n) sum(|t_i|) / eps`` (``sum(|t_i|)`` is a
gradient-sized ``~1e-2``: ``<= 1e-5 lr`` per step), far inside the bound of the well-conditioned parameters.

A comparison is exact (``rtol = atol = 0``) only where it is exact by construction: the same operations on the same
tensors in the same order (a resumed run against the uninterrupted one; SB3's and lit_sb3's identical update code),
or copies; each such test says why.

A wrong seed, a skipped or repeated update or a wrong stream moves parameters by ``~lr`` per update or ``~1e-1``
overall, above every bound computed here (each test's bound is checked against ``lr`` where it matters).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

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


def rmsprop_step_bound(alpha: float = 0.99) -> float:
    """The largest ``|g / sqrt(v)|`` of (uncentred) RMSprop (in units of lr): ``v >= (1 - alpha) g^2`` holds after
    every step, reached on the first one (``v_0 = 0``, no bias correction).

    Args:
        alpha: RMSprop's smoothing constant.
    """
    return 1.0 / math.sqrt(1.0 - alpha)


def optimizer_step_bound(optimizer) -> float:
    """The largest step of ``optimizer`` in units of its lr: Adam's (``betas``) or RMSprop's (``alpha``).

    Args:
        optimizer: a torch Adam or RMSprop (or a per-seed one with the same hyper-parameters).
    """
    bounds = []
    for group in optimizer.param_groups:
        if "betas" in group:
            bounds.append(adam_step_bound(tuple(group["betas"])))
        elif "alpha" in group:
            assert not group.get("centered", False), "the bound is that of uncentred RMSprop"
            bounds.append(rmsprop_step_bound(group["alpha"]))
        else:
            raise ValueError(f"no step bound derived for {type(optimizer).__name__}")
    return max(bounds)


def optimizer_steps(optimizer) -> int:
    """How many steps ``optimizer`` took (the largest ``step`` in its state: a parameter stepped less often, as
    TD3's actor, is bounded by the most-stepped one's count).

    Args:
        optimizer: a torch optimiser after training.
    """
    return max((int(float(state["step"])) for state in optimizer.state.values() if "step" in state), default=0)


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


def widest_fan_in(module) -> int:
    """The longest sum of ``module``'s forward: its widest fan-in + 1 (the bias).

    Args:
        module: a torch module (Linear weights ``(out, in)``, Conv2d ``(out, in, kh, kw)``, stacked critics ``[n, ...]``).
    """
    fan_ins = [1]
    for p in module.parameters():
        if p.dim() == 2 or p.dim() == 4:  # Linear (out, in), Conv2d (out, in, kh, kw)
            fan_ins.append(p[0].numel() + 1)
        elif p.dim() == 3:  # critics stacked along a leading dim, in either layout: the wider inner side
            fan_ins.append(max(p.shape[1], p.shape[2]) + 1)
    return max(fan_ins)


def longest_reduction(model) -> int:
    """The longest float sum in ``model``'s update: twice its batch (CrossQ's joint pass; an upper bound for the
    others) or its widest fan-in + 1.

    Args:
        model: a single-seed algorithm after setup (its policy's weights give the fan-ins).
    """
    batch = getattr(model, "batch_size", None)  # A2C: none, its batch is the whole rollout
    if not batch:
        batch = int(getattr(model, "n_steps", 1) or 1) * int(getattr(model, "n_envs", 1) or 1)
    return max(widest_fan_in(model.policy), 2 * int(batch))


def model_parameter_atol(model) -> float:
    """``parameter_atol`` for a fitted single-seed model: the largest over its optimisers, each from its own step
    count, learning rate (the schedule's start included) and step bound.

    Args:
        model: the separate run a batch member is compared with, after its fit.
    """
    from lit_sb3 import ARS

    if isinstance(model, ARS):  # no optimiser: its own step
        return ars_parameter_atol(model)
    reduction = longest_reduction(model)
    atol = 0.0
    for optimizer in model._optimizers_to_save().values():
        lr = max(max(g["lr"] for g in optimizer.param_groups), float(model.lr_schedule(1.0)))
        steps = optimizer_steps(optimizer)
        atol = max(atol, parameter_atol(steps, lr, reduction, optimizer_step_bound(optimizer)))
    return atol


def model_tolerances(model) -> dict[str, float]:
    """``atol`` (``model_parameter_atol``) and ``rtol`` (``reassociation_rtol`` of the longest reduction) of a fitted
    single-seed model's parameters, as keyword arguments of ``assert_close``/``assert_allclose``.

    Args:
        model: the separate run (or the reference run) after its fit.
    """
    return dict(atol=model_parameter_atol(model), rtol=reassociation_rtol(longest_reduction(model)))


def assert_parameters_close(model, reference, **tol: float) -> None:
    """``model``'s policy parameters against ``reference``'s (the separate run), at ``model_tolerances(reference)``
    unless ``tol`` gives them, a bound that must stay far under the distance between seeds (``~1e-1``).

    Args:
        model: a batch member (or the run compared).
        reference: the separate run after its fit.
        tol: ``atol`` and ``rtol`` when not the run's own.
    """
    import torch as th

    tol = tol or model_tolerances(reference)
    assert tol["atol"] < 1e-2, "the bound must stay far under the distance between seeds"
    for (name, p), q in zip(model.policy.named_parameters(), reference.policy.parameters(), strict=True):
        th.testing.assert_close(p, q, msg=name, **tol)


def return_rtol(model) -> float:
    """Relative tolerance of continuous-action episode returns (see the module docstring).

    Args:
        model: the separate run after its fit.
    """
    return reassociation_rtol(longest_reduction(model))


def state_tolerances(reference, rtol: float) -> dict[str, float]:
    """Tolerances of a tensor computed in one pass (an optimiser's moments, a running statistic): ``rtol``, and
    absolutely ``rtol`` times the tensor's largest entry.

    Args:
        reference: the reference run's tensor.
        rtol: ``reassociation_rtol`` of the longest reduction.
    """
    import torch as th

    reference = th.as_tensor(reference).detach()
    scale = float(reference.abs().max()) if reference.numel() else 0.0
    return dict(rtol=rtol, atol=rtol * scale)


def sgd_tolerances(displacements: dict, rtol: float) -> dict[str, float]:
    """Tolerances of parameters after plain gradient steps on reassociated gradients: the displacement
    ``theta - theta_0 = -lr sum_t g_t`` is a sum over the steps of gradients known to ``rtol``, so each entry is
    within ``rtol`` of the displacement's scale, the largest displacement of the network (a gradient entry that is a
    cancellation has the error of the network's gradient scale, as in ``state_tolerances``); the parameters
    themselves carry no round-off of their own.

    Args:
        displacements: the reference run's ``theta - theta_0`` by name.
        rtol: ``reassociation_rtol`` of the longest reduction.
    """
    import torch as th

    scale = max(float(th.as_tensor(d).abs().max()) for d in displacements.values())
    return dict(rtol=rtol, atol=rtol * scale)


def ars_step_bound(n_top: int) -> float:
    """ARS's largest step per weight in units of lr (module docstring).

    Args:
        n_top: ``b``, the number of directions kept.
    """
    return 6.0 * math.sqrt(2.0 * (2 * n_top - 1))


def ars_parameter_atol(model) -> float:
    """``parameter_atol`` of a fitted single-seed ARS: its iterations, its largest lr, ``ars_step_bound``; the
    reductions are the step's sum over ``2b`` returns and the policy's fan-in.

    Args:
        model: the separate run after its fit.
    """
    reduction = max(longest_reduction(model), 2 * model.n_top)
    lr = float(model.lr_schedule(1.0))
    return parameter_atol(int(model._n_updates), lr, reduction, ars_step_bound(model.n_top))


def trpo_actor_distance(model, record: dict[str, list]) -> float:
    """Bound on the Euclidean distance between a fitted single-seed TRPO's actor parameters and another run's that
    differs by reassociation only (module docstring): the sum over its updates of ``2 kappa reassociation_rtol``
    times the step's length, as ``trpo_recorder`` recorded them (each length is at most ``sqrt(2 target_kl /
    cg_damping)``; first order, as ``parameter_atol``). A normwise bound: compare the actor's parameters as one vector.

    Args:
        model: the separate run after its fit.
        record: ``trpo_recorder``'s record of that run.
    """
    reduction = max(longest_reduction(model), model.n_steps * model.n_envs)  # the actor's batch: the whole rollout
    limit = math.sqrt(2.0 * model.target_kl / model.cg_damping)
    assert all(0.0 <= length[0] <= limit * (1 + 1e-3) for length in record["lengths"]), "a step outside the region"
    rtol = reassociation_rtol(reduction)
    return sum(2.0 * k[0] * rtol * length[0] for k, length in zip(record["kappa"], record["lengths"], strict=True))


@contextlib.contextmanager
def trpo_recorder() -> Iterator[dict[int, dict[str, list]]]:
    """While open, every TRPO update records, under ``id(model)``, ``kappa`` (the condition number of each seed's
    ``F + cg_damping I``, formed column by column from the update's own Fisher-vector products and solved in
    float64) and ``decisions`` (each seed's line-search ``(success, step_coefficient)``). Nothing is drawn from any
    random stream, so the runs are those without it."""
    import torch as th

    from lit_sb3.algorithms import trpo

    records: dict[int, dict[str, list]] = {}
    solve, natural_step = trpo.conjugate_gradient, trpo.TRPO._natural_gradient_step
    current: list[int] = []

    def conditioned(matrix_vector_product, b, *args, **kwargs):
        unit = th.eye(b.shape[-1], dtype=b.dtype, device=b.device)
        columns = [matrix_vector_product(unit[j].expand_as(b).contiguous()).detach() for j in range(b.shape[-1])]
        matrix = th.stack(columns, dim=-1).double()  # [(K,) D, D], column j = A e_j (A is each seed's block)
        eigenvalues = th.linalg.eigvalsh((matrix + matrix.transpose(-1, -2)) / 2)
        kappa = (eigenvalues[..., -1] / eigenvalues[..., 0]).reshape(-1).tolist()
        records.setdefault(current[-1], {"kappa": [], "decisions": [], "lengths": []})["kappa"].append(kappa)
        return solve(matrix_vector_product, b, *args, **kwargs)

    def recorded_step(self, *args, **kwargs):
        current.append(id(self))
        try:
            step, params = natural_step(self, *args, **kwargs)
        finally:
            current.pop()
        success, coefficient, size = step.success, step.step_coefficient, step.max_step_size
        if self.n_seeds == 1:
            success, coefficient, size = [success], [coefficient], [size]
        records[id(self)]["decisions"].append(list(zip(success, coefficient, strict=True)))
        norms = step.search_direction.reshape(len(size), -1).double().norm(dim=-1).tolist()
        lengths = [ok * c * m * n for ok, c, m, n in zip(success, coefficient, size, norms, strict=True)]
        records[id(self)]["lengths"].append(lengths)  # each seed's |theta - theta_old| (0: rejected)
        return step, params

    trpo.conjugate_gradient, trpo.TRPO._natural_gradient_step = conditioned, recorded_step
    try:
        yield records
    finally:
        trpo.conjugate_gradient, trpo.TRPO._natural_gradient_step = solve, natural_step
