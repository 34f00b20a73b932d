"""Tests of the VecEnv stack, Monitor and env creation helpers (real gymnasium envs)."""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from lit_sb3.core.monitor import Monitor, RelayTruncation, load_results
from lit_sb3.vec_env import (
    DummyVecEnv,
    EnvIdNotFoundError,
    RunningMeanStd,
    SubprocVecEnv,
    VecCheckNan,
    VecEnv,
    VecEnvWrapper,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    VecTransposeImage,
    check_env_id,
    is_vecenv_wrapped,
    is_wrapped,
    make_vec_env,
    sync_envs_normalization,
    unwrap_vec_normalize,
    unwrap_vec_wrapper,
    wrap_env,
)

torch.set_num_threads(1)


class ImageEnv(gym.Env):
    """uint8 HxWxC images; each episode lasts ``ep_len`` steps; reward = action."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self, ep_len: int = 5, shape: tuple[int, int, int] = (8, 6, 3), render_mode: str | None = None
    ) -> None:
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.action_space = spaces.Discrete(2)
        self.ep_len = ep_len
        self.t = 0
        self.render_mode = render_mode

    def render(self) -> np.ndarray:
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.full(self.observation_space.shape, self.t, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"reset": True}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), float(action), self.t >= self.ep_len, False, {"step": self.t}


class DictEnv(gym.Env):
    """Dict observations {"vec": (3,) float32 = t, "img": uint8 (6, 6, 1) = t}; episodes last 4 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "vec": spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32),
                "img": spaces.Box(0, 255, shape=(6, 6, 1), dtype=np.uint8),
            }
        )
        self.action_space = spaces.Box(-1, 1, shape=(2,), dtype=np.float32)
        self.t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "vec": np.full(3, self.t, dtype=np.float32),
            "img": np.full((6, 6, 1), self.t, dtype=np.uint8),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 1.0, self.t >= 4, False, {}


class NanEnv(gym.Env):
    """Observation turns NaN at the second step."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        obs = np.full(2, np.nan if self.t >= 2 else 0.0, dtype=np.float32)
        return obs, 0.0, False, False, {}


def cartpole_fns(n: int) -> list:
    return [lambda: gym.make("CartPole-v1") for _ in range(n)]


# ----------------------------------------------------------------------------- DummyVecEnv
def test_dummy_auto_reset_terminal_observation_and_truncation() -> None:
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=7) for _ in range(2)])
    venv.seed(3)
    obs = venv.reset()
    assert obs.shape == (2, 4) and obs.dtype == np.float32
    assert len(venv.reset_infos) == 2
    for step in range(7):
        obs, rewards, dones, infos = venv.step(np.array([0, 1]))
        assert rewards.dtype == np.float32 and dones.dtype == np.bool_
        assert infos[0] is not infos[1]
        if step < 6:
            assert not dones.any()
            assert all(info["TimeLimit.truncated"] is False for info in infos)
            assert "terminal_observation" not in infos[0]
    # after 7 steps both were truncated by the TimeLimit (the pole cannot fall within 7 steps from a seeded start)
    for i in range(2):
        if dones[i]:
            term = infos[i]["terminal_observation"]
            assert term.shape == (4,)
            assert not np.allclose(term, obs[i])  # obs is already the reset observation
    assert dones.all()
    assert all(info["TimeLimit.truncated"] for info in infos)
    venv.close()


def test_dummy_terminated_not_truncated_and_fresh_arrays() -> None:
    venv = DummyVecEnv([ImageEnv, ImageEnv])
    obs = venv.reset()
    assert venv.reset_infos == [{"reset": True}, {"reset": True}]
    kept = [obs]
    for _ in range(5):
        obs, _, dones, infos = venv.step(np.array([1, 0]))
        kept.append(obs)
    assert dones.all()
    assert infos[0]["TimeLimit.truncated"] is False
    np.testing.assert_array_equal(infos[0]["terminal_observation"], np.full((8, 6, 3), 5, dtype=np.uint8))
    np.testing.assert_array_equal(obs, 0)  # auto-reset
    # earlier returned observations were not overwritten by later steps
    assert [int(k[0, 0, 0, 0]) for k in kept] == [0, 1, 2, 3, 4, 0]


def test_seed_reproducibility_and_options() -> None:
    a = DummyVecEnv(cartpole_fns(3))
    b = DummyVecEnv(cartpole_fns(3))
    assert a.seed(42) == [42, 43, 44]
    b.seed(42)
    oa, ob = a.reset(), b.reset()
    np.testing.assert_array_equal(oa, ob)
    assert not np.allclose(oa[0], oa[1])  # each env gets its own seed
    # seeds are used once: the next reset differs
    assert not np.allclose(a.reset(), oa)
    single = gym.make("CartPole-v1")
    np.testing.assert_array_equal(single.reset(seed=43)[0], oa[1])
    a.set_options({"low": -0.01, "high": 0.01})
    assert np.all(np.abs(a.reset()) <= 0.01)
    with pytest.raises(ValueError, match="2 option dicts for 3"):
        a.set_options([{}, {}])


def test_get_set_attr_env_method_env_is_wrapped() -> None:
    venv = make_vec_env("CartPole-v1", n_envs=3, seed=0)
    assert venv.get_attr("gravity") == [9.8, 9.8, 9.8]
    venv.set_attr("test_value", 5, indices=[0, 2])
    assert venv.get_attr("test_value", indices=[0, 2]) == [5, 5]
    assert venv.get_attr("test_value", indices=0) == [5]
    assert venv.env_method("get_total_steps") == [0, 0, 0]
    venv.reset()
    venv.step(np.zeros(3, dtype=int))
    assert venv.env_method("get_total_steps", indices=1) == [1]
    assert venv.env_is_wrapped(Monitor) == [True, True, True]
    assert venv.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics) == [False] * 3
    assert venv.has_attr("gravity") and not venv.has_attr("no_such_attr")
    with pytest.raises(IndexError, match="out of range"):
        venv.get_attr("gravity", indices=[5])
    assert venv.unwrapped is venv
    assert venv.render_mode == "rgb_array"  # make_vec_env's default
    images = DummyVecEnv([lambda: ImageEnv(render_mode="rgb_array") for _ in range(3)])
    images.reset()
    assert images.render().shape == (16, 12, 3)  # 3 images tiled 2x2
    assert len(images.get_images()) == 3


def test_same_instance_rejected() -> None:
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="same instance"):
        DummyVecEnv([lambda: env, lambda: env])


def test_subproc_matches_dummy() -> None:
    actions = np.random.default_rng(0).integers(0, 2, size=(60, 2))
    sub = SubprocVecEnv(cartpole_fns(2))
    try:
        dummy = DummyVecEnv(cartpole_fns(2))
        dummy.seed(7)
        sub.seed(7)
        np.testing.assert_allclose(sub.reset(), dummy.reset())
        for act in actions:
            od, rd, dd, idd = dummy.step(act)
            os_, rs, ds, is_ = sub.step(act)
            np.testing.assert_allclose(os_, od)
            np.testing.assert_array_equal(rs, rd)
            np.testing.assert_array_equal(ds, dd)
            for a, b in zip(idd, is_):
                assert a.keys() == b.keys()
                if "terminal_observation" in a:
                    np.testing.assert_allclose(a["terminal_observation"], b["terminal_observation"])
        assert sub.get_attr("gravity") == [9.8, 9.8]
        sub.set_attr("x_threshold", 1.0, indices=1)
        assert sub.get_attr("x_threshold") == [2.4, 1.0]
        assert sub.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
        assert sub.env_method("get_wrapper_attr", "gravity", indices=[0]) == [9.8]
        with pytest.raises(AttributeError):
            sub.get_attr("no_such_attr")
    finally:
        sub.close()
    assert sub.closed


# ----------------------------------------------------------------------------- VecNormalize
def test_running_mean_std() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(300, 2))
    rms = RunningMeanStd(shape=(2,))
    for chunk in np.split(data, 6):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-4)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-4)
    other = RunningMeanStd(shape=(2,))
    other.update(data)
    copy = rms.copy()
    copy.combine(other)
    assert copy.count == pytest.approx(600 + 2e-4)
    assert rms.count == pytest.approx(300 + 1e-4)  # the copy is independent
    with pytest.raises(ValueError, match="shape mismatch"):
        RunningMeanStd(shape=(3,)).load_state_dict(rms.state_dict())


def _run(venv: VecEnv, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    venv.reset()
    for _ in range(n):
        venv.step(rng.uniform(-2, 2, size=(venv.num_envs, 1)).astype(np.float32))


def test_vec_normalize_normalizes_and_original_values() -> None:
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1") for _ in range(2)]), gamma=0.9)
    venv.seed(0)
    obs = venv.reset()
    assert obs.dtype == np.float32
    for _ in range(200):
        obs, rewards, dones, infos = venv.step(np.ones((2, 1), dtype=np.float32))
        raw_obs, raw_rew = venv.get_original_obs(), venv.get_original_reward()
        np.testing.assert_allclose(venv.normalize_obs(raw_obs), obs, atol=1e-6)
        np.testing.assert_allclose(venv.unnormalize_obs(obs), raw_obs, atol=1e-4)
        np.testing.assert_allclose(venv.normalize_reward(raw_rew), rewards, rtol=1e-5)
        np.testing.assert_allclose(venv.unnormalize_reward(rewards), raw_rew, rtol=1e-4)
        assert np.all(np.abs(obs) <= 10.0)
    assert dones.all()  # Pendulum truncates at 200 steps
    assert venv.returns.tolist() == [0.0, 0.0]  # returns reset on done
    assert infos[0]["terminal_observation"].dtype == np.float32
    assert venv.obs_rms.count > 400
    assert abs(venv.ret_rms.var) > 0
    assert unwrap_vec_normalize(venv) is venv


def test_vec_normalize_training_flag_freezes_stats() -> None:
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]))
    _run(venv, 20)
    venv.training = False
    mean, count, ret_var = venv.obs_rms.mean.copy(), venv.obs_rms.count, venv.ret_rms.var
    _run(venv, 20, seed=1)
    np.testing.assert_array_equal(venv.obs_rms.mean, mean)
    assert venv.obs_rms.count == count and venv.ret_rms.var == ret_var


def test_vec_normalize_save_load_json_and_state_dict(tmp_path) -> None:
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]), clip_obs=5.0, gamma=0.95)
    _run(venv, 50)
    path = tmp_path / "vecnormalize.json"
    venv.save(path)
    data = json.loads(path.read_text())  # plain JSON
    assert data["clip_obs"] == 5.0 and data["gamma"] == 0.95 and len(data["obs_rms"]["mean"]) == 3

    fresh = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    loaded = VecNormalize.load(path, fresh)
    assert loaded.clip_obs == 5.0 and loaded.gamma == 0.95 and loaded.training
    np.testing.assert_array_equal(loaded.obs_rms.mean, venv.obs_rms.mean)
    np.testing.assert_array_equal(loaded.obs_rms.var, venv.obs_rms.var)
    assert loaded.obs_rms.count == venv.obs_rms.count and loaded.ret_rms.var == venv.ret_rms.var
    probe = np.random.default_rng(0).normal(size=(4, 3))
    np.testing.assert_array_equal(loaded.normalize_obs(probe), venv.normalize_obs(probe))
    np.testing.assert_array_equal(loaded.normalize_reward(np.ones(3)), venv.normalize_reward(np.ones(3)))

    # state_dict round trip, and it survives torch.save/torch.load(weights_only=True)
    buf = tmp_path / "ckpt.pt"
    torch.save({"vec_normalize": venv.state_dict()}, buf)
    state = torch.load(buf, weights_only=True)["vec_normalize"]
    other = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]))
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.normalize_obs(probe), venv.normalize_obs(probe))
    assert other.clip_obs == 5.0

    with pytest.raises(ValueError, match="shape"):
        VecNormalize.load(path, DummyVecEnv(cartpole_fns(1)))
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(b"\x80\x04not json")
    with pytest.raises(ValueError, match="not a JSON VecNormalize file"):
        VecNormalize.load(bad, fresh)


def test_vec_normalize_dict_obs_and_sync(tmp_path) -> None:
    venv = VecNormalize(DummyVecEnv([DictEnv, DictEnv]), norm_obs_keys=["vec"])
    obs = venv.reset()
    for _ in range(6):
        obs, *_ = venv.step(np.zeros((2, 2), dtype=np.float32))
    assert obs["img"].dtype == np.uint8 and obs["vec"].dtype == np.float32
    assert set(venv.obs_rms) == {"vec"}
    path = tmp_path / "vn.json"
    venv.save(path)
    loaded = VecNormalize.load(path, DummyVecEnv([DictEnv, DictEnv]))
    np.testing.assert_array_equal(loaded.obs_rms["vec"].mean, venv.obs_rms["vec"].mean)
    with pytest.raises(ValueError, match="only supports `gym.spaces.Box`"):
        VecNormalize(DummyVecEnv([lambda: gym.make("FrozenLake-v1")]))

    eval_env = VecNormalize(DummyVecEnv([DictEnv]), norm_obs_keys=["vec"], training=False)
    sync_envs_normalization(venv, eval_env)
    np.testing.assert_array_equal(eval_env.obs_rms["vec"].mean, venv.obs_rms["vec"].mean)
    assert eval_env.obs_rms["vec"] is not venv.obs_rms["vec"]
    with pytest.raises(ValueError, match="VecNormalize wrapper"):
        sync_envs_normalization(venv, DummyVecEnv([DictEnv]))


# ----------------------------------------------------------------------------- Monitor / VecMonitor
def test_monitor_episode_info_and_csv(tmp_path) -> None:
    env = Monitor(gym.make("CartPole-v1"), filename=str(tmp_path / "run"))
    env = gym.wrappers.TimeLimit(env, max_episode_steps=500)
    env.reset(seed=0)
    done, steps, total = False, 0, 0.0
    while not done:
        _, rew, term, trunc, info = env.step(0)
        done, steps, total = term or trunc, steps + 1, total + rew
    assert info["episode"]["r"] == total and info["episode"]["l"] == steps and info["episode"]["t"] >= 0
    mon = env.env
    assert isinstance(mon, Monitor)
    assert mon.get_episode_rewards() == [total] and mon.get_episode_lengths() == [steps]
    assert len(mon.get_episode_times()) == 1 and mon.get_total_steps() == steps
    with pytest.raises(RuntimeError, match="needs reset"):
        env.step(0)
    env.close()
    lines = (tmp_path / "run.monitor.csv").read_text().splitlines()
    header = json.loads(lines[0][1:])
    assert header["env_id"] == "CartPole-v1" and "t_start" in header
    assert lines[1] == "r,l,t"
    assert lines[2].startswith(f"{total},{steps},")
    df = load_results(str(tmp_path))
    assert list(df["l"]) == [steps]
    # override_existing=False appends
    env2 = Monitor(gym.make("CartPole-v1"), filename=str(tmp_path / "run"), override_existing=False)
    env2.reset(seed=1)
    while True:
        *_, term, trunc, _ = env2.step(1)
        if term or trunc:
            break
    env2.close()
    assert len((tmp_path / "run.monitor.csv").read_text().splitlines()) == 4
    no_file = Monitor(ImageEnv(ep_len=2), info_keywords=("step",))
    assert no_file.results_writer is None
    no_file.reset()
    no_file.step(1)
    assert no_file.step(1)[-1]["episode"] == {"r": 2.0, "l": 2, "t": pytest.approx(0.0, abs=5.0), "step": 2}


def test_vec_monitor(tmp_path) -> None:
    venv = VecMonitor(DummyVecEnv([ImageEnv, lambda: ImageEnv(ep_len=3)]), filename=str(tmp_path / "vm"))
    venv.reset()
    episodes = []
    for _ in range(6):
        _, _, dones, infos = venv.step(np.array([1, 1]))
        episodes += [info["episode"] for info in infos if "episode" in info]
    assert [(float(e["r"]), int(e["l"])) for e in episodes] == [(3.0, 3), (5.0, 5), (3.0, 3)]
    assert venv.episode_count == 3
    venv.close()
    assert len((tmp_path / "vm.monitor.csv").read_text().splitlines()) == 2 + 3
    with pytest.warns(UserWarning, match="already wrapped with a `Monitor`"):
        VecMonitor(make_vec_env("CartPole-v1"))


# ----------------------------------------------------------------------------- frame stack / transpose / nan
def test_vec_frame_stack_box_last_and_first() -> None:
    venv = VecFrameStack(DummyVecEnv([ImageEnv, lambda: ImageEnv(ep_len=3)]), n_stack=4)
    assert venv.observation_space.shape == (8, 6, 12)
    obs = venv.reset()
    assert obs.shape == (2, 8, 6, 12)
    assert obs[0, 0, 0].tolist() == [0] * 12
    first = obs
    for _ in range(3):
        obs, _, dones, infos = venv.step(np.array([0, 0]))
    assert first[0, 0, 0].tolist() == [0] * 12  # not modified in place
    assert obs[0, 0, 0, ::3].tolist() == [0, 1, 2, 3]
    assert dones.tolist() == [False, True]
    assert infos[1]["terminal_observation"].shape == (8, 6, 12)
    assert infos[1]["terminal_observation"][0, 0, ::3].tolist() == [0, 1, 2, 3]
    assert obs[1, 0, 0].tolist() == [0] * 12  # reset on done: zeros + first frame (0)

    vec = VecFrameStack(DummyVecEnv(cartpole_fns(1)), n_stack=3)
    assert vec.observation_space.shape == (12,)
    chw = VecFrameStack(VecTransposeImage(DummyVecEnv([ImageEnv])), n_stack=2)
    assert chw.observation_space.shape == (6, 8, 6)  # channel-first image detected
    assert chw.reset().shape == (1, 6, 8, 6)
    with pytest.raises(ValueError, match="channels_order"):
        VecFrameStack(DummyVecEnv([ImageEnv]), n_stack=2, channels_order="middle")


def test_vec_frame_stack_dict() -> None:
    venv = VecFrameStack(DummyVecEnv([DictEnv]), n_stack=2)
    assert venv.observation_space["vec"].shape == (6,)
    assert venv.observation_space["img"].shape == (6, 6, 2)
    obs = venv.reset()
    for _ in range(4):
        obs, _, dones, infos = venv.step(np.zeros((1, 2), dtype=np.float32))
    assert dones[0]
    term = infos[0]["terminal_observation"]
    assert term["vec"].tolist() == [3, 3, 3, 4, 4, 4]
    assert term["img"][0, 0].tolist() == [3, 4]
    assert obs["vec"].tolist() == [[0] * 6]


def test_vec_transpose_image() -> None:
    venv = VecTransposeImage(DummyVecEnv([ImageEnv]))
    assert venv.observation_space.shape == (3, 8, 6)
    assert venv.reset().shape == (1, 3, 8, 6)
    for _ in range(5):
        obs, _, _, infos = venv.step(np.array([0]))
    assert infos[0]["terminal_observation"].shape == (3, 8, 6)
    assert VecTransposeImage.transpose_image(np.zeros((8, 6, 3))).shape == (3, 8, 6)
    assert VecTransposeImage(DummyVecEnv([ImageEnv]), skip=True).reset().shape == (1, 8, 6, 3)
    dict_venv = VecTransposeImage(DummyVecEnv([DictEnv]))
    assert dict_venv.image_space_keys == ["img"]
    assert dict_venv.reset()["img"].shape == (1, 1, 6, 6)
    with pytest.raises(ValueError, match="image observation space"):
        VecTransposeImage(DummyVecEnv(cartpole_fns(1)))


def test_vec_check_nan() -> None:
    venv = VecCheckNan(DummyVecEnv([NanEnv]), raise_exception=True)
    venv.reset()
    venv.step(np.array([0]))
    with pytest.raises(ValueError, match="found nan in observations"):
        venv.step(np.array([0]))
    warn_env = VecCheckNan(DummyVecEnv([NanEnv]))
    warn_env.reset()
    with pytest.warns(UserWarning, match="nan"):
        warn_env.step(np.array([np.nan]))


def test_wrapper_getattr_and_unwrap() -> None:
    base = DummyVecEnv([ImageEnv])
    venv = VecFrameStack(VecTransposeImage(VecMonitor(base)), n_stack=2)
    assert venv.episode_count == 0  # found in VecMonitor
    assert venv.unwrapped is base
    assert isinstance(unwrap_vec_wrapper(venv, VecMonitor), VecMonitor)
    assert is_vecenv_wrapped(venv, VecTransposeImage) and not is_vecenv_wrapped(venv, VecNormalize)
    assert unwrap_vec_normalize(venv) is None
    assert isinstance(venv, VecEnvWrapper) and venv.num_envs == 1
    with pytest.raises(AttributeError):
        _ = venv.no_such_attribute


# ----------------------------------------------------------------------------- creation helpers
def test_check_env_id_suggestion() -> None:
    check_env_id("CartPole-v1")
    with pytest.raises(
        ValueError, match=r"Environment id 'CartPol-v1' is not registered in gymnasium \(did you mean 'CartPole-v1'"
    ):
        check_env_id("CartPol-v1")
    with pytest.raises(gym.error.NameNotFound):
        make_vec_env("CartPol-v1")
    with pytest.raises(EnvIdNotFoundError, match="pprint_registry"):
        check_env_id("Zzzzqqq-v9")


def test_make_vec_env_variants(tmp_path) -> None:
    venv = make_vec_env("CartPole-v1", n_envs=2, seed=5, monitor_dir=str(tmp_path))
    assert isinstance(venv, DummyVecEnv) and venv.num_envs == 2
    ref = DummyVecEnv(cartpole_fns(2))
    ref.seed(5)
    np.testing.assert_array_equal(venv.reset(), ref.reset())
    assert venv.envs[1].action_space.sample() == (lambda s: (s.seed(6), s.sample())[1])(spaces.Discrete(2))
    assert sorted(os.listdir(tmp_path)) == ["0.monitor.csv", "1.monitor.csv"]

    by_class = make_vec_env(
        ImageEnv,
        n_envs=2,
        env_kwargs={"ep_len": 2},
        wrapper_class=gym.wrappers.TimeLimit,
        wrapper_kwargs={"max_episode_steps": 10},
    )
    assert by_class.get_attr("ep_len") == [2, 2]
    assert by_class.env_is_wrapped(Monitor) == [True, True]
    # the wrapper sits outside the Monitor (as SB3's), under the relay that lets its truncations end the Monitor's
    # episodes
    relay = by_class.envs[0]
    assert isinstance(relay, RelayTruncation) and relay.monitor is relay.env.env
    assert isinstance(relay.env, gym.wrappers.TimeLimit) and isinstance(relay.env.env, Monitor)

    by_fn = make_vec_env(lambda: gym.make("Pendulum-v1"), n_envs=1, start_index=3)
    assert by_fn.observation_space.shape == (3,)
    with pytest.raises(ValueError, match="n_envs must be a positive integer"):
        make_vec_env("CartPole-v1", n_envs=0)
    with pytest.raises(TypeError, match="wrap_env"):
        make_vec_env(gym.make("CartPole-v1"))  # type: ignore[arg-type]


def test_wrap_env_variants() -> None:
    from_id = wrap_env("CartPole-v1", n_envs=2, seed=1)
    assert from_id.num_envs == 2 and from_id.env_is_wrapped(Monitor) == [True, True]
    no_monitor = wrap_env("CartPole-v1", monitor_wrapper=False)
    assert no_monitor.env_is_wrapped(Monitor) == [False]

    inst = gym.make("CartPole-v1")
    from_inst = wrap_env(inst, seed=3)
    assert isinstance(from_inst, DummyVecEnv) and from_inst.env_is_wrapped(Monitor) == [True]
    np.testing.assert_array_equal(from_inst.reset()[0], gym.make("CartPole-v1").reset(seed=3)[0])
    with pytest.raises(ValueError, match="cannot be copied"):
        wrap_env(gym.make("CartPole-v1"), n_envs=2)

    from_image_fn = wrap_env(ImageEnv, n_envs=2)
    assert isinstance(from_image_fn, VecTransposeImage) and from_image_fn.observation_space.shape == (3, 8, 6)

    raw = DummyVecEnv([ImageEnv])
    from_vec = wrap_env(raw)
    assert isinstance(from_vec, VecTransposeImage) and is_vecenv_wrapped(from_vec, VecMonitor)
    monitored = make_vec_env("CartPole-v1")
    assert wrap_env(monitored) is monitored  # already has Monitor: returned as is
    with pytest.raises(ValueError, match="does not match"):
        wrap_env(monitored, n_envs=3)
    with pytest.raises(TypeError, match="expected an env id"):
        wrap_env(42)  # type: ignore[arg-type]
    assert is_wrapped(from_inst.envs[0], Monitor)
