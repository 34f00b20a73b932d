"""The algorithms lit_sb3 knows: ONE registration line per algorithm.

Each line maps the algorithm's zoo/bench name to ``"module:Class"``. Everything else about an algorithm lives on
its class (:class:`~lit_sb3.algorithms.base.BaseAlgorithm`'s metadata: ``zoo_name``, ``supported_action_spaces``,
``supported_observation_spaces``, ``policy_aliases``, ``default_run_name``, ``search_space``), and the library's
lazy export table (``lit_sb3.PPO``), ``bench list``, the zoo registry and the tuner derive from it.

This module imports nothing heavy: names and import paths are known without importing torch or Lightning; a class
is imported only when it is asked for (:func:`algorithm_class`). See ``docs/adding_an_algorithm.md``.
"""

from __future__ import annotations

import difflib
import importlib

__all__ = ["ALGORITHMS", "algorithm_class", "algorithm_exports", "register_algorithm", "unregister_algorithm"]

#: zoo/bench name -> "module:Class" (the one line to add for a new algorithm)
ALGORITHMS: dict[str, str] = {
    "ppo": "lit_sb3.algorithms.ppo:PPO",
    "a2c": "lit_sb3.algorithms.a2c:A2C",
    "sac": "lit_sb3.algorithms.sac:SAC",
    "tqc": "lit_sb3.algorithms.tqc:TQC",
    "crossq": "lit_sb3.algorithms.crossq:CrossQ",
    "td3": "lit_sb3.algorithms.td3:TD3",
    "ddpg": "lit_sb3.algorithms.ddpg:DDPG",
    "dqn": "lit_sb3.algorithms.dqn:DQN",
    "qrdqn": "lit_sb3.algorithms.qrdqn:QRDQN",
    "ppo_mask": "lit_sb3.algorithms.ppo_mask:MaskablePPO",
    "ppo_lstm": "lit_sb3.algorithms.ppo_recurrent:RecurrentPPO",
    "trpo": "lit_sb3.algorithms.trpo:TRPO",
    "ars": "lit_sb3.algorithms.ars:ARS",
}


def register_algorithm(name: str, path: str) -> None:
    """Register an algorithm in-process (a plugin, or a test); built-in ones are lines of :data:`ALGORITHMS`.

    Args:
        name: the zoo/bench name (lower case, the class's ``zoo_name``).
        path: ``"module:Class"`` of the algorithm class.
    """
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise ValueError(f"algorithm path must be 'module:Class', got {path!r}")
    if name != name.lower() or not name.replace("_", "").isalnum():
        raise ValueError(f"algorithm name must be lower case letters, digits and '_', got {name!r}")
    clash = [n for n, p in ALGORITHMS.items() if p.partition(":")[2] == attr and n != name]
    if clash:
        raise ValueError(f"class name {attr!r} is already exported by the algorithm {clash[0]!r}")
    ALGORITHMS[name] = path


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm registered with :func:`register_algorithm`.

    Args:
        name: the zoo/bench name.
    """
    ALGORITHMS.pop(name, None)


def algorithm_exports() -> dict[str, str]:
    """Class name -> module, for the library's lazy export table (``lit_sb3.PPO``)."""
    return {path.partition(":")[2]: path.partition(":")[0] for path in ALGORITHMS.values()}


def algorithm_class(name: str) -> type:
    """Import the class registered under ``name`` and check that its metadata names it the same way.

    Args:
        name: the zoo/bench name (``ppo``, ``sac``, ...).

    Raises:
        KeyError: the name is not registered (the message lists the registered ones).
        ImportError: the module cannot be imported.
    """
    if name not in ALGORITHMS:
        close = difflib.get_close_matches(name, list(ALGORITHMS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise KeyError(f"unknown algorithm '{name}'{hint}; registered: {', '.join(ALGORITHMS)}")
    module_name, _, attr = ALGORITHMS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if getattr(cls, "zoo_name", None) != name:
        raise ValueError(
            f"{module_name}.{attr} is registered as '{name}' but its zoo_name is {getattr(cls, 'zoo_name', None)!r}; "
            "they must be the same"
        )
    return cls
