"""System information and run-folder numbering."""

from __future__ import annotations

import glob
import os
import platform
import re
from pathlib import Path

__all__ = ["get_latest_run_id", "get_system_info"]


def get_latest_run_id(log_path: str | Path, log_name: str = "") -> int:
    """Highest ``<log_name>_<N>`` folder number under ``log_path`` (0 if none)."""
    max_run_id = 0
    for path in glob.glob(os.path.join(glob.escape(str(log_path)), f"{glob.escape(log_name)}_[0-9]*")):
        file_name = os.path.basename(path)
        ext = file_name.split("_")[-1]
        if log_name == "_".join(file_name.split("_")[:-1]) and ext.isdigit() and int(ext) > max_run_id:
            max_run_id = int(ext)
    return max_run_id


def get_system_info() -> dict[str, str]:
    """Versions of the pieces that matter for reproducing a run."""
    import gymnasium
    import numpy
    import torch

    import lit_sb3

    info = {
        "OS": re.sub(r"#(\d)", r"# \1", f"{platform.platform()} {platform.version()}"),
        "Python": platform.python_version(),
        "lit_sb3": lit_sb3.__version__,
        "PyTorch": torch.__version__,
        "GPU Enabled": str(torch.cuda.is_available()),
        "Numpy": numpy.__version__,
        "Gymnasium": gymnasium.__version__,
    }
    try:
        import lightning

        info["Lightning"] = lightning.__version__
    except ImportError:  # pragma: no cover
        pass
    return info
