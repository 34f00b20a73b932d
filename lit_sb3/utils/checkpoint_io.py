"""The one safe way in for checkpoints and model files: local paths, http(s) URLs and fsspec URLs.

Every entry point that reads a checkpoint or a model (``RLTrainer.fit(ckpt_path=)``, ``load_from_checkpoint``,
``BaseAlgorithm.load``, ``bench enjoy --model``) comes through :func:`local_copy` and :func:`load_checkpoint`:

* a remote file (``http(s)://``, ``s3://``, ``memory://``, ...) is streamed into a private temporary file, at most
  :data:`MAX_FETCH_BYTES`, and deleted afterwards whatever happens: nothing stays behind (torch's hub cache,
  ``$TORCH_HOME/hub/checkpoints``, is never used, so a refused file is not kept there);
* a local file must be a regular file;
* tensors are read with ``torch.load(weights_only=True)`` only, whatever the caller asks; a file that needs more
  (a pickle payload) is one :class:`~lit_sb3.utils.files.BadFileError` line naming it, and nothing of it runs.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import tempfile
from collections.abc import Iterator
from typing import Any

from lightning.pytorch.plugins.io import TorchCheckpointIO

from lit_sb3.utils.files import BadFileError, check_file, torch_load_error

__all__ = ["MAX_FETCH_BYTES", "SafeCheckpointIO", "is_url", "load_checkpoint", "local_copy"]

#: the most bytes a checkpoint or model file may hold (checkpoints may carry a replay buffer)
MAX_FETCH_BYTES = 64 * 2**30
#: seconds a remote read may wait for data
FETCH_TIMEOUT_S = 30.0
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_CHUNK = 1 << 20


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path.

    Args:
        path: a path, URL or buffer.
    """
    return isinstance(path, str) and bool(_URL_RE.match(path))


def _copy_bounded(src: Any, dst: Any, where: str, limit: int) -> None:
    total = 0
    while chunk := src.read(_CHUNK):
        total += len(chunk)
        if total > limit:
            raise BadFileError(f"{where}: more than {limit:,} bytes, more than a checkpoint or model may hold")
        dst.write(chunk)


@contextlib.contextmanager
def local_copy(path: str | os.PathLike, what: str = "checkpoint", limit: int = MAX_FETCH_BYTES) -> Iterator[str]:
    """A local regular file with the content of ``path``: the file itself, or a bounded private copy of a remote
    one (deleted on exit, also on error).

    Args:
        path: a local path, an ``http(s)://`` URL or any fsspec URL (``file://``, ``s3://``, ``memory://``, ...).
        what: what the file is, for messages.
        limit: the most bytes it may hold.

    Raises:
        FileNotFoundError: no file there.
        BadFileError: not a regular file, too large, or unreadable (one line naming it).
    """
    where = os.fspath(path)
    if not is_url(where) or where.startswith("file://"):
        local = where[len("file://") :] if where.startswith("file://") else where
        check_file(local, limit, what)
        yield local
        return
    with tempfile.TemporaryDirectory(prefix="lit_sb3-fetch-") as folder:
        target = pathlib.Path(folder) / "download"
        try:
            with open(target, "wb") as dst:
                if where.startswith(("http://", "https://")):
                    import urllib.request

                    request = urllib.request.Request(where, headers={"User-Agent": "lit_sb3"})
                    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as src:  # noqa: S310 - http(s) only
                        declared = src.headers.get("Content-Length")
                        if declared is not None and declared.isdigit() and int(declared) > limit:
                            raise BadFileError(f"{where}: {what} declares {int(declared):,} bytes, over {limit:,}")
                        _copy_bounded(src, dst, where, limit)
                else:
                    import fsspec

                    with fsspec.open(where, "rb") as src:
                        _copy_bounded(src, dst, where, limit)
        except BadFileError:
            raise
        except FileNotFoundError:
            raise FileNotFoundError(f"{where}: no such {what}") from None
        except Exception as exc:  # noqa: BLE001 - network and filesystem errors of every kind: one line
            first = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise BadFileError(f"{where}: cannot fetch the {what}: {first}") from None
        yield str(target)


def load_checkpoint(path: str | os.PathLike, map_location: Any = None, what: str = "checkpoint") -> Any:
    """Read a torch file (a Lightning checkpoint) from a local path or URL with ``weights_only=True``.

    Args:
        path: a local path, ``http(s)://`` URL or fsspec URL.
        map_location: torch's ``map_location``.
        what: what the file is, for messages.

    Raises:
        BadFileError: a file that cannot be loaded safely (one line naming it); nothing in it is executed.
    """
    import torch as th

    where = os.fspath(path)
    with local_copy(path, what) as local:
        try:
            return th.load(local, map_location=map_location, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad or unsafe file
            raise BadFileError(
                f"{where}: {what} cannot be loaded safely (weights_only=True): {torch_load_error(exc)}"
            ) from None


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO, reading through :func:`load_checkpoint` (saving is unchanged)."""

    def load_checkpoint(  # type: ignore[override]
        self, path: Any, map_location: Any = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        """Read a checkpoint with :func:`load_checkpoint` (``weights_only=False`` is refused).

        Args:
            path: a local path, ``http(s)://`` URL or fsspec URL.
            map_location: torch's ``map_location``.
            weights_only: ``None`` or ``True``.
        """
        if weights_only is False:
            raise ValueError("checkpoints are loaded only with weights_only=True (False lets the file run code)")
        return load_checkpoint(path, map_location=map_location)
