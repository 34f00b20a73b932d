"""Seed-batched PPO and A2C: K seeds of one on-policy algorithm trained as one program.

Each seed keeps what its separate run has: its member model (built with its seed exactly as the single class
builds it, so its initial parameters are the separate run's), its VecEnv, its torch RNG stream (the global
generator's state right after its member was built: action sampling and minibatch shuffling draw from it as the
separate run would), its rollout columns, GAE, advantage normalisation, gradient-norm clipping over its own
parameters, optimiser state, ``target_kl`` early stop and episode statistics.

The K policies are stacked along a leading seed dimension (:func:`torch.func.stack_module_state`): one batched
forward per env step for all seeds, one batched loss/backward/optimiser step per minibatch. MLP policies on Box
observations with a Categorical or diagonal-Gaussian distribution (the classic-control and MuJoCo cases) run as
hand-batched ``baddbmm`` layers; every other policy (CNN, MultiDiscrete/MultiBinary actions, gSDE) runs the single
policy's own code under :func:`torch.func.vmap` of :func:`torch.func.functional_call`. Measured on one CPU thread
(loaded 2-core box, K=4, CartPole 64-64 policy, one rollout step): baddbmm ~0.35 ms, vmap ~3.5 ms, one single-seed
forward ~1.1 ms; hence the hand-batched path where it applies (as the off-policy batches' ``EnsembleLinear``).
The losses are the single classes' (:meth:`PPO.train <lit_sb3.algorithms.ppo.PPO.train>`,
:meth:`A2C.train <lit_sb3.algorithms.a2c.A2C.train>`) with each seed's reductions over its own samples, so that a
batched update equals the K separate updates to float tolerance, and a batched seed retraces its separate run
(``tests/test_seed_batch_on_policy.py``).

The optimiser is :class:`~lit_sb3.optim.PerSeedAdam` / ``PerSeedRMSprop``: a seed that
stopped on ``target_kl`` (or failed) neither moves nor ages its bias correction.
"""

from __future__ import annotations

import copy
import math
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from lit_sb3.algorithms.a2c import A2C
from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm, run_iterations
from lit_sb3.algorithms.ppo import PPO
from lit_sb3.algorithms.seed_batch.base import SeedBatchModule, clip_grad_norm_per_seed
from lit_sb3.buffers.rollout import RolloutBuffer
from lit_sb3.optim import PerSeedOptimizer, make_per_seed_optimizer
from lit_sb3.policies.base import ActorCriticPolicy
from lit_sb3.policies.distributions import (
    DiagGaussianDistribution,
    Distribution,
    StateDependentNoiseDistribution,
    make_proba_distribution,
)
from lit_sb3.utils.math import safe_mean

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# parameter-less element-wise activations the hand-batched MLP path applies as they are
_ELEMENTWISE = (nn.Tanh, nn.ReLU, nn.ELU, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Identity, nn.Softplus)

__all__ = [
    "OnPolicySeedBatch",
    "SeedBatchA2C",
    "SeedBatchPPO",
    "SeedBatchRolloutBuffer",
    "SeedRNG",
    "StackedActorCritic",
    "a2c_update",
    "ppo_update",
]


# ----------------------------------------------------------------------
# Per-seed RNG streams
# ----------------------------------------------------------------------


class SeedRNG:
    """One torch RNG stream per seed: a :class:`torch.Generator` on the sampling device for each seed.

    The single classes draw from torch's global generator (``th.multinomial``, ``th.randn_like``,
    ``th.randperm``). Seed ``k``'s generator starts in the state its separate run's global generator is in when
    training starts, so the same draws in the same order are the same numbers: the hand-batched path and the
    shuffling pass the generator explicitly; code that only knows the global generator (the distributions' own
    ``sample``, gSDE's noise matrices) runs inside :meth:`scope`, which swaps the generator's state in and out.

    Args:
        states: the CPU generator state of each seed after its member was built.
        device: the device the samples are drawn on.
        seeds: the seeds: on CUDA each stream starts as ``th.cuda.manual_seed(seed)`` leaves it (what the separate
            run's ``set_random_seed`` does; building the policy on the CPU draws nothing from it).
    """

    def __init__(self, states: Sequence[th.Tensor], device: th.device, seeds: Sequence[int]) -> None:
        self.device = device
        self.generators: list[th.Generator] = []
        for state, seed in zip(states, seeds):
            generator = th.Generator(device=device)
            if device.type == "cpu":
                generator.set_state(state)
            else:
                generator.manual_seed(int(seed))
            self.generators.append(generator)

    def _default(self) -> th.Generator:
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else th.cuda.current_device()
            return th.cuda.default_generators[index]
        return th.random.default_generator

    @contextmanager
    def scope(self, k: int) -> Iterator[None]:
        """Draws from torch's default generator inside come from seed ``k``'s stream (which advances); the global
        stream is left as it was."""
        default = self._default()
        saved = default.get_state()
        default.set_state(self.generators[k].get_state())
        try:
            yield
        finally:
            self.generators[k].set_state(default.get_state())
            default.set_state(saved)


# ----------------------------------------------------------------------
# The stacked policy
# ----------------------------------------------------------------------


class _PolicyCalls(nn.Module):
    """The single policy behind one ``forward``, so that :func:`functional_call` can reach its methods."""

    def __init__(self, policy: ActorCriticPolicy) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, mode: str, *args: Any) -> Any:
        policy = self.policy
        if mode == "step":  # values, distribution parameters and the policy latent (gSDE's noise features)
            latent_pi, latent_vf = policy._latents(args[0])
            return policy.value_net(latent_vf), policy.action_net(latent_pi), latent_pi
        if mode == "values":
            return policy.predict_values(args[0])
        if mode == "evaluate":
            values, log_prob, entropy = policy.evaluate_actions(args[0], args[1])
            # vmap returns tensors only: no closed-form entropy is approximated by -log_prob, as the losses do
            return values.flatten(), log_prob, -log_prob if entropy is None else entropy
        raise ValueError(f"unknown policy call {mode!r}")


class StackedActorCritic(nn.Module):
    """K :class:`ActorCriticPolicy` members stacked along a leading seed dimension.

    Parameters are ``[K, *shape]`` leaves (``stacked.<name with dots as '__'>``); :meth:`call` runs them as
    hand-batched matmuls where the policy allows (:attr:`fast`), else as vmapped functional calls of a
    parameter-less copy of the first member on the ``meta`` device.

    Args:
        policies: the K members' policies (same class and architecture).
    """

    def __init__(self, policies: Sequence[ActorCriticPolicy]) -> None:
        super().__init__()
        first = policies[0]
        for policy in policies[1:]:
            if [(n, p.shape) for n, p in policy.named_parameters()] != [
                (n, p.shape) for n, p in first.named_parameters()
            ]:
                raise ValueError("StackedActorCritic: the members' policies must have the same architecture.")
        self.n_seeds = len(policies)
        params, buffers = stack_module_state(list(policies))
        self.names = list(params)
        self.stacked = nn.ParameterDict(
            {n.replace(".", "__"): nn.Parameter(p.detach().clone()) for n, p in params.items()}
        )
        self.buffer_names = list(buffers)
        for i, value in enumerate(buffers.values()):
            self.register_buffer(f"stacked_buffer_{i}", value.clone())
        self._dist_factory: Callable[[], Distribution] = lambda: make_proba_distribution(
            first.action_space, use_sde=first.use_sde, dist_kwargs=first.dist_kwargs
        )
        self._latent_sde_dim = getattr(first.action_dist, "latent_sde_dim", None)
        # a parameter-less copy (meta device) for the functional calls; the distribution is built afresh (gSDE's
        # exploration matrices are not graph leaves and cannot be deep-copied), the optimizer is not needed
        memo = {id(first.action_dist): self._make_distribution(), id(first.optimizer): None}
        template = copy.deepcopy(first, memo).to("meta")
        self._calls = [_PolicyCalls(template)]  # a list: not a submodule (no parameters of its own to move/save)
        self.action_space = first.action_space
        self.squash_output = first.squash_output
        self.use_sde = first.use_sde
        self.distributions = [self._make_distribution() for _ in range(self.n_seeds)]
        self.fast = self._check_fast(first)

    def _make_distribution(self) -> Distribution:
        dist = self._dist_factory()
        if isinstance(dist, StateDependentNoiseDistribution):
            dist.latent_sde_dim = self._latent_sde_dim
        return dist

    def parameter_list(self) -> list[nn.Parameter]:
        """The stacked parameters, in the single policy's ``parameters()`` order."""
        return [self.stacked[n.replace(".", "__")] for n in self.names]

    def _params(self) -> dict[str, th.Tensor]:
        params: dict[str, th.Tensor] = {f"policy.{n}": self.stacked[n.replace(".", "__")] for n in self.names}
        for i, name in enumerate(self.buffer_names):
            params[f"policy.{name}"] = getattr(self, f"stacked_buffer_{i}")
        return params

    def call(self, mode: str, *args: Any) -> Any:
        """Run the single policy's ``mode`` call (``"step"``, ``"values"``, ``"evaluate"``) for every seed: each
        input and output has the seed dim first. Hand-batched matmuls when the policy is an MLP on a Box
        observation with a Categorical or diagonal Gaussian distribution, else vmap."""
        if self.fast:
            return getattr(self, f"_fast_{mode}")(*args)
        calls = self._calls[0]

        def one(params: dict[str, th.Tensor], *inputs: Any) -> Any:
            return functional_call(calls, params, (mode, *inputs))

        return vmap(one, randomness="error")(self._params(), *args)

    # -- the hand-batched path (what vmap computes, without its per-op cost: ~10x faster for 64-unit MLPs) --

    def _check_fast(self, policy: ActorCriticPolicy) -> bool:
        from lit_sb3.policies.distributions import CategoricalDistribution
        from lit_sb3.policies.torch_layers import FlattenExtractor

        if not isinstance(policy.observation_space, spaces.Box) or self.buffer_names:
            return False
        if (
            type(policy.pi_features_extractor) is not FlattenExtractor
            or type(policy.vf_features_extractor) is not FlattenExtractor
        ):
            return False
        if type(policy.action_dist) not in (CategoricalDistribution, DiagGaussianDistribution):
            return False
        layers = [*policy.mlp_extractor.policy_net, *policy.mlp_extractor.value_net]
        return all(isinstance(m, (nn.Linear, *_ELEMENTWISE)) for m in layers) and isinstance(
            policy.action_net, nn.Linear
        )

    def _linear(self, x: th.Tensor, name: str) -> th.Tensor:
        weight, bias = self.stacked[f"{name}__weight"], self.stacked[f"{name}__bias"]
        return th.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    def _mlp(self, x: th.Tensor, prefix: str, modules: nn.Sequential) -> th.Tensor:
        for i, module in enumerate(modules):
            x = self._linear(x, f"{prefix}__{i}") if isinstance(module, nn.Linear) else module(x)
        return x

    def _features(self, obs: th.Tensor) -> th.Tensor:
        from lit_sb3.core.preprocessing import preprocess_obs

        policy = self._calls[0].policy
        x = preprocess_obs(obs, policy.observation_space, normalize_images=policy.normalize_images)
        return x.flatten(2).to(self.stacked["action_net__weight"].dtype)

    def _fast_latents(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        extractor = self._calls[0].policy.mlp_extractor
        features = self._features(obs)
        latent_pi = self._mlp(features, "mlp_extractor__policy_net", extractor.policy_net)
        latent_vf = self._mlp(features, "mlp_extractor__value_net", extractor.value_net)
        return latent_pi, latent_vf

    def _fast_step(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        latent_pi, latent_vf = self._fast_latents(obs)
        return self._linear(latent_vf, "value_net"), self._linear(latent_pi, "action_net"), latent_pi

    def _fast_values(self, obs: th.Tensor) -> th.Tensor:
        extractor = self._calls[0].policy.mlp_extractor
        latent_vf = self._mlp(self._features(obs), "mlp_extractor__value_net", extractor.value_net)
        return self._linear(latent_vf, "value_net")

    def _fast_log_prob_entropy(
        self, dist_params: th.Tensor, actions: th.Tensor, entropy: bool = True
    ) -> tuple[th.Tensor, th.Tensor | None]:
        """Log-probabilities and entropies ``[K, B]`` (the single distributions' formulas over the last dim)."""
        if "log_std" in self.stacked:  # diagonal Gaussian
            log_std = self.stacked["log_std"].unsqueeze(1)
            z = (actions - dist_params) / log_std.exp()
            log_prob = (-0.5 * z * z - log_std - _HALF_LOG_2PI).sum(-1)
            if not entropy:
                return log_prob, None
            return log_prob, (0.5 + _HALF_LOG_2PI + log_std).expand_as(dist_params).sum(-1)
        logits = dist_params - dist_params.logsumexp(dim=-1, keepdim=True)
        log_prob = logits.gather(-1, actions.long().reshape(*logits.shape[:-1], 1)).squeeze(-1)
        clamped = logits.clamp(min=th.finfo(logits.dtype).min)
        return log_prob, -(clamped.exp() * clamped).sum(-1)

    def _fast_evaluate(self, obs: th.Tensor, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        values, dist_params, _ = self._fast_step(obs)
        log_prob, entropy = self._fast_log_prob_entropy(dist_params, actions)
        assert entropy is not None
        return values.squeeze(-1), log_prob, entropy

    @th.no_grad()
    def act(self, obs: th.Tensor, rng: SeedRNG, skip: Sequence[int] = ()) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Sampled actions, values ``[K, E, 1]`` and log-probabilities ``[K, E]`` for observations ``[K, E, ...]``:
        one batched forward, then each seed's draw from its own stream (the single policy's draw). Seeds in
        ``skip`` (failed) get zero actions without a draw.

        Args:
            obs: the observations of all seeds.
            rng: the per-seed streams.
            skip: seed indices not to sample for.
        """
        values, dist_params, latent_pi = self.call("step", obs)
        if self.fast:
            generators = rng.generators
            if "log_std" in self.stacked:  # diagonal Gaussian: mean + std * N(0, 1), each seed's noise its own
                std = self.stacked["log_std"].exp()
                noise = th.stack(
                    [
                        th.zeros_like(dist_params[k])
                        if k in skip
                        else th.randn(dist_params[k].shape, generator=generators[k], device=obs.device)
                        for k in range(self.n_seeds)
                    ]
                )
                actions = dist_params + std.unsqueeze(1) * noise
                log_prob, _ = self._fast_log_prob_entropy(dist_params, actions, entropy=False)
            else:  # categorical: each seed's th.multinomial draw from its own stream
                logits = dist_params - dist_params.logsumexp(dim=-1, keepdim=True)
                probs = logits.exp()
                actions = th.stack(
                    [
                        th.zeros(probs.shape[1], dtype=th.long, device=obs.device)
                        if k in skip
                        else th.multinomial(probs[k], 1, True, generator=generators[k]).reshape(-1)
                        for k in range(self.n_seeds)
                    ]
                )
                log_prob = logits.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            return actions, values, log_prob
        actions_k, log_probs_k = [], []
        for k in range(self.n_seeds):
            dist = self.distribution(k, dist_params[k], latent_pi[k])
            if k in skip:
                action = th.zeros((dist_params.shape[1], *self.action_space.shape), device=obs.device)
                actions_k.append(action)
                log_probs_k.append(th.zeros(dist_params.shape[1], device=obs.device))
                continue
            with rng.scope(k):
                action = dist.get_actions()
            log_probs_k.append(dist.log_prob(action))
            actions_k.append(action.reshape((-1, *self.action_space.shape)))
        return th.stack(actions_k), values, th.stack(log_probs_k)

    def call_one(self, k: int, mode: str, *args: Any) -> Any:
        """``mode`` for seed ``k`` alone (no seed dim in inputs and outputs)."""
        params = {name: value[k] for name, value in self._params().items()}
        return functional_call(self._calls[0], params, (mode, *args))

    def log_std(self, k: int) -> th.Tensor:
        return self.stacked["log_std"][k]

    def distribution(self, k: int, mean_actions: th.Tensor, latent_pi: th.Tensor) -> Distribution:
        """Seed ``k``'s action distribution for its step outputs (the single policy's
        ``_get_action_dist_from_latent``)."""
        dist = self.distributions[k]
        if isinstance(dist, DiagGaussianDistribution):
            return dist.proba_distribution(mean_actions, self.log_std(k))
        if isinstance(dist, StateDependentNoiseDistribution):
            return dist.proba_distribution(mean_actions, self.log_std(k), latent_pi)
        return dist.proba_distribution(action_logits=mean_actions)

    def reset_noise(self, k: int, n_envs: int) -> None:
        """New gSDE exploration matrices for seed ``k`` (draws from the current torch stream)."""
        dist = self.distributions[k]
        assert isinstance(dist, StateDependentNoiseDistribution)
        dist.sample_weights(self.log_std(k).detach(), batch_size=n_envs)

    @th.no_grad()
    def load_member(self, k: int, policy: ActorCriticPolicy) -> None:
        """Copy seed ``k``'s current parameters (and buffers) into a single policy."""
        for name, param in policy.named_parameters():
            param.copy_(self.stacked[name.replace(".", "__")][k])
        for i, name in enumerate(self.buffer_names):
            policy.get_buffer(name).copy_(getattr(self, f"stacked_buffer_{i}")[k])


# ----------------------------------------------------------------------
# Rollout storage
# ----------------------------------------------------------------------


class SeedBatchSamples(NamedTuple):
    """One minibatch of every seed: each field ``[K, batch, ...]``."""

    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor


class SeedBatchRolloutBuffer(RolloutBuffer):
    """The rollouts of K seeds with ``n_envs`` envs each: a :class:`RolloutBuffer` of ``K * n_envs`` columns
    (seed-major), so that GAE runs per column exactly as each seed's own buffer; minibatches are drawn per seed.

    Seed ``k``'s flattened rollout is ordered as its single buffer's (env-major, then step), so the same
    permutation picks the same samples.

    Args:
        buffer_size: steps per env per rollout (``n_steps``).
        observation_space: observation space (not Dict).
        action_space: action space.
        n_seeds: K.
        n_envs: envs per seed.
        device: torch device of the samples.
        gae_lambda: GAE lambda.
        gamma: discount factor.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        n_seeds: int,
        n_envs: int = 1,
        device: th.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
    ) -> None:
        if isinstance(observation_space, spaces.Dict):
            raise ValueError("seed-batched PPO/A2C do not support Dict observation spaces (MultiInputPolicy) yet.")
        self.n_seeds = n_seeds
        self.envs_per_seed = n_envs
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_seeds * n_envs)

    def per_seed(self, arr: np.ndarray) -> np.ndarray:
        """``[n_steps, K * n_envs, ...]`` -> ``[K, n_envs * n_steps, ...]`` in each single buffer's order."""
        n_steps, K, E = self.buffer_size, self.n_seeds, self.envs_per_seed
        arr = arr.reshape(n_steps, K, E, *arr.shape[2:])
        arr = np.moveaxis(arr, 0, 2)  # [K, E, n_steps, ...]
        return np.ascontiguousarray(arr.reshape(K, E * n_steps, *arr.shape[3:]))

    def _per_seed_tensor(self, arr: np.ndarray, dtype: th.dtype | None = None) -> th.Tensor:
        tensor = th.from_numpy(self.per_seed(arr))
        return tensor.to(device=self.device, dtype=dtype or tensor.dtype)

    def _prepare_tensors(self) -> None:
        self._flat = {
            "observations": self._per_seed_tensor(self.observations),
            "actions": self._per_seed_tensor(self.actions, th.float32),
            "values": self._per_seed_tensor(self.values),
            "log_probs": self._per_seed_tensor(self.log_probs),
            "advantages": self._per_seed_tensor(self.advantages),
            "returns": self._per_seed_tensor(self.returns),
        }

    def get_per_seed(self, batch_size: int | None, rng: SeedRNG) -> Generator[SeedBatchSamples, None, None]:
        """Yield minibatches of all seeds at once, each seed shuffled by its own stream (one pass).

        Args:
            batch_size: minibatch size per seed (None: the whole rollout).
            rng: the per-seed RNG streams.
        """
        if not self.full:
            raise RuntimeError(f"SeedBatchRolloutBuffer needs a full rollout ({self.buffer_size} steps).")
        if not self._flat:
            self._prepare_tensors()
        total = self.buffer_size * self.envs_per_seed
        batch_size = total if batch_size is None else batch_size
        indices = th.stack([th.randperm(total, generator=g, device=self.device) for g in rng.generators])
        rows = th.arange(self.n_seeds, device=self.device).unsqueeze(1)
        flat = self._flat
        for start in range(0, total, batch_size):
            idx = indices[:, start : start + batch_size]
            yield SeedBatchSamples(
                *(
                    flat[key][rows, idx]
                    for key in ("observations", "actions", "values", "log_probs", "advantages", "returns")
                )
            )  # type: ignore[index]

    def explained_variance(self) -> th.Tensor:
        """Per-seed explained variance of the values for the returns (``[K]``, NaN where returns are constant)."""
        values = th.from_numpy(self.per_seed(self.values)).double()
        returns = th.from_numpy(self.per_seed(self.returns)).double()
        var_y = returns.var(dim=1)
        ev = 1 - (returns - values).var(dim=1) / var_y
        return th.where(var_y == 0, th.full_like(ev, float("nan")), ev).float()


# ----------------------------------------------------------------------
# The updates (each seed's loss is the single class's)
# ----------------------------------------------------------------------


def _actions_for_loss(actions: th.Tensor, action_space: spaces.Space) -> th.Tensor:
    return actions.long().flatten(1) if isinstance(action_space, spaces.Discrete) else actions


class UpdateResult(NamedTuple):
    """Per-seed outcome of one update: the metrics to record (``[K]`` tensors or floats) and the finite flags."""

    metrics: dict[str, th.Tensor | float]
    finite: th.Tensor
    n_updates: th.Tensor


def ppo_update(
    policy: StackedActorCritic,
    optimizer: PerSeedOptimizer,
    buffer: SeedBatchRolloutBuffer,
    rng: SeedRNG,
    active: th.Tensor,
    *,
    n_epochs: int,
    batch_size: int,
    clip_range: float,
    clip_range_vf: float | None,
    normalize_advantage: bool,
    ent_coef: float,
    vf_coef: float,
    max_grad_norm: float,
    target_kl: float | None,
    verbose: int = 0,
) -> UpdateResult:
    """One PPO update of every active seed (:meth:`PPO.train` per seed).

    A seed whose approximate KL exceeds ``1.5 * target_kl`` stops for the rest of this update (no step for that
    minibatch nor any later one: its parameters and optimiser state stay put) while the others go on.

    Args:
        policy: the stacked policy.
        optimizer: its per-seed optimiser (learning rate already set).
        buffer: the filled rollout buffer.
        rng: per-seed RNG streams (minibatch shuffling).
        active: ``[K]`` bool, the seeds that update (not failed).
        n_epochs, batch_size, clip_range, clip_range_vf, normalize_advantage, ent_coef, vf_coef, max_grad_norm,
            target_kl: PPO's hyperparameters (the schedules already evaluated).
        verbose: print the early stops, as PPO does.
    """
    K = policy.n_seeds
    device = active.device
    params = policy.parameter_list()
    running = active.clone()
    all_running = bool(active.all())  # False once a seed stops (known here: the stop test syncs anyway)
    n_updates = th.zeros(K, dtype=th.long, device=device)
    sums: dict[str, th.Tensor] = {
        k: th.zeros(K, device=device) for k in ("pg", "value", "entropy", "kl", "clip_fraction")
    }
    counts = th.zeros(K, device=device)
    last_loss = th.full((K,), float("nan"), device=device)
    finite = th.ones(K, dtype=th.bool, device=device)

    def losses(data: SeedBatchSamples) -> tuple[th.Tensor, ...]:
        """PPO.train's minibatch losses, each seed's reduced over its own samples (dim 1): ``[K]`` each."""
        actions = _actions_for_loss(data.actions, policy.action_space)
        values, log_prob, entropy = policy.call("evaluate", data.observations, actions)
        advantages = data.advantages
        if normalize_advantage and advantages.shape[1] > 1:
            advantages = (advantages - advantages.mean(1, keepdim=True)) / (advantages.std(1, keepdim=True) + 1e-8)
        ratio = th.exp(log_prob - data.old_log_prob)
        policy_loss = -th.min(advantages * ratio, advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)).mean(1)
        if clip_range_vf is None:
            values_pred = values
        else:
            values_pred = data.old_values + th.clamp(values - data.old_values, -clip_range_vf, clip_range_vf)
        value_loss = ((data.returns - values_pred) ** 2).mean(1)
        entropy_loss = -entropy.mean(1)
        loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss
        with th.no_grad():
            log_ratio = log_prob - data.old_log_prob
            approx_kl = ((th.exp(log_ratio) - 1) - log_ratio).mean(1)
            clip_fraction = (th.abs(ratio - 1) > clip_range).float().mean(1)
        return loss, policy_loss.detach(), value_loss.detach(), entropy_loss.detach(), approx_kl, clip_fraction

    for epoch in range(n_epochs):
        epoch_ran = running.clone()
        for data in buffer.get_per_seed(batch_size, rng):
            loss, pg, value, entropy, kl, clip_fraction = losses(data)
            weight = running.float()
            for key, value_ in (
                ("pg", pg),
                ("value", value),
                ("entropy", entropy),
                ("kl", kl),
                ("clip_fraction", clip_fraction),
            ):
                sums[key] += th.where(running, value_.detach(), th.zeros_like(value_))
            counts += weight
            last_loss = th.where(running, loss.detach(), last_loss)
            if target_kl is not None:
                stop = running & (kl > 1.5 * target_kl)
                if bool(stop.any()):
                    if verbose >= 1:
                        for k in th.nonzero(stop).flatten().tolist():
                            print(
                                f"seed index {k}: early stopping at step {epoch} due to reaching max kl: {float(kl[k]):.2f}"
                            )
                    running = running & ~stop
                    all_running = False
                if not bool(running.any()):
                    break
            optimizer.zero_grad(set_to_none=True)
            (loss * running.float()).sum().backward()
            clip_grad_norm_per_seed(params, max_grad_norm, policy.n_seeds)
            optimizer.step(None if all_running else running)
        n_updates += epoch_ran.long()
        if not bool(running.any()):
            break
    finite &= th.isfinite(last_loss) | ~active
    metrics: dict[str, th.Tensor | float] = {
        "train/entropy_loss": sums["entropy"] / counts,
        "train/policy_gradient_loss": sums["pg"] / counts,
        "train/value_loss": sums["value"] / counts,
        "train/approx_kl": sums["kl"] / counts,
        "train/clip_fraction": sums["clip_fraction"] / counts,
        "train/loss": last_loss,
        "train/explained_variance": buffer.explained_variance().to(device),
        "train/clip_range": clip_range,
    }
    if clip_range_vf is not None:
        metrics["train/clip_range_vf"] = clip_range_vf
    _record_std(policy, metrics)
    return UpdateResult(metrics, finite, n_updates)


def a2c_update(
    policy: StackedActorCritic,
    optimizer: PerSeedOptimizer,
    buffer: SeedBatchRolloutBuffer,
    rng: SeedRNG,
    active: th.Tensor,
    *,
    normalize_advantage: bool,
    ent_coef: float,
    vf_coef: float,
    max_grad_norm: float,
) -> UpdateResult:
    """One A2C update of every active seed (:meth:`A2C.train` per seed: one step on the whole rollout).

    Args:
        policy: the stacked policy.
        optimizer: its per-seed optimiser (learning rate already set).
        buffer: the filled rollout buffer.
        rng: per-seed RNG streams (the single buffer's permutation of the full batch is drawn too).
        active: ``[K]`` bool, the seeds that update.
        normalize_advantage, ent_coef, vf_coef, max_grad_norm: A2C's hyperparameters.
    """
    params = policy.parameter_list()

    for data in buffer.get_per_seed(None, rng):
        actions = _actions_for_loss(data.actions, policy.action_space)
        values, log_prob, entropy = policy.call("evaluate", data.observations, actions)
        advantages = data.advantages
        if normalize_advantage:
            advantages = (advantages - advantages.mean(1, keepdim=True)) / (advantages.std(1, keepdim=True) + 1e-8)
        policy_loss = -(advantages * log_prob).mean(1)
        value_loss = ((data.returns - values) ** 2).mean(1)
        entropy_loss = -entropy.mean(1)
        loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss
        optimizer.zero_grad(set_to_none=True)
        (loss * active.float()).sum().backward()
        clip_grad_norm_per_seed(params, max_grad_norm, policy.n_seeds)
        optimizer.step(None if bool(active.all()) else active)
        policy_loss, value_loss, entropy_loss = policy_loss.detach(), value_loss.detach(), entropy_loss.detach()
    metrics: dict[str, th.Tensor | float] = {
        "train/explained_variance": buffer.explained_variance().to(active.device),
        "train/entropy_loss": entropy_loss,
        "train/policy_loss": policy_loss,
        "train/value_loss": value_loss,
    }
    _record_std(policy, metrics)
    finite = th.isfinite(loss.detach()) | ~active
    return UpdateResult(metrics, finite, active.long())


def _record_std(policy: StackedActorCritic, metrics: dict[str, th.Tensor | float]) -> None:
    if "log_std" in policy.stacked:
        log_std = policy.stacked["log_std"].detach()
        metrics["train/std"] = th.exp(log_std).reshape(policy.n_seeds, -1).mean(dim=1)


def episode_buffers(n_seeds: int, window: int) -> tuple[list[deque], list[deque]]:
    """Per-seed episode info and success deques (``stats_window_size`` each)."""
    return [deque(maxlen=window) for _ in range(n_seeds)], [deque(maxlen=window) for _ in range(n_seeds)]


# ----------------------------------------------------------------------
# The batched algorithms
# ----------------------------------------------------------------------


class OnPolicySeedBatch(SeedBatchModule):
    """K seeds of an on-policy algorithm (PPO, A2C): one collect/update cycle steps every active seed's VecEnv
    ``n_steps`` times (one batched policy forward per step), then runs the algorithm's update for all seeds.

    Args:
        algorithm: PPO or A2C.
        seeds: the seeds, one per member.
        policy: the policy alias or class.
        kwargs: the algorithm's constructor arguments (the same for every seed).
    """

    members: list[OnPolicyAlgorithm]  # type: ignore[assignment]
    min_env_steps_per_training_step: ClassVar[int] = OnPolicyAlgorithm.min_env_steps_per_training_step

    def __init__(
        self, algorithm: type[OnPolicyAlgorithm], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any
    ) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        first = self.members[0]
        if first.rollout_buffer_class is not None or first.rollout_buffer_kwargs:
            raise NotImplementedError(
                f"seed batching of {algorithm.__name__} uses its own rollout storage: rollout_buffer_class and "
                "rollout_buffer_kwargs are not supported."
            )
        for name in ("n_steps", "gamma", "gae_lambda", "ent_coef", "vf_coef", "max_grad_norm", "sde_sample_freq"):
            setattr(self, name, getattr(first, name))
        self.use_sde = first.use_sde
        self._iteration = 0
        self._seed_n_updates = [0] * self.n_seeds
        self.rollout_buffer: SeedBatchRolloutBuffer | None = None
        self.rng: SeedRNG | None = None
        self._rng_states: list[th.Tensor] = []

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _setup_model(self) -> None:
        """Build each member as its separate run would, keep the torch RNG state each leaves behind (its separate
        run's sampling/shuffling stream), then stack the policies."""
        states = []
        for member in self.members:
            if not member.policy_ready:
                member._setup_model()
            member.rollout_buffer = None  # type: ignore[assignment]  # the batch stores the rollouts
            states.append(th.get_rng_state())
        self._rng_states = states
        self._setup_lr_schedule()
        self._build_batch()
        self._finish_build()

    def _build_batch(self) -> None:
        first = self.members[0]
        self.policy = StackedActorCritic([m.policy for m in self.members]).to(self.device)  # type: ignore[assignment]
        self.optimizer = make_per_seed_optimizer(first.policy.optimizer, self.policy.parameter_list(), self.n_seeds)
        self.rollout_buffer = SeedBatchRolloutBuffer(
            self.n_steps,
            self.observation_space,
            self.action_space,
            self.n_seeds,
            self.n_envs,
            device=self.device,
            gae_lambda=self.gae_lambda,
            gamma=self.gamma,
        )
        self.rng = SeedRNG(self._rng_states, self.device, self.seeds)

    def _on_device_ready(self) -> None:
        if self.rollout_buffer is not None:
            self.rollout_buffer.device = self.device
        if self.rng is not None and self.rng.device != self.device:
            self.rng = SeedRNG(self._rng_states, self.device, self.seeds)
        self._active_mask = self._make_active_mask()

    def _prepare_fit(self) -> None:
        OnPolicyAlgorithm._prepare_fit(self)  # type: ignore[arg-type]  # the rounding to whole rollouts, logged

    @property
    def _default_log_every_n_steps(self) -> int:
        return self.members[0]._default_log_every_n_steps

    def configure_optimizers(self) -> th.optim.Optimizer:
        return self.optimizer

    # ------------------------------------------------------------------
    # The loop
    # ------------------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """Iterations (a rollout of ``n_steps`` per env for every seed, then the update) until at least
        ``min_env_steps_per_training_step`` env steps per seed, the budget, a stop or a step boundary (the single
        classes' loop)."""
        del batch, batch_idx
        run_iterations(self, self.collect_rollouts)

    def _obs_tensor(self, obs: np.ndarray) -> th.Tensor:
        return th.as_tensor(obs, device=self.device)

    def collect_rollouts(self) -> bool:
        """Fill the rollout storage with ``n_steps`` lockstep steps of every active seed's env; False if a callback
        stopped training. Failed seeds' envs do not step (their columns are never used)."""
        callback, buffer, rng, policy = self._rl_callback, self.rollout_buffer, self.rng, self.policy
        assert callback is not None and buffer is not None and rng is not None and self._last_obs is not None
        K, E = self.n_seeds, self.n_envs
        buffer.reset()
        if self.use_sde:
            self._reset_noise()
        callback.on_rollout_start()
        box = isinstance(self.action_space, spaces.Box)
        unscale = self.members[0].policy.unscale_action
        for n_steps in range(self.n_steps):
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self._reset_noise()
            skip = tuple(self.failed)
            actions_t, values, log_probs = policy.act(self._obs_tensor(self._last_obs), rng, skip)
            actions = actions_t.cpu().numpy()
            clipped_actions = actions
            if box:
                if policy.squash_output:
                    clipped_actions = unscale(actions)
                else:
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
            new_obs = self._last_obs.copy()
            rewards = np.zeros((K, E), dtype=np.float32)
            dones = np.zeros((K, E), dtype=bool)
            all_infos: list[list[dict[str, Any]]] = [[{} for _ in range(E)] for _ in range(K)]
            active = self.active_seeds
            for i in active:
                new_obs[i], rewards[i], dones[i], all_infos[i] = self.envs[i].step(clipped_actions[i])
            if not (np.isfinite(rewards).all() and np.isfinite(new_obs).all()):  # one check for all seeds
                self._fail_non_finite(active, new_obs, rewards, dones, all_infos)
            self.num_timesteps += E
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            for i in self.active_seeds:
                self._update_info_buffers(i, all_infos[i], dones[i])
            self._bootstrap_timeouts(new_obs, rewards, dones, all_infos)
            buffer.add(
                self._last_obs.reshape(K * E, *self._last_obs.shape[2:]),
                actions.reshape(K * E, -1),
                rewards.reshape(-1),
                self._last_episode_starts.reshape(-1),
                values.reshape(-1),
                log_probs.reshape(-1),
            )
            self._last_obs = new_obs
            self._last_episode_starts = dones
        with th.no_grad():
            last_values = policy.call("values", self._obs_tensor(new_obs)).float()
        buffer.compute_returns_and_advantage(last_values=last_values.reshape(-1), dones=dones.reshape(-1))
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _fail_non_finite(
        self,
        active: list[int],
        new_obs: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        infos: list[list[dict[str, Any]]],
    ) -> None:
        """Mask the seeds whose env returned a non-finite reward or observation; their step is undone (they keep
        their last observation, and their env steps no more)."""
        assert self._last_obs is not None
        for i in active:
            bad_reward = not np.isfinite(rewards[i]).all()
            if bad_reward or not np.isfinite(new_obs[i]).all():
                what = "reward" if bad_reward else "observation"
                self.fail_seed(
                    i, f"diverged: non-finite {what} from the env at step {self.num_timesteps + self.n_envs}"
                )
                new_obs[i], rewards[i], dones[i] = self._last_obs[i], 0.0, False
                infos[i] = [{} for _ in range(self.n_envs)]

    def _reset_noise(self) -> None:
        assert self.rng is not None
        for i in self.active_seeds:
            with self.rng.scope(i):
                self.policy.reset_noise(i, self.n_envs)

    def _bootstrap_timeouts(
        self, new_obs: np.ndarray, rewards: np.ndarray, dones: np.ndarray, infos: list[list[dict[str, Any]]]
    ) -> None:
        """Add ``gamma * V(terminal observation)`` to the rewards of time-outs (the single classes' bootstrap), with
        one batched value call for all seeds' time-outs of this step."""
        where = [
            (i, j)
            for i in self.active_seeds
            for j in np.flatnonzero(dones[i])
            if infos[i][j].get("terminal_observation") is not None and infos[i][j].get("TimeLimit.truncated", False)
        ]
        if not where:
            return
        terminal = new_obs.copy()
        for i, j in where:
            terminal[i, j] = infos[i][j]["terminal_observation"]
        with th.no_grad():
            values = self.policy.call("values", self._obs_tensor(terminal)).float().cpu().numpy()
        for i, j in where:
            rewards[i, j] += self.gamma * float(values[i, j, 0])

    def _finish_update(self, result: UpdateResult) -> None:
        """Record the update's per-seed metrics, count the updates, mask seeds whose loss was not finite."""
        n_updates = result.n_updates.cpu().tolist()
        self._seed_n_updates = [a + int(b) for a, b in zip(self._seed_n_updates, n_updates)]
        for key, value in result.metrics.items():
            if isinstance(value, th.Tensor):
                self.record(key, value)
            else:
                self.record_every_seed(key, value)
        self.record("train/n_updates", th.tensor(self._seed_n_updates))
        finite = result.finite.cpu().tolist()
        for i, ok in enumerate(finite):
            if not ok and i not in self.failed:
                self.fail_seed(i, f"diverged: non-finite loss at step {self.num_timesteps}")

    def dump_logs(self, iteration: int = 0) -> None:
        """Every active seed's rollout/time metrics and buffered train metrics (the single ``dump_logs``)."""
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, 1e-9)
        for i in self.active_seeds:
            metrics: dict[str, Any] = {
                "time/iterations": iteration,
                "time/fps": int((self.num_timesteps - self._num_timesteps_at_start) / time_elapsed),
                "time/time_elapsed": int(time_elapsed),
                "time/total_timesteps": self.num_timesteps,
            }
            infos, successes = self._ep_info_buffers[i], self._ep_success_buffers[i]
            if infos:
                metrics["rollout/ep_rew_mean"] = safe_mean([ep["r"] for ep in infos])
                metrics["rollout/ep_len_mean"] = safe_mean([ep["l"] for ep in infos])
            if successes:
                metrics["rollout/success_rate"] = safe_mean(successes)
            self.dump_seed_logs(i, metrics)

    # ------------------------------------------------------------------
    # Members
    # ------------------------------------------------------------------

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Seed index i's weights, optimiser state, counters, episode statistics and last observation."""
        assert isinstance(member, OnPolicyAlgorithm) and isinstance(self.policy, StackedActorCritic)
        self.policy.load_member(i, member.policy)
        optimizer = member.policy.optimizer
        params = list(member.policy.parameters())
        groups = optimizer.state_dict()["param_groups"]
        for group in groups:
            group["lr"] = self.optimizer.param_groups[0]["lr"]
        optimizer.load_state_dict({"state": self.optimizer.member_state(i, params), "param_groups": groups})
        member._n_updates = self._seed_n_updates[i]
        member._iteration = self._iteration
        member.ep_info_buffer = (
            deque(self._ep_info_buffers[i], maxlen=member.stats_window_size) if self._ep_info_buffers else None
        )
        member.ep_success_buffer = (
            deque(self._ep_success_buffers[i], maxlen=member.stats_window_size) if self._ep_success_buffers else None
        )
        if self._last_obs is not None:
            member._last_obs = self._last_obs[i].copy()
            member._last_episode_starts = self._last_episode_starts[i].copy()

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        return {"iteration": self._iteration}


class SeedBatchPPO(OnPolicySeedBatch):
    """K seeds of :class:`~lit_sb3.algorithms.ppo.PPO`; ``SeedBatch(PPO, seeds=[...], **ppo_kwargs)``."""

    algorithm = PPO
    members: list[PPO]  # type: ignore[assignment]

    def __init__(self, algorithm: type[PPO], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        first = self.members[0]
        for name in ("batch_size", "n_epochs", "normalize_advantage", "target_kl"):
            setattr(self, name, getattr(first, name))

    def train(self, mode: bool | None = None) -> Any:
        """PPO update of every active seed (``train(bool)`` is ``nn.Module.train``)."""
        if mode is not None:
            return nn.Module.train(self, mode)
        assert self.rollout_buffer is not None and self.rng is not None
        first = self.members[0]
        self._update_learning_rate(self.optimizer)
        progress = self._current_progress_remaining
        clip_range_vf = None if first.clip_range_vf_schedule is None else first.clip_range_vf_schedule(progress)
        result = ppo_update(
            self.policy,
            self.optimizer,
            self.rollout_buffer,
            self.rng,
            self._make_active_mask(),
            n_epochs=self.n_epochs,
            batch_size=self.batch_size,
            clip_range=first.clip_range_schedule(progress),
            clip_range_vf=clip_range_vf,
            normalize_advantage=self.normalize_advantage,
            ent_coef=self.ent_coef,
            vf_coef=self.vf_coef,
            max_grad_norm=self.max_grad_norm,
            target_kl=self.target_kl,
            verbose=self.verbose,
        )
        self._finish_update(result)
        return None


class SeedBatchA2C(OnPolicySeedBatch):
    """K seeds of :class:`~lit_sb3.algorithms.a2c.A2C`; ``SeedBatch(A2C, seeds=[...], **a2c_kwargs)``."""

    algorithm = A2C
    members: list[A2C]  # type: ignore[assignment]

    def __init__(self, algorithm: type[A2C], seeds: Any, policy: Any = "MlpPolicy", **kwargs: Any) -> None:
        super().__init__(algorithm, seeds, policy, **kwargs)
        self.normalize_advantage = self.members[0].normalize_advantage

    def train(self, mode: bool | None = None) -> Any:
        """A2C update of every active seed (``train(bool)`` is ``nn.Module.train``)."""
        if mode is not None:
            return nn.Module.train(self, mode)
        assert self.rollout_buffer is not None and self.rng is not None
        self._update_learning_rate(self.optimizer)
        result = a2c_update(
            self.policy,
            self.optimizer,
            self.rollout_buffer,
            self.rng,
            self._make_active_mask(),
            normalize_advantage=self.normalize_advantage,
            ent_coef=self.ent_coef,
            vf_coef=self.vf_coef,
            max_grad_norm=self.max_grad_norm,
        )
        self._finish_update(result)
        return None
