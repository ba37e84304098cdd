"""tensordict: dictionaries of tensors that behave like one tensor."""

from tensordict._base import TensorDictBase
from tensordict._cloudpickle import CloudpickleWrapper
from tensordict._keys import NestedKey, unravel_key, unravel_key_list
from tensordict._lazy import LazyStackedTensorDict, lazy_stack
from tensordict._memmap import MemmapTensor, Memmaptensor, MemoryMappedTensor
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._pytree import register as _register_pytree
from tensordict._shape import pad
from tensordict._state import register_safe_globals as _register_safe_globals
from tensordict._td import TensorDict, is_tensor_collection
from tensordict._tensorclass import TensorClass, is_tensorclass, tensorclass

_register_safe_globals(TensorDict)
_register_pytree()

__version__ = "0.1.0.dev0"

__all__ = [
    "CloudpickleWrapper",
    "LazyStackedTensorDict",
    "MemmapTensor",
    "MemoryMappedTensor",
    "Memmaptensor",
    "NestedKey",
    "NonTensorData",
    "NonTensorStack",
    "TensorClass",
    "TensorDict",
    "TensorDictBase",
    "is_tensor_collection",
    "is_tensorclass",
    "lazy_stack",
    "pad",
    "tensorclass",
    "unravel_key",
    "unravel_key_list",
]
