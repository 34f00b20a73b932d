"""Policies, action distributions and torch layers for all algorithms."""

from lit_sb3.policies.base import (
    ActorCriticCnnPolicy,
    ActorCriticPolicy,
    BaseModel,
    BasePolicy,
    MultiInputActorCriticPolicy,
)
from lit_sb3.policies.dqn import DQNPolicy, QNetwork
from lit_sb3.policies.registry import (
    CLASS_WHITELIST,
    class_to_path,
    path_to_class,
    register_class,
    resolve_policy_class,
)
from lit_sb3.policies.sac import ContinuousCritic, SACPolicy
from lit_sb3.policies.td3 import TD3Policy
from lit_sb3.policies.torch_layers import (
    BaseFeaturesExtractor,
    CombinedExtractor,
    EnsembleLinear,
    FlattenExtractor,
    MlpExtractor,
    NatureCNN,
    create_ensemble_mlp,
    create_mlp,
    get_actor_critic_arch,
)

__all__ = [
    "CLASS_WHITELIST",
    "ActorCriticCnnPolicy",
    "ActorCriticPolicy",
    "BaseFeaturesExtractor",
    "BaseModel",
    "BasePolicy",
    "CombinedExtractor",
    "ContinuousCritic",
    "DQNPolicy",
    "EnsembleLinear",
    "FlattenExtractor",
    "MlpExtractor",
    "MultiInputActorCriticPolicy",
    "NatureCNN",
    "QNetwork",
    "SACPolicy",
    "TD3Policy",
    "class_to_path",
    "create_ensemble_mlp",
    "create_mlp",
    "get_actor_critic_arch",
    "path_to_class",
    "register_class",
    "resolve_policy_class",
]
