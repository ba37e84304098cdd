"""Stacking and concatenating TensorDicts, and the ``torch.*`` functions that dispatch to them.

The stacking rule: TensorDicts of identical structure (the same keys at every level,
tensor leaves of the same shapes, nested TensorDicts of the same batch sizes, non-tensor
entries at the same keys) stack into a dense TensorDict. Anything else (other key sets,
leaves of other shapes) gives a LazyStackedTensorDict that keeps its members. Non-tensor
entries: equal values stay one NonTensorData, different values become a NonTensorStack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._modules import params_view
from tensordict._nontensor import (
    MetaData,
    NonTensor,
    NonTensorData,
    NonTensorStack,
    as_stack,
    stack_of_members,
)
from tensordict._primitives import CollectionPrimitives
from tensordict._switches import capture_non_tensor_stack, set_lazy_legacy
from tensordict._unbatched import joined_unbatched

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase


def _check_members(call: str, tds: Sequence[Any]) -> list[Any]:
    """``tds`` as a list of TensorDicts (a ``TensorDictParams`` is taken as the TensorDict
    of its own leaves); a TypeError for anything else."""
    if not tds:
        raise ValueError(f"{call}: expected a non-empty sequence of TensorDicts")
    members = list(tds)
    for i, td in enumerate(members):
        if not isinstance(td, CollectionPrimitives):
            members[i] = params_view(td)
            if members[i] is None:
                raise TypeError(
                    f"{call}: expected TensorDicts, got {type(td).__name__} at position {i}"
                )
    return members


def same_structure(tds: Sequence[Any]) -> bool:
    """Whether the TensorDicts can be stacked densely (see the module docstring)."""
    if any(td._stack_parts() is not None for td in tds):  # lazy stacks: by their dense form
        try:
            tds = [td._as_dense("same_structure") for td in tds]
        except RuntimeError:
            return False
    first = tds[0]
    keys = first._tensordict.keys()
    for td in tds[1:]:
        if td._tensordict.keys() != keys or td._batch_size != first._batch_size:
            return False
    for key, value in first._tensordict.items():
        others = [td._tensordict[key] for td in tds[1:]]
        if isinstance(value, Tensor):
            if not all(isinstance(o, Tensor) and o.shape == value.shape for o in others):
                return False
        elif isinstance(value, NonTensor):
            if not all(isinstance(o, NonTensor) for o in others):
                return False
        elif not all(isinstance(o, CollectionPrimitives) for o in others) or not same_structure(
            [value, *others]
        ):
            return False
    return True


def _all_equal(values: list[NonTensor]) -> bool:
    first = values[0]
    return all(isinstance(v, NonTensorData) for v in values) and all(v == first for v in values[1:])


def _joined(values: list[NonTensor], join: Any, dim: int) -> NonTensorStack:
    """One NonTensorStack of all values, positions joined by ``torch.stack``/``torch.cat``."""
    pool: list[Any] = []
    positions = []
    for s in map(as_stack, values):
        positions.append(s.positions + len(pool))
        pool.extend(s.values)
    return NonTensorStack._from_positions(pool, join(positions, dim), values[0].device)


def _stack_nontensor(values: list[NonTensor], dim: int, new_bs: torch.Size) -> NonTensor:
    # one value per element, as upstream; equal values stay one NonTensorData under
    # set_capture_non_tensor_stack(True) (MetaData always stays one)
    if any(isinstance(v, Tensor) for v in values):
        return joined_unbatched(values, new_bs, "torch.stack")
    flag = capture_non_tensor_stack(allow_none=True)
    capture = flag is True or all(isinstance(v, MetaData) for v in values)
    if capture and _all_equal(values):
        return values[0]._with(new_bs, values[0].device)
    members = stack_of_members(values, dim, values[0].device)
    return members if members is not None else _joined(values, torch.stack, dim)


def _cat_nontensor(values: list[NonTensor], dim: int, new_bs: torch.Size) -> NonTensor:
    if any(isinstance(v, Tensor) for v in values):
        return joined_unbatched(values, new_bs, "torch.cat")
    if _all_equal(values):  # equal values stay one, as upstream's cat keeps them
        return values[0]._with(new_bs, values[0].device)
    return _joined(values, torch.cat, dim)


class _NotDense(Exception):
    """The members differ in structure: the stack must be lazy."""


def _dense_stack(tds: Sequence[Any], dim: int, *, one_class: bool = False) -> TensorDictBase:
    """Stack members of one structure and batch size (of the first's class when
    ``one_class``); raises _NotDense as soon as they differ.

    The structure is checked as the columns are built (same key count, every key present,
    torch.stack refusing other shapes), so the common case walks the members once.
    Whether a member is stored densely (``_stack_parts() is None``) is a property of its
    class: asked of the first member and of each member of another class.
    """
    first = tds[0]
    bs = first._batch_size
    new_bs = torch.Size([*bs[:dim], len(tds), *bs[dim:]])
    if first._stack_parts() is not None:
        raise _NotDense
    cls, store, device = type(first), first._tensordict, first._device
    n_keys = len(store)
    stores = []
    for td in tds:  # one pass: class, batch size, key count, common device
        if type(td) is not cls and (one_class or td._stack_parts() is not None):
            raise _NotDense
        if td._batch_size != bs or len(other := td._tensordict) != n_keys:
            raise _NotDense
        if td._device != device:
            device = None
        stores.append(other)
    entries: dict[str, Any] = {}
    for key, value in store.items():
        try:
            column = [s[key] for s in stores]
        except KeyError:
            raise _NotDense from None
        if isinstance(value, NonTensor):  # (an UnbatchedTensor too)
            if not all(isinstance(v, NonTensor) for v in column):
                raise _NotDense
            entries[key] = _stack_nontensor(column, dim, new_bs)
        elif isinstance(value, Tensor):
            try:
                entries[key] = torch.stack(column, dim)
            except (RuntimeError, TypeError):
                raise _NotDense from None
        else:
            if not all(isinstance(v, CollectionPrimitives) for v in column):
                raise _NotDense
            if any(v._batch_size != value._batch_size for v in column):
                raise _NotDense  # the parent stacks lazily
            try:  # a nested level that differs becomes a lazy stack under a dense parent
                entries[key] = _dense_stack(column, dim)
            except _NotDense:
                restacked = _member_wise(column, dim)
                entries[key] = stack(column, dim) if restacked is None else restacked
    names = None
    if first._names is not None and all(td._names == first._names for td in tds):
        names = [*first._names[:dim], None, *first._names[dim:]]
    out: TensorDictBase = first._new_unsafe(entries, new_bs, device, names)
    return out


def _member_wise(column: list[Any], dim: int) -> Any:
    """Lazy stacks along one dim with as many members, stacked along ``dim``: a lazy stack
    along that dim (shifted) of the stacks of their corresponding members, as upstream
    (``result.tensordicts[i]`` holds what member ``i`` of each holds, keeping its own
    keys); None for anything else, and (as upstream) when the stacks differ in their
    common keys or in how many leaves their members hold: they stay whole, as members."""
    parts = [v._stack_parts() for v in column]
    first = parts[0]
    if first is None or any(
        p is None or p[0] != first[0] or len(p[1]) != len(first[1]) for p in parts
    ):
        return None
    if len({frozenset(v.keys(True, True)) for v in column}) > 1 or (
        len({sum(len(m.keys(True, True)) for m in p[1]) for p in parts}) > 1
    ):
        return None
    from tensordict._lazy import LazyStackedTensorDict

    inner = first[0]
    members = [
        stack([p[1][i] for p in parts], dim if dim <= inner else dim - 1)
        for i in range(len(first[1]))
    ]
    return LazyStackedTensorDict(*members, stack_dim=inner + 1 if dim <= inner else inner)


def stack(tds: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """``torch.stack`` of TensorDicts: :func:`plain_stack`, or under upstream's legacy
    mode (``set_lazy_legacy(True)``) a lazy stack of the TensorDicts themselves.

    >>> import torch
    >>> from tensordict import TensorDict, set_lazy_legacy
    >>> tds = [TensorDict({"a": torch.ones(3)}, [3]) for _ in range(2)]
    >>> with set_lazy_legacy(True):
    ...     type(torch.stack(tds)).__name__
    'LazyStackedTensorDict'
    """
    if out is None and set_lazy_legacy._state is True:
        from tensordict._lazy import LazyStackedTensorDict

        return LazyStackedTensorDict.lazy_stack(list(tds), dim)
    return plain_stack(tds, dim, out=out)


def plain_stack(tds: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """Stack TensorDicts along a new batch dim: dense when they share one structure
    (written into the leaves of ``out`` when given, which is returned).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict({"a": torch.ones(3, 4)}, [3]) for _ in range(2)]
    >>> torch.stack(tds, 1).batch_size
    torch.Size([3, 2])
    >>> mixed = [TensorDict({"a": torch.ones(2)}), TensorDict({"b": torch.ones(2)})]
    >>> type(torch.stack(mixed)).__name__
    'LazyStackedTensorDict'
    >>> out = torch.stack(tds, 0).zero_()
    >>> torch.stack(tds, 0, out=out) is out, out["a"].sum().item()
    (True, 24.0)
    """
    if out is not None:
        return _write_out("torch.stack", out, plain_stack(tds, dim))
    tds = list(tds)
    tried = False
    if tds and isinstance(tds[0], CollectionPrimitives):  # the common case, in one pass
        n = len(tds[0]._batch_size)
        if -n - 1 <= dim <= n:
            try:
                return _dense_stack(tds, dim % (n + 1), one_class=True)
            except _NotDense:  # below: the error, or a lazy stack
                tried = True
    members = _check_members("torch.stack", tds)  # (params taken as their leaves, or raises)
    if any(a is not b for a, b in zip(members, tds, strict=True)):
        tried = False  # (the one-pass attempt saw the params themselves)
    tds = members
    bs = tds[0]._batch_size
    for i, td in enumerate(tds):
        if td._batch_size != bs:
            raise RuntimeError(
                f"torch.stack: TensorDicts must share a batch size; got {tuple(bs)} at "
                f"position 0 and {tuple(td._batch_size)} at position {i}"
            )
    n = len(bs)
    if not -n - 1 <= dim <= n:
        raise IndexError(f"torch.stack: dim {dim} is out of range for {n + 1} dims")
    dim %= n + 1
    if not tried and all(type(td) is type(tds[0]) for td in tds):
        try:
            return _dense_stack(tds, dim)
        except _NotDense:
            pass
    restacked = _member_wise(tds, dim)
    if restacked is not None:
        return restacked
    from tensordict._lazy import LazyStackedTensorDict

    return LazyStackedTensorDict(tds, stack_dim=dim)


def cat(tds: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """Concatenate TensorDicts with the same keys along an existing batch dim (written
    into the leaves of ``out`` when given, which is returned).

    With a lazy stack among them the result is a lazy stack (dense ones are cut along its
    stack dim); ``out`` receives the result in place and is returned.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict({"a": torch.ones(3, 4)}, [3, 4]) for _ in range(2)]
    >>> torch.cat(tds, 0).batch_size
    torch.Size([6, 4])
    """
    tds = list(tds)
    if not tds or not isinstance(tds[0], CollectionPrimitives):
        tds = _check_members("torch.cat", tds)  # (params taken as their leaves, or raises)
    # dense or lazy storage is a property of a class: asked once of the first member's
    # class, and of each member of another class
    first = tds[0]
    cls = type(first)
    lazy = first._stack_parts() is not None
    as_is = not lazy and first._as_dense("torch.cat") is first  # its class needs no conversion
    for td in tds:
        if type(td) is not cls:
            if not isinstance(td, CollectionPrimitives):  # params as their leaves, or raises
                return cat(_check_members("torch.cat", tds), dim, out=out)
            as_is = False
            lazy = lazy or td._stack_parts() is not None
    if lazy:
        result = _lazy_cat(tds, dim)
    else:
        result = _cat_dense(tds if as_is else [td._as_dense("torch.cat") for td in tds], dim)
    if out is None:
        return result
    return _write_out("torch.cat", out, result)


def _write_out(call: str, out: Any, result: Any) -> Any:
    """Copy ``result`` into ``out``'s leaves (the ``out=`` of stack and cat); ``out``
    needs its batch size and every key of ``result``."""
    if not isinstance(out, CollectionPrimitives):
        raise TypeError(f"{call}: out must be a TensorDict, got {type(out).__name__}")
    if out._batch_size != result._batch_size:
        raise RuntimeError(
            f"{call}: out has batch_size {tuple(out._batch_size)}, the result "
            f"{tuple(result._batch_size)}"
        )
    have = set(out.keys(True, True))
    missing = [k for k in result.keys(True, True) if k not in have]
    if missing:
        raise KeyError(f"{call}: out lacks the keys {missing} of the result")
    return out.update_(result)


def _lazy_cat(tds: list[Any], dim: int) -> Any:
    """Concatenate when some are lazy stacks: along their stack dim the members are joined,
    along another dim the members are concatenated pairwise (one count of members)."""
    from tensordict._lazy import LazyStackedTensorDict

    n = len(tds[0]._batch_size)
    if not -n <= dim < n:
        raise IndexError(f"torch.cat: dim {dim} is out of range for {n} batch dims")
    dim %= n
    stack_dim = next(td._stack_parts()[0] for td in tds if td._stack_parts() is not None)
    groups = []
    for td in tds:
        parts = td._stack_parts()
        if parts is not None and parts[0] == stack_dim:
            groups.append(list(parts[1]))
        else:
            groups.append(list(td.unbind(stack_dim)))
    if dim == stack_dim:
        members = [m for g in groups for m in g]
        bs = list(tds[0]._batch_size)
        bs[dim] = sum(td._batch_size[dim] for td in tds)
        return LazyStackedTensorDict(*members, stack_dim=stack_dim, batch_size=bs)
    counts = {len(g) for g in groups}
    if len(counts) != 1:
        raise RuntimeError(
            f"torch.cat: along dim {dim} (not the stack dim {stack_dim}) the lazy stacks must "
            f"hold the same number of stacked tensordicts; got {[len(g) for g in groups]}"
        )
    inner = dim if dim < stack_dim else dim - 1
    members = [cat(list(column), inner) for column in zip(*groups, strict=True)]
    return LazyStackedTensorDict(*members, stack_dim=stack_dim)


def _cat_dense(tds: list[Any], dim: int) -> TensorDictBase:
    n = len(tds[0]._batch_size)
    if n == 0:
        raise RuntimeError("torch.cat: TensorDicts with batch_size=[] cannot be concatenated")
    if not -n <= dim < n:
        raise IndexError(f"torch.cat: dim {dim} is out of range for {n} batch dims")
    dim %= n
    return _dense_cat(tds, dim, ())


def _mixed_kinds(prefix: tuple[str, ...], key: str, column: list[Any]) -> TypeError:
    return TypeError(
        f"torch.cat: key {'/'.join((*prefix, key))!r} holds "
        f"{sorted({type(v).__name__ for v in column})} across the TensorDicts"
    )


def _where(prefix: tuple[str, ...]) -> str:
    return "/".join(prefix) or "the top level"


def _check_cat(tds: Sequence[Any], dim: int, prefix: tuple[str, ...]) -> None:
    """Raise the first mismatch of ``tds``: key counts first (the clearer error), then
    batch sizes."""
    first = tds[0]
    for i, td in enumerate(tds):
        if len(td._tensordict) != len(first._tensordict):
            raise KeyError(
                f"torch.cat: TensorDict {i} has keys {sorted(td._tensordict)} at "
                f"{_where(prefix)}, expected {sorted(first._tensordict)}"
            )
    bs = first._batch_size
    for i, td in enumerate(tds):
        other = td._batch_size
        if other != bs and (
            len(other) != len(bs) or other[:dim] != bs[:dim] or other[dim + 1 :] != bs[dim + 1 :]
        ):
            raise RuntimeError(
                f"torch.cat: batch sizes must match except in dim {dim}; got "
                f"{tuple(bs)} and {tuple(other)} at position {i}"
            )


def _dense_cat(tds: Sequence[Any], dim: int, prefix: tuple[str, ...]) -> TensorDictBase:
    first = tds[0]
    store = first._tensordict
    n_keys = len(store)
    bs = first._batch_size
    names, device = first._names, first._device  # kept when every member has them
    size = 0
    stores = []
    for td in tds:  # one pass; on a mismatch _check_cat finds and reports the first one
        other = td._batch_size
        if len(s := td._tensordict) != n_keys or (
            other != bs
            and (
                len(other) != len(bs)
                or other[:dim] != bs[:dim]
                or other[dim + 1 :] != bs[dim + 1 :]
            )
        ):
            _check_cat(tds, dim, prefix)
        size += other[dim]
        if names is not None and td._names != names:
            names = None
        if device is not None and td._device != device:
            device = None
        stores.append(s)
    new_bs = list(bs)
    new_bs[dim] = size
    entries: dict[str, Any] = {}
    for key, value in store.items():
        try:
            column = [s[key] for s in stores]
        except KeyError:
            bad = next(i for i, td in enumerate(tds) if key not in td._tensordict)
            raise KeyError(
                f"torch.cat: TensorDict {bad} has keys {sorted(tds[bad]._tensordict)} at "
                f"{_where(prefix)}, expected {sorted(first._tensordict)}"
            ) from None
        if isinstance(value, NonTensor):  # (an UnbatchedTensor too)
            if not all(isinstance(v, NonTensor) for v in column):
                raise _mixed_kinds(prefix, key, column)
            entries[key] = _cat_nontensor(column, dim, torch.Size(new_bs))
        elif isinstance(value, Tensor):
            try:  # torch.cat itself refuses a column that is not all tensors
                entries[key] = torch.cat(column, dim)
            except TypeError:
                raise _mixed_kinds(prefix, key, column) from None
        else:
            if not all(isinstance(v, CollectionPrimitives) for v in column):
                raise _mixed_kinds(prefix, key, column)
            if any(v._stack_parts() is not None for v in column):  # ragged lazy entries
                entries[key] = _lazy_cat(column, dim)
            else:
                entries[key] = _dense_cat(column, dim, (*prefix, key))
    out: TensorDictBase = first._new_unsafe(entries, torch.Size(new_bs), device, names)
    return out
