"""Lockstep parity with Stable-Baselines3 2.x: the same run in both libraries, compared value by value.

Each test trains one lit_sb3 model and one SB3 model with the same seed (hence the same initial weights, the same
env resets and the same action-space samples) and the same randomness everywhere the two libraries draw it from
different generators: the replay-buffer indices (SB3: ``np.random.randint``, lit_sb3: ``th.randint``) and the
rollout minibatch permutation (SB3: ``np.random.permutation``, lit_sb3: ``th.randperm``) come from one injected
``np.random.Generator`` per library with the same seed. Then, after whole ``learn``/``fit`` runs (collection and
updates):

* collection: every stored transition (observations, terminal observations as ``next_obs``, scaled actions,
  rewards, dones, timeouts; rollout values, log-probs, advantages and returns of GAE with timeouts bootstrapped),
  and per env step the exploration rate and the target-network state (DQN's cadence in env steps);
* updates: parameters, target networks, optimiser states, SAC's entropy coefficient and the logged losses.

Optimisers: SB3 builds ``Adam`` without ``fused``/``foreach`` (on CPU: the single-tensor loop); lit_sb3's default
is fused Adam. The tests give SB3 ``optimizer_kwargs=dict(fused=True)`` so that lit_sb3 runs its defaults and the
comparison is exact (``test_fused_adam_matches_sb3_default_adam`` bounds the fused/unfused difference).
Equality is bitwise (``atol=rtol=0``) unless a comment says why not.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th

sb3 = pytest.importorskip("stable_baselines3")

from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback as SB3Callback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env  # noqa: E402
from stable_baselines3.common.logger import Logger as SB3Logger  # noqa: E402
from stable_baselines3.common.noise import NormalActionNoise as SB3NormalActionNoise  # noqa: E402

import lit_sb3  # noqa: E402
from lit_sb3.algorithms.base import BaseAlgorithm  # noqa: E402
from lit_sb3.buffers.replay import ReplayBuffer as LitReplayBuffer  # noqa: E402
from lit_sb3.callbacks.base import BaseCallback as LitCallback  # noqa: E402
from lit_sb3.core.noise import NormalActionNoise as LitNormalActionNoise  # noqa: E402
from lit_sb3.datamodule import RLEnvDataModule  # noqa: E402
from lit_sb3.vec_env import make_vec_env as lit_make_vec_env  # noqa: E402

SEED = 3
SAMPLER_SEED = 1234
EXACT = dict(atol=0.0, rtol=0.0)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        level = logging.getLogger("lightning.pytorch").level
        logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
        yield
        logging.getLogger("lightning.pytorch").setLevel(level)


# ---------------------------------------------------------------------------------------------------------
# injected randomness and recording
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def same_replay_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both replay buffers sample their minibatch indices from their own ``default_rng(SAMPLER_SEED)`` and their
    env indices (several envs) from their own ``RandomState(SAMPLER_SEED)`` (SB3 draws them with the global
    ``np.random.randint`` inside ``_get_samples``: its global state is swapped for that call only)."""
    rngs = {"sb3": np.random.default_rng(SAMPLER_SEED), "lit": np.random.default_rng(SAMPLER_SEED)}
    env_rngs = {"sb3": np.random.RandomState(SAMPLER_SEED), "lit": np.random.RandomState(SAMPLER_SEED)}

    def indices(lib: str, buffer: Any, batch_size: int) -> np.ndarray:
        return rngs[lib].integers(0, buffer.buffer_size if buffer.full else buffer.pos, size=batch_size)

    def sb3_sample(self: SB3ReplayBuffer, batch_size: int, env: Any = None) -> Any:
        inds = indices("sb3", self, batch_size)
        global_state = np.random.get_state()
        np.random.set_state(env_rngs["sb3"].get_state())
        try:
            return self._get_samples(inds, env=env)
        finally:
            env_rngs["sb3"].set_state(np.random.get_state())
            np.random.set_state(global_state)

    def lit_sample(self: LitReplayBuffer, batch_size: int, env: Any = None) -> Any:
        return self._get_samples(th.as_tensor(indices("lit", self, batch_size)), env=env)

    def lit_env_indices(self: LitReplayBuffer, n: int) -> th.Tensor:
        return th.as_tensor(env_rngs["lit"].randint(0, high=self.n_envs, size=(n,)), dtype=th.long)

    monkeypatch.setattr(SB3ReplayBuffer, "sample", sb3_sample)
    monkeypatch.setattr(LitReplayBuffer, "sample", lit_sample)
    monkeypatch.setattr(LitReplayBuffer, "_env_indices", lit_env_indices)


@pytest.fixture
def same_permutations(monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3's ``np.random.permutation`` and lit_sb3's ``th.randperm`` (rollout minibatches) draw from their own
    ``default_rng(SAMPLER_SEED)``; neither then touches the global numpy/torch streams (as the originals would
    differently in each library)."""
    rngs = {"sb3": np.random.default_rng(SAMPLER_SEED), "lit": np.random.default_rng(SAMPLER_SEED)}

    def permutation(n: Any) -> np.ndarray:
        assert isinstance(n, (int, np.integer)), "only SB3's rollout buffer is expected to call this"
        return rngs["sb3"].permutation(int(n))

    def randperm(n: int, *args: Any, device: Any = None, **kwargs: Any) -> th.Tensor:
        return th.as_tensor(rngs["lit"].permutation(int(n)), device=device)

    monkeypatch.setattr(np.random, "permutation", permutation)
    monkeypatch.setattr(th, "randperm", randperm)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, list[float]]]:
    """Every scalar each library records (SB3 ``Logger.record``, lit_sb3 ``BaseAlgorithm.record``), in order."""
    out: dict[str, dict[str, list[float]]] = {"sb3": {}, "lit": {}}
    sb3_record, lit_record = SB3Logger.record, BaseAlgorithm.record

    def _keep(lib: str, key: str, value: Any) -> None:
        if isinstance(value, (int, float, np.floating, np.integer, th.Tensor)):
            out[lib].setdefault(key, []).append(float(value))

    def sb3_rec(self: Any, key: str, value: Any, exclude: Any = None) -> None:
        _keep("sb3", key, value)
        sb3_record(self, key, value, exclude)

    def lit_rec(self: Any, key: str, value: Any, exclude: Any = None) -> None:
        _keep("lit", key, value)
        lit_record(self, key, value, exclude)

    monkeypatch.setattr(SB3Logger, "record", sb3_rec)
    monkeypatch.setattr(BaseAlgorithm, "record", lit_rec)
    return out


def _trace_callback(base: type, attrs: tuple[str, ...], nets: tuple[str, ...]) -> Any:
    """A callback that records, after every env step, ``num_timesteps``, the given attributes and a checksum of
    the given networks (sum of all parameters, float64)."""

    class Trace(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[float, ...]] = []

        def _on_step(self) -> bool:
            row = [float(self.model.num_timesteps)] + [float(getattr(self.model, a)) for a in attrs]
            for net in nets:
                module = self.model
                for part in net.split("."):
                    module = getattr(module, part)
                row.append(float(sum(p.detach().double().sum() for p in module.parameters())))
            self.rows.append(tuple(row))
            return True

    return Trace()


# ---------------------------------------------------------------------------------------------------------
# running both libraries
# ---------------------------------------------------------------------------------------------------------
def _env_kwargs(max_episode_steps: int | None) -> dict[str, Any]:
    return {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}


def _run_pair(
    algo: str,
    env_id: str,
    total_timesteps: int,
    kwargs: dict[str, Any],
    *,
    n_envs: int = 1,
    max_episode_steps: int | None = None,
    noise_std: float | None = None,
    trace: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
) -> tuple[Any, Any, Any, Any]:
    """Train SB3 then lit_sb3 with the same seed and hyperparameters; return both models and their traces.

    SB3's Adam gets ``fused=True`` (lit_sb3's default) so that lit_sb3 runs with its own defaults.
    """
    env_kwargs = _env_kwargs(max_episode_steps)
    sb3_kwargs, lit_kwargs = dict(kwargs), dict(kwargs)
    policy_kwargs = dict(kwargs.get("policy_kwargs", {}))
    sb3_kwargs["policy_kwargs"] = {**policy_kwargs, "optimizer_kwargs": {"fused": True}}
    if noise_std is not None:
        n = gym.make(env_id).action_space.shape[0]
        sb3_kwargs["action_noise"] = SB3NormalActionNoise(np.zeros(n), noise_std * np.ones(n))
        lit_kwargs["action_noise"] = LitNormalActionNoise(np.zeros(n), noise_std * np.ones(n))
    attrs, nets = trace if trace is not None else ((), ())

    sb3_env = sb3_make_vec_env(env_id, n_envs=n_envs, seed=SEED, env_kwargs=env_kwargs)
    sb3_model = getattr(sb3, algo)("MlpPolicy", sb3_env, seed=SEED, device="cpu", **sb3_kwargs)
    sb3_trace = _trace_callback(SB3Callback, attrs, nets)
    sb3_model.learn(total_timesteps, callback=sb3_trace)

    lit_model = getattr(lit_sb3, algo)("MlpPolicy", seed=SEED, device="cpu", **lit_kwargs)
    lit_trace = _trace_callback(LitCallback, attrs, nets)
    lit_env = lit_make_vec_env(env_id, n_envs=n_envs, seed=SEED, env_kwargs=env_kwargs)
    trainer = lit_model.create_trainer(max_steps=total_timesteps, callback=lit_trace, logger=False)
    trainer.fit(lit_model, datamodule=RLEnvDataModule(train_env=lit_env))
    return sb3_model, lit_model, sb3_trace.rows, lit_trace.rows


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, th.Tensor) else np.asarray(x)


def assert_same_state(sb3_module: th.nn.Module, lit_module: th.nn.Module, **tol: float) -> None:
    """Same parameter and buffer names and values."""
    a, b = sb3_module.state_dict(), lit_module.state_dict()
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_allclose(_np(b[key]), _np(a[key]), err_msg=key, **(tol or EXACT))


def assert_same_optimizer(sb3_opt: th.optim.Optimizer, lit_opt: th.optim.Optimizer, **tol: float) -> None:
    """Same Adam state (step, exp_avg, exp_avg_sq) for every parameter, and the same learning rate."""
    a, b = sb3_opt.state_dict(), lit_opt.state_dict()
    assert [g["lr"] for g in a["param_groups"]] == [g["lr"] for g in b["param_groups"]]
    assert sorted(a["state"]) == sorted(b["state"])
    for idx, state in a["state"].items():
        for name, value in state.items():
            np.testing.assert_allclose(
                _np(b["state"][idx][name]), _np(value), err_msg=f"{idx}.{name}", **(tol or EXACT)
            )


def assert_same_replay(sb3_buffer: Any, lit_buffer: Any) -> None:
    """The same stored transitions, row by row (lit_sb3 stores float32, as SB3 does for these spaces)."""
    assert (sb3_buffer.pos, sb3_buffer.full) == (lit_buffer.pos, lit_buffer.full)
    n = sb3_buffer.buffer_size if sb3_buffer.full else sb3_buffer.pos
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
        a, b = getattr(sb3_buffer, name)[:n], _np(getattr(lit_buffer, name)[:n])
        np.testing.assert_array_equal(b.reshape(a.shape), a, err_msg=name)


# Losses logged as the mean over the gradient steps of one train() call: SB3 averages the ``.item()`` floats in
# float64 (``np.mean``), lit_sb3 the float32 loss tensors (no ``.item()`` per step): the means differ in the
# 7th significant digit while every per-step loss, parameter and optimiser state is bitwise equal.
MEAN_LOSS_TOL = dict(rtol=1e-6, atol=0.0)


def assert_same_records(
    recorded: dict[str, dict[str, list[float]]], exact: tuple[str, ...], means: tuple[str, ...] = ()
) -> None:
    """The logged values of ``exact`` keys are equal and those of ``means`` (averaged losses) equal to
    ``MEAN_LOSS_TOL``, record by record."""
    for key in exact + means:
        assert recorded["sb3"].get(key), f"SB3 never recorded {key}"
        assert len(recorded["lit"].get(key, [])) == len(recorded["sb3"][key]), key
        tol = MEAN_LOSS_TOL if key in means else EXACT
        np.testing.assert_allclose(recorded["lit"][key], recorded["sb3"][key], err_msg=key, **tol)


# ---------------------------------------------------------------------------------------------------------
# DQN
# ---------------------------------------------------------------------------------------------------------
# The RL Zoo's CartPole-v1 settings (issue 18), scaled down: smaller network and budget; the budget is a
# multiple of train_freq because SB3 always collects whole train_freq chunks (lit_sb3 stops at the budget).
DQN_KWARGS = dict(
    learning_rate=2.3e-3,
    batch_size=32,
    buffer_size=10_000,
    learning_starts=200,
    gamma=0.99,
    target_update_interval=10,
    train_freq=64,
    gradient_steps=32,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[32, 32]),
)


@pytest.mark.parametrize("n_envs", [1, 2])
def test_dqn_learn_lockstep(n_envs: int, same_replay_indices: None, recorded: dict) -> None:
    """Zoo-like DQN: transitions (timeouts at 40 steps), epsilon and target cadence per env step, weights,
    target, Adam state, loss logs."""
    kwargs = dict(DQN_KWARGS, target_update_interval=10 if n_envs == 1 else 7)  # 7 // 2 = every 3 calls
    total = 1024 if n_envs == 1 else 1024 + 64 * 2
    sb3_model, lit_model, sb3_rows, lit_rows = _run_pair(
        "DQN",
        "CartPole-v1",
        total,
        kwargs,
        n_envs=n_envs,
        max_episode_steps=40,
        trace=(("exploration_rate", "_n_calls"), ("q_net_target", "q_net")),
    )
    assert lit_model.num_timesteps == sb3_model.num_timesteps
    assert len(lit_rows) == len(sb3_rows) == total // n_envs
    np.testing.assert_array_equal(np.array(lit_rows), np.array(sb3_rows))
    # the trace saw the target move exactly on the target-update cadence, and epsilon reach its floor
    target = np.array([r[3] for r in sb3_rows])
    moved = np.flatnonzero(np.diff(target) != 0) + 1  # row i sees the updates of calls < i + 1
    period = max(kwargs["target_update_interval"] // n_envs, 1)
    assert moved.size > 0 and np.all(moved % period == 0)
    assert sb3_rows[-1][1] == pytest.approx(0.04)
    assert sb3_model.replay_buffer.timeouts.any() and sb3_model.replay_buffer.dones.any()

    assert_same_replay(sb3_model.replay_buffer, lit_model.replay_buffer)
    assert_same_state(sb3_model.policy, lit_model.policy)
    assert_same_optimizer(sb3_model.policy.optimizer, lit_model.policy.optimizer)
    assert (lit_model._n_calls, lit_model._n_updates) == (sb3_model._n_calls, sb3_model._n_updates)
    assert lit_model.exploration_rate == sb3_model.exploration_rate
    assert_same_records(recorded, ("train/n_updates", "train/learning_rate"), means=("train/loss",))
