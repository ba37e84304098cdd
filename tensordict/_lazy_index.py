"""Indexing a lazy stack through its members: an index split into the stack dim's item
and the members' index, and masks and index tensors that reach the stack dim, or span
several dims, answered from members that differ without densifying."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from tensordict._index import _normalise
from tensordict._ragged import check_not_ragged


def _full(item: Any) -> bool:
    return type(item) is slice and item == slice(None)


def index_members(stack: Any, index: Any) -> Any:
    """``stack[index]`` for an index made of full slices around one run of adjacent index
    tensors (bool masks or integer tensors), as torch places the indexed dims; None for an
    index of another form (or one torch would refuse: the caller's path raises then).

    The members are never densified, so they may hold different keys: where the index
    reaches the stack dim, each selected element is a view of its member and the result
    stacks them along the indexed dim; elsewhere each member takes the index itself.
    """
    bs = stack.batch_size
    if not stack.tensordicts:
        return None
    idx = _normalise(index, len(bs))
    p = 0
    while p < len(idx) and _full(idx[p]):
        p += 1
    q = p
    while q < len(idx) and isinstance(idx[q], Tensor):
        q += 1
    tensors = list(idx[p:q])
    if not tensors or not all(_full(item) for item in idx[q:]):
        return None
    coords: list[Tensor] = []
    dim = p
    for t in tensors:
        if t.dtype is torch.bool:
            if t.ndim == 0 or tuple(t.shape) != tuple(bs[dim : dim + t.ndim]):
                return None
            coords.extend(t.nonzero().unbind(1))
            dim += t.ndim
        elif t.is_floating_point() or t.is_complex() or dim >= len(bs):
            return None
        else:
            coords.append(t)
            dim += 1
    k = dim - p
    d = stack.stack_dim
    if not p <= d < p + k:  # the stack dim is not indexed: each member takes the index
        lead = (slice(None),) * (p - 1 if d < p else p)
        members = [m[(*lead, *tensors)] for m in stack.tensordicts]
        n_new = len(members[0].batch_size) - (len(bs) - 1)  # dims the index made less those it took
        return stack._restack(members, d if d < p else d + n_new)
    try:
        coords = list(torch.broadcast_tensors(*coords))  # type: ignore[no-untyped-call]
    except RuntimeError:
        return None
    shape = coords[0].shape
    rows: list[list[int]] = []
    for i, c in enumerate(coords):
        size = bs[p + i]
        if c.numel() and (int(c.min()) < -size or int(c.max()) >= size):
            return None
        rows.append((c.reshape(-1) % size).tolist() if c.numel() else [])
    n = coords[0].numel()
    if n == 0:
        return None
    j = d - p
    lead = (slice(None),) * p
    members = stack.tensordicts
    elements = [
        members[rows[j][e]][(*lead, *(rows[i][e] for i in range(k) if i != j))] for e in range(n)
    ]
    if not shape:  # 0-dim index tensors: one element
        return elements[0]
    # (one 1-d index tensor keeps the stack dim's name; dims made together are unnamed)
    out = stack._restack(elements, p, keep_name=k == 1 and len(shape) == 1)
    return out if len(shape) == 1 else out.unflatten(p, shape)


def split_index(stack: Any, index: Any) -> tuple[Any, tuple[Any, ...], int] | None:
    """For ``stack[index]``: (item at the stack dim, index for members, members' kept
    dims before it), or None when the index needs the dense path (None, masks or arrays
    off the stack dim)."""
    idx = _normalise(index, len(stack.batch_size))
    if any(i is None or (isinstance(i, (Tensor, np.ndarray)) and i.ndim > 1) for i in idx):
        return None  # a mask over several dims: the dense path
    idx = idx + (slice(None),) * (len(stack.batch_size) - len(idx))
    if len(idx) > len(stack.batch_size):
        return None
    d = stack.stack_dim
    pre, at, post = idx[:d], idx[d], idx[d + 1 :]
    if not isinstance(at, (int, np.integer, slice, range, list, Tensor, np.ndarray)):
        raise TypeError(
            f"{type(stack).__name__}[]: Invalid index {at!r} at the stack dim {d}; "
            "use an int, a slice, a range, a list or a tensor"
        )
    arrays = [i for i in (*pre, *post) if not isinstance(i, (int, slice))]
    if arrays:
        # one 1-d mask or index off the stack dim, with slices elsewhere: it indexes
        # each member at the same place (its result dim stays where it is)
        if len(arrays) > 1 or not isinstance(at, slice) or not _one_dim_array(arrays[0]):
            return None
        if any(isinstance(i, int) for i in (*pre, *post)):
            return None
        if -1 in stack.batch_size and _is_mask(arrays[0]):  # one mask for every member
            dims = [j for j, i in enumerate(idx) if i is arrays[0]]
            check_not_ragged(f"{type(stack).__name__}[]", stack, dims)
    kept = sum(1 for item in pre if not isinstance(item, int))
    return at, (*pre, *post), kept


def whole_index(index: tuple[Any, ...]) -> bool:
    """Whether a member index selects everything (only full slices)."""
    return all(isinstance(i, slice) and i == slice(None) for i in index)


def false_scalar(item: Any) -> bool:
    if isinstance(item, Tensor):
        return item.dtype == torch.bool and item.ndim == 0 and not bool(item)
    return item is False


def _is_mask(item: Any) -> bool:
    return item.dtype == torch.bool if isinstance(item, Tensor) else item.dtype == np.bool_


def _one_dim_array(item: Any) -> bool:
    return isinstance(item, (Tensor, np.ndarray, list, range)) and np.ndim(item) == 1


def index_new_dims(stack: Any, index: Any) -> Any:
    """``stack[index]`` for an index holding None (new dims of size one): the index
    without them, then each new dim inserted where torch puts it, so the members stay
    apart. None when the index needs the dense path (several index tensors, or one of
    more than one dim, or a bool scalar)."""
    idx = _normalise(index, len(stack.batch_size))
    new_dims: list[int] = []
    rest: list[Any] = []
    pos = 0  # the result dim the next item makes
    arrays = 0
    for item in idx:
        if item is None:
            new_dims.append(pos)
            pos += 1
            continue
        if type(item) is bool or (isinstance(item, Tensor) and item.ndim != 1):
            return None
        if isinstance(item, Tensor):
            arrays += 1
        rest.append(item)
        pos += 0 if isinstance(item, int) else 1
    if not new_dims or arrays > 1:
        return None
    out = stack._index(tuple(rest))
    for d in new_dims:
        out = out.unsqueeze(d)
    return out
