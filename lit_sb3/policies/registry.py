"""Policy-alias resolution ("MlpPolicy", ...) and the registration of the policy classes in the one class
whitelist (:data:`lit_sb3.utils.serialization.CLASS_WHITELIST`, re-exported here with its functions).

Loading resolves class names only through that whitelist, never by importing arbitrary paths, so a saved model or
config cannot make the library run code it does not already trust.
"""

from __future__ import annotations

import difflib

from lit_sb3.policies import base, dqn, maskable, recurrent, sac, td3
from lit_sb3.policies.torch_layers import BaseFeaturesExtractor, CombinedExtractor, FlattenExtractor, NatureCNN
from lit_sb3.utils.serialization import CLASS_WHITELIST, class_to_path, path_to_class, register_class

__all__ = [
    "CLASS_WHITELIST",
    "class_to_path",
    "path_to_class",
    "register_class",
    "resolve_policy_class",
]


def resolve_policy_class(aliases: dict[str, type], policy: str | type, algo_name: str) -> type:
    """The policy class for an alias or a class.

    Args:
        aliases: the algorithm's aliases (its class's ``policy_aliases``).
        policy: an alias such as ``"MlpPolicy"`` or a policy class.
        algo_name: the algorithm's name, for error messages.
    """
    if isinstance(policy, str):
        if policy in aliases:
            return aliases[policy]
        close = difflib.get_close_matches(policy, list(aliases), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"Unknown policy '{policy}' for {algo_name}{hint}; available: {', '.join(aliases)}")
    if isinstance(policy, type) and issubclass(policy, base.BasePolicy):
        return policy
    raise TypeError(
        f"policy for {algo_name} must be one of {', '.join(aliases)} or a BasePolicy subclass, got {policy!r}."
    )


for _cls in (  # the policies and torch layers (activations and optimizers are registered by serialization)
    BaseFeaturesExtractor, FlattenExtractor, NatureCNN, CombinedExtractor,
    base.ActorCriticPolicy, base.ActorCriticCnnPolicy, base.MultiInputActorCriticPolicy,
    sac.SACPolicy, sac.CnnPolicy, sac.MultiInputPolicy,
    td3.TD3Policy, td3.CnnPolicy, td3.MultiInputPolicy,
    dqn.DQNPolicy, dqn.CnnPolicy, dqn.MultiInputPolicy,
):  # fmt: skip
    register_class(_cls)
for _cls in (  # MaskablePPO
    maskable.MaskableActorCriticPolicy, maskable.MaskableActorCriticCnnPolicy,
    maskable.MaskableMultiInputActorCriticPolicy,
    recurrent.RecurrentActorCriticPolicy, recurrent.RecurrentActorCriticCnnPolicy,  # RecurrentPPO
    recurrent.RecurrentMultiInputActorCriticPolicy,
):  # fmt: skip
    register_class(_cls)
del _cls
