"""Pytree support: TensorDicts open into their tensors for vmap, torch.func and compile.

Unflattening recomputes the batch size: under ``vmap`` the leaves lose the mapped dim,
and outputs gain dims, so the batch size grows or shrinks by the same number of dims
as the leaves did.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._lazy import LazyStackedTensorDict
from tensordict._nontensor import NonTensor
from tensordict._td import TensorDict
from tensordict._torch_compat import mapping_key, register_pytree_node


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


def _flatten_lazy(td: LazyStackedTensorDict) -> tuple[list[Any], Any]:
    """A lazy stack opens as its dense form (vmap must see the stack dim in the leaves);
    members of different structures cannot, and say so."""
    return _flatten(td._as_dense("pytree (vmap, torch.func) of a LazyStackedTensorDict"))


def _flatten_lazy_with_keys(td: LazyStackedTensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    return _flatten_with_keys(td._as_dense("pytree (vmap, torch.func) of a LazyStackedTensorDict"))


def register() -> None:
    """Register TensorDict and LazyStackedTensorDict as pytree nodes (idempotent)."""
    register_pytree_node(
        TensorDict, _flatten, _unflatten, _flatten_with_keys, "tensordict.TensorDict"
    )
    register_pytree_node(
        LazyStackedTensorDict,
        _flatten_lazy,
        _unflatten,
        _flatten_lazy_with_keys,
        "tensordict.LazyStackedTensorDict",
    )
