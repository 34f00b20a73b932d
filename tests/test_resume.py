"""The resume matrix: a Lightning checkpoint taken at any env step resumes to exactly the uninterrupted run.

Two ways to stop: by budget (``max_steps=cut``, then ``save_checkpoint``, then a trainer with the full budget and
``ckpt_path=``: constant schedules only, since schedules depend on the budget), and mid-run at an arbitrary env
step with :class:`EnvStepCheckpoint` (same budget, any schedule). Every ``train_freq`` form (steps, episodes,
n > 1, ``gradient_steps=-1``, several envs) and the on-policy algorithms. Compared: parameters, optimiser states,
replay buffer contents, counters and the global RNG states.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch as th

from lit_sb3 import A2C, DQN, PPO, SAC, TD3, RLEnvDataModule, RLTrainer
from lit_sb3.callbacks import EnvStepCheckpoint

th.set_num_threads(1)

NET = dict(net_arch=[16, 16])


def _model(algo: str, **kwargs):
    if algo == "sac":
        return SAC("MlpPolicy", seed=3, batch_size=16, learning_starts=40, policy_kwargs=NET, **kwargs)
    if algo == "td3":
        return TD3("MlpPolicy", seed=3, batch_size=16, learning_starts=40, policy_kwargs=NET, **kwargs)
    if algo == "dqn":
        return DQN(
            "MlpPolicy",
            seed=3,
            batch_size=16,
            learning_starts=40,
            target_update_interval=30,
            policy_kwargs=NET,
            **kwargs,
        )
    if algo == "ppo":
        return PPO("MlpPolicy", seed=3, batch_size=32, n_epochs=2, policy_kwargs=NET, **kwargs)
    return A2C("MlpPolicy", seed=3, policy_kwargs=NET, **kwargs)


ENV = {"sac": "Pendulum-v1", "td3": "Pendulum-v1", "dqn": "CartPole-v1", "ppo": "CartPole-v1", "a2c": "CartPole-v1"}


def _fit(model, algo, steps, n_envs=1, ckpt_path=None, callbacks=None, root=None):
    trainer = RLTrainer(max_steps=steps, logger=False, callbacks=callbacks, default_root_dir=root)
    dm = RLEnvDataModule(ENV[algo], n_envs=n_envs, seed=5)
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return trainer


def _rng_state():
    return random.getstate(), np.random.get_state()[1].copy(), th.get_rng_state().clone()


def _optimizers(model):
    optimizers = model.optimizers(use_pl_optimizer=False)
    return optimizers if isinstance(optimizers, list) else [optimizers]


def _assert_same_run(expected, got, expected_rng, got_rng):
    assert got.num_timesteps == expected.num_timesteps
    assert got._n_updates == expected._n_updates
    assert got._episode_num == expected._episode_num
    a, b = expected.state_dict(), got.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert th.equal(a[key], b[key]), key
    for opt_a, opt_b in zip(_optimizers(expected), _optimizers(got), strict=True):
        for sa, sb in zip(opt_a.state_dict()["state"].values(), opt_b.state_dict()["state"].values()):
            for name in sa:
                assert th.equal(th.as_tensor(sa[name]), th.as_tensor(sb[name])), name
    buffer = getattr(expected, "replay_buffer", None)
    if buffer is not None:
        assert got.replay_buffer.pos == buffer.pos
        for name, tensor in buffer._storage_tensors().items():
            assert th.equal(tensor, got.replay_buffer._storage_tensors()[name]), name
    assert expected_rng[0] == got_rng[0]
    assert np.array_equal(expected_rng[1], got_rng[1])
    assert th.equal(expected_rng[2], got_rng[2])
    assert np.array_equal(np.asarray(expected._last_obs), np.asarray(got._last_obs))


# (algo, kwargs, n_envs, budget, cut): the cut falls inside a collect/update cycle
BUDGET_CUTS = [
    pytest.param("sac", dict(train_freq=16, gradient_steps=16), 1, 400, 201, id="sac-steps16-gs16"),
    pytest.param("sac", dict(train_freq=(1, "episode"), gradient_steps=8), 1, 500, 277, id="sac-1episode"),
    pytest.param("sac", dict(train_freq=1, gradient_steps=1), 1, 200, 97, id="sac-steps1"),
    pytest.param("td3", dict(train_freq=4, gradient_steps=-1), 2, 300, 142, id="td3-steps4-gs-1-2envs"),
    pytest.param(
        "dqn",
        dict(train_freq=(2, "episode"), gradient_steps=-1, exploration_fraction=0.0),
        1,
        400,
        133,
        id="dqn-2episodes-gs-1",
    ),  # fmt: skip
    pytest.param("ppo", dict(n_steps=64), 1, 300, 100, id="ppo"),
    pytest.param("a2c", dict(n_steps=5), 2, 100, 33, id="a2c-2envs"),
]


@pytest.mark.parametrize("algo, kwargs, n_envs, budget, cut", BUDGET_CUTS)
def test_budget_cut_then_resume_equals_uninterrupted_run(tmp_path, algo, kwargs, n_envs, budget, cut):
    straight = _model(algo, **kwargs)
    _fit(straight, algo, budget, n_envs)
    straight_rng = _rng_state()

    first = _model(algo, **kwargs)
    trainer = _fit(first, algo, cut, n_envs)
    trainer.save_checkpoint(tmp_path / "cut.ckpt")
    if algo in ("sac", "td3", "dqn"):
        assert first.num_timesteps == cut + (cut % n_envs)  # off-policy: the budget is exact
    resumed = _model(algo, **kwargs)
    _fit(resumed, algo, budget, n_envs, ckpt_path=str(tmp_path / "cut.ckpt"))
    _assert_same_run(straight, resumed, straight_rng, _rng_state())


# (algo, kwargs, n_envs, budget, checkpoint every): DQN's exploration schedule depends on the budget, so it is cut
# mid-run by a checkpoint callback of a run with the same budget
MID_RUN = [
    pytest.param("dqn", dict(train_freq=4, gradient_steps=2), 1, 300, 117, id="dqn-steps4"),
    pytest.param("sac", dict(train_freq=(1, "episode"), gradient_steps=-1), 1, 500, 333, id="sac-1episode-gs-1"),
    pytest.param("ppo", dict(n_steps=32), 2, 320, 100, id="ppo-2envs"),
]


@pytest.mark.parametrize("algo, kwargs, n_envs, budget, every", MID_RUN)
def test_mid_run_env_step_checkpoint_resumes_exactly(tmp_path, algo, kwargs, n_envs, budget, every):
    straight = _model(algo, **kwargs)
    _fit(straight, algo, budget, n_envs)
    straight_rng = _rng_state()

    checkpointing = EnvStepCheckpoint(every_n_env_steps=every, dirpath=tmp_path)
    observed = _model(algo, **kwargs)
    _fit(observed, algo, budget, n_envs, callbacks=[checkpointing], root=tmp_path)
    # checkpoints change nothing in the run itself
    _assert_same_run(straight, observed, straight_rng, _rng_state())
    first = checkpointing.saved[0]
    steps = int(first.stem.split("=")[1])
    if algo == "ppo":
        assert steps == 128  # the first rollout end (2 x 32 x 2 env steps per rollout) at or after 100
    else:
        assert steps == every  # off-policy: exactly at the requested env step, mid-cycle if need be

    resumed = _model(algo, **kwargs)
    _fit(resumed, algo, budget, n_envs, ckpt_path=str(first))
    _assert_same_run(straight, resumed, straight_rng, _rng_state())
