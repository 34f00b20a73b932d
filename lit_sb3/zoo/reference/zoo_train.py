"""One reference job: rl_zoo3's own ``train`` in this process, with the suite's evaluation protocol.

Run as ``python -m lit_sb3.zoo.reference.zoo_train --eval-env-steps N <rl_zoo3 train arguments>`` by
:mod:`lit_sb3.zoo.reference.job`. This is the one module that reaches into rl_zoo3's internals, for two reasons
that its command line cannot express:

- rl_zoo3 counts ``--eval-freq`` in callback calls (``eval_freq // n_envs``), which is env steps only when the
  budget divides evenly; the suite evaluates at the first env step at or past each multiple of ``eval_freq``
  (total over all sub-envs). :func:`env_step_eval_callback` subclasses SB3's ``EvalCallback`` (sb3-contrib's
  ``MaskableEvalCallback`` for MaskablePPO, so that evaluation respects the masks as the lit_sb3 side does) and is
  put in the place of ``rl_zoo3.exp_manager.EvalCallback``; everything else of the callback (deterministic
  episodes, VecNormalize synced, ``evaluations.npz``, best model) is SB3's.
- rl_zoo3 2.9 does not register MaskablePPO: it is added to ``rl_zoo3.utils.ALGOS`` as ``ppo_mask``.

Nothing from a log folder is loaded here; the hyperparameters come from the ``-conf`` file the job wrote.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["env_step_eval_callback", "main"]


def env_step_eval_callback(base: type, eval_env_steps: int) -> type:
    """A subclass of ``base`` (SB3's ``EvalCallback`` or sb3-contrib's ``MaskableEvalCallback``) that evaluates at
    the first step at or past each multiple of ``eval_env_steps`` env steps, whatever ``eval_freq`` rl_zoo3 passes.

    Args:
        base: the evaluation callback class to extend.
        eval_env_steps: env steps between evaluations (total over the sub-envs).
    """

    class EnvStepEvalCallback(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.next_eval = eval_env_steps

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            while self.next_eval <= self.num_timesteps:
                self.next_eval += eval_env_steps
            calls_between, self.eval_freq = self.eval_freq, 1  # SB3 evaluates when n_calls % eval_freq == 0
            try:
                return bool(super()._on_step())
            finally:
                self.eval_freq = calls_between

    return EnvStepEvalCallback


def main(argv: Sequence[str] | None = None) -> None:
    """Train one job with rl_zoo3's ``train`` (``--eval-env-steps N`` first, then rl_zoo3's own arguments).

    Args:
        argv: the arguments (default ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "--eval-env-steps":
        raise SystemExit("usage: python -m lit_sb3.zoo.reference.zoo_train --eval-env-steps N <rl_zoo3 train args>")
    eval_env_steps, rest = int(args[1]), args[2:]
    import rl_zoo3.exp_manager as exp_manager
    import rl_zoo3.utils
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
    from stable_baselines3.common.callbacks import EvalCallback

    rl_zoo3.utils.ALGOS.setdefault("ppo_mask", MaskablePPO)
    masked = "ppo_mask" in rest[rest.index("--algo") + 1 : rest.index("--algo") + 2] if "--algo" in rest else False
    exp_manager.EvalCallback = env_step_eval_callback(MaskableEvalCallback if masked else EvalCallback, eval_env_steps)
    from rl_zoo3.train import train

    sys.argv = ["rl_zoo3.train", *rest]
    train()


if __name__ == "__main__":
    main()
