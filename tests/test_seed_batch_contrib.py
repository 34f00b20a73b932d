"""ARS over a seed dimension: ``SeedBatch(ARS, seeds=[...])`` is an ARS holding K seeds, and each seed is its separate
run — whole ``RLTrainer`` fits of a K = 3 batch against the 3 separate runs of the same seeds (weights, env-step and
iteration counts, every episode's return), a seed whose env turns NaN stopping alone, per-seed metrics.

Tolerance: the batch computes each seed's step direction ``sum_k (r+_k - r-_k) delta_k`` with one ``bmm`` where the
single run uses a vector-matrix product (another summation order); the candidates' actions come from the same per-row
population forward in both. Weights are compared at the bound tests/tolerances.py derives for ARS from the separate
run's iterations, lr and ``n_top`` (``model_tolerances``: ``ars_parameter_atol``); the episode returns exactly with
discrete actions (CartPole: each action a discrete decision, and equal returns rank the directions equally) and at
``return_rtol`` with continuous ones.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from lit_sb3 import ARS, RLEnvDataModule, RLTrainer, SeedBatch
from lit_sb3.vec_env import make_vec_env
from tests.envs.nan_seed import NaNObservationAfter
from tests.tolerances import model_tolerances, return_rtol

th.set_num_threads(1)

SEEDS = [3, 5, 7]
#: case -> (policy, env id, n_envs, env_kwargs, ARS arguments, env-step budget per seed)
ARS_CASES = {
    # MLP policy, random initial weights, 2 env slots for a population of 6, a learning-rate schedule per seed
    "mlp_pendulum": (
        "MlpPolicy",
        "Pendulum-v1",
        2,
        dict(max_episode_steps=40),
        dict(
            n_delta=3,
            n_top=2,
            zero_policy=False,
            learning_rate=lambda progress: 0.05 * progress,
            delta_std=0.1,
            policy_kwargs=dict(net_arch=[8]),
        ),
        700,
    ),
    # linear policy from zero weights; CartPole's episodes end at different steps per seed (not in lockstep)
    "linear_cartpole": ("LinearPolicy", "CartPole-v1", 1, dict(max_episode_steps=60), dict(n_delta=2), 500),
}


def _fit(model, envs, budget: int, tmp_path) -> RLTrainer:
    trainer = RLTrainer(max_steps=budget, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=envs))
    return trainer


@pytest.mark.parametrize("case", sorted(ARS_CASES))
def test_ars_seeds_retrace_separate_runs(case, tmp_path):
    """K = 3 seeds trained together equal the 3 separate runs of the same seeds: weights, env steps, iterations and
    every episode's return of the last iteration."""
    policy, env_id, n_envs, env_kwargs, kwargs, budget = ARS_CASES[case]
    model = SeedBatch(ARS, seeds=SEEDS, policy=policy, **kwargs)
    assert type(model) is ARS and model.n_seeds == 3
    envs = [make_vec_env(env_id, n_envs=n_envs, seed=s, env_kwargs=env_kwargs) for s in SEEDS]
    trainer = _fit(model, envs, budget, tmp_path)
    assert model.failed == {}
    for i in range(len(SEEDS)):
        for key in ("train/step_size", "rollout/return_std", "rollout/ep_rew_mean", "time/total_timesteps"):
            assert f"seed{i}/{key}" in trainer.callback_metrics, key
    counts = set()
    for i, seed in enumerate(SEEDS):
        single = ARS(policy, seed=seed, **kwargs)
        _fit(single, make_vec_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs), budget, tmp_path)
        member = model.member(i)
        assert member.num_timesteps == single.num_timesteps and member._n_updates == single._n_updates
        assert single._n_updates >= 2
        th.testing.assert_close(member.weights, single.weights, **model_tolerances(single))
        returns = [ep["r"] for ep in member.ep_info_buffer], [ep["r"] for ep in single.ep_info_buffer]
        if case == "linear_cartpole":  # discrete actions: equal, or a candidate acted differently
            assert returns[0] == returns[1]
        else:  # continuous actions move with the weights' round-off (tests/tolerances.py: return_rtol)
            np.testing.assert_allclose(*returns, rtol=return_rtol(single))
        counts.add(single.num_timesteps)
    if case == "linear_cartpole":
        assert len(counts) > 1  # the seeds spent their budgets at different env steps
        assert model.num_timesteps == min(counts)


def test_ars_diverging_env_masks_its_seed_alone(tmp_path):
    """Seed index 1's env returns NaN observations from its 50th step: that seed stops with finite weights while
    seeds 0 and 2 go on and still equal their separate runs."""
    policy, env_id, n_envs, env_kwargs, kwargs, budget = ARS_CASES["mlp_pendulum"]
    envs = [make_vec_env(env_id, n_envs=n_envs, seed=s, env_kwargs=env_kwargs) for s in SEEDS]
    envs[1] = make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=SEEDS[1],
        env_kwargs=env_kwargs,
        wrapper_class=NaNObservationAfter,
        wrapper_kwargs=dict(n=50),
    )
    model = SeedBatch(ARS, seeds=SEEDS, policy=policy, **kwargs)
    _fit(model, envs, budget, tmp_path)
    assert list(model.failed) == [1] and "non-finite observation" in model.failed[1]
    assert th.isfinite(model.weights).all()
    single = ARS(policy, seed=SEEDS[2], **kwargs)
    _fit(single, make_vec_env(env_id, n_envs=n_envs, seed=SEEDS[2], env_kwargs=env_kwargs), budget, tmp_path)
    member = model.member(2)
    assert member.num_timesteps == single.num_timesteps
    th.testing.assert_close(member.weights, single.weights, **model_tolerances(single))
