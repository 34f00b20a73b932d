"""A wheel built from the checkout works outside it: ``bench list``, ``bench show-config`` and a one-job
``bench run`` + ``bench report`` from a temporary folder, with the zoo configs, suites and score table read
from the installed package (``lit_sb3/zoo/_data``), not from the repository."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "lit_sb3", "zoo_configs", "benchmarks")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"{time.monotonic() - t0:6.1f} s  {' '.join(cmd[1:4])}")  # shown with -s: where the time goes
    assert out.returncode == 0, f"{' '.join(cmd)} -> {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def test_wheel_runs_outside_the_checkout(tmp_path: Path, mlflow_template: Path) -> None:
    # 1. build the wheel from a copy of the checkout (the build writes build/ and *.egg-info next to its sources)
    src = tmp_path / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("LIT_SB3_")}
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
         tmp_path, env)  # fmt: skip
    (wheel,) = wheels.glob("lit_sb3-*.whl")

    # 2. a throw-away venv that sees the installed dependencies, not the editable lit_sb3 of this checkout:
    # the parent's site-packages are added as plain paths (their .pth files, the editable finder's among
    # them, are not processed), and the wheel is installed into the venv's own site-packages.
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home)
    python = home / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        tmp_path, env).stdout.strip())  # fmt: skip
    (purelib / "zz_parent_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(purelib), str(wheel)],
         tmp_path, env)  # fmt: skip
    bench = [str(python), str(purelib / "bin" / "bench")]  # the wheel's console script, run by the venv

    # 3. from a folder outside the repository
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(mlflow_template, work / "mlflow.db")  # the default sqlite:///mlflow.db, already migrated
    where = _run([str(python), "-c", "import lit_sb3.zoo.data as d; print(d.__file__); print(d.data_path('zoo_configs'))"],
                 work, env).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(purelib) for p in where), where  # the wheel's code and data, not the checkout's
    assert (Path(where[1]) / "ppo.yml").is_file()
    assert "ppo" in _run([*bench, "list"], work, env).stdout
    shown = _run([*bench, "show-config", "--algo", "ppo", "--env", "CartPole-v1"], work, env).stdout
    assert "n_steps" in shown and "CartPole-v1" in shown
    _run([*bench, "run", "--algos", "ppo", "--envs", "CartPole-v1", "--seeds", "1", "--jobs", "1", "--n-timesteps",
          "256", "--eval-freq", "128", "--eval-episodes", "1", "--hyperparams", "n_steps=64", "n_envs=1",
          "--experiment", "wheel"], work, env)  # fmt: skip
    _run([*bench, "report", "--experiment", "wheel", "--reps", "1000"], work, env)
    assert (work / "reports" / "wheel" / "report.md").is_file()


@pytest.fixture(autouse=True)
def _no_checkout_build_dirs() -> Iterator[None]:
    """Nothing is built inside the checkout."""
    before = {p.name for p in ROOT.iterdir()}
    yield
    assert {p.name for p in ROOT.iterdir()} - before == set()
