"""K seeds of the off-policy algorithms with the replay options of their single classes: Dict observations
(MultiInputPolicy), Hindsight Experience Replay and ``optimize_memory_usage``, all in the one seed storage
(``SeedReplayBuffer``): a K=3 batch equals 3 separate runs of the same seeds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from lit_sb3 import DDPG, DQN, SAC, HerReplayBuffer, SeedBatch
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.buffers.seed_replay import SeedReplayBuffer
from lit_sb3.callbacks import EnvStepCheckpoint
from lit_sb3.vec_env import make_vec_env
from tests.envs import BitFlippingEnv
from tests.test_seed_batch_off_policy import _assert_member_equals_single, _assert_state_equal, _fit
from tests.test_seed_batch_save_resume import _assert_optimizers_equal as _optimizers_bitwise
from tests.test_seed_batch_save_resume import _assert_tensors_equal
from tests.test_seed_batch_save_resume import _fit as _fit_with
from tests.tiny_image_env import TINY_DICT_ENV
from tests.tolerances import model_parameter_atol

th.set_num_threads(1)

SEEDS = [3, 5, 7]


def _bit_flipping(seed: int, continuous: bool, n_envs: int = 1):
    return make_vec_env(BitFlippingEnv, n_envs=n_envs, seed=seed, env_kwargs=dict(n_bits=4, continuous=continuous))


def _check_against_separate_runs(batch, single_of, steps: int, tmp_path) -> list:
    """Fit each seed's separate run; its parameters and Adam states equal the batch member's (the bound of the
    batch computes each seed's matmuls as one ``baddbmm`` instead of ``addmm``, float reassociation, the tolerance
    derived in ``tests/tolerances.py``; seeds differ by ~1e-1; measured on these cases: at most 6.4e-7, SAC with
    NatureCNN on Dict observations). Returns the runs."""
    singles = []
    for i, seed in enumerate(SEEDS):
        single, env = single_of(i, seed)
        _fit(single, env, steps, tmp_path)
        member = batch.member(i)
        assert member.seed == seed and member.num_timesteps == steps
        assert member._n_updates == single._n_updates > 0
        assert member._episode_num == single._episode_num
        _assert_member_equals_single(member, single)
        singles.append(single)
    return singles


def test_dict_observations_k3_equals_three_separate_runs(tmp_path):
    """Dict observations of a vector and a (channel-last, transposed) image: one storage per key with a leading K,
    samples shaped as ``DictReplayBuffer``'s with a leading K, ``CombinedExtractor`` (with its NatureCNN) stacked
    per seed; parameters and optimiser states after a whole fit equal the separate runs'."""
    kwargs = dict(learning_starts=20, batch_size=8, buffer_size=200, train_freq=2,
                  policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=dict(cnn_output_dim=16)))  # fmt: skip
    batch = SeedBatch(SAC, seeds=SEEDS, policy="MultiInputPolicy", **kwargs)
    _fit(batch, [make_vec_env(TINY_DICT_ENV, n_envs=1, seed=s) for s in SEEDS], 60, tmp_path)
    assert not batch.failed and isinstance(batch.replay_buffer, SeedReplayBuffer)
    stored = batch.replay_buffer.observations
    assert stored["img"].shape[:3] == (3, 200, 1) and stored["img"].dtype == th.uint8
    assert stored["vec"].shape == (3, 200, 1, 3)
    data = batch.replay_buffer.sample(4, batch.seed_generators)
    assert data.observations["img"].shape == (3, 4, 3, 36, 36) and data.next_observations["vec"].shape == (3, 4, 3)

    def single_of(i: int, seed: int):
        return SAC("MultiInputPolicy", seed=seed, **kwargs), make_vec_env(TINY_DICT_ENV, n_envs=1, seed=seed)

    singles = _check_against_separate_runs(batch, single_of, 60, tmp_path)
    # seed i's storage is its separate run's DictReplayBuffer (its observations depend on the actions, which follow
    # parameters equal up to the derived bound; an env step is 1-Lipschitz-ish in the action at this scale)
    for i, single in enumerate(singles):
        mine, tol = batch.replay_buffer_of(i), model_parameter_atol(single)
        for key, tensor in single.replay_buffer.observations.items():
            th.testing.assert_close(mine.observations[key][:60].float(), tensor[:60].float(), atol=tol, rtol=0)


# (class, kwargs, continuous actions, sub-envs): the goal strategies, copy_info_dict, two sub-envs per seed (their
# episodes kept apart, sub-env indices drawn too), and DQN's epsilon-greedy draws sharing each seed's numpy stream
# with its relabelling draws (as the separate run's share numpy's global one); a buffer of 60 transitions overwrites
# old episodes (their bookkeeping per seed: the seeds' episodes end at different steps)
HER = {
    "sac-future": (SAC, dict(replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future")), True),
    "sac-future-2envs": (SAC, dict(train_freq=2), True, 2),
    "ddpg-episode-infos": (DDPG, dict(replay_buffer_kwargs=dict(n_sampled_goal=2, goal_selection_strategy="episode",
                                                                copy_info_dict=True)), True),
    "dqn-final": (DQN, dict(replay_buffer_kwargs=dict(goal_selection_strategy="final"), target_update_interval=20,
                            exploration_fraction=0.5), False),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HER))
def test_her_k3_equals_three_separate_runs(case, tmp_path):
    """HER: seed i's transitions, relabelled transitions and new goals drawn from its own numpy stream in its
    separate run's order, rewards of the virtual transitions from its own env's ``compute_reward``, episodes kept
    per seed over the one storage: parameters, optimiser states, and each seed's episode bookkeeping equal the
    separate runs' after whole fits."""
    cls, extra, continuous, *n_envs = HER[case]
    kwargs = dict(replay_buffer_class=HerReplayBuffer, learning_starts=20, batch_size=16, buffer_size=60,
                  policy_kwargs=dict(net_arch=[16]), **extra)  # fmt: skip
    steps = 150
    batch = SeedBatch(cls, seeds=SEEDS, policy="MultiInputPolicy", **kwargs)
    _fit(batch, [_bit_flipping(s, continuous, *n_envs) for s in SEEDS], steps, tmp_path)
    storage = batch.replay_buffer
    assert not batch.failed and isinstance(storage, SeedReplayBuffer) and storage.full
    assert storage.her is not None and (storage.infos is not None) == ("infos" in case)

    def single_of(i: int, seed: int):
        return cls("MultiInputPolicy", seed=seed, **kwargs), _bit_flipping(seed, continuous, *n_envs)

    singles = _check_against_separate_runs(batch, single_of, steps, tmp_path)
    lengths = []
    for i, single in enumerate(singles):
        mine, theirs = batch.replay_buffer_of(i), single.replay_buffer
        assert type(mine) is HerReplayBuffer and mine.env is batch.envs[i]
        np.testing.assert_array_equal(mine.ep_start, theirs.ep_start)
        np.testing.assert_array_equal(mine.ep_length, theirs.ep_length)
        np.testing.assert_array_equal(mine._current_ep_start, theirs._current_ep_start)
        for key, tensor in theirs.next_observations.items():
            assert th.equal(mine.next_observations[key], tensor), key
        lengths.append(tuple(theirs.ep_length[:, 0]))
    assert len(set(lengths)) > 1  # the seeds' episodes differ: per-seed bookkeeping mattered


def test_her_storage_state_round_trips_and_samples_alike(tmp_path):
    """A Lightning checkpoint's copy of a HER storage (its tensors, each seed's episode bookkeeping, the info dicts as
    JSON text) restores a storage that samples the same minibatches from the same streams; a wrong shape is one
    line."""
    kwargs = dict(replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=dict(copy_info_dict=True),
                  learning_starts=20, batch_size=16, buffer_size=1000, policy_kwargs=dict(net_arch=[16]))  # fmt: skip
    batch = SeedBatch(SAC, seeds=SEEDS, policy="MultiInputPolicy", **kwargs)
    _fit(batch, [_bit_flipping(s, True) for s in SEEDS], 50, tmp_path)
    storage = batch.replay_buffer
    state = storage.state_dict()
    assert all(isinstance(value, (th.Tensor, int, bool, str)) for value in state.values()) and "her/infos" in state
    copy = SeedReplayBuffer(3, 1000, batch.observation_space, batch.action_space, 1, th.device("cpu"),
                            goal_selection_strategy="future", copy_info_dict=True)  # fmt: skip
    copy.load_state_dict(state)
    assert [info.get("is_success") for info in copy.infos[1, :50, 0]] == [
        info.get("is_success") for info in storage.infos[1, :50, 0]
    ]
    samples = []
    for buffer in (storage, copy):
        rngs = [np.random.RandomState(s) for s in SEEDS]
        samples.append(buffer.sample(16, batch.seed_generators, rngs, batch.envs))
    for key in samples[0].observations:
        assert th.equal(samples[0].observations[key], samples[1].observations[key])
    assert th.equal(samples[0].rewards, samples[1].rewards) and (samples[0].rewards == 0).any()  # relabelled
    state["her/ep_length"] = state["her/ep_length"][:, :10]
    with pytest.raises(ValueError, match=r"replay storage her/ep_length has shape \(3, 10, 1\), this model's seeds"):
        copy.load_state_dict(state)


def test_optimize_memory_usage_k3_equals_three_separate_runs(tmp_path):
    """``optimize_memory_usage``: no next-observation storage, the next observation read from the following slot,
    and once the 100-slot storage is full the slot being written next is never sampled (ReplayBuffer's rule):
    parameters and optimiser states after a whole fit (the storage wrapped twice) equal the separate runs'."""
    kwargs = dict(learning_starts=30, batch_size=16, buffer_size=100, train_freq=1, target_update_interval=20,
                  exploration_fraction=0.5, optimize_memory_usage=True,
                  replay_buffer_kwargs=dict(handle_timeout_termination=False), policy_kwargs=dict(net_arch=[16]))  # fmt: skip
    batch = SeedBatch(DQN, seeds=SEEDS, **kwargs)
    _fit(batch, [make_vec_env("CartPole-v1", n_envs=1, seed=s) for s in SEEDS], 250, tmp_path)
    assert batch.replay_buffer.next_observations is None and batch.replay_buffer.full

    def single_of(i: int, seed: int):
        return DQN("MlpPolicy", seed=seed, **kwargs), make_vec_env("CartPole-v1", n_envs=1, seed=seed)

    singles = _check_against_separate_runs(batch, single_of, 250, tmp_path)
    for i, single in enumerate(singles):
        assert th.equal(batch.replay_buffer_of(i).observations, single.replay_buffer.observations)


def test_seed_storage_with_optimize_memory_usage_samples_as_replay_buffer_while_growing(monkeypatch):
    """The following slot holds the next observation also while the storage grows (it is allocated before the
    write) and after it wraps; seed 0 samples what a single ``ReplayBuffer(optimize_memory_usage=True)`` samples
    from the same torch stream."""
    monkeypatch.setattr(SeedReplayBuffer, "INITIAL_CAPACITY", 4)
    obs_space, act_space = spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (1,))
    storage = SeedReplayBuffer(2, 12, obs_space, act_space, 1, th.device("cpu"), handle_timeout_termination=False,
                               optimize_memory_usage=True)  # fmt: skip
    single = ReplayBuffer(12, obs_space, act_space, device="cpu", optimize_memory_usage=True,
                          handle_timeout_termination=False)  # fmt: skip
    rng = np.random.default_rng(0)
    for t in range(20):
        obs, next_obs = rng.normal(size=(2, 1, 2)).astype(np.float32), rng.normal(size=(2, 1, 2)).astype(np.float32)
        action, reward = rng.uniform(-1, 1, (2, 1, 1)).astype(np.float32), rng.normal(size=(2, 1)).astype(np.float32)
        done = np.array([[float(t % 5 == 4)], [0.0]], dtype=np.float32)
        storage.add(obs, next_obs, action, reward, done)
        single.add(obs[0], next_obs[0], action[0], reward[0], done[0], [{}])
        if t in (2, 6, 19):  # growing (capacity 4, then 8), then full and wrapped
            th.manual_seed(t)
            expected = single.sample(32)
            data = storage.sample(32, [th.Generator().manual_seed(t), th.Generator().manual_seed(t + 1)])
            for name in ("observations", "actions", "next_observations", "dones", "rewards"):
                th.testing.assert_close(getattr(data, name)[0], getattr(expected, name), rtol=0, atol=0, msg=name)
    assert storage.capacity == 12 and storage.full and "next_observations" not in storage.state_dict()


def test_replay_options_the_seed_storage_does_not_take_are_refused_before_any_work():
    """Each refusal is one line naming the option (NotImplementedError for what K = 1 supports), raised when the
    batch is built or its envs attached, before any env step."""
    from lit_sb3.buffers.dict_replay import DictReplayBuffer

    with pytest.raises(NotImplementedError, match=r"replay_buffer_class DictReplayBuffer \(HerReplayBuffer is\)"):
        SeedBatch(SAC, seeds=[0, 1], replay_buffer_class=DictReplayBuffer)
    with pytest.raises(NotImplementedError, match=r"replay_buffer_kwargs \['replay_buffer_kwargs'\] \(allowed:"):
        SeedBatch(SAC, seeds=[0, 1], replay_buffer_class=HerReplayBuffer,
                  replay_buffer_kwargs=dict(replay_buffer_kwargs=dict(obs_dtype=np.float16)))  # fmt: skip
    # the separate run's own buffer arguments are checked by its buffer class, as for one seed
    with pytest.raises(ValueError, match="optimize_memory_usage = True and handle_timeout_termination = True"):
        SeedBatch(DQN, seeds=[0, 1], optimize_memory_usage=True).set_env(
            [make_vec_env("CartPole-v1", seed=s) for s in (0, 1)]
        )
    with pytest.raises(ValueError, match="Invalid goal selection strategy 'futur'"):
        SeedBatch(SAC, seeds=[0, 1], policy="MultiInputPolicy", replay_buffer_class=HerReplayBuffer,
                  replay_buffer_kwargs=dict(goal_selection_strategy="futur")).set_env(
            [_bit_flipping(s, True) for s in (0, 1)])  # fmt: skip
    with pytest.raises(ValueError, match="HerReplayBuffer needs a goal Dict observation space"):
        SeedBatch(SAC, seeds=[0, 1], replay_buffer_class=HerReplayBuffer).set_env(
            [make_vec_env("Pendulum-v1", seed=s) for s in (0, 1)]
        )
    with pytest.raises(NotImplementedError, match="or Dict observations of Box and MultiBinary entries, got Dict"):
        SeedBatch(DQN, seeds=[0, 1], policy="MultiInputPolicy").set_env(
            [make_vec_env(BitFlippingEnv, seed=s, env_kwargs=dict(n_bits=3, discrete_obs_space=True)) for s in (0, 1)]
        )


def test_replay_buffer_files_of_a_batch_go_through_its_seeds(tmp_path):
    """``save_replay_buffer``/``load_replay_buffer`` hold one seed's buffer: a K-seed model says how to save seed
    i's (``replay_buffer_of(i)``, which the single class loads) instead of writing a file its class cannot read."""
    kwargs = dict(learning_starts=20, batch_size=16, buffer_size=1000, policy_kwargs=dict(net_arch=[16]))
    batch = SeedBatch(SAC, seeds=SEEDS, **kwargs)
    _fit(batch, [make_vec_env("Pendulum-v1", n_envs=1, seed=s) for s in SEEDS], 40, tmp_path)
    with pytest.raises(NotImplementedError, match=r"model.replay_buffer_of\(i\).save\(path\)"):
        batch.save_replay_buffer(tmp_path / "all")
    batch.replay_buffer_of(1).save(tmp_path / "seed1.npz")
    member = batch.member(1)
    member.load_replay_buffer(tmp_path / "seed1.npz")
    assert member.replay_buffer.pos == 40 and th.equal(
        member.replay_buffer.observations[:40, 0], batch.replay_buffer.observations[1, :40, 0]
    )
    with pytest.raises(NotImplementedError, match="load_replay_buffer loads one seed's buffer"):
        batch.load_replay_buffer(tmp_path / "seed1.npz")


def test_her_batch_archive_loads_with_one_env_per_seed_and_trains_on(tmp_path):
    """A K-seed HER model's archive (no replay storage, as for one seed) loads into a K-seed model with a HER
    storage per seed; with one goal env per seed it trains on, and a member saves as a single HER model."""
    kwargs = dict(replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=dict(goal_selection_strategy="final"),
                  learning_starts=20, batch_size=16, buffer_size=1000, policy_kwargs=dict(net_arch=[16]))  # fmt: skip
    batch = SeedBatch(SAC, seeds=SEEDS, policy="MultiInputPolicy", **kwargs)
    _fit(batch, [_bit_flipping(s, True) for s in SEEDS], 40, tmp_path)
    batch.save(tmp_path / "batch.zip")
    loaded = SAC.load(tmp_path / "batch.zip", env=[_bit_flipping(s, True) for s in SEEDS])
    assert loaded.seeds == SEEDS and loaded.replay_buffer_class is HerReplayBuffer
    assert loaded.replay_buffer.her is not None and loaded.replay_buffer.goal_selection_strategy == "final"
    _assert_state_equal(batch.policy.state_dict(), loaded.policy.state_dict())
    loaded.learn(40)  # (a fresh count: the storage is empty, HER samples finished episodes after learning_starts)
    assert loaded.num_timesteps == 40 and not loaded.failed
    assert not th.equal(batch.member(0).actor.mu.weight, loaded.member(0).actor.mu.weight)
    loaded.member(2).save(tmp_path / "member.zip")
    single = SAC.load(tmp_path / "member.zip", env=_bit_flipping(SEEDS[2], True))
    assert single.n_seeds == 1 and isinstance(single.replay_buffer, HerReplayBuffer)
    _assert_state_equal(single.policy.state_dict(), loaded.member(2).policy.state_dict())


class _ResumableBitFlipping(BitFlippingEnv):
    """Bit flipping whose initial states come from the env's own generator (``np_random``, which a checkpoint's env
    state records; ``BitFlippingEnv`` draws them from a space's generator, which it does not)."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        gym.Env.reset(self, seed=seed)
        self.current_step = 0
        self.state = self.np_random.integers(0, 2, self.n_bits).astype(np.int8)
        return self._get_obs(), {}


def test_her_batch_resumed_mid_cycle_equals_the_uninterrupted_batch(tmp_path):
    """A K=3 SAC with HER resumed from a checkpoint taken inside a collect/update cycle equals the uninterrupted
    batch bitwise: parameters, optimiser states, the storage with each seed's episode bookkeeping, and each seed's
    numpy stream (its relabelling draws)."""
    kwargs = dict(replay_buffer_class=HerReplayBuffer, learning_starts=20, batch_size=16, buffer_size=200,
                  train_freq=3, gradient_steps=2, policy_kwargs=dict(net_arch=[16]))  # fmt: skip

    def envs() -> list:
        kw = dict(n_bits=4, continuous=True)
        return [make_vec_env(_ResumableBitFlipping, n_envs=1, seed=s, env_kwargs=kw) for s in SEEDS]

    straight = SeedBatch(SAC, seeds=SEEDS, policy="MultiInputPolicy", **kwargs)
    _fit_with(straight, envs(), 100, tmp_path / "straight")
    checkpointing = EnvStepCheckpoint(every_n_env_steps=55, dirpath=tmp_path / "ckpt")
    _fit_with(SeedBatch(SAC, seeds=SEEDS, policy="MultiInputPolicy", **kwargs), envs(), 60, tmp_path / "observed",
              callbacks=[checkpointing])  # fmt: skip
    first = checkpointing.saved[0]
    assert first.stem == "env_steps=55"  # inside the cycle of steps 55-57
    resumed = SeedBatch(SAC, seeds=SEEDS, policy="MultiInputPolicy", **kwargs)
    _fit_with(resumed, envs(), 100, tmp_path / "resumed", ckpt_path=str(first))
    assert resumed.num_timesteps == 100 and resumed._n_updates == straight._n_updates
    _assert_tensors_equal(straight.state_dict(), resumed.state_dict())
    _optimizers_bitwise(straight, resumed)
    _assert_tensors_equal(straight.replay_buffer.state_dict(), resumed.replay_buffer.state_dict())
    for a, b in zip(straight._seed_state.np_rngs, resumed._seed_state.np_rngs, strict=True):
        assert np.array_equal(a.get_state()[1], b.get_state()[1]) and a.get_state()[2] == b.get_state()[2]
