"""The leaf walk: recursive maps over the tensors of a collection, shared by element-wise ops."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from numbers import Number
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from torch import Tensor

from tensordict._batch import check_unreadable_shape, leaf_shape_error
from tensordict._keys import NO_DEFAULT, join_path
from tensordict._nontensor import NonTensor, NonTensorData
from tensordict._primitives import CollectionPrimitives
from tensordict._unbatched import MADE as UNBATCHED_MADE

if TYPE_CHECKING:
    from tensordict._base import DenseTensorDictBase

_NOT_GIVEN: Any = object()
_Dense = TypeVar("_Dense", bound="DenseTensorDictBase")


def tensor_leaves(td: DenseTensorDictBase, out: list[Tensor]) -> list[Tensor]:
    """Append the tensor leaves of a dense ``td`` to ``out`` in storage order (depth first);
    a level whose entries are all tensors is taken in one ``extend``."""
    values = td._tensordict.values()
    if all(map(isinstance, values, (Tensor,) * len(values))):  # (a tuple: dynamo walks it)
        out.extend(values)
        return out
    for value in values:
        if isinstance(value, Tensor):
            out.append(value)
        elif not isinstance(value, NonTensor):
            value._tensor_leaves(out)  # a nested TensorDict or a ragged lazy stack
    return out


def tensor_leaf_paths(
    td: DenseTensorDictBase, prefix: tuple[str, ...], out: list[tuple[str, ...]]
) -> None:
    """Append the key paths of the tensor leaves, in the order of :func:`tensor_leaves`."""
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            out.append((*prefix, key))
        elif isinstance(value, NonTensor):
            continue
        elif value._stack_parts() is None:
            tensor_leaf_paths(value, (*prefix, key), out)
        else:  # a ragged lazy stack: one path stands for all its leaves
            out.append((*prefix, key))


def rebuild(td: DenseTensorDictBase, new_leaves: Iterator[Tensor], check: str | None = None) -> Any:
    """A collection of dense ``td``'s kind and structure whose tensor leaves are taken from
    ``new_leaves``.

    Without ``check`` the caller guarantees the new leaves keep the batch shape (an
    element-wise result with a number); with it, leaves are checked and errors name it.
    """
    entries: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = next(new_leaves)
        elif isinstance(value, NonTensor):
            entries[key] = value
        else:
            entries[key] = value._rebuild(new_leaves, check)
    if check is not None:
        return td._checked_from_entries(entries, td._batch_size, td._device, td._names, check)
    # (through type(td): torch.compile reaches the class by that path, and a second path,
    # td.__class__ as a classmethod call binds it, would cost a guard on every call)
    return type(td)._new_unsafe(entries, td._batch_size, td._device, td._names)


def others_leaves(
    call: str, td: DenseTensorDictBase, other: Any, extra_ok: bool = False
) -> list[Tensor]:
    """The tensor leaves of ``other`` in the order of dense ``td``'s leaves, checking the
    key sets (a stacked ``other`` is densified first); ``extra_ok`` lets ``other`` hold
    leaves ``td`` lacks (an in-place operation, as upstream, writes ``td``'s keys only)."""
    if other._stack_parts() is not None:
        other = other._as_dense(call)
    paths: list[tuple[str, ...]] = []
    tensor_leaf_paths(td, (), paths)
    out: list[Tensor] = []
    missing = []
    for path in paths:
        value = other._get_path_or_none(path)
        if isinstance(value, CollectionPrimitives):  # under a ragged lazy stack of td's
            mine = td._get_path_or_none(path)
            if isinstance(mine, CollectionPrimitives):
                out += mine._other_leaves(call, value, extra_ok)
                continue
        if value is None or not isinstance(value, Tensor):
            missing.append(path[0] if len(path) == 1 else path)
        else:
            out.append(value)
    if extra_ok and not missing:
        return out
    theirs: list[tuple[str, ...]] = []
    tensor_leaf_paths(other, (), theirs)
    if missing or len(theirs) != len(paths):
        extra: list[Any] = [p[0] if len(p) == 1 else p for p in sorted(set(theirs) - set(paths))]
        mixed = _kind_mismatch(call, td, other, missing, extra)
        raise KeyError(
            f"{call}: the two TensorDicts hold different keys; missing from the other: "
            f"{missing}, only in the other: {extra}" + (f" ({mixed})" if mixed else "")
        )
    return out


def _kind_mismatch(
    call: str, td: DenseTensorDictBase, other: Any, missing: list[Any], extra: list[Any]
) -> str:
    """The keys that hold a tensor on one side and a non-tensor entry on the other, said
    in a sentence; a TypeError when they are the only difference between the key sets."""
    mixed = []
    for key in (*missing, *extra):
        path = key if isinstance(key, tuple) else (key,)
        mine, theirs = td._get_path_or_none(path), other._get_path_or_none(path)
        if isinstance(mine, NonTensor) != isinstance(theirs, NonTensor) and all(
            isinstance(v, (Tensor, NonTensor)) for v in (mine, theirs)
        ):
            mixed.append(
                f"{key!r} holds a {type(mine).__name__} here and a {type(theirs).__name__} "
                "in the other"
            )
    if mixed and len(mixed) == len(missing) + len(extra):
        raise TypeError(
            f"{call}: the two TensorDicts hold the same keys but not the same kind of entry: "
            f"{'; '.join(mixed)}; a tensor and a non-tensor entry cannot be combined (convert "
            "one side, or exclude the key)"
        )
    return "; ".join(mixed)


def apply_nested(
    td: _Dense,
    fn: Callable[..., Any],
    others: tuple[DenseTensorDictBase, ...],
    *,
    batch_size: torch.Size | None,
    device: Any,
    names: Any,
    filter_empty: bool | None,
    call_on_nested: bool,
    key_fn: Callable[[tuple[str, ...]], Any] | None,
    prefix: tuple[str, ...],
    call: str,
    default: Any = NO_DEFAULT,
    is_leaf: Callable[[type], bool] | None = None,
) -> _Dense | None:
    """Map ``fn`` over every tensor leaf of ``td`` (and the matching leaves of ``others``).

    A leaf for which ``fn`` returns None is dropped; a nested collection left with no
    entries is dropped too when ``filter_empty``. Non-tensor entries are carried over.
    Returns None when the result is empty and ``filter_empty`` asks to drop it. With a
    ``default``, a leaf (or a whole level) an other lacks gives ``fn`` that default.
    ``is_leaf`` (None: tensors only) names the other classes ``fn`` receives whole.
    """
    out_bs = td._batch_size if batch_size is None else batch_size
    out_device = td._device if device is _NOT_GIVEN else device
    keep_names = td._names if batch_size is None else None
    out_names = keep_names if names is _NOT_GIVEN else names
    if not others and key_fn is None and not call_on_nested and is_leaf is None:
        return _apply_simple(
            td, fn, batch_size, out_bs, device, out_device, out_names, filter_empty, prefix, call
        )
    entries: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if (
            isinstance(value, Tensor)
            or (call_on_nested and not isinstance(value, NonTensor))
            or (is_leaf is not None and is_leaf(type(value)))
        ):
            args = [_other_value(call, o, key, prefix, default) for o in others]
            if key_fn is not None:
                result = fn(key_fn((*prefix, key)), value, *args)
            else:
                result = fn(value, *args)
            if result is not None:
                if not isinstance(value, Tensor) and is_leaf is not None:
                    result = _as_entry(result, out_bs, out_device)
                entries[key] = result
        elif isinstance(value, NonTensor):
            entries[key] = value._with(out_bs, out_device)
        elif value._stack_parts() is not None:  # a ragged lazy stack applies member-wise
            entries[key] = _apply_stack(
                value,
                fn,
                tuple(_other_value(call, o, key, prefix, default, ABSENT) for o in others),
                batch_size,
                device,
                filter_empty,
                call_on_nested,
                key_fn,
                (*prefix, key),
                default,
                is_leaf,
            )
        else:
            sub_others = tuple(_other_value(call, o, key, prefix, default, ABSENT) for o in others)
            for other in sub_others:
                if other is not ABSENT and not isinstance(other, CollectionPrimitives):
                    raise TypeError(
                        f"{call}: key {join_path((*prefix, key))!r} is a nested TensorDict here "
                        f"but a {type(other).__name__} in one of the other TensorDicts"
                    )
            sub = apply_nested(
                value,
                fn,
                sub_others,
                batch_size=batch_size,
                device=device,
                names=_NOT_GIVEN if names is _NOT_GIVEN else None,
                filter_empty=filter_empty,
                call_on_nested=call_on_nested,
                key_fn=key_fn,
                prefix=(*prefix, key),
                call=call,
                default=default,
                is_leaf=is_leaf,
            )
            if sub is not None:
                entries[key] = sub
    if not entries and prefix and filter_empty is not False and (filter_empty or td._tensordict):
        return None
    return td._checked_from_entries(entries, out_bs, out_device, out_names, call, prefix)


def dropped(source: Any, result: Any, filter_empty: bool | None) -> bool:
    """Whether ``apply`` answers None: its result holds no entry, and ``filter_empty``
    drops every empty result (True) or one emptied by dropped leaves (None)."""
    return _no_entries(result) and (filter_empty is True or not _no_entries(source))


class WrittenWatch:
    """``fn`` for an in-place ``apply``, counting the leaves it gave a value for: upstream
    answers None when it gave none (unless ``filter_empty=False``, or the collection holds
    non-tensor entries, which are kept)."""

    __slots__ = ("calls", "fn", "written")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.calls = 0
        self.written = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.fn(*args, **kwargs)
        self.calls += 1
        if out is not None:
            self.written += 1
        return out

    def wrote_nothing(self, source: Any, filter_empty: bool | None) -> bool:
        """Whether the in-place ``apply`` answers None (``filter_empty`` as in
        :func:`dropped`: None asks for at least one leaf visited)."""
        if self.written or (filter_empty is None and not self.calls):
            return False
        return not source._has_non_tensor


def _no_entries(td: Any) -> bool:
    entries = getattr(td, "_tensordict", None)
    if type(entries) is dict:
        return not entries
    parts = td._stack_parts()
    if parts is not None:
        return all(_no_entries(m) for m in parts[1])
    return not list(td.keys())


class _Absent:
    """A nested level an other TensorDict lacks, under ``apply(..., default=)``: every
    leaf below it reads as the default."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()


def _other_value(
    call: str,
    other: DenseTensorDictBase,
    key: str,
    prefix: tuple[str, ...],
    default: Any = NO_DEFAULT,
    level: Any = NO_DEFAULT,
) -> Any:
    """``other``'s entry at ``key``; a missing one is ``default`` when given (``level``
    instead where a nested level is expected), else a KeyError."""
    if other is ABSENT:
        return default if level is NO_DEFAULT else level
    try:
        return other._tensordict[key]
    except KeyError:
        if default is not NO_DEFAULT:
            return default if level is NO_DEFAULT else level
        path = (*prefix, key)
        raise KeyError(
            f"{call}: key {path[0] if len(path) == 1 else path!r} is missing from "
            "one of the other TensorDicts"
        ) from None


def non_tensor_result(
    call: str, result: Any, path: tuple[str, ...], bs: torch.Size, device: Any
) -> NonTensorData:
    """What an ``apply`` function returned that is not a tensor: a string, a dtype or
    another object is kept as one ``NonTensorData`` of the batch, as upstream stores it;
    a number, sequence, mapping or array (which upstream would make a tensor) is refused."""
    if isinstance(result, (Number, list, tuple, np.ndarray, Mapping, CollectionPrimitives)):
        raise TypeError(
            f"{call}: the function returned {type(result).__name__} for key "
            f"{join_path(path)!r}; expected a tensor, None or a non-tensor value "
            "(a string, a dtype, an object)"
        )
    return NonTensorData(result, batch_size=bs, device=device)


def _apply_simple(
    td: _Dense,
    fn: Callable[[Tensor], Any],
    batch_size: torch.Size | None,
    out_bs: torch.Size,
    device: Any,
    out_device: torch.device | None,
    out_names: Any,
    filter_empty: bool | None,
    prefix: tuple[str, ...],
    call: str,
) -> _Dense | None:
    """:func:`apply_nested` for one function of one leaf: checks results in the same pass."""
    entries: dict[str, Any] = {}
    n = len(out_bs)
    b0 = out_bs[0] if n else 0
    unbatched = UNBATCHED_MADE[0]  # (no UnbatchedTensor yet in this process: no test per leaf)
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            result = fn(value)
            if result is None:
                continue
            if not isinstance(result, Tensor):
                entries[key] = non_tensor_result(call, result, (*prefix, key), out_bs, out_device)
                continue
            if out_device is not None and result.device != out_device:
                result = result.to(out_device)
            if unbatched and isinstance(result, NonTensor):
                result = result._with(out_bs, out_device)  # an UnbatchedTensor: any shape
            elif n:
                try:
                    shape = result.shape
                except RuntimeError as err:  # a strided nested tensor: its regular dims
                    check_unreadable_shape(call, join_path((*prefix, key)), result, out_bs, err)
                else:
                    if shape[0] != b0 if n == 1 and shape else shape[:n] != out_bs:
                        raise leaf_shape_error(call, join_path((*prefix, key)), shape, out_bs)
            entries[key] = result
        elif isinstance(value, NonTensor):
            entries[key] = value._with(out_bs, out_device)
        elif value._stack_parts() is not None:  # a ragged lazy stack applies member-wise
            entries[key] = _apply_stack(
                value, fn, (), batch_size, device, filter_empty, False, None, (*prefix, key)
            )
        else:
            sub_names = value._names if batch_size is None else None
            sub_device = value._device if device is _NOT_GIVEN else out_device
            sub = _apply_simple(
                value,
                fn,
                batch_size,
                value._batch_size if batch_size is None else batch_size,
                device,
                sub_device,
                sub_names,
                filter_empty,
                (*prefix, key),
                call,
            )
            if sub is not None:
                entries[key] = sub
    if not entries and prefix and filter_empty is not False and (filter_empty or td._tensordict):
        return None
    return td._new_unsafe(entries, out_bs, out_device, out_names)


def _apply_stack(
    stack: Any,
    fn: Callable[..., Any],
    others: tuple[Any, ...],
    batch_size: torch.Size | None,
    device: Any,
    filter_empty: bool | None,
    call_on_nested: bool,
    key_fn: Callable[[tuple[str, ...]], Any] | None,
    path: tuple[str, ...],
    default: Any = NO_DEFAULT,
    is_leaf: Callable[[type], bool] | None = None,
) -> Any:
    """``apply`` on a ragged lazy stack nested under ``path``: member by member, the keys
    that ``key_fn`` sees still starting with ``path``."""
    inner_fn = None if key_fn is None else (lambda p: key_fn((*path, *p)))
    return stack._apply_impl(
        fn,
        others,
        inner_fn,
        batch_size,
        None if device is _NOT_GIVEN else device,
        None,
        False,
        filter_empty,
        call_on_nested,
        default,
        is_leaf,
    )


def leaf_rule(is_leaf: Callable[[type], bool]) -> Callable[[type], bool] | None:
    """The ``is_leaf`` the walk consults: None for the rules under which only tensors are
    leaves (the default ones, the walk's own rule)."""
    from tensordict._predicates import default_is_leaf
    from tensordict._views import default_is_leaf as tensors_only

    return None if is_leaf is default_is_leaf or is_leaf is tensors_only else is_leaf


def _as_entry(result: Any, batch_size: torch.Size, device: torch.device | None) -> Any:
    """What ``fn`` returned for an entry ``is_leaf`` made a leaf, as an entry: a value that
    is neither a tensor nor a collection is stored as non-tensor data (as ``set`` does);
    a non-tensor entry (``NonTensorData``, ``NonTensorStack``) is stored as it is."""
    if isinstance(result, (Tensor, CollectionPrimitives, NonTensor)):
        return result
    from tensordict._nontensor import NonTensorData

    return NonTensorData(result, batch_size=batch_size, device=device)
