#!/usr/bin/env bash
# Set up the environment, then the main job: a real grid (SAC and TD3 on Pendulum-v1, 3 seeds each) tracked in the
# embedded MLflow store (sqlite:///mlflow.db, artifacts in ./mlartifacts: no server), then its rliable report in
# reports/readme-demo/. Re-running resumes: finished jobs are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
bench run --algos sac,td3 --envs Pendulum-v1 --seeds 3 --n-timesteps 3000 --eval-freq 500 --eval-episodes 5 \
  --hyperparams learning_starts=500 \
  --experiment readme-demo
bench report --experiment readme-demo --reps 20000
