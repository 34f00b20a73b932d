"""What SB3 refuses up front, refused up front here too, with one line: ``set_env`` with another number of envs,
``MlpPolicy`` on a Dict observation space, MaskablePPO on a SubprocVecEnv whose envs have no ``action_masks()``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from lit_sb3 import PPO, SAC, RLEnvDataModule, RLTrainer
from lit_sb3.algorithms.ppo_mask import MaskablePPO
from lit_sb3.algorithms.ppo_recurrent import RecurrentPPO
from lit_sb3.vec_env import DummyVecEnv, SubprocVecEnv
from lit_sb3.vec_env.env_util import make_vec_env, wrap_env

th.set_num_threads(1)


def test_set_env_with_another_number_of_envs_is_refused_as_sb3_refuses_it():
    model = PPO("MlpPolicy", n_steps=16, batch_size=16, policy_kwargs=dict(net_arch=[8]))
    model.set_env(make_vec_env("CartPole-v1", n_envs=2))  # before the networks exist: any number
    model._setup_model()
    with pytest.raises(ValueError) as info:
        model.set_env(make_vec_env("CartPole-v1", n_envs=3))
    message = str(info.value)
    assert "\n" not in message and "(3 != 2)" in message and "PPO.load(path, env)" in message
    assert model.env.num_envs == 2  # the model keeps its env
    model.set_env(make_vec_env("CartPole-v1", n_envs=2))  # the same number is fine


class DictObsEnv(gym.Env):
    """A tiny env with a Dict observation space."""

    observation_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Box(-1, 1, (3,))})
    action_space = spaces.Box(-1, 1, (1,))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize(
    "cls, alias, expected",
    [(PPO, "MlpPolicy", "MultiInputPolicy"), (SAC, "CnnPolicy", "MultiInputPolicy"),
     (RecurrentPPO, "MlpLstmPolicy", "MultiInputLstmPolicy")],
)  # fmt: skip
def test_mlp_policy_on_a_dict_observation_space_is_refused_with_sb3_hint(cls, alias, expected):
    model = cls(alias)
    with pytest.raises(ValueError, match=f"You must use `{expected}` when working with dict observation space"):
        RLTrainer(max_steps=8, logger=False).fit(model, datamodule=RLEnvDataModule(DictObsEnv()))
    assert not model.policy_ready  # refused before anything was built
    cls("MultiInputPolicy" if cls is not RecurrentPPO else "MultiInputLstmPolicy")._init_env_metadata(DictObsEnv())


class NoMasksEnv(gym.Env):
    """A Discrete-action env without ``action_masks()``."""

    observation_space = spaces.Box(-1, 1, (2,))
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("vec_env_cls", [DummyVecEnv, SubprocVecEnv])
def test_maskable_ppo_without_action_masks_gives_one_line_on_any_vec_env(vec_env_cls):
    # fork: the workers start at once (forkserver would import this module, torch included, in each)
    kwargs = dict(start_method="fork") if vec_env_cls is SubprocVecEnv else None
    env = wrap_env(NoMasksEnv, n_envs=2, vec_env_cls=vec_env_cls, vec_env_kwargs=kwargs)
    try:
        model = MaskablePPO("MlpPolicy", n_steps=8, batch_size=8, policy_kwargs=dict(net_arch=[8]))
        with pytest.raises(ValueError) as info:
            RLTrainer(max_steps=16, logger=False).fit(model, datamodule=RLEnvDataModule(env))
        message = str(info.value)
        assert "\n" not in message and "has no action_masks() method" in message
        # the workers are alive: the env still steps and answers
        env.reset()
        env.step(np.zeros(2, dtype=np.int64))
        assert env.get_attr("action_space") == [spaces.Discrete(3)] * 2
    finally:
        env.close()
