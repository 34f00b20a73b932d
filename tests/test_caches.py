"""Caches that cannot change results: a planted or altered entry of the plan memo, the probe memo or the MLflow store
template is ignored (the result equals an unplanted run's), and a folder others can write is not used at all."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lit_sb3.zoo.plan_cache import PlanCache
from tests.test_noop_rerun import _plan


def _planted(entry: Path, mac: str | None) -> None:
    """Rewrite a plan-memo entry with another learning rate, gamma and budget (``mac``: kept, forged or absent)."""
    data = json.loads(entry.read_text())
    payload = data["payload"]
    config = json.loads(payload["config"]) if isinstance(payload.get("config"), str) else payload.get("config")
    if isinstance(config, dict):
        config.update(learning_rate=0.5, gamma=0.1)
        payload["config"] = json.dumps(config) if isinstance(payload["config"], str) else config
    payload["budget"] = 7
    planted = {"payload": payload} if mac is None else {"payload": payload, "mac": mac}
    entry.write_text(json.dumps(planted))


@pytest.mark.parametrize("mac", ["kept", "forged", None])
def test_planted_plan_entry_is_ignored(tmp_path: Path, mac: str | None) -> None:
    """An entry altered after it was recorded (its MAC kept), one sealed with another key, or one without a MAC is a
    miss: the plan equals the unplanted one, and the entry is recorded anew."""
    folder = tmp_path / "cache" / "plans"
    kwargs = dict(algos=("sac",), envs=("Pendulum-v1",))
    expected = _plan(PlanCache((), None, 5000, folder=folder), **kwargs)
    (entry,) = folder.glob("*.json")
    original = json.loads(entry.read_text())
    _planted(entry, {"kept": original["mac"], "forged": "0" * 64, None: None}[mac])
    cache = PlanCache((), None, 5000, folder=folder)
    assert _plan(cache, **kwargs) == expected and cache.misses == 1 and cache.hits == 0
    assert json.loads(entry.read_text()) == original
    again = PlanCache((), None, 5000, folder=folder)
    assert _plan(again, **kwargs) == expected and again.hits == 1


def test_a_cache_folder_others_can_write_is_not_used(tmp_path: Path) -> None:
    """A memo folder (or its root) writable by the group or others, or an entry another user could have replaced,
    is neither read nor written."""
    root = tmp_path / "cache"
    folder = root / "plans"
    kwargs = dict(algos=("ppo",), envs=("CartPole-v1",))
    expected = _plan(PlanCache((), None, 5000, folder=folder), **kwargs)
    for path, mode in ((folder, 0o777), (root, 0o777), (next(folder.glob("*.json")), 0o666)):
        before = path.stat().st_mode
        path.chmod(mode)
        cache = PlanCache((), None, 5000, folder=folder)
        assert _plan(cache, **kwargs) == expected and cache.hits == 0, path
        path.chmod(before)
    (root / "key").chmod(0o644)  # a readable MAC key is no key: nothing verifies
    cache = PlanCache((), None, 5000, folder=folder)
    assert _plan(cache, **kwargs) == expected and cache.hits == 0


def test_planted_probe_entry_is_ignored(tmp_path: Path, monkeypatch, capsys) -> None:
    """``show-config`` prints the computed value, not one planted in its memo."""
    from lit_sb3.zoo.cli import main

    monkeypatch.setenv("LIT_SB3_CACHE_DIR", str(tmp_path))
    argv = ["show-config", "--algo", "ppo", "--env", "CartPole-v1"]
    assert main(argv) == 0
    expected = capsys.readouterr().out
    (entry,) = (tmp_path / "probes").glob("show-config-*.json")
    text = entry.read_text()
    assert "0.98" in text  # PPO's CartPole gae_lambda in the zoo file
    entry.write_text(text.replace("0.98", "0.12345"))  # the MAC kept: it no longer matches
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out == expected and "0.12345" not in out


def test_planted_mlflow_template_is_ignored(tmp_path: Path, monkeypatch) -> None:
    """A store with runs put in place of the template (sealed or not) is not copied: the new store is made by MLflow
    and empty, and a fresh ``bench run`` has everything to do."""
    from lit_sb3.zoo.tracking import open_tracking
    from lit_sb3.zoo.tracking.template import template_path, verified_template

    monkeypatch.setenv("LIT_SB3_CACHE_DIR", str(tmp_path / "cache"))
    first = tmp_path / "a"
    first.mkdir()
    monkeypatch.chdir(first)
    store = open_tracking("sqlite:///mlflow.db", "exp")
    store.end_run(store.create_run("job", "s0 ppo x", {"lit_sb3.job_id": "x"}))
    template = template_path()
    assert template is not None and template.is_file()
    for sealed in (True, False):
        planted = (first / "mlflow.db").read_bytes()  # a store holding a finished job
        template.write_bytes(planted)
        if not sealed:
            template.with_name(template.name + ".seal").unlink(missing_ok=True)
        folder = tmp_path / f"new-{sealed}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        new = open_tracking("sqlite:///mlflow.db", "exp")
        assert new.finished_job_ids() == set()
        with sqlite3.connect(folder / "mlflow.db") as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone()[0] <= 1  # at most its own parent, none planted
            names = {r[0] for r in db.execute("SELECT name FROM experiments")}
        assert names == {"Default", "exp"}
        data = verified_template(template)  # kept anew from the store MLflow just made: empty again
        assert data is not None and data != planted


def test_sealed_template_is_copied_only_when_mlflow_reads_it_empty(tmp_path: Path, monkeypatch) -> None:
    """The check behind the seal, through MLflow's client: a kept empty store is copied (its Default experiment
    pointed at the new folder); a sealed store that holds a run, or one of another schema revision, is not."""
    from lit_sb3.zoo.tracking import open_tracking
    from lit_sb3.zoo.tracking.template import restore_template, save_template, template_path

    monkeypatch.setenv("LIT_SB3_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    store = open_tracking("sqlite:///mlflow.db", "exp")  # made by MLflow and kept as the template
    template = template_path()
    assert template is not None and template.is_file()
    (tmp_path / "new").mkdir()
    monkeypatch.chdir(tmp_path / "new")
    assert restore_template(tmp_path / "new" / "copy.db")
    with sqlite3.connect(tmp_path / "new" / "copy.db") as db:
        assert db.execute("SELECT artifact_location FROM experiments").fetchall() == [
            (str((tmp_path / "new" / "mlruns" / "0").resolve()),)
        ]
    store.end_run(store.create_run("job", "s0 ppo x", {"lit_sb3.job_id": "x"}))
    revision = tmp_path / "revision.db"
    with sqlite3.connect(revision) as db, sqlite3.connect(template) as src:
        src.backup(db)
        db.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    for sealed in (tmp_path / "mlflow.db", revision):  # a store with a run; an empty one of another revision
        template.unlink()
        save_template(sealed)  # sealed with this user's key, as a kept template is
        assert template.is_file()
        target = tmp_path / "new" / f"from-{sealed.stem}.db"
        assert not restore_template(target) and not target.exists()
