"""Safe loading: a crafted-file corpus, generated here, that every loader refuses with one line and no code run.

Covers model archives (``data.json``, ``model.pth``, ``optimizers.pth``), replay ``.npz`` files and VecNormalize
JSON files: pickle payloads in every member, whitelist escapes, zip-slip names, zip bombs, huge declared sizes,
malformed and newer files. A payload, if it ever ran, would create a marker folder: each test asserts it does not.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import resource
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from lit_sb3 import DQN, PPO
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.utils.serialization import BadFileError, decode_value, encode_value
from lit_sb3.vec_env import DummyVecEnv, VecNormalize


class Payload:
    """Unpickling this runs ``os.makedirs(marker)``: the proof that code from a file was executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.makedirs, (self.marker,)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    path = tmp_path / "PAYLOAD_RAN"
    yield path
    assert not path.exists(), "code from a crafted file was executed"


def _one_line_error(excinfo: pytest.ExceptionInfo, name: str) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    assert name in message, message
    return message


@pytest.fixture(scope="module")
def ppo_archive(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    model = PPO("MlpPolicy", n_steps=32, batch_size=32, n_epochs=1, policy_kwargs={"net_arch": [8]}, seed=0)
    model.learn(total_timesteps=32, env="CartPole-v1")
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def dqn_archive() -> bytes:
    model = DQN("MlpPolicy", buffer_size=100, learning_starts=1000, policy_kwargs={"net_arch": [8]}, seed=0)
    model.learn(total_timesteps=8, env="CartPole-v1")
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def _members(archive: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _write(path: Path, members: dict[str, bytes], compresslevel: int | None = None) -> Path:
    mode = zipfile.ZIP_DEFLATED if compresslevel is not None else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=mode, compresslevel=compresslevel) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _edit_data(archive: bytes, path: Path, edit: Any) -> Path:
    members = _members(archive)
    data = json.loads(members["data.json"])
    edit(data)
    members["data.json"] = json.dumps(data).encode()
    return _write(path, members)


def test_round_trip_and_old_archive_still_loads(ppo_archive: bytes, tmp_path: Path) -> None:
    """An archive in the format written before the serialisation module (same JSON forms) loads unchanged."""
    path = _write(tmp_path / "model.zip", _members(ppo_archive))
    model = PPO.load(path)
    data = json.loads(_members(ppo_archive)["data.json"])
    assert data["format"] == 1 and data["params"]["policy"] == "MlpPolicy"
    assert model.policy_kwargs == {"net_arch": [8]} and model.n_steps == 32
    obs = np.zeros((1, 4), dtype=np.float32)
    assert model.predict(obs, deterministic=True)[0].shape == (1,)
    # the codec's forms are the ones job ids and archives always had
    assert encode_value((th.nn.Tanh, 1.5, [1, 2])) == {
        "__tuple__": [{"__class__": "torch.nn.modules.activation.Tanh"}, 1.5, [1, 2]]
    }
    assert math.isnan(decode_value(encode_value(float("nan"))))


# ``params`` of data.json as lit_sb3 wrote them before the serialisation module (copied from archives saved by
# main at e623cf9): they must decode, load, and encode back to exactly the same JSON
_OLD_PARAMS = {
    "PPO": json.loads(
        '{"policy": "MlpPolicy", "learning_rate": {"__schedule__": {"type": "LinearSchedule", "start": 0.001, '
        '"end": 0.0001, "end_fraction": 1.0}}, "n_steps": 32, "batch_size": 32, "n_epochs": 1, "gamma": 0.99, '
        '"gae_lambda": 0.95, "clip_range": 0.2, "clip_range_vf": null, "normalize_advantage": true, "ent_coef": 0.0, '
        '"vf_coef": 0.5, "max_grad_norm": 0.5, "use_sde": false, "sde_sample_freq": -1, "rollout_buffer_class": null, '
        '"rollout_buffer_kwargs": {}, "target_kl": null, "stats_window_size": 100, "tensorboard_log": null, '
        '"policy_kwargs": {"net_arch": {"pi": [8], "vf": [8]}, "activation_fn": {"__class__": '
        '"torch.nn.modules.activation.ReLU"}}, "verbose": 0, "seed": 0}'
    ),
    "DQN": json.loads(
        '{"policy": "MlpPolicy", "buffer_size": 100, "train_freq": {"__tuple__": [4, "step"]}, '
        '"replay_buffer_class": {"__class__": "lit_sb3.buffers.replay.ReplayBuffer"}, "policy_kwargs": '
        '{"net_arch": [8]}, "seed": 0}'
    ),
}


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_archives_written_before_the_codec_merge_load(
    ppo_archive: bytes, dqn_archive: bytes, tmp_path: Path, algo: str
) -> None:
    cls, archive = (PPO, ppo_archive) if algo == "PPO" else (DQN, dqn_archive)
    old = _OLD_PARAMS[algo]
    path = _edit_data(archive, tmp_path / "old.zip", lambda d: d.__setitem__("params", dict(old)))
    model = cls.load(path)
    if algo == "PPO":
        assert model.policy_kwargs["activation_fn"] is th.nn.ReLU and model.learning_rate(0.0) == pytest.approx(1e-4)
    else:
        assert model.train_freq.frequency == 4 and model.replay_buffer_class is ReplayBuffer
    assert {k: encode_value(decode_value(v)) for k, v in old.items()} == old


def test_print_system_info_prints_stored_and_current(ppo_archive: bytes, tmp_path: Path, capsys) -> None:
    PPO.load(_write(tmp_path / "m.zip", _members(ppo_archive)), print_system_info=True)
    out = capsys.readouterr().out
    assert "== SAVED MODEL SYSTEM INFO ==" in out and "== CURRENT SYSTEM INFO ==" in out
    assert out.count("- PyTorch:") == 2


@pytest.mark.parametrize("member", ["data.json", "model.pth", "optimizers.pth"])
def test_pickle_payload_in_each_archive_member(ppo_archive: bytes, tmp_path: Path, marker: Path, member: str) -> None:
    members = _members(ppo_archive)
    if member == "data.json":
        members[member] = pickle.dumps(Payload(marker))
    else:
        buffer = io.BytesIO()
        th.save({"weights": Payload(marker)}, buffer)
        members[member] = buffer.getvalue()
    path = _write(tmp_path / "payload.zip", members)
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(path)
    message = _one_line_error(excinfo, str(path))
    assert member in message


@pytest.mark.parametrize("name", ["os.system", "builtins.eval", "subprocess.Popen", "posix.system"])
@pytest.mark.parametrize("where", ["activation_fn", "policy", "optimizer_class"])
def test_whitelist_escape(ppo_archive: bytes, tmp_path: Path, marker: Path, name: str, where: str) -> None:
    def edit(data: dict) -> None:
        if where == "policy":
            data["params"]["policy"] = {"__class__": name}
        else:
            data["params"]["policy_kwargs"][where] = {"__class__": name}

    path = _edit_data(ppo_archive, tmp_path / "escape.zip", edit)
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(path)
    assert "not in the whitelist" in _one_line_error(excinfo, str(path))


@pytest.mark.parametrize("name", ["../evil.txt", "/etc/evil", "a/../../evil", "C:\\evil", "..\\evil"])
def test_zip_slip_member_names(ppo_archive: bytes, tmp_path: Path, name: str) -> None:
    path = _write(tmp_path / "slip.zip", {**_members(ppo_archive), name: b"x"})
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(path)
    assert "unsafe member name" in _one_line_error(excinfo, str(path))
    assert not (tmp_path.parent / "evil.txt").exists()


def _zero_member(path: Path, members: dict[str, bytes], name: str, size: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for key, data in members.items():
            if key != name:
                zf.writestr(key, data)
        with zf.open(name, "w", force_zip64=True) as f:
            chunk = bytes(2**24)
            for _ in range(size // len(chunk)):
                f.write(chunk)
    return path


def test_zip_bomb_is_refused_from_the_directory_and_unused_members_are_never_read(
    ppo_archive: bytes, tmp_path: Path
) -> None:
    members = _members(ppo_archive)
    bomb = _zero_member(tmp_path / "bomb.zip", members, "model.pth", 2**30)
    assert bomb.stat().st_size < 8 * 2**20  # a few-MB file declaring a 1 GiB member
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(bomb)
    message = _one_line_error(excinfo, str(bomb))
    assert "model.pth" in message and "1,073,741,824" in message
    # an unused 256 MiB member is never read: the model loads
    extra = _zero_member(tmp_path / "extra.zip", members, "extra.pth", 2**28)
    PPO.load(extra)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 256 * 1024, f"peak memory grew by {grown_kib} KiB"


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda d: d["params"].__setitem__("policy_kwargs", {"net_arch": [200000, 200000]}), "net_arch layer width"),
        (lambda d: d["params"].__setitem__("policy_kwargs", {"net_arch": [60000] * 200}), "weights"),
        (lambda d: d["action_space"].__setitem__("n", 10**11), "Discrete n"),
        (lambda d: d.__setitem__("observation_space", {"type": "MultiBinary", "n": [10**5, 10**5]}), "elements"),
        (lambda d: d["params"].__setitem__("n_steps", 10**12), "buffer_size"),
        (lambda d: d.pop("params"), "no 'params'"),
        (lambda d: d["params"].__setitem__("device", "cpu"), "unknown key 'device'"),
        (lambda d: d.__setitem__("format", 999), "newer lit_sb3"),
        (lambda d: d.__setitem__("algo", "SAC"), "use SAC.load()"),
        (lambda d: d.__setitem__("observation_space", {"type": "Graph"}), "unknown space type"),
        (lambda d: d["observation_space"].__setitem__("shape", [10**6, 10**6]), "Box elements"),
        (lambda d: d["observation_space"].__setitem__("shape", [-4, -4]), "positive integers"),
    ],
    ids=["net_arch", "net_weights", "discrete_n", "box_size", "n_steps", "no_params", "device", "format", "algo",
         "space_type", "box_shape_size", "box_shape_negative"],
)  # fmt: skip
def test_bad_data_json_ppo(ppo_archive: bytes, tmp_path: Path, edit: Any, expected: str) -> None:
    path = _edit_data(ppo_archive, tmp_path / "bad.zip", edit)
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(path)
    assert expected in _one_line_error(excinfo, str(path))


def test_uniform_box_bounds_are_stored_as_two_numbers_and_a_shape() -> None:
    """An Atari observation space (0..255 over 4x84x84) is a few bytes in data.json, not two 28k-element arrays."""
    from lit_sb3.utils.serialization import space_from_dict, space_to_dict

    for space in (
        spaces.Box(0, 255, (4, 84, 84), np.uint8),
        spaces.Box(-np.inf, np.inf, (5,), np.float64),
        spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32)),
    ):
        text = json.dumps(space_to_dict(space))
        assert len(text) < 300
        assert space_from_dict(json.loads(text)) == space


def test_huge_replay_buffer_size_in_archive(dqn_archive: bytes, tmp_path: Path) -> None:
    path = _edit_data(dqn_archive, tmp_path / "huge.zip", lambda d: d["params"].__setitem__("buffer_size", 10**12))
    with pytest.raises(BadFileError) as excinfo:
        DQN.load(path)
    assert "buffer_size=1,000,000,000,000" in _one_line_error(excinfo, str(path))
    DQN.load(io.BytesIO(dqn_archive))  # the untouched archive loads


@pytest.mark.parametrize("content", [b"not a zip", b"PK\x03\x04broken"])
def test_not_a_zip(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.zip"
    path.write_bytes(content)
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(path)
    _one_line_error(excinfo, str(path))


def test_model_tensors_of_the_wrong_shape(ppo_archive: bytes, tmp_path: Path) -> None:
    members = _members(ppo_archive)
    state = th.load(io.BytesIO(members["model.pth"]), weights_only=True)
    key = next(k for k in state if k.endswith("weight"))
    state[key] = th.zeros(3, 3)
    buffer = io.BytesIO()
    th.save(state, buffer)
    members["model.pth"] = buffer.getvalue()
    path = _write(tmp_path / "shape.zip", members)
    with pytest.raises(BadFileError) as excinfo:
        PPO.load(path)
    assert key in _one_line_error(excinfo, str(path))


# ------------------------------------------------------------------ replay buffer .npz
@pytest.fixture
def replay_npz(tmp_path: Path) -> tuple[Path, spaces.Box, spaces.Box]:
    obs_space = spaces.Box(-1, 1, (3,), np.float32)
    act_space = spaces.Box(-1, 1, (2,), np.float32)
    buffer = ReplayBuffer(64, obs_space, act_space, device="cpu")
    for _ in range(10):
        buffer.add(
            obs_space.sample()[None], obs_space.sample()[None], act_space.sample()[None], np.ones(1), np.zeros(1), [{}]
        )
    path = tmp_path / "replay.npz"
    buffer.save(path)
    return path, obs_space, act_space


def _npz_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=True)
    return out.getvalue()


def _meta(members: dict[str, bytes]) -> dict[str, Any]:
    return json.loads(str(np.lib.format.read_array(io.BytesIO(members["__metadata__.npy"]))))


@pytest.mark.parametrize("member", ["__metadata__.npy", "observations.npy", "actions.npy"])
def test_replay_pickle_payload_in_each_member(replay_npz, tmp_path: Path, marker: Path, member: str) -> None:
    path, obs_space, act_space = replay_npz
    members = _npz_members(path)
    members[member] = _npy(np.array([Payload(marker)], dtype=object))
    bad = _write(tmp_path / "payload.npz", members)
    with pytest.raises(BadFileError) as excinfo:
        ReplayBuffer.load(bad, obs_space, act_space, device="cpu")
    _one_line_error(excinfo, str(bad))


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda m: m["init_kwargs"].__setitem__("buffer_size", 10**12), "buffer_size=1,000,000,000,000"),
        (lambda m: m.__setitem__("rows", 10**9), "rows must be"),
        (lambda m: m.__setitem__("version", 999), "newer lit_sb3"),
        (lambda m: m["init_kwargs"].__setitem__("evil", 1), "init_kwargs"),
        (lambda m: m.__setitem__("class", "DictReplayBuffer"), "not a ReplayBuffer"),
    ],
    ids=["buffer_size", "rows", "version", "init_kwargs", "class"],
)
def test_replay_bad_metadata(replay_npz, tmp_path: Path, edit: Any, expected: str) -> None:
    path, obs_space, act_space = replay_npz
    members = _npz_members(path)
    meta = _meta(members)
    edit(meta)
    members["__metadata__.npy"] = _npy(np.array(json.dumps(meta)))
    bad = _write(tmp_path / "meta.npz", members)
    with pytest.raises(BadFileError) as excinfo:
        ReplayBuffer.load(bad, obs_space, act_space, device="cpu")
    assert expected in _one_line_error(excinfo, str(bad))


def test_replay_declared_array_shape_and_bomb(replay_npz, tmp_path: Path) -> None:
    path, obs_space, act_space = replay_npz
    members = _npz_members(path)
    # a header declaring 10**12 rows: refused from the header, nothing allocated
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 1, 3)})
    bad = _write(tmp_path / "shape.npz", {**members, "observations.npy": header.getvalue()})
    with pytest.raises(BadFileError) as excinfo:
        ReplayBuffer.load(bad, obs_space, act_space, device="cpu")
    assert "observations" in _one_line_error(excinfo, str(bad))
    bomb = _zero_member(tmp_path / "bomb.npz", members, "observations.npy", 2**28)
    with pytest.raises(BadFileError) as excinfo:
        ReplayBuffer.load(bomb, obs_space, act_space, device="cpu")
    assert "declares" in _one_line_error(excinfo, str(bomb))
    ReplayBuffer.load(path, obs_space, act_space, device="cpu")  # the original loads


# ------------------------------------------------------------------ VecNormalize JSON
@pytest.fixture
def vec_normalize_file(tmp_path: Path) -> Path:
    import gymnasium as gym

    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    venv.reset()
    path = tmp_path / "vecnormalize.json"
    venv.save(path)
    return path


def _venv() -> DummyVecEnv:
    import gymnasium as gym

    return DummyVecEnv([lambda: gym.make("CartPole-v1")])


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda s: s.pop("gamma"), "missing the key 'gamma'"),
        (lambda s: s.__setitem__("clip_obs", float("nan")), "clip_obs must be a finite number"),
        (lambda s: s.__setitem__("gamma", 5), "gamma must be"),
        (lambda s: s.__setitem__("epsilon", -1), "epsilon must be"),
        (lambda s: s["obs_rms"].__setitem__("var", [float("inf")] * 4), "obs_rms.var must be finite"),
        (lambda s: s["obs_rms"].__setitem__("mean", [0.0] * 7), "shape"),
        (lambda s: s.__setitem__("version", 999), "newer lit_sb3"),
        (lambda s: s.__setitem__("training", "yes"), "training must be true or false"),
    ],
    ids=["missing", "clip_nan", "gamma", "epsilon", "var_inf", "shape", "version", "training"],
)
def test_vec_normalize_bad_fields(vec_normalize_file: Path, edit: Any, expected: str) -> None:
    state = json.loads(vec_normalize_file.read_text())
    edit(state)
    vec_normalize_file.write_text(json.dumps(state))
    with pytest.raises(BadFileError) as excinfo:
        VecNormalize.load(vec_normalize_file, _venv())
    assert expected in _one_line_error(excinfo, str(vec_normalize_file))


def test_vec_normalize_pickle_payload(vec_normalize_file: Path, marker: Path) -> None:
    vec_normalize_file.write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(BadFileError) as excinfo:
        VecNormalize.load(vec_normalize_file, _venv())
    assert "pickle" in _one_line_error(excinfo, str(vec_normalize_file))


def test_vec_normalize_round_trip(vec_normalize_file: Path) -> None:
    loaded = VecNormalize.load(vec_normalize_file, _venv())
    assert loaded.clip_obs == 10.0 and loaded.gamma == 0.99


# ------------------------------------------------------------------ job specs: one form, one whitelist
def test_job_spec_carries_one_form_and_decodes_only_whitelisted_classes() -> None:
    from lit_sb3.zoo.config import resolve
    from lit_sb3.zoo.errors import BenchError
    from lit_sb3.zoo.jobs import JobSpec, plan_grid

    overrides = {"policy_kwargs": "dict(net_arch=[32], activation_fn=nn.ReLU)", "learning_rate": "lin_0.001"}
    jobs, _ = plan_grid(["ppo"], ["CartPole-v1"], [0], n_timesteps=1000, overrides=overrides)
    spec = jobs[0]
    again = JobSpec.from_json(spec.to_json())
    assert again == spec and again.job_id == spec.job_id and "params" not in json.loads(spec.to_json())
    expected = resolve("ppo", "CartPole-v1", overrides=overrides).to_jsonable()
    expected["n_timesteps"] = 1024  # 1,000 rounded up to whole PPO rollouts (zoo: n_envs 8 x n_steps 32)
    assert spec.params == expected
    assert spec.resolved_config().algo_kwargs["policy_kwargs"]["activation_fn"] is th.nn.ReLU
    data = json.loads(spec.to_json())
    data["config"]["algo_kwargs"]["policy_kwargs"]["activation_fn"] = {"__class__": "os.system"}
    with pytest.raises(BenchError, match="'os.system' is not in the whitelist"):
        JobSpec.from_json(json.dumps(data)).resolved_config()
