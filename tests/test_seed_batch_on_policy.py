"""PPO and A2C over a seed dimension: ``SeedBatch(PPO, seeds=[...])`` is a PPO holding K seeds, and each seed is
its separate run — initial parameters, one update on a fixed rollout (incl. per-seed gradient clipping and PPO's
per-seed ``target_kl`` stop), whole runs through RLTrainer, member save/load, per-seed metrics and failure masking
(a NaN from one seed's env, a NaN in one seed's loss) while the others go on.

Tolerances: a stacked layer computes the K seeds' matmuls with one ``baddbmm`` where the single run uses
``addmm``; both are float32 with a different summation order. Parameters are compared within the bound
``tests/tolerances.py`` derives from each separate run's own optimiser steps, lr, step bound (Adam's, or RMSprop's
for A2C) and longest reduction (``model_tolerances``); optimiser moments at ``state_tolerances``; episode rewards
exactly with discrete actions (a discrete decision) and at ``return_rtol`` with continuous ones.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from lit_sb3 import A2C, PPO, RLEnvDataModule, RLTrainer, SeedBatch
from lit_sb3.algorithms.ppo_mask import MaskablePPO
from lit_sb3.algorithms.trpo import TRPO
from lit_sb3.vec_env import make_vec_env
from tests.envs.nan_seed import NaNObservationAfter
from tests.tiny_image_env import TINY_DICT_ENV, TINY_IMAGE_ENV
from tests.tolerances import (
    assert_parameters_close,
    model_tolerances,
    return_rtol,
    state_tolerances,
    trpo_actor_distance,
    trpo_recorder,
)

th.set_num_threads(1)

SEEDS = [3, 5, 7]
N_STEPS, N_ENVS = 16, 2
CASES = {
    "ppo": (PPO, "CartPole-v1", dict(n_steps=N_STEPS, batch_size=8, n_epochs=3, max_grad_norm=0.05)),
    "ppo_box": (PPO, "Pendulum-v1", dict(n_steps=N_STEPS, batch_size=8, n_epochs=3, ent_coef=0.01, clip_range_vf=0.2)),
    "a2c": (A2C, "CartPole-v1", dict(n_steps=N_STEPS, max_grad_norm=0.05)),
    "a2c_box": (A2C, "Pendulum-v1", dict(n_steps=N_STEPS, normalize_advantage=True, use_rms_prop=False)),
}


class _SpacesEnv(gym.Env):
    """A small env with a chosen action space (and Box or Discrete observations) for the other distributions."""

    def __init__(self, action_space: gym.spaces.Space, discrete_obs: bool = False) -> None:
        self.action_space = action_space
        self.observation_space = gym.spaces.Discrete(5) if discrete_obs else gym.spaces.Box(-1, 1, (3,), np.float32)
        self._t = 0

    def _obs(self):
        if isinstance(self.observation_space, gym.spaces.Discrete):
            return int(self.np_random.integers(5))
        return self.np_random.uniform(-1, 1, 3).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        return self._obs(), float(np.sum(action)), False, self._t >= 10, {}


SPACES = {
    "multidiscrete": dict(action_space=gym.spaces.MultiDiscrete([3, 2])),
    "multidiscrete_uniform": dict(action_space=gym.spaces.MultiDiscrete([3, 3])),
    "multibinary": dict(action_space=gym.spaces.MultiBinary(3)),
    "discrete_obs": dict(action_space=gym.spaces.Discrete(2), discrete_obs=True),
}


def _envs(env_id: str, seeds: list[int]) -> list:
    return [make_vec_env(env_id, n_envs=N_ENVS, seed=s) for s in seeds]


def _single(cls, env_id: str, seed: int, **kwargs):
    model = cls("MlpPolicy", seed=seed, **kwargs)
    model.set_env(make_vec_env(env_id, n_envs=N_ENVS, seed=seed))
    model._setup_model()
    return model


def test_seed_batch_is_the_algorithm_class_and_one_seed_is_the_single_model():
    model = SeedBatch(PPO, seeds=[0, 1, 2], n_steps=8, batch_size=8)
    assert type(model) is PPO and model.n_seeds == 3 and model.seeds == [0, 1, 2]
    one = SeedBatch(A2C, seeds=[5], n_steps=8)
    assert type(one) is A2C and one.n_seeds == 1 and one.seed == 5 and one.member(0) is one


@pytest.mark.parametrize("case", ["ppo", "ppo_box"])
def test_initial_parameters_and_forward_equal_single_seed_models(case):
    cls, env_id, kwargs = CASES[case]
    model = SeedBatch(cls, seeds=SEEDS, **kwargs)
    model.set_env(_envs(env_id, SEEDS))
    dim = model.observation_space.shape[0]
    obs = th.randn(len(SEEDS), 5, dim)
    actions = th.stack([th.as_tensor(np.stack([model.action_space.sample() for _ in range(5)])) for _ in SEEDS])
    if cls is PPO and isinstance(model.action_space, gym.spaces.Discrete):
        actions = actions.reshape(len(SEEDS), 5)
    with th.no_grad():
        values, log_prob, entropy = model.policy.evaluate_actions(obs, actions.float())
    for i, seed in enumerate(SEEDS):
        single = _single(cls, env_id, seed, **kwargs)
        for (name, p), q in zip(model.member(i).policy.named_parameters(), single.policy.parameters(), strict=True):
            assert th.equal(p, q), name
        with th.no_grad():  # the stacked networks compute what the single ones do
            v, lp, ent = single.policy.evaluate_actions(obs[i], actions[i].float())
        th.testing.assert_close(values[i], v)
        th.testing.assert_close(log_prob[i], lp)
        th.testing.assert_close(entropy[i], ent)


def _fill_fixed_rollout(model, singles) -> None:
    """The same rollout (random observations, the policies' own actions and log-probs) in each single model's
    buffer and in the K-seed storage (seed-major columns)."""
    g = np.random.default_rng(0)
    last_values, last_dones = [], []
    for single in singles:
        buffer = single.rollout_buffer
        buffer.reset()
        low = np.maximum(single.observation_space.low, -2.0)
        high = np.minimum(single.observation_space.high, 2.0)
        for _ in range(N_STEPS):
            obs = g.uniform(low, high, size=(N_ENVS, *single.observation_space.shape)).astype(np.float32)
            with th.no_grad():
                actions, values, log_probs = single.policy(th.as_tensor(obs))
            rewards = g.normal(size=N_ENVS).astype(np.float32)
            buffer.add(obs, actions.numpy().reshape(N_ENVS, -1), rewards, g.random(N_ENVS) < 0.1, values, log_probs)
        last_values.append(g.normal(size=N_ENVS).astype(np.float32))
        last_dones.append(g.random(N_ENVS) < 0.1)
        buffer.compute_returns_and_advantage(th.as_tensor(last_values[-1]), last_dones[-1])
    storage = model.rollout_buffer
    for name in ("observations", "actions", "rewards", "episode_starts", "values", "log_probs"):
        setattr(storage, name, np.concatenate([getattr(m.rollout_buffer, name) for m in singles], axis=1))
    storage.pos, storage.full, storage._flat = N_STEPS, True, {}
    storage.compute_returns_and_advantage(th.as_tensor(np.stack(last_values)), np.stack(last_dones))
    for name in ("advantages", "returns"):  # GAE per seed (per column) is each single buffer's
        np.testing.assert_array_equal(
            getattr(storage, name), np.concatenate([getattr(m.rollout_buffer, name) for m in singles], axis=1)
        )


def _update_both(case: str, nan_seed: int | None = None, **overrides):
    cls, env_id, kwargs = CASES[case]
    kwargs = {**kwargs, **overrides}
    model = SeedBatch(cls, seeds=SEEDS, **kwargs)
    model.set_env(_envs(env_id, SEEDS))
    model._current_progress_remaining = 1.0
    singles = [_single(cls, env_id, s, **kwargs) for s in SEEDS]
    _fill_fixed_rollout(model, singles)
    if nan_seed is not None:  # one seed's stored rewards turn NaN: its advantages, returns and losses follow
        columns = slice(nan_seed * N_ENVS, (nan_seed + 1) * N_ENVS)
        model.rollout_buffer.advantages[:, columns] = np.nan
        model.rollout_buffer._flat = {}
    states = []
    for i in range(len(SEEDS)):  # each seed shuffles with its own stream; the single model with the same one
        th.manual_seed(100 + i)
        states.append(th.get_rng_state())
    for generator, state in zip(model.seed_generators, states, strict=True):
        generator.set_state(state)
    before = [[p.detach().clone() for p in model.member(i).policy.parameters()] for i in range(len(SEEDS))]
    model.train()
    model._apply_finite_checks()
    for i, single in enumerate(singles):
        th.set_rng_state(states[i])
        single._current_progress_remaining = 1.0
        single.train()
    return model, singles, before


@pytest.mark.parametrize("case", list(CASES))
def test_one_update_equals_single_updates(case):
    """Incl. per-seed gradient clipping: max_grad_norm=0.05 clips every seed, each by its own norm."""
    model, singles, _ = _update_both(case)
    assert model.failed == {}
    for i, single in enumerate(singles):
        member = model.member(i)
        assert_parameters_close(member, single)
        assert member._n_updates == single._n_updates
        opt_b, opt_s = member.policy.optimizer.state_dict(), single.policy.optimizer.state_dict()
        assert opt_b["state"].keys() == opt_s["state"].keys()
        rtol = model_tolerances(single)["rtol"]  # moments: one pass over the same gradients (state_tolerances)
        for j, state in opt_s["state"].items():
            for key, value in state.items():
                th.testing.assert_close(opt_b["state"][j][key].float(), value.float(), **state_tolerances(value, rtol))


def test_ppo_target_kl_stops_each_seed_alone():
    """A seed that crosses 1.5 * target_kl stops for the rest of the update (neither it nor its Adam state moves)
    while the others go on, exactly as each single model does on its own data."""
    model, singles, _ = _update_both("ppo", n_epochs=6, learning_rate=3e-3, target_kl=0.003, max_grad_norm=0.5)
    updates = [s._n_updates for s in singles]
    assert min(updates) < 6 and len(set(updates)) > 1, updates  # the case exercises different stops
    for i, single in enumerate(singles):
        member = model.member(i)
        assert member._n_updates == single._n_updates
        assert_parameters_close(member, single)
        steps_b = [float(s["step"]) for s in member.policy.optimizer.state_dict()["state"].values()]
        steps_s = [float(s["step"]) for s in single.policy.optimizer.state_dict()["state"].values()]
        assert steps_b == steps_s


@pytest.mark.parametrize("case", ["ppo", "a2c"])
def test_a_seed_whose_loss_turns_nan_stops_alone(case):
    """Seed index 1's advantages are NaN: its loss is masked (its parameters do not move, nothing reaches the
    others), it is failed after the update, and seeds 0 and 2 update exactly as their separate runs."""
    model, singles, before = _update_both(case, nan_seed=1)
    assert list(model.failed) == [1] and "non-finite loss" in model.failed[1]
    for p, q in zip(model.member(1).policy.parameters(), before[1], strict=True):
        assert th.equal(p, q)
    for i in (0, 2):
        assert_parameters_close(model.member(i), singles[i])


def test_ppo_through_rltrainer_retraces_separate_runs(tmp_path):
    """K = 3 seeds trained together equal the 3 separate runs: parameters after 8 iterations (128 Adam steps), update
    counts and every episode's reward (which depends on every sampled action: each seed draws from its own stream)."""
    kwargs = dict(n_steps=64, batch_size=32, n_epochs=4, policy_kwargs=dict(net_arch=[32, 32]))
    model = SeedBatch(PPO, seeds=SEEDS, **kwargs)
    trainer = RLTrainer(max_steps=1000, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=_envs("CartPole-v1", SEEDS)))
    rollout = 64 * N_ENVS
    assert model.num_timesteps == -(-1000 // rollout) * rollout  # whole rollouts, per seed
    assert model.failed == {}
    metrics = trainer.callback_metrics
    for i in range(len(SEEDS)):
        for key in ("train/approx_kl", "train/clip_fraction", "train/n_updates", "rollout/ep_rew_mean", "time/fps"):
            assert f"seed{i}/{key}" in metrics, key
    for i, seed in enumerate(SEEDS):
        single = PPO("MlpPolicy", seed=seed, **kwargs)
        RLTrainer(max_steps=1000, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
            single, datamodule=RLEnvDataModule(train_env=make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=seed))
        )
        member = model.member(i)
        assert member.num_timesteps == single.num_timesteps and member._n_updates == single._n_updates
        assert_parameters_close(member, single)
        assert [ep["r"] for ep in member.ep_info_buffer] == [ep["r"] for ep in single.ep_info_buffer]


def test_ppo_target_kl_seeds_retrace_separate_runs_over_several_updates(tmp_path):
    """A seed stopped by ``target_kl`` draws no minibatch permutation in the update's later epochs (its separate run
    draws none), so its stream, and with it its next rollouts' actions, stay its separate run's: 3 updates of a K = 3
    PPO whose seeds stop at different epochs equal the separate runs (parameters, update counts, episode rewards)."""
    kwargs = dict(n_steps=32, batch_size=16, n_epochs=4, learning_rate=3e-3, target_kl=0.001,
                  policy_kwargs=dict(net_arch=[16]))  # fmt: skip
    steps = 3 * 32 * N_ENVS
    model = SeedBatch(PPO, seeds=SEEDS, **kwargs)
    RLTrainer(max_steps=steps, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
        model, datamodule=RLEnvDataModule(train_env=_envs("CartPole-v1", SEEDS))
    )
    updates = []
    for i, seed in enumerate(SEEDS):
        single = PPO("MlpPolicy", seed=seed, **kwargs)
        RLTrainer(max_steps=steps, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
            single, datamodule=RLEnvDataModule(train_env=make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=seed))
        )
        member = model.member(i)
        assert member._n_updates == single._n_updates
        updates.append(single._n_updates)
        assert_parameters_close(member, single)
        assert [ep["r"] for ep in member.ep_info_buffer] == [ep["r"] for ep in single.ep_info_buffer]
    assert len(set(updates)) > 1 and min(updates) < 3 * 4, updates  # the seeds stopped alone


@pytest.mark.parametrize(
    "cls, extra",
    [
        (PPO, dict(n_epochs=3, batch_size=16, sde_sample_freq=4)),
        (PPO, dict(n_epochs=2, batch_size=32, policy_kwargs=dict(net_arch=[16], full_std=False, squash_output=True))),
        (A2C, dict(sde_sample_freq=8)),
    ],
)
def test_gsde_seeds_retrace_separate_runs(cls, extra, tmp_path):
    """gSDE over K = 3 seeds: each seed's exploration matrices (per rollout, every ``sde_sample_freq`` steps) come
    from its own stream, its log-std is its own: parameters and every episode's reward equal the separate runs'."""
    kwargs = dict(dict(n_steps=32, use_sde=True, policy_kwargs=dict(net_arch=[16])), **extra)
    model = SeedBatch(cls, seeds=SEEDS, **kwargs)
    trainer = RLTrainer(max_steps=400, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=_envs("Pendulum-v1", SEEDS)))
    assert model.failed == {} and model.policy.log_std.shape[0] == len(SEEDS)
    for i, seed in enumerate(SEEDS):
        single = cls("MlpPolicy", seed=seed, **kwargs)
        RLTrainer(max_steps=400, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
            single, datamodule=RLEnvDataModule(train_env=make_vec_env("Pendulum-v1", n_envs=N_ENVS, seed=seed))
        )
        member = model.member(i)
        assert member.num_timesteps == single.num_timesteps and member._n_updates == single._n_updates
        assert_parameters_close(member, single)
        rewards = [ep["r"] for ep in member.ep_info_buffer]
        np.testing.assert_allclose(rewards, [ep["r"] for ep in single.ep_info_buffer], rtol=return_rtol(single))
        assert rewards


@pytest.mark.parametrize(
    "cls, env_id, policy", [(PPO, TINY_IMAGE_ENV, "CnnPolicy"), (A2C, TINY_IMAGE_ENV, "CnnPolicy"),
                            (PPO, TINY_DICT_ENV, "MultiInputPolicy"), (A2C, TINY_DICT_ENV, "MultiInputPolicy")]
)  # fmt: skip
def test_cnn_and_dict_policies_retrace_separate_runs(cls, env_id, policy, tmp_path):
    """Images (channel-last, transposed per seed): NatureCNN stacked per seed (SeedConv2d); Dict observations (a
    vector and an image): CombinedExtractor stacked per seed, one rollout storage per key with a leading K:
    parameters and every episode's reward equal the separate runs'."""
    extra = dict(batch_size=16, n_epochs=2) if cls is PPO else {}
    extractor = dict(features_dim=16) if policy == "CnnPolicy" else dict(cnn_output_dim=16)
    kwargs = dict(n_steps=16, policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=extractor), **extra)
    model = SeedBatch(cls, seeds=SEEDS, policy=policy, **kwargs)
    trainer = RLTrainer(max_steps=64, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=_envs(env_id, SEEDS)))
    assert model.failed == {}
    for i, seed in enumerate(SEEDS):
        single = cls(policy, seed=seed, **kwargs)
        RLTrainer(max_steps=64, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
            single,
            datamodule=RLEnvDataModule(train_env=make_vec_env(env_id, n_envs=N_ENVS, seed=seed)),
        )
        member = model.member(i)
        assert member._n_updates == single._n_updates > 0
        assert_parameters_close(member, single)
        rewards = [ep["r"] for ep in member.ep_info_buffer]
        np.testing.assert_allclose(rewards, [ep["r"] for ep in single.ep_info_buffer], rtol=return_rtol(single))
        assert rewards


@pytest.mark.parametrize("cls", [PPO, A2C])
def test_member_save_load_round_trip(cls, tmp_path):
    kwargs = dict(n_steps=8, policy_kwargs=dict(net_arch=[16]))
    if cls is PPO:
        kwargs["batch_size"] = 8
    model = SeedBatch(cls, seeds=[0, 1], **kwargs)
    RLTrainer(max_steps=64, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
        model, datamodule=RLEnvDataModule(train_env=[make_vec_env("CartPole-v1", n_envs=2, seed=s) for s in (0, 1)])
    )
    member = model.member(1)
    assert type(member) is cls and member.n_seeds == 1 and member.seed == 1
    member.save(tmp_path / "seed1.zip")
    loaded = cls.load(tmp_path / "seed1.zip")
    for (name, p), q in zip(member.policy.named_parameters(), loaded.policy.parameters(), strict=True):
        assert th.equal(p, q), name
    assert loaded.num_timesteps == model.num_timesteps
    assert loaded._n_updates == member._n_updates
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert np.array_equal(member.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    saved, live = loaded.policy.optimizer.state_dict()["state"], member.policy.optimizer.state_dict()["state"]
    assert saved.keys() == live.keys() and len(saved) > 0
    for j in saved:
        for key in saved[j]:
            assert th.equal(saved[j][key], live[j][key]), key


def test_predict_gives_each_seed_its_members_actions_without_copying_optimiser_state(tmp_path):
    """A K-seed ``predict`` (observations ``[K, ...]``) returns what each seed's member predicts, and writes only the
    seeds' weights into the members: their optimisers stay as they were (``member(i)`` writes them)."""
    model = SeedBatch(PPO, seeds=[0, 1], n_steps=8, batch_size=8, policy_kwargs=dict(net_arch=[16]))
    RLTrainer(max_steps=32, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
        model, datamodule=RLEnvDataModule(train_env=[make_vec_env("CartPole-v1", n_envs=2, seed=s) for s in (0, 1)])
    )
    for member in model.members:
        member.policy.optimizer.state.clear()
    obs = np.random.default_rng(0).normal(size=(2, 5, 4)).astype(np.float32)
    actions, states = model.predict(obs, deterministic=True)
    assert actions.shape == (2, 5) and states is None
    assert all(not member.policy.optimizer.state for member in model.members)
    for i in range(2):
        assert np.array_equal(actions[i], model.member(i).predict(obs[i], deterministic=True)[0])
    assert all(member.policy.optimizer.state for member in model.members)  # member(i) wrote seed i's


def test_the_stacked_policy_is_the_one_copy_of_the_weights_until_a_member_is_asked_for():
    """Once stacked, the members' tensors hold no weights (one element of storage each); ``member(i)`` makes seed
    i's own copy, equal to its slice of the stacked tensors, and leaves the other members' empty."""
    model = SeedBatch(PPO, seeds=[0, 1], n_steps=8, batch_size=8, policy_kwargs=dict(net_arch=[16]))
    model.set_env([make_vec_env("CartPole-v1", n_envs=2, seed=s) for s in (0, 1)])
    links = model._seed_state.links

    def holds_weights(i: int) -> list[bool]:  # (tensors of more than one element: a scalar's storage is one)
        tensors = [link.member_tensors[i] for link in links if link.member_tensors[i].numel() > 1]
        return [t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in tensors]

    assert len(links) > 0 and not any(holds_weights(0) + holds_weights(1))
    member = model.member(1)
    assert all(holds_weights(1)) and not any(holds_weights(0))
    for link in links:
        assert th.equal(link.member_tensors[1], link.seed_slice(1))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert np.array_equal(model.predict(obs[None].repeat(2, 0), deterministic=True)[0][1], member.predict(obs, True)[0])


@pytest.mark.parametrize("space", list(SPACES))
def test_other_spaces_retrace_separate_runs(space, tmp_path):
    """MultiDiscrete (split and uniform), MultiBinary actions and Discrete (one-hot) observations: each seed of a
    K = 2 model trains as its separate run (parameters and episode rewards)."""
    kwargs = dict(n_steps=8, batch_size=8, n_epochs=2, policy_kwargs=dict(net_arch=[16]))
    seeds = [0, 1]

    def env(seed: int):
        return make_vec_env(lambda: _SpacesEnv(**SPACES[space]), n_envs=N_ENVS, seed=seed)

    model = SeedBatch(PPO, seeds=seeds, **kwargs)
    trainer = RLTrainer(max_steps=64, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=[env(s) for s in seeds]))
    for i, seed in enumerate(seeds):
        single = PPO("MlpPolicy", seed=seed, **kwargs)
        RLTrainer(max_steps=64, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
            single, datamodule=RLEnvDataModule(train_env=env(seed))
        )
        member = model.member(i)
        assert_parameters_close(member, single)
        assert [ep["r"] for ep in member.ep_info_buffer] == [ep["r"] for ep in single.ep_info_buffer]


@pytest.mark.parametrize("env_id", ["InvalidActionDiscrete-v0", "TicTacToe-v0"])
def test_maskable_ppo_seeds_retrace_separate_runs(env_id, tmp_path):
    """MaskablePPO over K = 2 seeds: each seed samples among its own env's allowed actions and updates under the
    stored masks exactly as its separate run (Discrete observations one-hot encoded; TicTacToe: MultiDiscrete
    observations)."""
    import lit_sb3.envs  # noqa: F401 - registers the masked envs

    kwargs = dict(n_steps=32, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16]))
    seeds = [0, 1]
    model = SeedBatch(MaskablePPO, seeds=seeds, **kwargs)
    assert type(model) is MaskablePPO and model.n_seeds == 2
    trainer = RLTrainer(max_steps=192, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(
        model, datamodule=RLEnvDataModule(train_env=[make_vec_env(env_id, n_envs=N_ENVS, seed=s) for s in seeds])
    )
    assert model.rollout_buffer.action_masks.min() == 0.0  # masks were stored
    for i, seed in enumerate(seeds):
        single = MaskablePPO("MlpPolicy", seed=seed, **kwargs)
        RLTrainer(max_steps=192, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
            single, datamodule=RLEnvDataModule(train_env=make_vec_env(env_id, n_envs=N_ENVS, seed=seed))
        )
        member = model.member(i)
        assert_parameters_close(member, single)
        assert [ep["r"] for ep in member.ep_info_buffer] == [ep["r"] for ep in single.ep_info_buffer]
        columns = model.rollout_buffer.seed_slice(model.rollout_buffer.action_masks, i)
        np.testing.assert_array_equal(columns, single.rollout_buffer.action_masks)


@pytest.mark.parametrize(
    "env_id, extra",
    [("CartPole-v1", {}), ("Pendulum-v1", dict(sub_sampling_factor=2, target_kl=0.02))],
    ids=["discrete", "gaussian-subsampled"],
)
def test_trpo_seeds_retrace_separate_runs(env_id, extra, tmp_path):
    """TRPO over K = 3 seeds: each seed's conjugate gradient (its own start point), step size, line search, its
    sub-sampling draw and critic epochs are its separate run's. The line search's accept/reject and shrink count are
    discrete decisions: equal in every update. The actor's parameters are within ``trpo_actor_distance`` of the
    separate run's (each step's length, its relative error the measured condition number of ``F + cg_damping I``
    times the reassociation error), the critic's within ``model_tolerances`` (tests/tolerances.py); episode
    rewards exactly with discrete actions, at ``return_rtol`` with continuous ones."""
    kwargs = dict(n_steps=32, batch_size=32, n_critic_updates=2, cg_max_steps=5, policy_kwargs=dict(net_arch=[16]))
    kwargs.update(extra)
    with trpo_recorder() as records:
        model = SeedBatch(TRPO, seeds=SEEDS, **kwargs)
        trainer = RLTrainer(max_steps=256, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
        trainer.fit(model, datamodule=RLEnvDataModule(train_env=_envs(env_id, SEEDS)))
        singles = []
        for seed in SEEDS:
            singles.append(TRPO("MlpPolicy", seed=seed, **kwargs))
            RLTrainer(max_steps=256, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
                singles[-1], datamodule=RLEnvDataModule(train_env=make_vec_env(env_id, n_envs=N_ENVS, seed=seed))
            )
    assert model.failed == {}
    for i, single in enumerate(singles):
        member = model.member(i)
        assert member._n_updates == single._n_updates == 4
        ours, theirs = records[id(model)], records[id(single)]
        assert [d[i] for d in ours["decisions"]] == [d[0] for d in theirs["decisions"]]  # the line searches
        actor = {name for name, _ in single._actor_parameters()}
        mine = dict(member.policy.named_parameters())
        gap = th.cat(
            [(mine[name] - p).detach().flatten() for name, p in single.policy.named_parameters() if name in actor]
        )
        bound = trpo_actor_distance(single, theirs)  # the actor: a Euclidean bound (tests/tolerances.py)
        assert float(gap.norm()) <= bound, (float(gap.norm()), bound)
        assert bound < min(n[0] for n in theirs["lengths"] if n[0] > 0)  # a skipped or repeated step exceeds it
        tol = model_tolerances(single)  # the critic: Adam on reassociated gradients
        for name, p in single.policy.named_parameters():
            if name not in actor:
                th.testing.assert_close(mine[name], p, msg=name, **tol)
        rewards = [ep["r"] for ep in member.ep_info_buffer], [ep["r"] for ep in single.ep_info_buffer]
        np.testing.assert_allclose(*rewards, rtol=return_rtol(single) if env_id == "Pendulum-v1" else 0)


def test_diverging_env_masks_its_seed_alone(tmp_path):
    """Seed index 1's env returns NaN observations from its 40th step: that seed stops (its env steps no more, its
    weights stay finite) while seeds 0 and 2 go on and still equal their separate runs."""
    kwargs = dict(n_steps=8, policy_kwargs=dict(net_arch=[16]))
    envs = _envs("CartPole-v1", [0, 1, 2])
    envs[1] = make_vec_env(
        "CartPole-v1", n_envs=N_ENVS, seed=1, wrapper_class=NaNObservationAfter, wrapper_kwargs=dict(n=40)
    )
    model = SeedBatch(A2C, seeds=[0, 1, 2], **kwargs)
    trainer = RLTrainer(max_steps=400, logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=envs))
    assert list(model.failed) == [1] and "non-finite observation" in model.failed[1]
    assert model.num_timesteps == 400
    for i in (0, 1, 2):  # the failed seed's weights stopped moving before any NaN reached them
        assert all(th.isfinite(p).all() for p in model.member(i).policy.parameters())
    single = A2C("MlpPolicy", seed=2, **kwargs)
    RLTrainer(max_steps=400, logger=False, enable_checkpointing=False, default_root_dir=tmp_path).fit(
        single, datamodule=RLEnvDataModule(train_env=make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=2))
    )
    assert_parameters_close(model.member(2), single)


def test_bad_options_are_refused_before_training():
    with pytest.raises(NotImplementedError, match="rollout_buffer_kwargs"):
        SeedBatch(PPO, seeds=[0, 1], rollout_buffer_kwargs=dict(foo=1))
    model = SeedBatch(PPO, seeds=[0, 1], policy_kwargs=dict(optimizer_class=th.optim.SGD))
    with pytest.raises(ValueError, match="Adam and RMSprop"):
        model.set_env(_envs("CartPole-v1", [0, 1]))
    with pytest.raises(ValueError, match="one env per seed"):
        SeedBatch(A2C, seeds=[0, 1]).set_env(make_vec_env("CartPole-v1", n_envs=2, seed=0))
