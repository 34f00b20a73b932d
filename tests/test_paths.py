"""Names that become paths stay in their folder: path-like or empty ``--experiment``/``--study-name`` are
refused (exit code 2, one line, nothing written), derived folder names are single safe components."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main

ESCAPES = ["../../x", "..", "/tmp/abs-experiment", "a/b", "a\\b", "x\ny", ""]


def _refused(argv: list[str], folder: Path, capsys: pytest.CaptureFixture[str], needle: str) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and needle in lines[0], err
    assert list(folder.iterdir()) == [], sorted(p.name for p in folder.rglob("*"))  # nothing written
    return lines[0]


@pytest.mark.parametrize("name", ESCAPES)
def test_run_refuses_path_like_experiment(name: str, in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--n-timesteps", "256", "--experiment", name]
    line = _refused(argv, in_tmp_path, capsys, "--experiment")
    assert ("must not be empty" in line) if name == "" else ("cannot name a folder" in line)
    assert not Path("/tmp/abs-experiment").exists()


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs-report", ""])
def test_report_refuses_path_like_experiment(name: str, in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["report", "--experiment", name], in_tmp_path, capsys, "--experiment")
    assert not Path("/tmp/abs-report").exists() and not (in_tmp_path.parent.parent / "x").exists()


@pytest.mark.parametrize(("flag", "name"), [("--study-name", "../s"), ("--study-name", "/tmp/s"),
                                            ("--study-name", ""), ("--experiment", "../e"), ("--experiment", "")])  # fmt: skip
def test_tune_refuses_path_like_names(
    flag: str, name: str, in_tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", "--algo", "ppo", "--env", "CartPole-v1", "--n-trials", "1", "--n-timesteps", "256", flag, name]
    _refused(argv, in_tmp_path, capsys, flag)
    if flag == "--study-name":  # --show only reads the study, from a file the name also names
        _refused(["tune", "--show", flag, name], in_tmp_path, capsys, flag)


def test_derived_folder_names_stay_inside() -> None:
    from lit_sb3.zoo.tracking import default_artifact_location, default_experiment_name, folder_name, report_folder

    for name in ("..", ".", "../../x", "/abs/x", "a/b", "", "...", "ok-name_1.2"):
        safe = folder_name(name)
        assert safe not in ("", ".", "..") and "/" not in safe and "\\" not in safe, (name, safe)
        assert Path(safe).name == safe
        assert report_folder(name).parent == Path("reports")
        location = Path(default_artifact_location("sqlite:////data/mlflow.db", name) or "")
        assert location.parent == Path("/data/mlartifacts"), location
    assert folder_name("ok-name_1.2") == "ok-name_1.2"
    assert "/" not in default_experiment_name("ALE/Pong-v5,tests.envs.faulty:Faulty-v0")
