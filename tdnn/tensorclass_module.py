"""``tensordict.nn.tensorclass_module``: upstream's module path for the TensorClass modules."""

from tdnn._wrappers import TensorClassModuleBase, TensorClassModuleWrapper

__all__ = ["TensorClassModuleBase", "TensorClassModuleWrapper"]
