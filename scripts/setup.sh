#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment in .venv: torch first, then lit_sb3 with its extras.
# On a machine without an NVIDIA GPU a CPU build of torch is installed (torch==2.13.0 lies on this machine's disk,
# so pip takes it without a multi-GB CUDA download); with a GPU, pip's default (CUDA) build.
# Override with LIT_SB3_TORCH_SPEC (e.g. "torch==2.5.1") and LIT_SB3_TORCH_INDEX (e.g. a CPU wheel index URL).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! python -c "import torch" >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    pip install -q ${LIT_SB3_TORCH_INDEX:+--index-url "$LIT_SB3_TORCH_INDEX"} "${LIT_SB3_TORCH_SPEC:-torch>=2.3,<2.15}"
  else
    pip install -q ${LIT_SB3_TORCH_INDEX:+--index-url "$LIT_SB3_TORCH_INDEX"} "${LIT_SB3_TORCH_SPEC:-torch==2.13.0}"
  fi
fi
# PostgreSQL server binaries for tests/test_distributed.py (it starts a throw-away server): installed from Debian's
# packages when running as root with apt-get and no /usr/lib/postgresql/*/bin/initdb (a fresh CI machine); with them
# libEGL (Mesa) for headless MuJoCo videos (bench enjoy --record, MUJOCO_GL=egl).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && { ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
    || ! ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1'; }; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql libegl1 libegl-mesa0 >/dev/null
fi
# torch is already satisfied above, so this never pulls a second (CUDA) build
pip install -q -e ".[${LIT_SB3_EXTRAS:-dev}]"
