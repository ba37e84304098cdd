"""``tensordict.nn.distributions.discrete``: upstream's path for the discrete helpers."""

from tdnn._distributions import OneHotCategorical, rand_one_hot

__all__ = ["OneHotCategorical", "rand_one_hot"]
