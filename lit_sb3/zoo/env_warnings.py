"""Third-party warnings emitted while an env is built, caught and said once.

Building an env can make its family talk: gymnasium's and the env's Python warnings, and MuJoCo's C warnings
(``compiler attribute 'settotalmass' is deprecated``), which MuJoCo's default handler prints to the terminal, through
a live display, and appends to ``MUJOCO_LOG.TXT`` in the working folder. :func:`captured` catches both while an env
is built (MuJoCo's through its user warning handler, installed before a MuJoCo env's model is compiled, so nothing is
written to the working folder), and :func:`drain` hands each distinct message once to whoever shows it: the planning
prints them above the live display, a worker into its job log.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

__all__ = ["captured", "drain"]

_lock = threading.Lock()
_seen: set[str] = set()
_pending: list[str] = []
_mujoco_handler_installed = False


def _note(text: str) -> None:
    text = " ".join(str(text).split())
    with _lock:
        if text and text not in _seen:
            _seen.add(text)
            _pending.append(text)


def _install_mujoco_handler() -> None:
    """MuJoCo's warnings to :func:`_note` instead of the terminal and ``MUJOCO_LOG.TXT`` (once per process)."""
    global _mujoco_handler_installed
    if _mujoco_handler_installed:
        return
    try:
        import mujoco
    except ImportError:  # the mujoco extra is not installed: the env fails with its own one-line error
        return
    mujoco.set_mju_user_warning(lambda message: _note(f"MuJoCo: {message}"))
    _mujoco_handler_installed = True


@contextlib.contextmanager
def captured(env_id: str) -> Iterator[None]:
    """Catch the Python warnings (and, for a MuJoCo env, MuJoCo's) emitted while ``env_id``'s env is built.

    Args:
        env_id: the env being built.
    """
    from lit_sb3.zoo.cost import env_family

    if env_family(env_id) == "mujoco":
        _install_mujoco_handler()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                _note(f"{env_id}: {w.category.__name__}: {w.message}")


def drain() -> list[str]:
    """The messages caught since the last call, each distinct one once per process."""
    with _lock:
        out = list(_pending)
        _pending.clear()
    return out
