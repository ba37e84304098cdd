"""``tensordict.nn.utils``: upstream's module path for the module-layer switches and mappings."""

from tdnn._deprecated import UTILS_TABLE
from tdnn._helpers import set_skip_existing, skip_existing
from tdnn._interaction import composite_lp_aggregate, set_composite_lp_aggregate
from tdnn._mappings import add_custom_mapping, biased_softplus, expln, inv_softplus, mappings
from tensordict.utils import deprecated_attributes

__all__ = [
    "add_custom_mapping",
    "biased_softplus",
    "composite_lp_aggregate",
    "expln",
    "inv_softplus",
    "mappings",
    "set_composite_lp_aggregate",
    "set_skip_existing",
    "skip_existing",
]

__getattr__ = deprecated_attributes(__name__, UTILS_TABLE)  # upstream's deprecated names (PEP 562)
