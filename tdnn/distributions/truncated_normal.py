"""``tensordict.nn.distributions.truncated_normal``: upstream's path for TruncatedNormal."""

from tdnn._distributions import TruncatedNormal, TruncatedStandardNormal

__all__ = ["TruncatedNormal", "TruncatedStandardNormal"]
