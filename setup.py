"""Build hook: the suite's data files stay where they are in the repository (``zoo_configs/``,
``benchmarks/suites.yml``, ``benchmarks/scores.yml``, ``benchmarks/rates.yml``) and are copied into the built package as
``lit_sb3/zoo/_data/`` (read with ``importlib.resources``, see ``lit_sb3/zoo/data.py``). Everything else is in
pyproject.toml."""

import ast
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _data() -> dict:
    """``DATA`` of lit_sb3/zoo/data.py (read as a literal: the package is not imported at build time)."""
    tree = ast.parse((ROOT / "lit_sb3" / "zoo" / "data.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "DATA":
            return ast.literal_eval(node.value)
    raise RuntimeError("lit_sb3/zoo/data.py defines no DATA")


class BuildPyWithData(build_py):
    """``build_py`` that also copies the suite's data into ``<build>/lit_sb3/zoo/_data/``."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "lit_sb3" / "zoo" / "_data"
        for name, source in _data().items():
            src, dst = ROOT / source, target / name
            if src.is_dir():
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildPyWithData})
