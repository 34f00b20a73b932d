"""The VecEnv API: an abstract vectorized environment and the base class of its wrappers (as in SB3)."""

from __future__ import annotations

import inspect
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from copy import deepcopy
from typing import Any, Union

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "CloudpickleWrapper",
    "VecEnv",
    "VecEnvIndices",
    "VecEnvObs",
    "VecEnvStepReturn",
    "VecEnvWrapper",
    "tile_images",
]

# Which sub-environments a call addresses: all (None), one index, or several.
VecEnvIndices = Union[None, int, Iterable[int]]
# What reset() returns: one array (or dict/tuple of arrays) with the env index as first axis.
VecEnvObs = Union[np.ndarray, dict[str, np.ndarray], tuple[np.ndarray, ...]]
# What step() returns: observations, rewards, dones, infos.
VecEnvStepReturn = tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict]]


def tile_images(images_nhwc: Sequence[np.ndarray]) -> np.ndarray:
    """Tile N images (N, H, W, C) into one near-square image.

    Args:
        images_nhwc: the images, all of the same shape.
    """
    img_nhwc = np.asarray(images_nhwc)
    n_images, height, width, n_channels = img_nhwc.shape
    new_height = int(np.ceil(np.sqrt(n_images)))
    new_width = int(np.ceil(float(n_images) / new_height))
    padding = [img_nhwc[0] * 0 for _ in range(n_images, new_height * new_width)]
    img_nhwc = np.array(list(img_nhwc) + padding)
    out = img_nhwc.reshape((new_height, new_width, height, width, n_channels)).transpose(0, 2, 1, 3, 4)
    return out.reshape((new_height * height, new_width * width, n_channels))


class VecEnv(ABC):
    """An abstract vectorized environment: ``num_envs`` copies stepped together, with auto-reset.

    Args:
        num_envs: number of sub-environments.
        observation_space: observation space of one sub-environment.
        action_space: action space of one sub-environment.
    """

    def __init__(self, num_envs: int, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space
        # infos returned by the last reset of each sub-env
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        # seeds and options used (once) at the next reset
        self._seeds: list[int | None] = [None for _ in range(num_envs)]
        self._options: list[dict[str, Any]] = [{} for _ in range(num_envs)]

        try:
            render_modes = self.get_attr("render_mode")
        except AttributeError:
            warnings.warn(
                "The `render_mode` attribute is not defined in your environment. It will be set to None.", stacklevel=2
            )
            render_modes = [None for _ in range(num_envs)]
        if any(mode != render_modes[0] for mode in render_modes):
            raise ValueError(f"render_mode must be the same for all environments, got {render_modes}.")
        self.render_mode = render_modes[0]

        modes: list[str] = []
        if self.render_mode is not None:
            modes = ["human", "rgb_array"] if self.render_mode == "rgb_array" else [self.render_mode]
        self.metadata: dict[str, Any] = {"render_modes": modes}

    def _reset_seeds(self) -> None:
        """Forget the seeds (they apply to one reset only)."""
        self._seeds = [None for _ in range(self.num_envs)]

    def _reset_options(self) -> None:
        """Forget the options (they apply to one reset only)."""
        self._options = [{} for _ in range(self.num_envs)]

    @abstractmethod
    def reset(self) -> VecEnvObs:
        """Reset all sub-environments and return the batch of first observations."""

    @abstractmethod
    def step_async(self, actions: np.ndarray) -> None:
        """Start stepping all sub-environments with ``actions`` (one per env)."""

    @abstractmethod
    def step_wait(self) -> VecEnvStepReturn:
        """Wait for the step started by :meth:`step_async`: ``(obs, rewards, dones, infos)``."""

    @abstractmethod
    def close(self) -> None:
        """Release the sub-environments' resources."""

    def has_attr(self, attr_name: str) -> bool:
        """Whether every sub-environment has the attribute ``attr_name``."""
        try:
            self.get_attr(attr_name)
            return True
        except AttributeError:
            return False

    @abstractmethod
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Values of ``attr_name`` in the sub-environments ``indices`` (all by default)."""

    @abstractmethod
    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` to ``value`` in the sub-environments ``indices`` (all by default)."""

    @abstractmethod
    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        """Call ``method_name(*method_args, **method_kwargs)`` on the sub-environments ``indices``."""

    @abstractmethod
    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each sub-environment in ``indices`` is wrapped with ``wrapper_class``."""

    def step(self, actions: np.ndarray) -> VecEnvStepReturn:
        """Step all sub-environments; finished ones are reset automatically.

        Args:
            actions: one action per sub-environment.

        Returns:
            ``(obs, rewards, dones, infos)``; on ``dones[i]``, ``infos[i]["terminal_observation"]`` holds the last
            observation of the episode and ``obs[i]`` is the first of the next one.
        """
        self.step_async(actions)
        return self.step_wait()

    def get_images(self) -> Sequence[np.ndarray | None]:
        """RGB images of each sub-environment, when available."""
        raise NotImplementedError

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """Render the sub-environments (tiled into one image for ``rgb_array``).

        Args:
            mode: must match the render mode the envs were created with (or be ``"human"`` for ``rgb_array`` envs).
        """
        if mode == "human" and self.render_mode != mode:
            if self.render_mode != "rgb_array":
                warnings.warn(
                    f"You tried to render a VecEnv with mode='{mode}' but the render mode defined when initializing "
                    f"the environment must be 'human' or 'rgb_array', not '{self.render_mode}'.",
                    stacklevel=2,
                )
                return None
        elif mode and self.render_mode != mode:
            warnings.warn(
                f"The render mode is fixed when the environment is created: asked for '{mode}' "
                f"but the environments use '{self.render_mode}'.",
                stacklevel=2,
            )
            return None
        mode = mode or self.render_mode
        if mode is None:
            warnings.warn(
                "You tried to call render() but no `render_mode` was passed to the env constructor.", stacklevel=2
            )
            return None
        if self.render_mode == "human":
            self.env_method("render")
            return None
        if mode in ("rgb_array", "human"):
            bigimg = tile_images(self.get_images())  # type: ignore[arg-type]
            if mode == "human":
                import cv2  # optional dependency, only for on-screen display

                cv2.imshow("vecenv", bigimg[:, :, ::-1])
                cv2.waitKey(1)
                return None
            return bigimg
        self.env_method("render")
        return None

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the sub-environments at their next reset: env ``i`` gets ``seed + i``.

        Args:
            seed: base seed; ``None`` draws a random one (so that sub-envs still differ).

        Returns:
            The seed of each sub-environment.
        """
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed + idx for idx in range(self.num_envs)]
        return self._seeds

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Options passed to each sub-environment's next ``reset``.

        Args:
            options: one dict for all envs, or a list with one dict per env.
        """
        if options is None:
            options = {}
        if isinstance(options, dict):
            self._options = deepcopy([options] * self.num_envs)
        else:
            if len(options) != self.num_envs:
                raise ValueError(f"set_options got {len(options)} option dicts for {self.num_envs} environments.")
            self._options = deepcopy(list(options))

    @property
    def unwrapped(self) -> VecEnv:
        """The innermost VecEnv (below all VecEnvWrappers)."""
        if isinstance(self, VecEnvWrapper):
            return self.venv.unwrapped
        return self

    def getattr_depth_check(self, name: str, already_found: bool) -> str | None:
        """Name of the class whose attribute ``name`` would be hidden by a wrapper above, if any."""
        if hasattr(self, name) and already_found:
            return f"{type(self).__module__}.{type(self).__name__}"
        return None

    def _get_indices(self, indices: VecEnvIndices) -> Iterable[int]:
        """Turn ``None`` / an int / an iterable into an iterable of env indices."""
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, (int, np.integer)):
            return [int(indices)]
        return indices


class VecEnvWrapper(VecEnv):
    """Base class of the wrappers of a VecEnv; unknown attributes are looked up in the wrapped VecEnv.

    Args:
        venv: the vectorized environment to wrap.
        observation_space: the new observation space (``None``: the wrapped one).
        action_space: the new action space (``None``: the wrapped one).
    """

    def __init__(
        self,
        venv: VecEnv,
        observation_space: spaces.Space | None = None,
        action_space: spaces.Space | None = None,
    ) -> None:
        if not isinstance(venv, VecEnv):
            raise TypeError(f"{type(self).__name__} wraps a VecEnv, got {type(venv).__name__}.")
        self.venv = venv
        super().__init__(
            num_envs=venv.num_envs,
            observation_space=observation_space or venv.observation_space,
            action_space=action_space or venv.action_space,
        )
        self.class_attributes = dict(inspect.getmembers(self.__class__))

    def step_async(self, actions: np.ndarray) -> None:
        self.venv.step_async(actions)

    @abstractmethod
    def reset(self) -> VecEnvObs:
        pass

    @abstractmethod
    def step_wait(self) -> VecEnvStepReturn:
        pass

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        return self.venv.seed(seed)

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        return self.venv.set_options(options)

    def close(self) -> None:
        return self.venv.close()

    def render(self, mode: str | None = None) -> np.ndarray | None:
        return self.venv.render(mode=mode)

    def get_images(self) -> Sequence[np.ndarray | None]:
        return self.venv.get_images()

    def has_attr(self, attr_name: str) -> bool:
        return self.venv.has_attr(attr_name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self.venv.get_attr(attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        return self.venv.set_attr(attr_name, value, indices)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices=indices)

    def __getattr__(self, name: str) -> Any:
        """Find an attribute in the wrapped VecEnv(s) when this wrapper does not have it."""
        if name in ("venv", "class_attributes") or name.startswith("__"):
            raise AttributeError(name)
        blocked_class = self.getattr_depth_check(name, already_found=False)
        if blocked_class is not None:
            own_class = f"{type(self).__module__}.{type(self).__name__}"
            raise AttributeError(
                f"Error: Recursive attribute lookup for {name} from {own_class} is "
                f"ambiguous and hides attribute from {blocked_class}"
            )
        return self.getattr_recursive(name)

    def _get_all_attributes(self) -> dict[str, Any]:
        """Instance and class attributes of this wrapper."""
        all_attributes = self.__dict__.copy()
        all_attributes.update(self.class_attributes)
        return all_attributes

    def getattr_recursive(self, name: str) -> Any:
        """Look ``name`` up in this wrapper, then down the chain of wrapped VecEnvs."""
        if name in self._get_all_attributes():
            return getattr(self, name)
        if hasattr(self.venv, "getattr_recursive"):
            return self.venv.getattr_recursive(name)
        return getattr(self.venv, name)

    def getattr_depth_check(self, name: str, already_found: bool) -> str | None:
        """See :meth:`VecEnv.getattr_depth_check`."""
        all_attributes = self._get_all_attributes()
        if name in all_attributes and already_found:
            return f"{type(self).__module__}.{type(self).__name__}"
        if name in all_attributes and not already_found:
            return self.venv.getattr_depth_check(name, True)
        return self.venv.getattr_depth_check(name, already_found)


class CloudpickleWrapper:
    """Serialize its content with cloudpickle (lambdas, closures) when sent to a subprocess.

    Only used to send the user's own env constructors to worker processes; nothing is loaded from files.

    Args:
        var: the object to send (usually an env constructor).
    """

    def __init__(self, var: Any) -> None:
        self.var = var

    def __getstate__(self) -> Any:
        return cloudpickle.dumps(self.var)

    def __setstate__(self, var: Any) -> None:
        self.var = cloudpickle.loads(var)
