"""Pytree support: TensorDicts open into their tensors for vmap, torch.func and compile.

Unflattening recomputes the batch size: under ``vmap`` the leaves lose the mapped dim,
and outputs gain dims, so the batch size grows or shrinks by the same number of dims
as the leaves did. A lazy stack opens as its dense form and closes as a lazy stack
again (along its stack dim, or the last batch dim where vmap took that dim away).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._lazy import LazyStackedTensorDict
from tensordict._nontensor import NonTensor
from tensordict._td import TensorDict
from tensordict._torch_compat import (
    let_vmap_take_one_out_dim,
    mapping_key,
    register_pytree_node,
)


def _flatten(td: TensorDict) -> tuple[list[Any], Any]:
    keys, children, ndims, extras = [], [], [], {}
    for key, value in td._tensordict.items():
        if isinstance(value, NonTensor):
            extras[key] = value
        else:
            keys.append(key)
            children.append(value)
            ndims.append(getattr(value, "ndim", 0))  # pytree may rebuild with any leaves
    context = (type(td), keys, ndims, extras, td._batch_size, td._device, td._names, td._is_locked)
    return children, context


def _flatten_with_keys(td: TensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    children, context = _flatten(td)
    return [(mapping_key(k), v) for k, v in zip(context[1], children, strict=True)], context


def _unflatten(values: Any, context: Any) -> TensorDict:
    cls, keys, ndims, extras, batch_size, device, names, locked = context
    values = list(values)
    new_bs = batch_size
    for value, ndim in zip(values, ndims, strict=True):
        if isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)):
            n = len(batch_size) + value.ndim - ndim
            new_bs = value.shape[: max(n, 0)]
            break
    for value in values:
        if isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)):
            shape = value.shape
            if shape[: len(new_bs)] != new_bs:  # leaves disagree: keep what they share
                common = 0
                while common < min(len(shape), len(new_bs)) and shape[common] == new_bs[common]:
                    common += 1
                new_bs = new_bs[:common]
    entries = dict(zip(keys, values, strict=True))
    for key, value in extras.items():
        entries[key] = value._with(torch.Size(new_bs), value.device)
    keep_names = names if names is not None and len(names) == len(new_bs) else None
    out: TensorDict = cls._new_unsafe(entries, torch.Size(new_bs), device, keep_names)
    if locked:
        out.lock_()
    return out


def _dense(td: LazyStackedTensorDict) -> TensorDict:
    dense = td._as_dense("pytree (vmap, torch.func) of a LazyStackedTensorDict")
    if td.is_locked:
        dense.lock_()
    return dense


def _flatten_lazy(td: LazyStackedTensorDict) -> tuple[list[Any], Any]:
    """A lazy stack opens as its dense form (vmap must see the stack dim in the leaves);
    members of different structures cannot, and say so."""
    children, context = _flatten(_dense(td))
    return children, (context, td.stack_dim)


def _flatten_lazy_with_keys(td: LazyStackedTensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    children, context = _flatten_with_keys(_dense(td))
    return children, (context, td.stack_dim)


def _tensors_only(values: Any) -> bool:
    """Whether every leaf under ``values`` is a tensor (pytree also rebuilds nodes with
    other leaves, such as vmap's ``in_dims``)."""
    for value in values:
        if isinstance(value, TensorDict):
            if not _tensors_only(value._tensordict.values()):
                return False
        elif isinstance(value, LazyStackedTensorDict):
            if not _tensors_only(value.tensordicts):
                return False
        elif not isinstance(value, (Tensor, NonTensor)):
            return False
    return True


def _unflatten_lazy(values: Any, context: Any) -> Any:
    dense_context, stack_dim = context
    values = list(values)
    dense = _unflatten(values, dense_context)
    ndim = len(dense.batch_size)
    if ndim == 0 or not _tensors_only(values):
        return dense  # no dim to stack along, or pytree rebuilt it with other leaves
    dim = min(stack_dim, ndim - 1)
    if dense.batch_size[dim] == 0:
        return dense
    out = LazyStackedTensorDict(*dense.unbind(dim), stack_dim=dim)
    if dense.is_locked:
        out.lock_()
    return out


def register() -> None:
    """Register TensorDict and LazyStackedTensorDict as pytree nodes (idempotent)."""
    register_pytree_node(
        TensorDict, _flatten, _unflatten, _flatten_with_keys, "tensordict.TensorDict"
    )
    register_pytree_node(
        LazyStackedTensorDict,
        _flatten_lazy,
        _unflatten_lazy,
        _flatten_lazy_with_keys,
        "tensordict.LazyStackedTensorDict",
    )
    let_vmap_take_one_out_dim(lambda x: isinstance(x, (TensorDict, LazyStackedTensorDict)))
