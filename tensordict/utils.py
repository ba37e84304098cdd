"""Public face of upstream's ``tensordict.utils``: key helpers, predicates, behaviour switches,
test assertions, and a printer for checkpoint folders."""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from torch.nn import Buffer

from tensordict._deprecated import UTILS_TABLE, deprecated_attributes, module_getattr
from tensordict._future import TensorDictFuture
from tensordict._keys import NestedKey, unravel_key, unravel_key_list
from tensordict._modules import register_params_module
from tensordict._predicates import (
    default_is_leaf,
    is_batchedtensor,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    is_leaf_nontensor,
    is_non_tensor,
)
from tensordict._printoptions import get_printoptions, set_printoptions
from tensordict._repr_parse import parse_tensor_dict_string
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
from tensordict._td import is_tensor_collection
from tensordict._tensor_utils import (
    KEY_SEPARATOR,
    convert_ellipsis_to_idx,
    expand_as_right,
    expand_right,
    infer_size_impl,
    isin,
    remove_duplicates,
    unravel_key_to_tuple,
)
from tensordict._tensorclass import is_tensorclass
from tensordict._testing import assert_allclose_td, assert_close
from tensordict._timeit import timeit
from tensordict._tolist import LinkedList

logger = logging.getLogger("tensordict")  # upstream's library logger (no handler added)

#: what ``td[index]`` accepts, as for a tensor (a str or tuple of str is a key instead)
IndexType = int | slice | str | torch.Tensor | list[Any] | tuple[Any, ...] | None
#: what a ``device`` argument accepts
DeviceType = torch.device | str | int

__getattr__ = module_getattr(__name__, UTILS_TABLE)  # upstream's deprecated names (PEP 562)

__all__ = [
    "deprecated_attributes",
    "KEY_SEPARATOR",
    "Buffer",
    "DeviceType",
    "IndexType",
    "LinkedList",
    "NestedKey",
    "TensorDictFuture",
    "assert_allclose_td",
    "assert_close",
    "capture_non_tensor_stack",
    "convert_ellipsis_to_idx",
    "default_is_leaf",
    "expand_as_right",
    "expand_right",
    "get_defaults_to_none",
    "get_printoptions",
    "infer_size_impl",
    "is_batchedtensor",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_leaf_nontensor",
    "is_non_tensor",
    "is_tensor_collection",
    "is_tensorclass",
    "isin",
    "lazy_legacy",
    "list_to_stack",
    "parse_tensor_dict_string",
    "print_directory_tree",
    "register_params_module",
    "remove_duplicates",
    "set_capture_non_tensor_stack",
    "set_get_defaults_to_none",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "timeit",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
]


def print_directory_tree(
    path: str | os.PathLike[str], indent: str = "", display_metadata: bool = True
) -> None:
    """Print a folder as a tree, folders first (the layout of a checkpoint).

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> folder = tempfile.mkdtemp() + "/tensordict"
    >>> _ = TensorDict({"a": torch.rand(10), "b": {"c": torch.rand(10)}}, [10]).memmap(folder)
    >>> print_directory_tree(folder)
    tensordict/
        b/
            c.memmap
            meta.json
        a.memmap
        meta.json
    """
    path = os.fspath(path)
    print(f"{indent}{os.path.basename(os.path.normpath(path))}/")
    entries = sorted(os.listdir(path))
    folders = [e for e in entries if os.path.isdir(os.path.join(path, e))]
    files = [e for e in entries if not os.path.isdir(os.path.join(path, e))]
    for name in folders:
        print_directory_tree(os.path.join(path, name), indent + "    ", display_metadata)
    for name in files:
        if display_metadata or name != "meta.json":
            print(f"{indent}    {name}")
