"""Periodic evaluation and the callbacks it triggers (SB3 semantics)."""

from __future__ import annotations

import os
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from lit_sb3.callbacks.base import BaseCallback, EventCallback
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.vec_env import DummyVecEnv, VecEnv, sync_envs_normalization

__all__ = ["EvalCallback", "StopTrainingOnNoModelImprovement", "StopTrainingOnRewardThreshold"]


class EvalCallback(EventCallback):
    """Evaluate the agent every ``eval_freq`` calls (per sub-env steps) on a separate env.

    Logs ``eval/mean_reward``, ``eval/mean_ep_length`` (and ``eval/success_rate``) at ``step = num_timesteps``
    (also into ``trainer.callback_metrics``, so ``ModelCheckpoint(monitor="eval/mean_reward", mode="max")`` keeps
    the best evaluations: the trainer's step ends right after each evaluation and monitored checkpoints save), keeps ``evaluations.npz`` in ``log_path`` and saves ``best_model.zip`` in ``best_model_save_path``.
    VecNormalize statistics are synced from the training env before each evaluation.

    A model of K > 1 seeds (``SeedBatch``) is evaluated per seed: ``eval_env`` is then a list of K envs (seed index
    i's member on ``eval_env[i]``, with seed i's VecNormalize statistics), each live seed logs
    ``seed{i}/eval/mean_reward``, ... (routed to seed i's logger by ``SeedRoutingLogger``), keeps
    ``evaluations_seed{i}.npz`` and saves ``best_model_seed{i}.zip`` (its member: loadable by the single class);
    :attr:`best_mean_rewards`/:attr:`last_mean_rewards` are per seed and ``last_mean_reward`` is their mean over the
    evaluated seeds. Child callbacks (``callback_on_new_best``, ``callback_after_eval``) are single-seed only.

    Args:
        eval_env: env used for evaluation (gym env or VecEnv); for a K-seed model, a list of K of them.
        callback_on_new_best: triggered when a new best mean reward is reached.
        callback_after_eval: triggered after every evaluation.
        n_eval_episodes: episodes per evaluation.
        eval_freq: evaluate every ``eval_freq`` calls of this callback (one call = one step of all sub-envs).
        log_path: folder for ``evaluations.npz``.
        best_model_save_path: folder for ``best_model.zip``.
        deterministic: deterministic actions during evaluation.
        render: render during evaluation.
        verbose: verbosity level.
        warn: warn when the eval env is not wrapped in a Monitor.
    """

    def __init__(
        self,
        eval_env: gym.Env | VecEnv,
        callback_on_new_best: BaseCallback | None = None,
        callback_after_eval: BaseCallback | None = None,
        n_eval_episodes: int = 5,
        eval_freq: int = 10000,
        log_path: str | None = None,
        best_model_save_path: str | None = None,
        deterministic: bool = True,
        render: bool = False,
        verbose: int = 1,
        warn: bool = True,
    ) -> None:
        super().__init__(callback_after_eval, verbose=verbose)
        self.callback_on_new_best = callback_on_new_best
        if self.callback_on_new_best is not None:
            self.callback_on_new_best.parent = self
        self.n_eval_episodes = n_eval_episodes
        self.eval_freq = eval_freq
        self.best_mean_reward = -np.inf
        self.last_mean_reward = -np.inf
        self.deterministic = deterministic
        self.render = render
        self.warn = warn
        self.eval_envs = [_as_vec_env(env) for env in (eval_env if isinstance(eval_env, (list, tuple)) else [eval_env])]
        if not self.eval_envs:
            raise ValueError("EvalCallback needs an eval env (a list of one per seed for a K-seed model), got [].")
        self.eval_env = self.eval_envs[0]
        self.best_mean_rewards: list[float] = []
        self.last_mean_rewards: list[float] = []
        self.best_model_save_path = best_model_save_path
        if log_path is not None:
            log_path = os.path.join(log_path, "evaluations")
        self.log_path = log_path
        self.evaluations_results: list[list[float]] = []
        self.evaluations_timesteps: list[int] = []
        self.evaluations_length: list[list[int]] = []
        self._is_success_buffer: list[bool] = []
        self.evaluations_successes: list[list[bool]] = []
        self._seed_histories: dict[int, dict[str, list]] = {}

    def _init_callback(self) -> None:
        k = self._n_seeds()
        if len(self.eval_envs) != k:
            raise ValueError(
                f"EvalCallback on a {type(self.model).__name__} of {k} seed(s) needs one eval env per seed "
                f"(EvalCallback([env_0, ..., env_{k - 1}], ...)), got {len(self.eval_envs)}."
            )
        if k > 1:
            if self.callback is not None or self.callback_on_new_best is not None:
                raise ValueError(
                    "EvalCallback's callback_on_new_best/callback_after_eval act on one model's evaluation and are "
                    "not supported with K > 1 seeds; read best_mean_rewards/last_mean_rewards (per seed) instead."
                )
            self.best_mean_rewards = [-np.inf] * k
            self.last_mean_rewards = [-np.inf] * k
        elif not isinstance(self.training_env, type(self.eval_env)) and self.warn:
            warnings.warn(
                f"Training and eval env are not of the same type {self.training_env} != {self.eval_env}", stacklevel=2
            )
        if self.best_model_save_path is not None:
            os.makedirs(self.best_model_save_path, exist_ok=True)
        if self.log_path is not None:
            os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        if self.callback_on_new_best is not None:
            self.callback_on_new_best.init_callback(self.model)  # type: ignore[arg-type]

    def _log_success_callback(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        info = locals_["info"]
        if locals_["done"]:
            maybe_is_success = info.get("is_success")
            if maybe_is_success is not None:
                self._is_success_buffer.append(maybe_is_success)

    def evaluate(self) -> tuple[float, float]:
        """Run one evaluation now, record and log it; returns (mean_reward, std_reward) (K > 1 seeds: the means
        over the evaluated seeds of theirs)."""
        assert self.model is not None
        if self._n_seeds() > 1:
            return self._evaluate_seeds()
        if self.model.get_vec_normalize_env() is not None:
            try:
                sync_envs_normalization(self.training_env, self.eval_env)
            except AttributeError as e:
                raise AssertionError(
                    "Training and eval env are not wrapped the same way, see "
                    "https://stable-baselines3.readthedocs.io/en/master/guide/callbacks.html#evalcallback "
                    "and warning above."
                ) from e
        self._is_success_buffer = []
        episode_rewards, episode_lengths = evaluate_policy(
            self.model,
            self.eval_env,
            n_eval_episodes=self.n_eval_episodes,
            render=self.render,
            deterministic=self.deterministic,
            return_episode_rewards=True,
            warn=self.warn,
            callback=self._log_success_callback,
            use_masking=bool(getattr(self.model, "supports_action_masks", False)),
        )
        assert isinstance(episode_rewards, list) and isinstance(episode_lengths, list)
        if self.log_path is not None:
            self.evaluations_timesteps.append(self.num_timesteps)
            self.evaluations_results.append(episode_rewards)
            self.evaluations_length.append(episode_lengths)
            kwargs: dict[str, Any] = {}
            if len(self._is_success_buffer) > 0:
                self.evaluations_successes.append(self._is_success_buffer)
                kwargs = dict(successes=self.evaluations_successes)
            np.savez(
                self.log_path,
                timesteps=self.evaluations_timesteps,
                results=self.evaluations_results,
                ep_lengths=self.evaluations_length,
                **kwargs,
            )
        mean_reward, std_reward = float(np.mean(episode_rewards)), float(np.std(episode_rewards))
        mean_ep_length, std_ep_length = float(np.mean(episode_lengths)), float(np.std(episode_lengths))
        self.last_mean_reward = mean_reward
        if self.verbose >= 1:
            print(f"Eval num_timesteps={self.num_timesteps}, episode_reward={mean_reward:.2f} +/- {std_reward:.2f}")
            print(f"Episode length: {mean_ep_length:.2f} +/- {std_ep_length:.2f}")
        metrics = {
            "eval/mean_reward": mean_reward,
            "eval/std_reward": std_reward,
            "eval/mean_ep_length": mean_ep_length,
        }
        if len(self._is_success_buffer) > 0:
            metrics["eval/success_rate"] = float(np.mean(self._is_success_buffer))
        self.model.log_metrics(metrics, step=self.num_timesteps)
        context = self.model.fit_context
        if context is not None:  # end the training_step here: monitored checkpoints see this evaluation
            context.request_boundary(evaluated=True)
        return mean_reward, std_reward

    def _n_seeds(self) -> int:
        """The model's K (1 for anything that evaluates as one model, such as the suite's per-seed views)."""
        return int(getattr(self.model, "n_seeds", 1))

    def _evaluate_seeds(self) -> tuple[float, float]:
        """Evaluate each live seed's member on its own eval env; log ``seed{i}/eval/...``, keep its evaluations and
        its best model."""
        model = self.model
        assert model is not None
        means, stds = [], []
        for i in model.active_seeds:
            member, eval_env = model.member(i), self.eval_envs[i]
            if member.get_vec_normalize_env() is not None:  # seed i's statistics
                sync_envs_normalization(member.get_env(), eval_env)  # type: ignore[arg-type]
            successes: list[bool] = []

            def log_success(locals_: dict[str, Any], globals_: dict[str, Any], successes: list = successes) -> None:
                if locals_["done"] and locals_["info"].get("is_success") is not None:
                    successes.append(locals_["info"]["is_success"])

            rewards, lengths = evaluate_policy(
                member,
                eval_env,
                n_eval_episodes=self.n_eval_episodes,
                render=self.render,
                deterministic=self.deterministic,
                return_episode_rewards=True,
                warn=self.warn,
                callback=log_success,
                use_masking=bool(getattr(model, "supports_action_masks", False)),
            )
            assert isinstance(rewards, list) and isinstance(lengths, list)
            mean_reward, std_reward = float(np.mean(rewards)), float(np.std(rewards))
            prefix = f"seed{i}/eval/"
            metrics = {
                prefix + "mean_reward": mean_reward,
                prefix + "std_reward": std_reward,
                prefix + "mean_ep_length": float(np.mean(lengths)),
            }
            if successes:
                metrics[prefix + "success_rate"] = float(np.mean(successes))
            model.log_metrics(metrics, step=self.num_timesteps)
            if self.log_path is not None:
                self._save_seed_evaluations(i, rewards, lengths, successes)
            if self.verbose >= 1:
                print(f"Eval seed index {i} num_timesteps={self.num_timesteps}, episode_reward={mean_reward:.2f}")
            self.last_mean_rewards[i] = mean_reward
            if mean_reward > self.best_mean_rewards[i]:
                self.best_mean_rewards[i] = mean_reward
                if self.best_model_save_path is not None:
                    member.save(os.path.join(self.best_model_save_path, f"best_model_seed{i}"))
            means.append(mean_reward)
            stds.append(std_reward)
        self.last_mean_reward = float(np.mean(means)) if means else -np.inf
        self.best_mean_reward = max(self.best_mean_reward, self.last_mean_reward)
        context = model.fit_context
        if context is not None:
            context.request_boundary(evaluated=True)
        return self.last_mean_reward, float(np.mean(stds)) if stds else 0.0

    def _save_seed_evaluations(self, i: int, rewards: list[float], lengths: list[int], successes: list[bool]) -> None:
        """Append seed i's evaluation to ``evaluations_seed{i}.npz`` (SB3's layout: timesteps, results,
        ep_lengths, successes)."""
        assert self.log_path is not None
        history = self._seed_histories.setdefault(i, {"timesteps": [], "results": [], "ep_lengths": []})
        history["timesteps"].append(self.num_timesteps)
        history["results"].append(rewards)
        history["ep_lengths"].append(lengths)
        if successes:
            history.setdefault("successes", []).append(successes)
        np.savez(f"{self.log_path}_seed{i}", **history)  # type: ignore[arg-type]

    def _on_step(self) -> bool:
        continue_training = True
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0 and self._n_seeds() > 1:
            self.evaluate()
        elif self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
            mean_reward, _ = self.evaluate()
            if mean_reward > self.best_mean_reward:
                if self.verbose >= 1:
                    print("New best mean reward!")
                if self.best_model_save_path is not None:
                    assert self.model is not None
                    self.model.save(os.path.join(self.best_model_save_path, "best_model"))
                self.best_mean_reward = mean_reward
                if self.callback_on_new_best is not None:
                    continue_training = self.callback_on_new_best.on_step()
            if self.callback is not None:
                continue_training = continue_training and self._on_event()
        return continue_training

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        if self.callback:
            self.callback.update_locals(locals_)


def _as_vec_env(env: gym.Env | VecEnv) -> VecEnv:
    return env if isinstance(env, VecEnv) else DummyVecEnv([lambda: env])  # type: ignore[list-item, return-value]


class StopTrainingOnRewardThreshold(BaseCallback):
    """Stop when the evaluation mean reward reaches ``reward_threshold`` (use with ``EvalCallback``).

    Args:
        reward_threshold: minimum mean reward to stop training.
        verbose: verbosity level.
    """

    parent: EvalCallback

    def __init__(self, reward_threshold: float, verbose: int = 0) -> None:
        super().__init__(verbose=verbose)
        self.reward_threshold = reward_threshold

    def _on_step(self) -> bool:
        assert self.parent is not None, (
            "``StopTrainingOnRewardThreshold`` callback must be used with an ``EvalCallback``"
        )
        continue_training = bool(self.parent.best_mean_reward < self.reward_threshold)
        if self.verbose >= 1 and not continue_training:
            print(
                f"Stopping training because the mean reward {self.parent.best_mean_reward:.2f} "
                f" is above the threshold {self.reward_threshold}"
            )
        return continue_training


class StopTrainingOnNoModelImprovement(BaseCallback):
    """Stop when ``max_no_improvement_evals`` evaluations in a row did not improve (use with ``EvalCallback``).

    Args:
        max_no_improvement_evals: evaluations without a new best before stopping.
        min_evals: evaluations before counting starts.
        verbose: verbosity level.
    """

    parent: EvalCallback

    def __init__(self, max_no_improvement_evals: int, min_evals: int = 0, verbose: int = 0) -> None:
        super().__init__(verbose=verbose)
        self.max_no_improvement_evals = max_no_improvement_evals
        self.min_evals = min_evals
        self.last_best_mean_reward = -np.inf
        self.no_improvement_evals = 0

    def _on_step(self) -> bool:
        assert self.parent is not None, (
            "``StopTrainingOnNoModelImprovement`` callback must be used with an ``EvalCallback``"
        )
        continue_training = True
        if self.n_calls > self.min_evals:
            if self.parent.best_mean_reward > self.last_best_mean_reward:
                self.no_improvement_evals = 0
            else:
                self.no_improvement_evals += 1
                if self.no_improvement_evals > self.max_no_improvement_evals:
                    continue_training = False
        self.last_best_mean_reward = self.parent.best_mean_reward
        if self.verbose >= 1 and not continue_training:
            print(
                f"Stopping training because there was no new best model in the last {self.no_improvement_evals:d} evaluations"
            )
        return continue_training
