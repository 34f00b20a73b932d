"""The built-in zoo files are rl_zoo3 2.9.2's published ones: every entry resolves, except those that name a wrapper
of another package that lit_sb3 does not have (a one-line error when that entry is run)."""

from __future__ import annotations

from pathlib import Path

#: entries of the published files that name a wrapper lit_sb3 does not have, and the words of their error
REFUSED = {
    "ppo": ("MiniGrid-", "a wrapper of the minigrid package, not available in lit_sb3"),
    "sac": ("CarRacing-v3", "a pretrained-autoencoder wrapper"),
    "tqc": ("CarRacing-v0", "a pretrained-autoencoder wrapper"),
}


def resolve_published_file(algo: str, path: str | Path, algo_class: type | None = None) -> list[str]:
    """Resolve every entry of a zoo file; return the env ids that resolve (the refused ones are checked).

    Args:
        algo: algorithm name.
        path: the zoo file.
        algo_class: the class whose constructor defines the allowed keys (default: the registered one).
    """
    from lit_sb3.zoo.config import load_zoo_file, resolve
    from lit_sb3.zoo.errors import BenchError

    resolved = []
    for env_id in load_zoo_file(path):
        if env_id == "default":
            continue
        try:
            resolve(algo, env_id, config_files=[path], builtin=False, algo_class=algo_class)
        except BenchError as exc:
            prefix, words = REFUSED.get(algo, ("\0", "\0"))
            message = str(exc)
            assert env_id.startswith(prefix) and words in message and "\n" not in message, message
            continue
        resolved.append(env_id)
    return resolved
