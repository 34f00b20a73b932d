"""The implementation dimension of ``bench report`` on real runs: a small ``bench run`` grid (PPO and A2C on
CartPole-v1, 10 seeds each, seed-batched) in a sqlite store, seeds 5..9 of each algorithm tagged ``impl=sb3``
through MlflowClient (renumbered 0..4, one seed per process) as the RL Zoo importer tags its runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from lit_sb3.zoo.cli import main
from tests.mlflow_store import client, copy_store, runs

mlflow = pytest.importorskip("mlflow")

ZOO = {
    "ppo.yml": "CartPole-v1:\n  policy: MlpPolicy\n  n_envs: 1\n  n_steps: 64\n",
    "a2c.yml": "CartPole-v1:\n  policy: MlpPolicy\n  n_envs: 1\n  n_steps: 16\n",
}


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("impl")
    zoo = folder / "zoo"
    zoo.mkdir()
    for name, text in ZOO.items():
        (zoo / name).write_text(text)
    uri = copy_store(folder, mlflow_template)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIT_SB3_ZOO_CONFIGS", str(zoo))
        mp.chdir(folder)
        argv = ["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1", "--seeds", "10", "--n-timesteps", "256",
                "--eval-freq", "128", "--eval-episodes", "2", "--seed-batch", "5", "--jobs", "1",
                "--tracking-uri", uri, "--experiment", "impl"]  # fmt: skip
        assert main(argv) == 0
    c = client(uri)
    assert {r.data.tags["impl"] for r in runs(uri, "impl", must_exist=True)} == {"lit_sb3"}  # bench run's own tag
    for run in runs(uri, "impl", must_exist=True):
        seed = int(run.data.tags["lit_sb3.seed"])
        if seed >= 5:  # the other implementation's runs: seeds 0..4, each trained alone
            c.set_tag(run.info.run_id, "impl", "sb3")
            c.set_tag(run.info.run_id, "lit_sb3.seed", str(seed - 5))
            c.set_tag(run.info.run_id, "lit_sb3.seed_batch", "1")
    return uri, folder


def test_report_compares_the_implementations(grid: tuple[str, Path]) -> None:
    uri, folder = grid
    out = folder / "report"
    assert main(["report", "--experiment", "impl", "--tracking-uri", uri, "--out", str(out), "--reps", "1000"]) == 0
    md = (out / "report.md").read_text()
    agg = json.loads((out / "aggregates.json").read_text())
    assert "## Implementations" in md and "### lit_sb3 against sb3" in md
    assert md.index("## Implementations") < md.index("## Budget and evaluation protocol")
    # the algorithm comparisons rest on lit_sb3's runs only
    assert agg["runs_per_task"] == {"a2c": [5], "ppo": [5]} and agg["implementations"] == ["lit_sb3", "sb3"]
    impl = agg["implementation_comparison"]
    assert impl["reference"] == "lit_sb3"
    (side,) = impl["against"]
    assert (
        side["impl"] == "sb3" and side["interval_name"] == "97.5 % confidence sequence, simultaneous over the 2 cells"
    )
    cells = {(c["algo"], c["env"]): c for c in side["cells"]}
    assert set(cells) == {("a2c", "CartPole-v1"), ("ppo", "CartPole-v1")}

    # each side's time per cell: the sum over its runs of the process's time / K (5 seeds per process here, 1 there)
    records = [r for r in runs(uri, "impl") if r.info.status == "FINISHED"]
    for (algo, env), c in cells.items():
        assert c["runs"] == {"lit_sb3": 5, "sb3": 5}
        for name, k in (("lit_sb3", 5), ("sb3", 1)):
            mine = [r for r in records if r.data.tags["lit_sb3.algo"] == algo and r.data.tags["impl"] == name]
            assert len(mine) == 5
            for metric, key in (("time/wall_seconds", "wall_seconds"), ("time/cpu_seconds", "cpu_seconds")):
                expected = sum(r.data.metrics[metric] / k for r in mine)
                assert c[key][name] == pytest.approx(expected) and expected > 0
            scores = np.array([r.data.metrics["final/mean_reward"] for r in mine])
            iqm = c["iqm"][name]
            assert iqm["low"] <= iqm["point"] <= iqm["high"]
            assert iqm["point"] == pytest.approx(np.mean(np.sort(scores)[1:4]))  # IQM of 5 = mean of the middle 3
        assert 0.0 <= c["poi"]["low"] <= c["poi"]["point"] <= c["poi"]["high"] <= 1.0
        assert c["kind"] in ("better", "worse", "equivalent", "open") and c["p_value"] is not None
        row = next(x for x in md.splitlines() if x.startswith(f"| {algo} | {env} | 5 + 5 |"))
        assert f"{c['poi']['point']:.3f} [{c['poi']['low']:.3f}, {c['poi']['high']:.3f}]" in row
    # the whole benchmark per side, and the ratio
    total = side["total"]
    for name in ("lit_sb3", "sb3"):
        assert total[name]["wall"] == pytest.approx(sum(c["wall_seconds"][name] for c in cells.values()))
    assert side["ratio"]["wall"] == pytest.approx(total["sb3"]["wall"] / total["lit_sb3"]["wall"])
    assert f"sb3 / lit_sb3 = {side['ratio']['wall']:.3f} (wall)" in md
    assert "Holm over the 2 cells" in md and "'equivalent' when the interval lies inside 0.5 ± 0.1" in md
    # figures: the per-seed scores of both sides, and overlaid learning curves per cell
    for name in ("impl_sb3_final_scores.png", "impl_sb3_ppo_CartPole-v1.png", "impl_sb3_a2c_CartPole-v1.png"):
        assert (out / "figures" / name).stat().st_size > 1000, name
        assert f"](figures/{name})" in md
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert sorted(r["impl"] for r in rows) == ["lit_sb3"] * 10 + ["sb3"] * 10
    (report,) = runs(uri, "impl", "report")
    assert "report/impl/lit_sb3_vs_sb3/ppo/CartPole-v1/poi" in report.data.metrics
    assert report.data.metrics["report/impl/lit_sb3_vs_sb3/ppo/CartPole-v1/poi_high"] == pytest.approx(
        cells[("ppo", "CartPole-v1")]["poi"]["high"]
    )


def test_one_implementation_has_no_implementation_section(grid: tuple[str, Path]) -> None:
    uri, folder = grid
    out = folder / "algos"
    assert main(["report", "--experiment", "impl", "--tracking-uri", uri, "--out", str(out), "--reps", "500",
                 "--algos", "ppo"]) == 0  # fmt: skip
    agg = json.loads((out / "aggregates.json").read_text())
    assert agg["implementation_comparison"] is not None  # ppo's runs still come from two implementations
    assert [c["algo"] for c in agg["implementation_comparison"]["against"][0]["cells"]] == ["ppo"]


def test_a_cell_short_of_runs_says_how_many_each_side_has(grid: tuple[str, Path], tmp_path: Path) -> None:
    """A cell whose SB3 side is still running (the classic benchmark's TQC: 10 + 1 runs) once read 'no verdict: 0
    runs per side'; it names each side's count, and the other cells keep their verdicts."""
    import shutil

    uri, folder = grid
    db = tmp_path / "mlflow.db"
    shutil.copy(uri.removeprefix("sqlite:///"), db)
    copy = f"sqlite:///{db}"
    c = client(copy)
    sb3_a2c = [r for r in runs(copy, "impl") if r.data.tags["impl"] == "sb3" and r.data.tags["lit_sb3.algo"] == "a2c"]
    for run in sb3_a2c[1:]:
        c.delete_run(run.info.run_id)
    out = tmp_path / "report"
    assert main(["report", "--experiment", "impl", "--tracking-uri", copy, "--out", str(out), "--reps", "500"]) == 0
    agg = json.loads((out / "aggregates.json").read_text())
    cells = {cell["algo"]: cell for cell in agg["implementation_comparison"]["against"][0]["cells"]}
    assert cells["a2c"]["runs"] == {"lit_sb3": 5, "sb3": 1} and cells["a2c"]["kind"] == "too_few_runs"
    assert cells["a2c"]["verdict"] == "no verdict: 5 run(s) of lit_sb3 and 1 of sb3, the rule needs >= 5 per side"
    assert cells["ppo"]["kind"] in ("better", "worse", "equivalent", "open")
    md = (out / "report.md").read_text()
    assert cells["a2c"]["verdict"] in md
    # the whole benchmark sums only cells with the same work on both sides (here: ppo's)
    side = agg["implementation_comparison"]["against"][0]
    assert side["left_out_of_total"] == ["a2c on CartPole-v1 (5 + 1 runs)"]
    for name in ("lit_sb3", "sb3"):
        assert side["total"][name]["wall"] == pytest.approx(cells["ppo"]["wall_seconds"][name])
    assert "The whole benchmark (1 cell; left out, not the same number of runs a side: a2c on CartPole-v1" in md
