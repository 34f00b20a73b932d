#!/usr/bin/env bash
# Set up the environment, then the main job: a real comparison (SAC against A2C on Pendulum-v1, 5 seeds each, the
# 5 seeds of an algorithm trained together as one seed batch) tracked in the embedded MLflow store
# (sqlite:///mlflow.db, artifacts in ./mlartifacts: no server), then its rliable report with its verdict in
# reports/readme-demo/. Re-running resumes: finished jobs are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
bench run --algos sac,a2c --envs Pendulum-v1 --seeds 5 --seed-batch 5 --n-timesteps 3000 --eval-freq 1000 \
  --eval-episodes 5 --experiment readme-demo
bench report --experiment readme-demo --reps 20000
