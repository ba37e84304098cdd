"""Functions over lists of TensorDicts: padded and dense stacking, merging, construction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._keys import NestedKey, unravel_key
from tensordict._lazy import LazyStackedTensorDict
from tensordict._nontensor import NonTensor, NonTensorStack
from tensordict._primitives import CollectionPrimitives
from tensordict._stack import _check_members, _dense_stack, _NotDense, plain_stack
from tensordict._td import TensorDict
from tensordict._tensorclass import is_tensorclass
from tensordict._unbatched import UnbatchedTensor, joined_unbatched
from tensordict._views import with_non_tensor

__all__ = [
    "dense_stack_tds",
    "make_tensordict",
    "maybe_dense_stack",
    "merge_tensordicts",
    "pad_sequence",
]


def _leaf_keys(td: Any) -> list[NestedKey]:
    return list(td.keys(include_nested=True, leaves_only=True, is_leaf=with_non_tensor))


def _value(x: Any) -> Any:
    return x.tolist() if isinstance(x, NonTensor) else x


def _padding_values(
    call: str, padding_value: float | Mapping[NestedKey, float], keys: list[NestedKey]
) -> dict[NestedKey, float]:
    """Each leaf's padding value: one for all, or a mapping by key naming only leaves."""
    if not isinstance(padding_value, Mapping):
        return dict.fromkeys(keys, padding_value)
    by_key: dict[NestedKey, float] = {unravel_key(k): v for k, v in padding_value.items()}
    unknown = [k for k in by_key if k not in keys]
    if unknown:
        raise KeyError(
            f"{call}: padding_value names keys {unknown} that no entry has; keys: {keys}"
        )
    return by_key


def pad_sequence(
    list_of_tensordicts: Sequence[Any],
    pad_dim: int = 0,
    padding_value: float | Mapping[NestedKey, float] = 0.0,
    out: Any = None,
    return_mask: bool | NestedKey = False,
    padding_side: str = "right",
    *,
    device: Any = None,
) -> Any:
    """Stack TensorDicts whose entries differ in length along ``pad_dim``, padding the short
    ones with ``padding_value`` (or, from a mapping, each entry's value by key; 0 for the
    keys it does not name). ``pad_dim`` counts the dims of each entry; where it is a
    batch dim, the batch size grows to the longest length. ``padding_side="left"`` puts
    the padding before the values.

    With ``return_mask`` (True, or the key to use instead of ``"masks"``), a tensordict of
    bool masks marks the valid positions of each entry (shape: batch size, plus the padded
    length when ``pad_dim`` is past the batch dims). ``out`` receives the result in place.

    >>> import torch
    >>> from tensordict import TensorDict, pad_sequence
    >>> tds = [TensorDict({"a": torch.ones(n, 2)}, [n]) for n in (1, 3)]
    >>> out = pad_sequence(tds, return_mask=True)
    >>> out.batch_size, out["a"][0, :, 0].tolist(), out["masks", "a"].tolist()
    (torch.Size([2, 3]), [1.0, 0.0, 0.0], [[True, False, False], [True, True, True]])
    """
    call = "pad_sequence"
    tds = list(list_of_tensordicts)
    if not tds:
        raise RuntimeError(f"{call}: list_of_tensordicts is empty")
    tds = _check_members(call, tds)
    if return_mask is not False and is_tensorclass(tds[0]):
        raise RuntimeError(
            f"{call}: return_mask needs TensorDicts; tensorclasses have no field for the masks "
            "(convert them with to_tensordict() first)"
        )
    masks_key: NestedKey = "masks" if isinstance(return_mask, bool) else unravel_key(return_mask)
    if padding_side not in ("left", "right"):
        raise ValueError(f"{call}: padding_side must be 'left' or 'right', got {padding_side!r}")
    keys = _leaf_keys(tds[0])
    for i, td in enumerate(tds[1:], 1):
        if set(_leaf_keys(td)) != set(keys):
            raise KeyError(f"{call}: TensorDict {i} does not hold the keys of TensorDict 0")
    fill = _padding_values(call, padding_value, keys)

    def widths(n: int, pos: int, short: int) -> list[int]:  # torch's pad spec for dim pos
        side = [short, 0] if padding_side == "left" else [0, short]
        return [0, 0] * (n - pos - 1) + side

    bs0 = list(tds[0].batch_size)
    ndim = len(bs0)
    entries: dict[NestedKey, Any] = {}
    masks: dict[NestedKey, Any] = {}
    grows_batch = True
    longest = 0
    for key in keys:
        values = [td.get(key) for td in tds]
        if isinstance(values[0], UnbatchedTensor):  # shared by every element: not padded
            entries[key] = joined_unbatched(values, values[0].batch_size, call)
            continue
        if isinstance(values[0], NonTensor):
            raw = [_value(v) for v in values]
            if ndim and pad_dim % ndim == 0 and all(isinstance(r, list) for r in raw):
                # batched values of different lengths: the pad slots hold None
                width = max(len(r) for r in raw)
                if padding_side == "left":
                    raw = [[None] * (width - len(r)) + r for r in raw]
                else:
                    raw = [r + [None] * (width - len(r)) for r in raw]
            entries[key] = NonTensorStack.from_list(raw)
            continue
        if values[0].ndim == 0:
            raise RuntimeError(f"{call}: cannot pad the scalar entry {key!r}")
        pos = pad_dim % values[0].ndim
        if pos >= ndim:
            grows_batch = False
        length = max(v.shape[pos] for v in values)
        longest = max(longest, length)
        padded = []
        for v in values:
            spec = widths(v.ndim, pos, length - v.shape[pos])
            padded.append(torch.nn.functional.pad(v, spec, value=fill.get(key, 0.0)))
        entries[key] = torch.stack(padded)
        if return_mask:
            mask_ndim = ndim + 1 if pos >= ndim else ndim
            rows = []
            for v in values:
                valid = torch.ones(v.shape[:mask_ndim], dtype=torch.bool, device=v.device)
                spec = widths(mask_ndim, pos, length - v.shape[pos])
                rows.append(torch.nn.functional.pad(valid, spec, value=False))
            masks[key] = torch.stack(rows)
    new_bs = list(bs0)
    if grows_batch and ndim:
        new_bs[pad_dim % ndim] = longest
    result = TensorDict({}, batch_size=[len(tds), *new_bs], device=device)
    for key, value in entries.items():
        result.set(key, value)
    if return_mask:
        mask_root = masks_key if isinstance(masks_key, tuple) else (masks_key,)
        for key, mask in masks.items():
            result.set((*mask_root, *((key,) if isinstance(key, str) else key)), mask)
    if out is not None:
        out.update(result)
        return out
    if is_tensorclass(tds[0]):
        fields = {str(key): result.get(key) for key in result.keys()}  # noqa: SIM118
        return type(tds[0])(**fields, batch_size=result.batch_size, device=device)
    return result


def merge_tensordicts(
    *tensordicts: Any,
    callback_exist: Callable[..., Any] | Mapping[NestedKey, Callable[..., Any]] | None = None,
) -> Any:
    """One TensorDict holding every leaf of ``tensordicts``; for a key several hold, the
    first value wins, unless ``callback_exist`` (one callable, or one per key) is given and
    every TensorDict holds the key: then ``callback_exist(*values)`` is stored.

    >>> import torch
    >>> from tensordict import TensorDict, merge_tensordicts
    >>> a = TensorDict({"x": torch.tensor(1), "n": {"y": torch.tensor(2)}})
    >>> b = TensorDict({"x": torch.tensor(10), "z": torch.tensor(3)})
    >>> sorted(merge_tensordicts(a, b).keys(include_nested=True, leaves_only=True), key=str)
    [('n', 'y'), 'x', 'z']
    >>> merge_tensordicts(a, b, callback_exist=lambda *v: sum(v))["x"].item()
    11
    """
    if len(tensordicts) < 2:
        raise RuntimeError(
            f"merge_tensordicts: pass at least 2 TensorDicts, got {len(tensordicts)}"
        )
    first = tensordicts[0]
    out = TensorDict({}, batch_size=first.batch_size, device=first.device)
    seen: set[NestedKey] = set()
    for td in tensordicts:
        for key in _leaf_keys(td):
            if key in seen:
                continue
            seen.add(key)
            values = [other.get(key, None) for other in tensordicts]
            callback = (
                callback_exist.get(key) if isinstance(callback_exist, Mapping) else callback_exist
            )
            if callback is not None and all(v is not None for v in values):
                out.set(key, callback(*values))
            else:
                out.set(key, next(v for v in values if v is not None))
    return out


def dense_stack_tds(td_list: Sequence[Any] | LazyStackedTensorDict, dim: int | None = None) -> Any:
    """Stack TensorDicts into one dense TensorDict when they share one structure (keys
    and entry shapes), and into a ``LazyStackedTensorDict`` otherwise, as upstream.

    A ``LazyStackedTensorDict`` is densified along its own stack dim.

    >>> import torch
    >>> from tensordict import TensorDict, dense_stack_tds, lazy_stack
    >>> tds = [TensorDict({"a": torch.full((2,), float(i))}, [2]) for i in range(3)]
    >>> out = dense_stack_tds(lazy_stack(tds, 1))
    >>> type(out).__name__, out.batch_size
    ('TensorDict', torch.Size([2, 3]))
    """
    call = "dense_stack_tds"
    if isinstance(td_list, LazyStackedTensorDict):
        if dim is None:
            dim = td_list.stack_dim
        members = list(td_list.tensordicts)
    else:
        members = list(td_list)
    members = _check_members(call, members)
    members = [dense_stack_tds(m) if isinstance(m, LazyStackedTensorDict) else m for m in members]
    n = len(members[0].batch_size)
    dim = 0 if dim is None else dim
    if not -n - 1 <= dim <= n:
        raise IndexError(f"{call}: dim {dim} is out of range for {n + 1} dims")
    try:
        return _dense_stack(members, dim % (n + 1))
    except _NotDense:  # keys or entry shapes differ
        return LazyStackedTensorDict(*members, stack_dim=dim % (n + 1))


def maybe_dense_stack(items: Sequence[Any], dim: int = 0) -> Any:
    """Stack densely when the items share one structure, lazily otherwise (tensors too).

    >>> import torch
    >>> from tensordict import TensorDict, maybe_dense_stack
    >>> same = [TensorDict({"a": torch.zeros(2)}) for _ in range(2)]
    >>> type(maybe_dense_stack(same)).__name__
    'TensorDict'
    >>> maybe_dense_stack([torch.zeros(2), torch.ones(2)]).shape
    torch.Size([2, 2])
    >>> maybe_dense_stack([TensorDict(batch_size=[2]), TensorDict(batch_size=[3])]).batch_size
    torch.Size([2, -1])
    """
    items = list(items)
    if items and isinstance(items[0], Tensor):
        return torch.stack(items, dim)
    if any(td.batch_size != items[0].batch_size for td in items):  # ragged: lazily, as upstream
        return LazyStackedTensorDict(*items, stack_dim=dim)
    return plain_stack(items, dim)


def make_tensordict(
    input_dict: Mapping[NestedKey, Any] | None = None,
    batch_size: Any = None,
    device: Any = None,
    auto_batch_size: bool | None = None,
    **kwargs: Any,
) -> TensorDict:
    """A TensorDict from a dict and/or keyword entries. The batch size is ``batch_size``, or
    with ``auto_batch_size=True`` the leading shape the entries share; by default it is empty
    (as upstream).

    >>> import torch
    >>> from tensordict import make_tensordict
    >>> td = make_tensordict(a=torch.zeros(3, 4), b={"c": torch.zeros(3)}, auto_batch_size=True)
    >>> td.batch_size
    torch.Size([3])
    >>> make_tensordict({"a": torch.zeros(3)}).batch_size
    torch.Size([])
    """
    if input_dict is None:
        data: dict[Any, Any] = {}
    elif isinstance(input_dict, CollectionPrimitives):  # a TensorDict: its entries
        data = input_dict.to_dict()  # type: ignore[attr-defined]
    else:
        data = dict(input_dict)
    overlap = [k for k in kwargs if k in data]
    if overlap:
        raise ValueError(
            f"make_tensordict: keys given twice (in input_dict and as keywords): {overlap}"
        )
    data.update(kwargs)
    if batch_size is None and not auto_batch_size:
        batch_size = []
    return TensorDict.from_dict(
        data, batch_size=batch_size, device=device, auto_batch_size=auto_batch_size
    )
