"""A K-seed batch saves, loads and resumes like a single model (issue 23): ``batch.save(path)`` writes one archive
holding the K seeds that ``Algo.load(path)`` rebuilds as a K-seed model; a batch resumed from a Lightning checkpoint
taken mid-cycle equals the uninterrupted batch, bitwise on the CPU (parameters, optimiser states with their per-seed
step counts, replay storage, counters, each seed's random streams and episode counts, failed seeds)."""

from __future__ import annotations

import json
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from lit_sb3 import (
    A2C,
    DDPG,
    DQN,
    PPO,
    QRDQN,
    SAC,
    TD3,
    TQC,
    CrossQ,
    OrnsteinUhlenbeckActionNoise,
    RecurrentPPO,
    RLEnvDataModule,
    RLTrainer,
    SeedBatch,
)
from lit_sb3.algorithms.ppo_mask import MaskablePPO
from lit_sb3.algorithms.trpo import TRPO
from lit_sb3.callbacks import EnvStepCheckpoint
from lit_sb3.utils.serialization import BadFileError
from lit_sb3.vec_env import VecNormalize, make_vec_env
from tests.tolerances import return_rtol

th.set_num_threads(1)

SEEDS = [3, 5, 7]
NET = dict(net_arch=[16, 16])
OFF = dict(batch_size=16, learning_starts=20, policy_kwargs=NET)
DQN_KW = dict(OFF, target_update_interval=20, exploration_fraction=0.5)
ON = dict(n_steps=16, policy_kwargs=NET)

# (class, env id, kwargs, env steps per seed)
ALGOS = {
    "sac": (SAC, "Pendulum-v1", OFF, 60),
    "td3": (TD3, "Pendulum-v1", OFF, 60),
    "ddpg": (DDPG, "Pendulum-v1", OFF, 60),
    "tqc": (TQC, "Pendulum-v1", dict(OFF, policy_kwargs=dict(net_arch=[16], n_quantiles=5)), 60),
    "dqn": (DQN, "CartPole-v1", DQN_KW, 60),
    "qrdqn": (QRDQN, "CartPole-v1", dict(DQN_KW, policy_kwargs=dict(net_arch=[16], n_quantiles=5)), 60),
    "ppo": (PPO, "CartPole-v1", dict(ON, batch_size=8, n_epochs=2), 64),
    "a2c": (A2C, "CartPole-v1", ON, 64),
    "trpo": (TRPO, "Pendulum-v1", dict(ON, batch_size=16), 64),
    "maskable_ppo": (MaskablePPO, "InvalidActionDiscrete-v0", dict(ON, batch_size=8, n_epochs=2), 64),
    "ppo_lstm": (RecurrentPPO, "CartPole-v1",
                 dict(ON, batch_size=8, n_epochs=2, policy_kwargs=dict(NET, lstm_hidden_size=8)), 64),
}  # fmt: skip


def _env(env_id: str, seed: int, **kwargs):
    import lit_sb3.envs  # noqa: F401 - registers the masked envs

    return make_vec_env(env_id, n_envs=1, seed=seed, **kwargs)


def _fit(model, envs, steps: int, root, ckpt_path=None, callbacks=None) -> RLTrainer:
    trainer = RLTrainer(max_steps=steps, logger=False, enable_progress_bar=False, callbacks=callbacks,
                        enable_checkpointing=callbacks is not None, default_root_dir=root)  # fmt: skip
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=envs), ckpt_path=ckpt_path)
    return trainer


def _assert_tensors_equal(a: dict, b: dict) -> None:
    """Bitwise equal (a masked seed's optimiser moments may hold NaNs in both): the resumed batch runs the
    uninterrupted one's operations on the same shapes with the same kernels in the same order, exact by construction."""
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], th.Tensor):
            th.testing.assert_close(a[key], b[key], rtol=0, atol=0, equal_nan=True, msg=key)
        else:
            assert a[key] == b[key], key


def _assert_optimizers_equal(a, b) -> None:
    for (name, opt_a), opt_b in zip(a._optimizers_to_save().items(), b._optimizers_to_save().values(), strict=True):
        state_a, state_b = opt_a.state_dict(), opt_b.state_dict()
        assert state_a["state"].keys() == state_b["state"].keys(), name
        for index, values in state_a["state"].items():
            for key, value in values.items():
                other = th.as_tensor(state_b["state"][index][key])
                th.testing.assert_close(th.as_tensor(value), other, rtol=0, atol=0, equal_nan=True, msg=(name, key))
        assert [g["lr"] for g in state_a["param_groups"]] == [g["lr"] for g in state_b["param_groups"]]


@pytest.mark.parametrize("algo", list(ALGOS))
def test_batch_save_load_round_trip(algo, tmp_path):
    """One archive holds the K seeds: ``Algo.load`` rebuilds a K-seed model with the same stacked weights, optimiser
    states, counters and seeds; each member equals the saved batch's member and saves as a single model."""
    cls, env_id, kwargs, steps = ALGOS[algo]
    batch = SeedBatch(cls, seeds=SEEDS, **kwargs)
    _fit(batch, [_env(env_id, s) for s in SEEDS], steps, tmp_path)
    batch.save(tmp_path / "batch.zip")
    with zipfile.ZipFile(tmp_path / "batch.zip") as archive:
        data = json.loads(archive.read("data.json"))
    assert data["seeds"] == SEEDS and "episode_nums" in data["seed_state"]

    loaded = cls.load(tmp_path / "batch.zip")
    assert type(loaded) is cls and loaded.seeds == SEEDS and loaded.n_seeds == 3
    assert loaded.num_timesteps == batch.num_timesteps == steps
    assert np.array_equal(np.asarray(loaded._n_updates), np.asarray(batch._n_updates))
    assert loaded._seed_state.episode_nums == batch._seed_state.episode_nums
    _assert_tensors_equal(batch.state_dict(), loaded.state_dict())
    _assert_optimizers_equal(batch, loaded)
    for i in range(3):
        saved, got = batch.member(i), loaded.member(i)
        assert got.seed == SEEDS[i] and got._n_updates == saved._n_updates and got._episode_num == saved._episode_num
        _assert_tensors_equal(saved.policy.state_dict(), got.policy.state_dict())
    # a member of the loaded batch is an ordinary single model
    got.save(tmp_path / "member.zip")
    single = cls.load(tmp_path / "member.zip")
    assert single.n_seeds == 1 and single.seed == SEEDS[2]
    _assert_tensors_equal(single.policy.state_dict(), got.policy.state_dict())


def test_loaded_batch_takes_one_env_per_seed_and_trains_on(tmp_path):
    """``SAC.load(path, env=[venv_0, ...])`` attaches one env per seed; training goes on from the loaded weights."""
    batch = SeedBatch(SAC, seeds=SEEDS, **OFF)
    _fit(batch, [_env("Pendulum-v1", s) for s in SEEDS], 40, tmp_path)
    batch.fail_seed(1, "pruned")
    batch.save(tmp_path / "batch")
    loaded = SAC.load(tmp_path / "batch", env=[_env("Pendulum-v1", s) for s in SEEDS])
    assert loaded.failed == {1: "pruned"} and len(loaded.envs) == 3
    frozen = loaded.member(1).policy.state_dict()
    loaded.learn(40, reset_num_timesteps=False)
    assert loaded.num_timesteps == 80
    _assert_tensors_equal(frozen, loaded.member(1).policy.state_dict())  # the failed seed stays as it was saved
    assert not th.equal(batch.member(0).actor.mu.weight, loaded.member(0).actor.mu.weight)
    with pytest.raises(ValueError, match=r"the env of seed index 0 has the spaces Box.*, the model Box"):
        SAC.load(tmp_path / "batch", env=[_env("MountainCarContinuous-v0", s) for s in SEEDS])


def test_single_archive_is_unchanged_and_bad_seed_data_is_one_line(tmp_path):
    single = SAC("MlpPolicy", "Pendulum-v1", seed=3, **OFF)
    single.save(tmp_path / "single.zip")
    with zipfile.ZipFile(tmp_path / "single.zip") as archive:
        data = json.loads(archive.read("data.json"))
    assert "seeds" not in data and "seed_state" not in data and isinstance(data["_n_updates"], int)
    assert SAC.load(tmp_path / "single.zip").n_seeds == 1

    batch = SeedBatch(SAC, seeds=SEEDS, **OFF)
    batch.set_env([_env("Pendulum-v1", s) for s in SEEDS])
    batch.save(tmp_path / "batch.zip")
    with zipfile.ZipFile(tmp_path / "batch.zip") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data.json"])
    for bad, message in (
        (dict(seeds=[3, 3, 7]), "bad seeds in data.json: seeds must be distinct"),
        (dict(seeds=[4, 5, 7]), "do not match the stored seed"),
        (dict(seeds=list(range(3, 2000))), "seeds must be a list of 2 to 1024 integers"),
        (dict(_n_updates=[1, 2]), "_n_updates holds 2 counts for 3 seed"),
        (dict(seed_state={"episode_nums": [0], "failed": {}}), "does not hold 3 seeds"),
    ):
        members["data.json"] = json.dumps({**data, **bad}).encode()
        with zipfile.ZipFile(tmp_path / "bad.zip", "w") as archive:
            for name, raw in members.items():
                archive.writestr(name, raw)
        with pytest.raises(BadFileError, match=message) as info:
            SAC.load(tmp_path / "bad.zip")
        assert "\n" not in str(info.value)


class _NanRewardAfter(gym.Wrapper):
    """Rewards turn NaN after ``after`` steps (the seed is masked there)."""

    def __init__(self, env: gym.Env, after: int) -> None:
        super().__init__(env)
        self.after, self.steps = after, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, float("nan") if self.steps > self.after else reward, terminated, truncated, info


def _envs(case: str) -> list:
    cls, env_id, kwargs, budget, every, extra = RESUME[case]
    envs = []
    for i, seed in enumerate(SEEDS):
        env_kwargs = dict(max_episode_steps=extra["lengths"][i]) if "lengths" in extra else None
        wrapper = {}
        if extra.get("nan_seed") == i:
            wrapper = dict(wrapper_class=_NanRewardAfter, wrapper_kwargs=dict(after=extra["nan_after"]))
        env = _env(env_id, seed, env_kwargs=env_kwargs, **wrapper)
        envs.append(VecNormalize(env) if extra.get("normalize") else env)
    return envs


# (class, env id, kwargs, budget, checkpoint every, extra): each first checkpoint falls inside a collect/update cycle
# (off-policy) or at a rollout end (on-policy, as for a single model)
RESUME = {
    "sac-steps4-gs3": (SAC, "Pendulum-v1", dict(OFF, train_freq=4, gradient_steps=3), 160, 77, {}),
    # each seed its own cycle (per-seed time limits), per-seed Adam step counts and update counts
    "sac-2episodes": (SAC, "Pendulum-v1", dict(OFF, train_freq=(2, "episode"), gradient_steps=-1), 180, 71,
                      dict(lengths=[20, 25, 30])),
    # seed index 1 fails before the checkpoint; epsilon-greedy draws from each seed's numpy stream
    "dqn-failed-seed": (DQN, "CartPole-v1", dict(DQN_KW, train_freq=2, gradient_steps=1), 200, 93,
                        dict(nan_seed=1, nan_after=50)),
    "td3": (TD3, "Pendulum-v1", dict(OFF, train_freq=2), 120, 55, {}),
    # TD3's delayed steps on each seed's own update count, each seed's Ornstein-Uhlenbeck process on its numpy stream
    "td3-episodes-ou-noise": (TD3, "Pendulum-v1", dict(OFF, train_freq=(1, "episode"), gradient_steps=3,
                                                       action_noise=OrnsteinUhlenbeckActionNoise(np.zeros(1),
                                                                                                 0.5 * np.ones(1))),
                              130, 57, dict(lengths=[20, 25, 30])),
    # CrossQ's per-seed BatchRenorm warm-up counters (left at different updates) and delayed actor steps
    "crossq-episodes": (CrossQ, "Pendulum-v1", dict(OFF, train_freq=(1, "episode"), gradient_steps=-1,
                                                    policy_kwargs=dict(net_arch=[16], renorm_warmup_steps=20)),
                        130, 57, dict(lengths=[20, 25, 30])),
    # each seed's VecNormalize statistics (and the normalised observations stored per seed)
    "sac-vecnormalize": (SAC, "Pendulum-v1", dict(OFF, train_freq=2), 120, 55, dict(normalize=True)),
    "ppo": (PPO, "CartPole-v1", dict(ON, batch_size=8, n_epochs=2, target_kl=0.01), 128, 40, {}),
    "a2c": (A2C, "CartPole-v1", ON, 96, 40, {}),
    "tqc": (TQC, "Pendulum-v1", dict(ALGOS["tqc"][2], train_freq=3), 100, 44, {}),
    "qrdqn": (QRDQN, "CartPole-v1", dict(ALGOS["qrdqn"][2], train_freq=3), 100, 44, {}),
    "trpo": (TRPO, "Pendulum-v1", ALGOS["trpo"][2], 96, 40, {}),
    "maskable_ppo": (MaskablePPO, "InvalidActionDiscrete-v0", ALGOS["maskable_ppo"][2], 96, 40, {}),
    # the training envs' LSTM states [layers, K * n_envs, hidden] and each seed's numpy stream (its split points)
    "ppo_lstm": (RecurrentPPO, "CartPole-v1", dict(ALGOS["ppo_lstm"][2], target_kl=0.01), 128, 40, {}),
}  # fmt: skip


def _snapshot(model) -> dict:
    state = model._seed_state
    return {
        "global": (th.get_rng_state().clone(), np.random.get_state()[1].copy()),
        "generators": [g.get_state() for g in state.generators],
        "np_rngs": [rng.get_state()[1].copy() for rng in state.np_rngs],
        "episode_nums": list(state.episode_nums),
        "failed": dict(model.failed),
    }


def _assert_same_batch(expected, got, expected_snapshot: dict, got_snapshot: dict) -> None:
    assert got.num_timesteps == expected.num_timesteps
    assert np.array_equal(np.asarray(got._n_updates), np.asarray(expected._n_updates))
    _assert_tensors_equal(expected.state_dict(), got.state_dict())
    _assert_optimizers_equal(expected, got)
    buffer = getattr(expected, "replay_buffer", None)
    if buffer is not None:
        assert (got.replay_buffer.pos, got.replay_buffer.full) == (buffer.pos, buffer.full)
        _assert_tensors_equal(buffer.state_dict(), got.replay_buffer.state_dict())  # only the filled slots
    assert np.array_equal(expected._last_obs, got._last_obs)
    states = getattr(expected, "_last_lstm_states", None)
    if states is not None:
        for a, b in zip((*states.pi, *states.vf), (*got._last_lstm_states.pi, *got._last_lstm_states.vf), strict=True):
            assert th.equal(a, b)
    assert th.equal(expected_snapshot["global"][0], got_snapshot["global"][0])
    assert np.array_equal(expected_snapshot["global"][1], got_snapshot["global"][1])
    for a, b in zip(expected_snapshot["generators"], got_snapshot["generators"], strict=True):
        assert th.equal(a, b)
    for a, b in zip(expected_snapshot["np_rngs"], got_snapshot["np_rngs"], strict=True):
        assert np.array_equal(a, b)
    assert got_snapshot["episode_nums"] == expected_snapshot["episode_nums"]
    assert got_snapshot["failed"] == expected_snapshot["failed"]
    for vn_a, vn_b in zip(expected._seed_state.normalizers, got._seed_state.normalizers, strict=True):
        if vn_a is not None:
            assert np.array_equal(vn_a.obs_rms.mean, vn_b.obs_rms.mean) and vn_a.obs_rms.count == vn_b.obs_rms.count
            assert np.array_equal(vn_a.ret_rms.var, vn_b.ret_rms.var)


@pytest.mark.parametrize("case", list(RESUME))
def test_batch_resumed_mid_cycle_equals_the_uninterrupted_batch(case, tmp_path):
    cls, _, kwargs, budget, every, extra = RESUME[case]
    straight = SeedBatch(cls, seeds=SEEDS, **kwargs)
    _fit(straight, _envs(case), budget, tmp_path / "straight")
    straight_snapshot = _snapshot(straight)

    checkpointing = EnvStepCheckpoint(every_n_env_steps=every, dirpath=tmp_path)
    observed = SeedBatch(cls, seeds=SEEDS, **kwargs)
    _fit(observed, _envs(case), budget, tmp_path / "observed", callbacks=[checkpointing])
    _assert_same_batch(straight, observed, straight_snapshot, _snapshot(observed))  # checkpoints change nothing
    first = checkpointing.saved[0]
    if issubclass(cls, (SAC, TD3, TQC, DQN, QRDQN)):
        assert int(first.stem.split("=")[1]) == every  # exactly there, inside a cycle

    resumed = SeedBatch(cls, seeds=SEEDS, **kwargs)
    _fit(resumed, _envs(case), budget, tmp_path / "resumed", ckpt_path=str(first))
    _assert_same_batch(straight, resumed, straight_snapshot, _snapshot(resumed))
    if "nan_seed" in extra:
        assert list(resumed.failed) == [extra["nan_seed"]]
    if "lengths" in extra:
        assert len(set(np.asarray(resumed._n_updates).tolist())) > 1  # the seeds updated on their own schedules


def test_checkpoint_of_other_seeds_is_refused(tmp_path):
    checkpointing = EnvStepCheckpoint(every_n_env_steps=30, dirpath=tmp_path)
    _fit(SeedBatch(SAC, seeds=SEEDS, **OFF), _envs("sac-steps4-gs3"), 40, tmp_path, callbacks=[checkpointing])
    other = SeedBatch(SAC, seeds=[3, 5, 8], **OFF)
    envs = [_env("Pendulum-v1", s) for s in other.seeds]
    with pytest.raises(ValueError, match=r"holds the seeds \[3, 5, 7\], this SAC trains \[3, 5, 8\]"):
        _fit(other, envs, 60, tmp_path, ckpt_path=str(checkpointing.saved[0]))


def _sac(seeds: list[int]) -> SAC:
    return SAC("MlpPolicy", seed=seeds[0], **OFF) if len(seeds) == 1 else SeedBatch(SAC, seeds=seeds, **OFF)


def _tampered(checkpoint: dict, case: str) -> dict:
    """``checkpoint`` (loaded with ``weights_only=True``) with one thing changed."""
    out = dict(checkpoint)
    if case == "exp_avg":  # an Adam moment cut to one row (one seed of a stack, or one unit of a layer)
        states = [dict(s, state={**s["state"]}) for s in checkpoint["optimizer_states"]]
        target = next(s for s in states if s["state"] and len(s["state"][0]["exp_avg"]) > 1)
        target["state"][0] = dict(target["state"][0], exp_avg=target["state"][0]["exp_avg"][:1])
        out["optimizer_states"] = states
    elif case == "optimizers":  # an optimiser state dropped
        out["optimizer_states"] = checkpoint["optimizer_states"][:-1]
    elif case == "weights":  # a network tensor of another shape
        key = next(k for k, v in checkpoint["state_dict"].items() if v.dim() >= 2)
        out["state_dict"] = {**checkpoint["state_dict"], key: checkpoint["state_dict"][key][..., :1]}
    return out


@pytest.mark.parametrize("saved_seeds, resumed_seeds, case, message", [
    ([3], [3], "exp_avg", r"optimizer_states\[\d\]: exp_avg of parameter 0 has shape \(1,"),
    ([3, 5], [3, 5], "exp_avg", r"optimizer_states\[\d\]: exp_avg of parameter 0 has shape \(1,"),
    ([3], [3], "optimizers", r"optimizer_states holds \d optimizer state\(s\), SAC has \d optimizer\(s\)"),
    ([3, 5], [3, 5], "weights", r"state_dict \S+ has shape"),
    ([3, 5], [3], None, r"the checkpoint holds the seeds \[3, 5\], this SAC trains \[3\]"),
    ([3], [3, 5], None, r"the checkpoint holds 1 seed, this SAC trains \[3, 5\]"),
    ([3, 5], [3, 5, 7], None, r"the checkpoint holds the seeds \[3, 5\], this SAC trains \[3, 5, 7\]"),
])  # fmt: skip
def test_tampered_checkpoint_is_refused_before_training(tmp_path, saved_seeds, resumed_seeds, case, message):
    """A Lightning checkpoint resumed with ``RLTrainer.fit(ckpt_path=)`` is checked as an archive is (the same
    checks), before Lightning loads any of it: an optimiser moment of another shape (which loaded, then turned the
    weights NaN), an optimiser state missing, a network tensor of another shape, or another K than the model's
    (K = 1 and K > 1 both ways) is one line naming the file, and nothing trains."""
    checkpointing = EnvStepCheckpoint(every_n_env_steps=30, dirpath=tmp_path / "saved")
    envs = [_env("Pendulum-v1", s) for s in saved_seeds]
    _fit(_sac(saved_seeds), envs[0] if len(envs) == 1 else envs, 40, tmp_path, callbacks=[checkpointing])
    path = tmp_path / "tampered.ckpt"
    th.save(_tampered(th.load(checkpointing.saved[0], weights_only=True), case), path)
    model = _sac(resumed_seeds)
    envs = [_env("Pendulum-v1", s) for s in resumed_seeds]
    with pytest.raises(BadFileError, match=message) as info:
        _fit(model, envs[0] if len(envs) == 1 else envs, 60, tmp_path / "resumed", ckpt_path=str(path))
    assert "\n" not in str(info.value) and str(info.value).startswith(f"{path}: "), str(info.value)
    assert model.num_timesteps == 0 and model._n_updates == 0  # no env step, no update
    assert all(not opt.state for opt in model._optimizers_to_save().values())  # no optimiser step, nothing loaded


def test_eval_callback_evaluates_each_seed_as_its_separate_run(tmp_path):
    """``EvalCallback([eval_env_0, ..., eval_env_{K-1}])`` on a batch evaluates seed i's member on its own eval env:
    seed i's logger gets ``eval/mean_reward`` at the same env steps and with the value its separate run's
    ``EvalCallback`` logs (continuous returns: tests/tolerances.py's ``return_rtol``, the batch's baddbmm moves the
    actions by round-off), and each seed keeps its own evaluations file and best model."""
    import csv

    from lightning.pytorch.loggers import CSVLogger

    from lit_sb3 import SeedRoutingLogger
    from lit_sb3.callbacks import EvalCallback

    seeds, kwargs, steps = [3, 5], dict(OFF, learning_starts=30), 80

    def evaluator(seed_list: list[int]) -> EvalCallback:
        envs = [_env("Pendulum-v1", s + 100) for s in seed_list]
        return EvalCallback(envs if len(envs) > 1 else envs[0], n_eval_episodes=1, eval_freq=40,
                            log_path=str(tmp_path / "evals"), best_model_save_path=str(tmp_path / "best"))  # fmt: skip

    batch = SeedBatch(SAC, seeds=seeds, **kwargs)
    loggers = [CSVLogger(tmp_path, name=f"seed{s}", version=0) for s in seeds]
    callback = evaluator(seeds)
    trainer = RLTrainer(max_steps=steps, logger=SeedRoutingLogger(loggers), enable_progress_bar=False,
                        enable_checkpointing=False, rl_callback=callback)  # fmt: skip
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=[_env("Pendulum-v1", s) for s in seeds]))
    assert len(callback.best_mean_rewards) == 2 and callback.last_mean_reward == np.mean(callback.last_mean_rewards)
    for i, seed in enumerate(seeds):
        single = SAC("MlpPolicy", seed=seed, **kwargs)
        single_callback = evaluator([seed])
        RLTrainer(max_steps=steps, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                  rl_callback=single_callback).fit(single, datamodule=RLEnvDataModule(train_env=_env("Pendulum-v1", seed)))  # fmt: skip
        rows = [r for r in csv.DictReader(open(f"{loggers[i].log_dir}/metrics.csv")) if r.get("eval/mean_reward")]
        assert [int(r["step"]) for r in rows] == [40, 80]
        got = [float(r["eval/mean_reward"]) for r in rows]
        expected = np.load(tmp_path / "evals" / "evaluations.npz")["results"][:, 0]  # the separate run's file
        np.testing.assert_allclose(got, expected, rtol=return_rtol(single))
        assert callback.last_mean_rewards[i] == pytest.approx(single_callback.last_mean_reward, rel=return_rtol(single))
        seed_file = np.load(tmp_path / "evals" / f"evaluations_seed{i}.npz")
        assert seed_file["timesteps"].tolist() == [40, 80] and seed_file["results"].shape == (2, 1)
        assert SAC.load(tmp_path / "best" / f"best_model_seed{i}.zip").seed == seed


def test_eval_callback_on_a_batch_needs_one_env_per_seed(tmp_path):
    from lit_sb3.callbacks import EvalCallback

    batch = SeedBatch(SAC, seeds=SEEDS, **OFF)
    callback = EvalCallback(_env("Pendulum-v1", 0), eval_freq=10)
    trainer = RLTrainer(max_steps=20, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        rl_callback=callback)  # fmt: skip
    with pytest.raises(ValueError, match=r"SAC of 3 seed\(s\) needs one eval env per seed .* got 1\."):
        trainer.fit(batch, datamodule=RLEnvDataModule(train_env=[_env("Pendulum-v1", s) for s in SEEDS]))
    from lit_sb3.callbacks import StopTrainingOnRewardThreshold

    callback = EvalCallback([_env("Pendulum-v1", s) for s in SEEDS], eval_freq=10,
                            callback_on_new_best=StopTrainingOnRewardThreshold(-100.0))  # fmt: skip
    trainer = RLTrainer(max_steps=20, logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        rl_callback=callback)  # fmt: skip
    with pytest.raises(ValueError, match="not supported with K > 1 seeds; read best_mean_rewards"):
        trainer.fit(batch, datamodule=RLEnvDataModule(train_env=[_env("Pendulum-v1", s) for s in SEEDS]))


def _rewritten(source, target, **changes) -> None:
    """Copy the archive ``source`` to ``target`` with members replaced (``data.json`` as a dict, others as bytes)."""
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    for name, value in changes.items():
        members[name.replace("_", ".", 1)] = json.dumps(value).encode() if isinstance(value, dict) else value
    with zipfile.ZipFile(target, "w") as archive:
        for name, raw in members.items():
            archive.writestr(name, raw)


def test_a_seed_archive_declaring_more_seeds_than_it_holds_is_refused_before_building(tmp_path):
    """A ~100 KB K=2 archive whose data.json declares 1,024 seeds (it built every member first: 3.67 GB) is one line
    naming the file, in a process capped at 1 GB of address space."""
    import subprocess
    import sys
    from pathlib import Path

    batch = SeedBatch(SAC, seeds=[3, 5], **OFF)
    batch.set_env([_env("Pendulum-v1", s) for s in (3, 5)])
    batch.save(tmp_path / "batch.zip")
    with zipfile.ZipFile(tmp_path / "batch.zip") as archive:
        data = json.loads(archive.read("data.json"))
    seeds = [3, *range(100, 100 + 1023)]
    crafted = dict(data, seeds=seeds, _n_updates=[0] * 1024, seed_state=dict(data["seed_state"],
                   episode_nums=[0] * 1024, failed={}))  # fmt: skip
    _rewritten(tmp_path / "batch.zip", tmp_path / "crafted.zip", data_json=crafted)
    assert (tmp_path / "crafted.zip").stat().st_size < 200_000
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from lit_sb3 import SAC\nfrom lit_sb3.utils.serialization import BadFileError\n"
        "try:\n    SAC.load(sys.argv[1])\nexcept BadFileError as exc:\n    print(exc); sys.exit(3)\n"
    )
    env = {"PYTHONPATH": str(Path(__file__).resolve().parent.parent), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "crafted.zip")], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip
    assert done.returncode == 3, done.stderr[-2000:]
    line = done.stdout.strip()
    assert "\n" not in line and line.startswith(str(tmp_path / "crafted.zip")), line
    assert "declares 1024 seeds but model.pth holds" in line


def test_tampered_optimizer_states_are_refused(tmp_path):
    """Optimiser moments of another shape, non-finite, or a negative second moment (Adam's sqrt turns it NaN) are one
    line naming the file and the optimiser; the untampered archive loads and trains."""
    import io

    batch = SeedBatch(SAC, seeds=[3, 5], **OFF)
    batch.set_env([_env("Pendulum-v1", s) for s in (3, 5)])
    batch.learn(60)
    batch.save(tmp_path / "batch.zip")
    with zipfile.ZipFile(tmp_path / "batch.zip") as archive:
        optim = th.load(io.BytesIO(archive.read("optimizers.pth")), weights_only=True)
    state = optim["critic.optimizer"]["state"][0]
    for key, value, message in (
        ("exp_avg", state["exp_avg"][:1], "exp_avg of parameter 0 has shape"),
        ("exp_avg", th.full_like(state["exp_avg"], float("nan")), "non-finite values"),
        ("exp_avg_sq", -th.ones_like(state["exp_avg_sq"]), "exp_avg_sq of parameter 0 holds negative values"),
    ):
        tampered = {k: dict(v, state={**v["state"]}) for k, v in optim.items()}
        tampered["critic.optimizer"]["state"][0] = dict(state, **{key: value})
        buffer = io.BytesIO()
        th.save(tampered, buffer)
        _rewritten(tmp_path / "batch.zip", tmp_path / "bad.zip", optimizers_pth=buffer.getvalue())
        with pytest.raises(BadFileError, match=message) as info:
            SAC.load(tmp_path / "bad.zip")
        assert "\n" not in str(info.value) and "bad.zip: optimizer critic.optimizer" in str(info.value)
    loaded = SAC.load(tmp_path / "batch.zip")
    loaded.set_env([_env("Pendulum-v1", s) for s in (3, 5)])
    loaded.learn(40, reset_num_timesteps=False)
    assert all(bool(th.isfinite(p).all()) for p in loaded.policy.parameters())
