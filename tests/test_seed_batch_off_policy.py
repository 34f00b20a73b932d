"""K seeds of the off-policy algorithms in their own classes: a K=3 batch equals 3 separate runs, training through
RLTrainer, member save/load, failure masking and per-seed logging."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from lit_sb3 import (
    DDPG,
    DQN,
    QRDQN,
    SAC,
    TD3,
    TQC,
    CrossQ,
    NormalActionNoise,
    OrnsteinUhlenbeckActionNoise,
    RLEnvDataModule,
    RLTrainer,
    SeedBatch,
    SeedRoutingLogger,
)
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.vec_env import make_vec_env
from tests.tiny_image_env import TINY_IMAGE_ENV
from tests.tolerances import longest_reduction, model_parameter_atol, reassociation_rtol

th.set_num_threads(1)

SEEDS = [3, 5, 7, 11]
SAC_KW = dict(batch_size=16, learning_starts=20, policy_kwargs=dict(net_arch=[16, 16]))


def _envs(env_id: str, seeds: list[int], **kwargs) -> list:
    return [make_vec_env(env_id, n_envs=1, seed=s, **kwargs) for s in seeds]


def _single(cls, env_id: str, seed: int, **kwargs):
    model = cls("MlpPolicy", seed=seed, **kwargs)
    model.set_env(make_vec_env(env_id, n_envs=1, seed=seed))
    model._setup_model()
    return model


def _assert_state_equal(a: dict, b: dict, atol: float = 0.0, rtol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if atol == 0.0 and rtol == 0.0:
            assert th.equal(a[key], b[key]), key
        else:
            th.testing.assert_close(a[key], b[key], atol=atol, rtol=rtol, msg=key)


def _assert_member_equals_single(member, single, optimizers: bool = True) -> None:
    """Seed i's member equals its separate run up to reassociation: parameters within ``model_parameter_atol`` (the
    run's own update count, lr and optimiser), running statistics and optimiser moments (one pass over the same data)
    within ``reassociation_rtol`` of the longest reduction (tests/tolerances.py derives both). The bound stays far
    under the ~1e-1 by which seeds differ; a skipped or repeated update shows in the counters (``_n_updates``, Adam's
    ``step``), which differ by whole numbers."""
    atol, rtol = model_parameter_atol(single), reassociation_rtol(longest_reduction(single))
    assert atol < 1e-2, "the bound must stay far under the distance between seeds"
    _assert_state_equal(member.policy.state_dict(), single.policy.state_dict(), atol=atol, rtol=rtol)
    if optimizers:
        _assert_optimizers_equal(member, single, atol, rtol)


TD3_KW = dict(batch_size=16, learning_starts=20, policy_kwargs=dict(net_arch=[16, 16]))
DQN_KW = dict(batch_size=16, learning_starts=20, policy_kwargs=dict(net_arch=[16, 16]))
ALGOS = {
    "sac": (SAC, "Pendulum-v1", SAC_KW),
    "td3": (TD3, "Pendulum-v1", TD3_KW),
    "ddpg": (DDPG, "Pendulum-v1", TD3_KW),
    "dqn": (DQN, "CartPole-v1", DQN_KW),
}


def _assert_optimizers_equal(member, single, atol: float, rtol: float) -> None:
    """The member's optimiser states (Adam moments and steps) are seed i's slices of the batch's."""
    for name, optimizer in single._optimizers_to_save().items():
        mine = member._optimizers_to_save()[name].state_dict()["state"]
        theirs = optimizer.state_dict()["state"]
        assert mine.keys() == theirs.keys() and theirs, name
        for index in theirs:
            for key in theirs[index]:
                th.testing.assert_close(mine[index][key], theirs[index][key], atol=atol, rtol=rtol)


def _fit(model, env, steps: int, tmp_path=None) -> None:
    RLTrainer(max_steps=steps, logger=False, enable_progress_bar=False, enable_checkpointing=False,
              default_root_dir=tmp_path).fit(model, datamodule=RLEnvDataModule(train_env=env))  # fmt: skip


# parameters of a K=3 batch against 3 separate runs after whole fits (~170 updates): the batch computes each seed's
# matmuls as one baddbmm instead of addmm, which reassociates float sums; the tolerance is derived from each run's
# update count, lr, optimiser and longest reduction (tests/tolerances.py: e.g. TD3, 170 Adam updates at lr 1e-3 over
# 32-term sums, 1.1e-4), not measured (measured on an AMD EPYC under each ATEN_CPU_CAPABILITY: <= 1.2e-7, CrossQ
# 9.5e-7), and stays under one update's size, so a wrong seed (~1e-1) or a skipped update (~lr) fails
EQUIVALENCE = {
    "sac": (SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30), 200),
    "td3": (TD3, "Pendulum-v1", dict(TD3_KW, learning_starts=30), 200),
    "ddpg": (DDPG, "Pendulum-v1", dict(TD3_KW, learning_starts=30), 200),
    "dqn": (DQN, "CartPole-v1", dict(DQN_KW, learning_starts=30, train_freq=1, target_update_interval=20,
                                      exploration_fraction=0.5, max_grad_norm=0.5), 300),
    # n-step returns: Pendulum's time limit (200 steps) and CartPole's terminations end windows
    "sac_nstep": (SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30, n_steps=3), 260),
    "dqn_nstep": (DQN, "CartPole-v1", dict(DQN_KW, learning_starts=30, train_freq=1, target_update_interval=20,
                                          exploration_fraction=0.5, n_steps=4), 200),
    # train_freq in episodes: each seed updates when its own episodes end (per-seed time limits make them differ)
    "dqn_episodes": (DQN, "CartPole-v1", dict(DQN_KW, learning_starts=30, train_freq=(1, "episode"), gradient_steps=-1,
                                             target_update_interval=20, exploration_fraction=0.5), 250),
    "sac_episodes": (SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30, train_freq=(2, "episode"), gradient_steps=-1),
                     200, [20, 25, 30]),
    "ddpg_episodes": (DDPG, "Pendulum-v1", dict(TD3_KW, learning_starts=30, train_freq=(1, "episode"), gradient_steps=5),
                      150, [20, 25, 30]),
    "tqc": (TQC, "Pendulum-v1", dict(SAC_KW, learning_starts=30, policy_kwargs=dict(net_arch=[16], n_quantiles=5)),
            150),
    # gSDE: each seed's exploration matrices from its own stream (per cycle, every 4 steps, and at the warm-up)
    "sac_sde": (SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30, use_sde=True, sde_sample_freq=4,
                                         use_sde_at_warmup=True), 200),
    "sac_sde_train_freq": (SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30, use_sde=True, train_freq=4,
                                                    gradient_steps=2, policy_kwargs=dict(net_arch=[16, 16],
                                                                                         use_expln=True)), 200),
    # BatchRenorm: per-seed affine parameters and running statistics, BatchNorm warm-up then renormalisation. Adam's
    # eps is 1e-4 for the reason given at crossq_episodes (with CrossQ's default 1e-8, critic.qf.1.bias, which feeds a
    # BatchRenorm layer, moved by round-off steps: 3.6e-5 apart here, past the bound on a CPU with AMX)
    "crossq": (CrossQ, "Pendulum-v1", dict(SAC_KW, learning_starts=30, policy_kwargs=dict(
        net_arch=[16, 16], renorm_warmup_steps=40, optimizer_kwargs=dict(betas=(0.5, 0.999), eps=1e-4))), 200),
    "qrdqn": (QRDQN, "CartPole-v1", dict(DQN_KW, learning_starts=30, train_freq=1, target_update_interval=20,
                                          exploration_fraction=0.5, max_grad_norm=0.5,
                                          policy_kwargs=dict(net_arch=[16], n_quantiles=5)), 200),
    # action noise: seed i's noise draws from seed i's numpy stream, the global one of its separate run
    "td3_normal_noise": (TD3, "Pendulum-v1", dict(TD3_KW, learning_starts=30,
                                                  action_noise=NormalActionNoise(np.zeros(1), 0.3 * np.ones(1))), 150),
    "ddpg_ou_noise": (DDPG, "Pendulum-v1", dict(TD3_KW, learning_starts=30, action_noise=OrnsteinUhlenbeckActionNoise(
        np.zeros(1), 0.5 * np.ones(1), dt=0.1)), 150, [40, 50, 60]),
    # train_freq in episodes with policy_delay 2: each seed's delayed actor/target steps follow its own update count
    "td3_episodes_delay": (TD3, "Pendulum-v1", dict(TD3_KW, learning_starts=30, train_freq=(1, "episode"),
                                                    gradient_steps=3, policy_delay=2), 150, [20, 25, 30]),
    # CrossQ with train_freq in episodes: per-seed BatchRenorm warm-up counters (the seeds' critics leave the warm-up
    # of 40 passes at different updates) and per-seed policy_delay 3. Adam's eps is 1e-4: a Linear bias that feeds a
    # BatchRenorm layer has no true gradient (the batch mean removes it), so its Adam steps are round-off (~1e-9)
    # over sqrt(v) + eps, and with eps 1e-8 the batch's and the separate run's different round-off (baddbmm against
    # addmm) become different steps of up to ~0.1 lr (measured on main's lockstep CrossQ with train_freq=20: 2.5e-3
    # after 20 updates); with eps 1e-4 every parameter agrees to 2.4e-7 (measured)
    "crossq_episodes": (CrossQ, "Pendulum-v1", dict(SAC_KW, learning_starts=30, train_freq=(1, "episode"),
                                                    gradient_steps=-1, policy_kwargs=dict(
                                                        net_arch=[16, 16], renorm_warmup_steps=40,
                                                        optimizer_kwargs=dict(betas=(0.5, 0.999), eps=1e-4))),
                        150, [20, 25, 30]),
    # gSDE with train_freq in episodes: each seed's matrices redrawn at its own cycle start and every 3 steps into it
    "sac_sde_episodes": (SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30, use_sde=True, sde_sample_freq=3,
                                                  train_freq=(1, "episode"), gradient_steps=4), 150, [20, 25, 30]),
}  # fmt: skip


@pytest.mark.parametrize("algo", list(EQUIVALENCE))
def test_k3_batch_equals_three_separate_runs(algo, tmp_path):
    """Seed i of a batch draws what its separate run draws (replay indices, policy noise, TD3's target noise,
    epsilon-greedy) and starts from its separate run's weights: after whole fits the parameters, optimiser states
    and counters equal the separate runs' (tolerance above)."""
    cls, env_id, kwargs, steps, *lengths = EQUIVALENCE[algo]
    seeds = [3, 5, 7]

    def env(i: int):  # seed index i's env (with its own time limit, where the case gives them)
        env_kwargs = dict(max_episode_steps=lengths[0][i]) if lengths else None
        return make_vec_env(env_id, n_envs=1, seed=seeds[i], env_kwargs=env_kwargs)

    batch, *_ = _assert_k3_equals_separate_runs(cls, kwargs, steps, seeds, env, tmp_path)
    if isinstance(batch._n_updates, np.ndarray):  # train_freq in episodes: the seeds' update counts differ
        assert len(set(batch._n_updates.tolist())) > 1
    if algo == "crossq_episodes":  # per-seed BatchRenorm counters (compared above), some past the warm-up
        counters = [m.steps for m in batch.critic.modules() if hasattr(m, "warmup_steps")]
        assert counters and all(c.shape == (3,) for c in counters) and max(int(c.max()) for c in counters) > 40


def _assert_k3_equals_separate_runs(cls, kwargs: dict, steps: int, seeds: list[int], env, tmp_path) -> list:
    """Fit a K=3 batch and the 3 separate runs (each with its own deep copy of the arguments: an action noise
    process is not shared); parameters, optimiser states and counters equal (tolerance above). Returns the batch
    and the separate runs."""
    batch = SeedBatch(cls, seeds=seeds, **kwargs)
    assert type(batch) is cls and batch.n_seeds == 3 and batch.seeds == seeds
    _fit(batch, [env(i) for i in range(3)], steps, tmp_path)
    assert not batch.failed and batch.num_timesteps == steps
    singles = []
    for i, seed in enumerate(seeds):
        single = cls("MlpPolicy", seed=seed, **copy.deepcopy(kwargs))
        _fit(single, env(i), steps, tmp_path)
        member = batch.member(i)
        assert member.seed == seed and member.num_timesteps == steps and member._n_updates == single._n_updates > 0
        _assert_member_equals_single(member, single)
        singles.append(single)
    return [batch, *singles]


def test_n_step_returns_with_vec_normalize_k3_equal_three_separate_runs(tmp_path):
    """n-step returns with each seed's VecNormalize: each step's reward normalised with that seed's statistics before
    the window's sum, observations normalised per seed, as NStepReplayBuffer does for the separate run."""
    from lit_sb3.vec_env import VecNormalize

    seeds = [3, 5, 7]

    def env(i: int):
        return VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=seeds[i]))

    kwargs = dict(SAC_KW, learning_starts=30, n_steps=3)
    batch, *singles = _assert_k3_equals_separate_runs(SAC, kwargs, 150, seeds, env, tmp_path)
    for vn, single in zip(batch._seed_state.normalizers, singles, strict=True):
        # running statistics of the envs' own float64 observations and rewards, on the actions of policies equal up
        # to the bound: each action within ~lr * N of its separate run's, a Pendulum step within that of its own
        tol = model_parameter_atol(single)
        np.testing.assert_allclose(vn.obs_rms.mean, single._vec_normalize_env.obs_rms.mean, atol=tol)
        np.testing.assert_allclose(vn.ret_rms.var, single._vec_normalize_env.ret_rms.var, rtol=tol)


def test_td3_and_dqn_batches_train_through_rltrainer(tmp_path):
    td3 = SeedBatch(TD3, seeds=[0, 1], action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), **TD3_KW)
    RLTrainer(max_steps=150, logger=False, default_root_dir=tmp_path).fit(
        td3, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", [0, 1]))
    )
    assert td3.num_timesteps == 150 and td3._n_updates == 130 and not td3.failed
    assert td3.members[0].action_noise is not td3.members[1].action_noise  # each seed its own noise process
    dqn = SeedBatch(DQN, seeds=[0, 1, 2], target_update_interval=50, train_freq=4, **DQN_KW)
    RLTrainer(max_steps=203, logger=False, default_root_dir=tmp_path).fit(
        dqn, datamodule=RLEnvDataModule(train_env=_envs("CartPole-v1", [0, 1, 2]))
    )
    assert dqn.num_timesteps == 203 and dqn._n_calls == 203 and not dqn.failed
    assert dqn.exploration_rate == pytest.approx(dqn.exploration_schedule(1 - 203 / 203))
    member = dqn.member(2)
    assert member.exploration_rate == dqn.exploration_rate and member.seed == 2
    path = tmp_path / "dqn.zip"
    member.save(path)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        DQN.load(path).predict(obs, deterministic=True)[0], member.predict(obs, deterministic=True)[0]
    )


def test_sac_batch_trains_through_rltrainer_and_members_round_trip(tmp_path):
    batch = SeedBatch(SAC, seeds=[0, 1, 2], learning_starts=50, batch_size=32, policy_kwargs=dict(net_arch=[32, 32]))
    trainer = RLTrainer(max_steps=333, logger=False, default_root_dir=tmp_path)
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", batch.seeds)))
    assert batch.num_timesteps == 333 and batch._n_updates == 333 - 50 and not batch.failed
    initial = [
        _single(SAC, "Pendulum-v1", s, **dict(learning_starts=50, batch_size=32, policy_kwargs=dict(net_arch=[32, 32])))
        for s in batch.seeds
    ]
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    for i in range(3):
        member = batch.member(i)
        assert member.seed == batch.seeds[i] and member.num_timesteps == 333
        assert not th.equal(member.critic.qf[0].weight, initial[i].critic.qf[0].weight)
        path = tmp_path / f"seed{i}.zip"
        member.save(path)
        loaded = SAC.load(path)
        np.testing.assert_allclose(
            loaded.predict(obs, deterministic=True)[0], member.predict(obs, deterministic=True)[0]
        )
    # the seeds differ from each other
    assert not th.equal(batch.member(0).actor.mu.weight, batch.member(1).actor.mu.weight)
    # a seed's transitions as an ordinary replay buffer: it continues training alone
    member = batch.member(2)
    member.replay_buffer = batch.replay_buffer_of(2)
    assert member.replay_buffer.pos == 333 and not member.replay_buffer.full
    np.testing.assert_array_equal(
        member.replay_buffer.rewards[:333, 0].numpy(), batch.replay_buffer.rewards[2, :333, 0].numpy()
    )
    member.learn(20, env=batch.envs[2], reset_num_timesteps=False)
    assert member.num_timesteps == 353 and member.replay_buffer.pos == 353


def test_a_batch_run_is_reproducible(tmp_path):
    def run() -> dict:
        batch = SeedBatch(SAC, seeds=[5, 6], **SAC_KW)
        RLTrainer(max_steps=70, logger=False, default_root_dir=tmp_path).fit(
            batch, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", [5, 6]))
        )
        return batch.state_dict()

    _assert_state_equal(run(), run())


class _BadRewardAfter(gym.Wrapper):
    def __init__(self, env: gym.Env, after: int, value: float = float("nan")) -> None:
        super().__init__(env)
        self.after, self.steps, self.value = after, 0, value

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, self.value if self.steps > self.after else reward, terminated, truncated, info


def test_seed_with_nan_rewards_is_masked_while_the_others_train(tmp_path):
    seeds = [0, 1, 2]
    kwargs = dict(learning_starts=30, batch_size=16, policy_kwargs=dict(net_arch=[16, 16]))
    envs = _envs("Pendulum-v1", seeds[:2]) + [
        make_vec_env("Pendulum-v1", n_envs=1, seed=2, wrapper_class=_BadRewardAfter, wrapper_kwargs=dict(after=80))
    ]
    batch = SeedBatch(SAC, seeds=seeds, **kwargs)
    RLTrainer(max_steps=80, logger=False, default_root_dir=tmp_path).fit(
        batch, datamodule=RLEnvDataModule(train_env=envs)
    )
    before = [batch.member(i).critic.qf[0].weight.clone() for i in range(3)]
    trainer = RLTrainer(max_steps=120, logger=False, default_root_dir=tmp_path)
    trainer.reset_num_timesteps = False
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=envs))
    assert batch.num_timesteps == 200
    assert list(batch.failed) == [2] and batch.failed[2] == "diverged: non-finite reward from the env at step 81"
    after = [batch.member(i).critic.qf[0].weight for i in range(3)]
    assert not th.equal(after[0], before[0]) and not th.equal(after[1], before[1])
    th.testing.assert_close(after[2], before[2], atol=0, rtol=0)
    assert th.isfinite(after[2]).all()
    assert envs[2].envs[0].steps == 81  # the failed seed's env stopped stepping


def test_seed_whose_losses_overflow_is_masked(tmp_path):
    """Finite but huge rewards make that seed's critic loss infinite: it is masked, the other seed goes on."""
    kwargs = dict(learning_starts=30, batch_size=16, policy_kwargs=dict(net_arch=[16]))
    envs = [
        make_vec_env(
            "Pendulum-v1", n_envs=1, seed=0, wrapper_class=_BadRewardAfter, wrapper_kwargs=dict(after=0, value=3e38)
        ),
        make_vec_env("Pendulum-v1", n_envs=1, seed=1),
    ]
    batch = SeedBatch(SAC, seeds=[0, 1], **kwargs)
    RLTrainer(max_steps=100, logger=False, default_root_dir=tmp_path).fit(
        batch, datamodule=RLEnvDataModule(train_env=envs)
    )
    assert list(batch.failed) == [0] and batch.failed[0].startswith("diverged: non-finite critic loss at step ")
    assert batch.num_timesteps == 100 and th.isfinite(batch.member(1).critic.qf[0].weight).all()


def test_seed_masked_before_the_fit_never_moves(tmp_path):
    batch = SeedBatch(DQN, seeds=[0, 1], **DQN_KW)
    batch.fail_seed(1, "pruned: trial 3 stopped")
    RLTrainer(max_steps=60, logger=False, default_root_dir=tmp_path).fit(
        batch, datamodule=RLEnvDataModule(train_env=_envs("CartPole-v1", [0, 1]))
    )
    initial = [_single(DQN, "CartPole-v1", s, **DQN_KW) for s in (0, 1)]
    assert batch.failed == {1: "pruned: trial 3 stopped"} and batch._n_updates == 10  # train_freq 4
    _assert_state_equal(batch.member(1).policy.state_dict(), initial[1].policy.state_dict())
    assert not th.equal(batch.member(0).q_net.q_net[0].weight, initial[0].q_net.q_net[0].weight)
    with pytest.raises(IndexError, match="seed index must be in"):
        batch.fail_seed(2, "no such seed")
    batch.fail_seed(0, "diverged")
    assert batch._stop_requested  # every seed failed: the fit ends
    with pytest.raises(RuntimeError, match="every seed of the model has failed"):
        RLTrainer(max_steps=10, logger=False).fit(
            batch, datamodule=RLEnvDataModule(train_env=_envs("CartPole-v1", [0, 1]))
        )


def test_seed_routing_logger_gives_each_seed_its_own_csv_and_tensorboard(tmp_path):
    import csv

    import yaml
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    seeds = [4, 9]
    csv_loggers = [CSVLogger(tmp_path, name=f"seed{s}", version=0) for s in seeds]
    tb_loggers = [TensorBoardLogger(tmp_path / "tb", name=f"seed{s}", version=0) for s in seeds]
    batch = SeedBatch(SAC, seeds=seeds, learning_starts=50, batch_size=16, policy_kwargs=dict(net_arch=[16]))
    routers = [SeedRoutingLogger(csv_loggers), SeedRoutingLogger(tb_loggers)]
    trainer = RLTrainer(max_steps=400, logger=routers, log_every_n_steps=1)
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", seeds)))
    for seed, logger, tb in zip(seeds, csv_loggers, tb_loggers):
        rows = list(csv.DictReader(open(f"{logger.log_dir}/metrics.csv")))
        keys = set(rows[0])
        assert {"rollout/ep_rew_mean", "train/critic_loss", "train/ent_coef", "time/episodes", "step"} <= keys
        assert not any(key.startswith("seed") for key in keys)
        steps = sorted({int(r["step"]) for r in rows if r["rollout/ep_rew_mean"]})
        assert steps == [200, 400]  # Pendulum episodes end every 200 steps: one dump each
        hparams = yaml.safe_load(open(f"{logger.log_dir}/hparams.yaml"))
        assert hparams["seed"] == seed and hparams["algo"] == "SAC" and hparams["batch_size"] == 16
        events = EventAccumulator(tb.log_dir, size_guidance={"scalars": 0})
        events.Reload()
        tags = set(events.Tags()["scalars"])
        assert {"rollout/ep_rew_mean", "train/actor_loss", "time/total_timesteps"} <= tags
        assert [e.step for e in events.Scalars("rollout/ep_rew_mean")] == [200, 400]
        assert yaml.safe_load(open(f"{tb.log_dir}/hparams.yaml"))["seed"] == seed


def test_bad_seed_batch_arguments_fail_early():
    with pytest.raises(ValueError, match="distinct"):
        SeedBatch(SAC, seeds=[1, 1])

    class Unbatched(SAC):  # an algorithm whose update is not written over the seed dimension
        seed_batching = False

    with pytest.raises(ValueError, match="Unbatched cannot train K > 1 seeds.*RecurrentPPO, SAC"):
        SeedBatch(Unbatched, seeds=[0, 1])
    with pytest.raises(TypeError, match="seeds="):
        SeedBatch(SAC, seeds=[0], seed=1)

    class MyBuffer(ReplayBuffer):  # a custom storage class: its behaviour is not the seed storage's
        pass

    with pytest.raises(NotImplementedError, match=r"replay_buffer_class MyBuffer \(HerReplayBuffer is\)"):
        SeedBatch(DQN, seeds=[0, 1], replay_buffer_class=MyBuffer)
    with pytest.raises(TypeError, match="one VecEnv per seed"):
        RLEnvDataModule(train_env=["Pendulum-v1", "Pendulum-v1"])
    with pytest.raises(ValueError, match="normalize=True with a list"):
        RLEnvDataModule(train_env=_envs("Pendulum-v1", [0]), normalize=True)
    with pytest.raises(NotImplementedError, match=r"Box observations \(vectors, images\) only"):
        SeedBatch(DQN, seeds=[0, 1]).set_env(_envs("FrozenLake-v1", [0, 1]))
    batch = SeedBatch(SAC, seeds=[0, 1])
    with pytest.raises(ValueError, match="one env per seed"):
        batch.set_env(_envs("Pendulum-v1", [0]))


@pytest.mark.parametrize("cls", [SAC, TD3])
def test_cnn_policy_on_images_k3_equals_three_separate_runs(cls, tmp_path):
    """Images (channel-last, transposed per seed): NatureCNN's Conv2d layers stacked per seed (SeedConv2d), uint8
    replay storage with a leading K; parameters and optimiser states after whole fits equal the separate runs'."""
    seeds = [3, 5, 7]
    kwargs = dict(learning_starts=20, batch_size=8, buffer_size=200, train_freq=2,
                  policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=dict(features_dim=16)))  # fmt: skip
    batch = SeedBatch(cls, seeds=seeds, policy="CnnPolicy", **kwargs)
    _fit(batch, _envs(TINY_IMAGE_ENV, seeds), 60, tmp_path)
    assert not batch.failed and batch.observation_space.shape == (3, 36, 36)
    for i, seed in enumerate(seeds):
        single = cls("CnnPolicy", seed=seed, **kwargs)
        _fit(single, make_vec_env(TINY_IMAGE_ENV, n_envs=1, seed=seed), 60, tmp_path)
        member = batch.member(i)
        assert member._n_updates == single._n_updates > 0
        _assert_member_equals_single(member, single)


def _mean_return(model, seed: int) -> float:
    from lit_sb3.core.evaluation import evaluate_policy

    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed + 10_000)
    return float(evaluate_policy(model, env, n_eval_episodes=5, deterministic=True)[0])


@pytest.mark.slow
def test_batched_sac_learns_pendulum():
    """RL Zoo Pendulum hyperparameters (learning_rate 1e-3), 6000 steps per seed, K=2: every seed >= -250 (the
    single-seed check's threshold, tests/test_sac_td3_ddpg.py)."""
    seeds = [0, 1]
    batch = SeedBatch(SAC, seeds=seeds, learning_rate=1e-3)
    RLTrainer(max_steps=6000, logger=False).fit(
        batch, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", seeds))
    )
    returns = [_mean_return(batch.member(i), s) for i, s in enumerate(seeds)]
    assert min(returns) >= -250, returns


@pytest.mark.slow
def test_batched_td3_learns_pendulum():
    """RL Zoo Pendulum hyperparameters (learning_rate 1e-3, normal action noise 0.1), 8000 steps, K=2."""
    seeds = [0, 1]
    noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
    batch = SeedBatch(TD3, seeds=seeds, learning_rate=1e-3, action_noise=noise)
    RLTrainer(max_steps=8000, logger=False).fit(
        batch, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", seeds))
    )
    returns = [_mean_return(batch.member(i), s) for i, s in enumerate(seeds)]
    assert min(returns) >= -250, returns


@pytest.mark.parametrize("algo", ["sac", "dqn"])
def test_a_nan_seed_stops_alone_and_the_others_equal_their_separate_runs(algo, tmp_path):
    """Seed index 1's env turns its rewards NaN after 60 steps: that seed stops there (its weights are those of its
    separate run stopped at 60 steps), seeds 0 and 2 go on and still equal their separate runs."""
    cls, env_id, kwargs, steps = EQUIVALENCE[algo]
    if algo == "dqn":  # an epsilon that does not depend on the budget (the stopped seed's run is 60 steps long)
        kwargs = dict(kwargs, exploration_initial_eps=0.3, exploration_final_eps=0.3)
    seeds = [3, 5, 7]
    envs = _envs(env_id, seeds)
    envs[1] = make_vec_env(env_id, n_envs=1, seed=5, wrapper_class=_BadRewardAfter, wrapper_kwargs=dict(after=60))
    batch = SeedBatch(cls, seeds=seeds, **kwargs)
    _fit(batch, envs, steps, tmp_path)
    assert batch.failed == {1: "diverged: non-finite reward from the env at step 61"}
    assert batch.num_timesteps == steps and envs[1].envs[0].steps == 61
    for i, seed in enumerate(seeds):
        single = cls("MlpPolicy", seed=seed, **kwargs)
        _fit(single, make_vec_env(env_id, n_envs=1, seed=seed), 60 if i == 1 else steps, tmp_path)
        _assert_member_equals_single(batch.member(i), single, optimizers=False)  # a stopped seed's steps go on


class _RaiseAfter(gym.Wrapper):
    """``step`` raises after ``after`` steps (an env that breaks mid-run)."""

    def __init__(self, env: gym.Env, after: int) -> None:
        super().__init__(env)
        self.after, self.steps = after, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.after:
            raise RuntimeError(f"broken after {self.after} steps")
        return self.env.step(action)


@pytest.mark.parametrize("algo", ["sac", "ppo"])
def test_a_seed_whose_env_raises_fails_alone_and_the_others_equal_their_separate_runs(algo, tmp_path):
    """Four seeds; seed index 1's env raises after 250 steps: that seed is failed with its own reason and the fit goes
    on; seeds 0, 2 and 3 finish and equal their separate runs (parameters and scores)."""
    from lit_sb3 import PPO
    from lit_sb3.core.evaluation import evaluate_policy

    seeds, steps = [3, 5, 7, 11], 400
    if algo == "sac":
        cls, env_id, kwargs = SAC, "Pendulum-v1", dict(SAC_KW, learning_starts=30)
    else:
        cls, env_id, kwargs = (
            PPO,
            "CartPole-v1",
            dict(n_steps=32, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16])),
        )
    envs = _envs(env_id, seeds)
    envs[1] = make_vec_env(env_id, n_envs=1, seed=5, wrapper_class=_RaiseAfter, wrapper_kwargs=dict(after=250))
    batch = SeedBatch(cls, seeds=seeds, **kwargs)
    _fit(batch, envs, steps, tmp_path)
    assert list(batch.failed) == [1] and batch.failed[1].startswith("env raised at step 25")
    assert "RuntimeError: broken after 250 steps" in batch.failed[1]
    for i, seed in enumerate(seeds):
        if i == 1:
            continue
        single = cls("MlpPolicy", seed=seed, **kwargs)
        _fit(single, make_vec_env(env_id, n_envs=1, seed=seed), steps, tmp_path)
        member = batch.member(i)
        assert member.num_timesteps == single.num_timesteps
        _assert_member_equals_single(member, single, optimizers=False)
        scores = [
            evaluate_policy(m, make_vec_env(env_id, n_envs=1, seed=100), n_eval_episodes=2)[0] for m in (member, single)
        ]
        np.testing.assert_allclose(*scores, rtol=reassociation_rtol(longest_reduction(single)))
