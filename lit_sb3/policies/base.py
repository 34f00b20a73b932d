"""Base policy classes and the on-policy actor-critic policy (PPO, A2C)."""

from __future__ import annotations

import io
import pathlib
import warnings
from abc import ABC, abstractmethod
from functools import partial
from typing import Any, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.preprocessing import get_device, is_image_space, maybe_transpose, preprocess_obs
from lit_sb3.core.types import PyTorchObs, Schedule
from lit_sb3.optim import build_optimizer, optimizer_build_kwargs
from lit_sb3.policies.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
    make_proba_distribution,
)
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    CombinedExtractor,
    FlattenExtractor,
    MlpExtractor,
    NatureCNN,
)
from lit_sb3.policies.variants import cnn_and_multi_input_variants

__all__ = [
    "ActorCriticCnnPolicy",
    "ActorCriticPolicy",
    "BaseModel",
    "BasePolicy",
    "MultiInputActorCriticPolicy",
    "decode_constructor_parameters",
    "encode_constructor_parameters",
    "is_vectorized_observation",
    "optimizer_build_kwargs",
]

SelfBaseModel = TypeVar("SelfBaseModel", bound="BaseModel")


def _class_keys(key: str) -> bool:
    return key == "activation_fn" or key.endswith("_class")


def encode_constructor_parameters(data: dict[str, Any]) -> dict[str, Any]:
    """Make constructor parameters JSON-serialisable: the plain view of the library's one codec
    (:mod:`lit_sb3.utils.serialization`), so classes under ``activation_fn``/``*_class`` keys (at any depth)
    become their whitelisted import paths and tuples become lists.

    Args:
        data: constructor keyword arguments.
    """
    from lit_sb3.utils.serialization import encode_value, to_display

    def check(key: str, value: Any) -> None:
        if isinstance(value, type) and not _class_keys(key):
            raise TypeError(
                f"Cannot store the class {value!r} under key {key!r}: only 'activation_fn' and '*_class' keys hold classes."
            )
        if isinstance(value, dict):
            for k, v in value.items():
                check(str(k), v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                check(key, v)

    for key, value in data.items():
        check(key, value)
    return to_display(encode_value(dict(data)))


def decode_constructor_parameters(data: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`encode_constructor_parameters`: class paths are resolved through the whitelist
    (``lit_sb3.policies.registry.path_to_class``), so nothing outside it can be loaded.

    Args:
        data: JSON-decoded constructor parameters.
    """
    from lit_sb3.policies.registry import path_to_class

    def decode(key: str, value: Any) -> Any:
        if isinstance(value, str) and _class_keys(key):
            return path_to_class(value)
        if isinstance(value, dict):
            return {k: decode(k, v) for k, v in value.items()}
        if isinstance(value, list) and _class_keys(key):
            return [decode(key, v) for v in value]
        return value

    return {key: decode(key, value) for key, value in data.items()}


def is_vectorized_observation(observation: np.ndarray, observation_space: spaces.Space) -> bool:
    """Whether ``observation`` is a batch (True) or a single observation (False) of ``observation_space``.

    Args:
        observation: the observation (images already channel-first).
        observation_space: its space (not a Dict).
    """
    shape = np.shape(observation)
    if isinstance(observation_space, (spaces.Box, spaces.MultiBinary)):
        expected = observation_space.shape
        if shape == expected:
            return False
        if shape[1:] == expected:
            return True
        raise ValueError(
            f"Error: Unexpected observation shape {shape} for {type(observation_space).__name__} environment, "
            f"please use {expected} or (n_env, {', '.join(map(str, expected))}) for the observation shape."
        )
    if isinstance(observation_space, spaces.Discrete):
        if shape == ():
            return False
        if len(shape) == 1:
            return True
        raise ValueError(
            f"Error: Unexpected observation shape {shape} for Discrete environment, please use () or (n_env,) "
            "for the observation shape."
        )
    if isinstance(observation_space, spaces.MultiDiscrete):
        n = len(observation_space.nvec)
        if shape == (n,):
            return False
        if len(shape) == 2 and shape[1] == n:
            return True
        raise ValueError(
            f"Error: Unexpected observation shape {shape} for MultiDiscrete environment, please use ({n},) or "
            f"(n_env, {n}) for the observation shape."
        )
    raise ValueError(
        f"Error: Cannot determine if the observation is vectorized with the space type {observation_space}; "
        "supported: Box, Discrete, MultiDiscrete, MultiBinary, Dict of those."
    )


def _to_tensor(array: np.ndarray, device: th.device) -> th.Tensor:
    """Tensor sharing memory with ``array`` when possible (copies read-only arrays)."""
    if not array.flags.writeable:
        array = array.copy()
    return th.as_tensor(array, device=device)


class BaseModel(nn.Module):
    """Base of all networks: features extraction, observation conversion, optimizer settings.

    Args:
        observation_space: the observation space.
        action_space: the action space.
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        features_extractor: an existing extractor to use (shared) instead of building one.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class.
        optimizer_kwargs: optimizer keyword arguments (without ``lr``).
    """

    optimizer: th.optim.Optimizer

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        features_extractor: BaseFeaturesExtractor | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.features_extractor = features_extractor
        self.normalize_images = normalize_images
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = dict(optimizer_kwargs) if optimizer_kwargs is not None else {}
        self.features_extractor_class = features_extractor_class
        self.features_extractor_kwargs = (
            dict(features_extractor_kwargs) if features_extractor_kwargs is not None else {}
        )
        if (
            not normalize_images
            and isinstance(features_extractor_class, type)
            and issubclass(features_extractor_class, (NatureCNN, CombinedExtractor))
        ):
            self.features_extractor_kwargs.update(normalized_image=True)
        self._is_image_obs = is_image_space(observation_space)

    def _update_features_extractor(
        self, net_kwargs: dict[str, Any], features_extractor: BaseFeaturesExtractor | None = None
    ) -> dict[str, Any]:
        """Add ``features_extractor`` (a new one unless given, to share it) and ``features_dim`` to kwargs."""
        net_kwargs = net_kwargs.copy()
        if features_extractor is None:
            features_extractor = self.make_features_extractor()
        net_kwargs.update(features_extractor=features_extractor, features_dim=features_extractor.features_dim)
        return net_kwargs

    def make_features_extractor(self) -> BaseFeaturesExtractor:
        """A new features extractor of the configured class."""
        return self.features_extractor_class(self.observation_space, **self.features_extractor_kwargs)

    def make_optimizer(
        self, params: Any, lr: float, n_seeds: int = 1, seeds_sit_out: bool = False
    ) -> th.optim.Optimizer:
        """Build ``optimizer_class(params, lr=lr, **optimizer_kwargs)`` (fused Adam/AdamW by default) through
        :func:`lit_sb3.optim.build_optimizer` (per-seed for K > 1 seeds that may sit out a step).

        Args:
            params: parameters or parameter groups.
            lr: initial learning rate.
            n_seeds: K (stacked ``[K, ...]`` parameters).
            seeds_sit_out: a seed may skip a step while the others take it.
        """
        return build_optimizer(self.optimizer_class, params, lr, self.optimizer_kwargs, n_seeds, seeds_sit_out)

    def extract_features(self, obs: PyTorchObs, features_extractor: BaseFeaturesExtractor) -> th.Tensor:
        """Preprocess the observation (image scaling, one-hot) and run the features extractor.

        Args:
            obs: batch of observations.
            features_extractor: the extractor to use.
        """
        return features_extractor(preprocess_obs(obs, self.observation_space, normalize_images=self.normalize_images))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        """JSON-serialisable keyword arguments that rebuild this model (besides the spaces and ``lr_schedule``,
        which the caller stores itself). Classes are import-path strings; see :func:`decode_constructor_parameters`."""
        return encode_constructor_parameters(dict(normalize_images=self.normalize_images))

    def save(self, path: str | pathlib.Path | io.BufferedIOBase) -> None:
        """Save the network alone (SB3's ``policy.save``): its constructor arguments, spaces and weights, in the
        model archives' safe format (JSON + tensors; :meth:`load` runs no code from the file).

        Args:
            path: file path (``.zip`` added when missing) or a writable buffer.
        """
        import inspect

        from lit_sb3.utils.serialization import save_archive, space_to_dict
        from lit_sb3.utils.system import get_system_info

        params = self._get_constructor_parameters()
        needed = [
            name
            for name, p in inspect.signature(type(self).__init__).parameters.items()
            if p.default is p.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            and name not in ("self", "observation_space", "action_space", "lr_schedule", *params)
        ]
        if needed:  # an actor, critic or Q-network: built around a features extractor its policy owns
            raise TypeError(
                f"{type(self).__name__} cannot be saved alone: its constructor needs {', '.join(needed)} (modules, "
                "not data); save the policy it belongs to instead (model.policy.save(path))."
            )
        data = {
            "algo": type(self).__name__,
            "kind": "policy",
            "policy_class": f"{type(self).__module__}.{type(self).__qualname__}",
            "params": params,
            "observation_space": space_to_dict(self.observation_space),
            "action_space": space_to_dict(self.action_space),
        }
        tensors = {"model": {k: v.detach().cpu() for k, v in self.state_dict().items()}}
        info = "\n".join(f"- {k}: {v}" for k, v in get_system_info().items())
        save_archive(path, data, tensors, info)

    @classmethod
    def load(
        cls: type[SelfBaseModel], path: str | pathlib.Path | io.BufferedIOBase, device: th.device | str = "auto"
    ) -> SelfBaseModel:
        """Load a network saved with :meth:`save` (SB3's ``Policy.load``); its optimizer starts afresh.

        Args:
            path: archive path or readable buffer.
            device: device for the network.

        Raises:
            BadFileError: not a policy archive of this class, or a malformed, oversized or unsafe one (one line).
        """
        import inspect

        from lit_sb3.core.schedules import constant_fn
        from lit_sb3.utils.serialization import (
            BadFileError,
            check_declared_net_arch,
            check_state_shapes,
            load_archive,
            space_from_dict,
        )

        data, tensors = load_archive(path, device="cpu")
        where = str(path) if isinstance(path, (str, pathlib.Path)) else getattr(path, "name", None) or "<buffer>"
        if data.get("kind") != "policy":
            raise BadFileError(
                f"{where}: the archive holds a {data['algo']} model, not a policy; use {data['algo']}.load(path) "
                f"(its .policy is the network)."
            )
        expected = f"{cls.__module__}.{cls.__qualname__}"
        if data.get("policy_class") != expected:
            raise BadFileError(
                f"{where}: the archive holds a {data.get('policy_class')} policy, not {cls.__name__}; load it with "
                f"{data['algo']}.load()."
            )
        try:
            params = decode_constructor_parameters(data["params"])
            check_declared_net_arch(params)
            observation_space = space_from_dict(data["observation_space"])
            action_space = space_from_dict(data["action_space"])
            if "lr_schedule" in inspect.signature(cls.__init__).parameters:
                params["lr_schedule"] = constant_fn(0.0)  # SB3's dummy schedule: a loaded policy is not trained
            model = cls(observation_space, action_space, **params)
        except (ValueError, TypeError, KeyError) as exc:
            raise BadFileError(f"{where}: cannot rebuild {cls.__name__}: {' '.join(str(exc).split())}") from None
        state = tensors["model"]
        check_state_shapes(state, model.state_dict(), where, "the network's")
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise BadFileError(
                f"{where}: the archive does not match {cls.__name__}'s network "
                f"(missing {list(missing)[:5]}, unexpected {list(unexpected)[:5]})"
            )
        return model.to(get_device(device))

    @property
    def device(self) -> th.device:
        """Device of the first parameter (CPU when there is none)."""
        for param in self.parameters():
            return param.device
        return get_device("cpu")

    def load_from_vector(self, vector: np.ndarray) -> None:
        """Set all parameters from one flat vector.

        Args:
            vector: 1-D array of ``parameters_to_vector().size`` values.
        """
        th.nn.utils.vector_to_parameters(th.as_tensor(vector, dtype=th.float, device=self.device), self.parameters())

    def parameters_to_vector(self) -> np.ndarray:
        """All parameters as one flat numpy vector."""
        return th.nn.utils.parameters_to_vector(self.parameters()).detach().cpu().numpy()

    def set_training_mode(self, mode: bool) -> None:
        """Training (True) or evaluation (False) mode (BatchNorm, Dropout).

        Args:
            mode: the mode.
        """
        self.train(mode)

    def is_vectorized_observation(self, observation: np.ndarray | dict[str, np.ndarray]) -> bool:
        """Whether the observation is a batch (images may be channel-last).

        Args:
            observation: the observation.
        """
        if isinstance(observation, dict):
            if not isinstance(self.observation_space, spaces.Dict):
                raise ValueError(
                    f"The observation provided is a dict but the observation space is {self.observation_space}."
                )
            vectorized = False
            for key, obs in observation.items():
                obs_space = self.observation_space.spaces[key]
                vectorized = vectorized or is_vectorized_observation(
                    maybe_transpose(np.asarray(obs), obs_space), obs_space
                )
            return vectorized
        return is_vectorized_observation(
            maybe_transpose(np.asarray(observation), self.observation_space), self.observation_space
        )

    def obs_to_tensor(self, observation: np.ndarray | dict[str, np.ndarray]) -> tuple[PyTorchObs, bool]:
        """Convert an observation (single or batch, numpy or dict) to a batched tensor on the model's device.

        Images are transposed to channel-first when needed; no copy is made when the array can be shared.

        Args:
            observation: the observation.

        Returns:
            The tensor (or dict of tensors) with a batch dimension, and whether the input was a batch.
        """
        device = self.device
        if isinstance(observation, dict):
            if not isinstance(self.observation_space, spaces.Dict):
                raise ValueError(
                    f"The observation provided is a dict but the observation space is {self.observation_space}."
                )
            missing = set(self.observation_space.spaces) - set(observation)
            if missing:
                raise ValueError(
                    f"The observation dict lacks key(s) {sorted(missing)}; expected keys {list(self.observation_space.spaces)}."
                )
            vectorized = False
            tensors: dict[str, th.Tensor] = {}
            for key, obs_space in self.observation_space.spaces.items():
                obs_ = np.asarray(observation[key])
                if is_image_space(obs_space):
                    obs_ = maybe_transpose(obs_, obs_space)
                vectorized = vectorized or is_vectorized_observation(obs_, obs_space)
                tensors[key] = _to_tensor(obs_.reshape((-1, *obs_space.shape)), device)  # type: ignore[misc]
            return tensors, vectorized
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError(
                f"The observation space is a Dict ({list(self.observation_space.spaces)}) but the observation is a "
                f"{type(observation).__name__}; pass a dict of arrays."
            )
        obs = np.asarray(observation)
        if self._is_image_obs:
            obs = maybe_transpose(obs, self.observation_space)
        vectorized = is_vectorized_observation(obs, self.observation_space)
        return _to_tensor(obs.reshape((-1, *self.observation_space.shape)), device), vectorized  # type: ignore[misc]


class BasePolicy(BaseModel, ABC):
    """Base of policies: ``predict`` from numpy observations, action scaling, orthogonal init.

    Args:
        *args: positional arguments of :class:`BaseModel`.
        squash_output: actions are squashed to [-1, 1] by tanh (and rescaled to the Box bounds in ``predict``).
        **kwargs: keyword arguments of :class:`BaseModel`.
    """

    features_extractor: BaseFeaturesExtractor

    def __init__(self, *args: Any, squash_output: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._squash_output = squash_output

    @property
    def squash_output(self) -> bool:
        """Whether actions are squashed by tanh."""
        return self._squash_output

    @staticmethod
    def init_weights(module: nn.Module, gain: float = 1) -> None:
        """Orthogonal initialisation of Linear/Conv2d weights with zero biases (PPO, A2C).

        Args:
            module: a module (applied through ``nn.Module.apply``).
            gain: scaling of the orthogonal matrix.
        """
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(module.weight, gain=gain)
            if module.bias is not None:
                module.bias.data.fill_(0.0)

    @abstractmethod
    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        """Actions for a batch of observation tensors.

        Args:
            observation: preprocessed-ready batch.
            deterministic: deterministic actions.
        """

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Actions (numpy) for observations (single or batch); Box actions are clipped to the bounds,
        or rescaled from [-1, 1] when ``squash_output``.

        Args:
            observation: the observation(s).
            state: recurrent state (unused, returned as is).
            episode_start: episode starts (unused).
            deterministic: deterministic actions.
        """
        if self.training:
            self.set_training_mode(False)
        if isinstance(observation, tuple) and len(observation) == 2 and isinstance(observation[1], dict):
            raise ValueError(
                "You have passed a tuple to predict() instead of a numpy array or a dict. You are probably mixing the "
                "Gym API with the VecEnv API: `obs, info = env.reset()` (Gym) vs `obs = vec_env.reset()` (VecEnv)."
            )
        obs_tensor, vectorized_env = self.obs_to_tensor(observation)
        with th.inference_mode():
            actions_t = self._predict(obs_tensor, deterministic=deterministic)
        if actions_t.dtype in (th.bfloat16, th.float16):  # precision="bf16-true": numpy has no bfloat16
            actions_t = actions_t.float()
        actions = actions_t.cpu().numpy().reshape((-1, *self.action_space.shape))  # type: ignore[misc]
        if isinstance(self.action_space, spaces.Box):
            if self.squash_output:
                actions = self.unscale_action(actions)
            else:
                actions = np.clip(actions, self.action_space.low, self.action_space.high)
        if not vectorized_env:
            actions = actions.squeeze(axis=0)
        return actions, state

    def scale_action(self, action: np.ndarray) -> np.ndarray:
        """Rescale from [low, high] to [-1, 1].

        Args:
            action: action in the Box bounds.
        """
        if not isinstance(self.action_space, spaces.Box):
            raise TypeError(f"scale_action needs a Box action space, not {self.action_space}.")
        low, high = self.action_space.low, self.action_space.high
        return 2.0 * ((action - low) / (high - low)) - 1.0

    def unscale_action(self, scaled_action: np.ndarray) -> np.ndarray:
        """Rescale from [-1, 1] to [low, high].

        Args:
            scaled_action: action in [-1, 1].
        """
        if not isinstance(self.action_space, spaces.Box):
            raise TypeError(f"unscale_action needs a Box action space, not {self.action_space}.")
        low, high = self.action_space.low, self.action_space.high
        return (low + (0.5 * (scaled_action + 1.0) * (high - low))).astype(self.action_space.dtype, copy=False)


class ActorCriticPolicy(BasePolicy):
    """Actor-critic policy for on-policy algorithms (PPO, A2C): action distribution and state value.

    Args:
        observation_space: the observation space.
        action_space: the action space.
        lr_schedule: learning-rate schedule (``lr_schedule(1)`` is the initial rate).
        net_arch: ``dict(pi=[...], vf=[...])`` or one list for both (default 64-64 each; none for NatureCNN).
        activation_fn: activation class.
        ortho_init: orthogonal initialisation (gains sqrt(2), 0.01 for the action layer, 1 for the value layer).
        use_sde: gSDE exploration (Box actions).
        log_std_init: initial log-std.
        full_std: gSDE: one std per (feature, action).
        use_expln: gSDE: ``expln`` instead of ``exp``.
        squash_output: gSDE: tanh-squash actions (requires ``use_sde``).
        features_extractor_class: features extractor class.
        features_extractor_kwargs: its keyword arguments.
        share_features_extractor: one extractor for actor and critic.
        normalize_images: divide uint8 images by 255.
        optimizer_class: optimizer class.
        optimizer_kwargs: optimizer kwargs (default for Adam: ``eps=1e-5``, as SB3).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        use_sde: bool = False,
        log_std_init: float = 0.0,
        full_std: bool = True,
        use_expln: bool = False,
        squash_output: bool = False,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if optimizer_kwargs is None:
            optimizer_kwargs = {}
            if optimizer_class == th.optim.Adam:
                optimizer_kwargs["eps"] = 1e-5
        super().__init__(
            observation_space,
            action_space,
            features_extractor_class,
            features_extractor_kwargs,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
            squash_output=squash_output,
            normalize_images=normalize_images,
        )
        if isinstance(net_arch, list) and len(net_arch) > 0 and isinstance(net_arch[0], dict):
            warnings.warn(
                "Shared layers in the mlp_extractor were removed in SB3 v1.8.0: pass net_arch=dict(pi=..., vf=...) "
                "instead of net_arch=[dict(pi=..., vf=...)].",
                stacklevel=2,
            )
            net_arch = net_arch[0]
        if net_arch is None:
            net_arch = [] if features_extractor_class == NatureCNN else dict(pi=[64, 64], vf=[64, 64])
        if squash_output and not use_sde:
            raise ValueError("squash_output=True is only available with gSDE (use_sde=True).")
        if use_sde and not isinstance(action_space, spaces.Box):
            raise ValueError(f"use_sde=True needs a Box action space, got {action_space}.")

        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.ortho_init = ortho_init
        self.share_features_extractor = share_features_extractor
        self.features_extractor = self.make_features_extractor()
        self.features_dim = self.features_extractor.features_dim
        self.pi_features_extractor = self.features_extractor
        self.vf_features_extractor = (
            self.features_extractor if share_features_extractor else self.make_features_extractor()
        )
        self.log_std_init = log_std_init
        self.use_sde = use_sde
        self.dist_kwargs: dict[str, Any] | None = None
        if use_sde:
            self.dist_kwargs = dict(
                full_std=full_std, squash_output=squash_output, use_expln=use_expln, learn_features=False
            )
        self.action_dist = make_proba_distribution(action_space, use_sde=use_sde, dist_kwargs=self.dist_kwargs)
        self._build(lr_schedule)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        dist_kwargs = self.dist_kwargs or {}
        data = dict(
            normalize_images=self.normalize_images,
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            use_sde=self.use_sde,
            log_std_init=self.log_std_init,
            squash_output=dist_kwargs.get("squash_output", False),
            full_std=dist_kwargs.get("full_std", True),
            use_expln=dist_kwargs.get("use_expln", False),
            ortho_init=self.ortho_init,
            optimizer_class=self.optimizer_class,
            optimizer_kwargs=self.optimizer_kwargs,
            features_extractor_class=self.features_extractor_class,
            features_extractor_kwargs=self.features_extractor_kwargs,
            share_features_extractor=self.share_features_extractor,
        )
        return encode_constructor_parameters(data)

    def reset_noise(self, n_envs: int = 1) -> None:
        """Sample new gSDE exploration matrices.

        Args:
            n_envs: number of parallel environments.
        """
        if not isinstance(self.action_dist, StateDependentNoiseDistribution):
            raise RuntimeError("reset_noise() is only available when using gSDE (use_sde=True).")
        self.action_dist.sample_weights(self.log_std, batch_size=n_envs)

    def _build_mlp_extractor(self) -> None:
        """Create the policy and value MLPs."""
        self.mlp_extractor = MlpExtractor(
            self.features_dim, net_arch=self.net_arch, activation_fn=self.activation_fn, device=self.device
        )

    def _build(self, lr_schedule: Schedule) -> None:
        """Create the networks and the optimizer."""
        self._build_mlp_extractor()
        latent_dim_pi = self.mlp_extractor.latent_dim_pi
        if isinstance(self.action_dist, DiagGaussianDistribution):
            self.action_net, self.log_std = self.action_dist.proba_distribution_net(
                latent_dim=latent_dim_pi, log_std_init=self.log_std_init
            )
        elif isinstance(self.action_dist, StateDependentNoiseDistribution):
            self.action_net, self.log_std = self.action_dist.proba_distribution_net(
                latent_dim=latent_dim_pi, latent_sde_dim=latent_dim_pi, log_std_init=self.log_std_init
            )
        elif isinstance(
            self.action_dist, (CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution)
        ):
            self.action_net = self.action_dist.proba_distribution_net(latent_dim=latent_dim_pi)
        else:
            raise NotImplementedError(f"Unsupported distribution '{self.action_dist}'.")
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:
            module_gains: dict[nn.Module, float] = {
                self.mlp_extractor: np.sqrt(2),
                self.action_net: 0.01,
                self.value_net: 1.0,
            }
            if self.share_features_extractor:
                module_gains[self.features_extractor] = np.sqrt(2)
            else:
                module_gains[self.pi_features_extractor] = np.sqrt(2)
                module_gains[self.vf_features_extractor] = np.sqrt(2)
            for module, gain in module_gains.items():
                module.apply(partial(self.init_weights, gain=gain))
        self.optimizer = self.make_optimizer(self.parameters(), lr_schedule(1))

    #: seed batching: K seeds stacked in this policy (its inputs and outputs carry a leading seed dimension)
    n_seeds: int = 1

    def _features(self, obs: PyTorchObs, features_extractor: BaseFeaturesExtractor) -> th.Tensor:
        """Features of a batch; K > 1 stacked seeds: observations ``[K, batch, ...]`` are preprocessed with K
        folded into the batch (one-hot encodings flatten their input) and extracted as ``[K, batch, ...]``."""
        if self.n_seeds == 1 or not isinstance(obs, th.Tensor):
            return super().extract_features(obs, features_extractor)
        k, b = obs.shape[0], obs.shape[1]
        x = preprocess_obs(obs.reshape(k * b, *obs.shape[2:]), self.observation_space, self.normalize_images)
        return features_extractor(x.reshape(k, b, *x.shape[1:]))

    def _latents(self, obs: PyTorchObs) -> tuple[th.Tensor, th.Tensor]:
        if self.share_features_extractor:
            features = self._features(obs, self.features_extractor)
            return self.mlp_extractor.forward_actor(features), self.mlp_extractor.forward_critic(features)
        pi_features = self._features(obs, self.pi_features_extractor)
        vf_features = self._features(obs, self.vf_features_extractor)
        return self.mlp_extractor.forward_actor(pi_features), self.mlp_extractor.forward_critic(vf_features)

    def forward(self, obs: PyTorchObs, deterministic: bool = False) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Actions, values ``[batch, 1]`` and log-probabilities ``[batch]`` (K > 1 stacked seeds: each with a
        leading seed dimension).

        Args:
            obs: batch of observations (``[K, batch, ...]`` for K > 1 seeds).
            deterministic: deterministic actions.
        """
        latent_pi, latent_vf = self._latents(obs)
        values = self.value_net(latent_vf)
        distribution = self._get_action_dist_from_latent(latent_pi)
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        actions = actions.reshape((*log_prob.shape, *self.action_space.shape))  # type: ignore[misc]
        return actions, values, log_prob

    def extract_features(  # type: ignore[override]
        self, obs: PyTorchObs, features_extractor: BaseFeaturesExtractor | None = None
    ) -> th.Tensor | tuple[th.Tensor, th.Tensor]:
        """Features (a pair (actor, critic) when the extractor is not shared).

        Args:
            obs: batch of observations.
            features_extractor: extractor to use when shared (default ``self.features_extractor``).
        """
        if self.share_features_extractor:
            return super().extract_features(
                obs, self.features_extractor if features_extractor is None else features_extractor
            )
        if features_extractor is not None:
            warnings.warn(
                "Provided features_extractor will be ignored because the features extractor is not shared.",
                UserWarning,
                stacklevel=2,
            )
        return super().extract_features(obs, self.pi_features_extractor), super().extract_features(
            obs, self.vf_features_extractor
        )

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> Distribution:
        """The action distribution for a policy latent."""
        mean_actions = self.action_net(latent_pi)
        if isinstance(self.action_dist, DiagGaussianDistribution):
            return self.action_dist.proba_distribution(mean_actions, self.log_std)
        if isinstance(self.action_dist, StateDependentNoiseDistribution):
            return self.action_dist.proba_distribution(mean_actions, self.log_std, latent_pi)
        return self.action_dist.proba_distribution(action_logits=mean_actions)

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self.get_distribution(observation).get_actions(deterministic=deterministic)

    def evaluate_actions(self, obs: PyTorchObs, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        """Values ``[batch, 1]``, log-probabilities ``[batch]`` and entropy ``[batch]`` (None if no closed form).

        Args:
            obs: batch of observations.
            actions: batch of actions.
        """
        latent_pi, latent_vf = self._latents(obs)
        distribution = self._get_action_dist_from_latent(latent_pi)
        log_prob = distribution.log_prob(actions)
        values = self.value_net(latent_vf)
        return values, log_prob, distribution.entropy()

    def get_distribution(self, obs: PyTorchObs) -> Distribution:
        """The current action distribution for observations.

        Args:
            obs: batch of observations.
        """
        features = self._features(obs, self.pi_features_extractor)
        return self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(features))

    def predict_values(self, obs: PyTorchObs) -> th.Tensor:
        """State values ``[batch, 1]``.

        Args:
            obs: batch of observations.
        """
        features = self._features(obs, self.vf_features_extractor)
        return self.value_net(self.mlp_extractor.forward_critic(features))


ActorCriticCnnPolicy, MultiInputActorCriticPolicy = cnn_and_multi_input_variants(
    ActorCriticPolicy, __name__, ("ActorCriticCnnPolicy", "MultiInputActorCriticPolicy")
)


MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
