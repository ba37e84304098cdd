"""``tensordict.nn.distributions.composite``: upstream's path for CompositeDistribution."""

from tdnn._composite import CompositeDistribution

__all__ = ["CompositeDistribution"]
