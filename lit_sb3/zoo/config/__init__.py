"""Zoo-format hyperparameter files: loading, the restricted expression parser, and config resolution.

A zoo file (``zoo_configs/<algo>.yml``, or one given with ``--config``) maps env ids (and ``default``) to
hyperparameters in the rl-baselines3-zoo format. The package is split by concern:

- :mod:`~lit_sb3.zoo.config.loading`: where the built-in files live; bounded YAML loading with line numbers;
- :mod:`~lit_sb3.zoo.config.literals`: the restricted parser of ``"dict(net_arch=[64], ...)"`` strings and
  ``lin_<x>`` schedules (never ``eval``);
- :mod:`~lit_sb3.zoo.config.resolution`: merging built-in file, ``--config`` files and ``--hyperparams``;
- :mod:`~lit_sb3.zoo.config.resolved`: :class:`ResolvedConfig` and its JSON encoding (class whitelist).
"""

from __future__ import annotations

from lit_sb3.zoo.config.literals import parse_python_literal, parse_schedule
from lit_sb3.zoo.config.loading import DEFAULT_ENTRY, load_zoo_file, zoo_config_dir, zoo_config_path
from lit_sb3.zoo.config.resolution import (
    SCHEDULE_KEYS,
    SPECIAL_KEYS,
    build_action_noise,
    find_entry,
    resolve,
    validate_zoo_file,
)
from lit_sb3.zoo.config.resolved import _WHITELIST, ResolvedConfig, _jsonable, class_path

__all__ = [
    "DEFAULT_ENTRY",
    "SPECIAL_KEYS",
    "SCHEDULE_KEYS",
    "ResolvedConfig",
    "zoo_config_dir",
    "zoo_config_path",
    "load_zoo_file",
    "parse_python_literal",
    "parse_schedule",
    "find_entry",
    "resolve",
    "validate_zoo_file",
    "build_action_noise",
    "class_path",
    "_WHITELIST",
    "_jsonable",
]
