"""``tensordict.nn.distributions.continuous``: upstream's path for the continuous helpers."""

from tdnn._distributions import AddStateIndependentNormalScale, Delta, NormalParamExtractor

__all__ = ["AddStateIndependentNormalScale", "Delta", "NormalParamExtractor"]
