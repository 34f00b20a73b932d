"""Rollout, replay, dict replay and n-step replay buffers."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from lit_sb3.buffers import DictReplayBuffer, DictRolloutBuffer, NStepReplayBuffer, ReplayBuffer, RolloutBuffer
from tests.tolerances import reassociation_rtol, state_tolerances

th.set_num_threads(1)


@pytest.fixture(scope="module")
def pendulum() -> gym.Env:
    env = gym.make("Pendulum-v1")
    yield env
    env.close()


@pytest.fixture(scope="module")
def cartpole() -> gym.Env:
    env = gym.make("CartPole-v1")
    yield env
    env.close()


def _obs(space: spaces.Box, value: float, n_envs: int = 1) -> np.ndarray:
    return np.full((n_envs, *space.shape), value, dtype=space.dtype)


# ----------------------------------------------------------------------------------------------------------
# Rollout buffer
# ----------------------------------------------------------------------------------------------------------


def _fill_rollout(buf: RolloutBuffer, rewards, values, episode_starts) -> None:
    for t in range(buf.buffer_size):
        buf.add(
            _obs(buf.observation_space, t, buf.n_envs),
            np.zeros((buf.n_envs, 1), dtype=np.float32),
            np.array([rewards[t]] * buf.n_envs, dtype=np.float32),
            np.array([episode_starts[t]] * buf.n_envs, dtype=np.float32),
            th.tensor([[values[t]]] * buf.n_envs),
            th.zeros(buf.n_envs),
        )


def test_rollout_gae_hand_computed(pendulum) -> None:
    buf = RolloutBuffer(4, pendulum.observation_space, pendulum.action_space, device="cpu", gae_lambda=0.8, gamma=0.9)
    # an episode starts at step 2
    _fill_rollout(buf, rewards=[1, 2, 3, 4], values=[0.5, 1.0, 1.5, 2.0], episode_starts=[1, 0, 1, 0])
    buf.compute_returns_and_advantage(last_values=th.tensor([3.0]), dones=np.array([False]))
    # step3: 4 + .9*3 - 2 = 4.7 ; step2: 3 + .9*2 - 1.5 = 3.3 (+ .72*4.7) ; step1: 2 - 1 (episode ends) ;
    # step0: 1 + .9*1 - .5 = 1.4 (+ .72*1)
    expected_adv = np.array([2.12, 1.0, 6.684, 4.7], dtype=np.float32)
    np.testing.assert_allclose(buf.advantages[:, 0], expected_adv, rtol=1e-5)
    np.testing.assert_allclose(buf.returns[:, 0], expected_adv + np.array([0.5, 1.0, 1.5, 2.0]), rtol=1e-5)
    # terminal last step: no bootstrap from last_values
    buf.compute_returns_and_advantage(last_values=th.tensor([3.0]), dones=np.array([True]))
    np.testing.assert_allclose(buf.advantages[:, 0], [2.12, 1.0, 3.3 + 0.72 * 2.0, 2.0], rtol=1e-5)


def test_rollout_gae_matches_sb3(pendulum) -> None:
    sb3_buffers = pytest.importorskip("stable_baselines3.common.buffers")
    rng = np.random.default_rng(0)
    n_steps, n_envs = 16, 3
    ours = RolloutBuffer(n_steps, pendulum.observation_space, pendulum.action_space, "cpu", 0.95, 0.99, n_envs)
    ref = sb3_buffers.RolloutBuffer(
        n_steps, pendulum.observation_space, pendulum.action_space, "cpu", 0.95, 0.99, n_envs
    )
    for _ in range(n_steps):
        args = (
            rng.normal(size=(n_envs, 3)).astype(np.float32),
            rng.uniform(-2, 2, size=(n_envs, 1)).astype(np.float32),
            rng.normal(size=n_envs).astype(np.float32),
            (rng.random(n_envs) < 0.2).astype(np.float32),
            th.as_tensor(rng.normal(size=(n_envs, 1)), dtype=th.float32),
            th.as_tensor(rng.normal(size=n_envs), dtype=th.float32),
        )
        ours.add(*args)
        ref.add(*args)
    last, dones = th.as_tensor(rng.normal(size=(n_envs, 1)), dtype=th.float32), rng.random(n_envs) < 0.5
    ours.compute_returns_and_advantage(last, dones)
    ref.compute_returns_and_advantage(last, dones)
    # GAE's backward recursion over the 16 steps, maybe associated otherwise than SB3's: a discounted sum of 16 terms
    # per entry (tests/tolerances.py: reassociation_rtol, entries at the scale of the largest)
    rtol = reassociation_rtol(n_steps)
    np.testing.assert_allclose(ours.advantages, ref.advantages, **state_tolerances(ref.advantages, rtol))
    np.testing.assert_allclose(ours.returns, ref.returns, **state_tolerances(ref.returns, rtol))


def test_rollout_minibatch_coverage_and_alignment(cartpole) -> None:
    n_steps, n_envs = 8, 2
    buf = RolloutBuffer(n_steps, cartpole.observation_space, cartpole.action_space, device="cpu", n_envs=n_envs)
    for t in range(n_steps):
        ids = np.array([t * n_envs + e for e in range(n_envs)], dtype=np.float32)
        obs = np.repeat(ids[:, None], 4, axis=1)
        buf.add(obs, ids.astype(np.int64), ids, np.zeros(n_envs), th.as_tensor(ids), th.as_tensor(-ids))
    with pytest.raises(RuntimeError, match="RolloutBuffer is full"):
        buf.add(obs, ids.astype(np.int64), ids, np.zeros(n_envs), th.as_tensor(ids), th.as_tensor(-ids))
    buf.compute_returns_and_advantage(th.zeros(n_envs), np.zeros(n_envs))
    batches = list(buf.get(batch_size=5))
    assert [len(b.observations) for b in batches] == [5, 5, 5, 1]
    seen = th.cat([b.observations[:, 0] for b in batches])
    assert sorted(seen.tolist()) == list(range(n_steps * n_envs))
    for b in batches:
        assert b.actions.shape == (len(b.observations), 1) and b.actions.dtype == th.float32  # discrete reshaped
        assert th.equal(b.actions[:, 0], b.observations[:, 0])
        assert th.equal(b.old_values, b.observations[:, 0]) and th.equal(b.old_log_prob, -b.observations[:, 0])
        assert b.advantages.shape == b.returns.shape == (len(b.observations),)
    # tensors are built once per rollout, then only indexed
    ptr = buf._flat["observations"].data_ptr()
    (whole,) = list(buf.get())
    assert len(whole.observations) == n_steps * n_envs and buf._flat["observations"].data_ptr() == ptr
    buf.reset()
    assert buf.pos == 0 and not buf.full and not buf._flat
    with pytest.raises(RuntimeError, match="needs a full rollout"):
        next(buf.get(4))


def test_dict_rollout_buffer() -> None:
    obs_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(5)})
    buf = DictRolloutBuffer(4, obs_space, spaces.Discrete(3), device="cpu", n_envs=2)
    for t in range(4):
        buf.add(
            {"a": np.full((2, 2), t, dtype=np.float32), "b": np.array([t, t + 1])},
            np.array([0, 1]),
            np.ones(2),
            np.zeros(2),
            th.zeros(2),
            th.zeros(2),
        )
    buf.compute_returns_and_advantage(th.zeros(2), np.zeros(2))
    batches = list(buf.get(3))
    assert sum(len(b.actions) for b in batches) == 8
    assert batches[0].observations["a"].shape == (3, 2) and batches[0].observations["b"].shape == (3, 1)
    with pytest.raises(ValueError, match="Dict observation space"):
        DictRolloutBuffer(4, spaces.Box(-1, 1, (2,)), spaces.Discrete(3))


# ----------------------------------------------------------------------------------------------------------
# Replay buffer
# ----------------------------------------------------------------------------------------------------------


def _collect(env: gym.Env, buf: ReplayBuffer, n: int, seed: int = 0) -> list[tuple]:
    """Run ``env`` with random actions, adding transitions to ``buf``; returns them."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    for _ in range(n):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        infos = [{"TimeLimit.truncated": truncated and not terminated}]
        buf.add(obs[None], next_obs[None], np.array([action]), np.array([reward]), np.array([done]), infos)
        out.append((obs, action, reward, next_obs, done))
        obs = env.reset()[0] if done else next_obs
    return out


def test_replay_add_sample_shapes_and_dtypes(pendulum) -> None:
    buf = ReplayBuffer(100, pendulum.observation_space, pendulum.action_space, device="cpu", n_envs=2)
    assert buf.buffer_size == 50
    for t in range(10):
        o = np.full((2, 3), t, dtype=np.float32)
        buf.add(o, o + 1, np.zeros((2, 1)), np.array([t, -t]), np.array([False, False]), [{}, {}])
    assert buf.size() == 10 and buf.pos == 10
    s = buf.sample(32)
    assert s.observations.shape == (32, 3) and s.next_observations.shape == (32, 3)
    assert s.actions.shape == (32, 1) and s.actions.dtype == th.float32
    assert s.rewards.shape == (32, 1) and s.dones.shape == (32, 1)
    assert s.rewards.dtype == th.float32 and s.dones.dtype == th.float32
    assert s.discounts is None
    assert th.equal(s.next_observations, s.observations + 1)
    assert s.observations.device == th.device("cpu")


def test_replay_float64_obs_stored_as_float32_and_uint8_kept() -> None:
    box64 = spaces.Box(-np.inf, np.inf, (17,), dtype=np.float64)
    act64 = spaces.Box(-1, 1, (6,), dtype=np.float64)
    buf = ReplayBuffer(10, box64, act64, device="cpu")
    assert buf.observations.dtype == th.float32 and buf.actions.dtype == th.float32
    assert ReplayBuffer(10, box64, act64, device="cpu", obs_dtype=np.float64).observations.dtype == th.float64
    img = spaces.Box(0, 255, (3, 8, 8), dtype=np.uint8)
    buf = ReplayBuffer(10, img, spaces.Discrete(4), device="cpu")
    assert buf.observations.dtype == th.uint8 and buf.actions.dtype == th.int64
    buf.add(
        np.full((1, 3, 8, 8), 200, np.uint8),
        np.full((1, 3, 8, 8), 201, np.uint8),
        np.array([3]),
        np.ones(1),
        np.zeros(1),
        [{}],
    )
    s = buf.sample(4)
    assert s.observations.dtype == th.uint8 and int(s.observations.max()) == 200 and s.actions.shape == (4, 1)


def test_replay_memory_per_transition_halfcheetah() -> None:
    env = gym.make("HalfCheetah-v5")
    buf = ReplayBuffer(1000, env.observation_space, env.action_space, device="cpu")
    env.close()
    # SB3 stores 308 B per transition (float64 obs); the goal is <= 0.56x
    assert buf.nbytes_per_transition() <= 172
    assert buf.nbytes() == 1000 * buf.nbytes_per_transition()


def test_replay_wraparound(pendulum) -> None:
    buf = ReplayBuffer(4, pendulum.observation_space, pendulum.action_space, device="cpu")
    for t in range(6):
        o = np.full((1, 3), t, dtype=np.float32)
        buf.add(o, o + 0.5, np.zeros((1, 1)), np.array([t]), np.array([False]), [{}])
    assert buf.full and buf.pos == 2 and buf.size() == 4
    np.testing.assert_array_equal(buf.observations[:, 0, 0].numpy(), [4, 5, 2, 3])
    s = buf.sample(200)
    assert set(s.rewards[:, 0].tolist()) == {2.0, 3.0, 4.0, 5.0}
    assert th.equal(s.rewards[:, 0], s.observations[:, 0])


def test_replay_timeout_handling(pendulum) -> None:
    buf = ReplayBuffer(10, pendulum.observation_space, pendulum.action_space, device="cpu")
    o = np.zeros((1, 3), dtype=np.float32)
    buf.add(o, o, np.zeros((1, 1)), np.array([1.0]), np.array([True]), [{"TimeLimit.truncated": True}])  # truncated
    buf.add(o, o, np.zeros((1, 1)), np.array([2.0]), np.array([True]), [{"TimeLimit.truncated": False}])  # terminated
    buf.add(o, o, np.zeros((1, 1)), np.array([3.0]), np.array([False]), [{}])
    s = buf.sample(300)
    done_by_reward = {r: d for r, d in zip(s.rewards[:, 0].tolist(), s.dones[:, 0].tolist())}
    assert done_by_reward == {1.0: 0.0, 2.0: 1.0, 3.0: 0.0}
    # without timeout handling, a truncation counts as done
    buf = ReplayBuffer(
        10, pendulum.observation_space, pendulum.action_space, device="cpu", handle_timeout_termination=False
    )
    buf.add(o, o, np.zeros((1, 1)), np.array([1.0]), np.array([True]), [{"TimeLimit.truncated": True}])
    assert buf.sample(5).dones.sum() == 5


def test_replay_real_env_transitions(pendulum) -> None:
    env = gym.make("Pendulum-v1", max_episode_steps=20)
    buf = ReplayBuffer(1000, env.observation_space, env.action_space, device="cpu")
    data = _collect(env, buf, 50)
    env.close()
    stored_obs = buf.observations[:50, 0].numpy()
    np.testing.assert_allclose(stored_obs, np.stack([d[0] for d in data]), rtol=1e-6)
    np.testing.assert_allclose(buf.next_observations[:50, 0].numpy(), np.stack([d[3] for d in data]), rtol=1e-6)
    # truncations of Pendulum (time limit) are stored as done with a timeout -> never done in samples
    assert buf.dones[:50].sum() == 2 and buf.timeouts[:50].sum() == 2
    assert buf.sample(256).dones.sum() == 0


def test_replay_optimize_memory_usage(pendulum) -> None:
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        ReplayBuffer(10, pendulum.observation_space, pendulum.action_space, optimize_memory_usage=True)
    buf = ReplayBuffer(
        5,
        pendulum.observation_space,
        pendulum.action_space,
        "cpu",
        optimize_memory_usage=True,
        handle_timeout_termination=False,
    )
    assert buf.next_observations is None
    assert buf.nbytes_per_transition() == 3 * 4 + 4 + 12
    for t in range(8):
        o = np.full((1, 3), t, dtype=np.float32)
        buf.add(o, o + 1, np.zeros((1, 1)), np.array([t]), np.array([False]), [{}])
    # slot pos holds the next obs of the newest transition and is never sampled as a transition start
    s = buf.sample(500)
    assert th.equal(s.next_observations, s.observations + 1)
    assert set(s.rewards[:, 0].tolist()) == {4.0, 5.0, 6.0, 7.0}


def test_replay_multi_env_and_discrete_spaces(cartpole) -> None:
    fl = gym.make("FrozenLake-v1")
    buf = ReplayBuffer(20, fl.observation_space, fl.action_space, device="cpu", n_envs=2)
    for t in range(5):
        buf.add(
            np.array([t, 10 + t]),
            np.array([t + 1, 11 + t]),
            np.array([1, 2]),
            np.array([0.0, 1.0]),
            np.zeros(2),
            [{}, {}],
        )
    s = buf.sample(64)
    assert s.observations.shape == (64, 1) and s.actions.shape == (64, 1)
    env_one = s.rewards[:, 0] == 1.0
    assert th.all(s.observations[env_one, 0] >= 10) and th.all(s.observations[~env_one, 0] < 10)
    assert th.equal(s.next_observations, s.observations + 1)
    assert th.all(s.actions[env_one] == 2) and th.all(s.actions[~env_one] == 1)
    fl.close()


def test_replay_errors(pendulum) -> None:
    buf = ReplayBuffer(10, pendulum.observation_space, pendulum.action_space, device="cpu")
    with pytest.raises(RuntimeError, match="empty"):
        buf.sample(4)
    with pytest.raises(ValueError, match="buffer_size must be a positive integer"):
        ReplayBuffer(0, pendulum.observation_space, pendulum.action_space)
    with pytest.raises(ValueError, match="use DictReplayBuffer"):
        ReplayBuffer(10, spaces.Dict({"a": spaces.Discrete(2)}), pendulum.action_space)


def test_replay_vecnormalize_sample(pendulum) -> None:
    vec_env = pytest.importorskip("lit_sb3.vec_env")
    venv = vec_env.VecNormalize(vec_env.DummyVecEnv([lambda: gym.make("Pendulum-v1")]), gamma=0.9)
    venv.reset()
    for _ in range(30):
        venv.step(np.array([[0.3]]))
    buf = ReplayBuffer(50, pendulum.observation_space, pendulum.action_space, device="cpu")
    _collect(gym.make("Pendulum-v1"), buf, 20)
    th.manual_seed(0)
    raw = buf.sample(16)
    th.manual_seed(0)
    norm = buf.sample(16, env=venv)
    np.testing.assert_allclose(norm.observations.numpy(), venv.normalize_obs(raw.observations.numpy()), rtol=1e-5)
    np.testing.assert_allclose(norm.rewards.numpy(), venv.normalize_reward(raw.rewards.numpy()), rtol=1e-5)
    assert norm.observations.dtype == th.float32 and norm.rewards.dtype == th.float32


# ----------------------------------------------------------------------------------------------------------
# Dict replay buffer
# ----------------------------------------------------------------------------------------------------------


def _dict_space() -> spaces.Dict:
    return spaces.Dict(
        {"vec": spaces.Box(-10, 10, (3,), dtype=np.float64), "bits": spaces.MultiBinary(4), "d": spaces.Discrete(7)}
    )


def _add_dict(buf: DictReplayBuffer, t: int, done: bool = False, truncated: bool = False) -> None:
    n = buf.n_envs
    obs = {
        "vec": np.full((n, 3), t, dtype=np.float64),
        "bits": np.full((n, 4), t % 2, dtype=np.int8),
        "d": np.full(n, t % 7),
    }
    nxt = {"vec": obs["vec"] + 1, "bits": 1 - obs["bits"], "d": (obs["d"] + 1) % 7}
    infos = [{"TimeLimit.truncated": truncated} for _ in range(n)]
    buf.add(obs, nxt, np.full((n, 2), t, dtype=np.float32), np.full(n, float(t)), np.full(n, done), infos)


def test_dict_replay_buffer() -> None:
    act = spaces.Box(-1, 1, (2,), dtype=np.float32)
    buf = DictReplayBuffer(16, _dict_space(), act, device="cpu", n_envs=2)
    assert buf.observations["vec"].dtype == th.float32 and buf.observations["bits"].dtype == th.int8
    assert buf.observations["d"].shape == (8, 2, 1)
    for t in range(10):
        _add_dict(buf, t, done=t == 3, truncated=False)
    s = buf.sample(64)
    assert set(s.observations) == {"vec", "bits", "d"}
    assert s.observations["vec"].shape == (64, 3) and s.observations["d"].shape == (64, 1)
    assert th.equal(s.next_observations["vec"], s.observations["vec"] + 1)
    assert th.equal(s.rewards[:, 0].float(), s.observations["vec"][:, 0])
    assert th.equal(s.dones[:, 0], (s.rewards[:, 0] == 3).float())
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        DictReplayBuffer(16, _dict_space(), act, optimize_memory_usage=True, handle_timeout_termination=False)
    with pytest.raises(ValueError, match="Dict observation space"):
        DictReplayBuffer(16, act, act)
    buf64 = DictReplayBuffer(16, _dict_space(), act, device="cpu", obs_dtype={"vec": np.float64})
    assert buf64.observations["vec"].dtype == th.float64
    with pytest.raises(ValueError, match="not in the observation space"):
        DictReplayBuffer(16, _dict_space(), act, obs_dtype={"nope": np.float64})


# ----------------------------------------------------------------------------------------------------------
# N-step replay buffer
# ----------------------------------------------------------------------------------------------------------


def _add_step(buf: ReplayBuffer, t: int, terminated: bool = False, truncated: bool = False) -> None:
    o = np.full((1, 3), t, dtype=np.float32)
    buf.add(
        o,
        o + 1,
        np.zeros((1, 1)),
        np.array([t + 1.0]),
        np.array([terminated or truncated]),
        [{"TimeLimit.truncated": truncated}],
    )


def test_nstep_hand_computed(pendulum) -> None:
    buf = NStepReplayBuffer(12, pendulum.observation_space, pendulum.action_space, device="cpu", n_steps=3, gamma=0.5)
    # transitions t = 0..9 with reward t + 1, obs t, next_obs t + 1; terminated at 1, truncated at 4
    for t in range(10):
        _add_step(buf, t, terminated=t == 1, truncated=t == 4)
    s = buf._get_samples(np.arange(10))
    # (return, discount, next_obs, done) for each start index
    expected = [
        (1 + 0.5 * 2, 0.25, 2, 1),  # stops at the termination
        (2, 0.5, 2, 1),
        (3 + 0.5 * 4 + 0.25 * 5, 0.125, 5, 0),  # truncation at the 3rd step: bootstrap
        (4 + 0.5 * 5, 0.25, 5, 0),
        (5, 0.5, 5, 0),
        (6 + 0.5 * 7 + 0.25 * 8, 0.125, 8, 0),  # full window
        (7 + 0.5 * 8 + 0.25 * 9, 0.125, 9, 0),
        (8 + 0.5 * 9 + 0.25 * 10, 0.125, 10, 0),
        (9 + 0.5 * 10, 0.25, 10, 0),  # stops at the newest transition
        (10, 0.5, 10, 0),
    ]
    ret, disc, nxt, done = (np.array(x, dtype=np.float32) for x in zip(*expected))
    np.testing.assert_allclose(s.rewards[:, 0].numpy(), ret, rtol=1e-6)
    np.testing.assert_allclose(s.discounts[:, 0].numpy(), disc, rtol=1e-6)
    np.testing.assert_array_equal(s.next_observations[:, 0].numpy(), nxt)
    np.testing.assert_array_equal(s.dones[:, 0].numpy(), done)
    np.testing.assert_array_equal(s.observations[:, 0].numpy(), np.arange(10))
    assert s.rewards.shape == s.discounts.shape == s.dones.shape == (10, 1)


def test_nstep_does_not_cross_write_head(pendulum) -> None:
    buf = NStepReplayBuffer(4, pendulum.observation_space, pendulum.action_space, device="cpu", n_steps=3, gamma=0.5)
    for t in range(6):  # slots: [t4, t5, t2, t3], pos = 2, newest = slot 1 (t5)
        _add_step(buf, t)
    s = buf._get_samples(np.array([3, 0, 1, 2]))
    np.testing.assert_allclose(
        s.rewards[:, 0].numpy(), [4 + 0.5 * 5 + 0.25 * 6, 5 + 0.5 * 6, 6, 3 + 0.5 * 4 + 0.25 * 5]
    )
    np.testing.assert_allclose(s.discounts[:, 0].numpy(), [0.125, 0.25, 0.5, 0.125])
    np.testing.assert_array_equal(s.next_observations[:, 0].numpy(), [6, 6, 6, 5])


def test_nstep_matches_sb3(pendulum) -> None:
    sb3_buffers = pytest.importorskip("stable_baselines3.common.buffers")
    rng = np.random.default_rng(1)
    kwargs = {"device": "cpu", "n_steps": 4, "gamma": 0.9}
    ours = NStepReplayBuffer(32, pendulum.observation_space, pendulum.action_space, **kwargs)
    ref = sb3_buffers.NStepReplayBuffer(32, pendulum.observation_space, pendulum.action_space, **kwargs)
    for _ in range(45):  # wraps around
        o, no = rng.normal(size=(1, 3)).astype(np.float32), rng.normal(size=(1, 3)).astype(np.float32)
        done = rng.random() < 0.2
        infos = [{"TimeLimit.truncated": bool(done and rng.random() < 0.5)}]
        args = (o, no, rng.uniform(-2, 2, (1, 1)), rng.normal(size=1), np.array([done]), infos)
        ours.add(*args)
        ref.add(*args)
    inds = np.arange(32)
    a, b = ours._get_samples(inds), ref._get_samples(inds)
    for name in ("observations", "actions", "next_observations", "dones"):  # copies
        np.testing.assert_array_equal(getattr(a, name).numpy(), getattr(b, name).numpy(), err_msg=name)
    # the window's discounted reward sum (4 terms) and gamma ** k, maybe computed otherwise than SB3's
    # (tests/tolerances.py: reassociation_rtol of the window, entries at the scale of the largest)
    for name in ("rewards", "discounts"):
        expected = getattr(b, name).numpy()
        np.testing.assert_allclose(
            getattr(a, name).numpy(), expected, err_msg=name, **state_tolerances(expected, reassociation_rtol(4))
        )


def test_nstep_errors(pendulum) -> None:
    with pytest.raises(ValueError, match="n_steps must be"):
        NStepReplayBuffer(10, pendulum.observation_space, pendulum.action_space, n_steps=0)
    with pytest.raises(NotImplementedError, match="optimize_memory_usage"):
        NStepReplayBuffer(
            10,
            pendulum.observation_space,
            pendulum.action_space,
            optimize_memory_usage=True,
            handle_timeout_termination=False,
        )


# ----------------------------------------------------------------------------------------------------------
# Save / load
# ----------------------------------------------------------------------------------------------------------


def _assert_same_samples(a: ReplayBuffer, b: ReplayBuffer, batch: int = 32) -> None:
    th.manual_seed(123)
    sa = a.sample(batch)
    th.manual_seed(123)
    sb = b.sample(batch)
    for x, y in zip(sa, sb):
        if isinstance(x, dict):
            for k in x:
                assert th.equal(x[k], y[k]), k
        elif x is None:
            assert y is None
        else:
            assert th.equal(x, y)


@pytest.mark.parametrize("n_adds", [7, 25])  # partly filled, wrapped around
def test_replay_save_load_round_trip(tmp_path, pendulum, n_adds) -> None:
    buf = ReplayBuffer(20, pendulum.observation_space, pendulum.action_space, device="cpu", n_envs=2)
    for t in range(n_adds):
        o = np.full((2, 3), t, dtype=np.float32)
        buf.add(
            o,
            o + 1,
            np.ones((2, 1)) * t,
            np.array([t, -t]),
            np.array([t % 5 == 0] * 2),
            [{"TimeLimit.truncated": t % 10 == 0}] * 2,
        )
    path = tmp_path / "buffer.npz"
    buf.save(path)
    with np.load(path, allow_pickle=False) as data:  # plain arrays, nothing pickled
        assert "__metadata__" in data.files
    loaded = ReplayBuffer.load(path, pendulum.observation_space, pendulum.action_space, device="cpu")
    assert (loaded.pos, loaded.full, loaded.buffer_size, loaded.n_envs) == (
        buf.pos,
        buf.full,
        buf.buffer_size,
        buf.n_envs,
    )
    for name, tensor in buf._storage_tensors().items():
        assert th.equal(loaded._storage_tensors()[name], tensor), name
    _assert_same_samples(buf, loaded)
    with pytest.raises(ValueError, match="holds a ReplayBuffer"):
        NStepReplayBuffer.load(path, pendulum.observation_space, pendulum.action_space)
    with pytest.raises(ValueError, match="pass the observation/action spaces"):
        ReplayBuffer.load(path, spaces.Box(-1, 1, (5,)), pendulum.action_space)


def test_nstep_and_dict_save_load(tmp_path, pendulum) -> None:
    buf = NStepReplayBuffer(16, pendulum.observation_space, pendulum.action_space, device="cpu", n_steps=5, gamma=0.7)
    for t in range(20):
        _add_step(buf, t, terminated=t == 7, truncated=t == 12)
    stream = io.BytesIO()
    buf.save(stream)
    stream.seek(0)
    loaded = NStepReplayBuffer.load(stream, pendulum.observation_space, pendulum.action_space, device="cpu")
    assert loaded.n_steps == 5 and loaded.gamma == 0.7
    _assert_same_samples(buf, loaded)

    act = spaces.Box(-1, 1, (2,), dtype=np.float32)
    dbuf = DictReplayBuffer(16, _dict_space(), act, device="cpu", obs_dtype={"vec": np.float64})
    for t in range(9):
        _add_dict(dbuf, t, done=t == 4, truncated=t == 4)
    dbuf.save(tmp_path / "dict_buffer")
    dloaded = DictReplayBuffer.load(tmp_path / "dict_buffer", _dict_space(), act, device="cpu")
    assert dloaded.observations["vec"].dtype == th.float64
    _assert_same_samples(dbuf, dloaded)
