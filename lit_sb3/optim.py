"""Optimisers: the one place where the library builds them (:func:`build_optimizer`), single-seed or K seeds.

What it offers (read this if you port an algorithm to K seeds):

* :func:`build_optimizer` builds every optimiser: torch's own class as configured (fused Adam by default, through
  :func:`optimizer_build_kwargs`) at K=1 and whenever every seed steps together (all elementwise optimisers over
  stacked ``[K, ...]`` parameters are K separate optimisers; this keeps K=1 bitwise-equal to SB3's runs); for a
  K>1 batch in which a seed can sit out a step (``seeds_sit_out=True``: PPO's per-seed ``target_kl`` stop), the
  per-seed optimisers below.
* :class:`PerSeedAdam`, :class:`PerSeedRMSprop`: Adam and RMSprop over stacked ``[K, ...]`` parameters with one
  step count per seed; ``step(active)`` moves only the seeds where ``active`` (``[K]`` bool) is True.

torch's optimisers keep one step count per parameter tensor; a seed that sits out an update must neither move nor
age its bias correction, so here the count is per seed and a masked seed's parameters and moments are left exactly
as they were. Unmasked steps use ``torch._foreach_*`` kernels.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch as th
from torch import nn

__all__ = [
    "PerSeedAdam",
    "PerSeedOptimizer",
    "PerSeedRMSprop",
    "build_optimizer",
    "optimizer_build_kwargs",
]


def _per_seed(x: th.Tensor, like: th.Tensor) -> th.Tensor:
    """A ``[K]`` tensor shaped to broadcast against a seed-major ``[K * group, ...]`` parameter (group: 1, or the
    members per seed of an ensemble layer)."""
    if like.shape[0] != x.shape[0]:
        x = x.repeat_interleave(like.shape[0] // x.shape[0])
    return x.view(-1, *([1] * (like.dim() - 1)))


def _adam_factors(
    steps: th.Tensor, lr: float, beta1: float, beta2: float, cache: dict[int, tuple[th.Tensor, th.Tensor]]
) -> tuple[th.Tensor, th.Tensor]:
    """Per-seed ``lr / (1 - beta1^t)`` and ``sqrt(1 - beta2^t)`` for step counts ``t`` (>= 1 where they are used),
    computed once per step-count tensor."""
    if id(steps) not in cache:
        t = steps.clamp(min=1).double()
        cache[id(steps)] = ((lr / (1 - beta1**t)).float(), (1 - beta2**t).sqrt().float())
    return cache[id(steps)]


class PerSeedOptimizer(th.optim.Optimizer):
    """Base of the per-seed optimisers: ``step(active)`` moves only the seeds where ``active`` is True."""

    def __init__(self, params: Sequence[nn.Parameter], n_seeds: int, defaults: dict[str, Any]) -> None:
        super().__init__(list(params), defaults)
        self.n_seeds = n_seeds
        # the seeds that step when step() is called without ``active`` (None: all); a model sets it around updates
        # in which some seeds sit out
        self.active: th.Tensor | None = None

    def _shared_steps(self, device: th.device) -> th.Tensor:
        """The per-seed step counts shared by every parameter that starts stepping together."""
        shared = getattr(self, "_steps", None)
        if shared is None or shared.device != device:
            shared = self._steps = th.zeros(self.n_seeds, dtype=th.float32, device=device)
        return shared

    def _active(self, active: th.Tensor | None, device: th.device) -> th.Tensor:
        if active is None:
            return th.ones(self.n_seeds, dtype=th.bool, device=device)
        return active.to(device=device, dtype=th.bool)


class PerSeedAdam(PerSeedOptimizer):
    """Adam over stacked ``[K, ...]`` parameters with one step count per seed (torch's Adam math).

    Args:
        params: the stacked parameters.
        n_seeds: K.
        lr: learning rate (one for all seeds: their schedules move in lockstep).
        betas: Adam's betas.
        eps: Adam's epsilon.
    """

    def __init__(
        self,
        params: Sequence[nn.Parameter],
        n_seeds: int,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, n_seeds, dict(lr=lr, betas=tuple(betas), eps=eps))

    @th.no_grad()
    def step(self, active: th.Tensor | None = None) -> None:  # type: ignore[override]
        """One Adam step of the seeds where ``active`` (``[K]`` bool) is True; ``None``: :attr:`active`, or every
        seed (foreach kernels, no masking)."""
        active = self.active if active is None else active
        # every seed steps: the foreach path (the masked one makes ~12 full-size temporaries). Only where reading the
        # mask costs no device sync (CPU): on an accelerator the masked path stays, with no host read per step
        if active is not None and active.device.type == "cpu" and bool(active.all()):
            active = None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                state = self.state[p]
                if not state:
                    # one step-count tensor shared by the parameters (they step together): factors computed once
                    state["step"] = self._shared_steps(p.device)
                    state["exp_avg"] = th.zeros_like(p)
                    state["exp_avg_sq"] = th.zeros_like(p)
            factors: dict[int, tuple[th.Tensor, th.Tensor]] = {}
            if active is None:
                for steps in {id(self.state[p]["step"]): self.state[p]["step"] for p in params}.values():
                    steps.add_(1)
                grads = [p.grad for p in params]
                exp_avgs = [self.state[p]["exp_avg"] for p in params]
                exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
                th._foreach_lerp_(exp_avgs, grads, 1 - beta1)
                th._foreach_mul_(exp_avg_sqs, beta2)
                th._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
                for p, exp_avg, exp_avg_sq in zip(params, exp_avgs, exp_avg_sqs):
                    step_size, bias_correction2_sqrt = _adam_factors(self.state[p]["step"], lr, beta1, beta2, factors)
                    denom = exp_avg_sq.sqrt().div_(_per_seed(bias_correction2_sqrt, p)).add_(eps)
                    p.sub_(_per_seed(step_size, p) * exp_avg / denom)
                continue
            mask = active.to(device=params[0].device, dtype=th.bool) if params else active
            for steps in {id(self.state[p]["step"]): self.state[p]["step"] for p in params}.values():
                steps.add_(mask.to(steps.dtype))
            for p in params:
                state = self.state[p]
                m, grad = _per_seed(mask, p), p.grad
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.copy_(th.where(m, exp_avg.lerp(grad, 1 - beta1), exp_avg))
                exp_avg_sq.copy_(th.where(m, exp_avg_sq * beta2 + (1 - beta2) * grad * grad, exp_avg_sq))
                step_size, bias_correction2_sqrt = _adam_factors(state["step"], lr, beta1, beta2, factors)
                denom = exp_avg_sq.sqrt() / _per_seed(bias_correction2_sqrt, p) + eps
                update = _per_seed(step_size, p) * exp_avg / denom
                p.sub_(th.where(m, update, th.zeros((), dtype=p.dtype, device=p.device)))


class PerSeedRMSprop(PerSeedOptimizer):
    """RMSprop (no momentum, not centred: SB3's A2C) over stacked parameters, per-seed masked.

    Args:
        params: the stacked parameters.
        n_seeds: K.
        lr: learning rate.
        alpha: smoothing constant.
        eps: epsilon added to the root.
    """

    def __init__(
        self, params: Sequence[nn.Parameter], n_seeds: int, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8
    ) -> None:
        super().__init__(params, n_seeds, dict(lr=lr, alpha=alpha, eps=eps))

    @th.no_grad()
    def step(self, active: th.Tensor | None = None) -> None:  # type: ignore[override]
        active = self.active if active is None else active
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                mask = self._active(active, p.device)
                state = self.state[p]
                if not state:
                    state["step"] = th.zeros(self.n_seeds, dtype=th.float32, device=p.device)
                    state["square_avg"] = th.zeros_like(p)
                state["step"].add_(mask.float())
                m = _per_seed(mask, p)
                grad = p.grad
                square_avg = state["square_avg"]
                square_avg.copy_(th.where(m, square_avg * alpha + (1 - alpha) * grad * grad, square_avg))
                avg = square_avg.sqrt() + eps
                p.sub_(th.where(m, lr * grad / avg, th.zeros((), dtype=p.dtype, device=p.device)))


_DEFAULTS_ALLOWED = {
    th.optim.Adam: {"weight_decay": 0, "amsgrad": False, "maximize": False},
    th.optim.RMSprop: {"weight_decay": 0, "momentum": 0, "centered": False, "maximize": False},
}


def optimizer_build_kwargs(
    optimizer_class: type[th.optim.Optimizer], optimizer_kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The keyword arguments actually used to build an optimizer: ``fused=True`` is added for Adam/AdamW
    unless the user chose ``fused``, ``foreach`` or ``differentiable`` (fused Adam runs on CPU and CUDA).

    Args:
        optimizer_class: the optimizer class.
        optimizer_kwargs: the user's keyword arguments (without ``lr``).
    """
    kwargs = dict(optimizer_kwargs)
    if optimizer_class in (th.optim.Adam, th.optim.AdamW) and not {"fused", "foreach", "differentiable"} & set(kwargs):
        kwargs["fused"] = True
    return kwargs


# options accepted by the per-seed optimisers (those that are not implementation choices, with their defaults)
_IMPLEMENTATION_KWARGS = frozenset({"fused", "foreach", "differentiable", "capturable"})


def build_optimizer(
    optimizer_class: type[th.optim.Optimizer],
    params: Any,
    lr: float,
    optimizer_kwargs: dict[str, Any] | None = None,
    n_seeds: int = 1,
    seeds_sit_out: bool = False,
) -> th.optim.Optimizer:
    """Build an optimiser: ``optimizer_class(params, lr=lr, **optimizer_kwargs)`` (fused Adam/AdamW by default),
    or, for K > 1 seeds of which some may sit out a step, the per-seed optimiser of the same class.

    Args:
        optimizer_class: the optimizer class (the policy's ``optimizer_class``).
        params: parameters or parameter groups (stacked ``[K, ...]`` for K > 1).
        lr: initial learning rate.
        optimizer_kwargs: the user's keyword arguments (without ``lr``).
        n_seeds: K.
        seeds_sit_out: a seed may skip a step while others take it (then ``step(active)`` is used).

    Raises:
        ValueError: per-seed stepping of an optimizer class or option that has no per-seed version.
    """
    kwargs = optimizer_build_kwargs(optimizer_class, optimizer_kwargs or {})
    if n_seeds == 1 or not seeds_sit_out:
        return optimizer_class(params, lr=lr, **kwargs)
    if optimizer_class not in _DEFAULTS_ALLOWED:
        raise ValueError(
            f"per-seed stepping of K={n_seeds} seeds supports the optimizer classes Adam and RMSprop, got "
            f"{optimizer_class.__name__} (policy_kwargs['optimizer_class'])."
        )
    options = {k: v for k, v in kwargs.items() if k not in _IMPLEMENTATION_KWARGS}
    for key, default in _DEFAULTS_ALLOWED[optimizer_class].items():
        if options.pop(key, default) != default:
            raise ValueError(
                f"per-seed stepping supports {optimizer_class.__name__} with {key}={default!r} only, "
                f"got {key}={kwargs[key]!r}."
            )
    if optimizer_class is th.optim.Adam:
        known = {"betas", "eps"}
    else:
        known = {"alpha", "eps"}
    # other options at torch's defaults change nothing (an optimizer's ``defaults`` lists them all)
    signature = inspect.signature(optimizer_class.__init__).parameters
    unknown = sorted(k for k in set(options) - known if k not in signature or options[k] != signature[k].default)
    options = {k: v for k, v in options.items() if k in known}
    if unknown:
        raise ValueError(
            f"per-seed {optimizer_class.__name__} does not support the option(s) {unknown}; allowed: {sorted(known)}."
        )
    cls = PerSeedAdam if optimizer_class is th.optim.Adam else PerSeedRMSprop
    return cls(list(params), n_seeds, lr=lr, **options)
