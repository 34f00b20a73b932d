"""One family layer (issue 32): each algorithm family collects over K >= 1 seeds through one loop.

The collection loop is the code that steps the training envs and calls the callbacks' ``on_step`` after every env
step. Each family (on-policy: PPO, A2C, TRPO, MaskablePPO, RecurrentPPO; off-policy: SAC, TD3, DDPG, DQN, TQC,
QR-DQN, CrossQ) must have exactly one such method, its ``collect_rollouts``, and no algorithm of the family a
second one (a K > 1 copy of the loop is what this guards against).
"""

from __future__ import annotations

import ast
import inspect
from types import ModuleType

import pytest

from lit_sb3.algorithms import (
    a2c,
    crossq,
    ddpg,
    dqn,
    off_policy,
    on_policy,
    ppo,
    ppo_mask,
    ppo_recurrent,
    qrdqn,
    sac,
    seed_dim,
    td3,
    tqc,
    trpo,
)

FAMILIES = {
    "on-policy": [on_policy, ppo, a2c, trpo, ppo_mask, ppo_recurrent, seed_dim],
    "off-policy": [off_policy, sac, td3, ddpg, dqn, tqc, qrdqn, crossq, seed_dim],
}


def _loop_methods(module: ModuleType) -> list[str]:
    """``Class.method`` names of the functions in ``module`` that call ``<callback>.on_step()``."""
    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and any(
                isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "on_step"
                for call in ast.walk(item)
            ):
                found.append(f"{node.name}.{item.name}")
    return found


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_has_one_collection_loop_for_every_k(family: str) -> None:
    loops = [name for module in FAMILIES[family] for name in _loop_methods(module)]
    base = "OnPolicyAlgorithm" if family == "on-policy" else "OffPolicyAlgorithm"
    assert loops == [f"{base}.collect_rollouts"], loops
