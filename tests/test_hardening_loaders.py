"""Hardening, second pass (issue 27): every loader bounded, every checkpoint inert.

(1) every entry point that reads a checkpoint or a model, from a local path, an http URL served on loopback or
an fsspec URL, refuses a pickle payload without running it, and leaves nothing in torch's hub cache;
(2) a zip bomb under the compression-ratio limit is refused from the zip directory (peak RSS measured in a
subprocess with ``resource.getrusage``), and a legitimate archive loads within ~2x its size;
(3) ``load_replay_buffer`` checks the file as ``ReplayBuffer.load`` does; (4) the env state in a checkpoint
restores only what the capture side writes; (8) deep or huge JSON, an unwritable report folder and an
unreachable tracking database are one line, exit 2, in seconds.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest
import torch as th

from lit_sb3 import PPO, SAC, RLEnvDataModule, RLTrainer
from lit_sb3.utils.serialization import BadFileError
from lit_sb3.zoo.cli import main

ROOT = Path(__file__).resolve().parent.parent


class _Payload:
    """Unpickling this creates ``ran`` (what an attacker's checkpoint would do)."""

    ran = Path()

    def __reduce__(self):
        return (Path.touch, (self.ran,))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # no request lines on stderr
        pass


@contextlib.contextmanager
def _serve(folder: Path) -> Iterator[str]:
    """An http server on 127.0.0.1 serving ``folder``; yields its base URL."""
    handler = lambda *a: _QuietHandler(*a, directory=str(folder))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _tiny_ppo() -> tuple[PPO, RLTrainer]:
    model = PPO("MlpPolicy", n_steps=16, batch_size=16, n_epochs=1, policy_kwargs=dict(net_arch=[8]))
    trainer = RLTrainer(max_steps=16, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(model, datamodule=RLEnvDataModule(train_env="CartPole-v1"))
    return model, trainer


def _trained_ppo(net_arch: list[int]) -> PPO:
    """A PPO with networks and Adam state (one 16-step rollout and update)."""
    model = PPO("MlpPolicy", n_steps=16, batch_size=16, n_epochs=1, policy_kwargs=dict(net_arch=net_arch))
    return model.learn(16, env="CartPole-v1")


def _resume(ckpt_path: str) -> None:
    trainer = RLTrainer(max_steps=32, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    model = PPO("MlpPolicy", n_steps=16, batch_size=16, n_epochs=1, policy_kwargs=dict(net_arch=[8]))
    trainer.fit(model, datamodule=RLEnvDataModule(train_env="CartPole-v1"), ckpt_path=ckpt_path)


# ---------------------------------------------------------------- (1) every entry point through the safe loader
def test_pickle_payload_never_runs_through_any_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    torch_home = tmp_path / "torch_home"
    monkeypatch.setenv("TORCH_HOME", str(torch_home))
    marker = tmp_path / "payload-ran"
    _Payload.ran = marker
    model, trainer = _tiny_ppo()
    served = tmp_path / "served"
    served.mkdir()
    trainer.save_checkpoint(served / "good.ckpt")
    checkpoint = th.load(served / "good.ckpt", weights_only=True)
    checkpoint["evil"] = _Payload()
    th.save(checkpoint, served / "evil.ckpt")
    model.save(served / "good.zip")
    with zipfile.ZipFile(served / "good.zip") as good, zipfile.ZipFile(served / "evil.zip", "w") as evil:
        for info in good.infolist():
            data = good.read(info)
            if info.filename == "model.pth":
                state = th.load(served / "evil.ckpt", weights_only=False)["state_dict"]  # runs the payload here...
                marker.unlink()  # ...so start again from a clean slate
                buffer = __import__("io").BytesIO()
                th.save({**state, "evil": _Payload()}, buffer)
                data = buffer.getvalue()
            evil.writestr(info, data)
    memory = fsspec.filesystem("memory")
    memory.pipe("/evil.ckpt", (served / "evil.ckpt").read_bytes())
    memory.pipe("/evil.zip", (served / "evil.zip").read_bytes())
    try:
        with _serve(served) as base:
            for source in (f"{base}/evil.ckpt", "memory://evil.ckpt", str(served / "evil.ckpt")):
                with pytest.raises(BadFileError, match=re.escape(source) + ".*cannot be loaded safely"):
                    _resume(source)
                with pytest.raises(BadFileError, match=re.escape(source) + ".*cannot be loaded safely"):
                    PPO.load_from_checkpoint(source)
            with pytest.raises(ValueError, match="weights_only=False is refused"):
                PPO.load_from_checkpoint(f"{base}/evil.ckpt", weights_only=False)
            for source in (f"{base}/evil.zip", "memory://evil.zip", str(served / "evil.zip")):
                with pytest.raises(BadFileError, match=re.escape(source) + ".*cannot be loaded safely"):
                    PPO.load(source)
                capsys.readouterr()
                assert main(["enjoy", "--model", source, "--env", "CartPole-v1", "--episodes", "1"]) == 2
                err = capsys.readouterr().err.strip()
                assert len(err.splitlines()) == 1 and "cannot be loaded safely" in err and source in err, err
            # the legitimate files load through the same paths
            assert PPO.load(f"{base}/good.zip").num_timesteps == model.num_timesteps
            _resume(f"{base}/good.ckpt")
            assert main(["enjoy", "--model", f"{base}/good.zip", "--env", "CartPole-v1", "--episodes", "1"]) == 0
    finally:
        memory.rm("/evil.ckpt")
        memory.rm("/evil.zip")
    assert not marker.exists(), "a payload ran"
    hub = torch_home / "hub" / "checkpoints"
    assert not hub.exists() or not list(hub.iterdir()), list(hub.iterdir())
    th.load(served / "evil.ckpt", weights_only=False)  # the payload is real: the unsafe loader runs it
    assert marker.exists()


# ---------------------------------------------------------------- (2) zip bombs, peak RSS in a subprocess
_RSS_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import gymnasium
    from lit_sb3 import PPO
    from lit_sb3.utils.serialization import BadFileError
    gymnasium.make("CartPole-v1").reset(seed=0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        PPO.load(sys.argv[1])
        outcome = "loaded"
    except BadFileError as exc:
        outcome = str(exc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mb": (after - before) / 1024, "outcome": outcome}))
    """
)


def _peak(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(path)], env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _with_member(source: Path, target: Path, member: str, size: int) -> None:
    """``source`` with ``member`` replaced by ``size`` bytes that compress ~60x (under the ratio limit of 100)."""
    rng = np.random.default_rng(0)
    block = bytearray(2**20)
    block[: 2**20 // 80] = rng.bytes(2**20 // 80)  # 1/80 random: deflate gets ~60x, not the ~1000x of zeros
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != member:
                dst.writestr(info.filename, src.read(info))
        with dst.open(member, "w", force_zip64=True) as f:
            for _ in range(size // len(block)):
                f.write(block)


@pytest.mark.parametrize("member", ["optimizers.pth", "model.pth"])
def test_zip_bomb_under_the_ratio_limit_is_refused_unread(member: str, tmp_path: Path) -> None:
    _trained_ppo([64, 64]).save(tmp_path / "good.zip")
    bomb = tmp_path / "bomb.zip"
    _with_member(tmp_path / "good.zip", bomb, member, 320 * 2**20)
    info = zipfile.ZipFile(bomb).getinfo(member)
    assert 10 < info.file_size / info.compress_size < 100 and bomb.stat().st_size < 12 * 2**20
    t0 = time.monotonic()
    result = _peak(bomb)
    assert f"member {member} declares {info.file_size:,} bytes, more than the" in result["outcome"], result
    assert result["peak_mb"] < 40, result  # on main: the member read whole, then copied (~700 MB)
    assert time.monotonic() - t0 < 60


def test_legitimate_archive_loads_within_twice_its_size(tmp_path: Path) -> None:
    model = _trained_ppo([1024, 1024])
    model.save(tmp_path / "big.zip")
    with zipfile.ZipFile(tmp_path / "big.zip") as archive:
        legit_mb = sum(i.file_size for i in archive.infolist() if i.filename.endswith(".pth")) / 2**20
    assert legit_mb > 20
    result = _peak(tmp_path / "big.zip")
    assert result["outcome"] == "loaded", result
    assert result["peak_mb"] < 2 * legit_mb + 30, (result, legit_mb)


# ---------------------------------------------------------------- (3) load_replay_buffer's metadata
def _npz_with_metadata(path: Path, header_shape: tuple[int, ...], dtype: str) -> None:
    """An .npz whose __metadata__ member's header declares ``header_shape`` of ``dtype`` (data left short)."""
    with zipfile.ZipFile(path, "w") as archive, archive.open("__metadata__.npy", "w") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": header_shape}
        )
        f.write(b"\0" * 64)


def test_load_replay_buffer_checks_the_file_as_replay_buffer_load(tmp_path: Path) -> None:
    model = SAC("MlpPolicy", buffer_size=100, learning_starts=100, policy_kwargs=dict(net_arch=[8]))
    model.learn(2, env="Pendulum-v1")
    cases = {}
    cases["huge"] = tmp_path / "huge.npz"
    _npz_with_metadata(cases["huge"], (2**28,), "<f8")  # 2 GB declared, 64 bytes of data
    cases["object"] = tmp_path / "object.npz"
    np.savez(cases["object"], __metadata__=np.array([{"class": "ReplayBuffer"}], dtype=object))
    cases["deep"] = tmp_path / "deep.npz"
    np.savez(cases["deep"], __metadata__=np.array("[" * 200_000))
    cases["digits"] = tmp_path / "digits.npz"
    np.savez(cases["digits"], __metadata__=np.array('{"class": ' + "9" * 100_000 + "}"))
    cases["npy"] = tmp_path / "single.npy"
    np.save(cases["npy"], np.zeros(3))
    cases["folder"] = tmp_path / "folder.npz"
    cases["folder"].mkdir()
    for name, path in cases.items():
        with pytest.raises(BadFileError, match=re.escape(str(path))) as info:
            model.load_replay_buffer(path)
        assert len(str(info.value).splitlines()) == 1, (name, str(info.value))


# ---------------------------------------------------------------- (4) env state inside a checkpoint
@pytest.mark.parametrize(
    "layer,name,value,culprit",
    [
        (1, "step", 5, "TimeLimit: 'step' is not part of its state"),
        (4, "state", {"__nd__": [0.0], "dtype": "(16000,16000)f8", "shape": [1]}, "not a plain numeric dtype"),
        (3, "_later", {"__nd__": [0.0], "dtype": "(16000,16000)f8", "shape": [1]}, "not a plain numeric dtype"),
        (
            1,
            "_elapsed_steps",
            {"__nd__": [0.0], "dtype": "float64", "shape": [1]},
            "an array where the env has a scalar",
        ),
        (
            4,
            "state",
            {"__nd__": [0.0] * 4, "dtype": "float64", "shape": [8, 8]},
            "array data of shape (4,), declared (8, 8)",
        ),
        (4, "state", {"__nd__": [0.0] * 4, "dtype": "O", "shape": [4]}, "'O' is not a plain numeric dtype"),
        (4, "_np_random", {"__rng__": {"bit_generator": "MT19937"}}, "bad random generator state"),
        (0, "__class__", 1, "'__class__' is not part of its state"),
    ],
)
def test_env_state_restores_only_what_the_capture_side_writes(layer: int, name: str, value: object, culprit: str,
                                                              tmp_path: Path) -> None:  # fmt: skip
    _, trainer = _tiny_ppo()
    trainer.save_checkpoint(tmp_path / "good.ckpt")
    _resume(str(tmp_path / "good.ckpt"))  # the untouched checkpoint resumes
    checkpoint = th.load(tmp_path / "good.ckpt", weights_only=True)
    checkpoint["lit_sb3"]["env_state"]["envs"][0][layer][name] = value
    th.save(checkpoint, tmp_path / "bad.ckpt")
    assert (tmp_path / "bad.ckpt").stat().st_size < 200_000
    with pytest.raises(BadFileError) as info:
        _resume(str(tmp_path / "bad.ckpt"))
    text = str(info.value)
    assert text.startswith(f"{tmp_path / 'bad.ckpt'}: env state: ") and culprit in text, text
    assert len(text.splitlines()) == 1


# ---------------------------------------------------------------- (8) one clean line, fast
@pytest.mark.parametrize("target", ["data.json", "vecnormalize.json"])
@pytest.mark.parametrize("text", ["[" * 200_000, '{"format": ' + "7" * 100_000 + "}"], ids=["deep", "digits"])
def test_enjoy_deep_or_huge_json_is_one_line(target: str, text: str, in_tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    folder = in_tmp_path / "m"
    folder.mkdir()
    _trained_ppo([8]).save(folder / "model.zip")
    if target == "data.json":
        with zipfile.ZipFile(folder / "model.zip") as good, zipfile.ZipFile(folder / "bad.zip", "w") as bad:
            for info in good.infolist():
                bad.writestr(info, text if info.filename == "data.json" else good.read(info))
        model = folder / "bad.zip"
    else:
        (folder / "vecnormalize.json").write_text(text)
        model = folder / "model.zip"
    capsys.readouterr()
    assert main(["enjoy", "--model", str(model), "--env", "CartPole-v1", "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("bench enjoy: error: "), err
    assert target.split(".")[0] in err.lower().replace("vecnormalize file", "vecnormalize"), err


def test_report_into_an_unwritable_folder_is_one_line(in_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for out, culprit in (("/proc/lit_sb3/report", "is not writable"), ("/proc/self/status", "is a file")):
        capsys.readouterr()
        assert main(["report", "--experiment", "x", "--out", out]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and culprit in err, err
    assert not (in_tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(
    "uri",
    [
        "postgresql://user:pw@127.0.0.1:1/db",
        "sqlite:////proc/mlflow.db",
        "sqlite:///{tmp}/not-a-db.db",
        "sqlite:///{tmp}/folder.db",
    ],
    ids=["postgres port 1", "sqlite in /proc", "sqlite garbage file", "sqlite folder"],
)
@pytest.mark.parametrize("command", ["run", "report"])
def test_unreachable_tracking_database_answers_in_seconds(uri: str, command: str, in_tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    (in_tmp_path / "not-a-db.db").write_bytes(b"this is not sqlite" * 100)
    (in_tmp_path / "folder.db").mkdir()
    uri = uri.format(tmp=in_tmp_path)
    argv = {
        "run": ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--n-timesteps", "256", "--tracking-uri", uri],
        "report": ["report", "--experiment", "x", "--tracking-uri", uri, "--out", str(in_tmp_path / "r")],
    }[command]
    capsys.readouterr()
    t0 = time.monotonic()
    assert main(argv) == 2
    seconds = time.monotonic() - t0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tracking URI" in err, err
    assert seconds < 20, seconds  # on main: 107-111 s of MLflow retries and 37-46 lines of warnings


# ---------------------------------------------------------------- (10) lost trials: found by process, not by a late beat
def test_dead_trial_process_is_failed_at_once_and_a_live_one_never(tmp_path: Path) -> None:
    """A trial whose process is gone is failed (and re-enqueued by the callback) at once; a live trial is not,
    however late its heartbeat: the grace period is at least a minute (it was 3 beats, 6 s in the Ray test)."""
    import optuna
    from optuna.trial import TrialState

    from lit_sb3.zoo.tuning.workers import PROCESS_ATTR, fail_dead_trials, grace_period

    assert grace_period(2) == 60 and grace_period(30) == 90
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(study_name="s", storage=url)
    code = (  # a worker that starts a trial and dies without telling it
        "import optuna, os\nfrom lit_sb3.zoo.tracking import process_tag\n"
        f"study = optuna.load_study(study_name='s', storage={url!r})\n"
        f"trial = study.ask({{'x': optuna.distributions.FloatDistribution(0, 1)}})\n"
        f"trial.set_user_attr({PROCESS_ATTR!r}, process_tag())\nos._exit(0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    live = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    live.set_user_attr(PROCESS_ATTR, f"{socket.gethostname()}:{os.getppid()}:")  # a live process on this host
    seen = []
    assert fail_dead_trials(study, lambda s, t: seen.append((t.number, t.state))) == [0]
    assert seen == [(0, TrialState.FAIL)]
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {0: TrialState.FAIL, 1: TrialState.RUNNING}, states
    assert fail_dead_trials(study, lambda s, t: seen.append(t.number)) == []  # once only


def _slot_worker(spec: str, out: str, n: int) -> None:
    from lit_sb3.zoo.pipeline import TrialSlotLock

    lock = TrialSlotLock(spec, "study")
    for _ in range(n):
        lock.acquire()
        t0 = time.time()
        time.sleep(0.02)
        t1 = time.time()
        lock.release()
        with open(out, "a") as fh:
            fh.write(f"{t0} {t1}\n")


@pytest.mark.parametrize("backend", ["journal", "postgresql"])
def test_trial_slot_lock_lets_one_worker_decide_at_a_time(backend: str, tmp_path: Path) -> None:
    """Deciding to start a trial and creating it is one critical section across the study's workers (3 processes
    x 15 sections on a real PostgreSQL advisory lock, or a journal's lock file): no two sections overlap, so two
    workers can no longer both take the last trial slot (4 COMPLETE of 3 requested, seen under load)."""
    import multiprocessing

    from tests.services import postgres_server

    out = str(tmp_path / "sections")
    with contextlib.ExitStack() as stack:
        spec = str(tmp_path / "s.journal") if backend == "journal" else stack.enter_context(postgres_server("lock"))
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_slot_worker, args=(spec, out, 15)) for _ in range(3)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(120)
        assert [proc.exitcode for proc in procs] == [0, 0, 0]
    sections = sorted(tuple(map(float, line.split())) for line in Path(out).read_text().splitlines())
    assert len(sections) == 45
    overlaps = [(a, b) for a, b in zip(sections, sections[1:]) if b[0] < a[1]]
    assert not overlaps, overlaps[:3]
