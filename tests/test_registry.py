"""Algorithms describe themselves: one registration line makes an algorithm visible everywhere."""

from __future__ import annotations

import argparse
import sys
import types
from typing import ClassVar

import pytest

import lit_sb3
from lit_sb3.algorithms.registry import ALGORITHMS, algorithm_class, register_algorithm, unregister_algorithm
from lit_sb3.zoo import registry as zoo_registry


def test_builtin_metadata_is_what_the_suite_reads() -> None:
    from gymnasium import spaces

    for name in ALGORITHMS:
        cls = algorithm_class(name)
        assert cls.zoo_name == name and getattr(lit_sb3, cls.__name__) is cls
        assert zoo_registry.algo_action_spaces(name) == cls.supported_action_spaces
        assert "MlpPolicy" in cls.policy_aliases  # sb3-contrib's CrossQ and ARS have no Cnn/MultiInput policies
    assert lit_sb3.SAC.default_run_name == "SAC" and lit_sb3.DQN.supported_action_spaces == (spaces.Discrete,)
    assert lit_sb3.DDPG.search_space == "td3"  # the zoo tunes DDPG in TD3's space
    assert zoo_registry.check_pair("dqn", "Pendulum-v1").startswith("dqn needs a Discrete action space")


def test_learn_uses_the_default_run_name(tmp_path) -> None:
    model = lit_sb3.PPO("MlpPolicy", n_steps=16, batch_size=16, n_epochs=1, policy_kwargs={"net_arch": [8]})
    model.learn(16, env="CartPole-v1", default_root_dir=tmp_path)
    assert [p.name for p in (tmp_path / "lightning_logs").iterdir()] == ["PPO_1"]


def test_registering_one_line_makes_an_algorithm_visible_everywhere(monkeypatch, capsys) -> None:
    """The recipe of docs/adding_an_algorithm.md: a module with the class, plus one registration line."""
    from gymnasium import spaces

    from lit_sb3.algorithms.ppo import PPO
    from lit_sb3.zoo.commands import list as list_command
    from lit_sb3.zoo.tuning.search_spaces import default_search_space

    class TinyPPO(PPO):
        zoo_name: ClassVar[str] = "tiny_ppo"
        supported_action_spaces: ClassVar[tuple] = (spaces.Discrete,)
        default_run_name: ClassVar[str] = "TinyPPO"
        search_space: ClassVar[str | None] = "ppo"

    module = types.ModuleType("tiny_algo_plugin")
    module.TinyPPO = TinyPPO
    TinyPPO.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    register_algorithm("tiny_ppo", "tiny_algo_plugin:TinyPPO")
    try:
        assert lit_sb3.TinyPPO is TinyPPO and "TinyPPO" in dir(lit_sb3)
        assert zoo_registry.check_algo("TINY_PPO") == "tiny_ppo"
        assert zoo_registry.get_algo_class("tiny_ppo") is TinyPPO
        assert zoo_registry.check_pair("tiny_ppo", "CartPole-v1") is None
        assert "Discrete action space" in zoo_registry.check_pair("tiny_ppo", "Pendulum-v1")
        assert "n_steps" in default_search_space("tiny_ppo").params
        args = argparse.Namespace(envs="CartPole-v1", algos="ppo,tiny_ppo")
        assert list_command.run(args) == 0
        out = capsys.readouterr().out
        assert "tiny_ppo: tiny_algo_plugin.TinyPPO (action spaces: Discrete" in out
    finally:
        unregister_algorithm("tiny_ppo")
    assert "tiny_ppo" not in ALGORITHMS and "TinyPPO" not in dir(lit_sb3)
    with pytest.raises(AttributeError):
        lit_sb3.TinyPPO  # noqa: B018


def test_registration_errors() -> None:
    with pytest.raises(ValueError, match="module:Class"):
        register_algorithm("x", "no_colon")
    with pytest.raises(ValueError, match="already exported"):
        register_algorithm("ppo2", "elsewhere:PPO")
    with pytest.raises(KeyError, match="did you mean 'ppo'"):
        algorithm_class("ppoo")
    ALGORITHMS["misnamed"] = "lit_sb3.algorithms.sac:SAC"
    try:
        with pytest.raises(ValueError, match="zoo_name is 'sac'"):
            algorithm_class("misnamed")
    finally:
        del ALGORITHMS["misnamed"]
