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

import copy
import logging
import re
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
from tests.tolerances import model_tolerances, reassociation_rtol  # noqa: E402

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


ROLLOUT_FIELDS = (
    "observations",
    "actions",
    "rewards",
    "episode_starts",
    "values",
    "log_probs",
    "returns",
    "advantages",
)


def _trace_callback(base: type, attrs: tuple[str, ...], nets: tuple[str, ...], start: Any = None) -> Any:
    """A callback that records, after every env step, ``num_timesteps``, the given attributes and a checksum of
    the given networks (sum of all parameters, float64), and at the end of each rollout a copy of the rollout
    buffer (on-policy); ``start(model)`` runs when training starts."""

    class Trace(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[float, ...]] = []
            self.rollouts: list[dict[str, np.ndarray]] = []

        def _on_rollout_end(self) -> None:
            buffer = getattr(self.model, "rollout_buffer", None)
            if buffer is not None:
                self.rollouts.append({name: _np(getattr(buffer, name)).copy() for name in ROLLOUT_FIELDS})

        def _on_training_start(self) -> None:
            if start is not None:
                start(self.model)

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
    sb3_fused: bool = True,
) -> tuple[Any, Any, Any, Any]:
    """Train SB3 then lit_sb3 with the same seed and hyperparameters; return both models and their traces.

    SB3's Adam gets ``fused=True`` (lit_sb3's default) so that lit_sb3 runs with its own defaults.
    """
    env_kwargs = _env_kwargs(max_episode_steps)
    sb3_kwargs, lit_kwargs = dict(kwargs), dict(kwargs)
    policy_kwargs = dict(kwargs.get("policy_kwargs", {}))
    if algo == "PPO":  # SB3's actor-critic policies default to Adam(eps=1e-5), but only without optimizer_kwargs
        sb3_kwargs["policy_kwargs"] = {**policy_kwargs, "optimizer_kwargs": {"fused": True, "eps": 1e-5}}
    elif algo != "A2C" and sb3_fused:  # A2C: RMSprop in both (SB3 replaces optimizer_kwargs with RMSprop's)
        sb3_kwargs["policy_kwargs"] = {**policy_kwargs, "optimizer_kwargs": {"fused": True}}
    if noise_std is not None:
        n = gym.make(env_id).action_space.shape[0]
        sb3_kwargs["action_noise"] = SB3NormalActionNoise(np.zeros(n), noise_std * np.ones(n))
        lit_kwargs["action_noise"] = LitNormalActionNoise(np.zeros(n), noise_std * np.ones(n))
    attrs, nets = trace if trace is not None else ((), ())

    sb3_env = sb3_make_vec_env(env_id, n_envs=n_envs, seed=SEED, env_kwargs=env_kwargs)
    sb3_model = getattr(sb3, algo)("MlpPolicy", sb3_env, seed=SEED, device="cpu", **sb3_kwargs)
    # lit_sb3 builds its critics as one ensemble (another init order): it starts from SB3's initial weights
    # and from the torch/numpy random states SB3 has when its training starts
    initial = copy.deepcopy(sb3_model.policy.state_dict())
    rng_states: dict[str, Any] = {}

    def keep_rng(model: Any) -> None:
        rng_states.update(torch=th.get_rng_state(), numpy=np.random.get_state())

    def sync(model: Any) -> None:
        model.policy.load_state_dict(to_lit_layout(initial, model.policy.state_dict()))
        th.set_rng_state(rng_states["torch"])
        np.random.set_state(rng_states["numpy"])

    sb3_trace = _trace_callback(SB3Callback, attrs, nets, start=keep_rng)
    sb3_model.learn(total_timesteps, callback=sb3_trace)

    lit_model = getattr(lit_sb3, algo)("MlpPolicy", seed=SEED, device="cpu", **lit_kwargs)
    lit_trace = _trace_callback(LitCallback, attrs, nets, start=sync)
    lit_env = lit_make_vec_env(env_id, n_envs=n_envs, seed=SEED, env_kwargs=env_kwargs)
    trainer = lit_model.create_trainer(max_steps=total_timesteps, callback=lit_trace, logger=False)
    trainer.fit(lit_model, datamodule=RLEnvDataModule(train_env=lit_env))
    return sb3_model, lit_model, sb3_trace, lit_trace


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, th.Tensor) else np.asarray(x)


_ENSEMBLE_KEY = re.compile(r"^(?P<prefix>(.*\.)?)qf\.(?P<layer>\d+)\.(?P<kind>weight|bias)$")


def to_lit_layout(sb3_tensors: dict[str, th.Tensor], lit_like: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
    """SB3 tensors keyed by parameter name, in lit_sb3's layout: lit_sb3 stores the ``n_critics`` Q-networks
    (SB3's ``qf0``, ``qf1``, ... ``nn.Linear`` layers) as one ensemble MLP whose ``qf.<i>.weight`` is
    ``[n_critics, in, out]`` (SB3's weights transposed, stacked) and ``qf.<i>.bias`` ``[n_critics, 1, out]``.

    Args:
        sb3_tensors: SB3 name -> tensor (parameters, buffers, or per-parameter optimiser states).
        lit_like: lit_sb3 name -> tensor with the target shapes.
    """
    out = {}
    for key, like in lit_like.items():
        match = _ENSEMBLE_KEY.match(key)
        if key in sb3_tensors:
            out[key] = sb3_tensors[key]
        elif match is not None:
            prefix, layer, kind = match["prefix"], match["layer"], match["kind"]
            members = []
            while f"{prefix}qf{len(members)}.{layer}.{kind}" in sb3_tensors:
                members.append(sb3_tensors[f"{prefix}qf{len(members)}.{layer}.{kind}"])
            if like.dim() == 0:  # Adam's step count: the same for every member
                assert all(bool(m == members[0]) for m in members), key
                out[key] = members[0]
            else:
                out[key] = th.stack([w.t() if kind == "weight" else w.unsqueeze(0) for w in members])
        else:
            raise KeyError(f"no SB3 counterpart of {key}")
        assert out[key].shape == like.shape, key
    return out


def assert_same_state(sb3_module: th.nn.Module, lit_module: th.nn.Module, **tol: float) -> None:
    """Same parameters and buffers (SB3's mapped to lit_sb3's layout)."""
    b = lit_module.state_dict()
    a = to_lit_layout(sb3_module.state_dict(), b)
    for key in b:
        np.testing.assert_allclose(_np(b[key]), _np(a[key]), err_msg=key, **(tol or EXACT))


def _named_optimizer_state(optimizer: th.optim.Optimizer, module: th.nn.Module) -> dict[str, dict[str, Any]]:
    names = {id(p): n for n, p in module.named_parameters()}
    return {names[id(p)]: s for p, s in optimizer.state.items()}


def assert_same_optimizer(
    sb3_opt: th.optim.Optimizer,
    lit_opt: th.optim.Optimizer,
    sb3_module: th.nn.Module | None = None,
    lit_module: th.nn.Module | None = None,
    **tol: float,
) -> None:
    """Same optimiser state (Adam: step, exp_avg, exp_avg_sq) for every parameter (named through the modules, SB3's mapped
    to lit_sb3's layout; a single bare tensor without modules), and the same learning rate."""
    assert [g["lr"] for g in sb3_opt.param_groups] == [g["lr"] for g in lit_opt.param_groups]
    if sb3_module is None or lit_module is None:
        a_states = {"p": sb3_opt.state[sb3_opt.param_groups[0]["params"][0]]}
        b_states = {"p": lit_opt.state[lit_opt.param_groups[0]["params"][0]]}
    else:
        a_states = _named_optimizer_state(sb3_opt, sb3_module)
        b_states = _named_optimizer_state(lit_opt, lit_module)
    assert b_states and len(b_states) <= len(a_states), "lit_sb3's optimiser state is missing or larger"
    names = sorted(next(iter(a_states.values())))  # Adam: step, exp_avg, exp_avg_sq; RMSprop: step, square_avg
    assert names == sorted(next(iter(b_states.values())))
    for name in names:
        b = {k: v[name] for k, v in b_states.items()}
        a = to_lit_layout({k: v[name] for k, v in a_states.items()}, b)
        for key in b:
            np.testing.assert_allclose(_np(b[key]), _np(a[key]), err_msg=f"{key}.{name}", **(tol or EXACT))


def assert_same_replay(sb3_buffer: Any, lit_buffer: Any, **tol: float) -> None:
    """The same stored transitions, row by row (lit_sb3 stores float32, as SB3 does for these spaces); dones
    and timeouts always exactly."""
    assert (sb3_buffer.pos, sb3_buffer.full) == (lit_buffer.pos, lit_buffer.full)
    n = sb3_buffer.buffer_size if sb3_buffer.full else sb3_buffer.pos
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
        a, b = getattr(sb3_buffer, name)[:n], _np(getattr(lit_buffer, name)[:n])
        exact = name in ("dones", "timeouts")
        np.testing.assert_allclose(b.reshape(a.shape), a, err_msg=name, **(EXACT if exact else tol or EXACT))


# Losses logged as the mean over the gradient steps of one train() call: SB3 averages the ``.item()`` floats in
# float64 (``np.mean``), lit_sb3 the float32 loss tensors (no ``.item()`` per step): one float32 sum over the steps
# (tests/tolerances.py: reassociation_rtol of the steps per call; a signed loss may cancel) while every per-step
# loss, parameter and optimiser state is bitwise equal.
def mean_loss_tol(steps_per_call: int) -> dict[str, float]:
    """Tolerance of a loss averaged over ``steps_per_call`` gradient steps in float32 against float64."""
    return dict(rtol=reassociation_rtol(steps_per_call), atol=0.0)


def assert_same_records(
    recorded: dict[str, dict[str, list[float]]],
    exact: tuple[str, ...],
    means: tuple[str, ...] = (),
    tol: dict[str, float] | None = None,
    steps_per_call: int = 1,
) -> None:
    """The logged values of ``exact`` keys are equal and those of ``means`` (averaged losses) equal to
    ``tol`` or ``mean_loss_tol(steps_per_call)``, record by record."""
    for key in exact + means:
        assert recorded["sb3"].get(key), f"SB3 never recorded {key}"
        assert len(recorded["lit"].get(key, [])) == len(recorded["sb3"][key]), key
        key_tol = (tol or mean_loss_tol(steps_per_call)) if key in means else EXACT
        np.testing.assert_allclose(recorded["lit"][key], recorded["sb3"][key], err_msg=key, **key_tol)


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
    sb3_model, lit_model, sb3_trace, lit_trace = _run_pair(
        "DQN",
        "CartPole-v1",
        total,
        kwargs,
        n_envs=n_envs,
        max_episode_steps=40,
        trace=(("exploration_rate", "_n_calls"), ("q_net_target", "q_net")),
    )
    sb3_rows, lit_rows = sb3_trace.rows, lit_trace.rows
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
    assert_same_optimizer(sb3_model.policy.optimizer, lit_model.policy.optimizer, sb3_model.policy, lit_model.policy)
    assert (lit_model._n_calls, lit_model._n_updates) == (sb3_model._n_calls, sb3_model._n_updates)
    assert lit_model.exploration_rate == sb3_model.exploration_rate
    steps = kwargs["gradient_steps"]
    assert_same_records(
        recorded, ("train/n_updates", "train/learning_rate"), means=("train/loss",), steps_per_call=steps
    )


def test_fused_adam_matches_sb3_default_adam(same_replay_indices: None) -> None:
    """lit_sb3's default fused Adam against SB3's default (unfused, single-tensor) Adam: the same DQN run,
    96 updates. The two kernels round differently (the fused one computes the update in one pass), so values
    agree to float32 precision (measured relative differences ~1e-6), not bitwise."""
    sb3_model, lit_model, _, _ = _run_pair("DQN", "CartPole-v1", 384, DQN_KWARGS, max_episode_steps=40, sb3_fused=False)
    assert not sb3_model.policy.optimizer.defaults["fused"] and lit_model.policy.optimizer.defaults["fused"]
    assert lit_model._n_updates == sb3_model._n_updates == 96
    tol = model_tolerances(lit_model)  # the kernels round each update differently: the reassociation bound applies
    assert_same_state(sb3_model.policy, lit_model.policy, **tol)
    assert_same_optimizer(
        sb3_model.policy.optimizer, lit_model.policy.optimizer, sb3_model.policy, lit_model.policy, **tol
    )


# ---------------------------------------------------------------------------------------------------------
# SAC, TD3, DDPG
# ---------------------------------------------------------------------------------------------------------
# Pendulum-v1 (200-step time limit: 300 steps contain a timeout), warm-up of uniform random actions, then one
# gradient step per env step; TD3/DDPG with Gaussian action noise (numpy stream) and TD3's target policy noise
# and SAC's action sampling on the torch stream, which both libraries consume in the same order.
# Not bitwise: lit_sb3 re-associates some float operations for speed (TD3/DDPG/SAC evaluate the critics in one
# batched ``forward_stacked`` call and take ``n_critics * mse`` of the stack instead of a sum of per-critic
# MSEs; target updates are ``_foreach_lerp_``, i.e. ``target + tau * (source - target)`` instead of SB3's
# ``(1 - tau) * target + tau * source``). Each costs about one float32 ulp per update; the tolerance bounds what
# ~200 updates compound to (model_tolerances: tests/tolerances.py, from the run's update count, lr, Adam's betas and
# longest reduction; e.g. TD3, 200 updates at lr 1e-3 over 64-term sums: 4.8e-4 absolute, 7.6e-4 relative; measured
# <= 1.4e-5 relative on parameter checksums), far below any algorithmic difference (a wrong sign, coefficient or
# order of updates changes values at the 1e-2..1 level within a few updates).


CONTINUOUS = {
    "SAC": (dict(learning_starts=100, batch_size=32, policy_kwargs=dict(net_arch=[32, 32])), None),
    "TD3": (dict(learning_starts=100, batch_size=32, policy_kwargs=dict(net_arch=[32, 32])), 0.1),
    "DDPG": (dict(learning_starts=100, batch_size=32, policy_kwargs=dict(net_arch=[32, 32])), 0.1),
}


def _continuous_nets(model: Any) -> list[tuple[str, th.nn.Module]]:
    return [(name, getattr(model, name)) for name in ("actor", "actor_target", "critic", "critic_target")
            if getattr(model, name, None) is not None]  # fmt: skip


@pytest.mark.parametrize("algo", sorted(CONTINUOUS))
def test_continuous_learn_lockstep(algo: str, same_replay_indices: None, recorded: dict) -> None:
    """Scaled actions in the buffer, terminal observations and timeouts, actor/critic/targets, both Adam
    states, SAC's entropy coefficient and its optimiser, the logged losses."""
    kwargs, noise_std = CONTINUOUS[algo]
    total = 300
    sb3_model, lit_model, sb3_trace, lit_trace = _run_pair(
        algo, "Pendulum-v1", total, kwargs, noise_std=noise_std, trace=((), ("actor",))
    )
    sb3_rows, lit_rows = sb3_trace.rows, lit_trace.rows
    tol = model_tolerances(lit_model)
    np.testing.assert_allclose(np.array(lit_rows), np.array(sb3_rows), **tol)
    buffer = sb3_model.replay_buffer
    assert buffer.timeouts.any() and np.abs(buffer.actions).max() <= 1.0
    # the warm-up (uniform actions, no update yet) is bitwise equal
    warm = kwargs["learning_starts"]
    np.testing.assert_array_equal(
        _np(lit_model.replay_buffer.actions[:warm]).reshape(-1), buffer.actions[:warm].reshape(-1)
    )
    assert_same_replay(buffer, lit_model.replay_buffer, **tol)
    for (name, a), (lit_name, b) in zip(_continuous_nets(sb3_model), _continuous_nets(lit_model), strict=True):
        assert name == lit_name
        assert_same_state(a, b, **tol)
    assert_same_optimizer(sb3_model.actor.optimizer, lit_model.actor.optimizer, sb3_model.actor, lit_model.actor, **tol)
    assert_same_optimizer(
        sb3_model.critic.optimizer, lit_model.critic.optimizer, sb3_model.critic, lit_model.critic, **tol
    )
    assert lit_model._n_updates == sb3_model._n_updates == total - kwargs["learning_starts"]
    means: tuple[str, ...] = ("train/actor_loss", "train/critic_loss")
    if algo == "SAC":
        np.testing.assert_allclose(_np(lit_model.log_ent_coef), _np(sb3_model.log_ent_coef), **tol)
        assert_same_optimizer(sb3_model.ent_coef_optimizer, lit_model.ent_coef_optimizer, **tol)
        means += ("train/ent_coef", "train/ent_coef_loss")
    assert_same_records(recorded, ("train/n_updates", "train/learning_rate"), means=means, tol=tol)


# ---------------------------------------------------------------------------------------------------------
# PPO, A2C
# ---------------------------------------------------------------------------------------------------------
# CartPole-v1 cut at 20 steps (time-outs whose terminal value is bootstrapped into the reward), 2 envs, small
# networks; the minibatch permutations are injected. Budgets are whole rollouts (SB3 always finishes one).
ON_POLICY = {
    "PPO": dict(n_steps=16, batch_size=8, n_epochs=2, policy_kwargs=dict(net_arch=[16, 16])),
    "A2C": dict(n_steps=5, policy_kwargs=dict(net_arch=[16, 16])),
}


@pytest.mark.parametrize("algo", sorted(ON_POLICY))
def test_on_policy_learn_lockstep(algo: str, same_permutations: None, recorded: dict) -> None:
    """Every rollout (observations, actions, rewards with bootstrapped time-outs, episode starts, values,
    log-probs, GAE returns and advantages), the policy and optimiser after training, the logged losses."""
    kwargs = ON_POLICY[algo]
    n_envs = 2
    total = kwargs["n_steps"] * n_envs * 6
    sb3_model, lit_model, sb3_trace, lit_trace = _run_pair(
        algo, "CartPole-v1", total, kwargs, n_envs=n_envs, max_episode_steps=20, trace=((), ("policy",))
    )
    assert len(lit_trace.rollouts) == len(sb3_trace.rollouts) == 6
    for i, (a, b) in enumerate(zip(sb3_trace.rollouts, lit_trace.rollouts, strict=True)):
        for name in ROLLOUT_FIELDS:
            np.testing.assert_array_equal(b[name].reshape(a[name].shape), a[name], err_msg=f"rollout {i} {name}")
    np.testing.assert_array_equal(np.array(lit_trace.rows), np.array(sb3_trace.rows))
    # time-outs happened and were bootstrapped (a reward above CartPole's 1.0)
    assert max(r["rewards"].max() for r in sb3_trace.rollouts) > 1.0
    assert_same_state(sb3_model.policy, lit_model.policy)
    assert_same_optimizer(sb3_model.policy.optimizer, lit_model.policy.optimizer, sb3_model.policy, lit_model.policy)
    assert lit_model._n_updates == sb3_model._n_updates
    policy_loss = "train/policy_gradient_loss" if algo == "PPO" else "train/policy_loss"
    keys = (policy_loss, "train/value_loss", "train/entropy_loss")
    exact = ("train/n_updates", "train/learning_rate") + (("train/clip_range",) if algo == "PPO" else ())
    steps = kwargs["n_epochs"] * -(-kwargs["n_steps"] * n_envs // kwargs["batch_size"]) if algo == "PPO" else 1
    assert_same_records(recorded, exact, means=keys, steps_per_call=steps)


@pytest.mark.slow
def test_dqn_zoo_cartpole_whole_run_lockstep(same_replay_indices: None) -> None:
    """Issue 18's question, mechanically: DQN at the RL Zoo's exact CartPole-v1 settings for the zoo's whole
    budget (50,000 steps, rounded up to SB3's 196 collections of 256 = 50,176 steps; 24,704 updates) is the same
    run in both libraries: every transition, the final Q-network and target, Adam's state and the final greedy
    evaluation."""
    from lit_sb3.zoo.config import resolve

    kwargs = resolve("dqn", "CartPole-v1").algo_kwargs
    assert kwargs["train_freq"] == 256 and kwargs["gradient_steps"] == 128 and kwargs["target_update_interval"] == 10
    sb3_model, lit_model, _, _ = _run_pair("DQN", "CartPole-v1", 50_176, kwargs)
    assert lit_model._n_updates == sb3_model._n_updates == 24_704
    assert_same_replay(sb3_model.replay_buffer, lit_model.replay_buffer)
    assert_same_state(sb3_model.policy, lit_model.policy)
    assert_same_optimizer(sb3_model.policy.optimizer, lit_model.policy.optimizer, sb3_model.policy, lit_model.policy)
    from stable_baselines3.common.evaluation import evaluate_policy as sb3_evaluate

    from lit_sb3.core.evaluation import evaluate_policy as lit_evaluate

    sb3_score = sb3_evaluate(sb3_model, sb3_make_vec_env("CartPole-v1", seed=SEED + 10_000), n_eval_episodes=10)
    lit_score = lit_evaluate(lit_model, lit_make_vec_env("CartPole-v1", seed=SEED + 10_000), n_eval_episodes=10)
    assert float(lit_score[0]) == float(sb3_score[0])
