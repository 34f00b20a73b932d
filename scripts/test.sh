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
exec python -m pytest -n "${PYTEST_WORKERS:-2}" --timeout 900 "$@"
