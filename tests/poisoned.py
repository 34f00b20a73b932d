"""``bench`` in a fresh interpreter where some modules do not import: how the tests see a missing extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench_without(modules: list[str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``bench argv`` in a fresh interpreter where importing ``modules`` fails (as when the extra is absent)."""
    code = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    sys.modules[name] = None  # import raises ImportError\n"
        "from lit_sb3.zoo.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
