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
read a tensor (no device synchronisation per forward pass). A layer stacking K seeds (``n_seeds > 1``, built by
:func:`~lit_sb3.policies.seed_stack.stack_module`) counts per seed (``steps`` is ``[K]``, mirrored by a numpy array):
seeds with their own update schedules leave warm-up at their own passes, and a seed that sits out a pass
(:attr:`BatchRenorm.active`) neither counts it nor moves its running statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
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
        n_seeds: K seeds stacked seed-major in the ``n_members`` (one step counter each); 1: one counter.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 0.001,
        momentum: float = 0.01,
        affine: bool = True,
        warmup_steps: int = 100_000,
        n_members: int = 0,
        n_seeds: int = 1,
    ) -> None:
        super().__init__()
        if n_seeds > 1 and (n_members < n_seeds or n_members % n_seeds):
            raise ValueError(f"BatchRenorm of {n_seeds} seeds needs a multiple of them as members, got {n_members}.")
        shape = (n_members, 1, num_features) if n_members else (num_features,)
        self.register_buffer("ra_mean", th.zeros(shape))
        self.register_buffer("ra_var", th.ones(shape))
        self.register_buffer("steps", th.tensor(0, dtype=th.long) if n_seeds == 1 else th.zeros(n_seeds, dtype=th.long))
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
        self.n_seeds = n_seeds
        self._steps: Any = 0 if n_seeds == 1 else np.zeros(n_seeds, dtype=np.int64)  # host copy of `steps`
        # K seeds: host [K] bool of the seeds whose training-mode passes count (None: every seed); set by the model
        # around an update some seeds sit out
        self.active: np.ndarray | None = None

    def forward(self, x: th.Tensor) -> th.Tensor:
        if self.n_members and x.dim() == 2:  # an input shared by all members
            x = x.unsqueeze(0).expand(self.n_members, -1, -1)
        if self.training and self.n_seeds > 1:
            mean, var = self._seed_statistics(x)
        elif self.training:
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

    def _seed_statistics(self, x: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """K seeds in training mode: each seed's members normalise with the batch statistics during its own
        warm-up and renormalise after it (the single layer's formulas); the running statistics and step counts
        of the seeds in :attr:`active` are updated."""
        batch_var, batch_mean = th.var_mean(x, dim=-2, keepdim=True)
        past = self._steps > self.warmup_steps
        mean, var = batch_mean, batch_var
        if past.any():
            chosen = None if past.all() else self._member_mask(past, x.device)
            # (the members still in their warm-up take no root of their variance: no 0 * inf in their gradient)
            root_var = (batch_var if chosen is None else th.where(chosen, batch_var, th.ones_like(batch_var))).sqrt()
            running_std = (self.ra_var + self.eps).sqrt()
            r = ((batch_var + self.eps).sqrt() / running_std).detach().clamp(1 / self.rmax, self.rmax)
            d = ((batch_mean - self.ra_mean) / running_std).detach().clamp(-self.dmax, self.dmax)
            renorm_mean, renorm_var = batch_mean - d * root_var / r, batch_var / r.square()
            if chosen is None:
                mean, var = renorm_mean, renorm_var
            else:
                mean, var = th.where(chosen, renorm_mean, batch_mean), th.where(chosen, renorm_var, batch_var)
        with th.no_grad():
            active = self.active
            if active is None:
                self.ra_mean.lerp_(batch_mean.detach(), self.momentum)
                self.ra_var.lerp_(batch_var.detach(), self.momentum)
                self.steps.add_(1)
                self._steps = self._steps + 1
            else:
                moving = self._member_mask(active, x.device)
                self.ra_mean.copy_(
                    th.where(moving, self.ra_mean.lerp(batch_mean.detach(), self.momentum), self.ra_mean)
                )
                self.ra_var.copy_(th.where(moving, self.ra_var.lerp(batch_var.detach(), self.momentum), self.ra_var))
                self.steps.add_(th.as_tensor(active, device=self.steps.device).long())
                self._steps = self._steps + active
        return mean, var

    def _member_mask(self, per_seed: np.ndarray, device: th.device) -> th.Tensor:
        """A host ``[K]`` bool per member, ``[n_members, 1, 1]`` on ``device``."""
        members = np.repeat(per_seed, self.n_members // self.n_seeds)
        return th.as_tensor(members, device=device).view(-1, 1, 1)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "steps" in state_dict:
            steps = state_dict[prefix + "steps"]
            self._steps = int(steps) if self.n_seeds == 1 else steps.cpu().numpy().astype(np.int64).reshape(-1)

    def extra_repr(self) -> str:
        return (
            f"num_features={self.num_features}, momentum={self.momentum}, warmup_steps={self.warmup_steps}, "
            f"affine={self.affine}, n_members={self.n_members}"
            + (f", n_seeds={self.n_seeds}" if self.n_seeds > 1 else "")
        )
