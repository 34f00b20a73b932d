"""A reference job as the launchers run it: SB3 / sb3-contrib trained by rl_zoo3's ``train`` in a child process,
then its log folder recorded in the job's run (:func:`run_reference_jobs`, called by
:func:`lit_sb3.zoo.runner.run_jobs` for ``impl="sb3"`` jobs, so the local and the Ray launcher run both sides the
same way).

Same job, same protocol as the lit_sb3 side: the zoo-format entry rl_zoo3 reads is the job's own
(:attr:`~lit_sb3.zoo.jobs.JobSpec.zoo_entry`, merged from the same files and overrides), the same seed, budget
(``-n``: the budget asked; SB3 rounds on-policy budgets up to whole rollouts as the suite does), evaluation
every ``eval_freq`` env steps with ``eval_episodes`` deterministic episodes on one env seeded with the run's seed
(:mod:`lit_sb3.zoo.reference.zoo_train`), one torch thread per job, the same device. The process's wall and CPU
time are measured (``os.wait4``) and logged as ``time/wall_seconds`` and ``time/cpu_seconds``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lit_sb3.zoo.jobs import JobSpec
from lit_sb3.zoo.worker.protocol import JobProgress, JobResult

__all__ = ["reference_command", "run_reference_jobs"]

PROGRESS_SECONDS = 5.0
POLL_SECONDS = 0.5


def reference_command(spec: JobSpec, conf_file: Path, log_folder: Path) -> list[str]:
    """The command that trains ``spec`` with rl_zoo3 (through :mod:`lit_sb3.zoo.reference.zoo_train`).

    Args:
        spec: the job (``impl="sb3"``).
        conf_file: the zoo-format file holding its entry.
        log_folder: rl_zoo3's ``-f``.
    """
    module, _, env_id = spec.env_id.rpartition(":")
    packages = ["lit_sb3.envs", *([module] if module else [])]  # the suite's own envs (NoVel, invalid actions)
    budget = spec.requested_timesteps or spec.n_timesteps
    return [
        sys.executable, "-m", "lit_sb3.zoo.reference.zoo_train", "--eval-env-steps", str(spec.eval_freq),
        "--algo", spec.algo, "--env", env_id, "--seed", str(spec.seed), "-n", str(budget),
        "--eval-freq", str(spec.eval_freq), "--eval-episodes", str(spec.eval_episodes), "--n-eval-envs", "1",
        "-conf", str(conf_file), "--num-threads", str(spec.torch_threads), "--device", spec.device,
        "-f", str(log_folder), "--vec-env", "dummy", "--verbose", "1", "--gym-packages", *packages,
    ]  # fmt: skip


class _Progress:
    """Progress snapshots of a running reference job, read incrementally (only the lines added since the last
    read) from the monitor files (env steps of the finished training episodes) and from ``evaluations.npz``, so
    that watching costs the job's CPU next to nothing (it shares the job's core)."""

    def __init__(self, folder: Path, spec: JobSpec) -> None:
        self.folder, self.spec = folder, spec
        self.started = time.monotonic()
        self.offsets: dict[Path, int] = {}
        self.steps = 0
        self.returns: list[float] = []
        self.eval_mtime = 0.0
        self.last_eval = math.nan

    def _read_monitors(self) -> None:
        for path in self.folder.glob("*/*/*.monitor.csv"):
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets.get(path, 0))
                    chunk = fh.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            for line in complete.decode("utf-8", errors="replace").splitlines():
                parts = line.split(",")
                try:
                    self.returns.append(float(parts[0]))
                    self.steps += int(float(parts[1]))
                except (ValueError, IndexError):
                    continue  # the JSON header and the column names
        self.returns = self.returns[-100:]

    def _read_evaluations(self) -> None:
        import numpy as np

        for path in self.folder.glob("*/*/evaluations.npz"):
            try:
                mtime = path.stat().st_mtime
                if mtime == self.eval_mtime:
                    continue
                with np.load(path, allow_pickle=False) as data:
                    self.last_eval = float(data["results"][-1].mean())
                self.eval_mtime = mtime
            except (OSError, ValueError, KeyError, IndexError, EOFError):
                pass

    def snapshot(self) -> JobProgress:
        """The job's progress now."""
        self._read_monitors()
        self._read_evaluations()
        elapsed = max(time.monotonic() - self.started, 1e-9)
        last = sum(self.returns) / len(self.returns) if self.returns else math.nan
        steps = min(self.steps, self.spec.n_timesteps)
        return JobProgress(self.spec.job_id, steps, self.spec.n_timesteps, steps / elapsed, last, self.last_eval)


def _tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _run_one(
    spec: JobSpec, store: Any, run_id: str | None, progress: Callable[[JobProgress], None] | None
) -> JobResult:
    import yaml

    from lit_sb3.zoo.reference.importer import import_zoo_run, zoo_job_spec
    from lit_sb3.zoo.reference.zoo_logs import find_zoo_runs, read_zoo_run
    from lit_sb3.zoo.runner import record_failure

    result = JobResult(spec.job_id, spec.name, "FAILED", run_id=run_id)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lit_sb3-reference-") as tmp:
        folder = Path(tmp)
        conf = folder / "hyperparams.yml"
        conf.write_text(yaml.safe_dump({spec.env_id.rpartition(":")[2]: spec.zoo_entry or {}}, sort_keys=False))
        log = folder / "train.log"
        try:
            with open(log, "wb") as out:
                proc = subprocess.Popen(reference_command(spec, conf, folder / "logs"), stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
                last, watch = 0.0, _Progress(folder / "logs", spec)
                while True:
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        break
                    if progress is not None and time.monotonic() - last >= PROGRESS_SECONDS:
                        progress(watch.snapshot())
                        last = time.monotonic()
                    time.sleep(POLL_SECONDS)
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall, cpu = time.monotonic() - started, usage.ru_utime + usage.ru_stime
            sys.stdout.write(log.read_text(errors="replace"))  # the job's log (the launcher keeps it)
            sys.stdout.flush()
            if proc.returncode != 0:
                raise RuntimeError(f"rl_zoo3 train exited with {proc.returncode}: {_tail(log)}")
            folders = find_zoo_runs(folder / "logs")
            if len(folders) != 1:
                raise RuntimeError(f"rl_zoo3 train left {len(folders)} run folders, expected 1")
            run = read_zoo_run(folders[0])
            same = zoo_job_spec(run).job_id == spec.job_id  # the zoo trained the config the job describes
            if store is not None:
                result.run_id = import_zoo_run(run, store, run_id=run_id, spec=spec, wall_seconds=wall,
                                               cpu_seconds=cpu, extra_tags={"lit_sb3.zoo_config_matches": str(same).lower()})  # fmt: skip
            if not same:
                print(f"warning: {spec.name}: the config rl_zoo3 saved resolves to another job than the one asked",
                      flush=True)  # fmt: skip
            means = run.results.mean(axis=1)
            result.status, result.score, result.score_std = "FINISHED", float(means[-1]), float(run.results[-1].std())
            result.env_steps, result.wall_seconds = spec.n_timesteps, wall
            result.fps = spec.n_timesteps / wall if wall > 0 else math.nan
            result.evaluations = [(int(s), float(m)) for s, m in zip(run.timesteps, means)]
        except Exception as exc:  # noqa: BLE001 - the job fails alone, with its reason
            sys.stdout.write(log.read_text(errors="replace") if log.exists() else "")
            record_failure(exc, result, store, None, started, 0)
        except BaseException as exc:
            record_failure(exc, result, store, None, started, 0)
            raise
    return result


def run_reference_jobs(specs: Sequence[JobSpec], store: Any, run_ids: Sequence[str | None],
                       progress: Callable[[JobProgress], None] | None = None,
                       on_result: Callable[[JobResult], None] | None = None) -> list[JobResult]:  # fmt: skip
    """Train and record reference jobs one after the other in this process's children (a launcher unit holds one).

    Args:
        specs: the jobs (``impl="sb3"``).
        store: the tracking store (None: nothing recorded).
        run_ids: their runs.
        progress: receives :class:`~lit_sb3.zoo.worker.protocol.JobProgress` snapshots.
        on_result: called with each result as it ends.
    """
    results = []
    for spec, run_id in zip(specs, run_ids):
        result = _run_one(spec, store, run_id, progress)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results
