"""tdnn: TensorDict-in / TensorDict-out modules over the public tensordict API."""

from tdnn._base import TensorDictModuleBase
from tdnn._composite import CompositeDistribution
from tdnn._dispatch import dispatch
from tdnn._distributions import (
    AddStateIndependentNormalScale,
    NormalParamExtractor,
    OneHotCategorical,
    TruncatedNormal,
    rand_one_hot,
)
from tdnn._ensemble import EnsembleModule
from tdnn._fx import TDGraphModule, symbolic_trace
from tdnn._helpers import WrapModule, as_tensordict_module, set_skip_existing, skip_existing
from tdnn._interaction import (
    InteractionType,
    composite_lp_aggregate,
    interaction_type,
    set_composite_lp_aggregate,
    set_interaction_type,
)
from tdnn._mappings import add_custom_mapping, biased_softplus, inv_softplus, mappings
from tdnn._module import TensorDictModule
from tdnn._params import TensorDictParams, _register
from tdnn._probabilistic import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
from tdnn._sequential import TensorDictSequential
from tdnn._wrappers import (
    CudaGraphModule,
    TensorClassModuleBase,
    TensorClassModuleWrapper,
    TensorDictModuleWrapper,
)
from tensordict import make_tensordict

_register()

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "CudaGraphModule",
    "EnsembleModule",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "TDGraphModule",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "TensorDictParams",
    "TensorDictSequential",
    "TruncatedNormal",
    "WrapModule",
    "add_custom_mapping",
    "as_tensordict_module",
    "biased_softplus",
    "composite_lp_aggregate",
    "dispatch",
    "interaction_type",
    "inv_softplus",
    "make_tensordict",
    "mappings",
    "rand_one_hot",
    "set_composite_lp_aggregate",
    "set_interaction_type",
    "set_skip_existing",
    "skip_existing",
    "symbolic_trace",
]
