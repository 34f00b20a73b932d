"""Seed-batched PPO and A2C: equivalence with K single-seed models (initial parameters, one update on a fixed
rollout incl. per-seed gradient clipping and PPO's per-seed ``target_kl`` stop), training through RLTrainer (a batched
seed retraces its separate run), member save/load, per-seed metrics and failure masking."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from lit_sb3 import A2C, PPO, RLEnvDataModule, RLTrainer
from lit_sb3.algorithms.seed_batch import SeedBatch
from lit_sb3.vec_env import make_vec_env

th.set_num_threads(1)

SEEDS = [3, 5, 7, 11]
N_STEPS, N_ENVS = 16, 2
CASES = {
    "ppo": (PPO, "CartPole-v1", dict(n_steps=N_STEPS, batch_size=8, n_epochs=3, max_grad_norm=0.05)),
    "ppo_box": (PPO, "Pendulum-v1", dict(n_steps=N_STEPS, batch_size=8, n_epochs=3, ent_coef=0.01, clip_range_vf=0.2)),
    "a2c": (A2C, "CartPole-v1", dict(n_steps=N_STEPS, max_grad_norm=0.05)),
    "a2c_box": (A2C, "Pendulum-v1", dict(n_steps=N_STEPS, normalize_advantage=True, use_rms_prop=False)),
}


def _envs(env_id: str, seeds: list[int]) -> list:
    return [make_vec_env(env_id, n_envs=N_ENVS, seed=s) for s in seeds]


def _single(cls, env_id: str, seed: int, **kwargs):
    model = cls("MlpPolicy", seed=seed, **kwargs)
    model.set_env(make_vec_env(env_id, n_envs=N_ENVS, seed=seed))
    model._setup_model()
    return model


def _params_close(batched, single, atol: float = 1e-6) -> None:
    for (name, p), q in zip(batched.policy.named_parameters(), single.policy.parameters()):
        th.testing.assert_close(p, q, atol=atol, rtol=1e-5, msg=name)


@pytest.mark.parametrize("case", ["ppo", "a2c"])
def test_initial_parameters_equal_single_seed_models(case):
    cls, env_id, kwargs = CASES[case]
    batch = SeedBatch(cls, seeds=SEEDS, **kwargs)
    batch.set_env(_envs(env_id, SEEDS))
    obs = th.randn(len(SEEDS), 5, 4)
    values, logits, _ = batch.policy.call("step", obs)
    for i, seed in enumerate(SEEDS):
        single = _single(cls, env_id, seed, **kwargs)
        for (name, p), q in zip(batch.member(i).policy.named_parameters(), single.policy.parameters()):
            assert th.equal(p, q), name
        with th.no_grad():  # the stacked networks compute what the single ones do
            latent_pi, latent_vf = single.policy._latents(obs[i])
            th.testing.assert_close(values[i], single.policy.value_net(latent_vf))
            th.testing.assert_close(logits[i], single.policy.action_net(latent_pi))


def _fill_fixed_rollout(batch, singles) -> None:
    """The same rollout (random observations, the policies' own actions and log-probs) in each single model's
    buffer and in the batch's storage (seed-major columns)."""
    g = np.random.default_rng(0)
    last_values, last_dones = [], []
    for model in singles:
        buffer = model.rollout_buffer
        buffer.reset()
        low = np.maximum(model.observation_space.low, -2.0)
        high = np.minimum(model.observation_space.high, 2.0)
        for _ in range(N_STEPS):
            obs = g.uniform(low, high, size=(N_ENVS, *model.observation_space.shape)).astype(np.float32)
            with th.no_grad():
                actions, values, log_probs = model.policy(th.as_tensor(obs))
            rewards = g.normal(size=N_ENVS).astype(np.float32)
            buffer.add(obs, actions.numpy().reshape(N_ENVS, -1), rewards, g.random(N_ENVS) < 0.1, values, log_probs)
        last_values.append(g.normal(size=N_ENVS).astype(np.float32))
        last_dones.append(g.random(N_ENVS) < 0.1)
        buffer.compute_returns_and_advantage(th.as_tensor(last_values[-1]), last_dones[-1])
    storage = batch.rollout_buffer
    for name in ("observations", "actions", "rewards", "episode_starts", "values", "log_probs"):
        setattr(storage, name, np.concatenate([getattr(m.rollout_buffer, name) for m in singles], axis=1))
    storage.pos, storage.full, storage._flat = N_STEPS, True, {}
    storage.compute_returns_and_advantage(th.as_tensor(np.concatenate(last_values)), np.concatenate(last_dones))
    for name in ("advantages", "returns"):  # GAE per seed (per column) is each single buffer's
        np.testing.assert_array_equal(
            getattr(storage, name), np.concatenate([getattr(m.rollout_buffer, name) for m in singles], axis=1)
        )


def _update_both(case: str, **overrides):
    cls, env_id, kwargs = CASES[case]
    kwargs = {**kwargs, **overrides}
    batch = SeedBatch(cls, seeds=SEEDS, **kwargs)
    batch.set_env(_envs(env_id, SEEDS))
    batch._current_progress_remaining = 1.0
    singles = [_single(cls, env_id, s, **kwargs) for s in SEEDS]
    _fill_fixed_rollout(batch, singles)
    states = []
    for i in range(len(SEEDS)):  # each seed shuffles with its own stream; the single model with the same one
        th.manual_seed(100 + i)
        states.append(th.get_rng_state())
    for generator, state in zip(batch.rng.generators, states):
        generator.set_state(state)
    batch.train()
    for i, single in enumerate(singles):
        th.set_rng_state(states[i])
        single._current_progress_remaining = 1.0
        single.train()
    return batch, singles


@pytest.mark.parametrize("case", list(CASES))
def test_one_update_equals_single_updates(case):
    """Incl. per-seed gradient clipping: max_grad_norm=0.05 clips every seed, each by its own norm."""
    batch, singles = _update_both(case)
    for i, single in enumerate(singles):
        member = batch.member(i)
        _params_close(member, single)
        assert member._n_updates == single._n_updates
        opt_b, opt_s = member.policy.optimizer.state_dict(), single.policy.optimizer.state_dict()
        for j, state in opt_s["state"].items():
            for key, value in state.items():
                th.testing.assert_close(opt_b["state"][j][key].float(), value.float(), atol=1e-6, rtol=1e-5)


def test_ppo_target_kl_stops_each_seed_alone():
    """A seed that crosses 1.5 * target_kl stops for the rest of the update (neither it nor its Adam state moves)
    while the others go on, exactly as each single model does on its own data."""
    batch, singles = _update_both("ppo", n_epochs=6, learning_rate=3e-3, target_kl=0.003, max_grad_norm=0.5)
    updates = [s._n_updates for s in singles]
    assert min(updates) < 6 and len(set(updates)) > 1, updates  # the case exercises different stops
    for i, single in enumerate(singles):
        member = batch.member(i)
        assert member._n_updates == single._n_updates
        _params_close(member, single)
        steps_b = [float(s["step"]) for s in member.policy.optimizer.state_dict()["state"].values()]
        steps_s = [float(s["step"]) for s in single.policy.optimizer.state_dict()["state"].values()]
        assert steps_b == steps_s


def test_ppo_through_rltrainer_retraces_separate_runs(tmp_path):
    kwargs = dict(n_steps=64, batch_size=32, n_epochs=4, policy_kwargs=dict(net_arch=[32, 32]))
    batch = SeedBatch(PPO, seeds=SEEDS, **kwargs)
    trainer = RLTrainer(max_steps=3000, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=_envs("CartPole-v1", SEEDS)))
    rollout = 64 * N_ENVS
    assert batch.num_timesteps == -(-3000 // rollout) * rollout  # whole rollouts, per seed
    assert batch.failed == {}
    metrics = trainer.callback_metrics
    for i in range(len(SEEDS)):
        for key in ("train/approx_kl", "train/clip_fraction", "train/n_updates", "rollout/ep_rew_mean", "time/fps"):
            assert f"seed{i}/{key}" in metrics, key
    # a batched seed is its separate run (same initial weights, env seeds, sampling and shuffling streams)
    single = PPO("MlpPolicy", seed=SEEDS[1], **kwargs)
    RLTrainer(max_steps=3000, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
        single, datamodule=RLEnvDataModule(train_env=make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=SEEDS[1]))
    )
    member = batch.member(1)
    assert member.num_timesteps == single.num_timesteps and member._n_updates == single._n_updates
    _params_close(member, single, atol=1e-4)
    assert [ep["r"] for ep in member.ep_info_buffer] == [ep["r"] for ep in single.ep_info_buffer]


@pytest.mark.parametrize("cls", [PPO, A2C])
def test_member_save_load_round_trip(cls, tmp_path):
    kwargs = dict(n_steps=8, policy_kwargs=dict(net_arch=[16]))
    if cls is PPO:
        kwargs["batch_size"] = 8
    batch = SeedBatch(cls, seeds=[0, 1], **kwargs)
    RLTrainer(max_steps=64, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
        batch, datamodule=RLEnvDataModule(train_env=[make_vec_env("CartPole-v1", n_envs=2, seed=s) for s in (0, 1)])
    )
    member = batch.member(1)
    member.save(tmp_path / "seed1.zip")
    loaded = cls.load(tmp_path / "seed1.zip")
    for (name, p), q in zip(member.policy.named_parameters(), loaded.policy.parameters()):
        assert th.equal(p, q), name
    assert loaded.num_timesteps == batch.num_timesteps
    assert loaded._n_updates == member._n_updates
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert np.array_equal(member.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    saved, live = loaded.policy.optimizer.state_dict()["state"], member.policy.optimizer.state_dict()["state"]
    assert saved.keys() == live.keys() and len(saved) > 0
    for j in saved:
        for key in saved[j]:
            assert th.equal(saved[j][key], live[j][key]), key


class _NaNAfter(gym.Wrapper):
    """Returns a NaN observation from step ``n`` on (a diverging env)."""

    def __init__(self, env: gym.Env, n: int) -> None:
        super().__init__(env)
        self.n, self.t = n, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.t >= self.n:
            obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info


def test_diverging_seed_is_masked_alone(tmp_path):
    envs = _envs("CartPole-v1", [0, 1, 2])
    envs[1] = make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=1, wrapper_class=_NaNAfter, wrapper_kwargs=dict(n=40))
    batch = SeedBatch(A2C, seeds=[0, 1, 2], n_steps=8)
    batch.set_env(envs)
    trainer = RLTrainer(max_steps=400, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(batch, datamodule=RLEnvDataModule(train_env=envs))
    assert list(batch.failed) == [1] and "non-finite observation" in batch.failed[1]
    assert batch.num_timesteps == 400
    for i in (0, 1, 2):  # the failed seed's weights stopped moving before any NaN reached them
        assert all(th.isfinite(p).all() for p in batch.member(i).policy.parameters())


def test_bad_options_are_refused_before_training():
    with pytest.raises(NotImplementedError, match="rollout_buffer_class"):
        SeedBatch(PPO, seeds=[0, 1], rollout_buffer_kwargs=dict(foo=1))
    batch = SeedBatch(PPO, seeds=[0, 1], policy_kwargs=dict(optimizer_class=th.optim.SGD))
    with pytest.raises(ValueError, match="Adam and RMSprop"):
        batch.set_env(_envs("CartPole-v1", [0, 1]))
