"""``densify(layout=...)``: one dense TensorDict from a ragged lazy stack, padded or nested."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from tensordict._nontensor import NonTensor
from tensordict._views import with_non_tensor


def densify(td: Any, layout: torch.layout, call: str) -> Any:
    """``td`` with every lazy stack (at any level) made dense: leaves of one shape are
    stacked, ragged ones joined into a nested tensor of ``layout`` (``torch.strided`` or
    ``torch.jagged``); a key some members lack has no rows there (non-tensor entries:
    None), as upstream; names and empty nested levels are kept."""
    if layout not in (torch.strided, torch.jagged):
        raise ValueError(f"{call}: layout must be torch.strided or torch.jagged, got {layout}")
    parts = td._stack_parts()
    if parts is None:
        entries = {
            key: value if isinstance(value, (Tensor, NonTensor)) else densify(value, layout, call)
            for key, value in td._tensordict.items()
        }
        same = zip(entries.values(), td._tensordict.values(), strict=True)
        if all(new is old for new, old in same):
            return td  # (no lazy stack below: the collection itself, as upstream)
        return td._new_unsafe(entries, td._batch_size, td._device, td._names)
    dim, members = parts
    dense_members = [densify(m, layout, call) for m in members]
    if all(new is old for new, old in zip(dense_members, members, strict=True)):
        stacked = td
    else:
        stacked = type(td)(*dense_members, stack_dim=dim)
    members = dense_members
    try:
        return stacked._as_dense(call)
    except RuntimeError as err:
        if dim != 0:  # (a NotImplementedError is a RuntimeError: both callers' catches hold)
            raise NotImplementedError(
                f"{err}; nested tensors for the leaves that differ need the stack dim 0, got {dim}"
            ) from None
    from tensordict._td import TensorDict

    keys: dict[Any, None] = {}
    for m in members:
        keys.update(dict.fromkeys(m.keys(True, is_leaf=with_non_tensor)))
    tree: dict[str, Any] = {}
    for key in keys:
        path = key if isinstance(key, tuple) else (key,)
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        values = [m.get(key, None) for m in members]
        present = [v for v in values if v is not None]
        if all(isinstance(v, Tensor) for v in present):
            # a member lacking the key: zero rows there (upstream's empty element)
            empty = present[0].new_zeros((0, *present[0].shape[1:]))
            filled = [empty if v is None else v for v in values]
            # stored as built: a strided nested tensor has no shape to check against the batch
            node[path[-1]] = _join(filled, dim, layout, call, key)
        elif all(isinstance(v, NonTensor) for v in present):
            node[path[-1]] = _stack_non_tensor(values, members, dim, call, key)
        else:  # a nested level (kept, even empty); its leaves are keys of their own
            node.setdefault(path[-1], {})
    names = td.names
    return _build(TensorDict, tree, td.batch_size, td.device, names if any(names) else None)


def _stack_non_tensor(values: list[Any], members: list[Any], dim: int, call: str, key: Any) -> Any:
    """The non-tensor entries of the members at ``key``, stacked (None where a member lacks
    it); members of different batch sizes cannot hold one stack."""
    from tensordict._nontensor import NonTensorData

    if any(m.batch_size != members[0].batch_size for m in members):
        raise NotImplementedError(
            f"{call}: non-tensor entry {key!r} of members with different batch sizes "
            f"{[tuple(m.batch_size) for m in members]} has no dense form"
        )
    bs = members[0].batch_size
    entries: list[Any] = [NonTensorData(None, bs) if v is None else v for v in values]
    return torch.stack(entries, dim)


def _build(
    cls: Any, tree: dict[str, Any], batch_size: torch.Size, device: Any, names: Any = None
) -> Any:
    entries = {
        k: _build(cls, v, batch_size, device) if isinstance(v, dict) else v for k, v in tree.items()
    }
    return cls._new_unsafe(entries, batch_size, device, names)


def _join(values: list[Tensor], dim: int, layout: torch.layout, call: str, key: Any) -> Tensor:
    if all(v.shape == values[0].shape for v in values):
        return torch.stack(values, dim)
    with warnings.catch_warnings():  # torch warns that the strided layout is a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor(values, layout=layout)
