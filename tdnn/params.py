"""``tensordict.nn.params``: upstream's module path for TensorDictParams."""

from tdnn._params import TensorDictParams

__all__ = ["TensorDictParams"]
