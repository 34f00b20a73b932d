"""MaskablePPO: masked distributions (against sb3-contrib), masks honoured in collection and predict, the seed-001
masking API (evaluate_policy/RLTrainer/EvalCallback), errors, save/load, exact resume, and learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

import lit_sb3.envs  # noqa: F401 - registers InvalidActionDiscrete-v0 and TicTacToe-v0
from lit_sb3 import PPO, MaskablePPO, RLEnvDataModule, RLTrainer
from lit_sb3.callbacks import EvalCallback
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.envs.masked import InvalidActionEnvDiscrete
from lit_sb3.policies.maskable_distributions import (
    MaskableBernoulliDistribution,
    MaskableCategoricalDistribution,
    MaskableMultiCategoricalDistribution,
)
from lit_sb3.vec_env import DummyVecEnv, make_vec_env
from tests.tolerances import reassociation_rtol, state_tolerances

th.set_num_threads(1)
NET = dict(net_arch=[32, 32])


class _MaskedSpaces(gym.Env):
    """Random observations; random masks over any discrete action space (at least one choice per dimension)."""

    def __init__(self, action_space: spaces.Space) -> None:
        self.observation_space = spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = action_space
        self.violations = 0
        self.steps = 0

    def _dims(self) -> list[int]:
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            return [int(space.n)]
        if isinstance(space, spaces.MultiDiscrete):
            return [int(n) for n in space.nvec]
        return [2] * int(space.n)

    def _draw(self) -> None:
        parts = []
        for n in self._dims():
            mask = self.np_random.random(n) < 0.4
            mask[self.np_random.integers(n)] = True
            parts.append(mask)
        self._parts = parts

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._draw()
        return self.observation_space.sample(), {}

    def step(self, action):
        chosen = np.atleast_1d(np.asarray(action)).astype(int)
        self.violations += int(sum(not part[a] for part, a in zip(self._parts, chosen, strict=True)))
        self.steps += 1
        self._draw()
        return self.observation_space.sample(), 0.0, False, self.steps % 20 == 0, {}

    def action_masks(self) -> np.ndarray:
        return np.concatenate(self._parts)


SPACES = [
    pytest.param(spaces.Discrete(7), id="discrete"),
    pytest.param(spaces.MultiDiscrete([3, 5, 2]), id="multidiscrete"),
    pytest.param(spaces.MultiDiscrete([4, 4]), id="multidiscrete-uniform"),
    pytest.param(spaces.MultiBinary(4), id="multibinary"),
]


@pytest.mark.parametrize("action_space", SPACES)
def test_no_masked_action_is_ever_taken(action_space):
    envs = [_MaskedSpaces(action_space) for _ in range(2)]
    model = MaskablePPO("MlpPolicy", n_steps=256, batch_size=128, n_epochs=2, seed=0, policy_kwargs=NET)
    model.learn(2048, env=DummyVecEnv([lambda e=e: e for e in envs]))
    assert sum(e.steps for e in envs) >= 2048
    assert sum(e.violations for e in envs) == 0
    # stochastic predict, one observation and a batch
    env = envs[0]
    for _ in range(500):
        obs, _ = env.reset()
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=False)
        env.step(action)
    masks = np.stack([e.action_masks() for e in envs])
    obs = np.stack([e.observation_space.sample() for e in envs])
    for _ in range(500):
        actions, _ = model.predict(obs, action_masks=masks, deterministic=False)
        for e, a, m in zip(envs, actions, masks, strict=True):
            e._parts = np.split(m, np.cumsum(e._dims())[:-1])
            e.violations = 0
            e.step(a)
            assert e.violations == 0
    assert env.violations == 0


def _random_masks(rng, dims, batch):
    parts = []
    for n in dims:
        mask = rng.random((batch, n)) < 0.5
        mask[np.arange(batch), rng.integers(n, size=batch)] = True
        parts.append(mask)
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize(
    "ours, theirs, dims",
    [
        (lambda: MaskableCategoricalDistribution(6), ("MaskableCategoricalDistribution", 6), [6]),
        (
            lambda: MaskableMultiCategoricalDistribution([3, 4, 2]),
            ("MaskableMultiCategoricalDistribution", [3, 4, 2]),
            [3, 4, 2],
        ),
        (
            lambda: MaskableMultiCategoricalDistribution([5, 5]),
            ("MaskableMultiCategoricalDistribution", [5, 5]),
            [5, 5],
        ),
        (lambda: MaskableBernoulliDistribution(3), ("MaskableBernoulliDistribution", 3), [2, 2, 2]),
    ],
    ids=["categorical", "multicategorical", "multicategorical-uniform", "bernoulli"],
)
def test_masked_log_prob_and_entropy_equal_sb3_contrib(ours, theirs, dims):
    contrib = pytest.importorskip("sb3_contrib.common.maskable.distributions")
    rng = np.random.default_rng(0)
    batch = 64
    logits = th.as_tensor(rng.normal(size=(batch, sum(dims))) * 3, dtype=th.float32)
    masks = _random_masks(rng, dims, batch)
    dist = ours().proba_distribution(logits)
    ref = getattr(contrib, theirs[0])(theirs[1]).proba_distribution(logits)
    # unmasked, then masked, then unmasked again (apply_masking(None) restores)
    for m in (None, masks, None, masks):
        dist.apply_masking(m)
        ref.apply_masking(m)
        actions = ref.sample()
        # one pass over sums of at most sum(dims) categories (log-softmax, entropy, the sub-distributions' sum):
        # tests/tolerances.py's reassociation_rtol, entries at the scale of the largest; the mode (an argmax) exactly
        rtol = reassociation_rtol(sum(dims))
        expected_log_prob, expected_entropy = ref.log_prob(actions), ref.entropy()
        th.testing.assert_close(dist.log_prob(actions), expected_log_prob, **state_tolerances(expected_log_prob, rtol))
        th.testing.assert_close(dist.entropy(), expected_entropy, **state_tolerances(expected_entropy, rtol))
        th.testing.assert_close(dist.mode().reshape(ref.mode().shape), ref.mode(), rtol=0.0, atol=0.0)
    # masked choices have probability exactly 0: never sampled
    samples = th.stack([dist.sample().reshape(batch, -1) for _ in range(200)])
    offsets = np.concatenate([[0], np.cumsum(dims)[:-1]])
    chosen = samples.numpy() + offsets
    allowed = np.take_along_axis(np.broadcast_to(masks, (200, *masks.shape)), chosen, axis=2)
    assert allowed.all()


def test_masking_api_of_evaluate_policy_trainer_and_eval_callback():
    env_id = "InvalidActionDiscrete-v0"
    model = MaskablePPO("MlpPolicy", n_steps=64, batch_size=64, n_epochs=1, seed=1, policy_kwargs=NET)
    eval_env = make_vec_env(env_id, n_envs=1, seed=3)
    evaluator = EvalCallback(eval_env, eval_freq=64, n_eval_episodes=2, verbose=0, warn=False)
    trainer = RLTrainer(max_steps=128, logger=False, rl_callback=evaluator)
    trainer.fit(model, datamodule=RLEnvDataModule(env_id, n_envs=1, seed=2))
    # the callback evaluated with masks: a masked policy never takes an invalid action, so no episode ends early
    assert evaluator.last_mean_reward is not None
    lengths = evaluate_policy(model, eval_env, n_eval_episodes=3, use_masking=True, return_episode_rewards=True)[1]
    assert lengths == [50, 50, 50]
    results = trainer.validate(model, env=make_vec_env(env_id, n_envs=2, seed=4), n_eval_episodes=2, use_masking=True)
    assert results[0]["validate/mean_episode_length"] == 50
    results = trainer.test(model, env=make_vec_env(env_id, n_envs=1, seed=4), n_eval_episodes=2, use_masking=True)
    assert results[0]["test/mean_episode_length"] == 50
    env = InvalidActionEnvDiscrete()
    obs, _ = env.reset(seed=0)
    for _ in range(200):
        action, state = trainer.predict(model, observation=obs, action_masks=env.action_masks(), deterministic=False)
        assert state is None and env.action_masks()[int(action)]
        obs, *_ = env.step(action)


def test_masks_asked_of_what_cannot_supply_them_is_a_one_line_error():
    ppo = PPO("MlpPolicy", n_steps=64, batch_size=64, n_epochs=1, seed=0)
    ppo.learn(64, env="CartPole-v1")
    with pytest.raises(ValueError, match="PPO cannot use action masks") as info:
        evaluate_policy(ppo, make_vec_env("CartPole-v1"), n_eval_episodes=1, use_masking=True)
    assert "\n" not in str(info.value)
    trainer = RLTrainer(max_steps=64, logger=False)
    with pytest.raises(ValueError, match="PPO cannot use action masks"):
        trainer.predict(ppo, observation=np.zeros(4, np.float32), action_masks=np.ones(2, bool))
    with pytest.raises(ValueError, match="PPO cannot use action masks"):
        trainer.validate(ppo, env=make_vec_env("CartPole-v1"), n_eval_episodes=1, use_masking=True)
    # a maskable model on an env without action_masks(): refused before any step, naming the env
    model = MaskablePPO("MlpPolicy", n_steps=64, batch_size=64, seed=0)
    with pytest.raises(ValueError, match=r"'CartPole-v1' has no action_masks\(\) method") as info:
        model.learn(64, env="CartPole-v1")
    assert "\n" not in str(info.value) and model.num_timesteps == 0
    masked = MaskablePPO("MlpPolicy", n_steps=64, batch_size=64, n_epochs=1, seed=0)
    masked.learn(64, env="InvalidActionDiscrete-v0")
    with pytest.raises(ValueError, match="no action_masks"):
        evaluate_policy(masked, make_vec_env("FrozenLake-v1"), n_eval_episodes=1, use_masking=True)
    with pytest.raises(ValueError, match="supported: Discrete, MultiDiscrete, MultiBinary"):
        MaskablePPO("MlpPolicy").learn(64, env="Pendulum-v1")


def test_training_without_masks_as_sb3_contrib_learn_use_masking_false():
    """sb3-contrib's ``learn(..., use_masking=False)``: every action allowed in collection and in the update (the stored
    masks are all ones), an env without ``action_masks()`` is accepted; ``RLTrainer.fit`` gets it from
    ``model.use_masking``; the next ``learn()`` masks again (its default, as sb3-contrib)."""

    envs = [_MaskedSpaces(spaces.Discrete(7)) for _ in range(2)]
    model = MaskablePPO("MlpPolicy", n_steps=64, batch_size=64, n_epochs=2, seed=0, policy_kwargs=NET)
    model.learn(256, env=DummyVecEnv([lambda e=e: e for e in envs]), use_masking=False)
    assert model.use_masking is False and sum(e.steps for e in envs) == 256
    assert sum(e.violations for e in envs) > 30  # ~60% of the 7 actions are masked at each step: taken anyway
    assert model.rollout_buffer.action_masks.min() == 1.0  # the update sees no mask either

    def run(through_trainer: bool) -> MaskablePPO:
        model = MaskablePPO("MlpPolicy", n_steps=64, batch_size=64, n_epochs=2, seed=0, policy_kwargs=NET)
        env = make_vec_env("InvalidActionDiscrete-v0", n_envs=2, seed=0)
        if through_trainer:
            model.use_masking = False
            RLTrainer(max_steps=256, logger=False).fit(model, datamodule=RLEnvDataModule(env))
        else:
            model.learn(256, env=env, use_masking=False)
        assert model.rollout_buffer.action_masks.min() == 1.0
        return model

    learned, fitted = run(through_trainer=False), run(through_trainer=True)
    for key, value in learned.policy.state_dict().items():
        assert th.equal(value, fitted.policy.state_dict()[key]), key
    # back to masks on the next learn(): no masked action taken
    envs = [_MaskedSpaces(spaces.Discrete(7)) for _ in range(2)]
    model.learn(128, env=DummyVecEnv([lambda e=e: e for e in envs]))
    assert model.use_masking is True and sum(e.violations for e in envs) == 0
    # an env that cannot give masks trains without them
    unmasked = MaskablePPO("MlpPolicy", n_steps=64, batch_size=64, n_epochs=1, seed=0, policy_kwargs=NET)
    unmasked.learn(128, env="CartPole-v1", use_masking=False)
    assert unmasked.num_timesteps == 128


def test_save_load_round_trip(tmp_path):
    model = MaskablePPO("MlpPolicy", n_steps=64, batch_size=32, n_epochs=2, seed=0, policy_kwargs=NET)
    model.learn(128, env="TicTacToe-v0")
    model.save(tmp_path / "m.zip")
    loaded = MaskablePPO.load(tmp_path / "m.zip")
    assert type(loaded.policy).__name__ == "MaskableActorCriticPolicy"
    obs = np.stack([loaded.observation_space.sample() for _ in range(16)])
    masks = np.random.default_rng(0).random((16, 9)) < 0.5
    masks[:, 0] = True
    a, _ = model.predict(obs, action_masks=masks, deterministic=True)
    b, _ = loaded.predict(obs, action_masks=masks, deterministic=True)
    assert np.array_equal(a, b) and masks[np.arange(16), b].all()
    for key, value in model.policy.state_dict().items():
        assert th.equal(value, loaded.policy.state_dict()[key]), key
    assert loaded.num_timesteps == model.num_timesteps


def test_checkpoint_resume_equals_uninterrupted_run(tmp_path):
    def make():
        return MaskablePPO("MlpPolicy", n_steps=32, batch_size=32, n_epochs=2, seed=3, policy_kwargs=NET)

    def fit(model, steps, ckpt_path=None):
        trainer = RLTrainer(max_steps=steps, logger=False)
        trainer.fit(
            model, datamodule=RLEnvDataModule("InvalidActionDiscrete-v0", n_envs=2, seed=5), ckpt_path=ckpt_path
        )
        return trainer

    straight = make()
    fit(straight, 320)
    rng = th.get_rng_state().clone(), np.random.get_state()[1].copy()
    first = make()
    fit(first, 100).save_checkpoint(tmp_path / "cut.ckpt")
    resumed = make()
    fit(resumed, 320, ckpt_path=str(tmp_path / "cut.ckpt"))
    assert resumed.num_timesteps == straight.num_timesteps == 320
    for key, value in straight.state_dict().items():
        assert th.equal(value, resumed.state_dict()[key]), key
    assert th.equal(rng[0], th.get_rng_state()) and np.array_equal(rng[1], np.random.get_state()[1])
    assert np.array_equal(straight.rollout_buffer.action_masks, resumed.rollout_buffer.action_masks)


def test_maskable_ppo_solves_the_invalid_action_env_and_beats_ppo():
    """Identity task with 36 of 40 actions invalid at each step (an invalid action ends the episode): masked PPO
    solves it (50 per episode) in 8k steps; PPO at the same budget and settings does not come close."""
    kwargs = dict(n_steps=256, batch_size=64, seed=0, policy_kwargs=NET)
    budget = 8192
    masked = MaskablePPO("MlpPolicy", **kwargs)
    masked.learn(budget, env=make_vec_env("InvalidActionDiscrete-v0", n_envs=4, seed=0))
    plain = PPO("MlpPolicy", **kwargs)
    plain.learn(budget, env=make_vec_env("InvalidActionDiscrete-v0", n_envs=4, seed=0))
    eval_env = make_vec_env("InvalidActionDiscrete-v0", n_envs=1, seed=1)
    masked_score, _ = evaluate_policy(masked, eval_env, n_eval_episodes=10, use_masking=True)
    plain_score, _ = evaluate_policy(plain, eval_env, n_eval_episodes=10)
    assert masked_score >= 45, masked_score
    assert plain_score < masked_score - 15, (plain_score, masked_score)
