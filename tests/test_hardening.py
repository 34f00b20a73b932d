"""Hardening, second pass (issue 27): values that are not numbers, values that only the env can refuse, files
that are not files, folders nobody asked for.

Each case is the CLI in-process from a fresh temp folder: exit status 2, one line on stderr naming the culprit,
refused before anything is tracked (no MLflow database, no Optuna journal, no folder created).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main

RUN = ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--dry-run"]
TUNE = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--n-trials", "1", "--n-timesteps", "256",
        "--n-evaluations", "1"]  # fmt: skip

# (id, argv, text the one line must contain)
CASES = [
    # (6) NaN and infinity are refused by every positive/range check and every float option
    ("run --timeout nan", [*RUN, "--timeout", "nan"], "argument --timeout: expected a finite number, got 'nan'"),
    ("run --timeout inf", [*RUN, "--timeout", "inf"], "argument --timeout: expected a finite number, got 'inf'"),
    ("run --timeout 1e400", [*RUN, "--timeout", "1e400"], "expected a finite number, got '1e400'"),
    ("run --cpus-per-job nan", [*RUN, "--cpus-per-job", "nan"], "argument --cpus-per-job: expected a finite number"),
    ("run --gpus-per-job inf", [*RUN, "--gpus-per-job", "inf"], "argument --gpus-per-job: expected a finite number"),
    ("tune --timeout nan", [*TUNE, "--timeout", "nan"], "argument --timeout: expected a finite number, got 'nan'"),
    ("tune --cpus-per-job -inf", [*TUNE, "--cpus-per-job=-inf"], "argument --cpus-per-job: expected a finite"),
    (
        "learning_rate=1e400",
        [*RUN, "--hyperparams", "learning_rate=1e400"],
        "learning_rate: bad value inf: must be a finite number > 0",
    ),
    ("gamma=nan", [*RUN, "--hyperparams", "gamma=.nan"], "gamma: bad value nan: must be in [0, 1]"),
    ("ent_coef=inf", [*RUN, "--hyperparams", "ent_coef=.inf"], "ent_coef: bad value inf: must be a finite number >= 0"),
    ("max_grad_norm=inf", [*RUN, "--hyperparams", "max_grad_norm=1e999"], "max_grad_norm: bad value inf"),
    ("schedule lin_inf", [*RUN, "--hyperparams", "learning_rate=lin_1e400"], "learning_rate: bad value"),
    # (7) refused at planning, not inside a job
    (
        "seed-list -5",
        [*RUN, "--seed-list", "-5"],
        "--seed-list: seed -5 is out of range; seeds must be in [0, 4294967295]",
    ),
    ("seed-list huge", [*RUN, "--seed-list", "0,99999999999"], "--seed-list: seed 99999999999 is out of range"),
    ("seeds huge", [*RUN, "--seeds", "99999999999"], "--seeds must be <= 100,000"),
    ("tune --seed -1", [*TUNE, "--seed", "-1"], "--seed must be in [0, 4294967295]"),
    (
        "env_kwargs foo",
        [*RUN, "--hyperparams", "env_kwargs=dict(foo=1)"],
        "--hyperparams: env_kwargs: CartPole-v1 (gymnasium.envs.classic_control.cartpole:CartPoleEnv) takes no "
        "argument 'foo'; accepted: sutton_barto_reward, render_mode",
    ),
    (
        "env_kwargs did you mean",
        [*RUN, "--hyperparams", "env_kwargs=dict(sutton_barto_rewards=True)"],
        "takes no argument 'sutton_barto_rewards' (did you mean 'sutton_barto_reward'?)",
    ),
    (
        "CnnPolicy on CartPole",
        [*RUN, "--hyperparams", "policy=CnnPolicy"],
        "--hyperparams: policy: CnnPolicy (NatureCNN) needs image observations (a 3-D Box); CartPole-v1 has Box",
    ),
    (
        "MultiInputPolicy on CartPole",
        [*RUN, "--hyperparams", "policy=MultiInputPolicy"],
        "policy: MultiInputPolicy (CombinedExtractor) needs Dict observations",
    ),
    (
        "TimeLimit -1",
        [*RUN, "--hyperparams", "env_wrapper=[{gymnasium.wrappers.TimeLimit: {max_episode_steps: -1}}]"],
        "env_wrapper: env wrapper 'gymnasium.wrappers.TimeLimit': max_episode_steps: bad value -1: must be >= 1",
    ),
    (
        "wrapper refusing the env",
        [*RUN, "--hyperparams", "env_wrapper=[rl_zoo3.wrappers.HistoryWrapper]"],
        "env_wrapper: cannot wrap CartPole-v1: ValueError: HistoryWrapper needs Box observation and action spaces",
    ),
    # (5) files are checked (regular, size) before they are read
    ("config /dev/zero", [*RUN, "--config", "/dev/zero"], "--config /dev/zero: config file is not a regular file"),
    ("config folder", [*RUN, "--config", "."], "--config .: config file is not a regular file"),
    (
        "config sparse",
        [*RUN, "--config", "@sparse"],
        "config file too large (over 1,048,576 bytes): 1,500,000,000 bytes",
    ),
    ("search space /dev/zero", [*TUNE, "--search-space", "/dev/zero"], "search space file is not a regular file"),
    ("search space sparse", [*TUNE, "--search-space", "@sparse"], "search space file too large (over 1,048,576"),
]


def _argv(argv: list[str], folder: Path) -> list[str]:
    out = []
    for arg in argv:
        if arg == "@sparse":  # 1.5 GB that take no disk (and must take no memory)
            path = folder / "sparse.yml"
            with path.open("wb") as fh:
                fh.truncate(1_500_000_000)
            arg = str(path)
        out.append(arg)
    return out


def _nothing_created(folder: Path, before: set[str]) -> None:
    assert set(os.listdir(folder)) == before, sorted(set(os.listdir(folder)) - before)


@pytest.mark.parametrize("argv,culprit", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_at_once_one_line_exit_2(argv: list[str], culprit: str, in_tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    argv = _argv(argv, in_tmp_path)
    before = set(os.listdir(in_tmp_path))
    capsys.readouterr()
    t0 = time.monotonic()
    code = main(argv)
    seconds = time.monotonic() - t0
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (code, err, captured.out[-500:])
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"bench {argv[0]}: error: "), err
    assert culprit in err, err
    assert seconds < 30, seconds  # planning at most (imports and one gym.make), never a job
    _nothing_created(in_tmp_path, before)


@pytest.mark.parametrize(
    "hyperparams,culprit",
    [
        (["env_kwargs=dict(foo=1)"], "takes no argument 'foo'"),
        (["policy=CnnPolicy"], "CnnPolicy (NatureCNN) needs image observations"),
        (["env_wrapper=[{gymnasium.wrappers.TimeLimit: {max_episode_steps: -1}}]"], "max_episode_steps: bad value -1"),
        (["learning_rate=1e400"], "learning_rate: bad value inf"),
    ],  # fmt: skip
)
def test_real_run_refused_before_any_mlflow_run(hyperparams: list[str], culprit: str, in_tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Not a dry run: each of these used to leave a FAILED run; now no database (so no run) is created."""
    argv = ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--n-timesteps", "256", "--seed-list", "3",
            "--hyperparams", *hyperparams]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and culprit in err, err
    assert not (in_tmp_path / "mlflow.db").exists() and not (in_tmp_path / "mlartifacts").exists()


def test_env_kwargs_the_constructor_takes_still_plan(in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The signature check lets through what the env takes (its own and gym.make's arguments)."""
    argv = [*RUN, "--hyperparams", "env_kwargs=dict(sutton_barto_reward=True, max_episode_steps=50)"]
    assert main(argv) == 0, capsys.readouterr().err


def test_tune_storage_in_a_missing_folder_creates_nothing(in_tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """(9) --storage naming a journal in a folder that does not exist: one line, exit 2, no folder made."""
    missing = in_tmp_path / "nonexistent_dir"
    capsys.readouterr()
    assert main([*TUNE, "--storage", str(missing / "x.journal")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"folder {str(missing)!r} does not exist" in err, err
    assert not missing.exists()
    assert not (in_tmp_path / "mlflow.db").exists()
