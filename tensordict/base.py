"""Upstream's ``tensordict.base`` module path: a public face, re-exporting only."""

from tensordict._base import TensorDictBase
from tensordict._td import is_tensor_collection

__all__ = ["TensorDictBase", "is_tensor_collection"]
