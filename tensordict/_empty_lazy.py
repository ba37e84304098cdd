"""``new_empty(..., empty_lazy=True)`` (and the other ``new_*``): lazy stacks, at the root
or nested, become empty lazy stacks of the new batch size instead of dense leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._keys import join_path
from tensordict._primitives import CollectionPrimitives
from tensordict._ragged import ragged_error


def empty_stack(td: Any, shape: torch.Size) -> Any:
    """An empty lazy stack of batch size ``shape`` along ``td``'s stack dim (no keys, one
    empty member per entry of that dim); a dense empty TensorDict when ``shape`` has no
    such dim (as upstream).

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> s = lazy_stack([TensorDict(a=torch.ones(2), batch_size=[2])] * 3, 1)
    >>> e = empty_stack(s, torch.Size([4, 5]))
    >>> e.batch_size, e.stack_dim, len(e.tensordicts), e.is_empty()
    (torch.Size([4, 5]), 1, 5, True)
    """
    from tensordict._td import TensorDict

    sd = td.stack_dim
    if sd >= len(shape):
        return TensorDict(batch_size=shape, device=td.device)
    member = torch.Size([*shape[:sd], *shape[sd + 1 :]])
    members = [TensorDict(batch_size=member, device=td.device) for _ in range(shape[sd])]
    return type(td)(*members, stack_dim=sd)


def new_keeping_lazy(call: str, td: Any, shape: torch.Size, make: Callable[[Any], Any]) -> Any:
    """``make(td)`` (a ``new_*`` of batch size ``shape``) with each lazy stack of ``td``
    (``td`` itself, or nested under dense levels) replaced by :func:`empty_stack` (a
    nested one is then stored as an empty dense level, as any nested stack of members
    that agree). A
    nested stack whose own dims (past ``td``'s batch) are ragged has no size to give the
    new one there: refused (upstream builds members of batch size -1)."""
    if td._stack_parts() is not None:
        return empty_stack(td, shape)
    lazy = _lazy_paths(td, ())
    if not lazy:
        return make(td)
    out = make(td.exclude(*lazy))
    n = len(td.batch_size)
    for path in lazy:
        sub = td.get(path)
        own = range(n, len(sub.batch_size))
        if any(sub.batch_size[d] == -1 for d in own):
            raise ragged_error(f"{call} (key {join_path(path)!r})", sub, own)
        out.set(path, empty_stack(sub, torch.Size([*shape, *sub.batch_size[n:]])))
    return out


def _lazy_paths(td: Any, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The keys of the lazy stacks nested in ``td`` (not looking into them)."""
    found: list[tuple[str, ...]] = []
    for key, value in td.items():
        if isinstance(value, CollectionPrimitives):
            path = (*prefix, key)
            if value._stack_parts() is not None:  # (a LazyStackedTensorDict)
                found.append(path)
            else:
                found += _lazy_paths(value, path)
    return found
