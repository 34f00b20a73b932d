#!/usr/bin/env bash
# Set up the environment and run the default (fast) test suite. `-m slow` tests are left out; run them with
#   .venv/bin/python -m pytest -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# lint and format gate (configuration in pyproject.toml), before any test
ruff check .
ruff format --check .
python -m pytest -n "${PYTEST_WORKERS:-2}" --timeout 900 "$@"
# The equivalence tests (tests/conftest.py marks them; tolerances derived in tests/tolerances.py) once more under each
# lower ATEN_CPU_CAPABILITY this CPU supports (the run above used the highest, which torch picks by itself), so a
# tolerance that holds on one kernel only fails here, not on a user's machine. Skipped when arguments select tests.
if [ "$#" -eq 0 ]; then
  best="$(python -c 'import torch; print(torch.backends.cpu.get_cpu_capability().lower())')"
  case "$best" in
    avx512) lower="default avx2" ;;
    avx2) lower="default" ;;
    *) lower="" ;;
  esac
  for capability in $lower; do
    echo "equivalence tests under ATEN_CPU_CAPABILITY=$capability (this CPU's own: $best)"
    # an inductor cache of its own: torch.compile's cached kernels are keyed without ATEN_CPU_CAPABILITY, and a kernel
    # built for another capability fails when called (measured: test_compiled_update under avx2 after avx512)
    TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)" ATEN_CPU_CAPABILITY="$capability" \
      python -m pytest -n "${PYTEST_WORKERS:-2}" --timeout 900 -q -m "equivalence and not slow"
  done
fi
# Lightning's private members (lit_sb3/lightning_compat.py) against the lowest Lightning that pyproject.toml allows:
# that wheel alone (its dependencies are the venv's) in .ci-lightning-min, first on the path, for the
# Lightning-feature and resume tests only. Skipped when arguments select tests. Measured: ~7 s install, ~100 s tests.
if [ "$#" -eq 0 ]; then
  lightning_min="$(sed -n 's/^ *"lightning>=\([0-9.]*\),.*/\1/p' pyproject.toml)"
  pip install -q --no-deps --upgrade --target .ci-lightning-min "lightning==${lightning_min}"
  PYTHONPATH="$PWD/.ci-lightning-min${PYTHONPATH:+:$PYTHONPATH}" python -c \
    "import lightning; assert lightning.__version__.startswith('${lightning_min}'), lightning.__version__"
  PYTHONPATH="$PWD/.ci-lightning-min${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -n "${PYTEST_WORKERS:-2}" \
    --timeout 900 tests/test_lightning_features.py tests/test_resume.py
fi
