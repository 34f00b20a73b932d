"""The zoo-format entry that rl_zoo3 reads for a reference job.

The lit_sb3 side resolves a job's hyperparameters from the built-in zoo file, the ``--config`` files and the
``--hyperparams`` overrides (:func:`lit_sb3.zoo.config.resolve`). The reference side must train with the same
values, read by rl_zoo3 itself: so the same layers are merged key by key in the same order, keeping the raw YAML
values (``lin_0.001``, ``"dict(net_arch=[64, 64])"``) that rl_zoo3 interprets, and written as one entry for the
env id (:func:`zoo_entry`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["zoo_entry"]


def _plain(value: Any) -> Any:
    """The YAML value as plain JSON data (the loader's line-tracking mappings become dicts)."""
    return json.loads(json.dumps(value))


def zoo_entry(algo: str, env_id: str, config_files: Iterable[str | Path] = (),
              overrides: Mapping[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The merged zoo-format entry of ``algo`` on ``env_id``: the built-in file's ``default`` then env entry, each
    ``--config`` file's, then the overrides (their YAML values), later keys winning, as
    :func:`~lit_sb3.zoo.config.resolve` merges them.

    Args:
        algo: algorithm name.
        env_id: env id.
        config_files: ``--config`` files.
        overrides: ``--hyperparams`` ``key -> value text``.
    """
    from lit_sb3.zoo.config.loading import DEFAULT_ENTRY, load_zoo_file, parse_yaml, zoo_config_path
    from lit_sb3.zoo.config.resolution import find_entry

    merged: dict[str, Any] = {}
    paths = [zoo_config_path(algo), *(Path(p) for p in config_files)]
    for path in paths:
        if not path.exists():
            continue
        entries = load_zoo_file(path)
        name, _ = find_entry(entries, env_id)
        for layer in dict.fromkeys((DEFAULT_ENTRY, name)):  # the default entry, then the env's
            if layer is not None and layer in entries:
                merged.update(_plain(dict(entries[layer] or {})))
    for key, text in (overrides or {}).items():
        merged[key] = _plain(parse_yaml(text, f"--hyperparams {key}={text}", with_line=False)) if text.strip() else None
    return merged
