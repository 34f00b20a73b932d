"""The command line a grid records is derived from the parser: run again, it plans the same jobs, and it names
every flag the user gave (Ray's and the per-job resources included). Real grids: one on a real local Ray cluster,
one on the process pool, tracked in a real MLflow sqlite store."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import build_parser, command_line, main
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs

TINY = ["--algos", "a2c", "--envs", "CartPole-v1", "--seeds", "2", "--n-timesteps", "256", "--eval-freq", "128",
        "--eval-episodes", "2", "--eval-seed-offset", "7", "--log-interval", "2", "--torch-threads", "2",
        "--seed-batch", "1", "--timeout", "300", "--progress-interval", "5",
        "--hyperparams", "n_steps=64", "n_envs=1", "policy_kwargs=dict(net_arch=[16])"]  # fmt: skip


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _planned(args: argparse.Namespace) -> list[str]:
    """The job ids ``bench run`` plans for ``args`` (the identities of its jobs)."""
    from lit_sb3.zoo.pipeline import plan

    jobs, _, _, _ = plan(args)
    return sorted(j.job_id for j in jobs)


def _recorded(uri: str, experiment: str) -> str:
    """The command line recorded on the experiment's one grid run."""
    (grid,) = _runs(uri, experiment, "grid", must_exist=True)
    return grid.data.params["command"]


def _check(argv: list[str], uri: str, experiment: str) -> None:
    """The recorded command: parsed again it gives the same options and plans the same jobs, which are the jobs
    the grid ran; every flag of ``argv`` is in it."""
    recorded = _recorded(uri, experiment)
    words = shlex.split(recorded)
    assert words[:2] == ["bench", "run"], recorded
    missing = [w for w in argv if w.startswith("--") and w not in words]
    assert missing == [], f"{missing} missing from {recorded!r}"
    again, given = _parse(words[1:]), _parse(argv)
    assert vars(again) == vars(given)
    ran = sorted(r.data.tags["lit_sb3.job_id"] for r in _runs(uri, experiment))
    assert _planned(again) == _planned(given) == ran and len(ran) == 2


def test_ray_grid_command_line_plans_the_same_jobs(in_tmp_path: Path, mlflow_template: Path) -> None:
    """A grid on a real local Ray cluster (its address given, fractional CPUs and GPUs per job on a cluster that
    declares one GPU; the jobs run on the CPU)."""
    ray = pytest.importorskip("ray")

    assert os.environ.get("PYTHONPATH"), "conftest sets PYTHONPATH so that Ray workers import tests.envs"
    uri = _store(in_tmp_path, mlflow_template)
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        address = ray.get_runtime_context().gcs_address
        argv = ["run", "--launcher", "ray", "--ray-address", address, "--cpus-per-job", "0.5", "--gpus-per-job",
                "0.25", "--jobs", "2", "--tracking-uri", uri, "--experiment", "ray-cmd", *TINY]  # fmt: skip
        assert main(argv) == 0
        _check(argv, uri, "ray-cmd")  # while the cluster is up: planning checks that --ray-address answers
    finally:
        ray.shutdown()
    assert f"--ray-address {address}" in _recorded(uri, "ray-cmd")


def test_pool_grid_command_line_plans_the_same_jobs(in_tmp_path: Path, mlflow_template: Path) -> None:
    """The same grid on the local process pool; ``--launcher local`` is its default and is left out, the parsed
    options being equal all the same."""
    uri = _store(in_tmp_path, mlflow_template)
    argv = ["run", "--jobs", "2", "--start-method", "forkserver", "--tracking-uri", uri, "--experiment", "pool-cmd",
            *TINY, "--config", str(in_tmp_path / "extra config.yml")]  # fmt: skip
    (in_tmp_path / "extra config.yml").write_text("CartPole-v1:\n  n_envs: 1\n")
    assert main(argv) == 0
    _check(argv, uri, "pool-cmd")
    assert "--launcher" not in shlex.split(_recorded(uri, "pool-cmd"))
    given = _parse([*argv, "--launcher", "local"])
    assert command_line(given) == _recorded(uri, "pool-cmd")
