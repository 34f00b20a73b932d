"""SB3's console: ``verbose=1`` prints SB3's progress table (the same keys, grouping and order as SB3 prints for the
same run, at the same dumps), ``verbose=0`` prints nothing, and every value of one dump is logged at one env step."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from lit_sb3 import PPO, SAC
from lit_sb3.core.logger import console_table

sb3 = pytest.importorskip("stable_baselines3")

_ROW = re.compile(r"^\| (\S.*?) +\| (.*?) *\|$")


def _tables(text: str) -> list[list[str]]:
    """The key column of each printed table (tag rows ``rollout/`` and indented keys ``   ep_rew_mean``)."""
    tables: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if set(line) == {"-"}:
            inside = not inside
            if inside:
                tables.append([])
            continue
        m = _ROW.match(line)
        if inside and m:
            tables[-1].append(line[2 : line.index(" |")].rstrip())
    return tables


def _runs(capsys: pytest.CaptureFixture[str], name: str, verbose: int) -> tuple[str, str]:
    """The same run with SB3 and with lit_sb3: (SB3's output, ours)."""
    outputs = []
    for module in (sb3, None):
        cls = {"ppo": PPO, "sac": SAC}[name] if module is None else getattr(module, name.upper())
        if name == "ppo":
            cls("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=2, seed=0, verbose=verbose).learn(128)
        else:  # an episode of Pendulum is 200 steps: one dump per episode
            kwargs = {"learning_starts": 150, "batch_size": 16, "seed": 0, "verbose": verbose}
            cls("MlpPolicy", "Pendulum-v1", **kwargs).learn(400, log_interval=1)
        outputs.append(capsys.readouterr().out)
    return outputs[0], outputs[1]


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_verbose_1_prints_sb3s_table(capsys: pytest.CaptureFixture[str], name: str) -> None:
    theirs, ours = _runs(capsys, name, verbose=1)
    expected, got = _tables(theirs), _tables(ours)
    assert len(expected) == 2, theirs  # PPO: after each of 2 rollouts; SAC: after each of 2 episodes
    assert got == expected  # the same keys, grouped under the same tags, in the same order, at the same dumps
    assert "|    total_timesteps |" in ours and "| train/" in ours
    # the layout: every line of a table as wide as its dashes
    for table in ours.split("\n-")[1:]:
        lines = [x for x in ("-" + table).splitlines() if x.startswith(("|", "-"))]
        assert len({len(x) for x in lines}) == 1, lines


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_verbose_0_prints_nothing(capsys: pytest.CaptureFixture[str], name: str) -> None:
    theirs, ours = _runs(capsys, name, verbose=0)
    assert theirs == "" and ours == ""


def test_console_table_format() -> None:
    """Character for character SB3's ``HumanOutputFormat`` on the same values: floats as %-8.3g, ints as they are,
    a value excluding ``stdout`` left out."""
    import io

    from stable_baselines3.common.logger import HumanOutputFormat

    values = {"time/fps": 35, "rollout/ep_rew_mean": -1372.5, "train/n_updates": 699, "train/x": 1.0, "hidden/y": 2.0}
    excluded = {"hidden/y": ("stdout",)}
    out = io.StringIO()
    HumanOutputFormat(out).write(values, {k: excluded.get(k) for k in values})
    text = console_table(values, excluded)
    assert text is not None and text + "\n" == out.getvalue()
    assert "hidden" not in text and "|    fps         | 35        |" in text
    assert console_table({"only/hidden": 1.0}, {"only/hidden": ("log",)}) is None


def test_train_and_rollout_of_one_dump_share_one_step(tmp_path: Path) -> None:
    """SB3 dumps everything at the dump's env step: train/* at 200 and 400 with rollout/* (an off-policy update
    runs one env step before the episode ends, and used to be logged there: 199 against 200)."""
    from lightning.pytorch.loggers import CSVLogger

    from lit_sb3 import RLEnvDataModule, RLTrainer

    logger = CSVLogger(tmp_path, name="csv", version="")
    model = SAC("MlpPolicy", seed=0, batch_size=16, learning_starts=150)
    RLTrainer(max_steps=400, logger=logger, log_every_n_steps=1).fit(model, datamodule=RLEnvDataModule("Pendulum-v1"))
    rows = list(csv.DictReader((Path(logger.log_dir) / "metrics.csv").open()))
    dumps = [r for r in rows if r.get("rollout/ep_rew_mean")]
    assert [int(r["step"]) for r in dumps] == [200, 400]
    assert all(r.get("train/actor_loss") and r.get("time/fps") for r in dumps)  # one row: one step
    # the only other train/* row: the values of the update after the last dump, flushed at the end (400)
    assert {int(r["step"]) for r in rows if r.get("train/actor_loss")} == {200, 400}
