"""RMSprop as TensorFlow (and Stable-Baselines 2) computes it, for the RL Zoo's A2C Atari settings.

Two differences from ``torch.optim.RMSprop``: epsilon is added *inside* the square root
(``p -= lr * g / sqrt(v + eps)``), and the square average ``v`` starts at ones, not zeros. SB3 ships the same
optimizer (``stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike``); the zoo's
``a2c.yml`` ``atari`` entry names it. The update here runs on all parameters at once (``torch._foreach_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch as th
from torch.optim import Optimizer

__all__ = ["RMSpropTFLike"]


class RMSpropTFLike(Optimizer):
    """RMSprop with TensorFlow's epsilon placement and square average initialised to ones.

    Args:
        params: parameters (or parameter groups) to optimize.
        lr: learning rate.
        alpha: smoothing constant of the square average.
        eps: added to the square average before the square root.
        weight_decay: L2 penalty.
        momentum: momentum factor.
        centered: normalise by an estimate of the gradient's variance (centered RMSprop).
    """

    def __init__(
        self,
        params: Iterable[th.nn.Parameter] | Iterable[dict[str, Any]],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ) -> None:
        for name, value in (("lr", lr), ("eps", eps), ("momentum", momentum), ("weight_decay", weight_decay),
                            ("alpha", alpha)):  # fmt: skip
            if not value >= 0.0:
                raise ValueError(f"RMSpropTFLike: {name} must be >= 0, got {value}")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered)
        super().__init__(params, defaults)

    @th.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One update of every parameter that has a gradient.

        Args:
            closure: re-evaluates the model and returns the loss (optional).
        """
        loss = None
        if closure is not None:
            with th.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            if any(g.is_sparse for g in grads):
                raise RuntimeError("RMSpropTFLike does not support sparse gradients")
            for p in params:
                state = self.state[p]
                if not state:  # torch's RMSprop starts the square average at zeros
                    state["step"] = 0
                    state["square_avg"] = th.ones_like(p, memory_format=th.preserve_format)
                    if group["momentum"] > 0:
                        state["momentum_buffer"] = th.zeros_like(p, memory_format=th.preserve_format)
                    if group["centered"]:
                        state["grad_avg"] = th.zeros_like(p, memory_format=th.preserve_format)
                state["step"] += 1
            alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
            if group["weight_decay"] != 0:
                grads = th._foreach_add(grads, params, alpha=group["weight_decay"])
            square_avgs = [self.state[p]["square_avg"] for p in params]
            th._foreach_mul_(square_avgs, alpha)
            th._foreach_addcmul_(square_avgs, grads, grads, value=1 - alpha)
            if group["centered"]:
                grad_avgs = [self.state[p]["grad_avg"] for p in params]
                th._foreach_mul_(grad_avgs, alpha)
                th._foreach_add_(grad_avgs, grads, alpha=1 - alpha)
                avg = th._foreach_addcmul(square_avgs, grad_avgs, grad_avgs, value=-1)
                th._foreach_add_(avg, eps)
            else:
                avg = th._foreach_add(square_avgs, eps)  # eps inside the square root
            th._foreach_sqrt_(avg)
            if group["momentum"] > 0:
                bufs = [self.state[p]["momentum_buffer"] for p in params]
                th._foreach_mul_(bufs, group["momentum"])
                th._foreach_addcdiv_(bufs, grads, avg)
                th._foreach_add_(params, bufs, alpha=-lr)
            else:
                th._foreach_addcdiv_(params, grads, avg, value=-lr)
        return loss
