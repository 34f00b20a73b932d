"""RecurrentPPO over a seed dimension: ``SeedBatch(RecurrentPPO, seeds=[...])`` is a RecurrentPPO holding K seeds,
and each seed is its separate run — the stacked LSTM (each seed's own weights through torch's LSTM kernel), each
seed's padded sequence minibatches (its separate buffer's, drawn from its own numpy stream), whole ``RLTrainer`` fits
of a K = 3 batch against the 3 separate runs (separate critic LSTM, shared LSTM, a linear critic; a per-seed
``target_kl`` stop and per-seed ``max_grad_norm``; gSDE; NatureCNN and Dict observations), a seed whose env turns NaN
stopping alone, and ``predict`` with one LSTM state per seed. Save/load and exact resume of a K-seed RecurrentPPO:
tests/test_seed_batch_save_resume.py.

Tolerance of the whole fits: the stacked MLP layers compute the K seeds' matmuls with one ``baddbmm`` where a single
run uses ``addmm`` (another float32 summation order), and a seed's LSTM runs on its minibatch padded to the longest
sequence of all K seeds (the same real steps, a larger matrix for the kernel's input product, another blocking).
Parameters are compared at the bound tests/tolerances.py derives from each separate run's Adam steps, lr and longest
reduction (``model_tolerances``; the LSTM's back-propagation through time sums over at most a minibatch's steps, within
that reduction), the training envs' LSTM states (computed in one pass by the parameters) at its relative part and the
parameters' absolute one; the episode rewards, which depend on every sampled action, exactly with discrete actions (a
discrete decision) and at ``return_rtol`` with continuous ones.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3 import RecurrentPPO, RLEnvDataModule, RLTrainer, SeedBatch
from lit_sb3.buffers.recurrent import RecurrentRolloutBuffer
from lit_sb3.policies.recurrent import RNNStates
from lit_sb3.policies.seed_stack import SeedLSTM, stack_module
from lit_sb3.vec_env import make_vec_env
from tests.envs.nan_seed import NaNObservationAfter
from tests.tiny_image_env import TINY_DICT_ENV, TINY_IMAGE_ENV
from tests.tolerances import assert_parameters_close, model_tolerances, return_rtol

th.set_num_threads(1)

SEEDS = [3, 5, 7]
N_ENVS = 2
# 20-step episodes ending in time-outs (the terminal-value bootstrap), Box actions; no seed turns NaN
TIMEOUT_ENV = ("tests.envs.nan_seed:NaNSeed-v0", dict(nan_seed=-1))
BASE = dict(n_steps=32, batch_size=16, n_epochs=2)
#: case -> (env id, env kwargs, RecurrentPPO arguments, env steps per seed: 3 rollouts of n_steps x n_envs)
CASES = {
    # the default: a separate critic LSTM; CartPole's terminations cut the sequences; per-seed gradient clipping
    "critic_lstm": ("CartPole-v1", {}, dict(BASE, max_grad_norm=0.05, policy_kwargs=dict(lstm_hidden_size=8,
                                                                                         net_arch=[16]))),
    # the actor's LSTM shared with the critic, 2 LSTM layers, Gaussian actions, time-outs
    "shared_lstm": (*TIMEOUT_ENV, dict(BASE, policy_kwargs=dict(lstm_hidden_size=8, n_lstm_layers=2, net_arch=[16],
                                                                shared_lstm=True, enable_critic_lstm=False))),
    # gSDE: each seed's exploration matrices from its own stream, redrawn every 4 steps
    "critic_lstm_gsde": (*TIMEOUT_ENV, dict(BASE, use_sde=True, sde_sample_freq=4,
                                            policy_kwargs=dict(lstm_hidden_size=8, net_arch=[16]))),
    # a linear critic; PPO's target_kl stops the seeds at different epochs
    "critic_linear_target_kl": ("CartPole-v1", {}, dict(BASE, n_epochs=4, learning_rate=3e-3, target_kl=0.002,
                                                        policy_kwargs=dict(lstm_hidden_size=8, net_arch=[16],
                                                                           enable_critic_lstm=False))),
}  # fmt: skip
STEPS = 3 * BASE["n_steps"] * N_ENVS


def _fit(model, envs, steps: int, root) -> None:
    trainer = RLTrainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        default_root_dir=root)  # fmt: skip
    trainer.fit(model, datamodule=RLEnvDataModule(train_env=envs))


def _env(env_id: str, seed: int, env_kwargs: dict, **kwargs):
    return make_vec_env(env_id, n_envs=N_ENVS, seed=seed, env_kwargs=env_kwargs, **kwargs)


def _lstms(k: int, **kwargs) -> list[nn.LSTM]:
    lstms = []
    for i in range(k):
        th.manual_seed(i)
        lstms.append(nn.LSTM(4, 5, **kwargs))
    return lstms


def test_seed_lstm_runs_each_seed_with_its_own_weights():
    """A stacked LSTM of K = 3 seeds gives each seed's columns exactly what its own ``nn.LSTM`` gives (outputs, final
    states and weight gradients, bitwise: the same kernel on the same inputs), and member weights come back through
    the links; options the kernel cannot run per seed are refused by name."""
    lstms = _lstms(3, num_layers=2)
    stacked, links = stack_module(lstms)
    assert isinstance(stacked, SeedLSTM) and stacked.weight_ih_l1.shape == (3, 20, 5)
    assert len(links) == 8  # 2 weights and 2 biases per layer
    x = th.randn(6, 3 * 4, 4)  # [length, K * batch, input]
    h0, c0 = th.randn(2, 12, 5), th.randn(2, 12, 5)
    out, (h, c) = stacked(x, (h0, c0))
    out.square().sum().backward()
    for i, lstm in enumerate(lstms):
        cols = slice(4 * i, 4 * (i + 1))
        out_i, (h_i, c_i) = lstm(x[:, cols], (h0[:, cols].contiguous(), c0[:, cols].contiguous()))
        out_i.square().sum().backward()
        assert th.equal(out[:, cols], out_i) and th.equal(h[:, cols], h_i) and th.equal(c[:, cols], c_i)
        for name in stacked.weight_names:
            assert th.equal(getattr(stacked, name).grad[i], getattr(lstm, name).grad), name
    with th.no_grad():  # no initial state: zeros, as nn.LSTM
        assert th.equal(stacked(x)[0][:, 4:8], lstms[1](x[:, 4:8])[0])
        stacked.bias_hh_l0[1].add_(1.0)
    for link in links:
        link.write_member(1)
    assert th.equal(lstms[1].bias_hh_l0, stacked.bias_hh_l0[1])
    with pytest.raises(NotImplementedError, match="dropout"):
        stack_module(_lstms(2, num_layers=2, dropout=0.1))
    with pytest.raises(NotImplementedError, match="bidirectional"):
        stack_module(_lstms(2, bidirectional=True))


def _fill_seeds(single_buffers, batch_buffer, rng, n_steps: int, layers: int, hidden: int) -> None:
    """Random transitions, each seed its own episode starts, in K single buffers and in the K-seed storage."""
    k, n_envs = len(single_buffers), single_buffers[0].n_envs
    for _ in range(n_steps):
        obs = rng.normal(size=(k, n_envs, 4)).astype(np.float32)
        action = rng.integers(3, size=(k, n_envs, 1))
        reward = rng.normal(size=(k, n_envs)).astype(np.float32)
        start = (rng.random((k, n_envs)) < 0.2).astype(np.float32)
        value = th.as_tensor(rng.normal(size=(k, n_envs, 1)), dtype=th.float32)
        log_prob = th.as_tensor(rng.normal(size=(k, n_envs)), dtype=th.float32)
        states = [th.as_tensor(rng.normal(size=(layers, k * n_envs, hidden)), dtype=th.float32) for _ in range(4)]
        batch_buffer.add(obs, action, reward, start, value, log_prob,
                         lstm_states=RNNStates(tuple(states[:2]), tuple(states[2:])))  # fmt: skip
        for i, buffer in enumerate(single_buffers):
            cols = slice(i * n_envs, (i + 1) * n_envs)
            buffer.add(obs[i], action[i], reward[i], start[i], value[i], log_prob[i],
                       lstm_states=RNNStates(tuple(s[:, cols] for s in states[:2]), tuple(s[:, cols] for s in states[2:])))  # fmt: skip
    last, dones = th.as_tensor(rng.normal(size=(k, n_envs)), dtype=th.float32), rng.random((k, n_envs)) < 0.2
    batch_buffer.compute_returns_and_advantage(last_values=last, dones=dones)
    for i, buffer in enumerate(single_buffers):
        buffer.compute_returns_and_advantage(last_values=last[i], dones=dones[i])


@pytest.mark.parametrize("batch_size", [7, 24])
def test_each_seeds_sequence_minibatches_are_its_separate_buffers(batch_size):
    """Seed k's part of every K-seed minibatch (its first sequences and steps; the rest is padding) is the padded
    sequence minibatch its own buffer yields with numpy's global stream seeded as its separate run's, with the LSTM
    states at each of its sequences' first steps; a seed sitting out (None) draws nothing."""
    n_steps, n_envs, layers, hidden, seeds = 12, 2, 2, 3, [3, 5, 7]
    space, actions = spaces.Box(-1, 1, (4,)), spaces.Discrete(3)
    batch = RecurrentRolloutBuffer(n_steps, space, actions, (n_steps, layers, 3 * n_envs, hidden), device="cpu",
                                   n_envs=n_envs, n_seeds=3)  # fmt: skip
    singles = [RecurrentRolloutBuffer(n_steps, space, actions, (n_steps, layers, n_envs, hidden), device="cpu",
                                      n_envs=n_envs) for _ in seeds]  # fmt: skip
    _fill_seeds(singles, batch, np.random.default_rng(0), n_steps, layers, hidden)
    rngs = [np.random.RandomState(s) for s in seeds]
    got = list(batch.get_seed_sequences(batch_size, rngs))
    for k, (seed, single) in enumerate(zip(seeds, singles)):
        np.random.seed(seed)
        expected = list(single.get(batch_size))
        assert len(got) == len(expected) == -(-n_steps * n_envs // batch_size)
        for sample, own in zip(got, expected):
            n_seq_all = sample.lstm_states.pi[0].shape[1] // 3
            n_seq, length = own.lstm_states.pi[0].shape[1], own.mask.shape[0] // own.lstm_states.pi[0].shape[1]
            assert int(sample.mask[k].sum()) == int(own.mask.sum())  # the same number of real steps for every seed
            for field in ("observations", "actions", "old_values", "old_log_prob", "advantages", "returns",
                          "episode_starts", "mask"):  # fmt: skip
                grid = getattr(sample, field)[k].reshape(n_seq_all, -1, *getattr(own, field).shape[1:])
                mine = grid[:n_seq, :length].reshape(getattr(own, field).shape)
                assert th.equal(mine, getattr(own, field)), field
                assert grid[n_seq:].abs().sum() == 0 and grid[:, length:].abs().sum() == 0  # padding only
            for ours, theirs in zip((*sample.lstm_states.pi, *sample.lstm_states.vf),
                                    (*own.lstm_states.pi, *own.lstm_states.vf)):  # fmt: skip
                assert th.equal(ours[:, k * n_seq_all : k * n_seq_all + n_seq], theirs)
    for seed, rng in zip(seeds, rngs):  # one draw per pass, as the single buffer's get() from the global stream
        reference = np.random.RandomState(seed)
        reference.randint(n_steps * n_envs)
        assert np.array_equal(rng.get_state()[1], reference.get_state()[1])
        assert rng.get_state()[2] == reference.get_state()[2]
    sitting_out = list(batch.get_seed_sequences(batch_size, [None, None, None]))  # no stream: nothing drawn
    assert len(sitting_out) == len(got) and int(sitting_out[0].mask[1].sum()) == int(got[0].mask[1].sum())
    with pytest.raises(ValueError, match="one random stream per seed"):
        next(batch.get_seed_sequences(batch_size, rngs[:2]))


@pytest.mark.parametrize("case", list(CASES))
def test_k3_batch_equals_three_separate_runs(case, tmp_path):
    """K = 3 seeds trained together equal the 3 separate runs of the same seeds after 3 updates: parameters, update
    counts (different per seed where ``target_kl`` stops them), every episode's reward, and the training envs' LSTM
    states (tolerance: the module docstring)."""
    env_id, env_kwargs, kwargs = CASES[case]
    model = SeedBatch(RecurrentPPO, seeds=SEEDS, **kwargs)
    assert type(model) is RecurrentPPO and model.n_seeds == 3
    _fit(model, [_env(env_id, s, env_kwargs) for s in SEEDS], STEPS, tmp_path)
    assert model.failed == {} and isinstance(model.policy.lstm_actor, SeedLSTM)
    assert model.num_timesteps == STEPS
    updates = []
    for i, seed in enumerate(SEEDS):
        single = RecurrentPPO("MlpPolicy", seed=seed, **kwargs)
        _fit(single, _env(env_id, seed, env_kwargs), STEPS, tmp_path)
        member = model.member(i)
        assert member._n_updates == single._n_updates
        updates.append(single._n_updates)
        assert_parameters_close(member, single)
        rewards = [ep["r"] for ep in member.ep_info_buffer]
        assert rewards
        np.testing.assert_allclose(rewards, [ep["r"] for ep in single.ep_info_buffer],
                                   rtol=0 if env_id == "CartPole-v1" else return_rtol(single))  # fmt: skip
        for ours, theirs in zip((*member._last_lstm_states.pi, *member._last_lstm_states.vf),
                                (*single._last_lstm_states.pi, *single._last_lstm_states.vf)):  # fmt: skip
            th.testing.assert_close(ours, theirs, **model_tolerances(single))  # one pass through the parameters
    if "target_kl" in kwargs:
        assert len(set(updates)) > 1 and min(updates) < 3 * kwargs["n_epochs"], updates  # seeds stopped alone


@pytest.mark.parametrize("env_id, policy", [(TINY_IMAGE_ENV, "CnnLstmPolicy"), (TINY_DICT_ENV, "MultiInputLstmPolicy")])
def test_cnn_and_dict_lstm_policies_retrace_separate_runs(env_id, policy, tmp_path):
    """Images (NatureCNN stacked per seed, then the seeds' LSTMs) and Dict observations of a vector and an image
    (CombinedExtractor per seed, the rollout storage one array per key with the seeds' columns): parameters and
    every episode's reward equal the separate runs'."""
    extractor = dict(features_dim=16) if policy == "CnnLstmPolicy" else dict(cnn_output_dim=16)
    kwargs = dict(n_steps=16, batch_size=16, n_epochs=2,
                  policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8, features_extractor_kwargs=extractor))  # fmt: skip
    model = SeedBatch(RecurrentPPO, seeds=SEEDS, policy=policy, **kwargs)
    _fit(model, [_env(env_id, s, {}) for s in SEEDS], 64, tmp_path)
    assert model.failed == {}
    for i, seed in enumerate(SEEDS):
        single = RecurrentPPO(policy, seed=seed, **kwargs)
        _fit(single, _env(env_id, seed, {}), 64, tmp_path)
        member = model.member(i)
        assert member._n_updates == single._n_updates > 0
        assert_parameters_close(member, single)
        rewards = [ep["r"] for ep in member.ep_info_buffer]
        np.testing.assert_allclose(rewards, [ep["r"] for ep in single.ep_info_buffer], rtol=return_rtol(single))
        assert rewards


def test_a_seed_whose_env_turns_nan_stops_alone(tmp_path):
    """Seed index 1's env returns NaN observations from its 40th step: that seed stops (its env steps no more, its
    weights stay finite), seeds 0 and 2 go on and still equal their separate runs."""
    env_id, env_kwargs, kwargs = CASES["critic_lstm"]
    envs = [_env(env_id, s, env_kwargs) for s in SEEDS]
    envs[1] = _env(env_id, SEEDS[1], env_kwargs, wrapper_class=NaNObservationAfter, wrapper_kwargs=dict(n=40))
    model = SeedBatch(RecurrentPPO, seeds=SEEDS, **kwargs)
    _fit(model, envs, STEPS, tmp_path)
    assert list(model.failed) == [1] and "non-finite observation" in model.failed[1]
    assert model.num_timesteps == STEPS
    assert all(th.isfinite(p).all() for p in model.policy.parameters())
    for i in (0, 2):
        single = RecurrentPPO("MlpPolicy", seed=SEEDS[i], **kwargs)
        _fit(single, _env(env_id, SEEDS[i], env_kwargs), STEPS, tmp_path)
        assert_parameters_close(model.member(i), single)


def test_predict_carries_one_state_per_seed(tmp_path):
    """``predict`` of a K-seed model takes ``[K, ...]`` observations and one LSTM state per seed, and returns each
    seed's actions and new state as ``member(i).predict`` does."""
    env_id, env_kwargs, kwargs = CASES["critic_lstm"]
    model = SeedBatch(RecurrentPPO, seeds=SEEDS, **kwargs)
    model.set_env([_env(env_id, s, env_kwargs) for s in SEEDS])
    obs = np.random.default_rng(0).normal(size=(3, 5, 4)).astype(np.float32)
    starts = np.ones((3, 5), dtype=bool)
    actions, states = model.predict(obs, episode_start=starts, deterministic=True)
    assert actions.shape == (3, 5) and len(states) == 3
    actions2, states2 = model.predict(obs, state=states, episode_start=~starts, deterministic=True)
    for i in range(3):
        own_actions, own_state = model.member(i).predict(obs[i], states[i], ~starts[i], deterministic=True)
        assert np.array_equal(actions2[i], own_actions)
        assert all(np.array_equal(a, b) for a, b in zip(states2[i], own_state))
        assert not np.array_equal(states2[i][0], states[i][0])  # the state moved on
