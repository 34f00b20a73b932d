"""Benchmark suites (``benchmarks/suites.yml``) and the expansion of ``--envs`` / ``--algos`` lists."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.registry import ALGOS, check_algo, registered_env_ids

__all__ = ["Suite", "suites_path", "load_suites", "expand_envs", "expand_algos", "default_budgets"]

ENV_VAR = "LIT_SB3_SUITES"


@dataclass(frozen=True)
class Suite:
    """A named list of env ids.

    Args:
        name: suite name.
        envs: env ids, in order.
        n_timesteps: per-env default budget (only for envs that have one).
        description: one line for ``bench list``.
    """

    name: str
    envs: tuple[str, ...]
    n_timesteps: dict[str, int] = field(default_factory=dict)
    description: str = ""


def suites_path() -> Path:
    """``$LIT_SB3_SUITES`` if set, else the installed ``benchmarks/suites.yml`` (:func:`lit_sb3.zoo.data.data_path`)."""
    from lit_sb3.zoo.data import data_path

    env = os.environ.get(ENV_VAR)
    return Path(env) if env else data_path("suites.yml")


def _parse_suite(name: str, data: Any, where: str) -> Suite:
    if not isinstance(data, Mapping) or "envs" not in data:
        raise BenchError(f"{where}: suite '{name}' must be a mapping with an 'envs' list or mapping")
    unknown = set(data) - {"envs", "description"}
    if unknown:
        raise BenchError(f"{where}: suite '{name}': unknown key(s) {sorted(unknown)}; allowed: envs, description")
    raw = data["envs"]
    envs: list[str] = []
    budgets: dict[str, int] = {}
    items: Iterable[Any] = raw.items() if isinstance(raw, Mapping) else raw
    if not isinstance(raw, (Mapping, list)):
        raise BenchError(f"{where}: suite '{name}': 'envs' must be a list or a mapping")
    for item in items:
        env_id, opts = item if isinstance(raw, Mapping) else (item, None)
        if isinstance(env_id, Mapping) and len(env_id) == 1:
            ((env_id, opts),) = env_id.items()
        if not isinstance(env_id, str):
            raise BenchError(f"{where}: suite '{name}': bad env entry {item!r}")
        envs.append(env_id)
        if opts:
            if not isinstance(opts, Mapping) or set(opts) - {"n_timesteps"}:
                raise BenchError(f"{where}: suite '{name}': {env_id}: only n_timesteps may be set, got {opts!r}")
            try:
                budgets[env_id] = int(float(opts["n_timesteps"]))
            except (TypeError, ValueError) as exc:
                raise BenchError(f"{where}: suite '{name}': {env_id}: bad n_timesteps {opts['n_timesteps']!r}") from exc
    return Suite(name=name, envs=tuple(envs), n_timesteps=budgets, description=str(data.get("description", "")))


def load_suites(path: str | Path | None = None) -> dict[str, Suite]:
    """Read the suites file.

    Args:
        path: the YAML file (default: :func:`suites_path`).
    """
    p = Path(path) if path is not None else suites_path()
    from lit_sb3.zoo.config.loading import load_yaml_file

    data = load_yaml_file(p, "suites file")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise BenchError(f"{p}: must map suite names to suites")
    return {str(name): _parse_suite(str(name), body, str(p)) for name, body in data.items()}


def _split(spec: str | Iterable[str]) -> list[str]:
    parts = spec.split(",") if isinstance(spec, str) else [p for s in spec for p in s.split(",")]
    return [p.strip() for p in parts if p.strip()]


def expand_envs(spec: str | Iterable[str], suites: Mapping[str, Suite] | None = None) -> list[str]:
    """``"mujoco,CartPole-v1"`` -> env ids (suites expanded, duplicates dropped, order kept).

    Args:
        spec: comma-separated suite names and env ids (or a list of such strings).
        suites: suites to use (default: :func:`load_suites`).
    """
    suites = load_suites() if suites is None else suites
    known_ids: list[str] | None = None
    out: list[str] = []
    names = _split(spec)
    if not names:
        raise BenchError(f"no env given; suites: {', '.join(suites)}")
    for name in names:
        if name in suites:
            candidates = list(suites[name].envs)
        elif ":" in name:  # "module:EnvName-v0"
            from lit_sb3.zoo.registry import check_env_id

            candidates = [check_env_id(name)]
        else:
            import gymnasium as gym

            from lit_sb3.zoo.registry import published_env_ids, register_optional_envs

            if name not in gym.registry:
                register_optional_envs(name)
            if name not in gym.registry and name not in published_env_ids():  # not installed: skipped at planning
                known_ids = known_ids if known_ids is not None else registered_env_ids()
                raise BenchError(
                    f"unknown suite or env id '{name}'{did_you_mean(name, [*suites, *known_ids])}; "
                    f"suites: {', '.join(suites)}"
                )
            candidates = [name]
        out.extend(env for env in candidates if env not in out)
    return out


def expand_algos(spec: str | Iterable[str]) -> list[str]:
    """``"sac,td3"`` (or ``"all"``) -> algorithm names (lower case, duplicates dropped, order kept).

    Args:
        spec: comma-separated algorithm names.
    """
    out: list[str] = []
    names = _split(spec)
    if not names:
        raise BenchError(f"no algorithm given; known: {', '.join(ALGOS)}")
    for name in names:
        algos = list(ALGOS) if name.lower() == "all" else [check_algo(name)]
        out.extend(a for a in algos if a not in out)
    return out


def default_budgets(spec: str | Iterable[str], suites: Mapping[str, Suite] | None = None) -> dict[str, int]:
    """Per-env default ``n_timesteps`` from the suites named in ``spec`` (first suite naming the env wins).

    Args:
        spec: comma-separated suite names and env ids.
        suites: suites to use (default: :func:`load_suites`).
    """
    suites = load_suites() if suites is None else suites
    out: dict[str, int] = {}
    for name in _split(spec):
        if name in suites:
            for env_id, n in suites[name].n_timesteps.items():
                out.setdefault(env_id, n)
    return out
