"""Public face of upstream's ``tensordict.tensordict`` (its old home of ``TensorDict``)."""

from tensordict._base import TensorDictBase
from tensordict._deprecated import TENSORDICT_TABLE, module_getattr
from tensordict._functional import dense_stack_tds, make_tensordict, merge_tensordicts, pad_sequence
from tensordict._keys import NestedKey
from tensordict._lazy import LazyStackedTensorDict
from tensordict._memmap import MemoryMappedTensor
from tensordict._pad import pad
from tensordict._td import _NO_DEFAULT as NO_DEFAULT
from tensordict._td import TensorDict, is_tensor_collection
from tensordict._tensor_utils import (
    convert_ellipsis_to_idx,
    expand_as_right,
    expand_right,
    infer_size_impl,
)
from tensordict._tensorclass import is_tensorclass
from tensordict._testing import assert_allclose_td

__all__ = [
    "NO_DEFAULT",
    "LazyStackedTensorDict",
    "MemoryMappedTensor",
    "NestedKey",
    "TensorDict",
    "TensorDictBase",
    "assert_allclose_td",
    "convert_ellipsis_to_idx",
    "dense_stack_tds",
    "expand_as_right",
    "expand_right",
    "infer_size_impl",
    "is_tensor_collection",
    "is_tensorclass",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
]

__getattr__ = module_getattr(__name__, TENSORDICT_TABLE)  # upstream's deprecated names (PEP 562)
