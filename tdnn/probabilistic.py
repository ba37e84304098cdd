"""``tensordict.nn.probabilistic``: upstream's module path for the probabilistic modules."""

from tdnn._interaction import InteractionType, interaction_type, set_interaction_type
from tdnn._probabilistic import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential

__all__ = [
    "InteractionType",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "interaction_type",
    "set_interaction_type",
]
