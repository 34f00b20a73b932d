"""Files a user names, checked before anything is read (no heavy imports: the suite's planning uses it).

:class:`BadFileError` is the one error of every loader (model archives, replay buffers, VecNormalize statistics,
checkpoints, configs): one line naming the file and the problem.
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any

__all__ = ["BadFileError", "check_file", "load_json", "torch_load_error"]


class BadFileError(ValueError):
    """A file that cannot be loaded safely: malformed, foreign, from a newer version, too big or unsafe.

    The message is one line naming the file and the problem.
    """


def check_file(path: str | os.PathLike, limit: int, what: str = "file") -> int:
    """The size of a file a user named, after checking that it is a regular file of at most ``limit`` bytes
    (nothing is read: a sparse 1.5 GB file or ``/dev/zero`` is refused at once).

    Args:
        path: the file.
        limit: the most bytes it may hold.
        what: what the file is, for messages.

    Raises:
        FileNotFoundError: no such file.
        BadFileError: not a regular file, or larger than ``limit`` (one line naming the file).
    """
    where = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such {what}") from None
    except OSError as exc:
        raise BadFileError(f"{where}: cannot read {what}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadFileError(f"{where}: {what} is not a regular file")
    if st.st_size > limit:
        raise BadFileError(f"{where}: {what} too large (over {limit:,} bytes): {st.st_size:,} bytes")
    return st.st_size


def load_json(raw: bytes | str, where: str, what: str = "JSON") -> Any:
    """Parse JSON from a file, every failure one :class:`BadFileError` line naming the file: not UTF-8, not JSON
    (a pickle is said to be one: it is never loaded), nested deeper than Python recurses (200,000 ``[``), an
    integer longer than Python converts (100,000 digits).

    Args:
        raw: the file's bytes (already bounded by the caller) or text.
        where: the file, for messages.
        what: what the text is (``data.json``, ...), for messages.
    """
    where = f"{where}: " if where else ""  # "": the caller names the file
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise BadFileError(f"{where}{what} is not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise BadFileError(f"{where}{what} is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and int() of an over-long number
        pickle = (
            " (it looks like a pickle, which is never loaded)" if isinstance(raw, bytes) and raw[:1] == b"\x80" else ""
        )
        raise BadFileError(f"{where}{what} is not valid JSON{pickle}: {' '.join(str(exc).split())[:200]}") from None


def torch_load_error(exc: BaseException) -> str:
    """The one line worth showing of ``torch.load``'s refusal: the unsupported global a pickle names (``Unsupported
    global: GLOBAL pathlib.Path.touch``) rather than torch's multi-line advice, else its first line.

    Args:
        exc: what ``torch.load`` raised.
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    found = re.search(r"Unsupported (global|operand)[^\n.]*", text)
    if found:
        return "Weights only load failed: " + " ".join(found.group(0).split())
    return " ".join(text.splitlines()[0].split())[:300] if text else type(exc).__name__
