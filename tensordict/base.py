"""Upstream's ``tensordict.base`` module path: a public face, re-exporting only."""

from tensordict._base import TensorDictBase
from tensordict._construct import from_any, from_dict, from_namedtuple, from_tuple
from tensordict._io import from_csv, from_h5, from_json, from_pandas, from_parquet, from_zarr
from tensordict._keys import NO_DEFAULT
from tensordict._switches import get_defaults_to_none, set_get_defaults_to_none
from tensordict._td import TensorDict as _TensorDict
from tensordict._td import is_tensor_collection

from_struct_array = _TensorDict.from_struct_array  # the classmethod: strings, shared memory
# upstream's private spelling, which code written for it passes as `is_leaf=`
_is_tensor_collection = is_tensor_collection

__all__ = [
    "NO_DEFAULT",
    "TensorDictBase",
    "from_any",
    "from_csv",
    "from_dict",
    "from_h5",
    "from_json",
    "from_namedtuple",
    "from_pandas",
    "from_parquet",
    "from_struct_array",
    "from_tuple",
    "from_zarr",
    "get_defaults_to_none",
    "is_tensor_collection",
    "set_get_defaults_to_none",
]
