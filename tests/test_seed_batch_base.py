"""The seed mechanism: stacking (lit_sb3.policies.seed_stack), per-seed reductions and gradient clipping,
optimisers (lit_sb3.optim), metric routing (lit_sb3.loggers), the seed API of every model and SeedBatch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from torch import nn

from lit_sb3.loggers import SeedRoutingLogger
from lit_sb3.optim import PerSeedAdam, PerSeedRMSprop, build_optimizer
from lit_sb3.policies.batch_renorm import BatchRenorm
from lit_sb3.policies.seed_stack import (
    SeedConv2d,
    SeedFolded,
    SeedLayerNorm,
    clip_grad_norm_per_seed,
    masked_seed_sum,
    seed_mean,
    seed_mse,
    seed_smooth_l1,
    stack_module,
)
from lit_sb3.policies.torch_layers import EnsembleLinear, NatureCNN
from tests.tolerances import optimizer_step_bound, parameter_atol, reassociation_rtol, state_tolerances

th.set_num_threads(1)


_MLP_PARAMETERS = 3 * 8 + 8 + 8 * 2 + 2  # of each of _mlps' networks


def _mlps(k: int) -> list[nn.Sequential]:
    out = []
    for seed in range(k):
        th.manual_seed(seed)
        out.append(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)))
    return out


def test_stack_module_of_mlps_computes_each_seed_and_writes_back():
    mlps = _mlps(3)
    stacked, links = stack_module(mlps)
    assert isinstance(stacked, nn.Sequential) and isinstance(stacked[0], EnsembleLinear)
    x = th.randn(3, 5, 3)
    y = stacked(x)
    for i, mlp in enumerate(mlps):
        th.testing.assert_close(y[i], mlp(x[i]))
    with th.no_grad():
        for p in stacked.parameters():
            p.add_(1.0)
    for link in links:
        link.write_member(1)
    th.testing.assert_close(stacked(x)[1], mlps[1](x[1]))
    assert not th.allclose(stacked(x)[0], mlps[0](x[0]))  # only seed 1 was written back


def test_stack_module_of_ensembles_is_seed_major():
    ensembles = [nn.Sequential(EnsembleLinear(2, 4, 3), nn.ReLU(), EnsembleLinear(2, 3, 1)) for _ in range(3)]
    stacked, _ = stack_module(ensembles)
    assert stacked[0].n_members == 6
    x = th.randn(3, 6, 4)
    y = stacked(x.repeat_interleave(2, 0)).view(3, 2, 6, 1)
    for i, ensemble in enumerate(ensembles):
        th.testing.assert_close(y[i], ensemble(x[i]))


def test_clip_grad_norm_per_seed_equals_clip_grad_norm_of_each_seed():
    mlps = _mlps(4)
    stacked, _ = stack_module(mlps)
    x, target = th.randn(4, 7, 3), th.randn(4, 7, 2) * 10
    ((stacked(x) - target) ** 2).mean(dim=(1, 2)).sum().backward()
    norms = clip_grad_norm_per_seed(list(stacked.parameters()), 0.5, 4)
    for i, mlp in enumerate(mlps):
        ((mlp(x[i]) - target[i]) ** 2).mean().backward()
        norm = nn.utils.clip_grad_norm_(mlp.parameters(), 0.5)
        # baddbmm against addmm: gradients are one pass over sums of at most 2 x 7 terms, the norm sums the squares of
        # the 50 parameters' gradients (tests/tolerances.py: reassociation_rtol of the longest sum)
        rtol = reassociation_rtol(_MLP_PARAMETERS)
        th.testing.assert_close(norms[i], norm, rtol=rtol, atol=0.0)
        grad = mlp[0].weight.grad.t()
        th.testing.assert_close(stacked[0].weight.grad[i], grad, **state_tolerances(grad, rtol))
        th.testing.assert_close(
            stacked[2].bias.grad[i, 0], mlp[2].bias.grad, **state_tolerances(mlp[2].bias.grad, rtol)
        )


@pytest.mark.parametrize(
    ("per_seed_cls", "single_cls", "kwargs"),
    [(PerSeedAdam, th.optim.Adam, dict(lr=0.05)), (PerSeedRMSprop, th.optim.RMSprop, dict(lr=0.01, alpha=0.99))],
)
def test_per_seed_optimizer_equals_separate_optimizers_when_a_seed_sits_out(per_seed_cls, single_cls, kwargs):
    """A seed masked out of some steps neither moves nor ages (its bias correction) and afterwards goes on exactly
    as a separate optimiser that skipped those steps; the other seeds equal their separate optimisers throughout."""
    mlps = _mlps(3)
    stacked, links = stack_module(mlps)
    params = list(stacked.parameters())
    optimizer = per_seed_cls(params, 3, **kwargs)
    singles = [single_cls(m.parameters(), **kwargs) for m in mlps]
    gen = th.Generator().manual_seed(0)
    for step in range(5):
        x, target = th.randn(3, 6, 3, generator=gen), th.randn(3, 6, 2, generator=gen)
        sitting_out = {1} if step in (1, 2) else set()
        optimizer.zero_grad()
        ((stacked(x) - target) ** 2).mean(dim=(1, 2)).sum().backward()
        optimizer.step(None if not sitting_out else th.tensor([i not in sitting_out for i in range(3)]))
        for i, (mlp, single) in enumerate(zip(mlps, singles)):
            if i in sitting_out:
                continue
            single.zero_grad()
            ((mlp(x[i]) - target[i]) ** 2).mean().backward()
            single.step()
        # reassociated gradients (sums of at most 2 x 6 terms, fan-in 9) through step + 1 steps of the optimiser
        # (tests/tolerances.py's parameter_atol with Adam's or RMSprop's step bound)
        atol = parameter_atol(step + 1, kwargs["lr"], 12, optimizer_step_bound(singles[0]))
        for i, mlp in enumerate(mlps):
            th.testing.assert_close(stacked[0].weight[i].detach(), mlp[0].weight.detach().t(), atol=atol, rtol=0.0)
            th.testing.assert_close(stacked[2].bias[i, 0].detach(), mlp[2].bias.detach(), atol=atol, rtol=0.0)
    # seed i's optimiser state, read as a SeedBatch member receives it (each stacked moment sliced by the parameter's
    # ParamLink, the step count indexed by seed), is its separate optimiser's (one pass over the same gradients)
    for link in links:
        state = optimizer.state[link.stacked]
        assert state["step"].tolist() == [5.0, 3.0, 5.0]  # seed 1 stepped 3 of the 5 times
        for i, single in enumerate(singles):
            expected = single.state[link.member_tensors[i]]
            assert float(state["step"][i]) == float(expected["step"])
            for key in set(state) - {"step"}:
                th.testing.assert_close(
                    link.seed_slice(i, state[key]),
                    expected[key],
                    **state_tolerances(expected[key], reassociation_rtol(12)),
                )


class _Recorder:
    def __init__(self):
        self.metrics, self.params = [], []

    def log_metrics(self, metrics, step=None):
        self.metrics.append((dict(metrics), step))

    def log_hyperparams(self, params):
        self.params.append(dict(params))

    def save(self):
        pass

    def finalize(self, status):
        pass


def test_seed_routing_logger_routes_keys_and_hyperparameters():
    a, b, batch = _Recorder(), _Recorder(), _Recorder()
    router = SeedRoutingLogger([a, b], batch_logger=batch)  # type: ignore[list-item]
    router.log_metrics({"seed0/train/loss": 1.0, "seed1/train/loss": 2.0, "seed1/time/fps": 3, "fps": 9}, step=7)
    router.log_hyperparams({"seed0/seed": 10, "seed1/seed": 11, "seeds": "[10, 11]"})
    assert a.metrics == [({"train/loss": 1.0}, 7)]
    assert b.metrics == [({"train/loss": 2.0, "time/fps": 3}, 7)]
    assert batch.metrics == [({"fps": 9}, 7)]
    assert a.params == [{"seed": 10, "seeds": "[10, 11]"}] and b.params == [{"seed": 11, "seeds": "[10, 11]"}]
    with pytest.raises(ValueError, match="one logger per seed"):
        SeedRoutingLogger([])


@pytest.mark.parametrize("pack", [False, True], ids=["cpu-writes", "packed-transfers"])
def test_seed_replay_storage_grows_wraps_and_samples_each_seed_apart(monkeypatch, pack):
    import numpy as np
    from gymnasium import spaces

    from lit_sb3.buffers.seed_replay import SeedReplayBuffer

    monkeypatch.setattr(SeedReplayBuffer, "INITIAL_CAPACITY", 3)
    storage = SeedReplayBuffer(2, 10, spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (1,)), 1, th.device("cpu"))
    assert storage.capacity == 3 and not storage.pack_transfers
    storage.pack_transfers = pack  # the device path (one packed host->device copy per step), run on the CPU
    for t in range(25):  # seed 1 stores -t, seed 0 stores t
        value = np.array([t, -t], np.float32)
        storage.add(
            np.broadcast_to(value[:, None, None], (2, 1, 3)).copy(),
            np.broadcast_to(value[:, None, None] + 1, (2, 1, 3)).copy(),
            np.zeros((2, 1, 1), np.float32),
            value[:, None],
            np.zeros((2, 1), np.float32),
        )
        assert storage.capacity == min(10, max(3, 3 * 2 ** int(np.ceil(np.log2(max(t + 1, 3) / 3)))))
    assert storage.full and storage.pos == 5
    assert storage.rewards[0, :, 0].tolist() == [20, 21, 22, 23, 24, 15, 16, 17, 18, 19]
    generators = [th.Generator().manual_seed(0), th.Generator().manual_seed(0)]
    data = storage.sample(64, generators)
    assert data.observations.shape == (2, 64, 3) and data.rewards.shape == (2, 64, 1)
    assert (data.rewards[0] >= 15).all() and (data.rewards[1] <= -15).all()  # each seed samples its own slice
    th.testing.assert_close(data.next_observations[..., 0], data.observations[..., 0] + 1)
    assert th.equal(data.rewards[0], -data.rewards[1])  # each seed draws from its own stream (here: equal ones)
    th.manual_seed(1)
    expected = th.randint(0, 10, (64,))  # what a single-seed ReplayBuffer draws from the global generator
    data = storage.sample(64, [th.Generator().manual_seed(1), th.Generator().manual_seed(2)])
    assert th.equal(data.observations[0, :, 0], storage.observations[0, expected, 0, 0])
    assert not th.equal(data.rewards[0], -data.rewards[1])


class _Net(nn.Module):
    """A module of the kind a policy is: a Flatten extractor, an MLP and an ensemble head, concatenating on -1."""

    def __init__(self) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
        self.head = nn.Sequential(EnsembleLinear(2, 5, 3), nn.Tanh(), EnsembleLinear(2, 3, 1))

    def forward(self, x: th.Tensor, a: th.Tensor) -> th.Tensor:
        features = th.cat([self.body(self.flatten(x)), a], dim=-1)  # [..., B, 5]
        if features.dim() == 2:
            return self.head(features)  # [2, B, 1]
        k = features.shape[0]
        stacked = features.unsqueeze(1).expand(k, 2, *features.shape[1:]).reshape(k * 2, *features.shape[1:])
        return self.head(stacked).view(k, 2, -1, 1)


def test_stack_module_stacks_a_module_tree_seed_major_and_folds_flatten():
    nets = []
    for seed in range(3):
        th.manual_seed(seed)
        nets.append(_Net())
    stacked, links = stack_module(nets)
    assert type(stacked) is _Net and isinstance(stacked.flatten, SeedFolded)
    assert stacked.head[0].n_members == 6 and stacked.body[0].n_members == 3
    x, a = th.randn(3, 7, 2, 3), th.randn(3, 7, 1)
    y = stacked(x, a)
    for i, net in enumerate(nets):
        th.testing.assert_close(y[i], net(x[i], a[i]))  # bmm against mm: reassociation, default tolerance
    assert len(links) == 8  # weight and bias of 2 Linear + 2 EnsembleLinear
    with pytest.raises(NotImplementedError, match="GRU"):
        stack_module([nn.Sequential(nn.Linear(2, 2), nn.GRU(2, 2)) for _ in range(2)])
    with pytest.raises(ValueError, match="K >= 2"):
        stack_module(nets[:1])


class _NormNet(nn.Module):
    """A LayerNorm MLP body and a BatchRenorm head per member of a 2-critic ensemble (CrossQ's critic layout)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.Tanh(), BatchRenorm(8, warmup_steps=1))
        self.head = nn.Sequential(BatchRenorm(8, n_members=2, warmup_steps=1), EnsembleLinear(2, 8, 1))
        with th.no_grad():  # affine parameters away from their initial ones, so that a wrong seed shows
            for p in self.parameters():
                p.add_(th.randn_like(p) * 0.3)

    def forward(self, x: th.Tensor) -> th.Tensor:
        features = self.body(x)
        if features.dim() == 2:
            return self.head(features)
        k = features.shape[0]
        stacked = features.unsqueeze(1).expand(k, 2, *features.shape[1:]).reshape(k * 2, *features.shape[1:])
        return self.head(stacked).view(k, 2, -1, 1)


def test_stack_module_stacks_layer_norm_and_batch_renorm_per_seed():
    """LayerNorm and BatchRenorm (single and ensemble) keep each seed's affine parameters, running statistics and
    gradients: K stacked passes (BatchNorm warm-up, then renormalisation, then evaluation) equal K separate ones."""
    nets = []
    for seed in range(3):
        th.manual_seed(seed)
        nets.append(_NormNet())
    stacked, links = stack_module(nets)
    assert isinstance(stacked.body[1], SeedLayerNorm) and stacked.head[0].n_members == 6
    for step in range(3):  # step 0: warm-up (batch statistics); 1, 2: renormalised with the running statistics
        x = th.randn(3, 7, 3) * (step + 1)
        y = stacked(x)
        y.square().mean(dim=(1, 2, 3)).sum().backward()
        for i, net in enumerate(nets):
            yi = net(x[i])
            yi.square().mean().backward()
            th.testing.assert_close(y[i], yi)
    for link in links:
        for i in range(3):
            th.testing.assert_close(link.seed_slice(i), link.member_tensors[i].detach())
            if link.stacked.grad is not None:
                th.testing.assert_close(link.seed_slice(i, link.stacked.grad), link.member_tensors[i].grad)
    stacked.eval()
    x = th.randn(3, 5, 3)
    for i, net in enumerate(nets):
        th.testing.assert_close(stacked(x)[i], net.eval()(x[i]))  # running statistics per seed
    with th.no_grad():
        stacked.body[1].weight.add_(1.0)
        stacked.head[0].ra_mean.add_(1.0)
    for link in links:
        link.write_member(2)
    th.testing.assert_close(stacked(x)[2], nets[2](x[2]))


def test_stacked_batch_renorm_counts_warm_up_per_seed_and_skips_seeds_sitting_out():
    """Seeds on their own update schedules: a stacked BatchRenorm counts each seed's passes (``steps`` ``[K]``), one
    seed renormalises while another is still in its warm-up, and a seed outside ``active`` neither counts the pass
    nor moves its running statistics; every seed's output and gradients are its own layer's."""
    layers = []
    for seed in range(3):
        th.manual_seed(seed)
        layers.append(BatchRenorm(4, warmup_steps=2, n_members=2))
        with th.no_grad():
            layers[-1].scale.add_(th.randn_like(layers[-1].scale) * 0.3)
    stacked, links = stack_module(layers)
    assert stacked.steps.shape == (3,) and stacked.n_seeds == 3
    passes = [[0, 1, 2], [0, 1, 2], [0, 2], [0, 2], [0, 1, 2], [2]]  # the seeds taking each pass
    for step, taking in enumerate(passes):
        x = th.randn(6, 5, 4) * (step + 1)
        active = np.isin(np.arange(3), taking)
        stacked.active = active
        y = stacked(x.requires_grad_())
        y.square().sum().backward()
        for i in taking:
            xi = x[2 * i : 2 * i + 2].detach().requires_grad_()
            yi = layers[i](xi)
            yi.square().sum().backward()
            th.testing.assert_close(y[2 * i : 2 * i + 2], yi)
            th.testing.assert_close(x.grad[2 * i : 2 * i + 2], xi.grad)
        x.grad = None
        assert stacked.steps.tolist() == [int(layer.steps) for layer in layers] == list(stacked._steps)
        for link in links:
            for i in range(3):
                th.testing.assert_close(link.seed_slice(i), link.member_tensors[i].detach())
    assert list(stacked._steps) == [5, 3, 6]  # seed 0 renormalised while seed 1 was still in its warm-up


def test_stack_module_stacks_nature_cnn_per_seed():
    """NatureCNN (Conv2d, ReLU, Flatten, Linear) of K = 3 seeds on ``[K, batch, C, H, W]``: outputs, gradients and
    write-back equal each seed's own network."""
    space = gym.spaces.Box(0, 255, (3, 36, 36), dtype=np.uint8)
    nets = []
    for seed in range(3):
        th.manual_seed(seed)
        nets.append(NatureCNN(space, features_dim=16))
    stacked, links = stack_module(nets)
    assert isinstance(stacked.cnn[0], SeedConv2d) and len(links) == 8  # 3 Conv2d + 1 Linear, weight and bias
    x = th.rand(3, 5, 3, 36, 36)
    y = stacked(x)
    y.square().sum().backward()
    for i, net in enumerate(nets):
        yi = net(x[i])
        yi.square().sum().backward()
        th.testing.assert_close(y[i], yi)
    for link in links:
        for i in range(3):
            th.testing.assert_close(link.seed_slice(i, link.stacked.grad), link.member_tensors[i].grad)
    with th.no_grad():
        stacked.cnn[0].weight.mul_(1.5)
    for link in links:
        link.write_member(1)
    th.testing.assert_close(stacked(x)[1], nets[1](x[1]))


def test_per_seed_reductions_dispatch_to_the_single_seed_kernels_at_k1():
    x, t = th.randn(33, 3), th.randn(33, 3)  # K=1: the single-seed tensors, no seed dimension
    assert th.equal(seed_mean(x, 1), x.mean())
    assert th.equal(seed_mse(x, t, 1), th.nn.functional.mse_loss(x, t))
    assert th.equal(seed_smooth_l1(x, t, 1), th.nn.functional.smooth_l1_loss(x, t))
    assert masked_seed_sum(x.mean()) is not None and th.equal(masked_seed_sum(x.mean()), x.mean())
    xs, ts = th.randn(4, 9, 2), th.randn(4, 9, 2)
    th.testing.assert_close(seed_mean(xs, 4), th.stack([v.mean() for v in xs]))
    th.testing.assert_close(seed_mse(xs, ts, 4), th.stack([th.nn.functional.mse_loss(u, v) for u, v in zip(xs, ts)]))
    th.testing.assert_close(
        seed_smooth_l1(xs, ts, 4), th.stack([th.nn.functional.smooth_l1_loss(u, v) for u, v in zip(xs, ts)])
    )
    losses = th.tensor([1.0, float("nan"), 2.0], requires_grad=True)
    total = masked_seed_sum(losses, th.tensor([True, False, True]))
    total.backward()
    assert float(total.detach()) == 3.0 and losses.grad.tolist() == [1.0, 0.0, 1.0]  # the NaN seed reaches nothing


def test_clip_grad_norm_per_seed_is_torchs_at_k1():
    mlps = [_mlps(1)[0] for _ in range(2)]  # two copies of one network
    for mlp in mlps:
        (mlp(th.ones(4, 3)) * 10).sum().backward()
    norm = clip_grad_norm_per_seed(list(mlps[0].parameters()), 0.5, 1)
    expected = nn.utils.clip_grad_norm_(list(mlps[1].parameters()), 0.5)
    assert norm.shape == () and th.equal(norm, expected)
    assert all(th.equal(p.grad, q.grad) for p, q in zip(mlps[0].parameters(), mlps[1].parameters()))


def test_build_optimizer_is_torchs_unless_seeds_sit_out():
    params = [nn.Parameter(th.zeros(3, 4))]
    single = build_optimizer(th.optim.Adam, params, 1e-3, {"eps": 1e-5})
    assert type(single) is th.optim.Adam and single.defaults["fused"] and single.defaults["eps"] == 1e-5
    assert type(build_optimizer(th.optim.Adam, params, 1e-3, n_seeds=3)) is th.optim.Adam  # every seed steps
    per_seed = build_optimizer(th.optim.Adam, params, 1e-3, {"eps": 1e-5}, n_seeds=3, seeds_sit_out=True)
    assert isinstance(per_seed, PerSeedAdam) and per_seed.defaults["eps"] == 1e-5 and per_seed.n_seeds == 3
    rms = build_optimizer(th.optim.RMSprop, params, 1e-3, {"alpha": 0.9, "eps": 1e-5}, n_seeds=3, seeds_sit_out=True)
    assert isinstance(rms, PerSeedRMSprop) and rms.defaults["alpha"] == 0.9
    with pytest.raises(ValueError, match="Adam and RMSprop, got SGD"):
        build_optimizer(th.optim.SGD, params, 1e-3, n_seeds=2, seeds_sit_out=True)
    with pytest.raises(ValueError, match="amsgrad=False only"):
        build_optimizer(th.optim.Adam, params, 1e-3, {"amsgrad": True}, n_seeds=2, seeds_sit_out=True)


def test_every_model_has_the_seed_api_and_seedbatch_of_one_seed_is_the_single_model():
    from lit_sb3 import SAC, SeedBatch

    model = SeedBatch(SAC, seeds=[5], policy="MlpPolicy", learning_starts=7)
    assert type(model) is SAC and model.seed == 5 and model.learning_starts == 7
    assert model.n_seeds == 1 and model.seeds == [5] and model.member(0) is model and model.failed == {}
    with pytest.raises(IndexError, match=r"seed index must be in \[0, 1\)"):
        model.member(1)
    model.fail_seed(0, "diverged:\n non-finite loss")
    assert model.failed == {0: "diverged: non-finite loss"} and model.active_seeds == [] and model._stop_requested
    with pytest.raises(ValueError, match="distinct"):
        SeedBatch(SAC, seeds=[1, 1])
    with pytest.raises(TypeError, match="not seed="):
        SeedBatch(SAC, seeds=[1], seed=2)


def test_seed_replay_n_step_returns_equal_nstep_replay_buffer_while_growing(monkeypatch):
    """n-step windows (ended by terminations, timeouts and the newest transition) as NStepReplayBuffer computes
    them, also while the storage is still growing (windows that reach past its capacity are clamped, unused)."""
    import numpy as np
    from gymnasium import spaces

    from lit_sb3.buffers.nstep_replay import NStepReplayBuffer
    from lit_sb3.buffers.seed_replay import SeedReplayBuffer

    monkeypatch.setattr(SeedReplayBuffer, "INITIAL_CAPACITY", 4)
    obs_space, act_space = spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (1,))
    storage = SeedReplayBuffer(2, 20, obs_space, act_space, 1, th.device("cpu"), n_steps=3, gamma=0.9)
    single = NStepReplayBuffer(20, obs_space, act_space, device="cpu", n_steps=3, gamma=0.9)
    rng = np.random.default_rng(0)
    for t in range(8):
        obs, next_obs = rng.normal(size=(2, 1, 2)).astype(np.float32), rng.normal(size=(2, 1, 2)).astype(np.float32)
        action, reward = rng.uniform(-1, 1, (2, 1, 1)).astype(np.float32), rng.normal(size=(2, 1)).astype(np.float32)
        done, timeout = np.array([[float(t == 3)], [0.0]]), np.array([[float(t == 5)], [0.0]])
        storage.add(obs, next_obs, action, reward, done * (1 - timeout), timeout)
        infos = [{"TimeLimit.truncated": bool(timeout[0, 0])}]
        single.add(obs[0], next_obs[0], action[0], reward[0], np.maximum(done[0], timeout[0]), infos)
    assert storage.capacity == 8
    th.manual_seed(3)
    expected = single.sample(64)
    data = storage.sample(64, [th.Generator().manual_seed(3), th.Generator().manual_seed(4)])
    for name in ("observations", "actions", "next_observations", "dones", "discounts"):  # copies, gamma ** k in float64
        th.testing.assert_close(getattr(data, name)[0], getattr(expected, name), msg=name, rtol=0.0, atol=0.0)
    # a 3-term float32 sum over another layout (tests/tolerances.py: reassociation_rtol of the window)
    th.testing.assert_close(
        data.rewards[0], expected.rewards, **state_tolerances(expected.rewards, reassociation_rtol(3))
    )
