"""tdnn: TensorDict-in / TensorDict-out modules over the public tensordict API."""

from tdnn._module import TensorDictModule, TensorDictModuleBase
from tdnn._sequential import TensorDictSequential

__all__ = ["TensorDictModule", "TensorDictModuleBase", "TensorDictSequential"]
