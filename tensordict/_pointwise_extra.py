"""Binary operations with key sets that differ (``default=``) or shapes that broadcast."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from tensordict._batch import BatchDimMismatchError
from tensordict._tensor_utils import expand_right
from tensordict._views import with_non_tensor


def _leaf_keys(coll: Any) -> list[Any]:
    return list(coll.keys(include_nested=True, leaves_only=True, is_leaf=_is_tensor))


def _is_tensor(cls: type) -> bool:
    return issubclass(cls, Tensor)


def binary_with_default(
    self: Any, call: str, name: str, other: Any, default: Any, **kwargs: Any
) -> Any:
    """``self <name> other`` over the union of their tensor keys, ``default`` standing in
    for the side that lacks one; ``default="intersection"`` keeps the shared keys only.
    Non-tensor entries of ``self`` are carried over."""
    fn = getattr(torch, name)
    mine = _leaf_keys(self)
    theirs = _leaf_keys(other)
    their_set = set(theirs)
    if isinstance(default, str) and default != "intersection":
        raise ValueError(
            f"{call}: default must be a tensor, a number or 'intersection', got {default!r}"
        )
    intersection = isinstance(default, str)
    out = self.empty(recurse=True)
    for key, value in self.items(include_nested=True, leaves_only=True, is_leaf=with_non_tensor):
        if not isinstance(value, Tensor):
            out.set(key, value)  # a non-tensor entry
    for key in mine:
        if key in their_set:
            out.set(key, fn(self.get(key), other.get(key), **kwargs))
        elif not intersection:
            out.set(key, fn(self.get(key), default, **kwargs))
    if not intersection:
        my_set = set(mine)
        for key in theirs:
            if key not in my_set:
                out.set(key, fn(default, other.get(key), **kwargs))
    if intersection:
        out = out.filter_empty_()
    return out


def broadcasts_with_batch(self: Any, other: Tensor) -> bool:
    """Whether ``other``'s shape broadcasts with the (non-empty) batch size, dims aligned
    on the left of the leaves; otherwise torch broadcasts it with each leaf."""
    bs = self.batch_size
    if not bs:  # no batch dims to line up with: torch broadcasts with each leaf
        return False
    n = min(len(bs), other.ndim)
    pairs = zip(bs[len(bs) - n :], other.shape[other.ndim - n :], strict=True)
    return all(a == b or 1 in (a, b) for a, b in pairs)


def broadcast_operands(self: Any, call: str, other: Any) -> tuple[Any, Any]:
    """``self`` and ``other`` expanded to their common batch shape: a tensor's dims line up
    with the leading (batch) dims of every leaf, as a collection's batch dims do."""
    try:
        shape = torch.broadcast_shapes(  # type: ignore[no-untyped-call]
            self.batch_size, other.shape
        )
    except RuntimeError:
        raise BatchDimMismatchError(
            f"{call}: the shape {tuple(other.shape)} of the other operand does not broadcast "
            f"with batch_size {tuple(self.batch_size)}"
        ) from None
    if shape != self.batch_size:
        self = self.expand(shape)
    if other.shape != shape:
        other = other.expand(shape)
    return self, other


def broadcast_all(self: Any, call: str, *others: Any) -> tuple[Any, ...]:
    """:func:`broadcast_operands` for several operands (numbers and 0-dim tensors pass)."""
    shaped = [
        o
        for o in others
        if (isinstance(o, Tensor) and o.ndim and broadcasts_with_batch(self, o))
        or (hasattr(o, "batch_size") and o.shape != self.shape)
    ]
    if not shaped:
        return (self, *others)
    try:
        shape = torch.broadcast_shapes(  # type: ignore[no-untyped-call]
            self.batch_size, *[o.shape for o in shaped]
        )
    except RuntimeError:
        raise BatchDimMismatchError(
            f"{call}: the shapes {[tuple(o.shape) for o in shaped]} of the other operands do "
            f"not broadcast with batch_size {tuple(self.batch_size)}"
        ) from None
    out = [self if self.batch_size == shape else self.expand(shape)]
    for o in others:
        shaped_o = any(o is x for x in shaped)
        out.append(o.expand(shape) if shaped_o and o.shape != shape else o)
    return tuple(out)


def expand_to_leaf(other: Tensor, leaf: Tensor) -> Tensor:
    """A batch-shaped tensor with trailing singleton dims to meet ``leaf``'s."""
    if other.ndim == leaf.ndim:
        return other
    return expand_right(other, leaf.shape)


def aligned_leaves(self: Any, call: str, other: Tensor) -> list[Tensor]:
    """``other``, whose dims line up with the batch dims, made to meet each tensor leaf
    (in the order of ``_tensor_leaves``); a stack cuts it along its stack dim, as its
    members' leaves may differ in shape. It must broadcast to the batch size."""
    bs = self.batch_size
    if other.shape != bs:
        try:
            other = other.expand(bs)
        except RuntimeError:
            raise BatchDimMismatchError(
                f"{call}: the shape {tuple(other.shape)} of the other operand does not "
                f"broadcast to batch_size {tuple(bs)}"
            ) from None
    parts = self._stack_parts()
    if parts is None:
        return [expand_to_leaf(other, x) for x in self._tensor_leaves([])]
    dim, members = parts
    out: list[Tensor] = []
    for member, piece in zip(members, other.unbind(dim), strict=True):
        out += aligned_leaves(member, call, piece)
    return out


def batch_aligned(
    self: Any, call: str, fn: Callable[[Tensor, Tensor], Tensor], other: Tensor, reflected: bool
) -> Any:
    """``fn(leaf, other)`` (``fn(other, leaf)`` when ``reflected``) for a tensor whose dims
    line up with the batch dims; both are broadcast to their common batch shape first."""
    src, other = broadcast_operands(self, call, other)
    pairs = zip(src._tensor_leaves([]), aligned_leaves(src, call, other), strict=True)
    out = [fn(y, x) for x, y in pairs] if reflected else [fn(x, y) for x, y in pairs]
    return src._rebuild(iter(out), check=call)
