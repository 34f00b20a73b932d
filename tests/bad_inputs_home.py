"""Run every case of ``tests/test_bad_inputs.py`` in this process and print, per case, its exit status, its output
lines and the files it left under ``$HOME`` and in its working folder, as JSON (``python -m tests.bad_inputs_home
WORK``; run by ``test_bad_input_writes_nothing_under_home``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path


def _files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


def main(work: Path) -> list[dict]:
    """Run the cases, each in its own folder under ``work``.

    Args:
        work: an empty folder.
    """
    from lit_sb3.zoo.cli import main as bench
    from tests.test_bad_inputs import CASES, _argv

    home = Path(os.environ["HOME"])
    report = []
    for i, (name, argv, _) in enumerate(CASES):
        folder = work / f"case{i}"
        folder.mkdir()
        os.chdir(folder)
        argv = _argv(argv, folder)
        given = _files(folder)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = bench(argv)
        report.append(dict(name=name, code=code, lines=(out.getvalue() + err.getvalue()).strip().splitlines(),
                           home=sorted(_files(home)), cwd=sorted(_files(folder) - given)))  # fmt: skip
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
