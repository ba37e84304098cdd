"""Upstream's ``tensordict.base`` module path: a public face, re-exporting only."""

from tensordict._base import TensorDictBase
from tensordict._io import from_csv, from_h5, from_json, from_pandas, from_parquet, from_zarr
from tensordict._td import TensorDict as _TensorDict
from tensordict._td import is_tensor_collection

from_struct_array = _TensorDict.from_struct_array

__all__ = [
    "TensorDictBase",
    "from_csv",
    "from_h5",
    "from_json",
    "from_pandas",
    "from_parquet",
    "from_struct_array",
    "from_zarr",
    "is_tensor_collection",
]
