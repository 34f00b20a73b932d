"""Action distributions against torch.distributions and direct formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from lit_sb3.policies.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
    SquashedDiagGaussianDistribution,
    StateDependentNoiseDistribution,
    TanhBijector,
    kl_divergence,
    make_proba_distribution,
    sum_independent_dims,
)

th.set_num_threads(1)
BATCH = 16


@pytest.fixture(autouse=True)
def _seed() -> None:
    th.manual_seed(0)


def test_sum_independent_dims() -> None:
    x = th.randn(BATCH, 3)
    assert th.allclose(sum_independent_dims(x), x.sum(1))
    assert sum_independent_dims(th.randn(3)).shape == ()


def test_diag_gaussian_matches_torch() -> None:
    mean, log_std = th.randn(BATCH, 3), th.randn(3)
    dist = DiagGaussianDistribution(3).proba_distribution(mean, log_std)
    ref = th.distributions.Normal(mean, log_std.exp().expand_as(mean))
    actions = dist.sample()
    assert actions.shape == (BATCH, 3)
    assert th.allclose(dist.log_prob(actions), ref.log_prob(actions).sum(1), atol=1e-5)
    assert th.allclose(dist.entropy(), ref.entropy().sum(1), atol=1e-5)
    assert th.equal(dist.mode(), mean)
    assert th.allclose(kl_divergence(dist, dist), th.zeros(BATCH, 3))


def test_diag_gaussian_sample_is_reparametrised() -> None:
    log_std = th.zeros(2, requires_grad=True)
    dist = DiagGaussianDistribution(2).proba_distribution(th.zeros(BATCH, 2), log_std)
    dist.sample().sum().backward()
    assert log_std.grad is not None


def test_squashed_gaussian_log_prob_direct_formula() -> None:
    mean, log_std = th.randn(BATCH, 2), th.randn(BATCH, 2).clamp(-2, 1)
    dist = SquashedDiagGaussianDistribution(2)
    actions, log_prob = dist.log_prob_from_params(mean, log_std)
    assert actions.abs().max() <= 1.0 and log_prob.shape == (BATCH,)
    u = dist.gaussian_actions
    assert u is not None
    normal = th.distributions.Normal(mean, log_std.exp())
    expected = normal.log_prob(u).sum(1) - th.log(1 - th.tanh(u) ** 2 + 1e-6).sum(1)
    assert th.allclose(log_prob, expected, atol=1e-4)
    # without the pre-tanh values, the inverse of tanh is used
    assert th.allclose(dist.log_prob(actions), expected, atol=1e-2)
    assert dist.entropy() is None
    assert th.allclose(dist.mode(), th.tanh(mean))


def test_tanh_bijector_inverse() -> None:
    x = th.linspace(-3, 3, 11)
    assert th.allclose(TanhBijector.inverse(th.tanh(x)), x, atol=1e-4)
    assert th.isfinite(TanhBijector.inverse(th.tensor([-1.0, 1.0]))).all()


def test_categorical_matches_torch() -> None:
    logits = th.randn(BATCH, 5)
    dist = CategoricalDistribution(5).proba_distribution(logits)
    ref = th.distributions.Categorical(logits=logits)
    actions = dist.sample()
    assert actions.shape == (BATCH,) and actions.dtype == th.int64
    assert th.allclose(dist.log_prob(actions), ref.log_prob(actions), atol=1e-6)
    assert th.allclose(dist.log_prob(actions.float().unsqueeze(1)), ref.log_prob(actions), atol=1e-6)
    assert th.allclose(dist.entropy(), ref.entropy(), atol=1e-6)
    assert th.equal(dist.mode(), logits.argmax(1))


def test_categorical_sampling_frequencies() -> None:
    probs = th.tensor([[0.7, 0.2, 0.1]])
    dist = CategoricalDistribution(3).proba_distribution(probs.log().expand(20_000, 3))
    freq = th.bincount(dist.sample(), minlength=3).float() / 20_000
    assert th.allclose(freq, probs[0], atol=0.02)


@pytest.mark.parametrize("nvec", [[3, 3, 3], [2, 4, 3]])
def test_multicategorical_matches_torch(nvec: list[int]) -> None:
    logits = th.randn(BATCH, sum(nvec))
    dist = MultiCategoricalDistribution(nvec).proba_distribution(logits)
    refs = [th.distributions.Categorical(logits=s) for s in th.split(logits, nvec, dim=1)]
    actions = dist.sample()
    assert actions.shape == (BATCH, len(nvec))
    for i, n in enumerate(nvec):
        assert actions[:, i].max() < n
    expected_lp = th.stack([r.log_prob(actions[:, i]) for i, r in enumerate(refs)], 1).sum(1)
    assert th.allclose(dist.log_prob(actions), expected_lp, atol=1e-5)
    assert th.allclose(dist.entropy(), th.stack([r.entropy() for r in refs], 1).sum(1), atol=1e-5)
    assert th.equal(dist.mode(), th.stack([s.argmax(1) for s in th.split(logits, nvec, dim=1)], 1))
    assert kl_divergence(dist, dist).abs().max() < 1e-6


def test_bernoulli_matches_torch() -> None:
    logits = th.randn(BATCH, 4)
    dist = BernoulliDistribution(4).proba_distribution(logits)
    ref = th.distributions.Bernoulli(logits=logits)
    actions = dist.sample()
    assert actions.shape == (BATCH, 4)
    assert th.allclose(dist.log_prob(actions), ref.log_prob(actions).sum(1), atol=1e-5)
    assert th.allclose(dist.entropy(), ref.entropy().sum(1), atol=1e-5)
    assert th.equal(dist.mode(), th.round(th.sigmoid(logits)))


@pytest.mark.parametrize("full_std", [True, False])
@pytest.mark.parametrize("squash", [False, True])
def test_gsde(full_std: bool, squash: bool) -> None:
    latent_dim, action_dim = 8, 2
    dist = StateDependentNoiseDistribution(action_dim, full_std=full_std, squash_output=squash, use_expln=not full_std)
    mean_net, log_std = dist.proba_distribution_net(latent_dim, log_std_init=-1.0)
    assert log_std.shape == ((latent_dim, action_dim) if full_std else (latent_dim, 1))
    assert dist.get_std(log_std).shape == (latent_dim, action_dim)
    dist.sample_weights(log_std, batch_size=4)
    assert dist.exploration_matrices is not None and dist.exploration_matrices.shape == (4, latent_dim, action_dim)
    latent = th.randn(4, latent_dim)
    mean = mean_net(latent)
    actions, log_prob = dist.log_prob_from_params(mean, log_std, latent)
    assert actions.shape == (4, action_dim) and log_prob.shape == (4,)
    # noise with per-env matrices: latent_i @ W_i
    expected = mean + th.bmm(latent.unsqueeze(1), dist.exploration_matrices).squeeze(1)
    assert th.allclose(actions, th.tanh(expected) if squash else expected, atol=1e-5)
    std = th.sqrt(latent.pow(2) @ dist.get_std(log_std).pow(2) + 1e-6)
    gaussian = TanhBijector.inverse(actions) if squash else actions
    ref = th.distributions.Normal(mean, std).log_prob(gaussian).sum(1)
    if squash:
        ref = ref - th.log(1 - th.tanh(gaussian) ** 2 + 1e-6).sum(1)
        assert dist.entropy() is None
    else:
        assert th.allclose(dist.entropy(), th.distributions.Normal(mean, std).entropy().sum(1), atol=1e-5)
    assert th.allclose(log_prob, ref, atol=1e-3)
    # same matrix for a batch that does not match the number of envs; fixed until resampled
    a1 = dist.actions_from_params(mean[:3], log_std, latent[:3])
    a2 = dist.actions_from_params(mean[:3], log_std, latent[:3])
    assert th.equal(a1, a2)
    dist.sample_weights(log_std, batch_size=4)
    assert not th.equal(a1, dist.actions_from_params(mean[:3], log_std, latent[:3]))


@pytest.mark.parametrize(
    ("space", "cls", "shape"),
    [
        (spaces.Box(-1, 1, (3,)), DiagGaussianDistribution, (BATCH, 3)),
        (spaces.Discrete(4), CategoricalDistribution, (BATCH,)),
        (spaces.MultiDiscrete([2, 3]), MultiCategoricalDistribution, (BATCH, 2)),
        (spaces.MultiBinary(5), BernoulliDistribution, (BATCH, 5)),
    ],
)
def test_make_proba_distribution(space: spaces.Space, cls: type, shape: tuple[int, ...]) -> None:
    dist = make_proba_distribution(space)
    assert isinstance(dist, cls)
    layer = dist.proba_distribution_net(7)
    net = layer[0] if isinstance(layer, tuple) else layer
    params = (net(th.randn(BATCH, 7)), layer[1]) if isinstance(layer, tuple) else (net(th.randn(BATCH, 7)),)
    actions = dist.actions_from_params(*params)
    assert actions.shape == shape
    assert dist.log_prob(actions).shape == (BATCH,)
    assert dist.entropy().shape == (BATCH,)
    assert dist.get_actions(deterministic=True).shape == shape


def test_make_proba_distribution_sde_and_errors() -> None:
    assert isinstance(make_proba_distribution(spaces.Box(-1, 1, (2,)), use_sde=True), StateDependentNoiseDistribution)
    with pytest.raises(
        NotImplementedError, match=r"Tuple.*supported action spaces: Box, Discrete, MultiDiscrete, MultiBinary"
    ):
        make_proba_distribution(spaces.Tuple([spaces.Discrete(2)]))
    with pytest.raises(NotImplementedError, match="MultiBinary"):
        make_proba_distribution(spaces.MultiBinary([2, 2]))


def test_diag_gaussian_log_prob_value() -> None:
    dist = DiagGaussianDistribution(1).proba_distribution(th.zeros(1, 1), th.zeros(1))
    assert math.isclose(dist.log_prob(th.zeros(1, 1)).item(), -0.5 * math.log(2 * math.pi), rel_tol=1e-6)
    assert np.isclose(dist.entropy().item(), 0.5 + 0.5 * math.log(2 * math.pi))
