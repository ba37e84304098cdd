"""``tensordict.nn.distributions.truncated_normal``: upstream's path for TruncatedNormal."""

from tdnn._deprecated import TRUNCATED_NORMAL_TABLE, module_getattr
from tdnn._distributions import TruncatedNormal, TruncatedStandardNormal

__all__ = ["TruncatedNormal", "TruncatedStandardNormal"]

__getattr__ = module_getattr(__name__, TRUNCATED_NORMAL_TABLE)  # deprecated names (PEP 562)
