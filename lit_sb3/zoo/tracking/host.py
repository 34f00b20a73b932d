"""Where a run comes from and whether its process still lives: hosts, pids, git and package versions, and the
fail-fast settings for remote stores (no mlflow import)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "fail_fast",
    "pid_alive",
    "probe_database",
    "process_alive",
    "process_tag",
    "run_environment_tags",
    "sqlite_path",
]


@contextlib.contextmanager
def fail_fast(timeout_s: int = 10) -> Iterator[None]:
    """No HTTP retries and a short request timeout (an unreachable server fails in seconds, not minutes).

    Args:
        timeout_s: per-request timeout.
    """
    keys = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout_s)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for other schemes).

    Args:
        uri: tracking URI.
    """
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///") :].split("?")[0])


def probe_database(uri: str, *, create: bool, timeout_s: float = 3.0) -> str | None:
    """Why a database tracking URI cannot be used (one line), found in seconds; None when it can, or when the
    URI is not a database (http servers are probed by MLflow's own fail-fast request).

    MLflow retries opening a database with back-off for about two minutes, logging each failure; this answers
    first: a sqlite file must be a readable database (or, when ``create``, its folder writable), a
    ``postgresql://``/``mysql://`` host must accept a TCP connection within ``timeout_s``.

    Args:
        uri: tracking URI (normalised).
        create: whether a missing sqlite file will be created.
        timeout_s: seconds for each attempt.
    """
    import sqlite3
    import tempfile
    from urllib.parse import quote, urlsplit

    path = sqlite_path(uri)
    if path is not None:
        if path.exists():
            if not path.is_file():
                return f"{str(path)!r} is not a file"
            try:
                con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=timeout_s)
                try:
                    con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                finally:
                    con.close()
            except sqlite3.Error as exc:
                return f"{str(path)!r} is not a readable sqlite database ({' '.join(str(exc).split())})"
        elif create:
            try:
                tempfile.TemporaryFile(dir=path.parent).close()
            except OSError as exc:
                return f"cannot create {str(path)!r}: {exc.strerror or exc}"
        return None
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    ports = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}
    if scheme not in ports:
        return None
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname or "localhost", parts.port or ports[scheme]
    except ValueError as exc:
        return f"malformed URI ({exc})"
    if host.startswith("/"):
        return None  # a unix socket: nothing to probe here
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"no database answers at {host}:{port} within {timeout_s:g} s ({exc.strerror or exc})"


def _git_commit() -> str:
    """The checkout's commit; ``unknown`` for an installed package (whose folder may sit inside another
    repository, e.g. a virtual environment in a checkout)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file() or not (root / "lit_sb3").is_dir():
        return "unknown"
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def run_environment_tags() -> dict[str, str]:
    """Version and git tags put on every job run."""
    from importlib import metadata

    import gymnasium

    import lit_sb3

    try:  # the installed distribution's version: the parent of a grid need not import torch (seconds) for it
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        import torch

        torch_version = str(torch.__version__)
    return {
        "lit_sb3.version": lit_sb3.__version__,
        "torch.version": torch_version,
        "gymnasium.version": gymnasium.__version__,
        "git.commit": _git_commit(),
    }


def _proc_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks (Linux), to tell a live process from a reused pid."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host and is not a zombie (unknown: assumed alive).

    Args:
        pid: process id.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def process_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_proc_start(os.getpid()) or ''}"


def process_alive(tag: str | None) -> bool:
    """Whether the ``host:pid:start`` process is alive on this host (other hosts: assumed dead)."""
    if not tag:
        return False
    host, _, rest = tag.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid() or not pid_alive(pid):
        return False
    now = _proc_start(pid)
    return not start or now is None or now == start
