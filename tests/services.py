"""Real services for the distributed tests: a throw-away PostgreSQL server and an ``mlflow server``, each on a
free loopback port, started by the test and stopped after (context managers).

Nothing is skipped: a service that cannot start raises :class:`ServiceError` with the reason and the tail of its
log (``scripts/setup.sh`` installs Debian's ``postgresql`` package when it runs as root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ServiceError", "free_port", "postgres_bin", "postgres_server", "MlflowServer", "mlflow_server"]


class ServiceError(RuntimeError):
    """A test service could not start (the message says why)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------------------
def postgres_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<ver>/bin`` (Debian's layout), else the folder of ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]) if
                   Path(p).parts[4].isdigit() else 0)  # fmt: skip
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise ServiceError("PostgreSQL binaries not found (/usr/lib/postgresql/*/bin/initdb): run scripts/setup.sh as "
                       "root (it installs Debian's postgresql package) or apt-get install postgresql")  # fmt: skip


def _as_postgres(cmd: list[str]) -> list[str]:
    """``cmd`` run as the ``postgres`` user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ServiceError("running as root but runuser is missing: cannot start PostgreSQL as the postgres user")
    return [runuser, "-u", "postgres", "--", *cmd]


def _run(cmd: list[str], what: str, timeout: float = 120) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ServiceError(f"{what} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")


@contextlib.contextmanager
def postgres_server(database: str = "bench", timeout: float = 120) -> Iterator[str]:
    """Start a PostgreSQL server in a temp folder on a free port, create ``database``; yield its URL
    (``postgresql://postgres@127.0.0.1:<port>/<database>``); stop it and remove the folder after.

    Args:
        database: database to create.
        timeout: seconds to wait for the server.
    """
    bindir = postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="bench-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            raise ServiceError(
                "running as root but there is no 'postgres' user (install Debian's postgresql)"
            ) from None
        os.chown(root, user.pw_uid, user.pw_gid)
    data, log = root / "data", root / "postgres.log"
    port = free_port()
    started = False
    try:
        _run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                           "--locale=C", "--no-sync"]), "initdb")  # fmt: skip
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
        cmd = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", str(int(timeout)),
               "start"]  # fmt: skip
        proc = subprocess.run(_as_postgres(cmd), capture_output=True, text=True, timeout=timeout + 30)
        started = True
        if proc.returncode != 0:
            raise ServiceError(f"pg_ctl start failed (exit {proc.returncode}): {proc.stderr.strip()[-1000:]}\n"
                               f"log: {_tail(log)}")  # fmt: skip
        _run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database], "createdb")
        yield f"postgresql://postgres@127.0.0.1:{port}/{database}"
    finally:
        if started:
            with contextlib.suppress(Exception):
                subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                               capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# mlflow server
# ---------------------------------------------------------------------------------------------------------
def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


class MlflowServer:
    """``mlflow server`` on a free loopback port, artifacts proxied by the server into ``folder/artifacts``.

    :meth:`start` returns at once (so its seconds of imports overlap with other set-up), :meth:`wait` blocks
    until ``/health`` answers, :meth:`stop` ends the whole process group.

    Args:
        folder: where the server's files go (``mlflow.db`` when no backend is given, ``artifacts/``, the log).
        backend_store_uri: the backend store (default ``sqlite:///<folder>/mlflow.db``).
    """

    def __init__(self, folder: Path, backend_store_uri: str | None = None) -> None:
        self.folder = folder
        self.backend = backend_store_uri or f"sqlite:///{folder / 'mlflow.db'}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "mlflow-server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MlflowServer:
        """Start the server process (does not wait)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        exe = Path(sys.executable).parent / "mlflow"
        cmd = [str(exe) if exe.exists() else "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
               "--backend-store-uri", self.backend, "--artifacts-destination", str(self.folder / "artifacts"),
               "--workers", "1"]  # fmt: skip
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=self.folder,
                                         start_new_session=True)  # fmt: skip
        return self

    def wait(self, timeout: float = 240) -> str:
        """Block until ``/health`` answers; returns the URL.

        Args:
            timeout: seconds to wait.
        """
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + timeout
        while not _healthy(self.url):
            if self.proc.poll() is not None:
                raise ServiceError(f"mlflow server exited with code {self.proc.returncode}: {_tail(self.log)}")
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"mlflow server did not answer {self.url}/health within {timeout:g} s: {_tail(self.log)}"
                )
            time.sleep(0.5)
        return self.url

    def stop(self) -> None:
        """Terminate the server (its process group); kill it after 15 s."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


@contextlib.contextmanager
def mlflow_server(folder: Path, backend_store_uri: str | None = None, timeout: float = 240) -> Iterator[str]:
    """Start :class:`MlflowServer`, yield its URL once healthy, stop it after.

    Args:
        folder: the server's folder.
        backend_store_uri: the backend store (default ``sqlite:///<folder>/mlflow.db``).
        timeout: seconds to wait for ``/health``.
    """
    server = MlflowServer(folder, backend_store_uri).start()
    try:
        yield server.wait(timeout)
    finally:
        server.stop()
