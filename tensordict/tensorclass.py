"""Public face of upstream's ``tensordict.tensorclass`` module (re-exports only)."""

from tensordict._from_dataclass import from_dataclass
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._tensorclass import TensorClass, is_tensorclass, tensorclass

__all__ = [
    "NonTensorData",
    "NonTensorStack",
    "TensorClass",
    "from_dataclass",
    "is_tensorclass",
    "tensorclass",
]
