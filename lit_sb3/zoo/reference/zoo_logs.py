"""Read and check one RL Zoo log folder (``logs/<algo>/<env>_<n>/``) before anything of it is recorded.

What rl_zoo3's ``train`` leaves there: ``<env>/args.yml`` (its command-line arguments) and ``<env>/config.yml``
(the hyperparameters it trained with), both written by PyYAML as ``!!python/object/apply:collections.OrderedDict``
lists of pairs; ``evaluations.npz`` (SB3's ``EvalCallback``: ``timesteps`` [n], ``results`` and ``ep_lengths``
[n, episodes]); ``<i>.monitor.csv`` per training sub-env; ``<env>.zip``, the final model, written when training
ends. Reading executes nothing: the YAML loader is PyYAML's safe loader plus one constructor that turns that
OrderedDict tag into a plain dict (no other python tag is accepted), ``evaluations.npz`` is read with
``allow_pickle=False`` after its declared array sizes are checked, and every file's size is bounded first.
A folder that is incomplete or malformed raises one :class:`ZooFolderError` line naming it and what is wrong.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

__all__ = ["ZooFolderError", "ZooRun", "find_zoo_runs", "read_zoo_run"]

MAX_YAML_BYTES = 1 << 20
MAX_NPZ_BYTES = 64 << 20
MAX_MONITOR_BYTES = 256 << 20
MAX_EVALUATIONS = 100_000
MAX_EPISODES = 10_000
_ORDERED_DICT_TAG = "tag:yaml.org,2002:python/object/apply:collections.OrderedDict"


class ZooFolderError(ValueError):
    """An RL Zoo log folder that cannot be imported: one line naming the folder and what is wrong."""


class _ZooYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader that also reads the OrderedDict tag rl_zoo3 writes, as a plain dict."""


def _ordered_dict(loader: _ZooYamlLoader, node: yaml.Node) -> dict[str, Any]:
    if not isinstance(node, yaml.SequenceNode):
        raise yaml.constructor.ConstructorError(None, None, "expected a list of [key, value] pairs", node.start_mark)
    (pairs,) = loader.construct_sequence(node, deep=True) if len(node.value) == 1 else (None,)
    if pairs is None or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise yaml.constructor.ConstructorError(None, None, "expected a list of [key, value] pairs", node.start_mark)
    return {str(k): v for k, v in pairs}


_ZooYamlLoader.add_constructor(_ORDERED_DICT_TAG, _ordered_dict)


@dataclass
class ZooRun:
    """One checked RL Zoo run folder.

    Args:
        path: the folder.
        algo: ``--algo`` of the run.
        env_id: ``--env``.
        seed: ``--seed``.
        args: every argument of ``train`` (``args.yml``).
        config: the hyperparameters it trained with (``config.yml``: the zoo-format entry, raw values).
        timesteps: env steps of each evaluation.
        results: returns of each evaluation's episodes ``[n, episodes]``.
        ep_lengths: their lengths.
        episodes: training episodes from the monitor files: ``(sub-env index, return, length, seconds since the
            start)``.
        model_file: the final model (the file is copied, never loaded).
    """

    path: Path
    algo: str
    env_id: str
    seed: int
    args: dict[str, Any]
    config: dict[str, Any]
    timesteps: np.ndarray
    results: np.ndarray
    ep_lengths: np.ndarray
    episodes: list[tuple[int, float, int, float]] = field(default_factory=list)
    model_file: Path | None = None

    @property
    def n_envs(self) -> int:
        """Training sub-envs (the config's ``n_envs``, 1 by default as in rl_zoo3)."""
        return int(self.config.get("n_envs", 1) or 1)

    @property
    def training_seconds(self) -> float | None:
        """Seconds from the first sub-env's creation to the last training episode's end (monitor files), or None."""
        return max((e[3] for e in self.episodes), default=None)


def _fail(path: Path, what: str) -> ZooFolderError:
    return ZooFolderError(f"{path}: {what}")


def _read_bounded(path: Path, limit: int, folder: Path) -> bytes:
    size = path.stat().st_size
    if size > limit:
        raise _fail(folder, f"{path.name} is {size:,} bytes, more than the {limit:,} a run's file may have")
    return path.read_bytes()


def _read_yaml(path: Path, folder: Path) -> dict[str, Any]:
    if not path.is_file():
        raise _fail(folder, f"incomplete: no {path.relative_to(folder)}")
    try:
        data = yaml.load(_read_bounded(path, MAX_YAML_BYTES, folder).decode("utf-8"), Loader=_ZooYamlLoader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise _fail(folder, f"{path.name} is not rl_zoo3's YAML ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(data, dict):
        raise _fail(folder, f"{path.name} holds no mapping")
    return data


def _read_evaluations(path: Path, folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not path.is_file():
        raise _fail(folder, "incomplete: no evaluations.npz (no evaluation was made)")
    blob = _read_bounded(path, MAX_NPZ_BYTES, folder)
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            declared = sum(info.file_size for info in zf.infolist())
        if declared > MAX_NPZ_BYTES:
            raise _fail(folder, f"evaluations.npz declares {declared:,} bytes of arrays")
        with np.load(io.BytesIO(blob), allow_pickle=False) as data:
            arrays = {key: data[key] for key in ("timesteps", "results", "ep_lengths") if key in data.files}
    except ZooFolderError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise _fail(folder, f"evaluations.npz cannot be read ({' '.join(str(exc).split())[:200]})") from None
    missing = [key for key in ("timesteps", "results", "ep_lengths") if key not in arrays]
    if missing:
        raise _fail(folder, f"evaluations.npz has no {', '.join(missing)} (not SB3's EvalCallback file)")
    steps, results, lengths = arrays["timesteps"], arrays["results"], arrays["ep_lengths"]
    if steps.ndim != 1 or not 1 <= steps.shape[0] <= MAX_EVALUATIONS or not np.issubdtype(steps.dtype, np.integer):
        raise _fail(folder, f"evaluations.npz: timesteps must be 1-D integers, got shape {steps.shape} {steps.dtype}")
    n = steps.shape[0]
    for name, arr in (("results", results), ("ep_lengths", lengths)):
        if arr.ndim != 2 or arr.shape[0] != n or not 1 <= arr.shape[1] <= MAX_EPISODES:
            raise _fail(folder, f"evaluations.npz: {name} must be [{n} evaluations, episodes], got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)):
            raise _fail(folder, f"evaluations.npz: {name} must be finite numbers")
    if results.shape != lengths.shape:
        raise _fail(folder, f"evaluations.npz: results {results.shape} and ep_lengths {lengths.shape} differ")
    if np.any(steps <= 0) or np.any(np.diff(steps) <= 0):
        raise _fail(folder, "evaluations.npz: timesteps must be positive and increasing")
    return steps.astype(np.int64), results.astype(np.float64), lengths.astype(np.int64)


def _read_monitors(folder: Path) -> list[tuple[int, float, int, float]]:
    episodes: list[tuple[int, float, int, float]] = []
    for path in sorted(folder.glob("*.monitor.csv")):
        index_text = path.name.split(".", 1)[0]
        if not index_text.isdigit():
            continue
        text = _read_bounded(path, MAX_MONITOR_BYTES, folder).decode("utf-8", errors="replace")
        header, _, body = text.partition("\n")
        try:
            json.loads(header.lstrip("#"))
            rows = list(csv.DictReader(io.StringIO(body)))
            episodes += [(int(index_text), float(r["r"]), int(float(r["l"])), float(r["t"])) for r in rows]
        except (ValueError, KeyError, TypeError) as exc:
            raise _fail(
                folder, f"{path.name} is not an SB3 monitor file ({' '.join(str(exc).split())[:120]})"
            ) from None
    return episodes


def read_zoo_run(folder: str | Path) -> ZooRun:
    """Read and check an RL Zoo run folder (``<log folder>/<algo>/<env>_<n>``).

    Args:
        folder: the run's folder.

    Raises:
        ZooFolderError: one line naming the folder and what is wrong.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise _fail(folder, "no such folder")
    subfolders = [p.parent for p in folder.glob("*/args.yml")]
    if len(subfolders) != 1:
        what = "no <env>/args.yml" if not subfolders else "several <env>/args.yml"
        raise _fail(folder, f"not an RL Zoo run folder ({what})")
    params_dir = subfolders[0]
    args = _read_yaml(params_dir / "args.yml", folder)
    config = _read_yaml(params_dir / "config.yml", folder)
    for key in ("algo", "env", "seed", "eval_freq", "eval_episodes", "n_timesteps"):
        if key not in args:
            raise _fail(folder, f"args.yml has no {key!r} (not rl_zoo3's train arguments)")
    if args.get("optimize_hyperparameters"):
        raise _fail(folder, "a hyperparameter optimisation, not a training run")
    model = folder / f"{params_dir.name}.zip"
    if not model.is_file():
        raise _fail(folder, f"incomplete: no final model {model.name} (training did not finish)")
    steps, results, lengths = _read_evaluations(folder / "evaluations.npz", folder)
    try:
        seed = int(args["seed"])
    except (TypeError, ValueError):
        raise _fail(folder, f"args.yml: seed {args['seed']!r} is not an integer") from None
    return ZooRun(
        path=folder, algo=str(args["algo"]), env_id=str(args["env"]), seed=seed, args=args, config=config,
        timesteps=steps, results=results, ep_lengths=lengths, episodes=_read_monitors(folder), model_file=model,
    )  # fmt: skip


def find_zoo_runs(root: str | Path) -> list[Path]:
    """The run folders under ``root``: ``root`` itself when it is one (holds ``*/args.yml``), else every folder
    below it that holds ``*/args.yml`` (a whole ``logs/`` tree), sorted.

    Args:
        root: a run folder or a log folder.
    """
    root = Path(root)
    if any(root.glob("*/args.yml")):
        return [root]
    return sorted({p.parent.parent for p in root.glob("**/*/args.yml")})
