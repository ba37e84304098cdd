"""``tensordict.nn.tensorclass_module``: upstream's module path for the TensorClass modules."""

from tdnn._wrappers import (
    InputClass,
    InputTensorClass,
    OutputClass,
    OutputTensorClass,
    TensorClassModuleBase,
    TensorClassModuleWrapper,
)

__all__ = [
    "InputClass",
    "InputTensorClass",
    "OutputClass",
    "OutputTensorClass",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
]
