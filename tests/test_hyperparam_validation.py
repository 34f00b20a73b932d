"""Hyperparameter checks derived from constructor annotations plus the range table (lit_sb3.zoo.config.checks)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal

import pytest
import torch

from lit_sb3.core.schedules import LinearSchedule
from lit_sb3.zoo import registry
from lit_sb3.zoo.config import resolve
from lit_sb3.zoo.config.checks import RANGES, Bound, check_device, check_value
from lit_sb3.zoo.errors import BenchError

DATA = Path(__file__).parent / "data" / "rl_zoo"
ALGO_ENVS = [("ppo", "CartPole-v1"), ("a2c", "CartPole-v1"), ("dqn", "CartPole-v1"), ("sac", "Pendulum-v1"),
             ("td3", "Pendulum-v1"), ("ddpg", "Pendulum-v1")]  # fmt: skip


def _cls(algo: str) -> type:
    module, _, attr = registry.ALGOS[algo].partition(":")
    return getattr(importlib.import_module(module), attr)


def _error(algo: str, env_id: str, **overrides: str) -> str:
    with pytest.raises(BenchError) as info:
        resolve(algo, env_id, overrides=overrides)
    return str(info.value)


# ------------------------------------------------------------------------------------------ every algorithm
@pytest.mark.parametrize("algo,env_id", ALGO_ENVS)
@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("gamma", "abc", "gamma: bad value 'abc': expected float in [0, 1]"),
        ("gamma", "5", "gamma: bad value 5: must be in [0, 1]"),
        ("gamma", ".nan", "gamma: bad value nan: must be in [0, 1]"),
        ("n_steps", "0", "n_steps: bad value 0: must be >= 1"),
        ("n_steps", "1.5", "n_steps: bad value 1.5: expected int >= 1"),
        ("seed", "abc", "seed: bad value 'abc': expected int | None"),
        ("verbose", "3", "verbose: bad value 3: must be in [0, 2]"),
        ("device", "abc", "device: unknown device 'abc'; allowed: cpu, cuda, cuda:N, auto or mps"),
        ("learning_rate", "0", "learning_rate: bad value 0.0: must be > 0"),
        ("policy_kwargs", "dict(foo=1)", "policy_kwargs: unknown policy argument 'foo'"),
        ("policy_kwargs", "dict(net_arch='abc')", "policy_kwargs.net_arch: bad value 'abc'"),
        ("policy_kwargs", "dict(activation_fn=3)", "policy_kwargs.activation_fn: bad value 3: expected type[Module]"),
    ],
)
def test_common_arguments_are_checked_for_every_algorithm(algo: str, env_id: str, key: str, value: str,
                                                          expected: str) -> None:  # fmt: skip
    msg = _error(algo, env_id, **{key: value})
    assert msg.startswith("--hyperparams: ") and expected in msg and "\n" not in msg, msg


@pytest.mark.parametrize(
    "algo,env_id,key,value,expected",
    [
        ("ppo", "CartPole-v1", "n_steps", "abc", "n_steps: bad value 'abc': expected int >= 1"),
        ("ppo", "CartPole-v1", "n_epochs", "-3", "n_epochs: bad value -3: must be >= 1"),
        ("ppo", "CartPole-v1", "gae_lambda", "1.5", "gae_lambda: bad value 1.5: must be in [0, 1]"),
        ("ppo", "CartPole-v1", "ent_coef", "abc", "ent_coef: bad value 'abc': expected float >= 0"),
        ("ppo", "CartPole-v1", "max_grad_norm", "abc", "max_grad_norm: bad value 'abc': expected float > 0"),
        ("ppo", "CartPole-v1", "target_kl", "-1", "target_kl: bad value -1: must be > 0"),
        ("ppo", "CartPole-v1", "normalize_advantage", "maybe", "expected bool"),
        ("ppo", "CartPole-v1", "sde_sample_freq", "-2", "sde_sample_freq: bad value -2: must be >= -1"),
        ("a2c", "CartPole-v1", "rms_prop_eps", "0", "rms_prop_eps: bad value 0: must be > 0"),
        ("dqn", "CartPole-v1", "exploration_final_eps", "2", "exploration_final_eps: bad value 2: must be in [0, 1]"),
        ("dqn", "CartPole-v1", "target_update_interval", "0", "target_update_interval: bad value 0: must be >= 1"),
        ("dqn", "CartPole-v1", "policy_kwargs", "dict(net_arch=dict(pi=[64]))", "expected list[int] | None"),
        ("sac", "Pendulum-v1", "ent_coef", "abc", "or 'auto' or 'auto_<initial value>' (e.g. auto_0.1)"),
        ("sac", "Pendulum-v1", "tau", "2", "tau: bad value 2: must be in [0, 1]"),
        ("sac", "Pendulum-v1", "learning_starts", "-1", "learning_starts: bad value -1: must be >= 0"),
        ("sac", "Pendulum-v1", "gradient_steps", "-2", "gradient_steps: bad value -2: must be >= -1"),
        ("sac", "Pendulum-v1", "policy_kwargs", "dict(net_arch=dict(pi=[64]))", "missing key(s) ['qf']"),
        ("sac", "Pendulum-v1", "policy_kwargs", "dict(n_critics=0)", "policy_kwargs.n_critics: bad value 0"),
        ("td3", "Pendulum-v1", "policy_delay", "0", "policy_delay: bad value 0: must be >= 1"),
        ("td3", "Pendulum-v1", "target_noise_clip", "-0.5", "target_noise_clip: bad value -0.5: must be >= 0"),
        (
            "td3",
            "Pendulum-v1",
            "policy_kwargs",
            "dict(features_extractor_kwargs=dict(features_dim=8))",
            "features_extractor_kwargs: unknown features extractor argument 'features_dim' for FlattenExtractor",
        ),
        (
            "ppo",
            "CartPole-v1",
            "policy_kwargs",
            "dict(optimizer_class=th.optim.SGD, optimizer_kwargs=dict(betas=1))",
            "unknown optimizer argument 'betas' for SGD",
        ),
        (
            "sac",
            "Pendulum-v1",
            "replay_buffer_kwargs",
            "dict(n_sampled_goals=4)",
            "unknown buffer argument 'n_sampled_goals' for HerReplayBuffer (did you mean 'n_sampled_goal'?)",
        ),
        (
            "sac",
            "Pendulum-v1",
            "replay_buffer_kwargs",
            "dict(n_sampled_goal=0)",
            "replay_buffer_kwargs.n_sampled_goal: bad value 0: must be >= 1",
        ),
    ],
)
def test_algorithm_specific_ranges(algo: str, env_id: str, key: str, value: str, expected: str) -> None:
    extra = {"replay_buffer_class": "HerReplayBuffer"} if key == "replay_buffer_kwargs" else {}
    msg = _error(algo, env_id, **{key: value}, **extra)
    assert expected in msg and "\n" not in msg, msg


@pytest.mark.parametrize(
    "algo,env_id,overrides,check",
    [
        ("sac", "Pendulum-v1", {"ent_coef": "auto_0.1"}, ("ent_coef", "auto_0.1")),
        ("sac", "Pendulum-v1", {"ent_coef": "auto"}, ("ent_coef", "auto")),
        ("sac", "Pendulum-v1", {"ent_coef": "0.05"}, ("ent_coef", 0.05)),
        ("ppo", "CartPole-v1", {"seed": "1e3"}, ("seed", 1000)),
        ("ppo", "CartPole-v1", {"device": "cuda:1"}, ("device", "cuda:1")),
        ("ppo", "CartPole-v1", {"target_kl": "null"}, ("target_kl", None)),
        ("ppo", "CartPole-v1", {"learning_rate": "lin_3e-4"}, ("learning_rate", LinearSchedule(3e-4))),
        (
            "ppo",
            "CartPole-v1",
            {"policy_kwargs": "dict(net_arch=[dict(pi=[8], vf=[8])])"},  # SB3 < 1.8 form
            ("policy_kwargs", {"net_arch": [{"pi": [8], "vf": [8]}]}),
        ),
        (
            "ppo",
            "CartPole-v1",
            {"policy_kwargs": "dict(optimizer_kwargs=dict(betas=(0.9, 0.99), eps=1e-5))"},
            ("policy_kwargs", {"optimizer_kwargs": {"betas": (0.9, 0.99), "eps": 1e-5}}),
        ),
        ("dqn", "CartPole-v1", {"buffer_size": "1e4"}, ("buffer_size", 10_000)),
    ],
)
def test_good_values_pass(algo: str, env_id: str, overrides: dict[str, str], check: tuple[str, Any]) -> None:
    cfg = resolve(algo, env_id, overrides=overrides)
    key, value = check
    assert cfg.algo_kwargs[key] == value
    assert type(cfg.algo_kwargs[key]) is type(value)


@pytest.mark.parametrize("algo", ["ppo", "sac", "dqn", "td3"])
def test_published_zoo_fixtures_still_resolve(algo: str) -> None:
    from lit_sb3.zoo.config import validate_zoo_file

    assert validate_zoo_file(algo, DATA / f"{algo}.yml", algo_class=_cls(algo))


def test_error_names_file_line_entry_key_value_and_what_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "mine.yml"
    path.write_text("default:\n  n_envs: 1\nCartPole-v1:\n  n_steps: 64\n  gamma: 1.5\n")
    with pytest.raises(BenchError) as info:
        resolve("ppo", "CartPole-v1", config_files=[path])
    assert str(info.value) == f"{path}:5: CartPole-v1: gamma: bad value 1.5: must be in [0, 1]"
    path.write_text("default:\n  policy_kwargs: 'dict(net_arch=dict(pi=[64], qf=[64]))'\n")
    with pytest.raises(BenchError) as info:
        resolve("ppo", "CartPole-v1", config_files=[path])
    msg = str(info.value)
    assert msg.startswith(f"{path}:2: default: policy_kwargs.net_arch: bad value ") and "allowed keys: pi, vf" in msg


def test_checks_come_from_annotations_not_from_a_list_per_algorithm() -> None:
    """A class the checker has never seen gets its arguments checked from its signature alone."""

    class Toy:
        def __init__(self, policy: str, mode: Literal["fast", "slow"] = "fast", gamma: float = 0.9,
                     sizes: tuple[int, int] = (1, 2), scale: float | None = None) -> None:  # fmt: skip
            pass

    def toy(**overrides: str) -> str:
        with pytest.raises(BenchError) as info:
            resolve("ppo", "CartPole-v1", overrides=overrides, algo_class=Toy, builtin=False)
        return str(info.value)

    assert "mode: bad value 'medium': expected 'fast' | 'slow'" in toy(mode="medium")
    assert "gamma: bad value 2: must be in [0, 1]" in toy(gamma="2")  # range by name
    assert "sizes: bad value [1]: expected tuple[int, int]" in toy(sizes="[1]")
    assert "scale: bad value 'x': expected float | None" in toy(scale="x")
    cfg = resolve("ppo", "CartPole-v1", overrides={"mode": "slow", "sizes": "[3, 4]"}, algo_class=Toy, builtin=False)
    assert cfg.algo_kwargs == {"mode": "slow", "sizes": [3, 4]}


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "cuda:12", "auto", "mps"])
def test_device_names(device: str) -> None:
    assert check_device(device) is None
    assert check_device(device + "x") is not None


def test_check_value_forms() -> None:
    assert check_value("x", nn_cls := torch.nn.ReLU, type[torch.nn.Module]) == (nn_cls, None)
    assert check_value("x", 3, type[torch.nn.Module])[1] == "bad value 3: expected type[Module]"
    assert check_value("x", {"a": [1]}, dict[str, list[int]]) == ({"a": [1]}, None)
    assert check_value("x", {"a": ["b"]}, dict[str, list[int]])[1] is not None
    assert check_value("x", True, int)[1] is not None  # a bool is not an int here
    assert check_value("n_steps", 8.0, int) == (8, None)
    assert check_value("learning_rate", LinearSchedule(-1.0), float)[1] is not None  # a schedule: its start
    assert str(Bound(0, 1)) == "in [0, 1]" and str(Bound(0, low_open=True)) == "> 0" and str(RANGES["seed"])


def test_builtin_zoo_files_pass_the_checks() -> None:
    from lit_sb3.zoo.config import validate_zoo_file, zoo_config_path
    from tests.zoo_files import REFUSED, resolve_published_file

    for algo, _ in ALGO_ENVS:
        if algo in REFUSED:  # entries naming another package's wrapper (tests/zoo_files.py)
            assert resolve_published_file(algo, zoo_config_path(algo))
        else:
            assert validate_zoo_file(algo, zoo_config_path(algo))


def test_values_bench_jobs_replace_are_noted() -> None:
    """seed, device and verbose are valid constructor arguments, but a bench job sets its own: say so."""
    cfg = resolve("ppo", "CartPole-v1", overrides={"seed": "3", "device": "cpu"})
    assert any(n.startswith("seed, device from the configs: bench run/tune jobs set their own") for n in cfg.notes)
    assert not any("bench run/tune jobs" in n for n in resolve("ppo", "CartPole-v1").notes)
