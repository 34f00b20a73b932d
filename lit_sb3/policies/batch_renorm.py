"""Batch Renormalization (Ioffe 2017, https://arxiv.org/abs/1702.03275) with sb3-contrib's semantics, for
single networks ``[batch, features]`` and for ensembles ``[n_members, batch, features]`` (one set of statistics
and affine parameters per member).

In training mode the batch statistics (mean, unbiased variance) normalise the input during the first
``warmup_steps`` forward passes (plain BatchNorm); after that the batch statistics are corrected towards the
running ones with ``r = clip(sigma_B / sigma, 1/rmax, rmax)`` and ``d = clip((mu_B - mu) / sigma, -dmax, dmax)``
(both without gradient), i.e. the input is normalised with mean ``mu_B - d sigma_B / r`` and variance
``sigma_B^2 / r^2``. Each training-mode pass updates the running statistics with ``momentum``. In evaluation mode
the running statistics normalise and are not updated.

The step counter is a buffer (saved with the weights) mirrored by a Python int, so that the warm-up test does not
read a tensor (no device synchronisation per forward pass).
"""

from __future__ import annotations

from typing import Any

import torch as th
from torch import nn

__all__ = ["BatchRenorm"]


class BatchRenorm(nn.Module):
    """Batch Renormalization over the batch dimension (``-2``).

    Args:
        num_features: number of features.
        eps: added to the variance.
        momentum: update rate of the running mean and variance.
        affine: learn a scale and a bias.
        warmup_steps: training-mode passes that use the batch statistics only (BatchNorm).
        n_members: ensemble size (0: a single network; inputs ``[batch, features]``).
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 0.001,
        momentum: float = 0.01,
        affine: bool = True,
        warmup_steps: int = 100_000,
        n_members: int = 0,
    ) -> None:
        super().__init__()
        shape = (n_members, 1, num_features) if n_members else (num_features,)
        self.register_buffer("ra_mean", th.zeros(shape))
        self.register_buffer("ra_var", th.ones(shape))
        self.register_buffer("steps", th.tensor(0, dtype=th.long))
        self.scale = nn.Parameter(th.ones(shape))
        self.bias = nn.Parameter(th.zeros(shape))
        self.num_features = num_features
        self.n_members = n_members
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.warmup_steps = warmup_steps
        self.rmax = 3.0
        self.dmax = 5.0
        self._steps = 0  # host copy of `steps`

    def forward(self, x: th.Tensor) -> th.Tensor:
        if self.n_members and x.dim() == 2:  # an input shared by all members
            x = x.unsqueeze(0).expand(self.n_members, -1, -1)
        if self.training:
            batch_var, batch_mean = th.var_mean(x, dim=-2, keepdim=bool(self.n_members))
            if self._steps > self.warmup_steps:
                running_std = (self.ra_var + self.eps).sqrt()
                r = ((batch_var + self.eps).sqrt() / running_std).detach().clamp(1 / self.rmax, self.rmax)
                d = ((batch_mean - self.ra_mean) / running_std).detach().clamp(-self.dmax, self.dmax)
                mean, var = batch_mean - d * batch_var.sqrt() / r, batch_var / r.square()
            else:
                mean, var = batch_mean, batch_var
            with th.no_grad():
                self.ra_mean.lerp_(batch_mean.detach(), self.momentum)
                self.ra_var.lerp_(batch_var.detach(), self.momentum)
                self.steps.add_(1)
            self._steps += 1
        else:
            mean, var = self.ra_mean, self.ra_var
        # scale * (x - mean) / sqrt(var + eps) + bias as ONE pass over x (x * a + b; a, b per feature): the
        # elementwise passes over [n_critics, batch, width] cost as much as the var_mean, forward and backward
        inv_std = (var + self.eps).rsqrt()
        a = self.scale * inv_std if self.affine else inv_std
        b = self.bias - mean * a if self.affine else -mean * a
        return th.addcmul(b, x, a)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "steps" in state_dict:
            self._steps = int(state_dict[prefix + "steps"])

    def extra_repr(self) -> str:
        return (
            f"num_features={self.num_features}, momentum={self.momentum}, warmup_steps={self.warmup_steps}, "
            f"affine={self.affine}, n_members={self.n_members}"
        )
