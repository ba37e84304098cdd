"""``tensordict.nn.sequence``: upstream's module path for TensorDictSequential."""

from tdnn._sequential import TensorDictSequential

__all__ = ["TensorDictSequential"]
