"""Vectorized environments (SB3's VecEnv API) and their wrappers."""

from lit_sb3.vec_env.base_vec_env import (
    CloudpickleWrapper,
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
    VecEnvWrapper,
    tile_images,
)
from lit_sb3.vec_env.dummy_vec_env import DummyVecEnv
from lit_sb3.vec_env.env_util import (
    EnvIdNotFoundError,
    check_env_id,
    is_wrapped,
    make_atari_env,
    make_vec_env,
    unwrap_wrapper,
    wrap_env,
)
from lit_sb3.vec_env.running_mean_std import RunningMeanStd
from lit_sb3.vec_env.stacked_observations import StackedObservations
from lit_sb3.vec_env.subproc_vec_env import SubprocVecEnv
from lit_sb3.vec_env.util import (
    copy_obs_dict,
    dict_to_obs,
    is_vecenv_wrapped,
    obs_space_info,
    sync_envs_normalization,
    unwrap_vec_normalize,
    unwrap_vec_wrapper,
)
from lit_sb3.vec_env.vec_check_nan import VecCheckNan
from lit_sb3.vec_env.vec_extract_dict_obs import VecExtractDictObs
from lit_sb3.vec_env.vec_frame_stack import VecFrameStack
from lit_sb3.vec_env.vec_monitor import VecMonitor
from lit_sb3.vec_env.vec_normalize import VecNormalize
from lit_sb3.vec_env.vec_transpose import VecTransposeImage
from lit_sb3.vec_env.vec_video_recorder import VecVideoRecorder

__all__ = [
    "CloudpickleWrapper",
    "DummyVecEnv",
    "EnvIdNotFoundError",
    "RunningMeanStd",
    "StackedObservations",
    "SubprocVecEnv",
    "VecCheckNan",
    "VecEnv",
    "VecEnvIndices",
    "VecEnvObs",
    "VecEnvStepReturn",
    "VecEnvWrapper",
    "VecExtractDictObs",
    "VecFrameStack",
    "VecMonitor",
    "VecNormalize",
    "VecTransposeImage",
    "VecVideoRecorder",
    "check_env_id",
    "copy_obs_dict",
    "dict_to_obs",
    "is_vecenv_wrapped",
    "is_wrapped",
    "make_atari_env",
    "make_vec_env",
    "obs_space_info",
    "sync_envs_normalization",
    "tile_images",
    "unwrap_vec_normalize",
    "unwrap_vec_wrapper",
    "unwrap_wrapper",
    "wrap_env",
]
