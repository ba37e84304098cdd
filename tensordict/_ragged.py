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
