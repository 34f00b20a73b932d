"""Action noise: statistics, reset, vectorisation, errors, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch as th

from lit_sb3.core.noise import (
    ActionNoise,
    NormalActionNoise,
    OrnsteinUhlenbeckActionNoise,
    VectorizedActionNoise,
    noise_from_dict,
    noise_to_dict,
)

th.set_num_threads(1)


def test_normal_noise_statistics_and_dtype() -> None:
    np.random.seed(0)
    mean, sigma = np.array([0.5, -1.0]), np.array([0.1, 2.0])
    noise = NormalActionNoise(mean, sigma)
    draws = np.stack([noise() for _ in range(5_000)])
    assert draws.dtype == np.float32 and draws.shape == (5_000, 2)
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.1)
    np.testing.assert_allclose(draws.std(0), sigma, rtol=0.05)
    assert NormalActionNoise(mean, sigma, dtype=np.float64)().dtype == np.float64
    noise.reset()  # no-op, must not fail


def test_ou_noise_update_rule_and_reset() -> None:
    mean, sigma = np.zeros(3), 0.3 * np.ones(3)
    init = np.array([1.0, -1.0, 0.5])
    noise = OrnsteinUhlenbeckActionNoise(mean, sigma, theta=0.15, dt=1e-2, initial_noise=init)
    np.random.seed(1)
    out = noise()
    np.random.seed(1)
    expected = init + 0.15 * (mean - init) * 1e-2 + sigma * np.sqrt(1e-2) * np.random.normal(size=3)
    np.testing.assert_allclose(out, expected.astype(np.float32), rtol=1e-6)
    assert out.dtype == np.float32
    for _ in range(50):
        noise()
    assert not np.allclose(noise.noise_prev, init)
    noise.reset()
    np.testing.assert_array_equal(noise.noise_prev, init)
    # successive draws are strongly correlated (Brownian-like)
    noise = OrnsteinUhlenbeckActionNoise(np.zeros(1), np.ones(1))
    xs = np.array([noise()[0] for _ in range(2000)])
    assert np.corrcoef(xs[:-1], xs[1:])[0, 1] > 0.9


def test_vectorized_noise() -> None:
    base = NormalActionNoise(np.zeros(2), np.ones(2))
    vec = VectorizedActionNoise(base, n_envs=3)
    out = vec()
    assert out.shape == (3, 2)
    assert len({row.tobytes() for row in out}) == 3  # independent draws
    assert all(n is not base for n in vec.noises)

    ou = OrnsteinUhlenbeckActionNoise(np.zeros(2), np.ones(2))
    vec = VectorizedActionNoise(ou, n_envs=3)
    for _ in range(5):
        vec()
    vec.reset([1])
    np.testing.assert_array_equal(vec.noises[1].noise_prev, np.zeros(2))
    assert not np.allclose(vec.noises[0].noise_prev, 0)
    vec.reset()
    assert all(np.allclose(n.noise_prev, 0) for n in vec.noises)


@pytest.mark.parametrize("n_envs", [0, -1, 1.5, "2", None, True])
def test_vectorized_noise_bad_n_envs(n_envs) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        VectorizedActionNoise(NormalActionNoise(np.zeros(1), np.ones(1)), n_envs)


def test_vectorized_noise_bad_types() -> None:
    with pytest.raises(ValueError, match="not None"):
        VectorizedActionNoise(None, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ActionNoise"):
        VectorizedActionNoise(np.zeros(2), 2)  # type: ignore[arg-type]
    vec = VectorizedActionNoise(NormalActionNoise(np.zeros(1), np.ones(1)), 2)
    with pytest.raises(ValueError, match="Expected a list of 2"):
        vec.noises = [NormalActionNoise(np.zeros(1), np.ones(1))]
    with pytest.raises(ValueError, match="indices \\[1\\]"):
        vec.noises = [NormalActionNoise(np.zeros(1), np.ones(1)), OrnsteinUhlenbeckActionNoise(np.zeros(1), np.ones(1))]
    with pytest.raises(IndexError, match="out of range"):
        vec.reset([5])


def test_bad_noise_parameters() -> None:
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        NormalActionNoise(np.zeros(2), -np.ones(2))
    with pytest.raises(ValueError, match="broadcastable"):
        NormalActionNoise(np.zeros(2), np.ones(3))
    with pytest.raises(TypeError, match="mean must be"):
        NormalActionNoise("abc", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dt must be > 0"):
        OrnsteinUhlenbeckActionNoise(np.zeros(2), np.ones(2), dt=0)


def test_noise_dict_round_trip() -> None:
    normal = NormalActionNoise(np.array([0.0, 1.0]), np.array([0.1, 0.2]), dtype=np.float64)
    ou = OrnsteinUhlenbeckActionNoise(np.zeros(2), 0.5 * np.ones(2), theta=0.2, dt=0.05, initial_noise=np.ones(2))
    for _ in range(3):
        ou()
    vec = VectorizedActionNoise(OrnsteinUhlenbeckActionNoise(np.zeros(2), np.ones(2)), 2)
    vec()
    for noise in (normal, ou, vec):
        data = json.loads(json.dumps(noise_to_dict(noise)))
        restored = noise_from_dict(data)
        assert type(restored) is type(noise)
        assert noise_to_dict(restored) == noise_to_dict(noise)
    restored_ou = noise_from_dict(noise_to_dict(ou))
    np.testing.assert_array_equal(restored_ou.noise_prev, ou.noise_prev)  # type: ignore[union-attr]
    np.random.seed(3)
    a = ou()
    np.random.seed(3)
    np.testing.assert_array_equal(restored_ou(), a)  # type: ignore[misc]
    restored_vec = noise_from_dict(noise_to_dict(vec))
    for n_old, n_new in zip(vec.noises, restored_vec.noises):  # type: ignore[union-attr]
        np.testing.assert_array_equal(n_old.noise_prev, n_new.noise_prev)
    assert noise_to_dict(None) is None and noise_from_dict(None) is None


def test_noise_dict_errors() -> None:
    class Custom(ActionNoise):
        def __call__(self) -> np.ndarray:
            return np.zeros(1)

    with pytest.raises(TypeError, match="supported"):
        noise_to_dict(Custom())
    with pytest.raises(ValueError, match="Unknown action noise type"):
        noise_from_dict({"type": "Nope"})


def test_noise_with_its_own_generator_draws_what_the_global_stream_draws() -> None:
    """``rng`` (a K-seed model gives seed i's noise seed i's numpy stream): the draws of a noise seeded with
    ``RandomState(s)`` are those of the default noise after ``np.random.seed(s)``, and the global stream is not
    touched; a VectorizedActionNoise gives its generator to every env's noise, also after a reset of the list."""
    mean, sigma = np.zeros(2), np.array([0.2, 0.7])
    for make in (lambda: NormalActionNoise(mean, sigma), lambda: OrnsteinUhlenbeckActionNoise(mean, sigma, dt=0.1)):
        np.random.seed(4)
        expected = [make() for _ in range(1)][0]
        reference = np.stack([expected() for _ in range(5)])
        np.random.seed(123)
        before = np.random.get_state()[1].copy()
        noise = make()
        noise.rng = np.random.RandomState(4)
        np.testing.assert_array_equal(np.stack([noise() for _ in range(5)]), reference)
        np.testing.assert_array_equal(np.random.get_state()[1], before)
    rng = np.random.RandomState(9)
    vec = VectorizedActionNoise(NormalActionNoise(mean, sigma), n_envs=3)
    vec.rng = rng
    assert all(n.rng is rng for n in vec.noises)
    vec.noises = [NormalActionNoise(mean, sigma) for _ in range(3)]
    assert all(n.rng is rng for n in vec.noises)
    np.random.seed(9)
    reference = np.stack([np.random.normal(mean, sigma) for _ in range(3)]).astype(np.float32)
    np.testing.assert_array_equal(vec(), reference)
    base = NormalActionNoise(mean, sigma)
    base.rng = rng
    assert all(n.rng is rng for n in VectorizedActionNoise(base, n_envs=2).noises)  # not deep copies of it
