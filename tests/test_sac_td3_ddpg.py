"""SAC, TD3 and DDPG specifics and learning checks on Pendulum-v1 (RL Zoo hyperparameters: lr 1e-3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from lit_sb3 import DDPG, SAC, TD3, NormalActionNoise
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.vec_env import make_vec_env

th.set_num_threads(1)

TINY = dict(batch_size=16, learning_starts=20, policy_kwargs=dict(net_arch=[16, 16]), seed=0)


def test_sac_defaults_and_entropy_settings():
    model = SAC("MlpPolicy", **TINY)
    assert (model.ent_coef, model.target_entropy, model.target_update_interval) == ("auto", "auto", 1)
    model.learn(40, env="Pendulum-v1")
    assert model.target_entropy == -1.0  # -dim(A)
    assert isinstance(model.log_ent_coef, th.nn.Parameter) and model.ent_coef_optimizer is not None
    assert set(model._optimizers_to_save()) == {"actor.optimizer", "critic.optimizer", "ent_coef_optimizer"}
    assert isinstance(
        model.last_logged.get("train/ent_coef", model._log_buffer.get("train/ent_coef")), (float, th.Tensor)
    )

    init = SAC("MlpPolicy", ent_coef="auto_0.1", **TINY)
    init.learn(20, env="Pendulum-v1")  # no update yet
    assert th.exp(init.log_ent_coef).item() == pytest.approx(0.1)

    fixed = SAC("MlpPolicy", ent_coef=0.2, target_entropy=-3.0, **TINY)
    fixed.learn(40, env="Pendulum-v1")
    assert fixed.ent_coef_optimizer is None and fixed.ent_coef_tensor.item() == pytest.approx(0.2)
    assert fixed.target_entropy == -3.0


def test_policies_use_fused_adam():
    model = SAC("MlpPolicy", **TINY)
    model.learn(25, env="Pendulum-v1")
    for optimizer in model._optimizers_to_save().values():
        assert optimizer.defaults.get("fused") is True


def test_sac_gsde():
    model = SAC("MlpPolicy", use_sde=True, sde_sample_freq=4, **TINY)
    model.learn(60, env="Pendulum-v1", log_every_n_steps=1)
    assert model.policy_kwargs["use_sde"] is True
    assert model._n_updates > 0


def test_td3_and_ddpg_settings():
    td3 = TD3("MlpPolicy")
    assert (td3.policy_delay, td3.target_policy_noise, td3.target_noise_clip, td3.learning_rate) == (2, 0.2, 0.5, 1e-3)
    ddpg = DDPG("MlpPolicy", **TINY)
    assert (ddpg.policy_delay, ddpg.target_noise_clip) == (1, 0.0)
    ddpg.learn(40, env="Pendulum-v1")
    assert ddpg.critic.n_critics == 1
    assert len(ddpg.policy.critic.qf[0].weight) == 1


def test_td3_policy_delay_counts_updates():
    model = TD3("MlpPolicy", policy_delay=3, **TINY)
    model.learn(50, env="Pendulum-v1")
    assert model._n_updates == 30
    target_before = [p.clone() for p in model.actor_target.parameters()]
    model.learn(2, env="Pendulum-v1", reset_num_timesteps=False)  # updates 31, 32: no actor update
    assert all(th.equal(a, b) for a, b in zip(target_before, model.actor_target.parameters()))
    model.learn(1, env="Pendulum-v1", reset_num_timesteps=False)  # update 33: actor and targets move
    assert not all(th.equal(a, b) for a, b in zip(target_before, model.actor_target.parameters()))


def _evaluate(model) -> float:
    mean_reward, _ = evaluate_policy(
        model, make_vec_env("Pendulum-v1", seed=1234), n_eval_episodes=5, deterministic=True
    )
    return float(mean_reward)


@pytest.mark.slow
def test_sac_learns_pendulum():
    """RL Zoo Pendulum hyperparameters (learning_rate 1e-3, rest SB3 defaults), 6000 steps: mean >= -250."""
    model = SAC("MlpPolicy", learning_rate=1e-3, seed=0)
    model.learn(6000, env="Pendulum-v1")
    assert _evaluate(model) >= -250


@pytest.mark.slow
@pytest.mark.parametrize("algo", [TD3, DDPG], ids=["td3", "ddpg"])
def test_td3_ddpg_learn_pendulum(algo):
    """RL Zoo Pendulum hyperparameters (learning_rate 1e-3, normal action noise 0.1), 8000 steps: mean >= -250.

    (TD3: 6000 steps gave -254 with seed 0: learned, but short of the threshold.)
    """
    noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
    model = algo("MlpPolicy", learning_rate=1e-3, action_noise=noise, seed=0)
    model.learn(8000, env="Pendulum-v1")
    assert _evaluate(model) >= -250


@pytest.mark.slow
def test_sac_improves_over_random_quickly():
    """A shorter check: 3000 steps clearly beat the random policy (about -1200)."""
    model = SAC("MlpPolicy", learning_rate=1e-3, seed=1)
    model.learn(3000, env="Pendulum-v1")
    assert _evaluate(model) >= -800
