"""SB3's ``CnnPolicy``/``MultiInputPolicy`` variants of a policy class, built instead of written out.

A variant is the policy with another default ``features_extractor_class`` (NatureCNN, CombinedExtractor) and
nothing else. Writing each one out repeats the whole constructor signature (twice per algorithm); this builds the
subclass with the same signature and type hints (so configuration checks read its arguments as they read the base
class's), a proper module and name (so it pickles, registers and loads like a written-out class).
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, TypeVar

from lit_sb3.policies.torch_layers import BaseFeaturesExtractor, CombinedExtractor, NatureCNN

__all__ = ["cnn_and_multi_input_variants", "with_features_extractor"]

P = TypeVar("P", bound=type)


def with_features_extractor(
    policy_class: P, extractor_class: type[BaseFeaturesExtractor], name: str, module: str, doc: str
) -> P:
    """A subclass of ``policy_class`` whose ``features_extractor_class`` defaults to ``extractor_class``.

    Args:
        policy_class: the policy (its constructor takes ``features_extractor_class``).
        extractor_class: the new default features extractor.
        name: the subclass's name (``"CnnPolicy"``).
        module: the module it is defined in (pass ``__name__``).
        doc: its docstring.
    """
    base_init = policy_class.__init__
    signature = inspect.signature(base_init)
    if "features_extractor_class" not in signature.parameters:
        raise TypeError(f"{policy_class.__name__} takes no features_extractor_class.")
    signature = signature.replace(
        parameters=[
            p.replace(default=extractor_class) if p.name == "features_extractor_class" else p
            for p in signature.parameters.values()
        ]
    )

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        base_init(*bound.args, **bound.kwargs)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__annotations__ = typing.get_type_hints(base_init)
    __init__.__qualname__ = f"{name}.__init__"
    __init__.__module__ = module
    return type(policy_class)(name, (policy_class,), {"__init__": __init__, "__doc__": doc, "__module__": module,
                                                      "__qualname__": name})  # fmt: skip


def cnn_and_multi_input_variants(
    policy_class: P, module: str, names: tuple[str, str] = ("CnnPolicy", "MultiInputPolicy")
) -> tuple[P, P]:
    """SB3's ``CnnPolicy`` (:class:`NatureCNN`) and ``MultiInputPolicy`` (:class:`CombinedExtractor`, Dict
    observations) of ``policy_class``.

    Args:
        policy_class: the policy.
        module: the module they are defined in (pass ``__name__``).
        names: the two classes' names (SB3's, e.g. ``("ActorCriticCnnPolicy", "MultiInputActorCriticPolicy")``).
    """
    name = policy_class.__name__
    return (
        with_features_extractor(policy_class, NatureCNN, names[0], module,
                                f":class:`{name}` with a :class:`NatureCNN` features extractor."),
        with_features_extractor(policy_class, CombinedExtractor, names[1], module,
                                f":class:`{name}` with a :class:`CombinedExtractor` (Dict observations)."),
    )  # fmt: skip
