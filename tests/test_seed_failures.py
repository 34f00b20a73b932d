"""A seed of a seed batch fails alone, whatever fails (issue 35, item 2): its callback (a hook, its evaluation), its
logger, or the batch's model itself (its update), in a real K = 4 PPO batch on CartPole recorded in MLflow on
sqlite, against the same seeds' separate runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch as th

from tests.mlflow_store import client as _client
from tests.mlflow_store import copy_store as _store
from tests.mlflow_store import runs as _runs
from tests.tolerances import model_parameter_atol

SEEDS = [0, 1, 2, 3]
BUDGET, EVAL_FREQ = 2048, 512
OVERRIDES = {"n_envs": "1", "n_steps": "64", "batch_size": "32", "n_epochs": "2",
             "policy_kwargs": "dict(net_arch=[32, 32])"}  # fmt: skip


def _jobs(seeds: list[int]) -> list[Any]:
    from lit_sb3.zoo.jobs import plan_grid

    jobs, _ = plan_grid(["ppo"], ["CartPole-v1"], seeds, n_timesteps=BUDGET, eval_freq=EVAL_FREQ, eval_episodes=2,
                        overrides=OVERRIDES)  # fmt: skip
    return jobs


def _by_seed(uri: str, experiment: str) -> dict[int, Any]:
    runs = _runs(uri, experiment)
    assert len({r.data.tags["lit_sb3.seed"] for r in runs}) == len(runs), "one run per seed"
    return {int(r.data.tags["lit_sb3.seed"]): r for r in runs}


def _model(uri: str, run: Any, folder: Path) -> Any:
    """The run's saved ``model.zip``, loaded by the single-seed class."""
    from lit_sb3 import PPO

    path = _client(uri).download_artifacts(run.info.run_id, "model.zip", str(folder / run.info.run_id))
    return PPO.load(path)


def _history(uri: str, run: Any, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in _client(uri).get_metric_history(run.info.run_id, key)]


@pytest.fixture(scope="module")
def separate(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> tuple[str, dict[int, Any], Path]:
    """Seeds 0, 2 and 3 each run alone (experiment ``separate``): ``(uri, runs by seed, folder)``."""
    from lit_sb3.zoo.runner import run_jobs
    from lit_sb3.zoo.tracking import open_tracking

    folder = tmp_path_factory.mktemp("seed-failures")
    uri = _store(folder, mlflow_template)
    target = open_tracking(uri, "separate").target
    for job in _jobs([0, 2, 3]):
        (result,) = run_jobs([job], target)
        assert result.status == "FINISHED", result.failure_reason
    return uri, _by_seed(uri, "separate"), folder


def _assert_healthy_seeds_match(uri: str, runs: dict[int, Any], separate: tuple[str, dict[int, Any], Path],
                                exact: bool) -> None:  # fmt: skip
    """Seeds 0, 2, 3 FINISHED with the full budget; their models equal their separate runs' (``exact``: bitwise;
    else within ``model_parameter_atol``, the reassociation bound of tests/tolerances.py for the run's updates, lr
    and Adam; a flip of a deterministic CartPole action needs a logit margin below that bound, so the scores, sums
    of such actions' rewards, are then equal too)."""
    sep_uri, sep_runs, folder = separate
    for seed in (0, 2, 3):
        run, alone = runs[seed], sep_runs[seed]
        assert run.info.status == "FINISHED", run.data.tags.get("lit_sb3.failure_reason")
        assert run.data.metrics["time/total_timesteps"] == BUDGET
        assert run.data.metrics["final/mean_reward"] == alone.data.metrics["final/mean_reward"], seed
        mine, theirs = _model(uri, run, folder / "mine"), _model(sep_uri, alone, folder / "theirs")
        atol = 0.0 if exact else model_parameter_atol(theirs)
        assert atol < 1e-3  # far below what a wrong seed or a lost update moves (~lr per update)
        for (name, a), (_, b) in zip(mine.policy.state_dict().items(), theirs.policy.state_dict().items()):
            assert th.allclose(a, b, rtol=0.0, atol=atol), (seed, name, (a - b).abs().max().item(), atol)


def test_a_seed_whose_callback_raises_fails_alone_the_others_equal_their_runs(in_tmp_path: Path, mlflow_template: Path,
                                                  separate: tuple[str, dict[int, Any], Path]) -> None:  # fmt: skip
    """Seed 1's evaluation hook (one of its own callbacks) raises at its second evaluation: seed 1 is FAILED with
    that reason and its traceback, at that step; seeds 0, 2, 3 go on in the same batch and end as their separate
    runs (up to reassociation: the batch's stacked update against each run's own)."""
    from lit_sb3.zoo.runner import SEED_BATCH_TAG, run_jobs
    from lit_sb3.zoo.tracking import open_tracking

    uri = _store(in_tmp_path, mlflow_template)
    target = open_tracking(uri, "callback").target

    def broken_hook(step: int, mean_reward: float) -> None:
        if step >= 2 * EVAL_FREQ:
            raise RuntimeError("seed 1's hook broke")

    results = run_jobs(_jobs(SEEDS), target, seed_hooks=[[], [broken_hook], [], []])
    assert [r.status for r in results] == ["FINISHED", "FAILED", "FINISHED", "FINISHED"]
    assert results[1].failure_reason == f"callback raised at step {2 * EVAL_FREQ}: RuntimeError: seed 1's hook broke"
    assert results[1].env_steps == 2 * EVAL_FREQ
    runs = _by_seed(uri, "callback")
    assert {r.data.tags[SEED_BATCH_TAG] for r in runs.values()} == {"4"}  # one model all along
    assert runs[1].info.status == "FAILED"
    assert runs[1].data.tags["lit_sb3.failure_reason"] == results[1].failure_reason
    text = Path(_client(uri).download_artifacts(runs[1].info.run_id, "traceback.txt", str(in_tmp_path))).read_text()
    assert "seed 1's hook broke" in text and "broken_hook" in text
    _assert_healthy_seeds_match(uri, runs, separate, exact=False)


def test_an_update_that_raises_reruns_the_seeds_alone_equal_to_their_runs(in_tmp_path: Path, mlflow_template: Path,
                                                                  separate: tuple[str, dict[int, Any], Path],
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The K = 4 model's update raises at env step 1024 (injected into PPO's real update: no real update of this
    library raises on data, a seed's non-finite values are masked instead; what remains is what the stacked
    computation itself raises, e.g. memory, which names no seed). No seed fails for it: each seed still running is
    trained again alone, from the start, on its own run. Seeds 0, 2, 3 then ARE their separate runs (bitwise the
    same models and scores); seed 1, whose own update also raises, fails alone with its own reason. The runs hold
    each metric point once: the batch's points before the failure, the rerun's after."""
    from lit_sb3 import PPO
    from lit_sb3.zoo.runner import BATCH_RAISED_TAG, SEED_BATCH_TAG, run_jobs
    from lit_sb3.zoo.tracking import open_tracking

    update = PPO.train

    def faulty_update(self: Any, mode: bool | None = None) -> Any:
        if mode is None and self.num_timesteps >= 2 * EVAL_FREQ:
            if self.n_seeds > 1:
                raise RuntimeError("the stacked update broke")
            if self.seeds == [1]:
                raise RuntimeError("seed 1's own update broke")
        return update(self, mode)

    monkeypatch.setattr(PPO, "train", faulty_update)
    uri = _store(in_tmp_path, mlflow_template)
    target = open_tracking(uri, "update").target
    results = run_jobs(_jobs(SEEDS), target)
    out = capsys.readouterr().out
    assert ("seed batch of 4: its model raised at env step 1024 (RuntimeError: the stacked update broke); its 4 "
            "running seed(s) run again alone") in out, out  # fmt: skip
    assert [r.status for r in results] == ["FINISHED", "FAILED", "FINISHED", "FINISHED"]
    assert results[1].failure_reason == "RuntimeError: seed 1's own update broke"
    runs = _by_seed(uri, "update")
    assert runs[1].info.status == "FAILED"
    assert runs[1].data.tags["lit_sb3.failure_reason"] == "RuntimeError: seed 1's own update broke"
    for run in runs.values():
        assert run.data.tags[SEED_BATCH_TAG] == "1"
        assert run.data.tags[BATCH_RAISED_TAG] == "RuntimeError: the stacked update broke"
    _assert_healthy_seeds_match(uri, runs, separate, exact=True)
    sep_uri, sep_runs, _ = separate
    for seed in (0, 2, 3):
        for key in ("eval/mean_reward", "train/value_loss"):
            mine, theirs = _history(uri, runs[seed], key), _history(sep_uri, sep_runs[seed], key)
            assert [s for s, _ in mine] == [s for s, _ in theirs], (seed, key)  # each point once, none missing
            rerun = [(s, v) for s, v in mine if s > 2 * EVAL_FREQ]
            assert rerun and rerun == [(s, v) for s, v in theirs if s > 2 * EVAL_FREQ], (seed, key)


def test_a_seed_whose_store_refuses_its_metrics_fails_alone(in_tmp_path: Path, mlflow_template: Path) -> None:
    """Per-seed logger routing: seed 1's MLflow run is deleted under it, so its store refuses the next write; that
    seed's logger fails it with the store's reason, seed 0's logger goes on writing to its own run."""
    from lit_sb3.loggers import SeedRoutingLogger
    from lit_sb3.zoo.tracking import connect, job_logger, open_tracking, run_environment_tags
    from lit_sb3.zoo.worker.guards import SeedLogger

    uri = _store(in_tmp_path, mlflow_template)
    target = open_tracking(uri, "logger").target
    store = connect(target)
    jobs = _jobs([0, 1])
    run_ids = [store.create_job_run(job, None, run_environment_tags()) for job in jobs]
    failures: dict[int, str] = {}
    loggers = [
        SeedLogger(
            job_logger(target, run_id, flush_seconds=0),
            lambda exc, text, i=i: failures.setdefault(i, f"{type(exc).__name__}: {exc}"),
        )  # fmt: skip
        for i, run_id in enumerate(run_ids)
    ]
    routing = SeedRoutingLogger(loggers)
    routing.log_metrics({"seed0/train/loss": 1.0, "seed1/train/loss": 2.0}, step=64)
    _client(uri).delete_run(run_ids[1])
    routing.log_metrics({"seed0/train/loss": 0.5, "seed1/train/loss": 1.5}, step=128)
    assert list(failures) == [1] and "MlflowException" in failures[1], failures
    assert _history(uri, _client(uri).get_run(run_ids[0]), "train/loss") == [(64, 1.0), (128, 0.5)]
