"""Ragged batch dims of lazy stacks: the ``-1`` a stack reports where its members' batch
sizes differ, and the error for an operation that needs one size there."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch


def ragged_batch_size(call: str, sizes: Sequence[torch.Size], strict: bool) -> torch.Size:
    """The members' batch size, ``-1`` at each dim where they differ (as upstream).

    Members must have one number of batch dims, and ``strict`` refuses any difference.

    >>> import torch
    >>> ragged_batch_size("f", [torch.Size([3, 5]), torch.Size([4, 5])], False)
    torch.Size([-1, 5])
    """
    first = sizes[0]
    for i, bs in enumerate(sizes):
        if len(bs) != len(first) or (strict and bs != first):
            why = "strict_shape=True" if strict else "the members' number of batch dims differ"
            raise RuntimeError(
                f"{call}: batch sizes in tensordicts differs ({why}): member 0 has "
                f"{tuple(first)}, member {i} has {tuple(bs)}"
            )
    return torch.Size([s if all(bs[j] == s for bs in sizes) else -1 for j, s in enumerate(first)])


def ragged_error(call: str, stack: Any, dims: Sequence[int]) -> RuntimeError:
    """The error for ``call`` on a lazy stack (or a TensorDict with nested tensor leaves)
    whose batch dims ``dims`` include a ragged one, naming it and the members' sizes
    there; a ``RuntimeError`` as torch's."""
    bs = stack.batch_size
    dim = next(d for d in dims if bs[d] == -1)
    if stack._stack_parts() is None:  # a -1 given by nested tensor leaves
        return RuntimeError(
            f"{call}: batch dim {dim} is ragged (-1 in batch_size {tuple(bs)}): the elements "
            "of the nested tensor leaves differ in size there; pad them first "
            "(to_padded_tensor)"
        )
    sd = stack.stack_dim
    md = dim if dim < sd else dim - 1
    sizes = [m.batch_size[md] for m in stack.tensordicts]
    return RuntimeError(
        f"{call}: batch dim {dim} of the lazy stack (batch_size {tuple(bs)}) is ragged: its "
        f"members have sizes {sizes} there; index the stack dim {sd} to reach one member, "
        "or pad the members to one size"
    )


def minus_one_error(call: str, bs: torch.Size) -> RuntimeError:
    """The error for ``call`` needing a size at a ragged dim of ``bs`` (where no collection
    is at hand to name the members' sizes): the call, the dim and the batch size."""
    dim = list(bs).index(-1)
    return RuntimeError(
        f"{call}: batch dim {dim} is ragged (-1 in batch_size {tuple(bs)}): this needs one "
        "size there; reach one element first (an index), or pad to one size"
    )


def check_not_ragged(call: str, stack: Any, dims: Sequence[int] | None = None) -> None:
    """Raise :func:`ragged_error` when one of ``dims`` (default: every batch dim) of
    ``stack`` is ragged."""
    bs = stack.batch_size
    if -1 in bs:
        dims = range(len(bs)) if dims is None else dims
        if any(bs[d] == -1 for d in dims):
            raise ragged_error(call, stack, dims)


def ragged_numel(td: Any) -> int:
    """The number of batch elements of a TensorDict whose batch size holds -1: counted on a
    nested tensor leaf, element by element (each element's share of the batch dims)."""
    n = len(td.batch_size)
    for x in td.values(True, True):
        if isinstance(x, torch.Tensor) and x.is_nested:
            return sum(math.prod(e.shape[: n - 1]) for e in x.unbind())
    raise ragged_error(f"{type(td).__name__}.numel", td, range(n))


def padded_batch_size(stack: Any) -> torch.Size:
    """The batch size of ``stack`` with each ragged dim at its longest member's size (the
    batch size of its leaves padded to one shape).

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> padded_batch_size(lazy_stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[5])]))
    torch.Size([2, 5])
    """
    bs = stack.batch_size
    if -1 not in bs:
        return bs  # type: ignore[no-any-return]
    sd = stack.stack_dim
    return torch.Size(
        [
            max(m.batch_size[d if d < sd else d - 1] for m in stack.tensordicts) if s == -1 else s
            for d, s in enumerate(bs)
        ]
    )


def pad_stack(stack: Any, padding: float, call: str) -> Any:
    """``stack.to_padded_tensor(padding)`` for a lazy stack: a dense TensorDict of the
    padded batch size (:func:`padded_batch_size`), each tensor leaf padded to its longest
    member's shape. Non-tensor entries are kept where the batch needs no padding (else
    refused: padding has no value for them), keys only some members hold are refused."""
    from tensordict._td import TensorDict

    partial = stack.partial_keys(True)
    if partial:
        raise KeyError(
            f"{call}: keys {sorted(map(str, partial))} are held by some members only; a "
            "padded TensorDict holds one entry per key (select or exclude them first)"
        )
    leaves = list(stack.keys(True, leaves_only=True))
    entries = {key: stack.get(key, as_padded_tensor=True, padding_value=padding) for key in leaves}
    bs = padded_batch_size(stack)
    known = set(leaves)
    others = [k for k in stack.keys(True, True, is_leaf=_non_tensor_leaf) if k not in known]
    if others and bs != stack.batch_size:
        raise RuntimeError(
            f"{call}: non-tensor entries {sorted(map(str, others))} cannot be padded over "
            f"the ragged batch dims of batch_size {tuple(stack.batch_size)}; exclude them "
            "first"
        )
    for key in others:
        entries[key] = stack.get(key)
    return TensorDict(entries, batch_size=bs, device=stack.device)


def _non_tensor_leaf(cls: type) -> bool:
    from tensordict._nontensor import NonTensor

    return issubclass(cls, (torch.Tensor, NonTensor))


def pad_nested_batch(td: Any, padding: float, call: str) -> Any:
    """``td.to_padded_tensor(padding)`` for a TensorDict whose batch size holds -1 (a dim
    the elements of its nested leaves differ in): each nested leaf padded, the -1 dims at
    the longest element's size (any nested layout)."""
    bs = td.batch_size
    padded = {  # each nested leaf padded once, looked up again by apply below
        id(x): torch.nested.to_padded_tensor(x, padding)
        for x in td.values(True, True)
        if isinstance(x, torch.Tensor) and x.is_nested
    }
    sizes = list(bs)
    for d, s in enumerate(bs):
        if s == -1:
            found = [x.shape[d] for x in padded.values() if x.dim() > d]
            if not found:
                raise RuntimeError(
                    f"{call}: batch dim {d} is ragged (-1 in batch_size {tuple(bs)}) but no "
                    "nested tensor leaf gives its size"
                )
            sizes[d] = max(found)
    return td.apply(lambda x: padded.get(id(x), x), batch_size=sizes)


def padding_mask(td: Any, padded: Any) -> torch.Tensor:
    """The mask of ``padded``'s batch (the batch size with each ragged dim of ``td`` at
    its longest size): True where ``td`` has an element, False where padding was added."""
    parts = td._stack_parts()
    n = len(padded.batch_size)
    if parts is not None:  # a lazy stack: each member's own batch, padded along the stack
        from tensordict._lazy import _padded_stack

        ones = [torch.ones(m.batch_size, dtype=torch.bool) for m in parts[1]]
        return _padded_stack(ones, parts[0], False)
    first = next(x for x in td.values(True, True) if isinstance(x, torch.Tensor) and x.is_nested)
    valid: torch.Tensor = torch.ones_like(first, dtype=torch.bool)
    mask: torch.Tensor = torch.nested.to_padded_tensor(valid, False)
    return mask.flatten(n, -1).any(-1) if mask.dim() > n else mask
