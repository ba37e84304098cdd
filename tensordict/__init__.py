"""tensordict: dictionaries of tensors that behave like one tensor."""

from tensordict._cloudpickle import CloudpickleWrapper
from tensordict._keys import NestedKey, unravel_key, unravel_key_list
from tensordict._lazy import LazyStackedTensorDict, lazy_stack
from tensordict._memmap import MemmapTensor, Memmaptensor, MemoryMappedTensor
from tensordict._pytree import register as _register_pytree
from tensordict._shape import pad
from tensordict._state import register_safe_globals as _register_safe_globals
from tensordict._td import TensorDict, is_tensor_collection

# one statement: importing the tensordict.tensorclass module binds the package attribute
# `tensorclass` to the module, and the from-import then rebinds it to the decorator
from tensordict.tensorclass import (
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    NonTensorStack,
    TensorAttrs,
    TensorClass,
    is_non_tensor,
    is_tensorclass,
    tensorclass,
)

_register_safe_globals(TensorDict)
_register_pytree()

__version__ = "0.1.0.dev0"

__all__ = [
    "CloudpickleWrapper",
    "LazyStackedTensorDict",
    "MetaData",
    "MemmapTensor",
    "MemoryMappedTensor",
    "Memmaptensor",
    "NestedKey",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "TensorDict",
    "is_non_tensor",
    "is_tensor_collection",
    "is_tensorclass",
    "lazy_stack",
    "pad",
    "tensorclass",
    "unravel_key",
    "unravel_key_list",
]
