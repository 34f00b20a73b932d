"""Network building blocks: features extractors, MLP builders and the ensemble MLP used for critics."""

from __future__ import annotations

import math

import gymnasium as gym
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.preprocessing import get_device, get_flattened_obs_dim, is_image_space
from lit_sb3.core.types import TensorDict

__all__ = [
    "BaseFeaturesExtractor",
    "CombinedExtractor",
    "EnsembleLinear",
    "FlattenExtractor",
    "MlpExtractor",
    "NatureCNN",
    "create_ensemble_mlp",
    "create_mlp",
    "ensemble_first_member_forward",
    "ensemble_member_forward",
    "get_actor_critic_arch",
]


class BaseFeaturesExtractor(nn.Module):
    """Base class of features extractors (observation -> flat feature vector).

    Args:
        observation_space: the observation space.
        features_dim: number of features produced.
    """

    def __init__(self, observation_space: gym.Space, features_dim: int = 0) -> None:
        super().__init__()
        if features_dim <= 0:
            raise ValueError(f"features_dim must be a positive integer, got {features_dim}.")
        self._observation_space = observation_space
        self._features_dim = features_dim

    @property
    def features_dim(self) -> int:
        """Number of features produced."""
        return self._features_dim


class FlattenExtractor(BaseFeaturesExtractor):
    """Flattens the observation (the default for vector observations).

    Args:
        observation_space: the observation space.
    """

    def __init__(self, observation_space: gym.Space) -> None:
        super().__init__(observation_space, get_flattened_obs_dim(observation_space))
        # only the observation's own dims (leading batch dims, e.g. [K seeds, batch], stay)
        self.flatten = nn.Flatten(start_dim=-max(1, len(observation_space.shape or ())))

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.flatten(observations)


_NATURE_CNN_MIN_SIZE = 36  # 8x8/4 -> 4x4/2 -> 3x3/1 leaves at least one pixel from 36x36 up


class NatureCNN(BaseFeaturesExtractor):
    """The CNN of the DQN Nature paper (Mnih et al. 2015) for channel-first images.

    Args:
        observation_space: a ``Box`` of shape (C, H, W).
        features_dim: number of output features.
        normalized_image: the images are already normalised (skips the uint8 dtype/bounds checks).
    """

    def __init__(self, observation_space: gym.Space, features_dim: int = 512, normalized_image: bool = False) -> None:
        if not isinstance(observation_space, spaces.Box):
            raise TypeError(
                f"NatureCNN must be used with a gymnasium.spaces.Box observation space, not {observation_space}."
            )
        super().__init__(observation_space, features_dim)
        if not is_image_space(observation_space, check_channels=False, normalized_image=normalized_image):
            raise ValueError(
                f"You should use NatureCNN only with images, not with {observation_space}: it expects a 3-D Box "
                "(C, H, W)"
                + ("" if normalized_image else " of dtype uint8 with bounds [0, 255]")
                + ". You are probably using `CnnPolicy` instead of `MlpPolicy` or `MultiInputPolicy`. "
                "If the images are already normalised (e.g. VecNormalize or float channel-first images), "
                "pass `normalize_images=False`."
            )
        n_input_channels, height, width = observation_space.shape
        if height < _NATURE_CNN_MIN_SIZE or width < _NATURE_CNN_MIN_SIZE:
            if observation_space.shape[-1] < min(observation_space.shape[:2]):
                raise ValueError(
                    f"NatureCNN expects channel-first images (C, H, W) but {observation_space.shape} looks "
                    "channel-last (H, W, C): wrap the env with VecTransposeImage (done automatically for image "
                    "observations that are not in a Dict) or transpose the observations."
                )
            raise ValueError(
                f"NatureCNN needs images of at least {_NATURE_CNN_MIN_SIZE}x{_NATURE_CNN_MIN_SIZE} pixels "
                f"(channel-first C, H, W); got shape {observation_space.shape}. Resize the images or use a custom "
                "features extractor (features_extractor_class) with smaller kernels."
            )
        self.cnn = nn.Sequential(
            nn.Conv2d(n_input_channels, 32, kernel_size=8, stride=4, padding=0),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2, padding=0),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1, padding=0),
            nn.ReLU(),
            nn.Flatten(),
        )
        h = ((height - 8) // 4 + 1 - 4) // 2 + 1 - 2
        w = ((width - 8) // 4 + 1 - 4) // 2 + 1 - 2
        self.linear = nn.Sequential(nn.Linear(64 * h * w, features_dim), nn.ReLU())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.linear(self.cnn(observations))


def create_mlp(
    input_dim: int,
    output_dim: int,
    net_arch: list[int],
    activation_fn: type[nn.Module] = nn.ReLU,
    squash_output: bool = False,
    with_bias: bool = True,
    pre_linear_modules: list[type[nn.Module]] | None = None,
    post_linear_modules: list[type[nn.Module]] | None = None,
) -> list[nn.Module]:
    """Layers of an MLP: Linear + activation per hidden layer, then an optional output Linear (and tanh).

    Args:
        input_dim: input size.
        output_dim: output size; ``<= 0`` means no output layer.
        net_arch: hidden layer sizes.
        activation_fn: activation class used after each hidden layer.
        squash_output: append ``nn.Tanh``.
        with_bias: use biases in the Linear layers.
        pre_linear_modules: classes inserted before each Linear (e.g. BatchNorm1d), built with its input size.
        post_linear_modules: classes inserted after each hidden Linear (e.g. LayerNorm, Dropout), built with its size.
    """
    pre_linear_modules = pre_linear_modules or []
    post_linear_modules = post_linear_modules or []
    modules: list[nn.Module] = []
    last_dim = input_dim
    for size in net_arch:
        modules.extend(module(last_dim) for module in pre_linear_modules)
        modules.append(nn.Linear(last_dim, size, bias=with_bias))
        modules.extend(module(size) for module in post_linear_modules)
        modules.append(activation_fn())
        last_dim = size
    if output_dim > 0:
        modules.extend(module(last_dim) for module in pre_linear_modules)
        modules.append(nn.Linear(last_dim, output_dim, bias=with_bias))
    if squash_output:
        modules.append(nn.Tanh())
    return modules


class EnsembleLinear(nn.Module):
    """``n_members`` independent Linear layers evaluated with one ``torch.baddbmm``.

    Input ``[n_members, batch, in_features]`` (or ``[batch, in_features]``, shared by all members);
    output ``[n_members, batch, out_features]``. Each member is initialised as ``nn.Linear`` would be.

    Args:
        n_members: number of independent layers.
        in_features: input size.
        out_features: output size.
        bias: whether to learn biases.
    """

    def __init__(self, n_members: int, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        if n_members < 1:
            raise ValueError(f"n_members must be >= 1, got {n_members}.")
        self.n_members = n_members
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(th.empty(n_members, in_features, out_features))
        self.bias = nn.Parameter(th.empty(n_members, 1, out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Same distribution as ``nn.Linear``: kaiming-uniform(a=sqrt(5)) weights and U(-1/sqrt(in), 1/sqrt(in)) biases."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        with th.no_grad():
            for i in range(self.n_members):
                weight = th.empty(self.out_features, self.in_features)
                nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
                self.weight[i].copy_(weight.t())
                if self.bias is not None:
                    nn.init.uniform_(self.bias[i], -bound, bound)

    def forward(self, x: th.Tensor) -> th.Tensor:
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.n_members, -1, -1)
        if self.bias is None:
            return th.bmm(x, self.weight)
        return th.baddbmm(self.bias, x, self.weight)

    def forward_member(self, x: th.Tensor, index: int) -> th.Tensor:
        """Only member ``index`` on ``x`` of shape ``[batch, in_features]``."""
        if self.bias is None:
            return x @ self.weight[index]
        return th.addmm(self.bias[index], x, self.weight[index])

    def extra_repr(self) -> str:
        return (
            f"n_members={self.n_members}, in_features={self.in_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


def create_ensemble_mlp(
    n_members: int,
    input_dim: int,
    output_dim: int,
    net_arch: list[int],
    activation_fn: type[nn.Module] = nn.ReLU,
    squash_output: bool = False,
    with_bias: bool = True,
) -> list[nn.Module]:
    """Layers of ``n_members`` MLPs of the same shape, evaluated together (``[n, batch, ...]``).

    Args:
        n_members: number of MLPs.
        input_dim: input size.
        output_dim: output size; ``<= 0`` means no output layer.
        net_arch: hidden layer sizes.
        activation_fn: element-wise activation class used after each hidden layer.
        squash_output: append ``nn.Tanh``.
        with_bias: use biases.
    """
    modules: list[nn.Module] = []
    last_dim = input_dim
    for size in net_arch:
        modules.append(EnsembleLinear(n_members, last_dim, size, bias=with_bias))
        modules.append(activation_fn())
        last_dim = size
    if output_dim > 0:
        modules.append(EnsembleLinear(n_members, last_dim, output_dim, bias=with_bias))
    if squash_output:
        modules.append(nn.Tanh())
    return modules


def ensemble_member_forward(layers: nn.Sequential, x: th.Tensor, index: int) -> th.Tensor:
    """Run only member ``index`` of an ensemble MLP built by :func:`create_ensemble_mlp`.

    Args:
        layers: the ensemble MLP.
        x: input ``[batch, in_features]``.
        index: which member.
    """
    for layer in layers:
        x = layer.forward_member(x, index) if isinstance(layer, EnsembleLinear) else layer(x)
    return x


def ensemble_first_member_forward(layers: nn.Sequential, x: th.Tensor, group: int) -> th.Tensor:
    """Member 0 of each group of ``group`` consecutive members (each seed's first critic of a seed-stacked
    ensemble of ``K * group`` members), without evaluating the others.

    Args:
        layers: the ensemble MLP (``K * group`` members, seed-major).
        x: input ``[K, batch, in_features]``.
        group: members per seed.
    """
    k = x.shape[0]
    for layer in layers:
        if isinstance(layer, EnsembleLinear):
            weight = layer.weight.view(k, group, *layer.weight.shape[1:])[:, 0]
            if layer.bias is None:
                x = th.bmm(x, weight)
            else:
                x = th.baddbmm(layer.bias.view(k, group, *layer.bias.shape[1:])[:, 0], x, weight)
        else:
            x = layer(x)
    return x


class MlpExtractor(nn.Module):
    """Policy and value MLPs on top of the features (on-policy actor-critic).

    Args:
        feature_dim: size of the features.
        net_arch: hidden sizes shared by both nets (list) or ``dict(pi=[...], vf=[...])``.
        activation_fn: activation class.
        device: where to create the layers.
    """

    def __init__(
        self,
        feature_dim: int,
        net_arch: list[int] | dict[str, list[int]],
        activation_fn: type[nn.Module],
        device: th.device | str = "auto",
    ) -> None:
        super().__init__()
        device = get_device(device)
        if isinstance(net_arch, dict):
            unknown = set(net_arch) - {"pi", "vf"}
            if unknown:
                raise ValueError(f"Unknown net_arch keys {sorted(unknown)}; allowed keys: 'pi', 'vf'.")
            pi_dims, vf_dims = list(net_arch.get("pi", [])), list(net_arch.get("vf", []))
        elif isinstance(net_arch, (list, tuple)):
            pi_dims = vf_dims = list(net_arch)
        else:
            raise TypeError(f"net_arch must be a list of ints or dict(pi=[...], vf=[...]), got {net_arch!r}.")
        policy_net = create_mlp(feature_dim, -1, pi_dims, activation_fn)
        value_net = create_mlp(feature_dim, -1, vf_dims, activation_fn)
        self.latent_dim_pi = pi_dims[-1] if pi_dims else feature_dim
        self.latent_dim_vf = vf_dims[-1] if vf_dims else feature_dim
        self.policy_net = nn.Sequential(*policy_net).to(device)
        self.value_net = nn.Sequential(*value_net).to(device)

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.policy_net(features), self.value_net(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        """Policy latent."""
        return self.policy_net(features)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        """Value latent."""
        return self.value_net(features)


class CombinedExtractor(BaseFeaturesExtractor):
    """Features extractor for Dict observations: NatureCNN for image keys, flatten for the others, concatenated.

    Args:
        observation_space: a ``Dict`` space.
        cnn_output_dim: features per image key.
        normalized_image: the images are already normalised (skips the uint8 checks).
    """

    def __init__(
        self, observation_space: spaces.Dict, cnn_output_dim: int = 256, normalized_image: bool = False
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise TypeError(
                f"CombinedExtractor needs a gymnasium.spaces.Dict observation space, got {observation_space}; "
                "use MlpPolicy/CnnPolicy for non-Dict observations."
            )
        super().__init__(observation_space, features_dim=1)
        extractors: dict[str, nn.Module] = {}
        total = 0
        for key, subspace in observation_space.spaces.items():
            if is_image_space(subspace, normalized_image=normalized_image):
                extractors[key] = NatureCNN(subspace, features_dim=cnn_output_dim, normalized_image=normalized_image)
                total += cnn_output_dim
            else:
                extractors[key] = nn.Flatten()
                total += get_flattened_obs_dim(subspace)
        self.extractors = nn.ModuleDict(extractors)
        self._features_dim = total

    def forward(self, observations: TensorDict) -> th.Tensor:
        # the features dimension is the last ([batch, ...], or [K, batch, ...] for K seeds)
        return th.cat([extractor(observations[key]) for key, extractor in self.extractors.items()], dim=-1)


def get_actor_critic_arch(net_arch: list[int] | dict[str, list[int]]) -> tuple[list[int], list[int]]:
    """Actor and critic hidden sizes for off-policy algorithms (SAC, TD3, DDPG).

    Args:
        net_arch: one list for both, or ``dict(pi=[...], qf=[...])``.
    """
    if isinstance(net_arch, (list, tuple)):
        return list(net_arch), list(net_arch)
    if not isinstance(net_arch, dict):
        raise TypeError(f"net_arch must be a list of ints or dict(pi=[...], qf=[...]), got {net_arch!r}.")
    missing = [key for key in ("pi", "qf") if key not in net_arch]
    if missing:
        raise ValueError(
            f"net_arch dict is missing key(s) {missing}: it needs 'pi' (actor) and 'qf' (critic), got {sorted(net_arch)}."
        )
    unknown = set(net_arch) - {"pi", "qf"}
    if unknown:
        raise ValueError(f"Unknown net_arch keys {sorted(unknown)}; allowed keys: 'pi', 'qf'.")
    return list(net_arch["pi"]), list(net_arch["qf"])
