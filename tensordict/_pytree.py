"""Pytree support: TensorDicts open into their tensors for vmap, torch.func and compile
(``vmap`` takes a plain TensorDict argument or output whole instead: ``_vmap_whole``).

Unflattening recomputes the batch size: under ``vmap`` the leaves lose the mapped dim,
and outputs gain dims, so the batch size grows or shrinks by the same number of dims
as the leaves did. A lazy stack opens as its dense form and closes as a lazy stack
again (along its stack dim, or the last batch dim where vmap took that dim away); one
whose members differ in structure opens into its members instead, which ``tree_map``
handles and ``vmap`` refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from tensordict import _vmap_whole
from tensordict._lazy import LazyStackedTensorDict
from tensordict._nontensor import NonTensor
from tensordict._td import TensorDict
from tensordict._torch_compat import (
    batched_dim,
    is_batched,
    let_vmap_take_one_out_dim,
    let_vmap_take_whole,
    mapping_key,
    register_pytree_node,
    sequence_key,
    unwrapping_vmap_outputs,
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
    tensors = tuple(isinstance(v, Tensor) for v in children)
    batch_size: torch.Size | int = td._batch_size
    if children and torch.compiler.is_dynamo_compiling():
        # dynamo makes a spec a constant (export's output spec), which a symbolic size
        # cannot be (and dynamo shows one as an int): keep the number of dims only, and
        # read the sizes off the leaves when rebuilding
        batch_size = len(td._batch_size)
    context = (
        type(td),
        keys,
        ndims,
        extras,
        batch_size,
        td._device,
        td._names,
        td._is_locked,
        tensors,
    )
    return children, context


def _flatten_with_keys(td: TensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    children, context = _flatten(td)
    return [(mapping_key(k), v) for k, v in zip(context[1], children, strict=True)], context


def _keeps_batch_size(
    values: list[Any], ndims: list[int], tensors: tuple[bool, ...], batch_size: Any
) -> bool:
    """A jacobian from ``torch.func`` keeps the batch size: outside vmap, its leaves that
    were tensors come back with more dims (``(*out_shape, *in_shape)``) or as collections
    (a jacobian per input), all still starting with the batch size."""
    if unwrapping_vmap_outputs():
        return False
    grew = False
    n = len(batch_size)
    for value, ndim, was_tensor in zip(values, ndims, tensors, strict=True):
        if isinstance(value, Tensor):
            if value.ndim < ndim or value.shape[:n] != batch_size:
                return False
            grew = grew or value.ndim > ndim
        elif isinstance(value, (TensorDict, LazyStackedTensorDict)):
            if value.batch_size[:n] != batch_size:
                return False
            grew = grew or was_tensor or value.ndim > ndim
    return grew


def _recomputed_batch_size(
    values: list[Any], ndims: list[int], tensors: tuple[bool, ...], batch_size: Any
) -> Any:
    """The batch size grown or shrunk by as many dims as the leaves were (vmap); a
    collection standing where a tensor was (a jacobian) offers its own batch size."""
    new_bs = batch_size
    for value, ndim, was_tensor in zip(values, ndims, tensors, strict=True):
        if isinstance(value, Tensor) or (
            isinstance(value, (TensorDict, LazyStackedTensorDict)) and not was_tensor
        ):
            n = len(batch_size) + value.ndim - ndim
            new_bs = value.shape[: max(n, 0)]
            break
        if isinstance(value, (TensorDict, LazyStackedTensorDict)):
            new_bs = value.batch_size
            break
    for value in values:
        if isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)):
            shape = value.shape
            if shape[: len(new_bs)] != new_bs:  # leaves disagree: keep what they share
                common = 0
                while common < min(len(shape), len(new_bs)) and shape[common] == new_bs[common]:
                    common += 1
                new_bs = new_bs[:common]
    return new_bs


def _unchanged(values: list[Any], ndims: list[int], batch_size: Any) -> bool:
    """Whether every tensor or collection among ``values`` kept its recorded dims and
    still starts with ``batch_size``: the common rebuild (``tree_map`` of an elementwise
    op, vmap's rebuild of its ``in_dims``), where the batch size stays as it was."""
    n = len(batch_size)
    for value, ndim in zip(values, ndims, strict=True):
        if isinstance(value, Tensor):
            if value.ndim != ndim or value.shape[:n] != batch_size:
                return False
        elif isinstance(value, (TensorDict, LazyStackedTensorDict)) and (
            value.batch_dims != ndim or value.batch_size[:n] != batch_size
        ):
            return False
    return True


def _unflatten(values: Any, context: Any) -> TensorDict:
    cls, keys, ndims, extras, batch_size, device, names, locked, tensors = context
    values = list(values)
    if type(batch_size) is int:  # (flattened under dynamo) the leaves' leading dims
        new_bs = _recomputed_batch_size(values, ndims, tensors, (0,) * batch_size)
    elif _unchanged(values, ndims, batch_size) or _keeps_batch_size(
        values, ndims, tensors, batch_size
    ):
        new_bs = batch_size
    else:
        new_bs = _recomputed_batch_size(values, ndims, tensors, batch_size)
    if type(new_bs) is not torch.Size:
        new_bs = torch.Size(new_bs)
    entries = dict(zip(keys, values, strict=True))
    for key, value in extras.items():
        entries[key] = value._with(new_bs, value.device)
    keep_names = names if names is not None and len(names) == len(new_bs) else None
    if names is not None and len(names) == len(new_bs) + 1:  # inside vmap: drop the mapped
        dim = next((batched_dim(v) for v in values if isinstance(v, Tensor)), None)
        if dim is not None and dim < len(names):
            keep_names = [*names[:dim], *names[dim + 1 :]]
    out: TensorDict = cls._new_unsafe(entries, new_bs, device, keep_names)
    if locked:
        out.lock_()
    return out


_CALL = "pytree (vmap, torch.func) of a LazyStackedTensorDict"


def _dense(td: LazyStackedTensorDict) -> TensorDict | None:
    """The dense form of ``td``, or None when its members differ in structure."""
    if not td.tensordicts or not _tensors_only(td.tensordicts):
        return None  # (pytree also rebuilds nodes with other leaves, e.g. vmap's in_dims)
    try:
        dense = td._as_dense(_CALL)
    except RuntimeError:
        return None
    if td.is_locked:
        dense.lock_()
    return dense


def _flatten_lazy(td: LazyStackedTensorDict) -> tuple[list[Any], Any]:
    """A lazy stack opens as its dense form (vmap must see the stack dim in the leaves),
    or into its members when they differ in structure."""
    dense = _dense(td)
    if dense is None:
        return list(td.tensordicts), (None, td.stack_dim)
    children, context = _flatten(dense)
    return children, (context, td.stack_dim)


def _flatten_lazy_with_keys(td: LazyStackedTensorDict) -> tuple[list[tuple[Any, Any]], Any]:
    dense = _dense(td)
    if dense is None:
        members = [(sequence_key(i), m) for i, m in enumerate(td.tensordicts)]
        return members, (None, td.stack_dim)
    children, context = _flatten_with_keys(dense)
    return children, (context, td.stack_dim)


def _any_batched(values: Any) -> bool:
    for value in values:
        if isinstance(value, TensorDict):
            if _any_batched(value._tensordict.values()):
                return True
        elif isinstance(value, LazyStackedTensorDict):
            if _any_batched(value.tensordicts):
                return True
        elif isinstance(value, Tensor) and is_batched(value):
            return True
    return False


def _restack(members: list[Any], stack_dim: int) -> Any:
    stack = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    if _any_batched(members):  # inside vmap: say which keys or shapes differ
        stack._as_dense(_CALL)
        raise RuntimeError(f"{_CALL}: vmap needs members of one structure")
    return stack


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
    if dense_context is None:  # opened into its members
        return _restack(values, stack_dim)
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
    let_vmap_take_one_out_dim(
        lambda x: isinstance(x, (TensorDict, LazyStackedTensorDict)),
        _name_out_dim,
        _vmap_whole.unbatch,
    )
    let_vmap_take_whole(_vmap_whole.prepare, _vmap_whole.batch)


def _name_out_dim(inside: Any, outside: Any, out_dim: Any) -> Any:
    """A named TensorDict out of vmap: its names, with None at the dim vmap put back."""
    names = getattr(inside, "_names", None)
    if names is None or not isinstance(out_dim, int) or not isinstance(outside, TensorDict):
        return outside
    if len(outside._batch_size) == len(names) + 1:
        dim = out_dim % len(outside._batch_size)
        outside._names = [*names[:dim], None, *names[dim:]]
    return outside


def register_view_node(cls: type, view: Callable[[Any], Any]) -> None:
    """Open an instance of ``cls`` (a ``TensorDictParams``) as the TensorDict ``view(obj)``
    of its own leaves: ``vmap`` maps over them and gives that TensorDict back, as upstream."""
    register_pytree_node(
        cls,
        lambda obj: ([view(obj)], None),
        lambda children, _context: next(iter(children)),
        lambda obj: ([(sequence_key(0), view(obj))], None),
        f"{cls.__module__}.{cls.__qualname__}",
    )
