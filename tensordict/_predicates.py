"""Predicates on values and types: non-tensor, leaf rules, dtype families."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._nontensor import NonTensor, is_non_tensor
from tensordict._td import is_tensor_collection
from tensordict._torch_compat import is_batched

__all__ = [
    "default_is_leaf",
    "is_batchedtensor",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_leaf_nontensor",
    "is_non_tensor",
]


def _pass_through(cls: type) -> bool:
    return bool(getattr(cls, "_pass_through", False))


def default_is_leaf(cls: type) -> bool:
    """The default leaf rule of ``keys``/``items``: a type that is neither a tensor
    collection nor a non-tensor entry (which upstream makes a tensorclass), or one that
    passes through (``UnbatchedTensor``).

    >>> import torch
    >>> from tensordict import NonTensorData, TensorDict, default_is_leaf
    >>> default_is_leaf(torch.Tensor), default_is_leaf(TensorDict), default_is_leaf(NonTensorData)
    (True, False, False)
    """
    if _pass_through(cls):
        return True
    return not issubclass(cls, NonTensor) and not is_tensor_collection(cls)


def is_leaf_nontensor(cls: type) -> bool:
    """A leaf rule that counts tensors and non-tensor entries as leaves (not collections).

    >>> import torch
    >>> from tensordict import NonTensorData, TensorDict, is_leaf_nontensor
    >>> is_leaf_nontensor(torch.Tensor), is_leaf_nontensor(NonTensorData)
    (True, True)
    >>> is_leaf_nontensor(TensorDict)
    False
    """
    if issubclass(cls, NonTensor):
        return True
    if is_tensor_collection(cls):
        return _pass_through(cls)
    return issubclass(cls, Tensor)


# the walk of ``keys``/``items`` answers this rule from its type cache (tensordict/_views.py)
is_leaf_nontensor._stored_leaves = True  # type: ignore[attr-defined]


def is_batchedtensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a batched tensor of ``torch.vmap`` (False for anything else).

    >>> import torch
    >>> from tensordict.utils import is_batchedtensor
    >>> is_batchedtensor(torch.zeros(2))
    False
    >>> torch.vmap(lambda x: torch.tensor(is_batchedtensor(x)))(torch.zeros(2)).tolist()
    [True, True]
    """
    return isinstance(tensor, Tensor) and is_batched(tensor)


def _dtype(args: tuple[Any, ...]) -> torch.dtype | None:
    if not args:
        raise TypeError(
            "tensordict dtype predicate: pass the value to test (fn(value) or fn(key, value))"
        )
    value = args[-1]
    return getattr(value, "dtype", None) if isinstance(value, Tensor) else None


def is_bool(*args: Any) -> bool:
    """Whether the last argument is a bool tensor (``fn(value)`` and ``fn(key, value)`` both work).

    >>> import torch
    >>> from tensordict import is_bool
    >>> is_bool(torch.zeros(1, dtype=torch.bool)), is_bool("mask", torch.zeros(1))
    (True, False)
    """
    return _dtype(args) == torch.bool


def is_floating(*args: Any) -> bool:
    """Whether the last argument is a floating-point tensor (not complex).

    >>> import torch
    >>> from tensordict import is_floating
    >>> is_floating(torch.zeros(1)), is_floating(torch.zeros(1, dtype=torch.complex64))
    (True, False)
    """
    dtype = _dtype(args)
    return dtype is not None and dtype.is_floating_point


def is_inexact(*args: Any) -> bool:
    """Whether the last argument is a floating-point or complex tensor.

    >>> import torch
    >>> from tensordict import is_inexact
    >>> is_inexact(torch.zeros(1, dtype=torch.complex64))
    True
    >>> is_inexact("i", torch.zeros(1, dtype=torch.long))
    False
    """
    dtype = _dtype(args)
    return dtype is not None and (dtype.is_floating_point or dtype.is_complex)


def is_integer(*args: Any) -> bool:
    """Whether the last argument is an integer tensor (signed or unsigned, not bool).

    >>> import torch
    >>> from tensordict import is_integer
    >>> is_integer(torch.zeros(1, dtype=torch.uint8)), is_integer(torch.zeros(1, dtype=torch.bool))
    (True, False)
    """
    dtype = _dtype(args)
    return (
        dtype is not None
        and not (dtype.is_floating_point or dtype.is_complex)
        and dtype != torch.bool
    )
