"""Entry-level helpers upstream offers: non-tensor entries, key splits, writes at an index."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from tensordict._batch import check_copy_broadcast
from tensordict._index import _indexed_shape, _normalise
from tensordict._keys import NO_DEFAULT, NestedKey, join_path, key_path
from tensordict._mapping import is_plain_mapping
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._primitives import CollectionPrimitives
from tensordict._tolist import write_value_at
from tensordict._views import with_non_tensor

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import DenseTensorDictBase

_NO_DEFAULT: Any = NO_DEFAULT  # one sentinel for every get(key, default)


def _plain(value: Any, retain_none: bool | None = None) -> Any:
    """A deep plain copy: tensors cloned, collections as TensorDicts (``retain_none``
    passed down to nested tensorclasses), non-tensors kept."""
    if isinstance(value, Tensor):
        if type(value) is Tensor or isinstance(value, NonTensor):  # (an UnbatchedTensor stays)
            return value.clone()
        return value.clone().as_subclass(Tensor)
    if isinstance(value, NonTensor):
        return value
    return value.to_tensordict(retain_none=retain_none)


def _is_non_tensor_value(value: Any) -> bool:
    return isinstance(value, NonTensor) and not isinstance(value, Tensor)


class EntryOps(CollectionPrimitives):
    """Upstream's entry helpers, written against ``get``/``set``/``keys``/``del_``."""

    __slots__ = ()

    if TYPE_CHECKING:
        _last_op: Any

        def clone(self, recurse: bool = True) -> Self: ...
        def empty(self, recurse: bool = False) -> Self: ...
        def is_empty(self) -> bool: ...
        def pop(self, key: NestedKey, default: Any = ...) -> Any: ...
        def _index(self, index: Any) -> Any: ...

    # ------------------------------------------------------------- conversion
    def to_tensordict(self, *, retain_none: bool | None = None) -> DenseTensorDictBase:
        """A plain, dense :class:`~tensordict.TensorDict` holding a copy of every leaf
        (nested collections, tensorclasses and lazy stacks converted too).
        ``retain_none=True`` keeps a tensorclass's unset fields as ``NonTensorData(None)``
        entries, as upstream.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))])
        >>> out = s.to_tensordict()
        >>> type(out).__name__, out.batch_size, out["a"].sum().item()
        ('TensorDict', torch.Size([2]), 2.0)
        """
        from tensordict._td import TensorDict

        dense = self._as_dense(self._call("to_tensordict"))
        entries = {key: _plain(value, retain_none) for key, value in dense._tensordict.items()}
        if retain_none:
            for name in getattr(type(self), "_fields", ()):
                if name not in entries:
                    entries[name] = NonTensorData(None, dense._batch_size, dense._device)
        return TensorDict._new_unsafe(
            entries,
            dense._batch_size,
            dense._device,
            None if dense._names is None else list(dense._names),
        )

    # ------------------------------------------------------ non-tensor entries
    def set_non_tensor(self, key: NestedKey, value: Any) -> Self:
        """Store ``value`` at ``key`` as non-tensor data, whatever its type (a number or a
        tensor too), shared by the whole batch.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2]).set_non_tensor(("cfg", "lr"), 0.1)
        >>> td.get_non_tensor(("cfg", "lr")), type(td.get(("cfg", "lr"))).__name__
        (0.1, 'NonTensorData')
        """
        return self.set(key, NonTensorData(value, self._batch_size, self._device))

    def get_non_tensor(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """The Python value stored at ``key`` (a list per batch element for values that
        differ along the batch); a tensor entry is returned as it is.

        >>> from tensordict import TensorDict
        >>> TensorDict(text="hello", batch_size=[]).get_non_tensor("text")
        'hello'
        """
        value = self.get(key) if default is _NO_DEFAULT else self.get(key, default)
        if isinstance(value, NonTensorData):
            return value.data
        if isinstance(value, NonTensorStack):
            return value.tolist()
        return value

    def non_tensor_items(self, include_nested: bool = False) -> tuple[tuple[Any, Any], ...]:
        """The ``(key, value)`` pairs of the non-tensor entries.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()), b="text", c={"d": "more"})
        >>> [(k, v.data) for k, v in td.non_tensor_items(include_nested=True)]
        [('b', 'text'), (('c', 'd'), 'more')]
        """
        return tuple(
            (k, v)
            for k, v in self.items(include_nested, leaves_only=True, is_leaf=with_non_tensor)
            if _is_non_tensor_value(v)
        )

    def filter_non_tensor_data(self) -> Self:
        """The same collection without its non-tensor entries (at every level).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict(a=torch.zeros(()), b="text").filter_non_tensor_data().keys())
        ['a']
        """
        paths = [
            key_path(k, "filter_non_tensor_data")
            for k, v in self.items(True, leaves_only=True, is_leaf=with_non_tensor)
            if _is_non_tensor_value(v)
        ]
        return self.exclude(*paths)  # type: ignore[attr-defined,no-any-return]

    def filter_empty_(self) -> Self:
        """Remove, in place, the nested collections that hold no leaf.

        >>> from tensordict import TensorDict
        >>> td = TensorDict(a={"b": {}}, c=1)
        >>> list(td.filter_empty_().keys(True))
        ['c']
        """
        for key in sorted(
            (k for k, v in self.items(True) if isinstance(v, CollectionPrimitives)),
            key=lambda k: -len(key_path(k, "filter_empty_")),
        ):
            value = self.get(key)
            if value.is_empty():
                self.del_(key)
        return self

    def entry_class(self, key: NestedKey) -> type:
        """The class of the entry at ``key``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(1)).entry_class("a").__name__
        'Tensor'
        """
        return type(self.get(key))

    def is_non_tensor(self, key: NestedKey) -> bool:
        """Whether the entry stored at ``key`` is non-tensor data.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()), b="text")
        >>> td.is_non_tensor("a"), td.is_non_tensor("b")
        (False, True)
        """
        return _is_non_tensor_value(self.get(key))

    def clear_refs_for_compile_(self) -> Self:
        """Forget what produced this collection (the record a ``with`` block undoes).

        >>> from tensordict import TensorDict
        >>> td = TensorDict().lock_().clear_refs_for_compile_()
        >>> with td:
        ...     pass
        >>> td.is_locked
        True
        """
        self._last_op = None
        return self

    def from_dict_instance(
        self,
        input_dict: Mapping[Any, Any],
        *others: Any,
        auto_batch_size: bool | None = None,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Any = None,
    ) -> Any:
        """:meth:`from_dict` called from an instance (the class's own constructor); a
        nested dict whose key holds a collection here is rebuilt by that collection's own
        ``from_dict_instance`` (so a tensorclass entry comes back as that tensorclass).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict().from_dict_instance({"a": torch.zeros(2)}, auto_batch_size=True).batch_size
        torch.Size([2])
        """
        entries = dict(input_dict)
        for key, value in entries.items():
            current: Any = self.get(key, None) if isinstance(key, str) else None
            if is_plain_mapping(value) and hasattr(current, "from_dict_instance"):
                entries[key] = current.from_dict_instance(
                    value, auto_batch_size=auto_batch_size, device=device
                )
        return type(self).from_dict(  # type: ignore[attr-defined]
            entries,
            batch_size=batch_size,
            device=device,
            batch_dims=batch_dims,
            names=names,
            auto_batch_size=auto_batch_size,
        )

    # --------------------------------------------------------- key structure
    def split_keys(
        self,
        *key_sets: Iterable[NestedKey]
        | Mapping[NestedKey, NestedKey]
        | Callable[[tuple[str, ...], Tensor], bool],
        inplace: bool = False,
        default: Any = _NO_DEFAULT,
        strict: bool = True,
        reproduce_struct: bool = False,
    ) -> tuple[Self, ...]:
        """Split into one collection per key set (a dict renames), plus one of the rest.

        A key set may be a predicate ``fn(key, leaf) -> bool``: it takes every tensor leaf
        the earlier sets left for which it is true (``key`` is always a tuple of str).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()), b=torch.ones(()), c=torch.ones(3))
        >>> [list(t.keys()) for t in td.split_keys(["a"], {"b": "z"})]
        [['a'], ['z'], ['c']]
        >>> [list(t.keys()) for t in td.split_keys(lambda key, leaf: leaf.ndim == 1)]
        [['c'], ['a', 'b']]
        """
        if strict:
            default = _NO_DEFAULT
        elif default is _NO_DEFAULT:
            default = None
        rest = self.clone(recurse=False).unlock_()  # a new collection: not the files' keys
        outs: list[Self] = []
        taken: list[NestedKey] = []
        for key_set in key_sets:
            out = self.empty(recurse=reproduce_struct)
            if callable(key_set) and not isinstance(key_set, Iterable):
                key_set = [  # a predicate: the tensor leaves not taken yet it selects
                    key
                    for key, leaf in rest.items(True, True)
                    if isinstance(leaf, Tensor)
                    and key_set((key,) if isinstance(key, str) else key, leaf)
                ]
            mapping = key_set if isinstance(key_set, Mapping) else {k: k for k in key_set}
            for key, new_key in mapping.items():
                value = rest.pop(key) if default is _NO_DEFAULT else rest.pop(key, default)
                if value is not None:
                    out.set(new_key, value)
                taken.append(key)
            outs.append(out)
        if inplace:
            for key in taken:
                if default is _NO_DEFAULT:
                    self.del_(key)
                else:
                    self.pop(key, None)
            rest = self
        if not reproduce_struct:
            rest.filter_empty_()
        outs.append(rest)
        return tuple(outs)

    def separates(
        self,
        *keys: NestedKey,
        default: Any = _NO_DEFAULT,
        strict: bool = True,
        filter_empty: bool = True,
    ) -> Self:
        """Remove ``keys`` from this collection in place and return them as a new one.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()), b=torch.ones(()))
        >>> list(td.separates("a").keys()), list(td.keys())
        (['a'], ['b'])
        """
        out = self.empty()
        missing = object()
        for key in keys:
            if strict and default is _NO_DEFAULT:
                value = self.pop(key)
            else:
                value = self.pop(key, missing)
                if value is missing:
                    if default is _NO_DEFAULT:
                        continue
                    value = default  # the default stands in for a missing key
            out.set(key, value)
        if filter_empty:
            self.filter_empty_()
        return out

    def rename_keys(self, mapping: Mapping[NestedKey, NestedKey], *, strict: bool = True) -> Self:
        """A shallow copy with the entries moved from each old key to its new key; with
        ``strict=False`` an old key that is missing is skipped (a KeyError otherwise).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict(a=torch.zeros(())).rename_keys({"a": ("b", "c")}).keys(True))
        ['b', ('b', 'c')]
        """
        out = self.clone(recurse=False)
        if not strict:
            call = self._call("rename_keys")
            mapping = {
                old: new
                for old, new in mapping.items()
                if self._get_path_or_none(key_path(old, call)) is not None
            }
        values = {new: out.pop(old) for old, new in mapping.items()}
        for new, value in values.items():
            out.set(new, value)
        return out.filter_empty_()

    @property
    def sorted_keys(self) -> list[str]:
        """The top-level keys, sorted (a property, as upstream).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(b=torch.zeros(()), a=torch.zeros(())).sorted_keys
        ['a', 'b']
        """
        return sorted(self.keys())

    def popitem(self) -> tuple[str, Any]:
        """Remove the top-level entry inserted last and return ``(key, value)``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(()), b=torch.ones(())).popitem()[0]
        'b'
        """
        keys = list(self.keys())
        if not keys:
            raise KeyError(f"{self._call('popitem')}: the collection is empty")
        return keys[-1], self.pop(keys[-1])

    def clear(self) -> Self:
        """Remove every entry, in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(3), batch_size=[3]).clear().batch_size
        torch.Size([3])
        """
        for key in list(self.keys()):
            self.del_(key)
        return self

    def replace(self, *args: Any, **kwargs: Any) -> Self:
        """A shallow copy with some entries replaced (a mapping and/or keyword arguments).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()))
        >>> td.replace(a=torch.ones(()))["a"], td["a"]
        (tensor(1.), tensor(0.))
        """
        if len(args) > 1:
            raise TypeError(f"{self._call('replace')}: at most one mapping, got {len(args)}")
        if not kwargs and (
            not args or args[0] is None or (is_plain_mapping(args[0]) and not args[0])
        ):
            return self
        out: Self = self.__copy__()  # type: ignore[attr-defined]  # new levels: merges stay
        if args:
            out.update(args[0])
        if kwargs:
            out.update(kwargs)
        return out

    def create_nested(self, key: NestedKey) -> Self:
        """Write an empty nested collection at ``key``, of the same batch size, device and
        names (replacing what was there).

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[3]).create_nested(("a", "b"))
        >>> td["a", "b"].batch_size
        torch.Size([3])
        """
        from tensordict._td import TensorDict

        names = None if self._names is None else list(self._names)
        self.set(key, TensorDict({}, self._batch_size, self._device, names=names))
        return self

    @property
    def depth(self) -> int:
        """The number of nesting levels below this one (0 without nested collections).

        >>> from tensordict import TensorDict
        >>> TensorDict(a={"b": {"c": 1}}).depth
        2
        """
        deepest = 0
        for key in self.keys(True, leaves_only=True, is_leaf=with_non_tensor):
            if isinstance(key, tuple):
                deepest = max(deepest, len(key) - 1)
        return deepest

    # ------------------------------------------------------- writes at an index
    def set_at_(
        self, key: NestedKey, value: Any, index: Any, *, non_blocking: bool = False
    ) -> Self:
        """Write ``value`` into the existing entry ``key`` at batch ``index``, in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(3), batch_size=[3]).set_at_("a", 1.0, 1)
        >>> td["a"]
        tensor([0., 1., 0.])
        """
        target = self.get(key)
        if isinstance(target, NonTensor):  # a value, not a buffer: an index write of it
            write_value_at(self, key_path(key, self._call("set_at_")), index, value, False)
            return self
        if isinstance(value, np.ndarray):  # torch refuses an array on the right of []=
            value = torch.as_tensor(value)
        target[index] = value
        if self._stack_parts() is not None:  # a stack's get is a copy: write it back
            self.set_(key, target)
        return self

    def get_at(self, key: NestedKey, index: Any, default: Any = _NO_DEFAULT) -> Any:
        """The entry at ``key``, indexed by ``index`` (``default`` when it is missing).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.arange(3), batch_size=[3]).get_at("a", 1)
        tensor(1)
        """
        if default is _NO_DEFAULT:
            return self.get(key)[index]
        value = self.get(key, _NO_DEFAULT_SENTINEL)
        if value is _NO_DEFAULT_SENTINEL:
            return default
        return value[index]

    def update_at_(
        self,
        input_dict_or_td: Any,
        idx: Any,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
    ) -> Self:
        """Write every entry of ``input_dict_or_td`` into the existing entries at batch
        index ``idx``, in place (a KeyError names a key this collection lacks).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(3), batch_size=[3])
        >>> td.update_at_({"a": torch.tensor(5.0)}, 2)["a"]
        tensor([0., 0., 5.])
        """
        call = self._call("update_at_")
        wanted = None if keys_to_update is None else {key_path(k, call) for k in keys_to_update}
        non_tensor: list[tuple[str, ...]] = []
        writes: list[tuple[tuple[str, ...], Any]] = []
        for key, value in (
            input_dict_or_td.items(True, leaves_only=True, is_leaf=with_non_tensor)
            if isinstance(input_dict_or_td, CollectionPrimitives)
            else _flat_items(input_dict_or_td)
        ):
            path = key_path(key, call)
            if wanted is not None and not any(path[: len(w)] == w for w in wanted):
                continue
            leaf = self._get_path_or_none(path)
            if leaf is None:
                raise KeyError(f"{call}: key {join_path(path)!r} was not found")
            if isinstance(value, NonTensor):
                non_tensor.append(path)
                continue
            if isinstance(value, Tensor) and isinstance(leaf, Tensor):
                # every key is checked before the first write, against the slot the write
                # fills: ``leaf[idx]``, as set_at_ indexes it (an Ellipsis counts the
                # leaf's dims); an int index takes the first dim, with no index algebra
                if type(idx) is int:
                    slot = leaf.shape[1:]
                else:
                    slot = _indexed_shape(call, idx, _normalise(idx, leaf.ndim), leaf.shape)
                if value.shape != slot:
                    shown = path[0] if len(path) == 1 else path
                    check_copy_broadcast(value.shape, slot, shown, call)
                if clone:
                    value = value.clone()
            writes.append((path, value))
        for path, value in writes:
            self.set_at_(path, value, idx)
        if non_tensor and isinstance(input_dict_or_td, CollectionPrimitives):
            self._set_at_index(idx, input_dict_or_td.select(*non_tensor))
        return self

    def copy_at_(
        self, tensordict: Any, idx: Any, non_blocking: bool = False, *, fast: bool | None = True
    ) -> Self:
        """Copy every entry of ``tensordict`` into this one at batch index ``idx``.

        ``fast=True`` (the default) copies tensors only and refuses non-tensor entries;
        ``fast=False`` copies those too (``fast=None`` is its deprecated spelling).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2, 2), batch_size=[2])
        >>> td.copy_at_(TensorDict(a=torch.ones(2)), 0)["a"][0]
        tensor([1., 1.])
        """
        call = self._call("copy_at_")
        non_tensor = [k for k, v in _leaf_items(tensordict) if isinstance(v, NonTensor)]
        if non_tensor and fast:
            raise RuntimeError(
                f"{call}: fast=True copies tensors only, and keys {non_tensor} hold non-tensor "
                "data; pass fast=False to copy them too"
            )
        if fast is None:
            warnings.warn(
                f"{call}: fast=None is deprecated; pass fast=False to copy non-tensor data",
                FutureWarning,
                stacklevel=2,
            )
        return self.update_at_(tensordict, idx)

    def copy(self) -> Self:
        """A shallow copy: new structure, shared leaves (``clone(recurse=False)``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()))
        >>> td.copy()["a"] is td["a"]
        True
        """
        return self.clone(recurse=False)

    def copy_(self, tensordict: Any, non_blocking: bool = False) -> Self:
        """Copy every entry of ``tensordict`` into the existing entries, in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2)).copy_(TensorDict(a=torch.ones(2)))["a"]
        tensor([1., 1.])
        """
        return self.update_(tensordict)


_NO_DEFAULT_SENTINEL: Any = object()


def update_source(
    other: Any, clone: bool, keys_to_update: Sequence[NestedKey] | None, call: str
) -> dict[Any, Any]:
    """The leaves of ``other`` an ``update(..., clone=, keys_to_update=)`` writes: a flat
    dict keyed by paths, restricted to ``keys_to_update`` (and what is under them)."""
    if isinstance(other, CollectionPrimitives):
        items = [
            (key_path(k, call), v)
            for k, v in other.items(True, leaves_only=True, is_leaf=with_non_tensor)
        ]
    else:
        items = _flat_items(other)
    wanted = None if keys_to_update is None else [key_path(k, call) for k in keys_to_update]
    out: dict[Any, Any] = {}
    for path, value in items:
        if wanted is not None and not any(path[: len(w)] == w for w in wanted):
            continue
        if clone and isinstance(value, Tensor):
            value = value.clone()
        out[path] = value
    return out


def _leaf_items(source: Any) -> list[tuple[Any, Any]]:
    if isinstance(source, CollectionPrimitives):
        return list(source.items(True, leaves_only=True, is_leaf=with_non_tensor))
    return _flat_items(source)


def _flat_items(mapping: Mapping[Any, Any], prefix: tuple[str, ...] = ()) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for key, value in mapping.items():
        path = (*prefix, *key_path(key, "update_at_"))
        if is_plain_mapping(value):
            out.extend(_flat_items(value, path))
        else:
            out.append((path, value))
    return out
