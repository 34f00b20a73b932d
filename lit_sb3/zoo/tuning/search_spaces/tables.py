"""The built-in search spaces of ``bench tune``: the RL Zoo's ranges as data.

:data:`SEARCH_SPACES` follows ``rl_zoo3/hyperparams_opt.py`` (rl-baselines3-zoo 2.x), one entry per space name
(an algorithm class names its own in its ``search_space`` metadata). Also the labels the derived names use
(:data:`NET_ARCHS`, :data:`ACTIVATIONS`) and the derived names themselves (:data:`DERIVED_PARAMS`). Validation,
sampling and conversion live in :mod:`~lit_sb3.zoo.tuning.search_spaces.spaces` and
:mod:`~lit_sb3.zoo.tuning.search_spaces.conversion`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SEARCH_SPACES", "DERIVED_PARAMS", "NET_ARCHS", "ACTIVATIONS", "FLOAT", "INT", "CATEGORICAL"]

FLOAT, INT, CATEGORICAL = "float", "int", "categorical"
_GAMMAS = [0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999]
_TAUS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.08]
_TRAIN_FREQS = [1, 4, 8, 16, 32, 64, 128, 256, 512]

#: names that are not constructor arguments but are turned into some (see :func:`to_hyperparameters`)
DERIVED_PARAMS: dict[str, str] = {
    "net_arch": "policy_kwargs.net_arch (a label, see NET_ARCHS)",
    "activation_fn": "policy_kwargs.activation_fn (tanh, relu, elu, leaky_relu)",
    "log_std_init": "policy_kwargs.log_std_init",
    "ortho_init": "policy_kwargs.ortho_init",
    "one_minus_gamma": "gamma = 1 - value",
    "one_minus_gae_lambda": "gae_lambda = 1 - value",
    "subsample_steps": "gradient_steps = max(train_freq // value, 1)",
    "n_quantiles": "policy_kwargs.n_quantiles (TQC, QR-DQN)",
    "top_frac_size": "n_top = max(int(value * n_delta), 1) (ARS)",
}

#: net_arch labels per algorithm family (the zoo's)
NET_ARCHS: dict[str, dict[str, Any]] = {
    "on_policy": {
        "tiny": {"pi": [64], "vf": [64]},
        "small": {"pi": [64, 64], "vf": [64, 64]},
        "medium": {"pi": [256, 256], "vf": [256, 256]},
        "large": {"pi": [400, 300], "vf": [400, 300]},
    },
    "off_policy": {
        "tiny": [64],
        "small": [64, 64],
        "medium": [256, 256],
        "big": [400, 300],
        "large": [256, 256, 256],
        "verybig": [512, 512, 512],
    },
}
#: activation labels -> the zoo-format class name
ACTIVATIONS: dict[str, str] = {"tanh": "nn.Tanh", "relu": "nn.ReLU", "elu": "nn.ELU", "leaky_relu": "nn.LeakyReLU"}


def _f(low: float, high: float, log: bool = False) -> dict[str, Any]:
    return {"type": FLOAT, "low": low, "high": high, "log": log}


def _c(*choices: Any) -> dict[str, Any]:
    return {"type": CATEGORICAL, "choices": list(choices)}


_ON_POLICY_COMMON: dict[str, dict[str, Any]] = {
    "n_steps": _c(32, 64, 128, 256, 512, 1024, 2048),
    "one_minus_gamma": _f(0.0001, 0.03, log=True),
    "one_minus_gae_lambda": _f(0.0001, 0.1, log=True),
    "learning_rate": _f(1e-5, 0.002, log=True),
    "ent_coef": _f(1e-8, 0.1, log=True),
}

#: the built-in spaces (rl_zoo3/hyperparams_opt.py), as data, by name: an algorithm class names its own in its
#: ``search_space`` metadata (several algorithms may share one, as DDPG does TD3's)
SEARCH_SPACES: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {
        "batch_size": _c(32, 64, 128, 256, 512),
        **_ON_POLICY_COMMON,
        "clip_range": _c(0.1, 0.2, 0.3, 0.4),
        "n_epochs": _c(1, 5, 10, 20),
        "max_grad_norm": _f(0.3, 2.0),
        "net_arch": _c("tiny", "small", "medium"),
        "activation_fn": _c("tanh", "relu"),
    },
    "a2c": {
        **_ON_POLICY_COMMON,
        "max_grad_norm": _f(0.3, 2.0),
        "net_arch": _c("small", "medium"),
        "activation_fn": _c("tanh", "relu"),
    },
    "sac": {
        "gamma": _c(*_GAMMAS),
        "learning_rate": _f(1e-5, 1.0, log=True),
        "batch_size": _c(16, 32, 64, 128, 256, 512, 1024, 2048),
        "buffer_size": _c(10_000, 100_000, 1_000_000),
        "learning_starts": _c(0, 1000, 10_000, 20_000),
        "train_freq": _c(*_TRAIN_FREQS),
        "tau": _c(*_TAUS),
        "log_std_init": _f(-4.0, 1.0),
        "net_arch": _c("small", "medium", "big"),
    },
    "td3": {
        "gamma": _c(*_GAMMAS),
        "learning_rate": _f(1e-5, 1.0, log=True),
        "batch_size": _c(16, 32, 64, 100, 128, 256, 512, 1024, 2048),
        "buffer_size": _c(10_000, 100_000, 1_000_000),
        "tau": _c(*_TAUS),
        "train_freq": _c(*_TRAIN_FREQS),
        "noise_type": _c("ornstein-uhlenbeck", "normal", None),
        "noise_std": _f(0.0, 1.0),
        "net_arch": _c("small", "medium", "big"),
    },
    "dqn": {
        "gamma": _c(*_GAMMAS),
        "learning_rate": _f(1e-5, 1.0, log=True),
        "batch_size": _c(16, 32, 64, 100, 128, 256, 512),
        "buffer_size": _c(10_000, 50_000, 100_000, 1_000_000),
        "exploration_final_eps": _f(0.0, 0.2),
        "exploration_fraction": _f(0.0, 0.5),
        "target_update_interval": _c(1, 1000, 5000, 10_000, 15_000, 20_000),
        "learning_starts": _c(0, 1000, 5000, 10_000, 20_000),
        "train_freq": _c(1, 4, 8, 16, 128, 256, 1000),
        "subsample_steps": _c(1, 2, 4, 8),
        "net_arch": _c("tiny", "small", "medium"),
    },
    # the zoo samples batch_size/n_steps as powers of two (batch_size_pow 2..10, n_steps_pow 5..12)
    "trpo": {
        "batch_size": _c(*(2**p for p in range(2, 11))),
        "n_steps": _c(*(2**p for p in range(5, 13))),
        "one_minus_gamma": _f(0.0001, 0.03, log=True),
        "one_minus_gae_lambda": _f(0.0001, 0.1, log=True),
        "learning_rate": _f(1e-5, 0.002, log=True),
        "n_critic_updates": {"type": INT, "low": 5, "high": 30},
        "cg_max_steps": {"type": INT, "low": 5, "high": 30},
        "target_kl": _f(0.001, 0.1, log=True),
        "net_arch": _c("small", "medium"),
        "activation_fn": _c("tanh", "relu"),
    },
    # n_delta_pow 2..6; n_top from the fraction top_frac_size of n_delta
    "ars": {
        "n_delta": _c(4, 8, 16, 32, 64),
        "learning_rate": _f(1e-5, 0.002, log=True),
        "delta_std": _f(0.01, 0.3),
        "top_frac_size": _f(0.05, 1.0),
    },
}
# sb3-contrib's off-policy algorithms (rl_zoo3 2.9.2 hyperparams_opt.py): TQC is SAC's space plus the quantiles
# (the zoo samples top_quantiles_to_drop_per_net in [0, min(n_quantiles - 1, 5)]; a fixed [0, 4] keeps every sample
# valid for n_quantiles >= 5), QR-DQN is DQN's plus n_quantiles. The zoo has no CrossQ sampler: CrossQ uses SAC's
# space without tau (CrossQ has no target networks).
SEARCH_SPACES["tqc"] = {
    **SEARCH_SPACES["sac"],
    "n_quantiles": {"type": INT, "low": 5, "high": 50},
    "top_quantiles_to_drop_per_net": {"type": INT, "low": 0, "high": 4},
}
SEARCH_SPACES["qrdqn"] = {**SEARCH_SPACES["dqn"], "n_quantiles": {"type": INT, "low": 5, "high": 200}}
SEARCH_SPACES["crossq"] = {k: v for k, v in SEARCH_SPACES["sac"].items() if k != "tau"}
