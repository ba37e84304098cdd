"""Advanced indexing of a lazy stack whose members differ: masks and index tensors that
reach the stack dim, or span several dims, answered from the members without densifying."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._index import _normalise


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
