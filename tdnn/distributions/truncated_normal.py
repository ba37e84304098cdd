"""``tensordict.nn.distributions.truncated_normal``: upstream's path for TruncatedNormal."""

from tdnn._deprecated import TRUNCATED_NORMAL_TABLE
from tdnn._distributions import TruncatedNormal, TruncatedStandardNormal
from tensordict.utils import deprecated_attributes

__all__ = ["TruncatedNormal", "TruncatedStandardNormal"]

__getattr__ = deprecated_attributes(__name__, TRUNCATED_NORMAL_TABLE)  # deprecated names (PEP 562)
