"""End-to-end `bench report` on a real MLflow sqlite store written per the tracking contract."""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from lit_sb3.zoo.cli import main

mlflow = pytest.importorskip("mlflow")

ALGOS = {"sac": 0.9, "td3": 0.6, "ppo": 0.3}
ENVS = {"Pendulum-v1": (-1233.66, -152.0), "MountainCarContinuous-v0": (-33.252, 94.7)}
EVAL_STEPS = [1000, 2000, 3000, 4000]


def _write_store(root: Path) -> tuple[str, dict[str, str]]:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("suite", artifact_location=(root / "mlartifacts").as_uri())
    client.create_experiment("other", artifact_location=(root / "mlartifacts").as_uri())
    parent = client.create_run(exp_id, tags={"lit_sb3.run_type": "grid"}).info.run_id
    rng = np.random.default_rng(0)
    ids: dict[str, str] = {}
    for algo, level in ALGOS.items():
        for env, (rand, ref) in ENVS.items():
            seeds = [0, 1, 2, 3] if (algo == "sac" and env == "Pendulum-v1") else [0, 1, 2]  # unequal seeds
            for seed in seeds:
                tags = {
                    "mlflow.parentRunId": parent,
                    "lit_sb3.run_type": "job",
                    "lit_sb3.algo": algo,
                    "lit_sb3.env": env,
                    "lit_sb3.seed": str(seed),
                    "lit_sb3.job_id": f"{algo}-{env}-{seed}",
                    "lit_sb3.config_hash": f"h{algo}{len(env)}",
                    "lit_sb3.version": "0.1.0",
                    "torch.version": "2.5.0",
                    "gymnasium.version": "1.4.0",
                    "git.commit": "abc1234",
                }
                run = client.create_run(exp_id, tags=tags)
                rid = run.info.run_id
                final = rand + (ref - rand) * (level + 0.05 * rng.standard_normal())
                curve = [rand + (final - rand) * (i + 1) / len(EVAL_STEPS) for i in range(len(EVAL_STEPS))]
                now = int(time.time() * 1000)
                metrics = [Metric("eval/mean_reward", v, now, s) for s, v in zip(EVAL_STEPS, curve)]
                metrics += [Metric("eval/std_reward", 1.0, now, s) for s in EVAL_STEPS]
                metrics += [Metric("time/fps", 500.0 + seed, now, s) for s in EVAL_STEPS]
                metrics += [
                    Metric("final/mean_reward", final, now, EVAL_STEPS[-1]),
                    Metric("time/wall_seconds", 10.0 + seed, now, 0),
                    Metric("time/total_timesteps", EVAL_STEPS[-1], now, 0),
                ]
                client.log_batch(rid, metrics=metrics, params=[Param("learning_rate", "0.001")])
                client.set_terminated(rid, "FINISHED")
                ids[f"{algo}/{env}/{seed}"] = rid
    # one FAILED job and one tune trial (ignored)
    bad = client.create_run(
        exp_id,
        tags={
            "mlflow.parentRunId": parent,
            "lit_sb3.run_type": "job",
            "lit_sb3.algo": "td3",
            "lit_sb3.env": "Pendulum-v1",
            "lit_sb3.seed": "3",
            "lit_sb3.failure_reason": "NaN loss",
        },
    )
    client.set_terminated(bad.info.run_id, "FAILED")
    trial = client.create_run(
        exp_id,
        tags={"lit_sb3.run_type": "trial", "lit_sb3.algo": "dqn", "lit_sb3.env": "CartPole-v1", "lit_sb3.seed": "0"},
    )
    client.log_batch(trial.info.run_id, metrics=[Metric("final/mean_reward", 1.0, 0, 0)])
    client.set_terminated(trial.info.run_id, "FINISHED")
    client.set_terminated(parent, "FINISHED")
    return uri, ids


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("store")
    uri, _ = _write_store(root)
    return uri, root


@pytest.fixture(scope="module")
def report(store: tuple[str, Path]) -> tuple[Path, int]:
    uri, root = store
    out = root / "report"
    rc = main(
        [
            "report",
            "--experiment",
            "suite",
            "--tracking-uri",
            uri,
            "--out",
            str(out),
            "--reps",
            "2000",
            "--title",
            "Test report",
        ]
    )
    return out, rc


def test_report_files(report: tuple[Path, int]) -> None:
    out, rc = report
    assert rc == 0
    figs = sorted((out / "figures").glob("*.png"))
    names = {f.name for f in figs}
    assert {
        "aggregates.png",
        "performance_profiles.png",
        "probability_of_improvement.png",
        "iqm_curves.png",
        "curves_Pendulum-v1.png",
        "curves_MountainCarContinuous-v0.png",
    } <= names
    assert all(f.stat().st_size > 1000 for f in figs)
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(figs)
    for f in figs:
        assert f"figures/{f.name}" in html
    md = (out / "report.md").read_text()
    assert md.startswith("# Test report")
    assert "bench report --experiment suite" in md
    for heading in (
        "## Summary",
        "## Aggregate metrics",
        "## Verdicts with error control",
        "## Per-env results",
        "## Failed and missing runs",
        "## Wall-clock and throughput",
        "## Provenance",
    ):
        assert heading in md
    assert "| algo | runs | median | IQM | mean | optimality gap |" in md
    # 3 seeds per algorithm: intervals are shown, but no verdict (from the one error-controlled decision, which
    # states its rule and error rate), and the warning says why
    assert "credibly better" not in md
    assert "- too few runs for a verdict (n=3 ppo, n=3 sac per env; a verdict needs >= 5): P(ppo > sac) = " in md
    assert "Holm over 9 comparisons, family-wise error <= 0.05" in md  # 3 pairs x (2 envs + aggregate)
    assert "> **Warning:** too few runs for a verdict" in md
    # learning curves sit under the per-env section, not under the failed runs
    per_env, failed = md.index("## Per-env results"), md.index("## Failed and missing runs")
    assert per_env < md.index("figures/curves_Pendulum-v1.png") < failed
    assert "Seeds are unequal" in md
    assert "NaN loss" in md and "abc1234" in md


def test_report_data(report: tuple[Path, int], store: tuple[str, Path]) -> None:
    out, _ = report
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert len(rows) == 3 * 2 * 3 + 1  # one extra seed; the FAILED run and the trial are not there
    assert all(r["normalized_score"] for r in rows)
    sac = [float(r["normalized_score"]) for r in rows if r["algo"] == "sac"]
    assert 0.7 < np.mean(sac) < 1.1
    agg = json.loads((out / "aggregates.json").read_text())
    assert agg["reps"] == 2000 and agg["table_version"] >= 1 and agg["scale"] == "normalised score"
    assert agg["min_runs"] == 5 and agg["engine"] == "fast"
    assert {d["kind"] for d in agg["verdicts"]} == {"too_few_runs"}
    # one set of verdicts: each pair's is its aggregate comparison's in the error-controlled family
    control = {(c["x"], c["y"], c["env"]): c for c in agg["error_control"]["comparisons"]}
    for d in agg["verdicts"]:
        assert d["comparison"] == "aggregate" and d["design"] == "fixed" and d["alpha"] == 0.05
        assert control[(d["x"], d["y"], "aggregate")]["verdict"] == d["verdict"]
    iqm = agg["aggregates"]["sac"]["iqm"]
    assert iqm["low"] <= iqm["point"] <= iqm["high"]
    assert {(d["x"], d["y"]) for d in agg["probability_of_improvement"]} == {
        ("ppo", "sac"),
        ("ppo", "td3"),
        ("sac", "td3"),
    }
    assert agg["not_finished"] == [{"algo": "td3", "env": "Pendulum-v1", "count": 1, "reasons": ["NaN loss"]}]
    assert agg["per_env"]["Pendulum-v1"]["sac"]["runs"] == 4
    for algo in ALGOS:  # each algorithm at its own (here: the same) measured evaluation steps
        assert agg["iqm_curves"][algo]["x"] == EVAL_STEPS and not agg["iqm_curves"][algo]["interpolated"]
    assert agg["links"]["items"][0][1].endswith("/runs?workflowType=machine_learning&viewStateShareKey=lit-sb3-scores")
    assert all("workflowType=machine_learning" in url for _, url in agg["links"]["items"])

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store[0])
    exp = client.get_experiment_by_name("suite")
    runs = client.search_runs([exp.experiment_id], "tags.`lit_sb3.run_type` = 'report'")
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["report/sac/iqm"] == pytest.approx(iqm["point"])
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.md", "report.html", "scores.csv", "aggregates.json", "figures"} <= arts


def test_report_filters_and_raw(store: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = store
    rc = main(
        [
            "report",
            "--experiment",
            "suite",
            "--tracking-uri",
            uri,
            "--out",
            str(tmp_path),
            "--reps",
            "500",
            "--algos",
            "sac,td3",
            "--envs",
            "Pendulum-v1",
            "--normalize",
            "none",
        ]
    )
    assert rc == 0
    agg = json.loads((tmp_path / "aggregates.json").read_text())
    assert set(agg["aggregates"]) == {"sac", "td3"} and agg["tasks"] == ["Pendulum-v1"]
    assert agg["scale"] == "raw return"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--experiment", "suitee"], "experiment 'suitee' not found in sqlite:"),
        (["--experiment", "other"], "has no FINISHED job runs"),
        (
            ["--experiment", "suite", "--algos", "sacc"],
            "algorithm 'sacc' has no runs in this experiment (did you mean 'sac'?)",
        ),
        (["--experiment", "suite", "--envs", "Pendulum-v0"], "(did you mean 'Pendulum-v1'?)"),
    ],
)
def test_errors(store: tuple[str, Path], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["report", "--tracking-uri", store[0], "--reps", "200", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("bench report: error:") and message in err
    assert err.count("\n") == 1


def test_unreadable_uri(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["report", "--experiment", "x", "--tracking-uri", f"sqlite:///{tmp_path}/missing/mlflow.db"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot read tracking URI" in err and err.count("\n") == 1
    started = time.perf_counter()
    rc = main(["report", "--experiment", "x", "--tracking-uri", "http://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot read tracking URI 'http://127.0.0.1:1'" in err and err.count("\n") == 1
    assert time.perf_counter() - started < 20


# ---------------------------------------------------------------------------------------------------------
# sample size, budget/protocol/hyperparameters, figures, and the rliable engine (small one-env stores)
# ---------------------------------------------------------------------------------------------------------
RAND, REF = ENVS["Pendulum-v1"]


def _one_env_store(folder: Path, template: Path, seeds: int, levels: dict[str, float], episodes: str = "7") -> str:
    """``seeds`` runs per algorithm on Pendulum-v1, final normalised scores ~ level (+ small noise), each from
    ``episodes`` evaluation episodes."""
    from mlflow.entities import Metric, Param

    from tests.mlflow_store import client, copy_store

    uri = copy_store(folder, template)
    c = client(uri)
    exp_id = c.create_experiment("small", artifact_location=(folder / "mlartifacts").as_uri())
    rng = np.random.default_rng(1)
    lrs = {"sac": "0.0003", "td3": "0.001"}
    for algo, level in levels.items():
        for seed in range(seeds):
            tags = {
                "lit_sb3.run_type": "job",
                "lit_sb3.algo": algo,
                "lit_sb3.env": "Pendulum-v1",
                "lit_sb3.seed": str(seed),
            }
            rid = c.create_run(exp_id, tags=tags).info.run_id
            final = RAND + (REF - RAND) * (level + 0.02 * rng.standard_normal())
            now = int(time.time() * 1000)
            metrics = [
                Metric("eval/mean_reward", RAND + (final - RAND) * (i + 1) / 4, now, s)
                for i, s in enumerate(EVAL_STEPS)
            ]
            metrics += [Metric("final/mean_reward", final, now, 4000), Metric("time/total_timesteps", 4000, now, 0)]
            params = {
                "n_timesteps": "4000",
                "eval_freq": "1000",
                "eval_episodes": episodes,
                "seed": str(seed),
                "policy": "MlpPolicy",
                "algo_kwargs.learning_rate": lrs.get(algo, "0.001"),
                "algo_kwargs.gamma": "0.98",
                "model.learning_rate": lrs.get(algo, "0.001"),  # the Lightning logger's duplicate: left out
                "callback": "[]",  # bookkeeping, and constructor defaults of both algorithms: hidden
                "verbose": "0",
                "tau": "0.005",
                "buffer_size": "1000000",
                "batch_size": "256",
            }
            c.log_batch(rid, metrics=metrics, params=[Param(k, v) for k, v in params.items()])
            c.set_terminated(rid, "FINISHED")
    return uri


def _report(uri: str, out: Path, *extra: str) -> tuple[str, dict]:
    argv = ["report", "--experiment", "small", "--tracking-uri", uri, "--out", str(out), "--reps", "2000", *extra]
    assert main(argv) == 0
    return (out / "report.md").read_text(), json.loads((out / "aggregates.json").read_text())


def _png_dpi(path: Path) -> float:
    """Horizontal resolution from the PNG's pHYs chunk (pixels per metre -> dots per inch)."""
    import struct

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"pHYs":
            ppm_x, _, unit = struct.unpack(">IIB", data[pos + 8 : pos + 17])
            assert unit == 1  # metres
            return ppm_x * 0.0254
        pos += 12 + length
    raise AssertionError(f"{path.name} has no pHYs chunk")


def test_two_runs_each_give_no_verdict(tmp_path: Path, mlflow_template: Path) -> None:
    uri = _one_env_store(tmp_path, mlflow_template, seeds=2, levels={"sac": 0.95, "td3": 0.2})
    md, agg = _report(uri, tmp_path / "r")
    assert "credibly better" not in md
    assert md.index("> **Warning:** too few runs for a verdict") < md.index("## Summary")
    assert "too few runs for a verdict (n=2 sac, n=2 td3 per env; a verdict needs >= 5)" in md
    poi = agg["probability_of_improvement"][0]
    # the one interval of P(X > Y) is the confidence sequence: honest at 2 runs (a bootstrap CI would be [1, 1])
    assert poi["point"] == 1.0 and poi["low"] < 0.5 and poi["high"] == 1.0
    assert poi["interval_name"] == "95 % confidence sequence"
    html = (tmp_path / "r" / "report.html").read_text()
    assert '<div class="warn"><strong>Warning:</strong> too few runs for a verdict' in html
    # with the threshold lowered the exact test decides: 2 separated runs against 2 cannot reach 5 % (the
    # smallest two-sided p is 2/6), and the verdict says so
    md, agg = _report(uri, tmp_path / "r2", "--min-runs", "2")
    assert "Warning:** too few" not in md and "credibly better" not in md
    (d,) = agg["verdicts"]
    assert d["kind"] == "open" and d["p_value"] > 0.3
    assert (
        "- open: no verdict between sac and td3 is possible at 2 seeds per algorithm (the exact test's smallest p "
        "is 0.333 > 0.05): P(sac > td3) = 1.000 [" in md
    )


def test_four_separated_runs_are_called_when_the_threshold_allows(tmp_path: Path, mlflow_template: Path) -> None:
    """4 runs each: too few under the default --min-runs 5; with --min-runs 4 the exact test calls the clear pair
    (p = 2/70), and the figure marks the pair that has a verdict."""
    uri = _one_env_store(tmp_path, mlflow_template, seeds=4, levels={"sac": 0.95, "td3": 0.2})
    md, agg = _report(uri, tmp_path / "r")
    assert "credibly better" not in md and agg["verdicts"][0]["kind"] == "too_few_runs"
    md, agg = _report(uri, tmp_path / "r2", "--min-runs", "4")
    assert "Warning" not in md
    (d,) = agg["verdicts"]
    assert d["kind"] == "better" and d["winner"] == "sac" and 2 / 70 <= d["p_value"] <= 2 / 70 * 1.05
    line = next(x for x in md.splitlines() if x.startswith("- sac is credibly better than td3"))
    assert "decided on the first 4 seeds per algorithm on Pendulum-v1 (p = 0.0" in line
    assert "family-wise error <= 0.05" in line


def test_five_separated_runs_each_give_a_verdict(tmp_path: Path, mlflow_template: Path) -> None:
    uri = _one_env_store(tmp_path, mlflow_template, seeds=5, levels={"sac": 0.95, "td3": 0.2})
    md, agg = _report(uri, tmp_path / "r")
    assert "Warning" not in md and agg["sample_warning"] is None
    line = next(x for x in md.splitlines() if x.startswith("- sac is credibly better than td3"))
    # the claim says what it rests on, its interval (named), its rule and its error rate
    assert "P(sac > td3) = 1.000 [" in line and "(95 % confidence sequence)" in line
    assert "rests on 10 runs (sac: n=5, td3: n=5 per env) on 1 env, 4,000 env steps per run" in line
    assert "decided on the first 5 seeds per algorithm on Pendulum-v1 (p = 0.00" in line  # exact: 2/252
    assert (
        "by the exact permutation test of P(X > Y) (one look), Holm over 1 comparisons, family-wise error <= 0.05"
        in line
    )
    # one wording everywhere: the summary and the error-control section agree
    assert md.count("sac is credibly better than td3") == 2  # summary, section
    # budget, protocol, differing hyperparameters (no duplicate from model.*), normalisation constants
    assert "## Budget and evaluation protocol" in md
    assert "| Pendulum-v1 | sac | — | 4,000 | 4,000 | 1,000 | 7 | True |" in md  # no budget asked logged here
    assert "### Pendulum-v1: differing keys: algo_kwargs.learning_rate" in md
    assert "| algo_kwargs.learning_rate | 0.0003 | 0.001 | ≠ |" in md
    assert "| algo_kwargs.gamma | 0.98 | 0.98 |  |" in md
    assert "model.learning_rate" not in md
    assert "## Normalisation constants" in md
    assert "| Pendulum-v1 | -1233.660 | -152.000 | bench random-scores" in md
    # figures: >= 200 dpi PNG and an SVG of each
    figs = sorted((tmp_path / "r" / "figures").glob("*.png"))
    assert {f.name for f in figs} >= {"aggregates.png", "probability_of_improvement.png", "curves_Pendulum-v1.png"}
    for f in figs:
        assert _png_dpi(f) >= 199.9, f.name
        assert f.with_suffix(".svg").read_text().lstrip().startswith("<?xml"), f.name

    # the reference engine (rliable.library) agrees with the fast bootstrap within 0.01 on every CI bound
    pytest.importorskip("arch", reason="the rliable-ref extra (arch<8, pandas<3) is not installed")
    _, ref = _report(uri, tmp_path / "ref", "--engine", "rliable")
    assert ref["engine"] == "rliable"
    for algo, metrics in agg["aggregates"].items():
        for metric, iv in metrics.items():
            other = ref["aggregates"][algo][metric]
            assert other["point"] == pytest.approx(iv["point"]), (algo, metric)
            assert abs(other["low"] - iv["low"]) < 0.01 and abs(other["high"] - iv["high"]) < 0.01, (algo, metric)
    for algo in ("sac", "td3"):
        for key in ("low", "high"):
            diff = np.abs(np.array(agg["iqm_curves"][algo][key]) - ref["iqm_curves"][algo][key])
            assert diff.max() < 0.01, (algo, key)


def test_rliable_engine_needs_equal_runs(
    store: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("arch", reason="the rliable-ref extra (arch<8, pandas<3) is not installed")
    rc = main(
        [
            "report",
            "--experiment",
            "suite",
            "--tracking-uri",
            store[0],
            "--out",
            str(tmp_path),
            "--reps",
            "200",
            "--engine",
            "rliable",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "rliable.library needs the same number of runs on every task" in err and err.count("\n") == 1


# ---------------------------------------------------------------------------------------------------------
# one story per quantity: one interval and one orientation of P(X > Y), verdict texts at every sample size, the
# per-seed plot, the short-evaluation flag, the hyperparameter tables
# ---------------------------------------------------------------------------------------------------------
_P = re.compile(r"P\((\w+) > (\w+)\) = (\S+) \[(\S+), (\S+)\]")


@pytest.mark.parametrize(("n", "decided"), [(2, False), (4, False), (5, True), (10, True)])
def test_verdict_text_follows_the_rule_at_every_sample_size(
    tmp_path: Path, mlflow_template: Path, n: int, decided: bool
) -> None:
    """Separated scores at n = 2, 4, 5, 10 runs each (default --min-runs 5): below 5 no verdict and nothing that
    reads as one (no p, no "decided on"); from 5 on the verdict with what decided it."""
    uri = _one_env_store(tmp_path, mlflow_template, seeds=n, levels={"sac": 0.95, "td3": 0.2})
    md, agg = _report(uri, tmp_path / "r")
    (d,) = agg["verdicts"]
    summary = next(x for x in md.splitlines() if "P(sac > td3) = " in x and x.startswith("- "))
    row = next(x for x in md.splitlines() if x.startswith("| sac | td3 | Pendulum-v1 |"))
    if decided:
        assert d["kind"] == "better" and d["winner"] == "sac"
        assert summary.startswith("- sac is credibly better than td3: ")
        assert f"decided on the first {n} seeds per algorithm on Pendulum-v1 (p = " in summary
        assert "too few" not in summary + row and "Warning" not in md
    else:
        assert d["kind"] == "too_few_runs"
        assert summary.startswith(f"- too few runs for a verdict (n={n} sac, n={n} td3 per env; a verdict needs >= 5)")
        assert "not decided" in summary and "decided on" not in summary and "p = " not in summary
        assert "below 5 runs: not read" in row and "credibly better" not in md
        assert "> **Warning:** too few runs for a verdict" in md
    for line in md.splitlines():  # never both
        assert not ("too few runs" in line and "decided on" in line), line


def test_one_interval_and_one_orientation(tmp_path: Path, mlflow_template: Path) -> None:
    """Three algorithms, one of them worse than the one after it in name order: every statement of P(X > Y) in
    report.md, report.html, aggregates.json and the MLflow report run has X before Y in name order and, for a
    pair, the same interval (its confidence sequence, named), never a bootstrap CI."""
    import html as html_lib

    uri = _one_env_store(tmp_path, mlflow_template, seeds=6, levels={"sac": 0.2, "td3": 0.9, "ddpg": 0.5})
    md, agg = _report(uri, tmp_path / "r")
    text = html_lib.unescape((tmp_path / "r" / "report.html").read_text())
    said = {}
    for doc in (md, text):
        for x, y, point, low, high in _P.findall(doc):
            assert x < y, f"P({x} > {y}) is not in name order"
            said.setdefault((x, y), set()).add((point, low, high))
    assert set(said) == {("ddpg", "sac"), ("ddpg", "td3"), ("sac", "td3")}
    assert all(len(v) == 1 for v in said.values()), said  # one interval per pair
    # the error-control table gives the same numbers, under the interval's name
    name = agg["probability_of_improvement"][0]["interval_name"]
    assert name == "98.33 % confidence sequence, simultaneous over the 3 comparisons"
    assert f"| P(X > Y) | {name} |" in md
    for d in agg["probability_of_improvement"]:
        ((point, low, high),) = said[(d["x"], d["y"])]
        row = next(x for x in md.splitlines() if x.startswith(f"| {d['x']} | {d['y']} | Pendulum-v1 |"))
        assert f"| {point} | [{low}, {high}] |" in row
        assert float(low) == pytest.approx(d["low"], abs=5e-4) and float(high) == pytest.approx(d["high"], abs=5e-4)
    assert not [x for x in md.splitlines() if _P.search(x) and "bootstrap" in x]
    # td3 wins against sac, and the text says so without turning the pair around
    line = next(x for x in md.splitlines() if x.startswith("- td3 is credibly better than sac: P(sac > td3) = 0.000 ["))
    assert "(98.33 % confidence sequence, simultaneous over the 3 comparisons)" in line
    from tests.mlflow_store import runs

    (report,) = runs(uri, "small", "report")
    keys = {k for k in report.data.metrics if k.startswith("report/poi/")}
    assert keys == {f"report/poi/{x}_vs_{y}{s}" for x, y in said for s in ("", "_low", "_high")}
    assert report.data.metrics["report/poi/sac_vs_td3_high"] == pytest.approx(agg["verdicts"][2]["high"])


def test_final_scores_plot_and_short_evaluation_flag(tmp_path: Path, mlflow_template: Path) -> None:
    uri = _one_env_store(tmp_path, mlflow_template, seeds=5, levels={"sac": 0.9, "td3": 0.3}, episodes="2")
    md, agg = _report(uri, tmp_path / "r")
    # the per-seed strip plot of the scores the verdicts rest on, and each seed's score in the per-env table
    assert (tmp_path / "r" / "figures" / "final_scores.png").stat().st_size > 1000
    assert "](figures/final_scores.png)" in md
    assert 'data-file="figures/final_scores.png"' in (tmp_path / "r" / "report.html").read_text()
    assert agg["per_env"]["Pendulum-v1"]["sac"]["seeds"] == [0, 1, 2, 3, 4]
    assert len(agg["per_env"]["Pendulum-v1"]["sac"]["scores"]) == 5
    row = next(x for x in md.splitlines() if x.startswith("| Pendulum-v1 | sac | 5 | 0: "))
    assert row.count(" †") == 5
    # 2 evaluation episodes: flagged at the top, in the protocol table and per score
    warning = next(w for w in agg["warnings"] if w.startswith("scores resting on fewer than 5 evaluation episodes"))
    assert "sac on Pendulum-v1: 2" in warning and "td3 on Pendulum-v1: 2" in warning
    assert "| Pendulum-v1 | sac | — | 4,000 | 4,000 | 1,000 | 2 † | True |" in md
    assert agg["per_env"]["Pendulum-v1"]["td3"]["short_evaluation"] == [True] * 5
    # 7 episodes: no flag
    (tmp_path / "ok").mkdir()
    uri = _one_env_store(tmp_path / "ok", mlflow_template, seeds=5, levels={"sac": 0.9, "td3": 0.3})
    md, agg = _report(uri, tmp_path / "ok" / "r")
    assert "†" not in md and not any("evaluation episodes" in w for w in agg["warnings"])


def test_hyperparameters_show_differences_first_and_hide_defaults(tmp_path: Path, mlflow_template: Path) -> None:
    uri = _one_env_store(tmp_path, mlflow_template, seeds=5, levels={"sac": 0.9, "td3": 0.3})
    md, agg = _report(uri, tmp_path / "r")
    table = md[md.index("### Pendulum-v1: differing keys") : md.index("## Normalisation constants")]
    rows = [x.split(" | ")[0].lstrip("| ") for x in table.splitlines() if x.startswith("| ") and "---" not in x][1:]
    assert rows[0] == "algo_kwargs.learning_rate"  # what differs comes first
    hidden = agg["hidden_hyperparameters"]["Pendulum-v1"]
    # bookkeeping, and values both algorithms' constructors default to (SAC and TD3: tau 0.005, buffer 1e6, batch
    # 256), are hidden and listed; gamma 0.98 is not a default of either and stays
    assert {"callback", "verbose", "tau", "buffer_size", "batch_size"} <= set(hidden)
    for key in hidden:
        assert f"| {key} |" not in table
    assert "| algo_kwargs.gamma | 0.98 | 0.98 |  |" in table
    assert "keys at defaults or bookkeeping, hidden: batch_size, buffer_size, callback, " in md


def test_constructor_defaults_read_from_source_match_the_classes() -> None:
    """The report reads defaults from the algorithms' source (no import of the library); they are the classes'
    own signature defaults, for every registered algorithm."""
    from lit_sb3.algorithms.registry import ALGORITHMS
    from lit_sb3.zoo.registry import algo_defaults
    from lit_sb3.zoo.report.sections import constructor_defaults

    for algo in ALGORITHMS:
        read = constructor_defaults(algo)
        real = algo_defaults(algo)
        assert {"learning_rate", "verbose", "seed"} <= set(read), algo
        for key, value in read.items():
            if key not in ("env", "_init_setup_model"):
                assert real[key] == value, (algo, key)


def test_algorithms_on_disjoint_envs_get_one_warning_and_no_aggregate(tmp_path: Path, mlflow_template: Path) -> None:
    """A benchmark grid (each algorithm on its own env) has no aggregate across algorithms: the report says so once
    and lists what ran where, rather than one 'no FINISHED runs for ...' line per env for algorithms never run
    there (which read as failed runs) and an aggregate 'over 0 envs'."""
    from tests.mlflow_store import client, runs

    uri = _one_env_store(tmp_path, mlflow_template, seeds=3, levels={"sac": 0.9, "td3": 0.8})
    c = client(uri)
    for run in runs(uri, "small"):
        if run.data.tags["lit_sb3.algo"] == "td3":
            c.set_tag(run.info.run_id, "lit_sb3.env", "MountainCarContinuous-v0")
    md, _ = _report(uri, tmp_path / "r")
    assert "no FINISHED runs for" not in md and "over 0 envs" not in md and "no env can be normalised" not in md
    assert "No aggregate across algorithms (no env has runs of every one)" in md
    assert ("no env has FINISHED runs of every algorithm (MountainCarContinuous-v0: td3; Pendulum-v1: sac): no "
            "aggregate across algorithms") in md  # fmt: skip
