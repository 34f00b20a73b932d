"""Lightning features through ``RLTrainer.fit`` on real envs: what each one does in RL terms (README "Lightning
features"): checkpoint cadences, top-k by evaluation, fast_dev_run, precision, refused arguments, the Monitor
wrapper, on-policy budget rounding, safe checkpoint loading from any source, TensorBoard output."""

from __future__ import annotations

import http.server
import logging
import threading
from pathlib import Path

import fsspec
import numpy as np
import pytest
import torch as th
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sb3 import A2C, DDPG, DQN, PPO, SAC, TD3, RLEnvDataModule, RLTrainer
from lit_sb3.algorithms.crossq import CrossQ
from lit_sb3.algorithms.qrdqn import QRDQN
from lit_sb3.algorithms.tqc import TQC
from lit_sb3.callbacks import EvalCallback
from lit_sb3.core.monitor import Monitor
from lit_sb3.utils.files import BadFileError
from lit_sb3.vec_env import VecMonitor

th.set_num_threads(1)

NET = dict(net_arch=[16, 16])


def tiny_sac(**kwargs):
    return SAC("MlpPolicy", seed=0, batch_size=16, policy_kwargs=NET, **{"learning_starts": 20, **kwargs})


def tiny_ppo(**kwargs):
    return PPO("MlpPolicy", seed=0, batch_size=32, n_epochs=2, policy_kwargs=NET, **{"n_steps": 64, **kwargs})


def pendulum(**kwargs):
    return RLEnvDataModule("Pendulum-v1", seed=0, **kwargs)


def cartpole(**kwargs):
    return RLEnvDataModule("CartPole-v1", seed=0, **kwargs)


# ---------------------------------------------------------------- global_step and checkpoint cadences


def test_global_step_counts_collect_update_cycles(tmp_path):
    model = tiny_sac(train_freq=4, gradient_steps=2)
    trainer = RLTrainer(max_steps=200, logger=False, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=pendulum())
    assert trainer.global_step == 50  # 200 env steps / train_freq 4
    ppo = tiny_ppo()
    trainer = RLTrainer(max_steps=256, logger=False, default_root_dir=tmp_path)
    trainer.fit(ppo, datamodule=cartpole())
    assert trainer.global_step == ppo._iteration == 4


def test_model_checkpoint_every_n_train_steps_writes_each_cadence_and_resumes(tmp_path):
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=10, save_top_k=-1)
    model = tiny_sac(train_freq=4, gradient_steps=1)
    # no enable_checkpointing=True needed: a ModelCheckpoint in callbacks turns checkpointing on
    trainer = RLTrainer(max_steps=200, logger=False, callbacks=[checkpoint], default_root_dir=tmp_path)
    trainer.fit(model, datamodule=pendulum())
    steps = sorted(int(p.stem.split("step=")[1]) for p in (tmp_path / "ckpt").glob("*.ckpt"))
    assert steps == [10, 20, 30, 40, 50]  # every 10 cycles = every 40 env steps
    state = th.load(tmp_path / "ckpt" / "epoch=0-step=30.ckpt", weights_only=True)
    assert state["lit_sb3"]["num_timesteps"] == 120 and state["global_step"] == 30

    resumed = tiny_sac(train_freq=4, gradient_steps=1)
    trainer = RLTrainer(max_steps=200, logger=False, default_root_dir=tmp_path / "resumed")
    trainer.fit(resumed, datamodule=pendulum(), ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=30.ckpt"))
    assert resumed.num_timesteps == 200 and trainer.global_step == 50
    for key, value in model.state_dict().items():
        assert th.equal(value, resumed.state_dict()[key]), key


def test_enable_checkpointing_saves_at_the_end_of_fit(tmp_path):
    model = tiny_ppo()
    trainer = RLTrainer(max_steps=128, logger=False, enable_checkpointing=True, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=cartpole())
    files = list((tmp_path / "checkpoints").glob("*.ckpt"))
    assert [p.name for p in files] == ["epoch=0-step=2.ckpt"]
    assert th.load(files[0], weights_only=True)["lit_sb3"]["num_timesteps"] == 128


def test_model_checkpoint_top_k_by_eval_mean_reward(tmp_path):
    checkpoint = ModelCheckpoint(
        dirpath=tmp_path / "best", monitor="eval/mean_reward", mode="max", save_top_k=2, filename="{step}"
    )
    eval_callback = EvalCallback(
        RLEnvDataModule("CartPole-v1", seed=1).get_env("fit"), eval_freq=100, n_eval_episodes=2, verbose=0
    )
    seen: list[tuple[float, int]] = []
    original = eval_callback.evaluate

    def evaluate():
        result = original()
        seen.append((result[0], eval_callback.num_timesteps))
        return result

    eval_callback.evaluate = evaluate
    model = DQN("MlpPolicy", seed=0, learning_starts=50, batch_size=16, policy_kwargs=NET, train_freq=4)
    trainer = RLTrainer(max_steps=600, rl_callback=eval_callback, logger=False, callbacks=[checkpoint])
    trainer.fit(model, datamodule=cartpole())
    assert len(seen) == 6
    best = sorted(float(v) for v in checkpoint.best_k_models.values())
    assert best == sorted(r for r, _ in seen)[-2:]
    assert checkpoint.best_model_score == max(r for r, _ in seen)
    for path in checkpoint.best_k_models:
        state = th.load(path, weights_only=True)
        # saved right after the evaluation, at the env step it ran
        assert (float(checkpoint.best_k_models[path]), state["lit_sb3"]["num_timesteps"]) in seen


# ---------------------------------------------------------------- fast_dev_run


def test_fast_dev_run_runs_one_cycle_with_a_real_update(tmp_path):
    model = tiny_sac(learning_starts=100)
    trainer = RLTrainer(max_steps=10_000, fast_dev_run=True, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=pendulum())
    # the update runs even inside the warm-up (learning_starts=100): fast_dev_run exercises the whole cycle
    assert model.num_timesteps == 1 and model._n_updates == 1 and trainer.global_step == 1
    assert not (tmp_path / "lightning_logs").exists() and not (tmp_path / "checkpoints").exists()


def test_fast_dev_run_n_runs_n_iterations_on_policy(tmp_path):
    model = tiny_ppo()
    trainer = RLTrainer(max_steps=10_000, fast_dev_run=3, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=cartpole())
    assert model.num_timesteps == 3 * 64 and model._iteration == 3 and model._n_updates == 3 * 2  # n_epochs each


# ---------------------------------------------------------------- precision


@pytest.mark.parametrize(
    "algo, env",
    [
        (SAC, "Pendulum-v1"),
        (TD3, "Pendulum-v1"),
        (DDPG, "Pendulum-v1"),
        (DQN, "CartPole-v1"),
        (PPO, "CartPole-v1"),
        (A2C, "CartPole-v1"),
    ],  # fmt: skip
)
def test_precision_64_true_trains_in_double(algo, env, tmp_path):
    kwargs = dict(learning_starts=20, batch_size=16) if algo in (SAC, TD3, DDPG, DQN) else dict(n_steps=32)
    if algo is PPO:
        kwargs["batch_size"] = 32
    model = algo("MlpPolicy", seed=0, policy_kwargs=NET, **kwargs)
    RLTrainer(max_steps=96, logger=False, precision="64-true").fit(model, datamodule=RLEnvDataModule(env, seed=0))
    assert all(p.dtype == th.float64 for p in model.parameters())
    assert model._n_updates > 0
    obs = model.env.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert np.all(np.isfinite(action))


@pytest.mark.parametrize(
    "algo, env",
    [(SAC, "Pendulum-v1"), (TD3, "Pendulum-v1"), (DDPG, "Pendulum-v1"), (TQC, "Pendulum-v1"),
     (CrossQ, "Pendulum-v1"), (QRDQN, "CartPole-v1"), (DQN, "CartPole-v1"), (PPO, "CartPole-v1")],
)  # fmt: skip
def test_bf16_true_trains_every_algorithm(algo, env):
    # replay samples reach the networks in bfloat16 (they met float32 actions before: "Input dtypes must be the same")
    kwargs = dict(n_steps=40, batch_size=40) if algo is PPO else dict(learning_starts=100, batch_size=16)
    model = algo("MlpPolicy", seed=0, policy_kwargs=NET, **kwargs)
    RLTrainer(max_steps=200, logger=False, precision="bf16-true").fit(model, datamodule=RLEnvDataModule(env, seed=0))
    assert model._n_updates > 0 and model.num_timesteps == 200
    params = [p for p in model.policy.parameters() if p.is_floating_point()]
    assert all(p.dtype == th.bfloat16 and th.isfinite(p).all() for p in params)
    action, _ = model.predict(model.env.reset(), deterministic=True)
    assert np.all(np.isfinite(action))


def test_bf16_true_resumes_from_a_checkpoint_exactly(tmp_path):
    # the replay buffer restored from the checkpoint samples in bfloat16 too
    def fit(model, steps, ckpt_path=None):
        trainer = RLTrainer(max_steps=steps, logger=False, precision="bf16-true")
        trainer.fit(model, datamodule=pendulum(), ckpt_path=ckpt_path)
        return trainer

    straight = tiny_sac(learning_starts=100)
    fit(straight, 200)
    fit(tiny_sac(learning_starts=100), 150).save_checkpoint(tmp_path / "cut.ckpt")
    resumed = tiny_sac(learning_starts=100)
    fit(resumed, 200, ckpt_path=str(tmp_path / "cut.ckpt"))
    assert resumed.replay_buffer.sample_float_dtype == th.bfloat16
    assert resumed._n_updates == straight._n_updates > 0
    for (key, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert th.equal(a, b), key


@pytest.mark.parametrize("make, dm", [(tiny_sac, pendulum), (tiny_ppo, cartpole)])
def test_bf16_mixed_trains_on_cpu(make, dm, tmp_path):
    model = make()
    RLTrainer(max_steps=128, logger=False, precision="bf16-mixed").fit(model, datamodule=dm())
    assert model._n_updates > 0
    assert all(p.dtype == th.float32 and th.isfinite(p).all() for p in model.parameters())


# ---------------------------------------------------------------- refused arguments


@pytest.mark.parametrize(
    "kwargs, equivalent",
    [
        (dict(gradient_clip_val=0.5), "max_grad_norm"),
        (dict(gradient_clip_algorithm="norm"), "max_grad_norm"),
        (dict(accumulate_grad_batches=4), "batch_size"),
        (dict(limit_train_batches=10), "max_steps"),
        (dict(overfit_batches=2), "max_steps"),
        (dict(limit_val_batches=3), "n_eval_episodes"),
        (dict(val_check_interval=100), "eval_freq"),
        (dict(num_sanity_val_steps=2), "trainer.validate"),
        (dict(check_val_every_n_epoch=2), "eval_freq"),
        (dict(reload_dataloaders_every_n_epochs=1), "RLEnvDataModule"),
        (dict(sync_batchnorm=True), "devices=1"),
        (dict(use_distributed_sampler=False), "leave it unset"),
        (dict(inference_mode=False), "leave it unset"),
        (dict(limit_test_batches=3), "n_eval_episodes"),
        (dict(limit_predict_batches=3), "observation="),
    ],
)
def test_arguments_without_rl_meaning_are_refused_at_construction(kwargs, equivalent):
    with pytest.raises(ValueError) as info:
        RLTrainer(max_steps=100, **kwargs)
    message = str(info.value)
    assert "\n" not in message and next(iter(kwargs)) in message and equivalent in message


# ---------------------------------------------------------------- env wrapping and budgets


@pytest.mark.parametrize("monitor_wrapper", [True, False])
def test_monitor_wrapper_is_honoured(monitor_wrapper):
    model = tiny_ppo(monitor_wrapper=monitor_wrapper)
    RLTrainer(max_steps=64, logger=False).fit(model, datamodule=cartpole())
    assert model.env.env_is_wrapped(Monitor) == [monitor_wrapper]
    assert not isinstance(model.env, VecMonitor)
    assert (len(model.ep_info_buffer) > 0) == monitor_wrapper  # episode stats come from the Monitor


def test_on_policy_budget_rounds_up_to_whole_rollouts_and_says_so_once(caplog):
    model = tiny_ppo(n_steps=64)
    with caplog.at_level(logging.INFO, logger="lit_sb3"):
        trainer = RLTrainer(max_steps=100, logger=False)
        trainer.fit(model, datamodule=cartpole(n_envs=2))
    lines = [r.getMessage() for r in caplog.records if "rounded up" in r.getMessage()]
    assert len(lines) == 1 and "128" in lines[0] and "stops at 128" in lines[0]
    assert model.num_timesteps == 128 and trainer.rl_progress == 1.0 and trainer.rl_budget_reached


def test_rl_progress_on_resumed_and_continued_runs(tmp_path):
    model = tiny_sac()
    trainer = RLTrainer(max_steps=60, logger=False)
    trainer.fit(model, datamodule=pendulum())
    trainer.save_checkpoint(tmp_path / "a.ckpt")
    # resumed from a checkpoint: the restored steps count towards the same budget (seed 001's formula)
    resumed = tiny_sac()
    trainer = RLTrainer(max_steps=100, logger=False)
    trainer.fit(resumed, datamodule=pendulum(), ckpt_path=str(tmp_path / "a.ckpt"))
    assert resumed.num_timesteps == 100 and trainer.rl_progress == 1.0 and trainer.rl_num_timesteps == 100
    # continued (SB3's reset_num_timesteps=False): max_steps more env steps
    model.learn(40, env=model.env, reset_num_timesteps=False)
    assert model.num_timesteps == 100


# ---------------------------------------------------------------- safe checkpoint loading


class _Payload:
    ran = Path()

    def __reduce__(self):
        return (Path.touch, (self.ran,))


def test_checkpoint_url_with_a_pickle_payload_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    marker = tmp_path / "payload-ran"
    model = tiny_sac()
    trainer = RLTrainer(max_steps=30, logger=False)
    trainer.fit(model, datamodule=pendulum())
    checkpoint = trainer._checkpoint_connector.dump_checkpoint()
    _Payload.ran = marker
    checkpoint["evil"] = _Payload()
    served = tmp_path / "served"
    served.mkdir()
    th.save(checkpoint, served / "evil.ckpt")

    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(served))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/evil.ckpt"
        with pytest.raises(BadFileError, match="Weights only load failed"):
            RLTrainer(max_steps=60, logger=False).fit(tiny_sac(), datamodule=pendulum(), ckpt_path=url)
        with pytest.raises(ValueError, match="weights_only=False is refused"):
            RLTrainer(max_steps=60, logger=False).fit(
                tiny_sac(), datamodule=pendulum(), ckpt_path=url, weights_only=False
            )
        # a local path, a file URL and any fsspec URL are read the same safe way
        memory = fsspec.filesystem("memory")
        memory.pipe("/evil.ckpt", (served / "evil.ckpt").read_bytes())
        for source in (str(served / "evil.ckpt"), f"file://{served / 'evil.ckpt'}", "memory://evil.ckpt"):
            with pytest.raises(BadFileError, match="Weights only load failed"):
                RLTrainer(max_steps=60, logger=False).fit(tiny_sac(), datamodule=pendulum(), ckpt_path=source)
        memory.rm("/evil.ckpt")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not marker.exists()
    th.load(served / "evil.ckpt", weights_only=False)  # the payload is real: the unsafe loader runs it
    assert marker.exists()


# ---------------------------------------------------------------- TensorBoard


def test_tensorboard_train_values_at_the_dump_step_and_hparams(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path, name="tb", version="v")
    model = tiny_sac(train_freq=(1, "episode"), gradient_steps=8, learning_rate=1e-3)
    RLTrainer(max_steps=1100, logger=logger, log_every_n_steps=2).fit(model, datamodule=pendulum())
    events = EventAccumulator(logger.log_dir, size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    steps = [e.step for e in events.Scalars("train/actor_loss")]
    # an update after each episode (200 steps), logs dumped every 2 episodes (400, 800) with the latest train
    # values at the dump's env step, as SB3 dumps them (one dump, one step); the update after the last dump
    # (at 1,000) is flushed at the end, at the final env step (1,100)
    assert steps == [400, 800, 1100]
    assert [e.step for e in events.Scalars("time/fps")] == [400, 800]
    plugin = events.PluginTagToContent("hparams")
    assert "_hparams_/session_start_info" in plugin
    hparams = (Path(logger.log_dir) / "hparams.yaml").read_text()
    assert "learning_rate: 0.001" in hparams and "algo: SAC" in hparams


def test_record_exclude_keeps_a_value_out_of_matching_loggers(tmp_path):
    from lightning.pytorch.loggers import CSVLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from lit_sb3.callbacks import BaseCallback

    class RecordEveryStep(BaseCallback):
        def _on_step(self) -> bool:
            self.model.record("custom/only_tensorboard", float(self.num_timesteps), exclude="csv")
            self.model.record("custom/everywhere", 1.0)
            return True

    csv, tb = CSVLogger(tmp_path, name="csv", version=""), TensorBoardLogger(tmp_path, name="tb", version="")
    model = tiny_sac()
    RLTrainer(max_steps=40, logger=[csv, tb], rl_callback=RecordEveryStep()).fit(model, datamodule=pendulum())
    header = (Path(csv.log_dir) / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "custom/everywhere" in header and "custom/only_tensorboard" not in header
    events = EventAccumulator(tb.log_dir)
    events.Reload()
    assert [e.value for e in events.Scalars("custom/only_tensorboard")] == [40.0]


def test_monitor_wrapper_is_a_constructor_argument_of_every_algorithm():
    import inspect

    from lit_sb3.algorithms.registry import ALGORITHMS, algorithm_class

    for name in ALGORITHMS:
        parameter = inspect.signature(algorithm_class(name).__init__).parameters.get("monitor_wrapper")
        assert parameter is not None and parameter.default is True, name


# ---------------------------------------------------------------- fits, loggers and Lightning's switches


def test_two_fits_on_one_trainer_with_the_default_logger(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model, dm = tiny_ppo(), cartpole()
    trainer = RLTrainer(max_steps=64, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=dm)
    trainer.fit(model, datamodule=dm)  # the first fit's end closed the TensorBoard writer
    assert model.num_timesteps == 64
    (run,) = (tmp_path / "lightning_logs").iterdir()
    events = EventAccumulator(str(run))
    events.Reload()
    assert [e.step for e in events.Scalars("time/fps")] == [64, 64]  # one rollout per fit, both in one run


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_enable_autolog_hparams_false_logs_no_hyperparameters(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path, name="tb", version="v")
    RLTrainer(max_steps=64, logger=logger, enable_autolog_hparams=False).fit(tiny_ppo(), datamodule=cartpole())
    events = EventAccumulator(logger.log_dir)
    events.Reload()
    assert "time/fps" in events.Tags()["scalars"]  # metrics are still logged
    with pytest.raises(KeyError, match="hparams"):  # no HParams session
        events.PluginTagToContent("hparams")
    assert "algo" not in (Path(logger.log_dir) / "hparams.yaml").read_text()


def test_barebones_writes_nothing(tmp_path):
    model = tiny_ppo()
    RLTrainer(max_steps=64, barebones=True, default_root_dir=tmp_path).fit(model, datamodule=cartpole())
    assert model.num_timesteps == 64 and model._n_updates > 0
    assert _tree(tmp_path) == []
    with pytest.raises(ValueError, match="barebones=True, enable_progress_bar=True"):
        RLTrainer(max_steps=64, barebones=True, enable_progress_bar=True)


@pytest.mark.parametrize("stage", ["validate", "test"])
def test_validate_and_test_send_their_metrics_to_the_loggers(stage, tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    csv = CSVLogger(tmp_path, name="csv", version="")
    model, trainer = tiny_ppo(), RLTrainer(max_steps=64, logger=csv)
    trainer.fit(model, datamodule=cartpole())
    (result,) = getattr(trainer, stage)(model, n_eval_episodes=2, return_episode_rewards=True)
    lines = (Path(csv.log_dir) / "metrics.csv").read_text().splitlines()
    header, rows = lines[0].split(","), [dict(zip(lines[0].split(","), line.split(","))) for line in lines[1:]]
    logged = [row for row in rows if row[f"{stage}/mean_reward"]]
    assert len(logged) == 1 and float(logged[0][f"{stage}/mean_reward"]) == result[f"{stage}/mean_reward"]
    assert logged[0]["step"] == "64"  # at the model's env step
    assert f"{stage}/episode_rewards" not in header  # lists stay in the returned dict
    assert float(trainer.callback_metrics[f"{stage}/n_eval_episodes"]) == 2


def test_private_lightning_members_are_used_only_in_the_adapter_module():
    import re

    import lit_sb3

    # private attributes/methods of Lightning objects the library needs (each explained in lightning_compat.py)
    private = re.compile(
        r"\._trainer\b|\._fabric\b|\bfit_loop\b|\._every_n_train_steps\b|\._train_time_interval\b|\._monitor_candidates\("
        r"|\._save_(topk|last)_checkpoint\(|\._get_file_writer\(|self\._device\s*="
    )
    root = Path(lit_sb3.__file__).parent
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for path in root.rglob("*.py")
        if path.name != "lightning_compat.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert offenders == []
