"""Small custom environments used by the tests."""

from .bit_flipping import BitFlippingEnv

__all__ = ["BitFlippingEnv"]
