"""The worker side of a job, one concern per module.

- :mod:`~lit_sb3.zoo.worker.protocol`: what a job reports (:class:`JobProgress`, :class:`JobResult`,
  :class:`DivergenceError`, the evaluation-hook protocol); light, imported by the launchers and the terminal;
- :mod:`~lit_sb3.zoo.worker.guards`: the logger of one seed (its MLflow logger behind the divergence guard);
- :mod:`~lit_sb3.zoo.worker.callbacks`: the evaluation, hook and progress callbacks of a seed, the view of the seed
  they see, and the one callback that drives every seed's;
- :mod:`~lit_sb3.zoo.worker.envs`: the job's envs and model.

:func:`lit_sb3.zoo.runner.run_jobs` puts them together for a seed batch of K >= 1 jobs (a single job: K = 1).
"""
