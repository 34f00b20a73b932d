"""SB3 code runs unchanged (issue 24, items 1-4), written as an SB3 user writes it.

The env in the constructor (positionally or ``env=``), the networks built at once, ``learn(log_interval=...)``,
``self.logger`` in callbacks reaching TensorBoard at env-step time, ``tensorboard_log`` folders, and SB3's
``LogEveryNTimesteps`` / ``VecExtractDictObs``.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import lit_sb3
import lit_sb3.envs  # noqa: F401 - registers InvalidActionDiscrete-v0
from lit_sb3 import DDPG, DQN, PPO, SAC, TD3, HerReplayBuffer
from lit_sb3.algorithms.registry import ALGORITHMS, algorithm_class
from lit_sb3.callbacks import BaseCallback, LogEveryNTimesteps
from lit_sb3.vec_env import DummyVecEnv, VecEnv, VecExtractDictObs, VecTransposeImage
from tests.envs import BitFlippingEnv

# per registered algorithm: (env id, small hyperparameters) so that a few hundred steps include updates
SMALL_OFF = dict(learning_starts=50, batch_size=32, buffer_size=1_000, policy_kwargs=dict(net_arch=[16]))
SMALL_ON = dict(n_steps=64, batch_size=32, policy_kwargs=dict(net_arch=[16]))
SETUPS: dict[str, tuple[str, dict]] = {
    "ppo": ("CartPole-v1", dict(SMALL_ON, n_epochs=1)),
    "a2c": ("CartPole-v1", dict(n_steps=8, policy_kwargs=dict(net_arch=[16]))),
    "sac": ("Pendulum-v1", SMALL_OFF),
    "tqc": ("Pendulum-v1", dict(SMALL_OFF, policy_kwargs=dict(net_arch=[16], n_quantiles=5))),
    "crossq": ("Pendulum-v1", dict(SMALL_OFF, policy_kwargs=dict(net_arch=[16]))),
    "td3": ("Pendulum-v1", SMALL_OFF),
    "ddpg": ("Pendulum-v1", SMALL_OFF),
    "dqn": ("CartPole-v1", SMALL_OFF),
    "qrdqn": ("CartPole-v1", dict(SMALL_OFF, policy_kwargs=dict(net_arch=[16], n_quantiles=5))),
    "ppo_mask": ("InvalidActionDiscrete-v0", dict(SMALL_ON, n_epochs=1)),
    "ppo_lstm": ("CartPole-v1", dict(n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=dict(lstm_hidden_size=8))),
    "trpo": ("CartPole-v1", dict(SMALL_ON, n_critic_updates=1)),
    "ars": ("Pendulum-v1", dict(n_delta=2, n_eval_episodes=1)),
}


def _flat_params(model) -> th.Tensor:
    return th.nn.utils.parameters_to_vector([p.detach().clone() for p in model.policy.parameters()])


def _scalars(log_dir: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of every event of ``tag`` in the TensorBoard files of ``log_dir``, file by file in the order
    they were written (their names end in a process-wide counter, so ``.10`` sorts before ``.9`` by name, which is
    how a folder's files are read)."""
    out: list[tuple[int, float]] = []
    for path in sorted(log_dir.glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime_ns):
        accumulator = EventAccumulator(str(path), size_guidance={"scalars": 0})
        accumulator.Reload()
        if tag in accumulator.Tags()["scalars"]:
            out += [(event.step, event.value) for event in accumulator.Scalars(tag)]
    return out


# ---------------------------------------------------------------- item 1: the env in the constructor


def test_ppo_from_the_first_line_of_every_sb3_tutorial(in_tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1")
    assert model.policy_ready and isinstance(model.env, VecEnv) and model.n_envs == 1  # built at once, as SB3
    model.learn(1000, log_interval=1)
    # one rollout of SB3's n_steps=2048 (the budget rounds up to whole rollouts, as in SB3)
    assert model.num_timesteps == 2048 and model.last_logged["time/iterations"] == 1
    assert model.last_logged["rollout/ep_len_mean"] > 0
    assert os.listdir(in_tmp_path) == []  # tensorboard_log=None: no log folder


def test_every_registered_algorithm_signature_follows_sb3():
    """The leading positional arguments are SB3's/sb3-contrib's (policy, env, then learning_rate, or ARS's
    n_delta), and every SB3 argument exists in SB3's order (so that positional calls mean the same)."""
    import sb3_contrib
    import stable_baselines3 as sb3

    reference = {
        "ppo": sb3.PPO, "a2c": sb3.A2C, "sac": sb3.SAC, "td3": sb3.TD3, "ddpg": sb3.DDPG, "dqn": sb3.DQN,
        "tqc": sb3_contrib.TQC, "crossq": sb3_contrib.CrossQ, "qrdqn": sb3_contrib.QRDQN,
        "ppo_mask": sb3_contrib.MaskablePPO, "ppo_lstm": sb3_contrib.RecurrentPPO, "trpo": sb3_contrib.TRPO,
        "ars": sb3_contrib.ARS,
    }  # fmt: skip
    from lit_sb3.zoo.config.checks import constructor_hints

    assert set(reference) == set(ALGORITHMS)
    for name, sb3_class in reference.items():
        ours = [p for p in inspect.signature(algorithm_class(name).__init__).parameters if p != "self"]
        theirs = [p for p in inspect.signature(sb3_class.__init__).parameters if p != "self"]
        assert ours[:3] == theirs[:3], name
        assert [p for p in ours if p in theirs] == theirs, name
        # the env's annotation resolves: bench still type-checks every hyperparameter (all or none resolve)
        assert "env" in constructor_hints(algorithm_class(name))[1], name
        # learn()'s default log interval is SB3's (4 episodes off-policy, 1 iteration on-policy, A2C 100)
        sb3_default = inspect.signature(sb3_class.learn).parameters["log_interval"].default
        assert algorithm_class(name)("MlpPolicy")._default_log_every_n_steps == sb3_default, name


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_registered_algorithm_learns_on_the_env_given_positionally(name, in_tmp_path):
    env_id, kwargs = SETUPS[name]
    cls = algorithm_class(name)
    model = cls("MlpPolicy", env_id, seed=0, device="cpu", **kwargs)
    assert model.policy_ready and model.observation_space == gym.make(env_id).observation_space
    before = _flat_params(model)
    model.learn(300)
    assert model.num_timesteps >= 300
    assert not th.equal(before, _flat_params(model)), f"{name}: no update in 300 env steps"
    assert os.listdir(in_tmp_path) == []


@pytest.mark.parametrize("env_form", ["id", "gym.Env", "callable", "VecEnv"])
def test_the_env_keyword_takes_every_form(env_form):
    env = {
        "id": "CartPole-v1",
        "gym.Env": gym.make("CartPole-v1"),
        "callable": lambda: gym.make("CartPole-v1"),
        "VecEnv": DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2),
    }[env_form]
    model = DQN("MlpPolicy", env=env, **SMALL_OFF) if env_form != "VecEnv" else PPO("MlpPolicy", env=env, **SMALL_ON)
    assert model.policy_ready and model.n_envs == (2 if env_form == "VecEnv" else 1)
    model.learn(128)
    assert model.num_timesteps == 128


def test_third_positional_argument_is_learning_rate_as_in_sb3():
    model = PPO("MlpPolicy", "CartPole-v1", 1e-3, 32, 32, _init_setup_model=False)
    assert (model.learning_rate, model.n_steps, model.batch_size) == (1e-3, 32, 32) and not model.policy_ready
    model._setup_model()  # SB3's manual set-up after _init_setup_model=False
    assert model.policy_ready
    # the seeds' form (no env) keeps working, and the networks wait for the spaces
    assert not PPO("MlpPolicy", learning_rate=1e-3).policy_ready


def test_a_number_in_the_env_position_is_refused_with_a_hint():
    with pytest.raises(TypeError, match=r"second argument is the env, as in SB3.*learning_rate=\.\.\."):
        SAC("MlpPolicy", 3e-4)


@pytest.mark.parametrize("name", ["PPO", "SAC", "DQN"])
def test_networks_built_in_the_constructor_match_sb3s_for_the_same_seed(name):
    """Built at once, from the same seed, the policy acts exactly as SB3's freshly built one."""
    import stable_baselines3 as sb3

    env_id = "Pendulum-v1" if name == "SAC" else "CartPole-v1"
    ours = getattr(lit_sb3, name)("MlpPolicy", env_id, seed=3, device="cpu")
    theirs = getattr(sb3, name)("MlpPolicy", env_id, seed=3, device="cpu")
    obs = np.stack([ours.observation_space.sample() for _ in range(16)])
    np.testing.assert_array_equal(ours.predict(obs, deterministic=True)[0], theirs.predict(obs, deterministic=True)[0])


def test_channel_last_images_get_sb3s_vec_transpose():
    from stable_baselines3.common.envs import FakeImageEnv

    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    model = PPO("CnnPolicy", env, n_steps=16, batch_size=16, _init_setup_model=False)
    assert isinstance(model.env, VecTransposeImage) and model.observation_space.shape == (1, 36, 36)


@pytest.mark.parametrize("cls", [SAC, TD3, DDPG, DQN])
def test_her_through_the_constructor(cls):
    continuous = cls is not DQN
    env = BitFlippingEnv(n_bits=4, continuous=continuous, max_steps=4)
    model = cls(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
        learning_starts=20,
        batch_size=16,
        buffer_size=1_000,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
    )
    assert isinstance(model.replay_buffer, HerReplayBuffer)  # built with the env, as SB3 does
    before = _flat_params(model)
    model.learn(100)
    assert model.num_timesteps == 100 and model.replay_buffer.size() > 0
    assert not th.equal(before, _flat_params(model))


def test_saved_archives_hold_no_env(tmp_path):
    import json
    import zipfile

    model = PPO("MlpPolicy", "CartPole-v1", **SMALL_ON)
    model.save(tmp_path / "m.zip")
    with zipfile.ZipFile(tmp_path / "m.zip") as archive:
        names = [n for n in archive.namelist() if n.endswith(".json")]
        params = {k for n in names for k in json.loads(archive.read(n)).get("params", {})}
    assert params and "env" not in params and "_init_setup_model" not in params
    loaded = PPO.load(tmp_path / "m.zip", env="CartPole-v1")
    assert loaded.env is not None and loaded.n_steps == 64


# ---------------------------------------------------------------- item 2: learn(log_interval=...)


class _RecordStep(BaseCallback):
    """Records, through SB3's ``self.logger``, the env step and the running mean of the env steps."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float] = []

    def _on_step(self) -> bool:
        self.logger.record("custom/num_timesteps", self.num_timesteps)
        self.logger.record_mean("custom/mean_step", self.num_timesteps)
        return True

    def _on_rollout_end(self) -> None:
        self.seen.append(self.logger.name_to_value["custom/num_timesteps"])


def test_log_interval_counts_episodes_off_policy(tmp_path):
    model = DQN("MlpPolicy", "CartPole-v1", tensorboard_log=str(tmp_path), **SMALL_OFF)
    model.learn(600, log_interval=3)
    episodes = [int(v) for _, v in _scalars(tmp_path / "DQN_1", "time/episodes")]
    assert episodes and episodes == list(range(3, model._episode_num + 1, 3))


def test_log_interval_counts_iterations_on_policy(tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(tmp_path), **dict(SMALL_ON, n_epochs=1))
    model.learn(64 * 6, log_interval=2)
    assert [int(v) for _, v in _scalars(tmp_path / "PPO_1", "time/iterations")] == [2, 4, 6]


def test_log_interval_none_turns_the_automatic_dump_off(tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(tmp_path), **dict(SMALL_ON, n_epochs=1))
    model.learn(64 * 4, callback=LogEveryNTimesteps(n_steps=128), log_interval=None)
    run = tmp_path / "PPO_1"
    assert _scalars(run, "time/iterations") == [] and _scalars(run, "rollout/ep_rew_mean") == []
    # LogEveryNTimesteps dumps what was recorded (the train metrics) every 128 env steps; the last update's
    # values, recorded at 256 after that dump, are flushed when the fit ends (nothing recorded is lost)
    assert [step for step, _ in _scalars(run, "train/loss")] == [128, 256, 256]


def test_bad_log_intervals_are_refused_before_any_work():
    model = PPO("MlpPolicy", **SMALL_ON)
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="log_interval must be a positive integer"):
            model.learn(64, env="CartPole-v1", log_interval=bad)
    with pytest.raises(ValueError, match="not both"):
        model.learn(64, env="CartPole-v1", log_interval=1, log_every_n_steps=1)
    assert not model.policy_ready


# ---------------------------------------------------------------- item 3: SB3's logger in callbacks


def test_callback_values_reach_tensorboard_at_the_env_step_they_were_recorded(tmp_path):
    callback = _RecordStep()
    model = PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(tmp_path), **dict(SMALL_ON, n_epochs=1))
    model.learn(64 * 4, callback=callback, log_interval=1)
    run = tmp_path / "PPO_1"
    assert _scalars(run, "custom/num_timesteps") == [(64, 64.0), (128, 128.0), (192, 192.0), (256, 256.0)]
    # record_mean: the mean of the env steps of each rollout (1..64, 65..128, ...), reset by each dump
    assert _scalars(run, "custom/mean_step") == [(64 * k, 64 * (k - 1) + 32.5) for k in (1, 2, 3, 4)]
    assert callback.seen == [64.0, 128.0, 192.0, 256.0]  # name_to_value before the dump


def test_logger_dump_sends_at_the_given_step_and_clears(tmp_path):
    class DumpEvery50(BaseCallback):
        def _on_step(self) -> bool:
            self.logger.record("custom/x", float(self.n_calls))
            self.logger.record("custom/text", "not a scalar")  # kept readable, not sent
            if self.n_calls % 50 == 0:
                assert self.logger.name_to_value["custom/text"] == "not a scalar"
                self.logger.dump(step=self.num_timesteps)
                assert "custom/x" not in self.logger.name_to_value
                assert self.logger.name_to_value["custom/missing"] == 0.0  # SB3's defaultdict(float)
            return True

    model = SAC("MlpPolicy", "Pendulum-v1", tensorboard_log=str(tmp_path), **SMALL_OFF)
    model.learn(150, callback=DumpEvery50(), log_interval=None)
    assert _scalars(tmp_path / "SAC_1", "custom/x") == [(50, 50.0), (100, 100.0), (150, 150.0)]


def test_sb3_names_are_importable_where_sb3_has_them():
    from lit_sb3.callbacks import LogEveryNTimesteps as FromCallbacks
    from lit_sb3.vec_env import VecExtractDictObs as FromVecEnv

    assert FromCallbacks is LogEveryNTimesteps and FromVecEnv is VecExtractDictObs


def test_vec_extract_dict_obs_matches_sb3s():
    from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv
    from stable_baselines3.common.vec_env import VecExtractDictObs as SB3VecExtractDictObs

    ours = VecExtractDictObs(DummyVecEnv([lambda: BitFlippingEnv(n_bits=4, max_steps=3)]), "observation")
    theirs = SB3VecExtractDictObs(SB3DummyVecEnv([lambda: BitFlippingEnv(n_bits=4, max_steps=3)]), "observation")
    assert ours.observation_space == theirs.observation_space
    ours.seed(0), theirs.seed(0)
    np.testing.assert_array_equal(ours.reset(), theirs.reset())
    for step in range(6):
        action = np.array([step % 4])
        a, b = ours.step(action), theirs.step(action)
        for x, y in zip(a[:3], b[:3]):
            np.testing.assert_array_equal(x, y)
        if b[2][0]:
            np.testing.assert_array_equal(a[3][0]["terminal_observation"], b[3][0]["terminal_observation"])
    with pytest.raises(ValueError, match="did you mean 'observation'"):
        VecExtractDictObs(DummyVecEnv([lambda: BitFlippingEnv(n_bits=4)]), "observations")


# ---------------------------------------------------------------- item 4: tensorboard_log


def test_tensorboard_log_folders_follow_sb3s_numbering(tmp_path, in_tmp_path):
    logs = tmp_path / "tb"
    model = PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(logs), **dict(SMALL_ON, n_epochs=1))
    model.learn(64)
    model.learn(64)
    model.learn(64, reset_num_timesteps=False)  # continues in the latest folder, as SB3
    model.learn(64, tb_log_name="custom")
    assert sorted(p.name for p in logs.iterdir()) == ["PPO_1", "PPO_2", "custom_1"]
    assert len(list((logs / "PPO_2").glob("events.out.tfevents.*"))) == 2
    assert [step for step, _ in _scalars(logs / "PPO_2", "time/iterations")] == [64, 128]
    assert sorted(os.listdir(in_tmp_path)) == ["tb"]  # nothing else written
    with pytest.raises(ValueError, match="tb_log_name must be a plain folder name"):
        model.learn(64, tb_log_name="../escape")


def test_learn_without_tensorboard_log_keeps_lightnings_logger_only_with_default_root_dir(tmp_path):
    model = PPO("MlpPolicy", "CartPole-v1", **dict(SMALL_ON, n_epochs=1))
    model.learn(64, default_root_dir=tmp_path)
    assert [p.name for p in (tmp_path / "lightning_logs").iterdir()] == ["PPO_1"]


# ---------------------------------------------------------------- learn's SB3 positional forms


def test_learn_takes_a_callback_in_sb3s_second_position():
    calls = []

    class Count(BaseCallback):
        def _on_step(self) -> bool:
            calls.append(self.num_timesteps)
            return True

    PPO("MlpPolicy", "CartPole-v1", **dict(SMALL_ON, n_epochs=1)).learn(64, Count())
    assert calls == list(range(1, 65))
    with pytest.raises(TypeError, match="callback must be a BaseCallback"):
        PPO("MlpPolicy", "CartPole-v1", **SMALL_ON).learn(64, None, 10)
