"""Save, load and parameters as SB3 code calls them: ``load(custom_objects=...)`` (the RL Zoo's keys),
``save(exclude=..., include=...)``, ``set_parameters(..., exact_match=False)``, and ``policy.save`` /
``Policy.load`` for every policy class, through the model archives' safe format."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3 import A2C, DDPG, DQN, PPO, SAC, TD3
from lit_sb3.algorithms.ars import ARS
from lit_sb3.algorithms.crossq import CrossQ
from lit_sb3.algorithms.ppo_mask import MaskablePPO
from lit_sb3.algorithms.ppo_recurrent import RecurrentPPO
from lit_sb3.algorithms.qrdqn import QRDQN
from lit_sb3.algorithms.tqc import TQC
from lit_sb3.algorithms.trpo import TRPO
from lit_sb3.utils.serialization import BadFileError
from lit_sb3.vec_env.env_util import wrap_env

th.set_num_threads(1)

NET = dict(net_arch=[8])


def built(cls, env: str, **kwargs):
    """A model with its networks built on ``env`` (no training needed to save it)."""
    model = cls("MlpPolicy", **{"seed": 0, **kwargs})
    model._init_env_metadata(wrap_env(env))
    model._setup_model()
    return model


# ---------------------------------------------------------------- load(custom_objects=...) and load(**kwargs)

# what rl_zoo3's enjoy.py passes to every algorithm's load()
ZOO_CUSTOM_OBJECTS = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}


def test_a2c_load_with_the_zoo_custom_objects(tmp_path):
    built(A2C, "CartPole-v1", learning_rate=7e-4, policy_kwargs=NET).save(tmp_path / "a2c.zip")
    model = A2C.load(tmp_path / "a2c.zip", custom_objects=ZOO_CUSTOM_OBJECTS)
    assert model.learning_rate == 0.0
    assert model.lr_schedule is ZOO_CUSTOM_OBJECTS["lr_schedule"]
    assert not hasattr(model, "clip_range")  # A2C's archive holds no clip_range: ignored, as SB3 does


def test_ppo_and_dqn_custom_objects_replace_stored_schedules(tmp_path):
    built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET).save(tmp_path / "ppo.zip")
    ppo = PPO.load(tmp_path / "ppo.zip", custom_objects=ZOO_CUSTOM_OBJECTS)
    assert ppo.clip_range_schedule(1.0) == 0.0 and ppo.lr_schedule(1.0) == 0.0
    built(DQN, "CartPole-v1", buffer_size=100, policy_kwargs=NET).save(tmp_path / "dqn.zip")
    exploration = lambda _: 0.25  # noqa: E731
    dqn = DQN.load(tmp_path / "dqn.zip", custom_objects={**ZOO_CUSTOM_OBJECTS, "exploration_schedule": exploration})
    assert dqn.exploration_schedule is exploration and dqn.lr_schedule(0.5) == 0.0


def test_load_kwargs_set_values_and_refuse_unknown_names(tmp_path):
    built(PPO, "CartPole-v1", n_steps=32, batch_size=32, gamma=0.9, policy_kwargs=NET).save(tmp_path / "ppo.zip")
    assert PPO.load(tmp_path / "ppo.zip", gamma=0.5, num_timesteps=7).gamma == 0.5
    assert PPO.load(tmp_path / "ppo.zip", num_timesteps=7).num_timesteps == 7
    with pytest.raises(TypeError, match=r"unknown argument 'gama' \(did you mean 'gamma'\?\)"):
        PPO.load(tmp_path / "ppo.zip", gama=0.5)
    with pytest.raises(ValueError, match="do not equal the stored policy kwargs"):  # SB3's check
        PPO.load(tmp_path / "ppo.zip", policy_kwargs=dict(net_arch=[16]))
    assert PPO.load(tmp_path / "ppo.zip", policy_kwargs=NET).policy_kwargs == NET


# ---------------------------------------------------------------- save(exclude=..., include=...)


def _stored(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("data.json"))["params"]


def test_save_exclude_and_include_with_sb3_precedence(tmp_path):
    model = built(PPO, "CartPole-v1", n_steps=32, batch_size=32, gamma=0.9, policy_kwargs=NET)
    model.save(tmp_path / "excluded.zip", exclude=["gamma", "policy", "not_an_argument"])
    assert "gamma" not in _stored(tmp_path / "excluded.zip") and "policy" in _stored(tmp_path / "excluded.zip")
    assert PPO.load(tmp_path / "excluded.zip").gamma == 0.99  # the constructor's default, as in SB3
    model.save(tmp_path / "included.zip", exclude=["gamma"], include=["gamma"])  # include wins
    assert PPO.load(tmp_path / "included.zip").gamma == 0.9
    assert "device" not in _stored(tmp_path / "included.zip")  # chosen by load(device=...)


# ---------------------------------------------------------------- set_parameters


def test_set_parameters_exact_match_false_loads_partially(tmp_path):
    source = built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET, seed=1)
    target = built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET, seed=2)
    before = {k: v.clone() for k, v in target.policy.state_dict().items()}
    action_net = {k: v for k, v in source.get_parameters()["policy"].items() if k.startswith("action_net.")}
    with pytest.raises(ValueError, match="exact_match=True"):
        target.set_parameters({"policy": action_net})
    assert all(th.equal(v, target.policy.state_dict()[k]) for k, v in before.items())  # refused before loading
    target.set_parameters({"policy": action_net}, exact_match=False)
    after = target.policy.state_dict()
    for key, value in after.items():
        assert th.equal(value, action_net[key] if key in action_net else before[key]), key
    with pytest.raises(
        ValueError, match=r"Unknown object 'critic' in the parameters; known: \['policy', 'policy.optimizer'\]"
    ):
        target.set_parameters({"critic": {}}, exact_match=False)


def test_set_parameters_from_an_archive_with_other_tensors(tmp_path):
    # the model has a tensor the archive lacks: exact_match=True refuses, exact_match=False loads the rest
    source = built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET, seed=1)
    source.save(tmp_path / "source.zip")
    target = built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET, seed=2)
    target.set_parameters(tmp_path / "source.zip")
    assert all(th.equal(a, b) for a, b in zip(source.parameters(), target.parameters()))
    state = target.policy.state_dict()
    target.policy.extra_head = nn.Linear(2, 2)  # a tensor the archive does not hold
    with pytest.raises(BadFileError, match="missing"):
        target.set_parameters(tmp_path / "source.zip")
    target.set_parameters(tmp_path / "source.zip", exact_match=False)
    assert all(th.equal(v, target.policy.state_dict()[k]) for k, v in state.items())


# ---------------------------------------------------------------- policy.save / Policy.load


POLICIES = [
    (PPO, "CartPole-v1", dict(policy_kwargs=dict(net_arch=dict(pi=[8], vf=[16]), activation_fn=nn.ReLU, ortho_init=False))),
    (A2C, "Pendulum-v1", dict(use_sde=True, policy_kwargs=dict(net_arch=[8], log_std_init=-1.0, full_std=False))),
    (TRPO, "CartPole-v1", dict(policy_kwargs=dict(net_arch=[8], share_features_extractor=False))),
    (SAC, "Pendulum-v1", dict(use_sde=True, policy_kwargs=dict(net_arch=[8], n_critics=3, log_std_init=-2.0))),
    (TD3, "Pendulum-v1", dict(policy_kwargs=dict(net_arch=dict(pi=[8], qf=[16]), share_features_extractor=True))),
    (DDPG, "Pendulum-v1", dict(policy_kwargs=NET)),
    (DQN, "CartPole-v1", dict(buffer_size=100, policy_kwargs=dict(net_arch=[8, 8], activation_fn=nn.Tanh))),
    (QRDQN, "CartPole-v1", dict(buffer_size=100, policy_kwargs=dict(net_arch=[8], n_quantiles=7))),
    (TQC, "Pendulum-v1", dict(buffer_size=100, policy_kwargs=dict(net_arch=[8], n_quantiles=5, n_critics=3))),
    (CrossQ, "Pendulum-v1", dict(buffer_size=100, policy_kwargs=dict(net_arch=[16], batch_norm_momentum=0.1))),
    (RecurrentPPO, "CartPole-v1", dict(n_steps=16, batch_size=16, policy_kwargs=dict(net_arch=[8], lstm_hidden_size=8, n_lstm_layers=2))),
    (MaskablePPO, "CartPole-v1", dict(n_steps=16, batch_size=16, policy_kwargs=NET)),
    (ARS, "Pendulum-v1", dict(policy_kwargs=NET)),
]  # fmt: skip


@pytest.mark.parametrize("cls, env, kwargs", POLICIES, ids=[c.__name__ for c, _, _ in POLICIES])
def test_policy_save_then_policy_class_load_predicts_the_same(cls, env, kwargs, tmp_path):
    model = built(cls, env, **kwargs)
    policy = model.policy
    with th.no_grad():  # move every parameter away from its initial value: the weights must come from the file
        for param in policy.parameters():
            param.add_(0.01 * th.randn_like(param))
    policy.save(tmp_path / "policy")
    loaded = type(policy).load(tmp_path / "policy.zip", device="cpu")
    assert type(loaded) is type(policy)
    state, loaded_state = policy.state_dict(), loaded.state_dict()
    assert state.keys() == loaded_state.keys() and all(th.equal(state[k], loaded_state[k]) for k in state)
    observations = np.stack([model.observation_space.sample() for _ in range(8)])
    expected, _ = policy.predict(observations, deterministic=True)
    actions, _ = loaded.predict(observations, deterministic=True)
    np.testing.assert_array_equal(actions, expected)
    with zipfile.ZipFile(tmp_path / "policy.zip") as archive:
        assert sorted(archive.namelist()) == ["data.json", "model.pth", "system_info.txt"]


class DictObsEnv(gym.Env):
    """A tiny env with a Dict observation space (for the MultiInput policies)."""

    observation_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(3)})
    action_space = spaces.Box(-1, 1, (1,))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize(
    "cls, alias", [(PPO, "MultiInputPolicy"), (SAC, "MultiInputPolicy"), (RecurrentPPO, "MultiInputLstmPolicy")]
)
def test_multi_input_policies_save_and_load(cls, alias, tmp_path):
    model = cls(alias, seed=0, policy_kwargs=NET)
    model._init_env_metadata(wrap_env(DictObsEnv()))
    model._setup_model()
    model.policy.save(tmp_path / "policy.zip")
    loaded = type(model.policy).load(tmp_path / "policy.zip")
    observations = {key: np.stack([sub.sample() for _ in range(4)]) for key, sub in model.observation_space.items()}
    expected, _ = model.policy.predict(observations, deterministic=True)
    np.testing.assert_array_equal(loaded.predict(observations, deterministic=True)[0], expected)


def test_policy_and_model_archives_are_not_confused(tmp_path):
    from lit_sb3.policies.base import ActorCriticPolicy
    from lit_sb3.policies.sac import SACPolicy

    model = built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET)
    model.save(tmp_path / "model.zip")
    model.policy.save(tmp_path / "policy.zip")
    with pytest.raises(BadFileError, match=r"holds a PPO model, not a policy; use PPO.load\(path\)"):
        ActorCriticPolicy.load(tmp_path / "model.zip")
    with pytest.raises(BadFileError, match=r"ActorCriticPolicy policy, not SACPolicy"):
        SACPolicy.load(tmp_path / "policy.zip")
    with pytest.raises(BadFileError, match=r"holds a ActorCriticPolicy model, not PPO"):
        PPO.load(tmp_path / "policy.zip")


def test_policy_archive_declaring_a_huge_network_is_refused_before_building_it(tmp_path):
    from lit_sb3.policies.base import ActorCriticPolicy

    built(PPO, "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=NET).policy.save(tmp_path / "policy.zip")
    with zipfile.ZipFile(tmp_path / "policy.zip") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data.json"])
    data["params"]["net_arch"] = [60000, 60000, 60000]
    members["data.json"] = json.dumps(data).encode()
    with zipfile.ZipFile(tmp_path / "huge.zip", "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with pytest.raises(BadFileError, match="net_arch .* weights"):
        ActorCriticPolicy.load(tmp_path / "huge.zip")


def test_a_policy_part_cannot_be_saved_alone(tmp_path):
    model = built(SAC, "Pendulum-v1", buffer_size=100, policy_kwargs=NET)
    with pytest.raises(TypeError, match=r"Actor cannot be saved alone: .*features_extractor.*model.policy.save"):
        model.policy.actor.save(tmp_path / "actor.zip")
    assert not (tmp_path / "actor.zip").exists()


def test_a_compiled_policy_saves_and_loads_as_sb3_does(tmp_path):
    """SB3's ``model.policy = th.compile(model.policy)``: the archive holds the plain keys (no ``_orig_mod.``), so the
    model loads into a plain one with the same predictions; its parameters load back into the compiled one."""
    model = built(PPO, "CartPole-v1", policy_kwargs=NET)
    model.policy = th.compile(model.policy)
    model.save(tmp_path / "compiled.zip")
    with zipfile.ZipFile(tmp_path / "compiled.zip") as archive:
        keys = th.load(io.BytesIO(archive.read("model.pth")), weights_only=True).keys()
    assert keys and not [k for k in keys if "_orig_mod" in k]
    loaded = PPO.load(tmp_path / "compiled.zip")
    obs = np.zeros((3, 4), dtype=np.float32) + np.arange(3, dtype=np.float32)[:, None]
    plain = model.policy._orig_mod
    for key, value in plain.state_dict().items():
        assert th.equal(value, loaded.policy.state_dict()[key]), key
    assert np.array_equal(loaded.predict(obs, deterministic=True)[0], plain.predict(obs, deterministic=True)[0])
    model.set_parameters(loaded.get_parameters())  # plain keys into the compiled policy
    params = loaded.get_parameters()
    assert params["policy"].keys() == model.get_parameters()["policy"].keys()


def test_model_device_can_be_assigned_as_in_sb3():
    """``model.device = "cpu"`` (SB3 allows it) moves the model and reads back as a ``torch.device``."""
    model = built(SAC, "Pendulum-v1", policy_kwargs=NET)
    model.device = "cpu"
    assert model.device == th.device("cpu") and next(model.policy.parameters()).device == th.device("cpu")
    model.device = th.device("cpu")
    assert model.device.type == "cpu"
