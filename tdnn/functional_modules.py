"""``tensordict.nn.functional_modules``: upstream's module path (its functional API is
``TensorDict.from_module`` / ``to_module``; only its deprecated helpers live here)."""

from tdnn._set_tensor import set_tensor, set_tensor_dict

__all__ = ["set_tensor", "set_tensor_dict"]
