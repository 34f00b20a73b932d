#!/usr/bin/env bash
# Set up the environment, then the main job: a real comparison (SAC against A2C on Pendulum-v1, 5 seeds each: the
# fewest a verdict rests on) tracked in the embedded MLflow store (sqlite:///mlflow.db, artifacts in ./mlartifacts:
# no server), then its rliable report with its verdict in reports/readme-demo/. Re-running resumes: finished jobs are
# skipped. `--seed-batch auto` (the default) splits SAC's 5 seeds 3 + 2 so both workers are used. The plan estimates
# 1m34s on an idle 2-core machine; measured in a fresh clone with both workers on one core (load 1-2): 3m21s,
# verdict "sac is credibly better than a2c" (p = 0.008).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
bench run --algos sac,a2c --envs Pendulum-v1 --seeds 5 --n-timesteps 3000 --eval-freq 1000 --eval-episodes 5 \
  --experiment readme-demo
bench report --experiment readme-demo --reps 20000
