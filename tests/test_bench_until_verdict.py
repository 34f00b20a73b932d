"""``bench run --until-verdict`` end to end: real workers, a real MLflow sqlite store, a SIGKILL between waves and
a rerun, the report of the sequential experiment; its bad inputs and its dry run.

The two tiny classic-control configs (a zoo-config folder, ``LIT_SB3_ZOO_CONFIGS``): on CartPole-v1 a2c's env
uses Sutton & Barto's reward (0 per step, -1 at the end: its score is <= 0) while ppo's scores >= 8, a clear
pair that must stop at --min-seeds; on MountainCar-v0 both are untrained after 128 steps and score -200 every
time, an identical pair (all ties) that must run to --max-seeds and stay open.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main
from lit_sb3.zoo.stats.sequential import SequentialPlan
from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs

ROOT = Path(__file__).resolve().parent.parent
ZOO = {
    "ppo.yml": "CartPole-v1:\n  policy: MlpPolicy\n  n_envs: 1\n  n_steps: 64\n"
    "MountainCar-v0:\n  policy: MlpPolicy\n  n_envs: 1\n  n_steps: 64\n",
    "a2c.yml": "CartPole-v1:\n  policy: MlpPolicy\n  n_envs: 1\n  n_steps: 64\n  env_kwargs:\n"
    "    sutton_barto_reward: true\nMountainCar-v0:\n  policy: MlpPolicy\n  n_envs: 1\n  n_steps: 64\n",
}
SEQ = ["--until-verdict", "--min-seeds", "5", "--max-seeds", "6", "--wave", "1"]
TINY = ["--n-timesteps", "128", "--eval-freq", "128", "--eval-episodes", "1", "--seed-batch", "5", "--jobs", "2"]


def _zoo(folder: Path) -> Path:
    zoo = folder / "zoo"
    zoo.mkdir()
    for name, text in ZOO.items():
        (zoo / name).write_text(text)
    return zoo


def _artifact(uri: str, run_id: str, path: str, dst: Path) -> dict:
    local = _client(uri).download_artifacts(run_id, path, str(dst))
    return json.loads(Path(local).read_text())


def _outcomes(record: dict) -> dict[str, tuple[str, int]]:
    return {c["env"]: (c["outcome"], c["seeds"]) for c in record["comparisons"]}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_until_verdict_kill_between_waves_and_resume(
    in_tmp_path: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _store(in_tmp_path, mlflow_template)
    zoo = _zoo(in_tmp_path)
    argv = ["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1,MountainCar-v0", *SEQ, *TINY, "--tracking-uri", uri,
            "--experiment", "seq"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LIT_SB3_ZOO_CONFIGS": str(zoo)}
    proc = subprocess.Popen([sys.executable, "-m", "lit_sb3.zoo.cli", *argv], cwd=in_tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:  # kill it as soon as look 1 is decided and logged (wave 2 starting or started)
        deadline = time.monotonic() + 300
        while True:
            parents = _runs(uri, "seq", "grid")
            if parents and "verdict/open" in parents[0].data.metrics:
                break
            assert proc.poll() is None, "bench run ended before its first look was logged"
            assert time.monotonic() < deadline, "look 1 was not logged in time"
            time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_parent = parents[0].info.run_id
    first = _artifact(uri, killed_parent, "sequential/look_1.json", in_tmp_path / "a")
    assert _outcomes(first) == {  # P(a2c > ppo): X before Y in name order, whatever the order of --algos
        "CartPole-v1": ("y_better", 5),
        "MountainCar-v0": ("open", 5),
        "aggregate": ("y_better", 5),
    }
    time.sleep(2)  # the killed run's workers notice their parent is gone (they poll every 0.5 s)

    monkeypatch.setenv("LIT_SB3_ZOO_CONFIGS", str(zoo))
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "look 1 (5 seeds per algo x env):" in out and "look 2 (6 seeds per algo x env):" in out
    # it ends as a plain grid does: the decisions as a terminal table, whole (no cell cut short, though capsys is
    # not a terminal), each one's reason for stopping below it, then where the results are
    tail = out.splitlines()
    assert tail[-1].startswith("results: bench report --experiment seq --tracking-uri ")
    reasons = [line for line in tail if " stopped because " in line]
    assert len(reasons) == 3 and tail[-2 - len(reasons)].startswith("└")  # CartPole, MountainCar, aggregate
    assert any(line.startswith("decisions") for line in tail)
    assert any("P(X > Y)" in line and line.startswith("┃") for line in tail)  # the table's header row
    table = tail[tail.index(next(line for line in tail if line.startswith("decisions"))) : -1 - len(reasons)]  # fmt: skip
    assert not any("…" in line for line in table) and any("MountainCar-v0" in line for line in table)
    parent = next(r for r in _runs(uri, "seq", "grid") if r.info.run_id != killed_parent)
    assert parent.info.status == "FINISHED"
    rule = json.loads(parent.data.tags["lit_sb3.sequential_plan"])  # the rule only: a tag stays short at any
    assert "looks" not in rule and SequentialPlan.from_dict(rule).looks == (5, 6)  # --max-seeds; the looks follow
    again = _artifact(uri, parent.info.run_id, "sequential/look_1.json", in_tmp_path / "b")
    assert again == first  # the rerun replays look 1 to the same decisions, numbers included
    final = _artifact(uri, parent.info.run_id, "sequential/decisions.json", in_tmp_path / "c")
    # the clear pair stopped at --min-seeds, the identical pair (all ties) ran to --max-seeds and stays open
    assert _outcomes(final) == {
        "CartPole-v1": ("y_better", 5),
        "MountainCar-v0": ("open", 6),
        "aggregate": ("y_better", 5),
    }
    reasons = {c["env"]: c["reason"] for c in final["comparisons"]}
    assert reasons["MountainCar-v0"] == "max seeds reached (6) and still open"
    assert reasons["CartPole-v1"].startswith("settled at look 1 (5 seeds): ppo credibly better than a2c")
    history = _client(uri).get_metric_history(parent.info.run_id, "verdict/open")
    assert [(m.step, m.value) for m in history] == [(5, 1.0), (6, 1.0)]
    jobs = [r for r in _runs(uri, "seq") if r.info.status == "FINISHED"]
    seeds = sorted(
        (r.data.tags["lit_sb3.algo"], r.data.tags["lit_sb3.env"], int(r.data.tags["lit_sb3.seed"])) for r in jobs
    )
    assert len({r.data.tags["lit_sb3.job_id"] for r in jobs}) == len(jobs) == 22  # each job FINISHED once
    assert not any(env == "CartPole-v1" and seed == 5 for _, env, seed in seeds)  # a settled pair gets no seed

    # the report replays the same design and shows it
    capsys.readouterr()
    assert main(["report", "--experiment", "seq", "--tracking-uri", uri, "--out", str(in_tmp_path / "rep"),
                 "--reps", "200"]) == 0  # fmt: skip
    last = capsys.readouterr().out.splitlines()[-1]  # the report ends pointing at the page and the runs
    assert last.startswith(f"next: open {(in_tmp_path / 'rep' / 'report.html').as_uri()} in a browser | ")
    assert f"mlflow ui --backend-store-uri {uri}, then open http://127.0.0.1:5000/#/experiments/" in last
    md = (in_tmp_path / "rep" / "report.md").read_text()
    assert "## Verdicts with error control" in md and "looks at 5, 6 seeds per algorithm" in md
    assert "max seeds reached (6) and still open" in md
    assert (in_tmp_path / "rep" / "figures" / "sequential_intervals.png").is_file()
    report = json.loads((in_tmp_path / "rep" / "aggregates.json").read_text())
    control = report["error_control"]
    assert control["design"] == "sequential" and len(control["comparisons"]) == 3
    # one set of verdicts: the pair's is its aggregate's sequential decision, stated with that design's rule
    (d,) = report["verdicts"]
    assert d["verdict"] == "ppo is credibly better than a2c" and d["design"] == "sequential" and d["seeds"] == 5
    assert "decided on the first 5 seeds per algorithm on the aggregate over the envs" in md
    assert "by the group-sequential permutation test of P(X > Y) (pocock spending, looks at 5, 6 seeds)" in md
    assert "- On CartPole-v1: ppo is credibly better than a2c; decided on the first 5 seeds per algorithm" in md
    # one orientation and one interval: the terminal, the report and MLflow all state P(a2c > ppo)
    said = set(re.findall(r"P\((\w+) > (\w+)\)", out + md)) - {("X", "Y")}
    assert said == {("a2c", "ppo")}, said
    assert not [x for x in md.splitlines() if "P(a2c > ppo) =" in x and "bootstrap" in x]
    assert any(k.startswith("report/poi/a2c_vs_ppo") for k in _runs(uri, "seq", "report")[0].data.metrics)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--algos", "ppo,a2c", "--until-verdict", "--min-seeds", "6", "--max-seeds", "5"],
         "--max-seeds (5) must be >= --min-seeds (6)"),
        (["--algos", "ppo,a2c", "--until-verdict", "--wave", "0"], "--wave must be in [1, 100,000], got 0"),
        (["--algos", "ppo,a2c", "--until-verdict", "--equivalence-margin", "0.5"],
         "--equivalence-margin must be in (0, 0.5)"),
        (["--algos", "ppo,a2c", "--until-verdict", "--alpha", "1.5"], "--alpha must be in (0, 1)"),
        (["--algos", "ppo", "--until-verdict"], "give at least 2 in --algos"),
        (["--algos", "ppo,a2c", "--until-verdict", "--seeds", "3"], "drop --seeds/--seed-list"),
        (["--algos", "ppo,a2c", "--min-seeds", "3"], "--min-seeds only apply with --until-verdict"),
    ],
)  # fmt: skip
def test_until_verdict_errors(extra: list[str], message: str, in_tmp_path: Path, mlflow_template: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    uri = _store(in_tmp_path, mlflow_template)
    assert main(["run", "--envs", "CartPole-v1", "--tracking-uri", uri, "--experiment", "bad", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert _runs(uri, "bad", None) == []


def test_until_verdict_dry_run(in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1,Acrobot-v1", "--until-verdict", "--min-seeds",
                 "4", "--max-seeds", "10", "--wave", "3", "--n-timesteps", "1024", "--hyperparams", "n_steps=64", "n_envs=1",
                 "--dry-run"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "looks at 4, 7, 10 seeds per algorithm" in out
    assert "comparisons: 3 (1 pair(s) x 2 env(s) + aggregates)" in out
    assert "wave 1: seeds 0..3 (4 per algo x env)" in out and "wave 3: seeds 7..9 (3 per algo x env)" in out
    per_seed = 4 * 1024  # 2 algos x 2 envs, 1,024 env steps each (16 whole rollouts of 64)
    assert f"worst case (every comparison open to --max-seeds 10): 40 jobs, {10 * per_seed:,} env steps" in out
    assert f"best case (all settled at --min-seeds 4): 16 jobs, {4 * per_seed:,} env steps" in out
    assert "estimate of the sequence: about " in out and "if every one stays open to 10" in out
    assert not (in_tmp_path / "mlflow.db").exists()


def _capped_dry_run(max_seeds: int, folder: Path) -> tuple[str, float, int]:
    """``--until-verdict --max-seeds N --dry-run`` in a process capped at 1 GB of address space: its output, its CPU
    seconds and its peak RSS (KiB)."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    code = ("import resource, sys\nfrom lit_sb3.zoo.cli import main\ncode = main(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(code)")  # fmt: skip
    argv = ["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1", "--until-verdict", "--max-seeds", str(max_seeds),
            "--dry-run"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder), "LIT_SB3_CACHE_DIR": str(folder / "cache")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=folder, capture_output=True, text=True,
                          timeout=120, preexec_fn=cap)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr[-2000:]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return done.stdout, cpu, int(done.stderr.strip().splitlines()[-1])


def test_until_verdict_plan_does_not_grow_with_max_seeds(tmp_path: Path) -> None:
    """The plan is lazy: each pair is planned once and a wave makes its jobs when it starts, so ``--dry-run`` at the
    cap (``--max-seeds 100000``; it materialised every job and listed them wave by wave, quadratic in the seeds)
    runs under a 1 GB address-space cap in a few CPU seconds, with the peak memory and CPU time of ``--max-seeds
    1000`` (within 16 MiB and 3 s), and prints a bounded plan computed from counts."""
    out_small, cpu_small, rss_small = _capped_dry_run(1000, tmp_path)
    out, cpu, rss = _capped_dry_run(100_000, tmp_path)
    assert cpu < 30.0, cpu  # imports and planning one pair of configs; not the seeds
    assert cpu - cpu_small < 3.0 and abs(rss - rss_small) < 16 * 1024, (cpu_small, cpu, rss_small, rss)
    assert "looks at 5, 6, 7, 8, 9, 10, 11, 12, 13, ..., 99999, 100000 (99,996 looks, every 1 seed(s))" in out
    assert "  wave 10: seeds 13..13 (1 per algo x env), look at 14 seeds; at most 2 jobs" in out
    assert "  waves 11..99996: seeds 14..99999, 1 per algo x env each (the last 1); at most 2 jobs" in out
    assert "worst case (every comparison open to --max-seeds 100000): 200000 jobs" in out
    assert "if every one stays open to 100000" in out
    assert len(out.splitlines()) < len(out_small.splitlines()) + 2
    assert not (tmp_path / "mlflow.db").exists()


def test_report_of_an_extended_experiment_says_so(tmp_path: Path, mlflow_template: Path) -> None:
    """A fixed-seed experiment reported at 5 seeds, extended to 8, reported again: the second report says it was
    extended, and its verdicts with error control use alpha / 2 (two looks, Bonferroni); every report carries the
    Holm-controlled family of comparisons."""
    from mlflow.entities import Metric

    from tests.test_report import _one_env_store

    uri = _one_env_store(tmp_path, mlflow_template, 5, {"sac": 0.9, "td3": 0.3})
    args = ["report", "--experiment", "small", "--tracking-uri", uri, "--reps", "200"]
    assert main([*args, "--out", str(tmp_path / "r1")]) == 0
    first = json.loads((tmp_path / "r1" / "aggregates.json").read_text())["error_control"]
    assert first["design"] == "fixed" and first["alpha"] == 0.05 and first["extended"] is None
    (c,) = first["comparisons"]  # one pair on one env: no aggregate
    assert c["outcome"] == "x_better" and c["seeds"] == 5  # 5 perfectly separated runs each: exact p 2/252
    md = (tmp_path / "r1" / "report.md").read_text()
    assert "## Verdicts with error control" in md and "Holm over all 1 comparisons" in md

    client = _client(uri)
    exp = client.get_experiment_by_name("small")
    for algo, score in (("sac", -300.0), ("td3", -900.0)):
        for seed in (5, 6, 7):
            tags = {"lit_sb3.run_type": "job", "lit_sb3.algo": algo, "lit_sb3.env": "Pendulum-v1",
                    "lit_sb3.seed": str(seed)}  # fmt: skip
            rid = client.create_run(exp.experiment_id, tags=tags).info.run_id
            client.log_batch(rid, metrics=[Metric("final/mean_reward", score, 0, 4000)])
            client.set_terminated(rid, "FINISHED")
    assert main([*args, "--out", str(tmp_path / "r2")]) == 0
    second = json.loads((tmp_path / "r2" / "aggregates.json").read_text())["error_control"]
    assert second["alpha"] == 0.025 and "extended after 1 earlier report" in second["extended"]
    assert second["comparisons"][0]["seeds"] == 8
    md = (tmp_path / "r2" / "report.md").read_text()
    assert "> **Warning:** this experiment was extended after 1 earlier report(s)" in md
