"""tdnn: TensorDict-in / TensorDict-out modules over the public tensordict API."""

from tdnn._ensemble import EnsembleModule
from tdnn._helpers import WrapModule, as_tensordict_module, skip_existing
from tdnn._module import TensorDictModule, TensorDictModuleBase
from tdnn._params import TensorDictParams
from tdnn._sequential import TensorDictSequential

__all__ = [
    "EnsembleModule",
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictParams",
    "TensorDictSequential",
    "WrapModule",
    "as_tensordict_module",
    "skip_existing",
]
