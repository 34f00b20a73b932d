"""The library never imports the suite: every module of ``lit_sb3`` outside ``lit_sb3.zoo`` imports without loading
``lit_sb3.zoo`` or the suite's heavy dependencies, nor the reference side (rl_zoo3, sb3-contrib, SB3: the suite runs them in processes of
their own) (docs/architecture.md)."""

from __future__ import annotations

import subprocess
import sys

_CODE = """
import importlib, pkgutil, sys
import lit_sb3
# pkgutil.walk_packages would import lit_sb3.zoo itself to list it: walk by hand, skipping the suite
todo = [lit_sb3]
while todo:
    package = todo.pop()
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name != "lit_sb3.zoo":
            module = importlib.import_module(info.name)
            if info.ispkg:
                todo.append(module)
for name in lit_sb3.__all__:
    getattr(lit_sb3, name)
loaded = sorted(m for m in ("lit_sb3.zoo", "mlflow", "optuna", "rliable", "ray", "rl_zoo3", "sb3_contrib",
                            "stable_baselines3") if m in sys.modules)
print(",".join(loaded) or "none")
"""


def test_library_modules_do_not_import_the_suite() -> None:
    out = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "none", out.stdout + out.stderr
