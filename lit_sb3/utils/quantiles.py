"""The quantile-regression (Huber) loss shared by QR-DQN and TQC.

QR-DQN (Dabney et al. 2017, https://arxiv.org/abs/1710.10044, eq. 10) and TQC (Kuznetsov et al. 2020,
https://arxiv.org/abs/2005.04269, eq. 12) fit N quantiles ``theta_i`` at the midpoints ``tau_i = (2i + 1) / 2N``
of a return distribution to M target atoms ``z_j`` with the asymmetric Huber loss

    rho_tau(u) = |tau - 1{u < 0}| * L_1(u),   u = z_j - theta_i,
    L_1(u) = 0.5 u^2 if |u| <= 1 else |u| - 0.5.
"""

from __future__ import annotations

import torch as th
from torch.nn import functional as F

__all__ = ["quantile_huber_loss", "quantile_midpoints"]


def quantile_midpoints(n_quantiles: int, device: th.device | str | None = None) -> th.Tensor:
    """``tau_i = (i + 0.5) / N`` for ``i = 0 .. N-1`` (float32).

    Args:
        n_quantiles: number of quantiles N.
        device: where to create the tensor.
    """
    return (th.arange(n_quantiles, device=device, dtype=th.float32) + 0.5) / n_quantiles


def quantile_huber_loss(
    current_quantiles: th.Tensor,
    target_quantiles: th.Tensor,
    taus: th.Tensor | None = None,
    sum_over_quantiles: bool = True,
    n_seeds: int = 1,
) -> th.Tensor:
    """Quantile Huber loss of ``current_quantiles [..., N]`` against ``target_quantiles [..., M]``.

    The leading dimensions broadcast (TQC: current ``[n_critics, batch, N]`` against target ``[1, batch, M]``;
    QR-DQN: ``[batch, N]`` against ``[batch, M]``). Pairwise TD errors ``u_ij = z_j - theta_i`` form
    ``[..., N, M]``.

    Args:
        current_quantiles: the predicted quantiles ``theta_i`` (last dimension: the N quantiles).
        target_quantiles: the target atoms ``z_j`` (last dimension: the M atoms), without gradient.
        taus: quantile levels of the current quantiles ``[N]`` (default: the midpoints ``(i + 0.5) / N``).
        sum_over_quantiles: sum over the N current quantiles then average the rest (QR-DQN), or average all
            pairs (TQC).
        n_seeds: K > 1: the leading dimension of both quantile tensors is the seed's and the loss is per seed,
            ``[K]``.
    """
    if n_seeds > 1:
        # one seed at a time: the pairwise [..., N, M] intermediates of K seeds at once leave the CPU caches
        # (QR-DQN, K = 8: 158 ms against 42 ms per forward+backward), and each seed's loss is its own anyway
        return th.stack(
            [
                quantile_huber_loss(current_quantiles[i], target_quantiles[i], taus, sum_over_quantiles)
                for i in range(n_seeds)
            ]
        )
    if taus is None:
        taus = quantile_midpoints(current_quantiles.shape[-1], current_quantiles.device)
    # theta_i and z_j broadcast to the pairs [..., N, M] (views, no copies)
    current, target = th.broadcast_tensors(current_quantiles.unsqueeze(-1), target_quantiles.unsqueeze(-2))
    # L_1(u), u_ij = z_j - theta_i: Huber loss with threshold kappa = 1 (one fused kernel, forward and backward)
    huber = F.huber_loss(current, target, reduction="none", delta=1.0)
    # |tau_i - 1{u_ij < 0}|: tau_i where the target is above the quantile, 1 - tau_i where it is below
    taus = taus.to(current_quantiles.dtype).unsqueeze(-1)
    weight = th.where(target < current.detach(), 1.0 - taus, taus)
    loss = weight * huber
    if sum_over_quantiles:
        loss = loss.sum(dim=-2)
    return loss.mean()
