"""Optuna storage, samplers and study creation/resume of ``bench tune``.

Storage: a journal file by default (``./optuna/<study>.journal``; several local processes share it and
``optuna-dashboard ./optuna/<study>.journal`` reads it), or any RDB URL (``sqlite:///...``,
``postgresql://...``). A study is resumed until it holds ``n_trials`` finished (COMPLETE + PRUNED) trials; its
workers are :mod:`lit_sb3.zoo.tuning.workers`'.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError, did_you_mean
from lit_sb3.zoo.tuning.objective import TuneSettings

__all__ = [
    "SAMPLERS",
    "DEFAULT_STORAGE_DIR",
    "default_study_name",
    "storage_spec",
    "open_storage",
    "make_sampler",
    "dashboard_command",
    "load_or_create_study",
    "objective_name",
    "finished_count",
]

SAMPLERS = ("tpe", "random", "cmaes", "gp")
DEFAULT_STORAGE_DIR = "optuna"
_URL_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def default_study_name(algo: str, env_id: str) -> str:
    """``<algo>-<env id>`` with characters unsafe in file names replaced.

    Args:
        algo: algorithm name.
        env_id: env id.
    """
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{algo}-{env_id.rsplit(':', 1)[-1]}")


def storage_spec(storage: str | None, study_name: str) -> str:
    """The storage as a string workers can reopen: an RDB URL, or an absolute journal file path.

    Args:
        storage: ``--storage`` (None: ``./optuna/<study>.journal``).
        study_name: the study name.
    """
    if storage is None:
        return str((Path(DEFAULT_STORAGE_DIR) / f"{study_name}.journal").resolve())
    if _URL_RE.match(storage):
        if storage.startswith("sqlite:///") and not storage.startswith("sqlite:////"):
            path = Path(storage[len("sqlite:///") :])
            return "sqlite:///" + str(path.resolve())
        return storage
    return str(Path(storage).expanduser().resolve())


def is_journal(spec: str) -> bool:
    """Whether a storage spec is a journal file (not an RDB URL).

    Args:
        spec: from :func:`storage_spec`.
    """
    return not _URL_RE.match(spec)


def open_storage(spec: str) -> Any:
    """Open the Optuna storage (one-line :class:`BenchError` when it cannot be opened, in seconds).

    Args:
        spec: from :func:`storage_spec`.
    """
    import optuna

    if is_journal(spec):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = Path(spec)
        if not path.parent.is_dir() and path.parent != Path(DEFAULT_STORAGE_DIR).resolve():
            # only the default folder (./optuna) is made; a missing folder the user named is a typo
            raise BenchError(f"cannot open journal storage {spec!r}: folder {str(path.parent)!r} does not exist")
        try:
            path.parent.mkdir(exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path)))
        except OSError as exc:
            raise BenchError(f"cannot open journal storage {spec!r}: {exc.strerror or exc}") from exc
    engine_kwargs: dict[str, Any] = {}
    if spec.startswith(("postgresql", "postgres")):
        engine_kwargs["connect_args"] = {"connect_timeout": 5}
    elif spec.startswith("mysql"):
        engine_kwargs["connect_args"] = {"connect_timeout": 5}
    elif spec.startswith("sqlite:///"):
        folder = Path(spec[len("sqlite:///") :].split("?")[0]).parent
        if not folder.is_dir():
            raise BenchError(f"cannot open storage {spec!r}: folder {str(folder)!r} does not exist")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeat_interval
            # the heartbeat lets a resumed study mark trials of a killed worker FAILED
            return optuna.storages.RDBStorage(spec, engine_kwargs=engine_kwargs, heartbeat_interval=60,
                                              grace_period=180)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - any failure to open the storage is the user's URL
        text = " ".join(str(exc).split())[:300]
        raise BenchError(f"cannot open storage {spec!r}: {type(exc).__name__}: {text}") from exc


def make_sampler(name: str, *, seed: int | None, n_startup_trials: int) -> Any:
    """The Optuna sampler called ``name``.

    Args:
        name: ``tpe`` (default), ``random``, ``cmaes`` or ``gp``.
        seed: random seed (None: random).
        n_startup_trials: random trials before the model-based samplers take over.
    """
    import optuna

    key = name.strip().lower()
    if key == "tpe":
        return optuna.samplers.TPESampler(n_startup_trials=n_startup_trials, seed=seed, multivariate=True)
    if key == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if key == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise BenchError("sampler 'cmaes' needs the package cmaes (pip install cmaes)") from None
        return optuna.samplers.CmaEsSampler(
            seed=seed, n_startup_trials=n_startup_trials, warn_independent_sampling=False
        )
    if key == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_startup_trials)
    raise BenchError(f"unknown sampler '{name}'{did_you_mean(key, SAMPLERS)}; known: {', '.join(SAMPLERS)}")


def _pruner(settings: TuneSettings) -> Any:
    from lit_sb3.zoo.tuning.pruning import make_pruner

    return make_pruner(settings.pruner, n_startup_trials=settings.n_startup_trials,
                       n_warmup_steps=settings.n_warmup_steps, eval_freq=settings.eval_freq,
                       max_resource=settings.n_timesteps * settings.seeds_per_trial)  # fmt: skip


_IDENTITY = ("algo", "env_id", "n_timesteps", "eval_freq", "eval_episodes", "seeds_per_trial", "objective")


def load_or_create_study(settings: TuneSettings, *, storage: Any | None = None, worker: int = 0) -> Any:
    """Create the study or load it to resume; a study made for another algo/env/budget is an error.

    Args:
        settings: the study settings.
        storage: an opened storage (None: open ``settings.storage``).
        worker: worker index (the sampler seed is ``seed + worker``).
    """
    import optuna

    storage = storage if storage is not None else open_storage(settings.storage)
    seed = None if settings.seed is None else settings.seed + worker
    sampler = make_sampler(settings.sampler, seed=seed, n_startup_trials=settings.n_startup_trials)
    study = optuna.create_study(study_name=settings.study_name, storage=storage, sampler=sampler,
                                pruner=_pruner(settings), direction="maximize", load_if_exists=True)  # fmt: skip
    attrs = study.user_attrs
    if not attrs:
        for key in _IDENTITY:
            study.set_user_attr(key, getattr(settings, key))
        study.set_user_attr("search_space", settings.space)
        with warnings.catch_warnings():  # experimental since Optuna 3.2; a new user sees no warning for it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([objective_name(settings.objective, settings.seeds_per_trial)])  # the dashboard's
    else:
        for key in _IDENTITY:
            if key in attrs and attrs[key] != getattr(settings, key):
                raise BenchError(
                    f"study '{settings.study_name}' in {settings.storage} was made with {key}={attrs[key]!r}, not "
                    f"{getattr(settings, key)!r}; use the same options or another --study-name"
                )
    return study


def objective_name(objective: str, seeds: int) -> str:
    """What a study's value measures, as the dashboard names it (not Optuna's ``Objective 0``).

    Args:
        objective: ``final`` or ``last_mean`` (``--objective``).
        seeds: seeds per trial.
    """
    what = "final eval mean return" if objective == "final" else "mean eval return of the last 3 evaluations"
    return f"{what}, mean over {seeds} seed{'s' if seeds != 1 else ''}"


def dashboard_command(storage: str) -> str:
    """The command that shows a study's storage in optuna-dashboard.

    Args:
        storage: a journal file path or an RDB URL (``--storage``).
    """
    import shlex

    return f"optuna-dashboard {shlex.quote(storage)}"


def finished_count(study: Any) -> int:
    """COMPLETE + PRUNED trials of the study.

    Args:
        study: the study.
    """
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
