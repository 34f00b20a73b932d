"""What `bench run` shows on a terminal: the plan at once, an overall line with ETA, queued jobs, headed columns."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from lit_sb3.zoo.jobs import plan_grid
from lit_sb3.zoo.launchers.base import JobDone, JobStarted
from lit_sb3.zoo.progress import GridProgress
from lit_sb3.zoo.runner import JobProgress, JobResult


def _render(progress: GridProgress) -> str:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200, highlight=False).print(progress._table())
    return out.getvalue()


def test_overall_line_queued_jobs_and_headed_columns() -> None:
    jobs, _ = plan_grid(["a2c"], ["CartPole-v1"], range(12), n_timesteps=1000)
    progress = GridProgress(len(jobs), file=io.StringIO(), live=False, jobs=jobs)
    assert progress.overall().startswith("jobs: 0/12 done, 0 running, 12 queued, 0 failed | env steps: 0/12,000 (0 %)")
    progress.handle(JobStarted(jobs[0], "r0"))
    progress.handle(JobProgress(jobs[0].job_id, 500, 1000, 250.0, 20.0, 30.0))
    line = progress.overall()
    assert "jobs: 0/12 done, 1 running, 11 queued" in line and "env steps: 500/12,000 (4 %)" in line
    assert "ETA " in line and "ETA -" not in line  # a rate is known: an ETA is given
    progress.handle(JobDone(jobs[0], JobResult(jobs[0].job_id, jobs[0].name, "FINISHED", "r0", 42.0, env_steps=1000)))
    assert progress.overall().startswith("jobs: 1/12 done, 0 running, 11 queued, 0 failed | env steps: 1,000/12,000")
    table = _render(progress)
    header = next(line for line in table.splitlines() if "job" in line and "status" in line)
    for column in ("job", "status", "env steps", "fps", "last return", "last eval", "time", "note"):
        assert column in header
    assert table.count("queued") >= 8 and "... 3 more queued" in table  # 11 queued: 8 listed, the rest counted


def test_first_line_before_any_job_starts(tmp_path: Path, mlflow_template: Path) -> None:
    from tests.mlflow_store import copy_store

    uri = copy_store(tmp_path, mlflow_template)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-m", "lit_sb3.zoo.cli", "run", "--algos", "a2c", "--envs", "CartPole-v1", "--seeds", "1",
            "--n-timesteps", "200", "--jobs", "1", "--eval-episodes", "1", "--tracking-uri", uri, "--experiment", "t",
            "--progress-interval", "0.5"]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    # the plan (jobs, workers, experiment, tracking URI) comes first, once it is accepted (a refused command prints
    # only its error), before runs and any job start; piped, only progress ticks of the planning may precede it
    first = next(line for line in lines if not re.match(r"^\[\d\d:\d\d:\d\d\] jobs: ", line))
    assert first == lines[lines.index(first)] and all("planning" in line for line in lines[: lines.index(first)])
    assert first.startswith("bench run: algos a2c x envs CartPole-v1 x 1 seed(s); 1 worker(s); experiment 't' at ")
    assert uri in first
    start = next(i for i, line in enumerate(lines) if line.startswith("start "))
    assert start > 0
    assert any(line.strip().startswith("jobs: 1/1 done, 0 running, 0 queued, 0 failed") for line in lines[start:])
    # piped: progress lines at the --progress-interval cadence while the store opens and the worker starts
    ticks = [line for line in lines if re.match(r"^\[\d\d:\d\d:\d\d\] jobs: 0/1 done", line)]
    assert ticks and " | elapsed " in ticks[0] and " | ETA " in ticks[0]
    # and one line saying how to look at the results, with the link into MLflow's training view
    assert lines[-1].startswith("results: bench report --experiment t --tracking-uri ")
    assert "workflowType=machine_learning" in lines[-1]
    # a no-op rerun answers without starting anything
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "nothing to do: all 1 jobs already finished" in again.stdout
    assert again.stdout.splitlines()[0].startswith("bench run: algos a2c")
