"""The benchmarking suite behind the ``bench`` command: configs, job grids, launchers, MLflow tracking,
Optuna tuning and rliable reports. Depends on the library; the library never imports it."""

import lit_sb3.envs  # noqa: E402,F401 - registers the RL Zoo's NoVel envs and the masked envs for every bench process
