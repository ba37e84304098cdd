"""``tensordict.nn.common``: upstream's module path for the TensorDict module classes."""

from tdnn._base import TensorDictModuleBase
from tdnn._dispatch import dispatch
from tdnn._helpers import WrapModule, as_tensordict_module
from tdnn._module import TensorDictModule
from tdnn._wrappers import TensorDictModuleWrapper

__all__ = [
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "WrapModule",
    "as_tensordict_module",
    "dispatch",
]
