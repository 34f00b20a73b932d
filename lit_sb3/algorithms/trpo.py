"""Trust Region Policy Optimization — sb3-contrib's TRPO as a LightningModule.

Papers and references:
    * Schulman et al. 2015, "Trust Region Policy Optimization", https://arxiv.org/abs/1502.05477
    * Schulman 2016, PhD thesis (sub-sampled Fisher-vector products, pp. 40-42), http://joschu.net/docs/thesis.pdf
    * Spinning Up's TRPO notes, https://spinningup.openai.com/en/latest/algorithms/trpo.html

The rollout machinery is :class:`~lit_sb3.algorithms.on_policy.OnPolicyAlgorithm`'s (as PPO/A2C). The whole update
of one iteration is :meth:`TRPO.train`, readable top to bottom: the natural-gradient step of the actor
(:meth:`TRPO._natural_gradient_step`: conjugate gradient on Fisher-vector products, then a backtracking line search
inside the KL trust region), then ``n_critic_updates`` epochs of value regression. Argument names, defaults and
logged keys are sb3-contrib 2.9's.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.algorithms.on_policy import OnPolicyAlgorithm, seed_average, seed_normalize
from lit_sb3.buffers.rollout import RolloutBuffer
from lit_sb3.core.types import GymEnv, Schedule
from lit_sb3.policies.base import ActorCriticCnnPolicy, ActorCriticPolicy, BasePolicy, MultiInputActorCriticPolicy
from lit_sb3.policies.distributions import kl_divergence
from lit_sb3.policies.seed_stack import masked_seed_sum, seed_mean, seed_mse, seed_randn_like

__all__ = ["TRPO", "NaturalGradientStep", "conjugate_gradient"]


def _dot(a: th.Tensor, b: th.Tensor) -> th.Tensor:
    """``a . b`` of vectors ``[D]`` (the single-seed kernel, ``torch.dot``), or of each seed's row of ``[K, D]``."""
    return th.dot(a, b) if a.dim() == 1 else (a * b).sum(-1)


def _per_row(s: th.Tensor, like: th.Tensor) -> th.Tensor:
    """A per-seed scalar (``[]`` or ``[K]``) shaped to broadcast against ``like`` (``[D]`` or ``[K, D]``)."""
    return s if like.dim() == 1 else s.unsqueeze(-1)


def conjugate_gradient(
    matrix_vector_product: Callable[[th.Tensor], th.Tensor],
    b: th.Tensor,
    max_iter: int = 10,
    residual_tol: float = 1e-10,
    generators: list[th.Generator] | None = None,
) -> th.Tensor:
    """Approximately solve ``A x = b`` for a symmetric positive-definite ``A`` known only through ``A @ v``.

    As sb3-contrib (and modular_rl), ``x`` starts at ``1e-4 * N(0, I)`` rather than 0 (stable when ``b`` is tiny),
    which draws from the global torch RNG (K seeds: each from its own generator).

    K seeds (``b`` is ``[K, D]``, ``A`` block-diagonal): each seed's system is solved as alone, a seed whose
    residual falls below the tolerance stops (its ``x`` stays) while the others iterate.

    Args:
        matrix_vector_product: ``v -> A @ v``.
        b: the right-hand side, ``[D]`` or ``[K, D]``.
        max_iter: at most this many CG iterations (``cg_max_steps``).
        residual_tol: stop when the squared residual norm falls below it.
        generators: K seeds: one torch generator per seed for the start point.
    """
    x = 1e-4 * seed_randn_like(b, generators)
    residual = b - matrix_vector_product(x)  # r_0 = b - A x_0
    residual_sq = _dot(residual, residual)
    running = residual_sq >= residual_tol
    if not bool(running.any()):
        return x
    p = residual.clone()  # first search direction p_0 = r_0
    zero = th.zeros((), dtype=b.dtype, device=b.device)
    for i in range(max_iter):
        a_p = matrix_vector_product(p)
        alpha = th.where(running, residual_sq / _dot(p, a_p), zero)  # alpha_k = r_k^T r_k / p_k^T A p_k
        x = th.where(_per_row(running, x), x + _per_row(alpha, p) * p, x)  # x_{k+1} = x_k + alpha_k p_k
        if i == max_iter - 1:
            return x
        residual = residual - _per_row(alpha, a_p) * a_p  # r_{k+1} = r_k - alpha_k A p_k
        new_residual_sq = _dot(residual, residual)
        running = running & (new_residual_sq >= residual_tol)
        if not bool(running.any()):
            return x
        beta = th.where(running, new_residual_sq / residual_sq, zero)
        p = residual + _per_row(beta, p) * p  # p_{k+1} = r_{k+1} + beta_k p_k
        residual_sq = new_residual_sq
    return x


@dataclass
class NaturalGradientStep:
    """What one natural-gradient step of the actor computed (for logging and for tests).

    K seeds: one value per seed (lists, ``[K]`` tensors; ``search_direction`` ``[K, D]``).

    Attributes:
        search_direction: the CG solution ``x ~= F^-1 g``.
        max_step_size: ``sqrt(2 delta / (x^T F x))``, the full step's scale.
        step_coefficient: the line search's accepted ``shrinking_factor^i`` (the last one tried on failure).
        success: the line search found a step inside the trust region that improves the surrogate.
        policy_objective: the surrogate after the step (before it, on failure).
        kl_divergence: KL(old || new) after the step (0 on failure).
    """

    search_direction: th.Tensor
    max_step_size: float | list[float]
    step_coefficient: float | list[float]
    success: bool | list[bool]
    policy_objective: th.Tensor
    kl_divergence: th.Tensor


class TRPO(OnPolicyAlgorithm):
    """Trust Region Policy Optimization, with sb3-contrib 2.9's arguments and defaults.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a policy class.
        env: the training env (an env id, a gymnasium.Env, a callable returning one, or a VecEnv), wrapped as SB3
            does (Monitor, VecEnv, VecTransposeImage for channel-last images); None: given later to
            ``learn(env=...)`` or by an :class:`~lit_sb3.datamodule.RLEnvDataModule`.
        learning_rate: learning rate of the value function (constant or schedule).
        n_steps: steps per env per update (rollout size ``n_steps * n_envs``).
        batch_size: minibatch size of the value-function updates.
        gamma: discount factor.
        cg_max_steps: maximum conjugate-gradient iterations.
        cg_damping: damping added to the Fisher-vector product (``(F + damping I) v``).
        line_search_shrinking_factor: step-size reduction per backtracking iteration.
        line_search_max_iter: maximum backtracking iterations.
        n_critic_updates: epochs of value-function updates per policy update.
        gae_lambda: GAE bias/variance trade-off.
        use_sde: gSDE exploration.
        sde_sample_freq: gSDE noise resampling frequency.
        rollout_buffer_class: rollout buffer class.
        rollout_buffer_kwargs: rollout buffer kwargs.
        normalize_advantage: normalise the advantages.
        target_kl: the trust region: maximum KL between the old and the new policy.
        sub_sampling_factor: use every k-th sample of the (shuffled) rollout for the policy step (faster).
        monitor_wrapper: wrap a plain env in a ``Monitor`` (episode statistics for ``rollout/ep_rew_mean``).
        stats_window_size: episodes averaged for logging.
        tensorboard_log: folder of ``learn()``'s TensorBoard events (``<tensorboard_log>/<tb_log_name>_<n>``);
            None: ``learn()`` writes no log folder.
        policy_kwargs: policy arguments.
        verbose: verbosity level.
        seed: random seed.
        device: torch device.
        _init_setup_model: build the networks at once when ``env`` is given (SB3's default); else at the first fit.
    """

    zoo_name: ClassVar[str] = "trpo"
    # its update is written over the seed dimension (SeedBatch(TRPO, seeds=[...]))
    seed_batching: ClassVar[bool] = True
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (
        spaces.Box,
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
    )
    default_run_name: ClassVar[str] = "TRPO"
    search_space: ClassVar[str | None] = "trpo"
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": ActorCriticPolicy,
        "CnnPolicy": ActorCriticCnnPolicy,
        "MultiInputPolicy": MultiInputActorCriticPolicy,
    }

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str | None = None,
        learning_rate: float | Schedule = 1e-3,
        n_steps: int = 2048,
        batch_size: int = 128,
        gamma: float = 0.99,
        cg_max_steps: int = 15,
        cg_damping: float = 0.1,
        line_search_shrinking_factor: float = 0.8,
        line_search_max_iter: int = 10,
        n_critic_updates: int = 10,
        gae_lambda: float = 0.95,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        normalize_advantage: bool = True,
        target_kl: float = 0.01,
        sub_sampling_factor: int = 1,
        monitor_wrapper: bool = True,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        super().__init__(
            policy,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=0.0,  # TRPO has no entropy bonus
            vf_coef=0.0,  # the value function is fitted separately
            max_grad_norm=0.0,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            monitor_wrapper=monitor_wrapper,
            stats_window_size=stats_window_size,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            device=device,
            seed=seed,
        )
        checks = {
            "batch_size": (batch_size, batch_size >= 1, ">= 1"),
            "cg_max_steps": (cg_max_steps, cg_max_steps >= 0, ">= 0"),
            "cg_damping": (cg_damping, cg_damping >= 0, ">= 0"),
            "line_search_shrinking_factor": (
                line_search_shrinking_factor,
                0 < line_search_shrinking_factor <= 1,
                "in (0, 1]",
            ),
            "line_search_max_iter": (line_search_max_iter, line_search_max_iter >= 1, ">= 1"),
            "n_critic_updates": (n_critic_updates, n_critic_updates >= 0, ">= 0"),
            "target_kl": (target_kl, target_kl > 0, "> 0"),
            "sub_sampling_factor": (sub_sampling_factor, sub_sampling_factor >= 1, ">= 1"),
        }
        for name, (value, ok, allowed) in checks.items():
            if not ok:
                raise ValueError(f"TRPO: {name} must be {allowed}, got {value!r}.")
        self.batch_size = batch_size
        self.cg_max_steps = cg_max_steps
        self.cg_damping = cg_damping
        self.line_search_shrinking_factor = line_search_shrinking_factor
        self.line_search_max_iter = line_search_max_iter
        self.n_critic_updates = n_critic_updates
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self.sub_sampling_factor = sub_sampling_factor
        self.tensorboard_log = tensorboard_log
        self._init_env_and_model(env, _init_setup_model)

    def _setup_model(self) -> None:
        super()._setup_model()
        buffer_size = self.n_envs * self.n_steps
        if self.normalize_advantage and buffer_size <= 1:
            raise ValueError(
                f"`n_steps * n_envs` must be greater than 1 with normalize_advantage=True, got n_steps={self.n_steps}, "
                f"n_envs={self.n_envs}."
            )
        if buffer_size % self.batch_size > 0:
            warnings.warn(
                f"You have specified a mini-batch size of {self.batch_size}, but because the `RolloutBuffer` is of size "
                f"`n_steps * n_envs = {buffer_size}`, after every {buffer_size // self.batch_size} untruncated "
                f"mini-batches, there will be a truncated mini-batch of size {buffer_size % self.batch_size}\n"
                "We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
                f"Info: (n_steps={self.n_steps} and n_envs={self.n_envs})",
                stacklevel=2,
            )

    # ------------------------------------------------------------------
    # The update
    # ------------------------------------------------------------------

    def train(self, mode: bool | None = None) -> Any:
        """TRPO update: one natural-gradient step of the actor, then ``n_critic_updates`` epochs on the value.

        Written over the seed dimension K: each seed's trust-region step (its own conjugate gradient, step size and
        line search) and its own critic losses; K = 1 is the single-seed update.

        ``train(True/False)`` is ``nn.Module.train`` (``eval()`` calls it), not an update.
        """
        if mode is not None:
            return th.nn.Module.train(self, mode)
        K = self.n_seeds
        self.policy.set_training_mode(True)
        optimizer = self.policy.optimizer
        self._update_learning_rate(optimizer)

        # --- actor: the whole rollout in one batch (every k-th sample of a shuffled order when sub-sampling)
        buffer = self.rollout_buffer
        total = buffer.buffer_size * buffer.envs_per_seed
        if self.sub_sampling_factor > 1:
            generators = self.seed_generators
            if generators is None:
                indices = th.randperm(total, device=buffer.device)[:: self.sub_sampling_factor]
            else:
                indices = th.stack([th.randperm(total, generator=g, device=buffer.device) for g in generators])
                indices = indices[:, :: self.sub_sampling_factor]
        else:
            indices = th.arange(total, device=buffer.device)
            if K > 1:
                indices = indices.expand(K, total)
        rollout_data = buffer._get_samples(indices) if K == 1 else buffer.seed_samples(indices)
        step, actor_params = self._natural_gradient_step(
            rollout_data.observations, rollout_data.actions, rollout_data.old_log_prob, rollout_data.advantages
        )

        # --- critic: n_critic_updates epochs of minibatch regression on the returns, actor weights untouched
        running = self._live_seed_mask()
        value_losses = []
        for _ in range(self.n_critic_updates):
            for batch in self._minibatches(self.batch_size):
                values_pred = self.policy.predict_values(batch.observations)
                value_loss = seed_mse(batch.returns, values_pred.reshape(batch.returns.shape), K)  # E[(V(s) - R)^2]
                value_losses.append(value_loss.detach())
                optimizer.zero_grad(set_to_none=True)
                if running is None:  # K = 1
                    self._backward(value_loss.sum())
                else:  # a non-finite value loss stops its seed alone (failed after this update)
                    self._check_finite("value loss", value_loss)
                    running = running & th.isfinite(value_loss.detach())
                    self._backward(masked_seed_sum(value_loss, running))
                for param in actor_params:  # shared layers must not move outside the trust region
                    param.grad = None
                if running is None:
                    optimizer.step()
                else:
                    optimizer.step(running)

        self._count_updates(self._live_seed_mask())
        self.record("train/policy_objective", self._seed_metric(step.policy_objective.detach()))
        self.record(
            "train/value_loss", seed_average(value_losses, []) if K == 1 else self._critic_average(value_losses)
        )
        self.record("train/kl_divergence_loss", self._seed_metric(step.kl_divergence.detach()))
        self.record("train/explained_variance", self._explained_variance())
        success = step.success
        self.record("train/is_line_search_success", float(success) if K == 1 else [float(x) for x in success])
        if hasattr(self.policy, "log_std"):
            self.record("train/std", self._policy_std())
        self.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def _critic_average(self, value_losses: list[th.Tensor]) -> th.Tensor | float:
        """K > 1: each seed's mean value loss over the critic's minibatches."""
        return th.stack(value_losses).mean(0) if value_losses else np.nan

    def _actor_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """Parameters the trust region applies to: all but the value function's (by name, as sb3-contrib)."""
        return [(name, p) for name, p in self.policy.named_parameters() if "value" not in name and p.requires_grad]

    def _flat(self, tensors: list[th.Tensor]) -> th.Tensor:
        """Parameter-shaped tensors as one vector ``[D]`` (K = 1), or one row per seed ``[K, D]`` (seed-major
        stacked tensors: each row in the stacked layout of that seed)."""
        if self.n_seeds == 1:
            return th.cat([t.reshape(-1) for t in tensors])
        return th.cat([t.reshape(self.n_seeds, -1) for t in tensors], dim=1)

    def _natural_gradient_step(
        self, observations: Any, actions: th.Tensor, old_log_prob: th.Tensor, advantages: th.Tensor
    ) -> tuple[NaturalGradientStep, list[nn.Parameter]]:
        """One TRPO step of the actor on a batch (of every seed: each its own step); the actor's parameters are
        updated in place.

        Solves (Schulman et al. 2015, eq. 14, with the linear/quadratic approximations of Appendix C)

            maximize_theta  L(theta) = E[ pi_theta(a|s) / pi_old(a|s) * A(s, a) ]
            subject to      KL(pi_old, pi_theta) <= delta            (delta = target_kl)

        Args:
            observations: batch of observations (``[K, batch, ...]`` for K seeds).
            actions: the actions taken.
            old_log_prob: their log-probabilities under the rollout's policy.
            advantages: their advantages (normalised here, per seed, when ``normalize_advantage``).

        Returns:
            The step's numbers and the list of actor parameters (those the KL depends on).
        """
        K = self.n_seeds
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten(-2)  # [..., batch, 1] -> [..., batch]
        with th.no_grad():
            # pi_old: the current policy, frozen (its tensors carry no graph)
            old_distribution = copy.copy(self.policy.get_distribution(observations))
        distribution = self.policy.get_distribution(observations)
        log_prob = distribution.log_prob(actions)
        if self.normalize_advantage:
            advantages = seed_normalize(advantages, K)

        # surrogate objective L(theta) = E[ r(theta) A ],  r(theta) = pi_theta(a|s) / pi_old(a|s), per seed
        ratio = th.exp(log_prob - old_log_prob)
        policy_objective = seed_mean(advantages * ratio, K)
        # mean KL(pi_theta || pi_old): zero at theta_old, its Hessian there is the Fisher matrix F
        kl_div = seed_mean(kl_divergence(distribution, old_distribution), K)

        # g = grad L, and grad KL (kept as a graph for the Fisher-vector products), over the parameters the KL
        # depends on (those with a KL gradient; value-function parameters excluded by name). The seeds' losses are
        # independent: the gradient of their sum is each seed's gradient in its slice (F is block-diagonal).
        named = self._actor_parameters()
        kl_grads = th.autograd.grad(
            kl_div.sum(), [p for _, p in named], create_graph=True, retain_graph=True, allow_unused=True
        )
        actor_params = [p for (_, p), g in zip(named, kl_grads, strict=True) if g is not None]
        grad_kl = self._flat([g for g in kl_grads if g is not None])
        policy_gradient = self._flat(list(th.autograd.grad(policy_objective.sum(), actor_params, retain_graph=True)))

        def fisher_vector_product(vector: th.Tensor, retain_graph: bool = True) -> th.Tensor:
            # F v = grad (grad KL . v)  (Pearlmutter's trick: no F is ever formed), damped: (F + cg_damping I) v
            grads = th.autograd.grad((grad_kl * vector).sum(), actor_params, retain_graph=retain_graph)
            return self._flat(list(grads)) + self.cg_damping * vector

        # search direction x ~= F^-1 g by conjugate gradient (Appendix C)
        search_direction = conjugate_gradient(
            fisher_vector_product, policy_gradient, max_iter=self.cg_max_steps, generators=self.seed_generators
        )
        # the largest step along x inside the quadratic trust region: beta = sqrt(2 delta / (x^T F x)) (per seed)
        x_f_x = _dot(search_direction, fisher_vector_product(search_direction, retain_graph=False)).reshape(-1)
        max_steps = [float(np.sqrt(2 * self.target_kl / v)) for v in x_f_x.tolist()]

        # backtracking line search: theta = theta_old + shrinking_factor^i * beta * x, the first i whose step
        # improves the surrogate and keeps KL(pi_theta || pi_old) < delta (Appendix C); each seed its own i
        original = [p.detach().clone() for p in actor_params]
        chunks = search_direction.split([p.numel() // K for p in actor_params], dim=-1)
        live = self._live_seed_mask()
        searching = [True] * K if live is None else live.tolist()  # a failed seed keeps its policy
        accepted = [False] * K
        coefficients = [1.0] * K
        new_objective, new_kl = policy_objective.detach(), th.zeros(K, device=policy_objective.device)
        with th.no_grad():
            for _ in range(self.line_search_max_iter):
                scales = [c * m for c, m in zip(coefficients, max_steps, strict=True)]
                for param, start, chunk in zip(actor_params, original, chunks, strict=True):
                    param.copy_(start + self._seed_scale(scales, param) * chunk.view_as(param))
                distribution = self.policy.get_distribution(observations)
                ratio = th.exp(distribution.log_prob(actions) - old_log_prob)
                new_objective = seed_mean(advantages * ratio, K)
                new_kl = seed_mean(kl_divergence(distribution, old_distribution), K)
                ok = ((new_kl < self.target_kl) & (new_objective > policy_objective)).reshape(-1).tolist()
                for i in range(K):
                    if searching[i]:
                        if ok[i]:
                            searching[i], accepted[i] = False, True
                        else:
                            coefficients[i] *= self.line_search_shrinking_factor
                if not any(searching):
                    break
            rejected = [not a for a in accepted]
            if any(rejected):  # no acceptable step: keep the old policy (of those seeds)
                keep = th.tensor(rejected, device=policy_objective.device)
                for param, start in zip(actor_params, original, strict=True):
                    param.copy_(start if K == 1 else th.where(keep.view(-1, *[1] * (param.dim() - 1)), start, param))
                new_objective = th.where(keep, policy_objective.detach(), new_objective)
                new_kl = th.where(keep, th.zeros_like(new_kl), new_kl)
        self._check_finite("policy objective", policy_objective)
        step = NaturalGradientStep(
            search_direction=search_direction.detach(),
            max_step_size=max_steps[0] if K == 1 else max_steps,
            step_coefficient=coefficients[0] if K == 1 else coefficients,
            success=accepted[0] if K == 1 else accepted,
            policy_objective=new_objective,
            kl_divergence=new_kl,
        )
        return step, actor_params

    def _seed_scale(self, scales: list[float], param: th.Tensor) -> float | th.Tensor:
        """The step scale of each seed for a parameter: a float (K = 1, as the single run computes it) or a
        ``[K, 1, ...]`` tensor."""
        if self.n_seeds == 1:
            return scales[0]
        return th.tensor(scales, dtype=param.dtype, device=param.device).view(-1, *[1] * (param.dim() - 1))
