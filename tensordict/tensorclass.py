"""Public face of upstream's ``tensordict.tensorclass`` module (re-exports only)."""

from tensordict._from_dataclass import from_dataclass
from tensordict._nontensor import (
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    NonTensorStack,
    is_non_tensor,
)
from tensordict._tensor_attrs import TensorAttrs
from tensordict._tensorclass import TensorClass, is_tensorclass, tensorclass

__all__ = [
    "MetaData",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "from_dataclass",
    "is_non_tensor",
    "is_tensorclass",
    "tensorclass",
]
