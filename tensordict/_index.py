"""Indexing over the batch dimensions: ``td[idx]`` reads and ``td[idx] = value`` writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from tensordict._batch import broadcasts_to
from tensordict._mapping import is_plain_mapping
from tensordict._memmap_views import MAPPED_CLASS, index_mapped_into, learn_mapped
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack, as_stack
from tensordict._primitives import CollectionPrimitives, DenseStorage, as_collection
from tensordict._ragged import minus_one_error
from tensordict._torch_compat import disable_subclass_dispatch
from tensordict._unbatched import write_unbatched

if TYPE_CHECKING:
    from typing import Self


def _consumed(item: Any) -> int:
    """How many batch dims one index item consumes."""
    if item is None or item is Ellipsis:
        return 0
    if isinstance(item, Tensor) and item.dtype == torch.bool:
        return item.ndim
    return 1


def _normalise(index: Any, ndim: int) -> tuple[Any, ...]:
    """The index as a tuple with lists, ranges and arrays as tensors and ``...`` expanded."""
    items = index if isinstance(index, tuple) else (index,)
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, range, np.ndarray)):
            if len(item) == 0:
                item = torch.zeros(0, dtype=torch.long)
            else:
                try:
                    item = torch.as_tensor(list(item) if isinstance(item, range) else item)
                except (TypeError, ValueError, RuntimeError) as err:
                    raise IndexError(
                        f"TensorDict[]: index {index!r} holds a sequence that is not a list of "
                        f"ints or bools: {err}"
                    ) from None
        elif isinstance(item, (np.integer, np.bool_)):
            item = item.item()
        out.append(item)
    n_ellipsis = sum(1 for item in out if item is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError(f"TensorDict[]: an index can only have a single ellipsis, got {index!r}")
    if n_ellipsis:
        at = out.index(Ellipsis)
        fill = max(ndim - sum(_consumed(i) for i in out), 0)
        out[at : at + 1] = [slice(None)] * fill
    return tuple(out)


def _basic_names(idx: tuple[Any, ...], names: Any, new_ndim: int) -> Any:
    """Names after an index, by torch's placement of the dims an index makes: a sliced
    dim keeps its name, an int or 0-d tensor drops it, a new (None) dim is unnamed. One
    1-d index tensor or 1-d mask keeps its dim's name; the dims made by a mask of several
    dims, by an index tensor of more dims, or by several index tensors together are
    unnamed (dim names stay unique). Those dims stand where the index tensors stand when
    nothing but ints separates them, else first (as torch puts them). None when the
    count does not come out right."""
    if names is None:
        return None
    out: list[Any] = []  # a name or None per result dim; _MADE marks the index tensors
    dim = 0
    made: list[int] = []  # the dims each index tensor makes
    named: str | None = None  # the name one 1-d long index keeps
    for item in idx:
        if item is None:
            out.append(None)
        elif isinstance(item, slice):
            out.append(names[dim])
            dim += 1
        elif isinstance(item, int):
            dim += 1
        elif isinstance(item, Tensor):
            if item.ndim == 0 and item.dtype != torch.bool:
                dim += 1  # as an int
                continue
            if item.dtype == torch.bool:
                made.append(1)
                named = names[dim] if item.ndim == 1 else None  # (a 1-d mask: one dim)
                dim += item.ndim
            else:
                made.append(item.ndim)
                named = names[dim] if item.ndim == 1 else None
                dim += 1
            if out and out[-1] is _MADE:  # adjacent to the previous index tensor
                continue
            out.append(_MADE)
        else:
            return None
    if made:
        first = out.index(_MADE)
        if out.count(_MADE) > 1:  # index tensors apart: their dims go first, as torch
            out = [n for n in out if n is not _MADE]
            first = 0
        else:
            del out[first]
        if len(made) == 1 and made[0] == 1 and named is not None:
            out.insert(first, named)
        else:
            out[first:first] = [None] * max(made)
    out.extend(names[dim:])
    return out if len(out) == new_ndim else None


_MADE = object()  # (a marker: where the dims that index tensors make go)


class BatchBroadcastError(RuntimeError, ValueError):
    """A collection written at an index whose batch size does not broadcast to it
    (a RuntimeError as upstream raises, and a ValueError as a bad value is)."""


class ZeroDimIndexError(IndexError, RuntimeError):
    """An index into a collection without batch dims (an IndexError as a tensor's, and
    the RuntimeError upstream raises)."""


class StepIndexError(IndexError, ValueError):
    """An index torch refuses with a ValueError (a slice step that is not positive): an
    IndexError as the other invalid indices, and the ValueError torch and upstream raise."""


def check_broadcast(call: str, value_bs: torch.Size, sub_bs: torch.Size) -> None:
    """Refuse a value of batch size ``value_bs`` written where ``sub_bs`` is indexed."""
    if value_bs != sub_bs and not broadcasts_to(value_bs, sub_bs):
        raise BatchBroadcastError(
            f"{call}: Cannot broadcast the tensordict of batch size {tuple(value_bs)} to the "
            f"indexed batch size {tuple(sub_bs)} (batch dimension mismatch: the indexed "
            f"destination TensorDict batch size is {torch.Size(sub_bs)}, which differs from "
            f"the source batch size {torch.Size(value_bs)})"
        )


def _indexed_shape(call: str, index: Any, idx: tuple[Any, ...], bs: torch.Size) -> torch.Size:
    """The batch size after indexing, as torch computes it for a tensor of shape ``bs``."""
    if len(idx) <= len(bs):  # ints within range and forward slices: no probe tensor
        kept: list[int] = []
        for item, n in zip(idx, bs, strict=False):
            if type(item) is int and -n <= item < n:
                continue
            if type(item) is slice and (item.step is None or item.step > 0):
                kept.append(len(range(*item.indices(n))))
                continue
            break
        else:
            return torch.Size([*kept, *bs[len(idx) :]])
    if -1 in bs:  # a ragged dim: no probe of that shape (ints and slices before it pass)
        raise IndexError(str(minus_one_error(f"{call} (index {index!r})", bs)))
    try:
        return torch.zeros(()).expand(bs)[idx].shape
    except (IndexError, TypeError, RuntimeError, ValueError) as err:
        if not bs:
            raise ZeroDimIndexError(
                f"{call}: index {index!r} is not valid for batch_size (): indexing a "
                "tensordict with td.batch_dims==0 is not permitted"
            ) from None
        kind: type[Exception] = IndexError
        if isinstance(err, TypeError):
            kind = TypeError
        elif isinstance(err, ValueError):
            kind = StepIndexError
        raise kind(
            f"{call}: index {index!r} is not valid for batch_size {tuple(bs)}: {err}"
        ) from None


class IndexOps(DenseStorage):
    """``td[idx]`` for every index a tensor of shape ``batch_size`` accepts, and writes,
    on dense storage (the lazy stack has its own index algebra)."""

    __slots__ = ()

    def _index(self, index: Any) -> Self:
        bs = self._batch_size
        if bs:
            cls = type(index)
            if cls is int:
                size = bs[0]
                if not -size <= index < size:
                    raise IndexError(
                        f"TensorDict[]: index {index} is out of bounds for dim 0 of "
                        f"batch_size {tuple(bs)}"
                    )
                names = None if self._names is None else self._names[1:]
                return self._index_with(index, bs[1:], names)
            if cls is slice and (index.step is None or index.step > 0):
                rows = len(range(*index.indices(bs[0])))
                names = None if self._names is None else list(self._names)
                return self._index_with(index, torch.Size([rows, *bs[1:]]), names)
            if cls is Tensor and index.ndim == 1 and index.dtype == torch.long:
                try:  # the fast path: one index_select per leaf
                    return self._select_rows(index, torch.Size([len(index), *bs[1:]]))
                except (IndexError, RuntimeError):
                    pass  # negative or out-of-range rows: the general path explains
        idx = _normalise(index, len(bs))
        new_bs = _indexed_shape("TensorDict[]", index, idx, bs)
        return self._index_with(idx, new_bs, _basic_names(idx, self._names, len(new_bs)))

    def _select_rows(self, rows: Tensor, new_bs: torch.Size) -> Self:
        entries: dict[str, Any] = {}
        # index_select always copies: subclass dispatch (memory-mapped leaves) would only
        # add a per-leaf hop to find that the result is a plain tensor. A leaf of another
        # tensor subclass keeps its own dispatch: it is selected after the context.
        later: list[tuple[dict[str, Any], str]] = []
        with disable_subclass_dispatch():
            out = self._select_into(entries, rows, new_bs, later)
        for store, key in later:
            store[key] = store[key].index_select(0, rows)
        return out

    def _select_into(
        self,
        entries: dict[str, Any],
        rows: Tensor,
        new_bs: torch.Size,
        later: list[tuple[dict[str, Any], str]],
    ) -> Self:
        ndim = len(self._batch_size)
        for key, value in self._tensordict.items():
            cls = type(value)
            if cls is Tensor or MAPPED_CLASS.get(cls):
                entries[key] = value.index_select(0, rows)
            elif isinstance(value, NonTensor):  # (an UnbatchedTensor too: not a row of it)
                entries[key] = value._remap(lambda p: p.index_select(0, rows), new_bs)
            elif isinstance(value, Tensor):  # a foreign subclass, or a class seen first here
                if learn_mapped(cls):
                    entries[key] = value.index_select(0, rows)
                else:
                    entries[key] = value
                    later.append((entries, key))
            elif hasattr(value, "_tensordict"):
                sub_bs = new_bs + value._batch_size[ndim:]
                entries[key] = value._select_into({}, rows, sub_bs, later)
            else:  # a ragged lazy stack indexes itself
                entries[key] = value[rows]
        return self._new_unsafe(entries, new_bs, self._device, self._names)

    def _index_with(self, idx: Any, new_bs: torch.Size, names: Any) -> Self:
        ndim = len(self._batch_size)
        entries: dict[str, Any] = {}
        mapped: list[tuple[str, Tensor]] | None = None  # memory-mapped: indexed together below
        for key, value in self._tensordict.items():
            cls = type(value)
            if cls is Tensor:
                entries[key] = value[idx]
                continue
            if isinstance(value, NonTensor):  # (an UnbatchedTensor too: kept whole)
                entries[key] = value._remap(lambda p: p[idx], new_bs)
                continue
            is_mapped = MAPPED_CLASS.get(cls)
            if is_mapped is None:
                is_mapped = learn_mapped(cls)
            if is_mapped:
                entries[key] = value  # keeps the key's place; replaced by its view below
                if mapped is None:
                    mapped = [(key, value)]
                else:
                    mapped.append((key, value))
            elif isinstance(value, Tensor):
                entries[key] = value[idx]
            elif hasattr(value, "_tensordict"):
                sub_bs = new_bs + value._batch_size[ndim:]
                sub_names = value._names
                if sub_names is not None:  # a nested level keeps its dim names as its parent
                    sub_names = _basic_names(
                        idx if type(idx) is tuple else (idx,), sub_names, len(sub_bs)
                    )
                entries[key] = value._index_with(idx, sub_bs, sub_names)
            else:  # a ragged lazy stack indexes itself
                entries[key] = value[idx]
        if mapped is not None:
            index_mapped_into(entries, mapped, idx)
        return self._new_unsafe(entries, new_bs, self._device, names)

    def _set_at_index(self, index: Any, value: Any) -> None:
        bs = self._batch_size
        idx = _normalise(index, len(bs))
        value = as_collection(value)
        self._write_at(idx, _indexed_shape("TensorDict[]=", index, idx, bs), value, ())

    def _write_nontensor(self, key: str, idx: Any, sub_bs: torch.Size, item: NonTensor) -> None:
        """Write non-tensor values at ``idx``: equal values stay one, others become a stack."""
        current = self._tensordict.get(key)
        if isinstance(item, Tensor) or isinstance(current, Tensor):  # an UnbatchedTensor
            write_unbatched(self, key, current, item)
            return
        if current is None:
            if self._is_locked:
                self._set_path((key,), item, "TensorDict[]=")  # raises: locked
            if isinstance(item, NonTensorData):  # one value: shared until others are written
                self._tensordict[key] = item._with(self._batch_size, self._device)
                return
            blank = torch.zeros(self._batch_size, dtype=torch.long)
            current = NonTensorStack._from_positions([None], blank, self._device)
        if not isinstance(current, NonTensor):
            raise TypeError(
                f"TensorDict[]=: key {key!r} holds a {type(current).__name__}; "
                f"cannot write non-tensor data into it"
            )
        if (
            isinstance(current, NonTensorData)
            and isinstance(item, NonTensorData)
            and current == item
        ):
            return
        self._tensordict[key] = as_stack(current)._written(idx, item, sub_bs)

    def _write_at(self, idx: Any, sub_bs: torch.Size, value: Any, prefix: tuple[str, ...]) -> None:
        ndim = len(self._batch_size)
        if isinstance(value, CollectionPrimitives):
            value = dense = value._as_dense(self._call("__setitem__"))
            if not prefix:
                check_broadcast(f"{type(self).__name__}[]=", dense._batch_size, sub_bs)
        if isinstance(value, CollectionPrimitives) or is_plain_mapping(value):
            items = (
                dense._tensordict.items()
                if isinstance(value, CollectionPrimitives)
                else value.items()
            )
            for key, item in items:
                current = self._tensordict.get(key)
                if isinstance(item, CollectionPrimitives) or is_plain_mapping(item):
                    if current is not None and not isinstance(current, CollectionPrimitives):
                        raise TypeError(
                            f"TensorDict[]=: key {(*prefix, key)!r} holds a "
                            f"{type(current).__name__}; cannot write a nested TensorDict into it"
                        )
                    if current is None:
                        # a new level: the full batch plus the value's own extra batch dims
                        extra_bs = getattr(item, "batch_size", torch.Size())[len(sub_bs) :]
                        self._set_path((key,), {}, "TensorDict[]=")
                        current = self._tensordict[key]
                        current.batch_size = self._batch_size + extra_bs
                    if not hasattr(current, "_tensordict"):  # a ragged lazy stack writes itself
                        current[idx] = item  # type: ignore[index]
                        continue
                    extra = current._batch_size[ndim:]
                    current._write_at(idx, sub_bs + extra, item, (*prefix, key))  # type: ignore[union-attr]
                    continue
                if not isinstance(item, (Tensor, NonTensor)):
                    try:
                        item = torch.as_tensor(item)
                    except (TypeError, ValueError, RuntimeError):
                        item = NonTensorData(item)
                if isinstance(item, NonTensor):
                    self._write_nontensor(key, idx, sub_bs, item)
                    continue
                if type(current) is not Tensor and isinstance(current, NonTensor):
                    write_unbatched(self, key, current, item)
                    continue
                if current is not None and not isinstance(current, Tensor):
                    raise TypeError(
                        f"TensorDict[]=: key {(*prefix, key)!r} holds a "
                        f"{type(current).__name__}; cannot write a tensor into it"
                    )
                if current is None:
                    # lazy preallocation: a missing key gets the full batch size
                    if item.shape[: len(sub_bs)] != sub_bs:
                        raise ValueError(
                            f"TensorDict[]=: shape {tuple(item.shape)} of key "
                            f"{(*prefix, key)!r} does not start with the indexed batch "
                            f"size {tuple(sub_bs)}"
                        )
                    full = (*self._batch_size, *item.shape[len(sub_bs) :])
                    current = torch.zeros(full, dtype=item.dtype, device=item.device)
                    self._set_path((key,), current, "TensorDict[]=")
                    current = self._tensordict[key]
                current[idx] = item
            return
        for leaf in self._tensordict.values():
            if isinstance(leaf, NonTensor):
                continue  # one value for the batch (an UnbatchedTensor too): unchanged
            if isinstance(leaf, Tensor):
                leaf[idx] = value
            elif hasattr(leaf, "_tensordict"):
                leaf._write_at(idx, sub_bs, value, prefix)
            else:  # a ragged lazy stack writes itself
                leaf[idx] = value
