"""Record a real ``bench run``'s progress events as test data for the ETA (``tests/test_progress_eta.py``).

Runs the grid below through the CLI in a temporary folder with the progress display's ``handle`` wrapped, and
writes every launcher event with its time since the display started (the jobs as their JSON form, the units as
job ids) to ``run.json`` beside this file::

    PYTHONPATH=. taskset -c 0 python tests/data/progress/record.py

The grid has the phases the ETA models separately: an off-policy warm-up (``learning_starts=1000`` of 3,000 steps),
updates, and evaluations costing more env steps than the training (6 evaluations of 5 Pendulum episodes), four
jobs on two worker slots.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ARGV = ["run", "--algos", "sac,td3", "--envs", "Pendulum-v1", "--seeds", "2", "--jobs", "2", "--n-timesteps", "3000",
        "--eval-freq", "500", "--eval-episodes", "5", "--hyperparams", "learning_starts=1000",
        "--progress-interval", "5"]  # fmt: skip


def main() -> int:
    from lit_sb3.zoo import cli
    from lit_sb3.zoo.launchers.base import JobDone, JobStarted
    from lit_sb3.zoo.progress import GridProgress
    from lit_sb3.zoo.runner import JobProgress

    events: list[dict] = []
    setup: dict = {}
    t0 = [0.0]
    original_handle, original_set_jobs = GridProgress.handle, GridProgress.set_jobs

    def set_jobs(self: GridProgress, jobs, state="", units=None, costs=None, seed_batch=None) -> None:  # noqa: ANN001
        if units is not None:
            setup.update(jobs=[j.to_json() for j in jobs], units=[[j.job_id for j in u] for u in units],
                         workers=self.workers, seed_batch=seed_batch)  # fmt: skip
            t0[0] = time.monotonic()
        original_set_jobs(self, jobs, state, units, costs, seed_batch)

    def handle(self: GridProgress, event) -> None:  # noqa: ANN001
        t = time.monotonic() - t0[0]
        if isinstance(event, JobStarted):
            events.append({"t": t, "kind": "started", "job_id": event.spec.job_id, "run_id": event.run_id})
        elif isinstance(event, JobProgress):
            events.append({"t": t, "kind": "progress", **dataclasses.asdict(event)})
        elif isinstance(event, JobDone):
            events.append({"t": t, "kind": "done", "job_id": event.spec.job_id, "result": event.result.to_dict()})
        original_handle(self, event)

    GridProgress.handle, GridProgress.set_jobs = handle, set_jobs  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="record-progress-") as tmp:
        os.chdir(tmp)
        code = cli.main([*ARGV, "--tracking-uri", f"sqlite:///{tmp}/mlflow.db", "--experiment", "record"])
    if code != 0:
        return code
    load = os.getloadavg()
    out = {"argv": ARGV, "load_average": [round(x, 2) for x in load], **setup, "events": events}
    (Path(__file__).parent / "run.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    sys.exit(main())
