"""Padding ragged entries to one size: the members' leaves stacked padded (or nested),
a stack's padded batch size, ``to_padded_tensor`` of lazy stacks and of TensorDicts whose
batch size holds -1, and the mask of the elements that are not padding."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor


def nested_of(values: list[Tensor]) -> Tensor:
    """A nested tensor of the members' leaves: jagged when only the first dim differs."""
    if all(v.shape[1:] == values[0].shape[1:] for v in values) and values[0].ndim:
        return torch.nested.nested_tensor(values, layout=torch.jagged)
    with warnings.catch_warnings():  # torch warns that the strided layout is a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor(values)


def padded_stack(
    values: list[Tensor], dim: int, padding_value: float, side: str = "right"
) -> Tensor:
    """The members' leaves ``values`` stacked at ``dim``, each padded with
    ``padding_value`` to the longest size of every dim (on the ``side`` given)."""
    ndim = values[0].ndim
    if any(v.ndim != ndim for v in values):
        raise RuntimeError("LazyStackedTensorDict.get: as_padded_tensor needs leaves of one ndim")
    target = [max(v.shape[i] for v in values) for i in range(ndim)]
    padded = []
    for v in values:
        pad: list[int] = []
        for i in reversed(range(ndim)):
            gap = target[i] - v.shape[i]
            pad += [gap, 0] if side == "left" else [0, gap]
        padded.append(torch.nn.functional.pad(v, pad, value=padding_value))
    return torch.stack(padded, dim)


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
        ones = [torch.ones(m.batch_size, dtype=torch.bool) for m in parts[1]]
        return padded_stack(ones, parts[0], False)
    first = next(x for x in td.values(True, True) if isinstance(x, torch.Tensor) and x.is_nested)
    valid: torch.Tensor = torch.ones_like(first, dtype=torch.bool)
    mask: torch.Tensor = torch.nested.to_padded_tensor(valid, False)
    return mask.flatten(n, -1).any(-1) if mask.dim() > n else mask
