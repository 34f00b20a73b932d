"""The benchmarking suite behind the ``bench`` command: configs, job grids, launchers, MLflow tracking,
Optuna tuning and rliable reports. Depends on the library; the library never imports it."""
