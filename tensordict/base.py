"""Upstream's ``tensordict.base`` module path: a public face, re-exporting only."""

from tensordict._base import TensorDictBase
from tensordict._construct import (
    from_any,
    from_dict,
    from_namedtuple,
    from_struct_array,
    from_tuple,
)
from tensordict._keys import NO_DEFAULT
from tensordict._switches import get_defaults_to_none, set_get_defaults_to_none
from tensordict._td import is_tensor_collection

__all__ = [
    "NO_DEFAULT",
    "TensorDictBase",
    "from_any",
    "from_dict",
    "from_namedtuple",
    "from_struct_array",
    "from_tuple",
    "get_defaults_to_none",
    "is_tensor_collection",
    "set_get_defaults_to_none",
]
