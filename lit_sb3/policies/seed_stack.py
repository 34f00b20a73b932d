"""Seed stacking: K seeds' networks as one, and the per-seed reductions an update over a seed dimension needs.

What it offers (the one stacking mechanism of the library; an algorithm written over a leading seed dimension K
uses only these):

* :func:`stack_module` — K identically built modules (one per seed, each built as its single-seed run builds it)
  -> one module of the same class evaluated on ``[K, batch, ...]`` inputs, plus :class:`ParamLink` s mapping each
  stacked tensor back to the K originals (``member(i)`` writes seed i's weights and optimiser state through them).
  ``nn.Linear`` becomes one :class:`~lit_sb3.policies.torch_layers.EnsembleLinear` of K members (one ``baddbmm``);
  an ``EnsembleLinear`` of n members (a seed's critic ensemble) one of ``K * n`` members, seed-major; elementwise
  activations stay; ``nn.LayerNorm`` becomes a :class:`SeedLayerNorm` (per-seed scale and bias);
  ``BatchRenorm`` one ``BatchRenorm`` of ``K * n`` members (per-seed affine parameters and running statistics);
  ``nn.Conv2d`` a :class:`SeedConv2d` (one convolution per seed, on ``[K, batch, C, H, W]``); ``nn.LSTM`` a
  :class:`SeedLSTM` (torch's LSTM kernel once per seed, on ``[length, K * batch, input]`` sequences with states
  ``[layers, K * batch, hidden]``, seed-major along the batch);
  other parameter-free modules (``Flatten``, ...) run with K folded into the batch (:class:`SeedFolded`). A layer
  kind not stacked yet (GRU, a leaf module holding its own state) raises ``NotImplementedError`` naming
  it: K=1 never stacks anything and always works.
* :func:`seed_mean`, :func:`seed_mse`, :func:`seed_smooth_l1` — per-seed reductions ``[K, ...] -> [K]``; at K=1 they
  are the exact reduction a single-seed run uses (``x.mean()``, ``F.mse_loss(...)``: a scalar, on the single-seed
  tensors that carry no seed dimension at K=1), so K=1 stays bitwise.
* :func:`masked_seed_sum` — the sum of per-seed losses over the live seeds (``torch.where``: a NaN of a masked seed
  cannot reach the others); its gradient gives each seed its own loss's gradient. :func:`masked_seed_lerp_` — a soft
  target update for some seeds only.
* :func:`clip_grad_norm_per_seed` — ``max_grad_norm`` clipping per seed (K=1: ``torch.nn.utils.clip_grad_norm_``).
* :func:`seed_randn_like`, :func:`seed_randint` — random draws ``[K, ...]`` whose slice i comes from seed i's own
  ``torch.Generator`` (so seed i of a batch draws what its separate run draws from torch's global generator);
  without generators (K=1), torch's global generator as a single-seed run uses it.

Layout: stacked tensors are seed-major, ``[K * group, ...]`` where ``group`` is 1 (a Linear) or n (an ensemble).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

import numpy as np
import torch as th
from torch import nn
from torch.nn import functional as F

from lit_sb3.policies.batch_renorm import BatchRenorm
from lit_sb3.policies.torch_layers import EnsembleLinear

__all__ = [
    "ParamLink",
    "SeedConv2d",
    "SeedFolded",
    "SeedLSTM",
    "SeedLayerNorm",
    "clip_grad_norm_per_seed",
    "masked_seed_lerp_",
    "masked_seed_sum",
    "seed_mean",
    "seed_mse",
    "seed_randint",
    "seed_randn_like",
    "seed_smooth_l1",
    "stack_module",
]

# elementwise, parameter-free layers: they run on [K, batch, ...] as they are
_ELEMENTWISE = (
    nn.ReLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.ELU,
    nn.LeakyReLU,
    nn.SiLU,
    nn.GELU,
    nn.Softplus,
    nn.Hardtanh,
    nn.Identity,
    nn.Mish,
    nn.SELU,
    nn.CELU,
)


class ParamLink:
    """Where a stacked tensor's seed slices live in the K single-seed models.

    The stacked tensor is seed-major (``[K * group, ...]``); ``member_tensors[i]`` is seed i's tensor in its
    single-seed model, ``transpose`` says that the single tensor is the transpose of each slice (``nn.Linear``
    weights are ``[out, in]``, ``EnsembleLinear`` weights ``[in, out]``).

    Args:
        stacked: the stacked parameter or buffer.
        member_tensors: the K single-seed tensors.
        transpose: the slices are stored transposed.
    """

    def __init__(self, stacked: th.Tensor, member_tensors: Sequence[th.Tensor], transpose: bool = False) -> None:
        self.stacked = stacked
        self.member_tensors = list(member_tensors)
        self.transpose = transpose

    def seed_slice(self, i: int, tensor: th.Tensor | None = None) -> th.Tensor:
        """Seed i's part of the stacked tensor (or of ``tensor``, shaped like it: an optimiser moment), shaped as
        its single-seed tensor."""
        k = len(self.member_tensors)
        source = self.stacked if tensor is None else tensor
        part = source.detach().reshape(k, -1, *source.shape[1:])[i]
        if self.transpose:
            part = part.squeeze(0).transpose(-1, -2)
        return part.reshape(self.member_tensors[i].shape)

    def write_member(self, i: int) -> None:
        """Copy seed i's current stacked values into its single-seed tensor."""
        target = self.member_tensors[i]
        with th.no_grad():
            target.copy_(self.seed_slice(i).to(device=target.device, dtype=target.dtype))


def _stack_linear(layers: Sequence[nn.Module]) -> tuple[EnsembleLinear, list[ParamLink]]:
    """One EnsembleLinear holding K ``nn.Linear`` (K members) or K ``EnsembleLinear(n)`` (K * n members)."""
    first = layers[0]
    if isinstance(first, nn.Linear):
        stacked = EnsembleLinear(len(layers), first.in_features, first.out_features, bias=first.bias is not None)
        with th.no_grad():
            stacked.weight.copy_(th.stack([layer.weight.detach().t() for layer in layers]))
            if stacked.bias is not None:
                stacked.bias.copy_(th.stack([layer.bias.detach() for layer in layers]).unsqueeze(1))
        links = [ParamLink(stacked.weight, [layer.weight for layer in layers], transpose=True)]
    elif isinstance(first, EnsembleLinear):
        n = first.n_members
        stacked = EnsembleLinear(len(layers) * n, first.in_features, first.out_features, bias=first.bias is not None)
        with th.no_grad():
            stacked.weight.copy_(th.cat([layer.weight.detach() for layer in layers]))
            if stacked.bias is not None:
                stacked.bias.copy_(th.cat([layer.bias.detach() for layer in layers]))
        links = [ParamLink(stacked.weight, [layer.weight for layer in layers])]
    else:  # pragma: no cover - guarded by _stack_into
        raise TypeError(type(first).__name__)
    if stacked.bias is not None:
        links.append(ParamLink(stacked.bias, [layer.bias for layer in layers]))
    stacked.to(device=first.weight.device, dtype=first.weight.dtype)
    return stacked, links


def clip_grad_norm_per_seed(
    parameters: Iterable[th.Tensor], max_norm: float, n_seeds: int, foreach: bool | None = None
) -> th.Tensor:
    """``clip_grad_norm_`` for each seed separately: each seed's gradients are scaled by
    ``min(1, max_norm / (its total norm + 1e-6))``, as the single-seed run's ``clip_grad_norm_`` would (K=1: torch's
    ``clip_grad_norm_`` itself).

    Args:
        parameters: stacked, seed-major parameters.
        max_norm: the largest gradient norm of one seed.
        n_seeds: K.
        foreach: K=1: ``clip_grad_norm_``'s ``foreach``.

    Returns:
        The per-seed total norms before clipping, ``[K]`` (K=1: the scalar norm).
    """
    if n_seeds == 1:  # the single-seed kernel: bitwise what an unbatched run computes
        return th.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=foreach)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return th.zeros(n_seeds)
    squares = th.stack([g.reshape(n_seeds, -1).pow(2).sum(1) for g in grads]).sum(0)
    norms = squares.sqrt()
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.reshape(n_seeds, *([1] * (g.dim() - 1))).repeat_interleave(g.shape[0] // n_seeds, 0))
    return norms


class SeedFolded(nn.Module):
    """A parameter-free module run on ``[K, batch, ...]`` with K folded into the batch (``Flatten``, a
    ``CombinedExtractor`` of flattened Dict entries: each entry folded, ...).

    Args:
        module: the wrapped module (no parameters, no buffers).
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: th.Tensor | dict[str, th.Tensor]) -> th.Tensor:
        first = next(iter(x.values())) if isinstance(x, dict) else x
        k, b = first.shape[0], first.shape[1]
        if isinstance(x, dict):
            y = self.module({key: value.reshape(k * b, *value.shape[2:]) for key, value in x.items()})
        else:
            y = self.module(x.reshape(k * b, *x.shape[2:]))
        return y.reshape(k, b, *y.shape[1:])


class SeedLayerNorm(nn.Module):
    """K ``nn.LayerNorm`` (one per seed, each with its own affine parameters) on ``[K * group, batch, ...]``:
    the normalisation over the trailing ``normalized_shape`` is the single layer's, then seed i's scale and bias.

    Args:
        layers: the K single-seed ``nn.LayerNorm`` (``elementwise_affine=True``).
    """

    def __init__(self, layers: Sequence[nn.LayerNorm]) -> None:
        super().__init__()
        first = layers[0]
        self.n_seeds = len(layers)
        self.normalized_shape = tuple(first.normalized_shape)
        self.eps = first.eps
        shape = (self.n_seeds, 1, *self.normalized_shape)  # 1: broadcast over a seed's (group and) batch
        self.weight = nn.Parameter(th.stack([layer.weight.detach() for layer in layers]).reshape(shape).clone())
        self.bias = (
            nn.Parameter(th.stack([layer.bias.detach() for layer in layers]).reshape(shape).clone())
            if first.bias is not None
            else None
        )

    def forward(self, x: th.Tensor) -> th.Tensor:
        y = F.layer_norm(x, self.normalized_shape, None, None, self.eps)
        shape = y.shape
        y = y.reshape(self.n_seeds, -1, *self.normalized_shape)  # seed-major: [K, group * batch, ...]
        y = y * self.weight if self.bias is None else th.addcmul(self.bias, y, self.weight)
        return y.reshape(shape)

    def extra_repr(self) -> str:
        return f"n_seeds={self.n_seeds}, normalized_shape={self.normalized_shape}, eps={self.eps}"


class SeedConv2d(nn.Module):
    """K ``nn.Conv2d`` (one per seed) on ``[K, batch, C, H, W]``: one ``conv2d`` per seed on its slice.

    A per-seed loop rather than one grouped convolution over ``K * C`` channels: on one CPU thread the loop was
    faster (NatureCNN's three layers, K = 3, batch 32, 3x36x36, forward + backward: 50.5 and 55.7 ms against 67.7 and
    67.5 ms in two runs, medians of 5 interleaved repeats of 20, load ~11: ``benchmarks/bench_seed_conv2d.py``), as the grouped kernel gives up
    the single convolution's fast paths.

    Args:
        layers: the K single-seed ``nn.Conv2d`` (``padding_mode="zeros"``).
    """

    def __init__(self, layers: Sequence[nn.Conv2d]) -> None:
        super().__init__()
        first = layers[0]
        self.n_seeds = len(layers)
        self.stride, self.padding, self.dilation, self.groups = (
            first.stride,
            first.padding,
            first.dilation,
            first.groups,
        )
        self.weight = nn.Parameter(th.stack([layer.weight.detach() for layer in layers]).clone())
        self.bias = (
            nn.Parameter(th.stack([layer.bias.detach() for layer in layers]).clone())
            if first.bias is not None
            else None
        )

    def forward(self, x: th.Tensor) -> th.Tensor:
        bias = self.bias
        return th.stack(
            [
                F.conv2d(
                    x[i],
                    self.weight[i],
                    None if bias is None else bias[i],
                    self.stride,
                    self.padding,
                    self.dilation,
                    self.groups,
                )  # fmt: skip
                for i in range(self.n_seeds)
            ]
        )

    def extra_repr(self) -> str:
        return f"n_seeds={self.n_seeds}, weight={tuple(self.weight.shape[1:])}, stride={self.stride}"


def _stack_conv2d(layers: Sequence[nn.Conv2d]) -> tuple[SeedConv2d, list[ParamLink]]:
    """One :class:`SeedConv2d` holding K ``nn.Conv2d``'s parameters."""
    if layers[0].padding_mode != "zeros":
        raise NotImplementedError(
            f"seed batching (K > 1) stacks Conv2d with padding_mode='zeros' only, got {layers[0].padding_mode!r}."
        )
    stacked = SeedConv2d(layers).to(device=layers[0].weight.device)
    links = [ParamLink(stacked.weight, [layer.weight for layer in layers])]
    if stacked.bias is not None:
        links.append(ParamLink(stacked.bias, [layer.bias for layer in layers]))
    return stacked, links


class SeedLSTM(nn.Module):
    """K ``nn.LSTM`` (one per seed, each with its own weights) as one module with ``nn.LSTM``'s calling convention
    (``batch_first=False``): ``forward(sequence [length, K * batch, input_size], (h, c) [layers, K * batch, hidden])``,
    the batch dimension seed-major (seed i's sequences are columns ``i * batch`` to ``(i + 1) * batch - 1``).

    Each seed runs torch's LSTM kernel (``torch.lstm``, what ``nn.LSTM.forward`` calls) on its own columns with its
    own weights, so a seed's outputs are those of its single-seed ``nn.LSTM`` on the same inputs. A per-seed loop
    rather than one stacked cell: the kernel's fused recurrence stays (a cell written with ``baddbmm`` would run the
    time steps in Python), as :class:`SeedConv2d` keeps the single convolution's kernel. The weights are stacked
    ``[K, ...]`` parameters with ``nn.LSTM``'s names (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ...), so
    per-seed optimisers, clipping and :class:`ParamLink` s treat them as any stacked layer.

    Args:
        layers: the K single-seed ``nn.LSTM`` (no dropout, unidirectional, no projection, ``batch_first=False``).
    """

    def __init__(self, layers: Sequence[nn.LSTM]) -> None:
        super().__init__()
        first = layers[0]
        unsupported = {
            "dropout": first.dropout > 0,  # the kernel draws dropout masks from torch's global stream, not a seed's
            "bidirectional": first.bidirectional,
            "proj_size": first.proj_size > 0,
            "batch_first": first.batch_first,
        }
        bad = [name for name, flag in unsupported.items() if flag]
        if bad:
            raise NotImplementedError(
                f"seed batching (K > 1) stacks LSTMs without {', '.join(bad)} (got {first}); K = 1 supports it."
            )
        self.n_seeds = len(layers)
        self.input_size, self.hidden_size, self.num_layers = first.input_size, first.hidden_size, first.num_layers
        self.bias = first.bias
        kinds = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if first.bias else [])
        # per layer, in the order the kernel takes them (nn.LSTM's flat weights)
        self.weight_names = [f"{kind}_l{layer}" for layer in range(self.num_layers) for kind in kinds]
        for name in self.weight_names:
            members = [getattr(layer, name) for layer in layers]
            self.register_parameter(name, nn.Parameter(th.stack([p.detach() for p in members]).clone()))

    def forward(
        self, sequence: th.Tensor, hx: tuple[th.Tensor, th.Tensor] | None = None
    ) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
        """Outputs ``[length, K * batch, hidden]`` and the final ``(h, c)``, each ``[layers, K * batch, hidden]``.

        Args:
            sequence: the seeds' sequences ``[length, K * batch, input_size]``, seed-major along dimension 1.
            hx: the initial hidden and cell states, seed-major along dimension 1 (None: zeros, as ``nn.LSTM``).
        """
        if hx is None:
            zeros = sequence.new_zeros(self.num_layers, sequence.shape[1], self.hidden_size)
            hx = (zeros, zeros)
        n = sequence.shape[1] // self.n_seeds
        # one unbind per stacked weight: its backward stacks the K gradients once (indexing weight[i] per seed would
        # add K full-size [K, ...] gradients, K^2 work)
        per_seed = list(zip(*(getattr(self, name).unbind(0) for name in self.weight_names)))
        outputs, hs, cs = [], [], []
        for i in range(self.n_seeds):
            cols = slice(i * n, (i + 1) * n)
            weights = list(per_seed[i])
            state = (hx[0][:, cols].contiguous(), hx[1][:, cols].contiguous())
            output, h, c = th.lstm(
                sequence[:, cols], state, weights, self.bias, self.num_layers, 0.0, self.training, False, False
            )
            outputs.append(output)
            hs.append(h)
            cs.append(c)
        return th.cat(outputs, 1), (th.cat(hs, 1), th.cat(cs, 1))

    def extra_repr(self) -> str:
        return f"n_seeds={self.n_seeds}, {self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"


def _stack_lstm(layers: Sequence[nn.LSTM]) -> tuple[SeedLSTM, list[ParamLink]]:
    """One :class:`SeedLSTM` holding K ``nn.LSTM``'s weights."""
    stacked = SeedLSTM(layers).to(device=layers[0].weight_ih_l0.device)
    links = [
        ParamLink(getattr(stacked, name), [getattr(layer, name) for layer in layers]) for name in stacked.weight_names
    ]
    return stacked, links


def _stack_layer_norm(layers: Sequence[nn.LayerNorm]) -> tuple[SeedLayerNorm, list[ParamLink]]:
    """One :class:`SeedLayerNorm` holding K ``nn.LayerNorm``'s affine parameters."""
    stacked = SeedLayerNorm(layers).to(device=layers[0].weight.device)
    links = [ParamLink(stacked.weight, [layer.weight for layer in layers])]
    if stacked.bias is not None:
        links.append(ParamLink(stacked.bias, [layer.bias for layer in layers]))
    return stacked, links


def _stack_batch_renorm(layers: Sequence[BatchRenorm]) -> tuple[BatchRenorm, list[ParamLink]]:
    """One :class:`BatchRenorm` of ``K * n`` members (``n = max(1, n_members)``, seed-major) holding K layers'
    affine parameters and running statistics; each member normalises its own slice of ``[K * n, batch, ...]`` with
    its own statistics, so seed i's are its separate run's. The warm-up step counter is per seed (``steps`` is
    ``[K]``): seeds on their own update schedules leave the warm-up at their own passes."""
    first = layers[0]
    group = max(1, first.n_members)
    stacked = BatchRenorm(first.num_features, first.eps, first.momentum, first.affine, first.warmup_steps,
                          n_members=len(layers) * group, n_seeds=len(layers))  # fmt: skip
    stacked.rmax, stacked.dmax = first.rmax, first.dmax
    links = []
    with th.no_grad():
        for name in ("scale", "bias", "ra_mean", "ra_var"):
            members = [getattr(layer, name) for layer in layers]
            getattr(stacked, name).copy_(th.cat([m.detach().reshape(group, 1, -1) for m in members]))
            links.append(ParamLink(getattr(stacked, name), members))
        stacked.steps.copy_(th.stack([layer.steps for layer in layers]))
    stacked._steps = np.array([layer._steps for layer in layers], dtype=np.int64)
    return stacked.to(device=first.scale.device, dtype=first.scale.dtype), links


def _stateless(module: nn.Module) -> bool:
    return next(module.parameters(), None) is None and next(module.buffers(), None) is None


def _stack_into(target: nn.Module, group: Sequence[nn.Module], path: str, links: list[ParamLink]) -> nn.Module:
    """The stacked version of ``group`` (K modules of one structure); ``target`` is a copy of ``group[0]`` that is
    modified in place where it can be."""
    first = group[0]
    if isinstance(first, (nn.Linear, EnsembleLinear)):
        stacked, layer_links = _stack_linear(group)
        links += layer_links
        return stacked
    if type(first) is nn.Conv2d:
        stacked, layer_links = _stack_conv2d(group)
        links += layer_links
        return stacked
    if type(first) is nn.LSTM:
        stacked, layer_links = _stack_lstm(group)
        links += layer_links
        return stacked
    if isinstance(first, nn.LayerNorm) and first.weight is not None:
        stacked, layer_links = _stack_layer_norm(group)
        links += layer_links
        return stacked
    if isinstance(first, BatchRenorm):
        stacked, layer_links = _stack_batch_renorm(group)
        links += layer_links
        return stacked
    if isinstance(first, _ELEMENTWISE) or (isinstance(first, nn.Flatten) and first.start_dim < 0):
        return target  # elementwise, or flattening only trailing dims: K-agnostic as it is
    if _stateless(first):
        return SeedFolded(target)
    own_params = [name for name, _ in first.named_parameters(recurse=False)]
    if list(first.named_buffers(recurse=False)) or not list(first.children()):
        raise NotImplementedError(
            f"seed batching (K > 1) does not stack {type(first).__name__} layers yet (at {path or 'the root'}); "
            "K = 1 (a single seed) supports every layer."
        )
    for name in own_params:  # a container's own parameter (an on-policy log_std): [K, *shape], seed i's at i
        members = [getattr(module, name) for module in group]
        stacked_param = nn.Parameter(th.stack([p.detach() for p in members]).clone(), members[0].requires_grad)
        setattr(target, name, stacked_param)
        links.append(ParamLink(stacked_param, members))
    for name, child in list(target.named_children()):
        members = [getattr(module, name) for module in group]
        stacked = _stack_into(child, members, f"{path}.{name}" if path else name, links)
        if stacked is not child:
            setattr(target, name, stacked)
    return target


def stack_module(modules: Sequence[nn.Module]) -> tuple[nn.Module, list[ParamLink]]:
    """Stack K modules of one structure (one per seed) into one evaluated on ``[K, batch, ...]`` inputs.

    The result is a copy of ``modules[0]`` (same class, so its ``forward`` is the single module's, written
    K-agnostic: concatenations and reductions over ``dim=-1``) whose Linear layers hold all K seeds.

    Args:
        modules: the K modules, seed index i's at position i.

    Returns:
        The stacked module and the links of its stacked tensors to the K originals.

    Raises:
        NotImplementedError: a layer kind that is not stacked yet (named).
    """
    if len(modules) < 2:
        raise ValueError(f"stack_module needs K >= 2 modules (K = 1 is the module itself), got {len(modules)}.")
    links: list[ParamLink] = []
    target = copy.deepcopy(modules[0])
    stacked = _stack_into(target, modules, "", links)
    return stacked, links


def seed_mean(x: th.Tensor, n_seeds: int) -> th.Tensor:
    """Mean over everything but the leading seed dimension: ``[K, ...] -> [K]`` (K=1: ``x.mean()``, a scalar).

    Args:
        x: per-seed values, seed-major.
        n_seeds: K.
    """
    if n_seeds == 1:
        return x.mean()
    return x.reshape(n_seeds, -1).mean(1)


def seed_mse(x: th.Tensor, target: th.Tensor, n_seeds: int) -> th.Tensor:
    """Per-seed mean squared error ``[K]`` (K=1: ``F.mse_loss(x, target)``, a scalar).

    Args:
        x: predictions ``[K, ...]``.
        target: targets, same shape.
        n_seeds: K.
    """
    if n_seeds == 1:
        return F.mse_loss(x, target)
    return (x - target).square().reshape(n_seeds, -1).mean(1)


def seed_smooth_l1(x: th.Tensor, target: th.Tensor, n_seeds: int) -> th.Tensor:
    """Per-seed Huber loss (``F.smooth_l1_loss``, beta 1) ``[K]`` (K=1: ``F.smooth_l1_loss(x, target)``, a scalar).

    Args:
        x: predictions ``[K, ...]``.
        target: targets, same shape.
        n_seeds: K.
    """
    if n_seeds == 1:
        return F.smooth_l1_loss(x, target)
    return F.smooth_l1_loss(x, target, reduction="none").reshape(n_seeds, -1).mean(1)


def masked_seed_sum(per_seed: th.Tensor, active: th.Tensor | None = None) -> th.Tensor:
    """The sum of per-seed losses over the live seeds (the loss an optimiser of K seeds minimises); a single
    seed's scalar loss is returned as it is.

    Args:
        per_seed: ``[K]`` losses (or the scalar loss of one seed).
        active: ``[K]`` bool (None: every seed is live).
    """
    if per_seed.dim() == 0:
        return per_seed
    if active is None:
        return per_seed.sum()
    return th.where(active, per_seed, th.zeros_like(per_seed)).sum()


def masked_seed_lerp_(
    targets: Sequence[th.Tensor], sources: Sequence[th.Tensor], weight: float, mask: th.Tensor
) -> None:
    """``target <- lerp(target, source, weight)`` in place for the seeds where ``mask`` is True, the other seeds'
    slices unchanged (seed-major stacked tensors; ``weight=1``: a copy): a soft target update that only some
    seeds take (their delayed steps fall on different updates).

    Args:
        targets: the stacked tensors updated.
        sources: the stacked tensors they move towards (same shapes).
        weight: the interpolation weight (tau).
        mask: ``[K]`` bool of the seeds updated.
    """
    k = mask.shape[0]
    keep = ~mask.view(k, 1)
    for target, source in zip(targets, sources, strict=True):
        view = target.view(k, -1)
        view.copy_(th.where(keep, view, th.lerp(view, source.view(k, -1), weight)))


def seed_randn_like(x: th.Tensor, generators: Sequence[th.Generator] | None = None) -> th.Tensor:
    """Standard normal noise shaped like ``x`` (``[K, ...]``): slice i from ``generators[i]``; None: ``randn_like``.

    Args:
        x: the tensor whose shape, dtype and device the noise takes.
        generators: one generator per seed (on ``x``'s device; a None entry: a seed sitting out, zeros), or None.
    """
    if generators is None:
        return th.randn_like(x)
    shape = x.shape[1:]
    return th.stack(
        [
            th.randn(shape, generator=g, dtype=x.dtype, device=x.device)
            if g is not None
            else th.zeros(shape, dtype=x.dtype, device=x.device)
            for g in generators
        ]
    )


def seed_randint(
    high: int, size: tuple[int, ...], generators: Sequence[th.Generator] | None, device: th.device, low: int = 0
) -> th.Tensor:
    """Uniform integers in ``[low, high)``: ``[K, *size]`` with slice i from ``generators[i]`` (None: ``size``
    from torch's global generator, as a single-seed run draws them).

    Args:
        high: upper bound (excluded).
        size: shape of one seed's draw.
        generators: one generator per seed (a None entry: a seed sitting out, ``low``), or None.
        device: where the draw is made.
        low: lower bound.
    """
    if generators is None:
        return th.randint(low, high, size, device=device)
    return th.stack(
        [
            th.randint(low, high, size, generator=g, device=device)
            if g is not None
            else th.full(size, low, dtype=th.long, device=device)
            for g in generators
        ]
    )
