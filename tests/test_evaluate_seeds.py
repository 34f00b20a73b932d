"""Lockstep evaluation of a seed batch (:func:`lit_sb3.core.evaluation.evaluate_seeds` through the stacked policy,
``predict_stacked``): each seed's episode returns are those of ``evaluate_policy`` on its own member and env."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from lit_sb3 import DQN, PPO, SAC, RLEnvDataModule, RLTrainer, SeedBatch
from lit_sb3.core.evaluation import evaluate_policy, evaluate_seeds
from lit_sb3.vec_env import make_vec_env
from tests.tolerances import return_rtol

th.set_num_threads(1)

SEEDS = [0, 1, 2]
CASES = {
    # algorithm, env, constructor arguments, env steps of training before the evaluation
    "ppo": (
        PPO,
        "CartPole-v1",
        dict(n_steps=64, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16, 16])),
        128,
    ),
    "sac": (SAC, "Pendulum-v1", dict(learning_starts=50, batch_size=32, policy_kwargs=dict(net_arch=[16, 16])), 100),
    "dqn": (DQN, "CartPole-v1", dict(learning_starts=50, batch_size=32, policy_kwargs=dict(net_arch=[16, 16])), 100),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lockstep_evaluation_equals_each_seeds_own(name: str, tmp_path) -> None:
    """A trained K=3 batch: evaluate_seeds(predict_stacked) on three eval envs gives, seed by seed, the returns and
    lengths that evaluate_policy gives for member(i) on an identically seeded env. The stacked forward is one
    ``baddbmm`` per layer where the member's is an ``addmm``: the same floats on the shapes measured, but not by
    construction (another kernel may sum in another order), so the lengths (discrete decisions) are compared exactly
    and the returns at tests/tolerances.py's ``return_rtol`` (continuous actions within reassociation)."""
    cls, env_id, kwargs, steps = CASES[name]
    batch = SeedBatch(cls, seeds=SEEDS, **kwargs)
    trainer = RLTrainer(max_steps=steps, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=[make_vec_env(env_id, n_envs=1, seed=s) for s in SEEDS]))
    n_episodes = 3
    together = evaluate_seeds(
        lambda obs: batch.predict_stacked(obs, deterministic=True),
        [make_vec_env(env_id, n_envs=1, seed=100 + s) for s in SEEDS],
        n_eval_episodes=n_episodes,
    )
    for i, seed in enumerate(SEEDS):
        rewards, lengths = evaluate_policy(batch.member(i), make_vec_env(env_id, n_envs=1, seed=100 + seed),
                                           n_eval_episodes=n_episodes, return_episode_rewards=True)  # fmt: skip
        assert together[i][1] == lengths
        np.testing.assert_allclose(together[i][0], rewards, rtol=return_rtol(batch.member(i)))
    # the seeds are different policies: their evaluations differ
    assert len({tuple(r) for r, _ in together}) == len(SEEDS)


def test_lockstep_evaluation_splits_episodes_as_evaluate_policy() -> None:
    """Two sub-envs per seed, 3 episodes: 1 + 2 per seed as evaluate_policy splits them; envs of unequal counts
    of sub-envs are refused in one line."""
    batch = SeedBatch(PPO, seeds=[0, 1], n_steps=32, policy_kwargs=dict(net_arch=[8]))
    batch.set_env([make_vec_env("CartPole-v1", n_envs=2, seed=s) for s in (0, 1)])
    together = evaluate_seeds(
        lambda obs: batch.predict_stacked(obs), [make_vec_env("CartPole-v1", n_envs=2, seed=7 + s) for s in (0, 1)], 3
    )
    for i in range(2):
        rewards, lengths = evaluate_policy(batch.member(i), make_vec_env("CartPole-v1", n_envs=2, seed=7 + i),
                                           n_eval_episodes=3, return_episode_rewards=True)  # fmt: skip
        assert together[i] == (rewards, lengths)
    with pytest.raises(ValueError, match="same number of sub-envs"):
        evaluate_seeds(batch.predict_stacked, [make_vec_env("CartPole-v1", n_envs=n) for n in (1, 2)], 3)


def test_seed_batch_job_evaluates_its_seeds_in_lockstep(in_tmp_path, mlflow_template, monkeypatch) -> None:
    """A bench seed batch (runner.run_jobs, K=3 PPO): each periodic evaluation runs once for the three seeds through
    evaluate_seeds (watched by wrapping the real function), and each seed's curve holds its own returns; the seeds'
    ``time/eval_seconds`` share the lockstep evaluations' seconds (the cost estimates read them: before, the seeds
    recorded about 0 and the evaluations counted as training)."""
    import time

    from lit_sb3.core import evaluation
    from lit_sb3.zoo.jobs import plan_grid
    from lit_sb3.zoo.runner import run_jobs
    from lit_sb3.zoo.tracking import open_tracking
    from tests.mlflow_store import copy_store

    calls: list[tuple[int, list[list[float]]]] = []
    seconds: list[float] = []
    real = evaluation.evaluate_seeds

    def watched(predict, envs, n_eval_episodes=10):
        t0 = time.monotonic()
        out = real(predict, envs, n_eval_episodes)
        seconds.append(time.monotonic() - t0)
        calls.append((len(envs), [rewards for rewards, _ in out]))
        return out

    monkeypatch.setattr(evaluation, "evaluate_seeds", watched)
    overrides = {
        "n_envs": "1",
        "n_steps": "64",
        "batch_size": "32",
        "n_epochs": "1",
        "policy_kwargs": "dict(net_arch=[16])",
    }
    jobs, _ = plan_grid(["ppo"], ["CartPole-v1"], [0, 1, 2], n_timesteps=256, eval_freq=128, eval_episodes=2,
                        overrides=overrides)  # fmt: skip
    tracking = open_tracking(copy_store(in_tmp_path, mlflow_template), "lockstep")
    results = run_jobs(jobs, tracking.target)
    assert [r.status for r in results] == ["FINISHED"] * 3
    assert [n for n, _ in calls] == [3, 3]  # the evaluations at 128 and 256 env steps, all three seeds at once
    for i, result in enumerate(results):
        assert [step for step, *_ in result.evaluations] == [128, 256]
        assert [mean for _, mean, *_ in result.evaluations] == pytest.approx([np.mean(c[1][i]) for c in calls])
    recorded = [tracking.client.get_run(r.run_id).data.metrics["time/eval_seconds"] for r in results]
    # each seed's share is a third of each lockstep evaluation, plus its own bookkeeping (logging the metrics)
    assert all(s >= sum(seconds) / 3 for s in recorded)
    assert sum(seconds) <= sum(recorded) <= sum(seconds) + 1.0
