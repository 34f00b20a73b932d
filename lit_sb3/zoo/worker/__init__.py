"""The worker side of a job, one concern per module.

- :mod:`~lit_sb3.zoo.worker.protocol`: what a job reports (:class:`JobProgress`, :class:`JobResult`,
  :class:`DivergenceError`, the evaluation-hook protocol); light, imported by the launchers and the terminal;
- :mod:`~lit_sb3.zoo.worker.guards`: the divergence guard (a Lightning logger);
- :mod:`~lit_sb3.zoo.worker.callbacks`: the evaluation, hook and progress callbacks;
- :mod:`~lit_sb3.zoo.worker.envs`: the job's envs and model;
- :mod:`~lit_sb3.zoo.worker.batch`: a seed batch (``--seed-batch``): K jobs trained by one seed-batched model.

:func:`lit_sb3.zoo.runner.run_job` puts them together for one job.
"""
