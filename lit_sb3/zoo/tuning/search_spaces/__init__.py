"""Search spaces of ``bench tune``: the RL Zoo's ranges as data, YAML overrides, sampling and conversion.

A search space maps a parameter name to a :class:`ParamSpec` (``float``/``int`` with ``low``/``high``/``log``/
``step``, or ``categorical`` with ``choices``) or to a fixed value (applied to every trial, not sampled). Names
are constructor arguments of the algorithm, the zoo keys ``n_envs``/``noise_type``/``noise_std``, or one of the
zoo's derived names (:data:`DERIVED_PARAMS`): ``net_arch`` and ``activation_fn`` (labels, put into
``policy_kwargs``), ``log_std_init``/``ortho_init`` (into ``policy_kwargs``), ``one_minus_gamma``/
``one_minus_gae_lambda`` (``gamma = 1 - x``), ``subsample_steps`` (DQN: ``gradient_steps = train_freq // s``).

The built-in spaces (:data:`SEARCH_SPACES`) follow ``rl_zoo3/hyperparams_opt.py`` (rl-baselines3-zoo 2.x).
:func:`to_hyperparameters` turns sampled values into zoo-format hyperparameters (what a zoo YAML entry holds,
``policy_kwargs`` as a ``"dict(...)"`` string), with the zoo's fix-ups (``batch_size <= n_steps * n_envs``,
``gradient_steps = train_freq`` for SAC/TD3/DDPG).

The package: :mod:`.tables` (the built-in spaces as data), :mod:`.spaces` (the classes, resolution and validation
of built-in spaces and ``--search-space`` files, sampling, JSON form) and :mod:`.conversion`
(:func:`to_hyperparameters`, :func:`render_literal`). Every name is re-exported here.
"""

# the re-exports (public and the private helpers) keep every import of the former single module working
# ruff: noqa: F401
from lit_sb3.zoo.tuning.search_spaces.conversion import _Raw, render_literal, render_literal_raw, to_hyperparameters
from lit_sb3.zoo.tuning.search_spaces.spaces import (
    _NOT_TUNABLE,
    _SPEC_KEYS,
    _TYPES,
    _ZOO_KEYS,
    ParamSpec,
    SearchSpace,
    _continuous_off_policy,
    _family,
    _is_number,
    _number,
    _policy_takes,
    _spec,
    allowed_names,
    default_search_space,
    load_search_space,
    sample_params,
    search_space_from_data,
    search_space_name,
    space_from_jsonable,
    space_to_jsonable,
)
from lit_sb3.zoo.tuning.search_spaces.tables import (
    _GAMMAS,
    _ON_POLICY_COMMON,
    _TAUS,
    _TRAIN_FREQS,
    ACTIVATIONS,
    CATEGORICAL,
    DERIVED_PARAMS,
    FLOAT,
    INT,
    NET_ARCHS,
    SEARCH_SPACES,
    _c,
    _f,
)

__all__ = [
    "ParamSpec",
    "SearchSpace",
    "SEARCH_SPACES",
    "DERIVED_PARAMS",
    "NET_ARCHS",
    "ACTIVATIONS",
    "default_search_space",
    "load_search_space",
    "search_space_from_data",
    "sample_params",
    "to_hyperparameters",
    "render_literal",
    "space_to_jsonable",
    "space_from_jsonable",
]
