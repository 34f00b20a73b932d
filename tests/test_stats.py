"""lit_sb3.zoo.stats: known answers, and agreement with rliable 1.2 on the same data."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from lit_sb3.zoo import stats


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"a": rng.beta(4, 3, size=(10, 6)), "b": rng.beta(3, 3, size=(8, 6))}  # unequal runs per algo


def _rliable_library():  # noqa: ANN202
    try:
        from rliable import library
    except Exception as exc:  # noqa: BLE001 - arch/pandas incompatibility
        pytest.skip(f"rliable.library does not import here: {exc}")
    return library


def test_iqm_is_trim_mean() -> None:
    x = np.random.default_rng(0).normal(size=(7, 5))
    assert stats.iqm(x) == pytest.approx(scipy.stats.trim_mean(x, 0.25, axis=None))
    assert stats.aggregate_point(x)["iqm"] == pytest.approx(scipy.stats.trim_mean(x, 0.25, axis=None))


def test_point_estimates_match_rliable_metrics(data: dict[str, np.ndarray]) -> None:
    from rliable import metrics

    x = data["a"]
    p = stats.aggregate_point(x)
    assert p["iqm"] == pytest.approx(metrics.aggregate_iqm(x))
    assert p["median"] == pytest.approx(metrics.aggregate_median(x))
    assert p["mean"] == pytest.approx(metrics.aggregate_mean(x))
    assert p["optimality_gap"] == pytest.approx(metrics.aggregate_optimality_gap(x))
    assert stats.probability_of_improvement(data["a"], data["b"]) == pytest.approx(
        metrics.probability_of_improvement(data["a"], data["b"])
    )


def test_constant_matrix_has_degenerate_ci() -> None:
    res = stats.aggregate_intervals({"c": np.full((5, 3), 0.7)}, reps=500)["c"]
    for metric in ("iqm", "median", "mean"):
        iv = res[metric]
        assert iv.point == pytest.approx(0.7) and iv.low == pytest.approx(0.7) and iv.high == pytest.approx(0.7)
        assert iv.high - iv.low < 1e-12
    assert res["optimality_gap"].point == pytest.approx(0.3)


def test_probability_of_improvement_known_answers() -> None:
    x = np.arange(10.0).reshape(5, 2) + 100.0
    y = np.arange(10.0).reshape(5, 2)
    assert stats.probability_of_improvement(x, y) == 1.0
    assert stats.probability_of_improvement(y, x) == 0.0
    assert stats.probability_of_improvement(y, y) == 0.5
    iv = stats.improvement_intervals({"x": x, "y": y}, reps=300)[("x", "y")]
    assert iv.low == iv.point == iv.high == 1.0
    same = stats.improvement_intervals({"y": y, "z": y.copy()}, reps=300)[("y", "z")]
    assert same.point == 0.5 and same.low < 0.5 < same.high


def test_seeded_and_ragged(data: dict[str, np.ndarray]) -> None:
    a = stats.aggregate_intervals(data, reps=1000, seed=7)
    b = stats.aggregate_intervals(data, reps=1000, seed=7)
    assert a == b
    ragged = [data["a"][:, 0], data["a"][:4, 1], data["a"][:7, 2]]  # tasks with 10, 4, 7 runs
    res = stats.aggregate_intervals({"r": ragged}, reps=1000)["r"]
    pooled = np.concatenate(ragged)
    assert res["iqm"].point == pytest.approx(scipy.stats.trim_mean(pooled, 0.25))
    assert res["mean"].point == pytest.approx(np.mean([t.mean() for t in ragged]))
    for iv in res.values():
        assert iv.low <= iv.point <= iv.high


def test_aggregate_cis_match_rliable(data: dict[str, np.ndarray]) -> None:
    library = _rliable_library()
    from rliable import metrics

    def func(x: np.ndarray) -> np.ndarray:
        return np.array(
            [
                metrics.aggregate_median(x),
                metrics.aggregate_iqm(x),
                metrics.aggregate_mean(x),
                metrics.aggregate_optimality_gap(x),
            ]
        )

    reps = 5_000  # Monte-Carlo SE of a CI bound here is ~0.002; rliable's Python loop costs ~1 ms a rep
    np.random.seed(0)  # rliable draws from the global generator
    points, cis = library.get_interval_estimates({"a": data["a"]}, func, reps=reps)
    ours = stats.aggregate_intervals({"a": data["a"]}, reps=reps, seed=0)["a"]
    for i, metric in enumerate(stats.METRICS):
        assert ours[metric].point == pytest.approx(points["a"][i])
        assert abs(ours[metric].low - cis["a"][0, i]) < 0.01, metric
        assert abs(ours[metric].high - cis["a"][1, i]) < 0.01, metric


def test_profiles_match_rliable(data: dict[str, np.ndarray]) -> None:
    library = _rliable_library()
    taus = np.linspace(0, 1, 21)
    np.random.seed(1)
    profiles, cis = library.create_performance_profile({"b": data["b"]}, taus, reps=2000)
    ours = stats.performance_profiles({"b": data["b"]}, taus, reps=2000)["b"]
    np.testing.assert_allclose(ours.point, profiles["b"])
    np.testing.assert_allclose(ours.point, stats.score_distribution(data["b"], taus))
    step = 1 / 48 + 1e-9  # fractions live on a lattice of 1/48: a bound may sit one step off by Monte-Carlo noise
    for mine, theirs in ((ours.low, cis["b"][0]), (ours.high, cis["b"][1])):
        assert np.abs(mine - theirs).max() <= step and np.abs(mine - theirs).mean() < 0.005


def test_improvement_cis_match_rliable(data: dict[str, np.ndarray]) -> None:
    library = _rliable_library()
    from rliable import metrics

    def fast_poi(x: np.ndarray, y: np.ndarray) -> float:
        # rliable's definition with numpy instead of scipy's mannwhitneyu (checked equal below): 5 ms -> 0.1 ms
        return float(
            np.mean(
                [
                    ((x[:, t, None] > y[None, :, t]) + 0.5 * (x[:, t, None] == y[None, :, t])).mean()
                    for t in range(x.shape[1])
                ]
            )
        )

    assert fast_poi(data["a"], data["b"]) == pytest.approx(metrics.probability_of_improvement(data["a"], data["b"]))
    reps = 5000
    np.random.seed(2)
    points, cis = library.get_interval_estimates({"a,b": [data["a"], data["b"]]}, fast_poi, reps=reps)
    ours = stats.improvement_intervals(data, reps=reps)[("a", "b")]
    assert ours.point == pytest.approx(points["a,b"])
    assert abs(ours.low - cis["a,b"][0]) < 0.01 and abs(ours.high - cis["a,b"][1]) < 0.01


def test_iqm_curves(data: dict[str, np.ndarray]) -> None:
    rng = np.random.default_rng(1)
    curves = rng.random((6, 3, 5))
    res = stats.iqm_curves({"a": curves}, steps=np.arange(5) * 100, reps=3000)["a"]
    for e in range(5):
        assert res.point[e] == pytest.approx(scipy.stats.trim_mean(curves[..., e], 0.25, axis=None))
        single = stats.aggregate_intervals({"a": curves[..., e]}, reps=3000, seed=5)["a"]["iqm"]
        assert abs(res.low[e] - single.low) < 0.02 and abs(res.high[e] - single.high) < 0.02
