"""tensordict: dictionaries of tensors that behave like one tensor."""

# the public face ``tensordict.memmap`` is loaded first, so that the name ``memmap`` below
# stays the function (as upstream), and ``from tensordict.memmap import ...`` still works
import tensordict.memmap as _memmap_face  # noqa: F401
from tensordict._append import append_memmap
from tensordict._archive import (
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict._base import TensorCollection, TensorDictBase
from tensordict._batching import collate, group_by, unpad_sequence
from tensordict._checkpoint_functions import load, load_memmap, memmap, save
from tensordict._cloudpickle import CloudpickleWrapper
from tensordict._consolidate import from_consolidated
from tensordict._construct import (
    from_any,
    from_dict,
    from_module,
    from_modules,
    from_namedtuple,
    from_struct_array,
    from_tuple,
    fromkeys,
)
from tensordict._construct_ops import from_pytree
from tensordict._functional import (
    dense_stack_tds,
    make_tensordict,
    maybe_dense_stack,
    merge_tensordicts,
    pad_sequence,
)
from tensordict._future import TensorDictFuture
from tensordict._io import (
    from_arrow,
    from_csv,
    from_h5,
    from_json,
    from_pandas,
    from_parquet,
    from_safetensors,
    from_zarr,
    to_arrow,
    to_safetensors,
)
from tensordict._io_persistent import PersistentTensorDict
from tensordict._keys import NestedKey, unravel_key, unravel_key_list
from tensordict._lazy import LazyStackedTensorDict, lazy_stack
from tensordict._memmap import MemmapTensor, Memmaptensor, MemoryMappedTensor
from tensordict._module_names import module_layer_name as __getattr__  # noqa: F401  (PEP 562)
from tensordict._mro import resolve_inherited as _resolve_inherited
from tensordict._nontensor_api import install as _install_nontensor_api
from tensordict._pack import PackLayout
from tensordict._pad import pad
from tensordict._pipe import TensorDictPipe
from tensordict._predicates import (
    default_is_leaf,
    is_batchedtensor,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    is_leaf_nontensor,
)
from tensordict._printoptions import get_printoptions, set_printoptions
from tensordict._pytree import register as _register_pytree
from tensordict._repr_parse import parse_tensor_dict_string
from tensordict._stack import cat, stack
from tensordict._state import register_safe_globals as _register_safe_globals
from tensordict._store import LazyStackedTensorDictStore, TensorDictStore
from tensordict._switches import (
    capture_non_tensor_stack,
    get_defaults_to_none,
    lazy_legacy,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_get_defaults_to_none,
    set_lazy_legacy,
    set_list_to_stack,
)
from tensordict._td import TensorDict, is_tensor_collection
from tensordict._tensor_utils import KEY_SEPARATOR, unravel_key_to_tuple
from tensordict._testing import assert_allclose_td, assert_close
from tensordict._typed import TypedTensorDict
from tensordict._unbatched import UnbatchedTensor

# one statement: importing the tensordict.tensorclass module binds the package attribute
# `tensorclass` to the module, and the from-import then rebinds it to the decorator
from tensordict.tensorclass import (
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    NonTensorStack,
    TensorAttrs,
    TensorClass,
    from_dataclass,
    is_non_tensor,
    is_tensorclass,
    tensorclass,
)

_register_safe_globals(TensorDict)
_register_pytree()
_install_nontensor_api()
_resolve_inherited(TensorDict, LazyStackedTensorDict)  # (after every installer above)

__version__ = "0.1.0.dev0"

__all__ = [
    "KEY_SEPARATOR",
    "CloudpickleWrapper",
    "LazyStackedTensorDict",
    "LazyStackedTensorDictStore",
    "MetaData",
    "MemmapTensor",
    "MemoryMappedTensor",
    "Memmaptensor",
    "NestedKey",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "TensorDict",
    "TensorCollection",
    "TensorDictBase",
    "TensorDictPipe",
    "TensorDictStore",
    "TensorDictFuture",
    "TypedTensorDict",
    "append_memmap",
    "is_memmap_archive",
    "load",
    "load_memmap",
    "save",
    "pack_memmap",
    "refresh_archive_checksums",
    "unpack_memmap",
    "UnbatchedTensor",
    "assert_allclose_td",
    "assert_close",
    "capture_non_tensor_stack",
    "cat",
    "collate",
    "default_is_leaf",
    "dense_stack_tds",
    "from_any",
    "from_dataclass",
    "from_consolidated",
    "from_dict",
    "from_namedtuple",
    "from_pytree",
    "from_safetensors",
    "from_struct_array",
    "from_tuple",
    "from_module",
    "from_modules",
    "fromkeys",
    "memmap",
    "get_defaults_to_none",
    "get_printoptions",
    "group_by",
    "is_batchedtensor",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_leaf_nontensor",
    "is_non_tensor",
    "is_tensor_collection",
    "is_tensorclass",
    "lazy_legacy",
    "lazy_stack",
    "list_to_stack",
    "make_tensordict",
    "maybe_dense_stack",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    "parse_tensor_dict_string",
    "set_capture_non_tensor_stack",
    "set_get_defaults_to_none",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "stack",
    "tensorclass",
    "unpad_sequence",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
    "to_safetensors",
    "from_arrow",
    "from_csv",
    "from_json",
    "from_pandas",
    "from_parquet",
    "to_arrow",
    "from_h5",
    "from_zarr",
    "PackLayout",
    "PersistentTensorDict",
]
