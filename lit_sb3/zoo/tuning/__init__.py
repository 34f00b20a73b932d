"""Hyperparameter tuning of ``bench tune`` with Optuna.

- :mod:`~lit_sb3.zoo.tuning.search_spaces`: the RL Zoo's search spaces as data, YAML overrides, conversion;
- :mod:`~lit_sb3.zoo.tuning.pruning`: pruners and the evaluation hook that reports and prunes;
- :mod:`~lit_sb3.zoo.tuning.objective`: one trial (K seeds, MLflow runs, objective value);
- :mod:`~lit_sb3.zoo.tuning.study`: storages, samplers, study creation/resume;
- :mod:`~lit_sb3.zoo.tuning.workers`: the trial workers (launcher units, local or Ray);
- :mod:`~lit_sb3.zoo.tuning.export`: best trial as zoo YAML, best-trials table, figures.

Optuna, MLflow and torch are imported inside functions only.
"""
