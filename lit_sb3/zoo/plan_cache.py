"""A memo of ``bench run``'s planning, so that a rerun plans without importing torch or Lightning.

Planning an (algo, env) pair (:func:`lit_sb3.zoo.jobs.plan_grid`) checks that the algorithm can handle the env's
spaces and resolves the pair's config, checking every value against the constructor annotations of the algorithm,
its policy, optimizer and buffer classes: that imports the algorithm module and with it torch and Lightning (5 s
of a no-op rerun's 10 s). Its outcome is a pure function of its inputs, so it is recorded here, one small JSON file
per pair, and replayed when every input is the same:

- the pair, ``--n-timesteps``, the suite's default budget for the env, ``--hyperparams``;
- the *contents* of the built-in zoo file of the algorithm and of every ``--config`` file, in order;
- the code and the environment: path, size and modification time of every ``.py`` file of the imported
  ``lit_sb3`` package, the modification time of every ``site-packages`` folder on ``sys.path`` (an install,
  upgrade or removal of any package changes it), the Python version, and :data:`VERSION` of this format.

A miss (any input changed, a file unreadable) simply plans the pair as before and records the result; errors are
never recorded, so a bad input fails the same way every time. Env ids of the ``module:Env-v0`` form are never
recorded (the module could change without any of the above), nor algorithms registered from outside ``lit_sb3``
(plugins). This memo replaces a metadata file of every class's
signature (algorithm, policies, optimizers, buffers, with their annotations): that file would have to reproduce
the checks exactly, or job ids (a hash of the resolved config) would silently change, whereas a replayed plan is
the plan itself.

Where: ``$LIT_SB3_CACHE_DIR/plans`` if set, else ``$XDG_CACHE_HOME/lit_sb3/plans`` (default ``~/.cache``).
Set ``LIT_SB3_CACHE_DIR`` to an empty string to turn the memo off. Entries are plain JSON read with a size bound;
a job's config from an entry is decoded by the worker through the same class whitelist as always.

A cache may save time, never change a result (this module's helpers serve the probe memo and the MLflow store
template too): an entry is used only from a folder that is this user's and that nobody else can write (no symlink,
owner = this user, no group/other write bit), as a file of the same kind, and only when it carries a MAC (HMAC-SHA256
with a random per-user key, ``<cache root>/key``, mode 0600) over its name, which is the digest of every input it
stands for, and its content. An entry planted by someone else, copied from another machine or account, edited, or
moved to another key fails one of these and is ignored (recomputed and rewritten). Measured (what each saves):
see docs/architecture.md, "Caches".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PlanCache", "VERSION", "cache_dir"]

#: version of the entries' format (part of every key)
VERSION = 1
_MAX_ENTRY_BYTES = 1 << 20  # an entry is a few kB; anything larger is not ours
_FINGERPRINT: str | None = None


def cache_dir() -> Path | None:
    """The folder of the recorded plans (None: ``LIT_SB3_CACHE_DIR`` is set empty, the memo is off)."""
    env = os.environ.get("LIT_SB3_CACHE_DIR")
    if env is not None:
        return Path(env) / "plans" if env.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lit_sb3" / "plans"


_KEY_BYTES = 32


def _private(st: os.stat_result, kind: int) -> bool:
    """True when ``st`` is a ``kind`` (``stat.S_IFDIR``/``S_IFREG``) owned by this user that nobody else can write."""
    getuid = getattr(os, "getuid", None)
    return getuid is not None and stat.S_IFMT(st.st_mode) == kind and st.st_uid == getuid() and not st.st_mode & 0o022


def private_folder(folder: Path, create: bool = False) -> bool:
    """Whether ``folder`` (and the cache root above it) is this user's and writable by nobody else.

    Args:
        folder: a cache folder (``plans``, ``probes``, ``mlflow-templates``).
        create: make it (mode 0700) when missing; a refused command never creates anything.
    """
    try:
        if create:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return all(_private(os.lstat(f), stat.S_IFDIR) for f in (folder, folder.parent))
    except OSError:
        return False


def _mac_key(root: Path, create: bool) -> bytes | None:
    """The per-user MAC key in ``root`` (created, mode 0600, when ``create`` and missing); None when it is missing,
    not this user's private file or of the wrong size."""
    path = root / "key"
    if create and not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(_KEY_BYTES))
        except FileExistsError:
            pass
        except OSError:
            return None
    data = _read_private(path, _KEY_BYTES, strict=True)
    return data if data is not None and len(data) == _KEY_BYTES else None


def _read_private(path: Path, max_bytes: int, strict: bool = False) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of this user that nobody else can write (``strict``: nor read),
    not a symlink, of at most ``max_bytes``; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not _private(st, stat.S_IFREG) or st.st_size > max_bytes or (strict and st.st_mode & 0o077):
            return None
        return fh.read(max_bytes + 1)


def _mac(key: bytes, name: str, body: bytes) -> str:
    return hmac.new(key, name.encode("utf-8") + b"\0" + body, hashlib.sha256).hexdigest()


def sealed_read(path: Path, max_bytes: int) -> Any:
    """The JSON payload of the entry ``path`` when the entry is verified (private folder and file, MAC over its
    name and payload with this user's key), else None (the caller recomputes).

    Args:
        path: the entry (its name is the digest of the inputs it stands for).
        max_bytes: the largest entry accepted.
    """
    if not private_folder(path.parent):
        return None
    key = _mac_key(path.parent.parent, create=False)
    data = _read_private(path, max_bytes)
    if key is None or data is None:
        return None
    try:
        entry = json.loads(data.decode("utf-8"))
        body = json.dumps(entry["payload"]).encode("utf-8")  # the order kept: a listing is ordered
        if hmac.compare_digest(str(entry["mac"]), _mac(key, path.name, body)):
            return entry["payload"]
    except (ValueError, KeyError, TypeError):
        pass
    return None


def sealed_write(path: Path, payload: Any) -> None:
    """Record ``payload`` at ``path`` with its MAC, atomically, in a private folder (made if missing); a folder that
    is not private or not writable records nothing.

    Args:
        path: the entry.
        payload: JSON-able.
    """
    if not private_folder(path.parent, create=True):
        return
    key = _mac_key(path.parent.parent, create=True)
    if key is None:
        return
    body = json.dumps(payload).encode("utf-8")
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"mac": _mac(key, path.name, body), "payload": payload}))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def code_fingerprint() -> str:
    """sha256 of what the outcome of planning depends on besides its arguments: the ``lit_sb3`` sources (path,
    size, mtime), the ``site-packages`` folders' mtimes, the Python version (computed once per process)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import lit_sb3

        h = hashlib.sha256(f"v{VERSION}|{sys.version}|{sys.platform}".encode())
        root = Path(lit_sb3.__file__).resolve().parent
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{os.path.join(folder, name)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        for entry in sys.path:
            if os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages") and os.path.isdir(entry):
                h.update(f"{entry}|{os.stat(entry).st_mtime_ns}\n".encode())
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


def _file_digest(path: Path) -> str:
    """sha256 of a config file; a file that is not a regular file of at most ``MAX_YAML_BYTES`` is not read
    (its loading refuses it with one line later)."""
    import stat

    from lit_sb3.zoo.config.loading import MAX_YAML_BYTES

    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_YAML_BYTES:
            return f"unread:{st.st_mode}:{st.st_size}"
        with path.open("rb") as fh:
            return hashlib.sha256(fh.read(MAX_YAML_BYTES + 1)).hexdigest()
    except OSError:
        return "missing"


class PlanCache:
    """The recorded outcomes of planning (algo, env) pairs with the same configs, overrides and budgets.

    Args:
        config_files: the ``--config`` files, in order.
        overrides: ``--hyperparams`` ``key -> value text``.
        n_timesteps: ``--n-timesteps`` (None: the configs' or the suite's).
        folder: where entries live (default :func:`cache_dir`; None there: the memo is off).
        defer: keep new entries until :meth:`flush` (a command refused after planning records nothing).
    """

    def __init__(
        self,
        config_files: Sequence[str | Path] = (),
        overrides: Mapping[str, str] | None = None,
        n_timesteps: int | None = None,
        folder: Path | None = None,
        defer: bool = False,
    ) -> None:
        self.folder = folder if folder is not None else cache_dir()
        self._defer = defer
        self._pending: list[tuple[Path, dict[str, Any]]] = []
        self._common = {
            "configs": [[str(Path(p).resolve()), _file_digest(Path(p))] for p in config_files],
            "overrides": sorted((str(k), str(v)) for k, v in (overrides or {}).items()),
            "n_timesteps": n_timesteps,
        }
        self.hits = 0
        self.misses = 0

    def _path(self, algo: str, env_id: str, default_budget: int | None) -> Path | None:
        from lit_sb3.algorithms.registry import ALGORITHMS

        registered = ALGORITHMS.get(algo, "")
        if self.folder is None or ":" in env_id or not registered.startswith("lit_sb3."):
            return None  # the memo is off, or the env's module / the algorithm (a plugin) is outside lit_sb3
        from lit_sb3.zoo.config.loading import zoo_config_dir

        builtin = zoo_config_dir() / f"{algo}.yml"
        key = {**self._common, "algo": algo, "registered": registered, "env_id": env_id,
               "default_budget": default_budget,
               "builtin": [str(builtin.resolve()), _file_digest(builtin)], "code": code_fingerprint()}  # fmt: skip
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
        return self.folder / f"{algo}-{digest[:32]}.json"

    def get(self, algo: str, env_id: str, default_budget: int | None) -> dict[str, Any] | None:
        """The recorded outcome of the pair (``{"skip": reason}`` or ``{"config", "config_hash", "budget",
        "note"}``), or None.

        Args:
            algo: algorithm name.
            env_id: env id.
            default_budget: the suite's budget for the env (None: none).
        """
        path = self._path(algo, env_id, default_budget)
        entry = sealed_read(path, _MAX_ENTRY_BYTES) if path is not None else None
        if not (isinstance(entry, dict) and entry.get("algo") == algo and entry.get("env_id") == env_id):
            entry = None
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, algo: str, env_id: str, default_budget: int | None, outcome: Mapping[str, Any]) -> None:
        """Record the outcome of planning the pair (written atomically; an unwritable folder records nothing).

        Args:
            algo: algorithm name.
            env_id: env id.
            default_budget: the suite's budget for the env.
            outcome: ``{"skip": reason}`` or ``{"config", "config_hash", "budget", "note"}``.
        """
        path = self._path(algo, env_id, default_budget)
        if path is None:
            return
        self._pending.append((path, {"algo": algo, "env_id": env_id, **outcome}))
        if not self._defer:
            self.flush()

    def flush(self) -> None:
        """Write the entries kept so far (the plan was accepted)."""
        pending, self._pending = self._pending, []
        for path, entry in pending:
            sealed_write(path, entry)
