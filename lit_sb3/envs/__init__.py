"""Extra gymnasium envs, registered on ``import lit_sb3.envs`` (the suite imports it; rl_zoo3 is not needed):

* the RL Zoo's velocity-masked envs (``CartPoleNoVel-v1``, ``PendulumNoVel-v1``, ``LunarLanderNoVel-v3``,
  ``MountainCarContinuousNoVel-v0``, ...), for RecurrentPPO;
* envs with invalid actions and ``action_masks()`` (``InvalidActionDiscrete-v0``, ``TicTacToe-v0``), for
  MaskablePPO.
"""

from lit_sb3.envs.masked import InvalidActionEnvDiscrete, TicTacToeEnv, register_masked_envs
from lit_sb3.envs.no_velocity import MaskVelocityWrapper, register_no_velocity_envs

__all__ = ["InvalidActionEnvDiscrete", "MaskVelocityWrapper", "TicTacToeEnv"]

register_no_velocity_envs()
register_masked_envs()
