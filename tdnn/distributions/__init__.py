"""``tensordict.nn.distributions``: upstream's module path for the distribution helpers."""

from tdnn._composite import CompositeDistribution
from tdnn._deprecated import distributions_by_name
from tdnn._distributions import (
    AddStateIndependentNormalScale,
    Delta,
    NormalParamExtractor,
    OneHotCategorical,
    TruncatedNormal,
    rand_one_hot,
)
from tdnn._interaction import InteractionType, set_interaction_type
from tdnn._mappings import add_custom_mapping, mappings
from tdnn.distributions import continuous, discrete
from tensordict.utils import deprecated_attributes

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "Delta",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "TruncatedNormal",
    "add_custom_mapping",
    "continuous",
    "discrete",
    "mappings",
    "rand_one_hot",
    "set_interaction_type",
]

# upstream's deprecated names (PEP 562)
__getattr__ = deprecated_attributes(
    __name__, {"distributions_maps": (distributions_by_name(), None)}
)
