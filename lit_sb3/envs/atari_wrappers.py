"""Atari 2600 preprocessing with Stable-Baselines3's semantics, and lazy registration of the ALE env ids.

The wrappers behave as ``stable_baselines3.common.atari_wrappers`` (DeepMind's DQN preprocessing): no-op reset,
frame skip with a max-pool of the last two frames, end of life = end of episode, FIRE on reset, reward sign,
84x84 grayscale (OpenCV ``INTER_AREA``), and sticky actions when ``action_repeat_probability > 0``. They use the
same random streams as SB3, so the same seed gives the same frames, rewards and episode ends.

The ALE ids (``BreakoutNoFrameskip-v4``, ``ALE/Breakout-v5``, ...) are registered by ``import ale_py``, done only
when an Atari id is made (:func:`register_atari_envs`), never on ``import lit_sb3``. Neither ale-py nor OpenCV is
imported by this module.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "ATARI_EXTRA_HINT",
    "AtariWrapper",
    "ClipRewardEnv",
    "EpisodicLifeEnv",
    "FireResetEnv",
    "MaxAndSkipEnv",
    "NoopResetEnv",
    "StickyActionEnv",
    "WarpFrame",
    "is_atari_env_id",
    "looks_like_atari_id",
    "register_atari_envs",
    "register_atari_if_needed",
]

ATARI_EXTRA_HINT = 'pip install "lit_sb3[atari]"'
# ids only the ALE registers: the v5 namespace and the v0/v4 variants of the games
_ATARI_ID = re.compile(r"^(ALE/.+|[A-Z][A-Za-z0-9]*?(-ram)?(NoFrameskip|Deterministic)-v[04])$")

AtariStep = tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]
AtariReset = tuple[np.ndarray, dict[str, Any]]


def looks_like_atari_id(env_id: str) -> bool:
    """Whether ``env_id`` can only be an ALE id (``ALE/...``, ``*NoFrameskip-v4``, ``*Deterministic-v4``).

    Args:
        env_id: a gymnasium env id.
    """
    return bool(_ATARI_ID.match(env_id))


def register_atari_envs() -> None:
    """Register the ALE env ids (``import ale_py``); a one-line ``ImportError`` naming the extra if missing."""
    try:
        import ale_py  # noqa: F401 - importing it registers the ids
    except ImportError as exc:
        raise ImportError(f"Atari envs need ale-py, which is not installed: {ATARI_EXTRA_HINT}") from exc


def register_atari_if_needed(env_id: str) -> None:
    """Register the ALE ids if ``env_id`` is not registered and is (or may be) one of theirs.

    Raises a one-line ``ImportError`` naming the ``atari`` extra when ``env_id`` can only be an ALE id and
    ale-py is missing.

    Args:
        env_id: a gymnasium env id.
    """
    if env_id in gym.registry:
        return
    if looks_like_atari_id(env_id):
        register_atari_envs()  # raises with the extra's name when ale-py is missing
    elif importlib.util.find_spec("ale_py") is not None and "/" not in env_id:
        register_atari_envs()  # e.g. 'Pong-v4': also an ALE id


def is_atari_env_id(env_id: str) -> bool:
    """Whether ``env_id`` is an ALE env (its entry point is ``AtariEnv``, as rl_zoo3 decides).

    Registers the ALE ids first when the id is not registered yet. Without ale-py, an id that only the ALE
    registers still counts as Atari (so the zoo's ``atari`` entry applies and making it names the extra).

    Args:
        env_id: a gymnasium env id.
    """
    try:
        register_atari_if_needed(env_id)
    except ImportError:
        return looks_like_atari_id(env_id)
    spec = gym.registry.get(env_id)
    return spec is not None and "AtariEnv" in str(spec.entry_point)


def _action_meanings(env: gym.Env) -> list[str]:
    return list(env.unwrapped.get_action_meanings())  # type: ignore[attr-defined]


def _lives(env: gym.Env) -> int:
    return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]


class StickyActionEnv(gym.Wrapper):
    """Repeat the previous action with probability ``action_repeat_probability`` (Machado et al., 2018).

    Args:
        env: an ALE env whose action 0 is NOOP.
        action_repeat_probability: probability of repeating the last action instead of the given one.
    """

    def __init__(self, env: gym.Env, action_repeat_probability: float) -> None:
        super().__init__(env)
        if _action_meanings(env)[0] != "NOOP":
            raise ValueError("StickyActionEnv needs an env whose action 0 is NOOP")
        self.action_repeat_probability = action_repeat_probability
        self._sticky_action = 0

    def reset(self, **kwargs: Any) -> AtariReset:
        self._sticky_action = 0  # NOOP
        return self.env.reset(**kwargs)

    def step(self, action: int) -> AtariStep:
        if self.np_random.random() >= self.action_repeat_probability:
            self._sticky_action = action
        return self.env.step(self._sticky_action)


class NoopResetEnv(gym.Wrapper):
    """On reset, play a random number (1..``noop_max``) of NOOPs, for varied initial states.

    Args:
        env: an ALE env whose action 0 is NOOP.
        noop_max: the largest number of NOOPs.
    """

    def __init__(self, env: gym.Env, noop_max: int = 30) -> None:
        super().__init__(env)
        if _action_meanings(env)[0] != "NOOP":
            raise ValueError("NoopResetEnv needs an env whose action 0 is NOOP")
        self.noop_max = noop_max
        self.override_num_noops: int | None = None
        self.noop_action = 0

    def reset(self, **kwargs: Any) -> AtariReset:
        self.env.reset(**kwargs)
        if self.override_num_noops is not None:
            noops = self.override_num_noops
        else:  # the env's own generator, seeded by reset(seed=...)
            noops = int(self.unwrapped.np_random.integers(1, self.noop_max + 1))
        if noops < 1:
            raise ValueError(f"NoopResetEnv: the number of no-ops must be >= 1, got {noops}")
        obs, info = np.zeros(0), {}
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class FireResetEnv(gym.Wrapper):
    """On reset, press FIRE (then action 2) for games that stay frozen until fired.

    Args:
        env: an ALE env whose action 1 is FIRE (and with at least 3 actions).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        meanings = _action_meanings(env)
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise ValueError(f"FireResetEnv needs action 1 = FIRE and at least 3 actions, got {meanings}")

    def reset(self, **kwargs: Any) -> AtariReset:
        self.env.reset(**kwargs)
        obs = np.zeros(0)
        for action in (1, 2):
            obs, _, terminated, truncated, _ = self.env.step(action)
            if terminated or truncated:
                self.env.reset(**kwargs)
        return obs, {}


class EpisodicLifeEnv(gym.Wrapper):
    """A lost life ends the episode (``terminated``) for the learner; the game itself resets only at game over.

    After a life loss, ``reset()`` plays one NOOP instead of resetting the game (it resets when that NOOP ends
    the game). Evaluate without this wrapper (``terminal_on_life_loss=False``) to score whole games.

    Args:
        env: an ALE env.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: int) -> AtariStep:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = _lives(self.env)
        # a life was lost (lives stays > 0 so that a game over at 0 lives is reported once, by the game)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives  # bonus lives raise the count
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> AtariReset:
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)  # move on from the lost-life frame
            if terminated or truncated:  # that NOOP ended the game
                obs, info = self.env.reset(**kwargs)
        self.lives = _lives(self.env)
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    """Repeat the action ``skip`` times, sum the rewards, and return the max of the last two frames.

    Args:
        env: an env with a Box observation space.
        skip: number of frames per agent step.
    """

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or space.dtype is None:
            raise ValueError(f"MaxAndSkipEnv needs a Box observation space, got {space}")
        self._obs_buffer = np.zeros((2, *space.shape), dtype=space.dtype)
        self._skip = skip

    def step(self, action: int) -> AtariStep:
        total_reward = 0.0
        terminated = truncated = False
        info: dict[str, Any] = {}
        for i in range(self._skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self._skip - 2:  # the last two frames (the one at a done frame does not matter)
                self._obs_buffer[i - (self._skip - 2)] = obs
            total_reward += float(reward)
            if terminated or truncated:
                break
        return self._obs_buffer.max(axis=0), total_reward, terminated, truncated, info


class ClipRewardEnv(gym.RewardWrapper):
    """Reward -> its sign, in {-1, 0, +1}.

    Args:
        env: the env.
    """

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))


class WarpFrame(gym.ObservationWrapper):
    """RGB frame -> grayscale, resized to ``height`` x ``width`` with OpenCV's area interpolation, shape (H, W, 1).

    Args:
        env: an env with RGB Box observations.
        width: output width.
        height: output height.
    """

    def __init__(self, env: gym.Env, width: int = 84, height: int = 84) -> None:
        super().__init__(env)
        if not isinstance(env.observation_space, spaces.Box):
            raise ValueError(f"WarpFrame needs a Box observation space, got {env.observation_space}")
        try:
            import cv2
        except ImportError as exc:
            raise ImportError(f"WarpFrame needs OpenCV, which is not installed: {ATARI_EXTRA_HINT}") from exc
        cv2.ocl.setUseOpenCL(False)
        self._cv2 = cv2
        self.width = width
        self.height = height
        self.observation_space = spaces.Box(
            low=0,
            high=255,
            shape=(height, width, 1),
            dtype=env.observation_space.dtype,  # type: ignore[arg-type]
        )

    def observation(self, frame: np.ndarray) -> np.ndarray:
        cv2 = self._cv2
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        return cv2.resize(gray, (self.width, self.height), interpolation=cv2.INTER_AREA)[:, :, None]


class AtariWrapper(gym.Wrapper):
    """DeepMind's Atari preprocessing, as SB3's ``AtariWrapper`` (for ``*NoFrameskip-v4`` envs).

    Applied in this order: sticky actions (if ``action_repeat_probability > 0``), no-op reset (if
    ``noop_max > 0``), frame skip with max-pooling (if ``frame_skip > 1``), end of life = end of episode (if
    ``terminal_on_life_loss``), FIRE on reset (games with a FIRE action), grayscale ``screen_size`` square
    frames, reward sign (if ``clip_reward``).

    Args:
        env: an ALE env without frame skip.
        noop_max: the largest number of no-ops at reset (0: none).
        frame_skip: frames per agent step (the action is repeated).
        screen_size: side of the square output frame.
        terminal_on_life_loss: a lost life ends the episode for the learner.
        clip_reward: reward -> its sign.
        action_repeat_probability: probability of repeating the previous action (sticky actions).
    """

    def __init__(
        self,
        env: gym.Env,
        noop_max: int = 30,
        frame_skip: int = 4,
        screen_size: int = 84,
        terminal_on_life_loss: bool = True,
        clip_reward: bool = True,
        action_repeat_probability: float = 0.0,
    ) -> None:
        if action_repeat_probability > 0.0:
            env = StickyActionEnv(env, action_repeat_probability)
        if noop_max > 0:
            env = NoopResetEnv(env, noop_max=noop_max)
        if frame_skip > 1:  # frame_skip=1: no frame skip
            env = MaxAndSkipEnv(env, skip=frame_skip)
        if terminal_on_life_loss:
            env = EpisodicLifeEnv(env)
        if "FIRE" in _action_meanings(env):
            env = FireResetEnv(env)
        env = WarpFrame(env, width=screen_size, height=screen_size)
        if clip_reward:
            env = ClipRewardEnv(env)
        super().__init__(env)
