"""Zoo-format configs, restricted parser, suites, wrappers, and the ``bench list`` / ``show-config`` commands."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from lit_sb3.core.schedules import LinearSchedule
from lit_sb3.zoo import registry
from lit_sb3.zoo.cli import main
from lit_sb3.zoo.config import (
    build_action_noise,
    load_zoo_file,
    parse_python_literal,
    parse_schedule,
    resolve,
    validate_zoo_file,
)
from lit_sb3.zoo.errors import BenchError
from lit_sb3.zoo.suites import default_budgets, expand_algos, expand_envs, load_suites
from lit_sb3.zoo.wrappers import TimeFeatureWrapper, make_env_wrapper

DATA = Path(__file__).parent / "data" / "rl_zoo"
REPO = Path(__file__).resolve().parent.parent


def _algo_class(algo: str) -> type:
    """The registered lit_sb3 algorithm class."""
    module, _, attr = registry.ALGOS[algo].partition(":")
    return getattr(importlib.import_module(module), attr)


@pytest.fixture
def algo_registry() -> None:
    """The CLI tests use the real registry (kept as a fixture so they state the dependency)."""


def _resolve(algo: str, env_id: str, **kwargs):
    return resolve(algo, env_id, algo_class=_algo_class(algo), **kwargs)


def _fixture(algo: str, env_id: str, name: str | None = None, **kwargs):
    path = DATA / f"{name or algo}.yml"
    return resolve(algo, env_id, config_files=[path], algo_class=_algo_class(algo), builtin=False, **kwargs)


# ------------------------------------------------------------------------------------------ published entries
def test_ppo_cartpole_fixture_resolves_to_zoo_values() -> None:
    cfg = _fixture("ppo", "CartPole-v1")
    assert cfg.n_envs == 8 and cfg.n_timesteps == 100_000 and cfg.policy == "MlpPolicy"
    kw = cfg.algo_kwargs
    assert {k: kw[k] for k in ("n_steps", "batch_size", "gae_lambda", "gamma", "n_epochs", "ent_coef")} == {
        "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0,
    }  # fmt: skip
    assert kw["learning_rate"] == LinearSchedule(0.001) and kw["clip_range"] == LinearSchedule(0.2)
    assert kw["learning_rate"](0.5) == pytest.approx(0.0005)
    assert "policy" not in kw and "n_envs" not in kw and "n_timesteps" not in kw
    assert cfg.provenance["n_steps"].endswith("tests/data/rl_zoo/ppo.yml:CartPole-v1")


def test_ppo_pendulum_and_halfcheetah_fixture() -> None:
    pend = _fixture("ppo", "Pendulum-v1")
    assert pend.algo_kwargs["use_sde"] is True and pend.algo_kwargs["sde_sample_freq"] == 4
    assert pend.algo_kwargs["learning_rate"] == 1e-3 and pend.algo_kwargs["clip_range"] == 0.2
    assert pend.n_envs == 4 and pend.normalize is False

    hc = _fixture("ppo", "HalfCheetah-v4")
    assert hc.normalize is True and hc.normalize_kwargs == {"gamma": 0.98}  # zoo: VecNormalize uses the algo's gamma
    assert hc.algo_kwargs["policy_kwargs"] == {
        "log_std_init": -2, "ortho_init": False, "activation_fn": nn.ReLU,
        "net_arch": {"pi": [256, 256], "vf": [256, 256]},
    }  # fmt: skip
    assert hc.algo_kwargs["max_grad_norm"] == 0.8 and hc.algo_kwargs["learning_rate"] == 2.0633e-05


def test_sac_fixture_merge_keys_and_v5_fallback() -> None:
    pend = _fixture("sac", "Pendulum-v1")
    assert pend.n_timesteps == 20_000 and pend.algo_kwargs == {"learning_rate": 1e-3}
    hopper = _fixture("sac", "Hopper-v5")  # `<<: *mujoco-defaults` under Hopper-v4
    assert hopper.source_entry == "Hopper-v4" and hopper.n_timesteps == 1_000_000
    assert hopper.algo_kwargs == {"learning_starts": 10000}
    assert "v4 entries apply to v5 envs" in hopper.provenance["learning_starts"]
    assert any("v4 entries apply to v5 envs" in n for n in hopper.notes)


def test_dqn_and_td3_fixtures() -> None:
    dqn = _fixture("dqn", "CartPole-v1")
    kw = dqn.algo_kwargs
    assert kw["buffer_size"] == 100000 and isinstance(kw["buffer_size"], int)
    assert kw["train_freq"] == 256 and kw["gradient_steps"] == 128 and kw["target_update_interval"] == 10
    assert kw["exploration_fraction"] == 0.16 and kw["exploration_final_eps"] == 0.04
    assert kw["learning_rate"] == pytest.approx(2.3e-3) and kw["policy_kwargs"] == {"net_arch": [256, 256]}

    td3 = _fixture("td3", "Pendulum-v1")
    assert td3.algo_kwargs["action_noise"] == {"kind": "normal", "mean": 0.0, "sigma": 0.1}
    assert "noise_type" not in td3.algo_kwargs and "noise_std" not in td3.algo_kwargs
    assert td3.algo_kwargs["policy_kwargs"] == {"net_arch": [400, 300]}
    noise = build_action_noise(td3.algo_kwargs["action_noise"], action_dim=3)
    assert type(noise).__name__ == "NormalActionNoise" and np.asarray(noise()).shape == (3,)
    ou = _fixture("td3", "MountainCarContinuous-v0").algo_kwargs["action_noise"]
    assert ou["kind"] == "ornstein-uhlenbeck"
    assert type(build_action_noise(ou, 1)).__name__ == "OrnsteinUhlenbeckActionNoise"


def test_extra_zoo_syntax_normalize_string_wrappers_train_freq() -> None:
    hb = _fixture("sac", "HumanoidBulletEnv-v0", name="sac_extra")
    assert hb.normalize is True and hb.normalize_kwargs == {"norm_obs": True, "norm_reward": False}
    assert hb.algo_kwargs["ent_coef"] == "auto" and hb.n_timesteps == 20_000_000
    donkey = _fixture("sac", "donkey-generated-track-v0", name="sac_extra")
    assert donkey.algo_kwargs["train_freq"] == (1, "episode")
    assert donkey.env_wrapper == [
        ("gymnasium.wrappers.TimeLimit", {"max_episode_steps": 500}),
        ("lit_sb3.zoo.wrappers.HistoryWrapper", {"horizon": 5}),
    ]
    bullet = _fixture("td3", "HalfCheetahBulletEnv-v0", name="td3_bullet")
    assert bullet.env_wrapper == [("lit_sb3.zoo.wrappers.TimeFeatureWrapper", {})]
    assert bullet.algo_kwargs["gradient_steps"] == -1 and bullet.algo_kwargs["train_freq"] == (1, "episode")


def test_builtin_zoo_configs_are_valid_and_match_references() -> None:
    from tests.zoo_files import REFUSED, resolve_published_file

    published = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    for algo in registry.ALGOS:
        path = REPO / "zoo_configs" / f"{algo}.yml"
        zoo_file = published / "rl_zoo3" / "hyperparams" / f"{algo}.yml"
        if zoo_file.exists():  # the file rl_zoo3 2.9.2 publishes, byte for byte
            assert path.read_bytes() == zoo_file.read_bytes(), algo
        if algo in REFUSED:  # entries naming another package's wrapper: a one-line error when run
            assert resolve_published_file(algo, path, _algo_class(algo)), algo
        else:
            assert validate_zoo_file(algo, path, algo_class=_algo_class(algo)), algo
    sac = _resolve("sac", "Humanoid-v5")
    assert sac.n_timesteps == 2_000_000 and sac.algo_kwargs["learning_starts"] == 10000
    dqn = _resolve("dqn", "CartPole-v1")
    assert dqn.algo_kwargs["target_update_interval"] == 10
    assert dqn.provenance["train_freq"] == "zoo_configs/dqn.yml:CartPole-v1"
    assert _resolve("ppo", "CartPole-v1").provenance["policy"] == "zoo_configs/ppo.yml:CartPole-v1"


def test_no_entry_falls_back_to_the_default_entry_and_sb3_defaults(tmp_path: Path) -> None:
    cfg = _resolve("ppo", "FrozenLake-v1")  # the zoo's `default` entry: n_timesteps 1e6, MlpPolicy
    assert cfg.source_entry is None and cfg.n_timesteps == 1_000_000 and cfg.algo_kwargs == {}
    assert cfg.policy == "MlpPolicy" and cfg.provenance["n_timesteps"] == "zoo_configs/ppo.yml:default"
    assert any("SB3 defaults" in n for n in cfg.notes)
    from lit_sb3.zoo.jobs import plan_grid

    jobs, _ = plan_grid(["ppo"], ["FrozenLake-v1"], [0], default_budgets={"FrozenLake-v1": 4096})
    assert jobs[0].n_timesteps == 4096  # a suite's budget beats the `default` entry's n_timesteps
    empty = resolve("ppo", "LunarLander-v3", algo_class=_algo_class("ppo"), config_dir=tmp_path)
    assert empty.provenance["policy"] == "SB3 default" and empty.n_timesteps is None


# ------------------------------------------------------------------------------------------ overrides
def test_config_file_and_hyperparams_override_with_provenance(tmp_path: Path) -> None:
    extra = tmp_path / "mine.yml"
    extra.write_text("default:\n  n_envs: 2\nCartPole-v1:\n  n_steps: 64\n  gamma: 0.95\n")
    cfg = _resolve(
        "ppo", "CartPole-v1", config_files=[extra],
        overrides={"gamma": "0.9", "learning_rate": "lin_3e-4", "ent_coef": "1e-3",
                   "policy_kwargs": "dict(net_arch=[64], activation_fn=th.nn.Tanh)"},
    )  # fmt: skip
    assert cfg.n_envs == 2 and cfg.algo_kwargs["n_steps"] == 64 and cfg.algo_kwargs["gamma"] == 0.9
    assert cfg.algo_kwargs["learning_rate"] == LinearSchedule(3e-4) and cfg.algo_kwargs["ent_coef"] == 1e-3
    assert cfg.algo_kwargs["policy_kwargs"] == {"net_arch": [64], "activation_fn": nn.Tanh}
    assert cfg.algo_kwargs["batch_size"] == 256  # untouched zoo value
    p = cfg.provenance
    assert p["n_envs"].startswith("--config ") and p["n_envs"].endswith(":default")
    assert p["n_steps"].startswith("--config ") and p["n_steps"].endswith(":CartPole-v1")
    assert p["gamma"] == "--hyperparams" and p["batch_size"] == "zoo_configs/ppo.yml:CartPole-v1"


def test_override_value_forms() -> None:
    overrides = {"train_freq": "[4, episode]", "ent_coef": "auto_0.1", "buffer_size": "1e5",
                 "noise_type": "normal", "noise_std": "0.2"}  # fmt: skip
    cfg = _resolve("sac", "Pendulum-v1", overrides=overrides)
    kw = cfg.algo_kwargs
    assert kw["train_freq"] == (4, "episode") and kw["ent_coef"] == "auto_0.1"
    assert kw["buffer_size"] == 100000 and isinstance(kw["buffer_size"], int)
    assert kw["action_noise"]["sigma"] == 0.2 and cfg.provenance["action_noise"] == "--hyperparams"


# ------------------------------------------------------------------------------------------ hashing
def test_config_hash_stable_and_sensitive() -> None:
    a, b = _resolve("ppo", "CartPole-v1"), _resolve("ppo", "CartPole-v1")
    assert a.config_hash() == b.config_hash() and len(a.config_hash()) == 64
    c = _resolve("ppo", "CartPole-v1", overrides={"gamma": "0.99"})
    d = _resolve("ppo", "CartPole-v1", overrides={"learning_rate": "lin_0.002"})
    assert len({a.config_hash(), c.config_hash(), d.config_hash()}) == 3
    data = _resolve("ppo", "HalfCheetah-v5").to_jsonable()
    assert data["algo_kwargs"]["policy_kwargs"]["activation_fn"] == "torch.nn.modules.activation.ReLU"
    lr = a.to_jsonable()["algo_kwargs"]["learning_rate"]
    assert lr == {"type": "LinearSchedule", "start": 0.001, "end": 0.0, "end_fraction": 1.0}
    import json

    json.dumps(data)  # JSON-ready
    # provenance does not change the hash: same values from another source
    e = _resolve("ppo", "CartPole-v1", overrides={"gamma": "0.98"})
    assert e.config_hash() == a.config_hash()


# ------------------------------------------------------------------------------------------ parser
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dict(pi=[64,64], vf=[64,64])", {"pi": [64, 64], "vf": [64, 64]}),
        ("[dict(pi=[256], vf=[256])]", [{"pi": [256], "vf": [256]}]),
        ("nn.Tanh", nn.Tanh),
        ("th.nn.ReLU", nn.ReLU),
        ("dict(net_arch=dict(pi=[256, 256], qf=[400, 300]))", {"net_arch": {"pi": [256, 256], "qf": [400, 300]}}),
        ("dict(net_arch=[256, 256], activation_fn=nn.ReLU, ortho_init=False, log_std_init=-2)",
         {"net_arch": [256, 256], "activation_fn": nn.ReLU, "ortho_init": False, "log_std_init": -2}),
        ("dict(optimizer_class=th.optim.AdamW, optimizer_kwargs=dict(eps=1e-5))",
         {"optimizer_class": torch.optim.AdamW, "optimizer_kwargs": {"eps": 1e-5}}),
        ("{'norm_obs': True, 'norm_reward': False}", {"norm_obs": True, "norm_reward": False}),
        ("(1, 'episode')", (1, "episode")),
    ],
)  # fmt: skip
def test_parser_accepts(text: str, expected: object) -> None:
    assert parse_python_literal(text, file="f.yml", env="E", key="k") == expected


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('x')", "().__class__", "open('f')", "lambda: 1", "nn.Module.__subclasses__()",
     "os.system", "dict(**x)", "[x for x in y]", "1 + 2", "dict(a=nn.ReLU())", "th.nn.functional.relu"],
)  # fmt: skip
def test_parser_rejects_code(text: str) -> None:
    with pytest.raises(BenchError) as info:
        parse_python_literal(text, file="zoo_configs/ppo.yml", env="CartPole-v1", key="policy_kwargs", line=7)
    msg = str(info.value)
    assert msg.startswith("zoo_configs/ppo.yml:7: CartPole-v1: policy_kwargs: ") and "allowed:" in msg


def test_rmsprop_tf_like_is_the_libraries_own() -> None:
    from lit_sb3.core.rmsprop_tf_like import RMSpropTFLike

    value = parse_python_literal("dict(optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(eps=1e-5))")
    assert value == {"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}}


def test_schedules() -> None:
    assert parse_schedule("lin_7.3e-4") == LinearSchedule(7.3e-4)
    assert parse_schedule("lin_0.2") == LinearSchedule(0.2)
    assert parse_schedule("1e-3") == 1e-3 and parse_schedule(3) == 3.0
    for bad in ("lin_abc", "exp_0.1", "lin_"):
        with pytest.raises(BenchError, match="bad schedule"):
            parse_schedule(bad, file="x.yml", env="E", key="learning_rate")


# ------------------------------------------------------------------------------------------ errors
def test_unknown_key_names_file_line_entry_and_suggests(tmp_path: Path) -> None:
    f = tmp_path / "sac.yml"
    f.write_text("Pendulum-v1:\n  n_timesteps: 1000\n  learning_rte: 0.001\n")
    with pytest.raises(BenchError) as info:
        resolve("sac", "Pendulum-v1", config_files=[f], algo_class=_algo_class("sac"), builtin=False)
    msg = str(info.value)
    expected = f"{f}:3: Pendulum-v1: unknown hyperparameter 'learning_rte' for sac (did you mean 'learning_rate'"
    assert msg.startswith(expected)
    assert "allowed: " in msg and "n_timesteps" in msg


def test_unknown_override_key() -> None:
    expected = r"--hyperparams: unknown hyperparameter 'gama' for ppo \(did you mean 'gamma'\?\)"
    with pytest.raises(BenchError, match=expected):
        _resolve("ppo", "CartPole-v1", overrides={"gama": "0.9"})


def test_bad_yaml_reports_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yml"
    f.write_text("CartPole-v1:\n  n_steps: 32\n  gamma: [0.9\n  n_epochs: 3\n")
    with pytest.raises(BenchError, match=rf"^{f}:\d+: invalid YAML"):
        load_zoo_file(f)
    dup = tmp_path / "dup.yml"
    dup.write_text("CartPole-v1:\n  n_steps: 32\n  n_steps: 64\n")
    with pytest.raises(BenchError, match=rf"^{dup}:3: invalid YAML: .*duplicate key 'n_steps'"):
        load_zoo_file(dup)


def test_bad_values_named(tmp_path: Path) -> None:
    f = tmp_path / "ppo.yml"
    f.write_text("CartPole-v1:\n  learning_rate: lin_fast\n")
    with pytest.raises(BenchError, match=rf"{f}:2: CartPole-v1: learning_rate: bad schedule 'lin_fast'"):
        resolve("ppo", "CartPole-v1", config_files=[f], algo_class=_algo_class("ppo"), builtin=False)
    f.write_text("CartPole-v1:\n  policy_kwargs: \"dict(activation_fn=__import__('os'))\"\n")
    with pytest.raises(BenchError, match=rf"{f}:2: CartPole-v1: policy_kwargs: function calls"):
        resolve("ppo", "CartPole-v1", config_files=[f], algo_class=_algo_class("ppo"), builtin=False)
    f.write_text("Pendulum-v1:\n  env_wrapper: rl_zoo3.wrappers.ActionSmoothingWrapper\n")
    with pytest.raises(BenchError, match="not implemented in lit_sb3"):
        resolve("ppo", "Pendulum-v1", config_files=[f], algo_class=_algo_class("ppo"), builtin=False)
    f.write_text("CartPole-v1:\n  noise_type: normal\n  noise_std: 0.1\n")
    with pytest.raises(BenchError, match="ppo takes no action noise"):
        resolve("ppo", "CartPole-v1", config_files=[f], algo_class=_algo_class("ppo"), builtin=False)


# ------------------------------------------------------------------------------------------ registry
def test_registry_pairs_and_env_ids() -> None:
    assert registry.check_pair("sac", "Pendulum-v1") is None and registry.check_pair("ppo", "CartPole-v1") is None
    assert registry.check_pair("dqn", "Pendulum-v1") == (
        "dqn needs a Discrete action space; Pendulum-v1 has Box(-2.0, 2.0, (1,), float32)"
    )
    assert registry.check_pair("td3", "CartPole-v1") == "td3 needs a Box action space; CartPole-v1 has Discrete(2)"
    with pytest.raises(BenchError, match=r"unknown env id 'CartPol-v1' \(did you mean 'CartPole-v1'"):
        registry.check_pair("ppo", "CartPol-v1")
    with pytest.raises(BenchError, match=r"unknown algorithm 'sca' \(did you mean 'sac'\?\); known: ppo, a2c"):
        registry.get_algo_class("sca")
    import stable_baselines3

    names = registry.algo_arg_names("sac", stable_baselines3.SAC)
    assert "policy" in names and "learning_rate" in names and "env" not in names and "self" not in names


def test_registry_real_classes() -> None:
    names = registry.algo_arg_names("ppo")
    assert {"policy", "learning_rate", "n_steps", "clip_range"} <= names and "env" not in names
    cfg = resolve("ppo", "CartPole-v1")
    assert cfg.algo_kwargs["n_steps"] == 32


# ------------------------------------------------------------------------------------------ suites
def test_suites_and_expansion() -> None:
    suites = load_suites()
    mujoco = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5", "Swimmer-v5"]
    classic = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"]
    assert list(suites["mujoco"].envs) == mujoco and list(suites["classic"].envs) == classic
    assert suites["smoke"].n_timesteps["CartPole-v1"] > 0
    assert expand_envs("smoke,CartPole-v1, Acrobot-v1,smoke") == ["CartPole-v1", "Pendulum-v1", "Acrobot-v1"]
    assert expand_envs("mujoco,CartPole-v1")[-1] == "CartPole-v1"
    assert default_budgets("smoke") == suites["smoke"].n_timesteps
    with pytest.raises(BenchError, match=r"unknown suite or env id 'mujco' \(did you mean 'mujoco'"):
        expand_envs("mujco")
    with pytest.raises(BenchError, match=r"unknown suite or env id 'CartPol-v1' \(did you mean 'CartPole-v1'"):
        expand_envs("CartPol-v1")
    assert expand_algos("sac, TD3,sac") == ["sac", "td3"] and expand_algos("all") == list(registry.ALGOS)
    with pytest.raises(BenchError, match=r"did you mean 'td3'"):
        expand_algos("sac,td4")


# ------------------------------------------------------------------------------------------ wrappers
def test_time_feature_wrapper_and_make_env_wrapper() -> None:
    env = TimeFeatureWrapper(gym.make("Pendulum-v1"))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,) and obs[-1] == 1.0 and env.observation_space.shape == (4,)
    obs, *_ = env.step(env.action_space.sample())
    assert obs[-1] == pytest.approx(1 - 1 / 200)  # max_episode_steps of Pendulum-v1
    wrap = make_env_wrapper([("gymnasium.wrappers.TimeLimit", {"max_episode_steps": 3}),
                             ("sb3_contrib.common.wrappers.TimeFeatureWrapper", {"test_mode": True})])  # fmt: skip
    env = wrap(gym.make("Pendulum-v1"))
    env.reset(seed=0)
    for _ in range(3):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
    assert truncated and obs[-1] == 1.0
    with pytest.raises(BenchError, match="not a whitelisted env wrapper"):
        make_env_wrapper("os.system")


# ------------------------------------------------------------------------------------------ commands
def test_bench_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--all"]) == 0
    out = capsys.readouterr().out
    for text in ("mujoco", "classic", "smoke", "HalfCheetah-v5", "MountainCarContinuous-v0", "dqn", "ddpg"):
        assert text in out
    words = " ".join(out.split())  # long lines wrap at 80 columns
    assert (
        "dqn x Pendulum-v1: dqn needs a Discrete action space; Pendulum-v1 has Box(-2.0, 2.0, (1,), float32)" in words
    )
    assert max(len(line) for line in out.splitlines()) <= 80  # the pair table is split to fit, not cut
    rows = [line for line in out.splitlines() if "Hopper-v5" in line and "│" in line]  # one per table of algorithms
    with_hopper_v4 = [a for a in registry.ALGOS if "Hopper-v4" in load_zoo_file(REPO / "zoo_configs" / f"{a}.yml")]
    assert sum(row.count("v4") for row in rows) == len(with_hopper_v4) >= 5 and any("n/a" in row for row in rows)


def test_bench_list_fits_one_screen_of_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """By default: the suites, the extras and one row per algorithm of counts per suite, within 80 columns."""
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80 and len(lines) <= 40, out
    assert "n/a" not in out and "bench list --all" in out
    header = next(line for line in lines if "algo" in line and "mujoco" in line)
    assert all(suite in header for suite in ("classic", "atari", "box2d"))
    sac = next(line.split() for line in lines if line.split()[:1] == ["sac"])
    assert sac[1 + header.split().index("mujoco") - 1] == "6/6"  # 6 MuJoCo envs, each with a tuned sac entry
    dqn = next(line.split() for line in lines if line.split()[:1] == ["dqn"])
    assert dqn[1 + header.split().index("mujoco") - 1] == "-"  # DQN acts in no MuJoCo env (Box actions)
    assert main(["list", "--envs", "mujco"]) == 2
    assert "did you mean 'mujoco'" in capsys.readouterr().err


def test_bench_show_config(capsys: pytest.CaptureFixture[str], algo_registry: None, tmp_path: Path) -> None:
    assert main(["show-config", "--algo", "ppo", "--env", "CartPole-v1", "--hyperparams", "gamma=0.9"]) == 0
    out = capsys.readouterr().out
    assert "n_steps" in out and "zoo_configs/ppo.yml:CartPole-v1" in out and "--hyperparams" in out
    assert "lin_0.001" in out and "LinearSchedule" not in out  # schedules as the zoo writes them
    assert main(["show-config", "--algo", "sac", "--env", "Hopper-v5", "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["algo_kwargs"] == {"learning_starts": 10000} and data["source_entry"] == "Hopper-v4"
    assert len(data["config_hash"]) == 64
    assert main(["show-config", "--algo", "dqn", "--env", "Pendulum-v1"]) == 2
    assert "dqn needs a Discrete action space" in capsys.readouterr().err
    assert main(["show-config", "--algo", "ppo", "--env", "CartPole-v1", "--hyperparams", "learning_rte=1"]) == 2
    assert "did you mean 'learning_rate'" in capsys.readouterr().err
    assert main(["show-config", "--algo", "ppo", "--env", "CartPole-v1", "--hyperparams", "gamma"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
