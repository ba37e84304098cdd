"""The TensorDict container: storage, the batch-size rule, reading and writing entries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
import torch
from torch import Tensor

from tensordict._apply import non_tensor_result, others_leaves, rebuild, tensor_leaves
from tensordict._base import DenseTensorDictBase
from tensordict._batch import (
    BatchDimMismatchError,
    BatchSizeLike,
    DeviceLike,
    as_batch_size,
    as_device,
    check_copy_broadcast,
    check_unreadable_shape,
    leaf_shape_error,
    nested_shape,
    starts_with,
)
from tensordict._context import record
from tensordict._entry_ops import update_source
from tensordict._format import register_type
from tensordict._index import IndexOps
from tensordict._keys import (
    NO_DEFAULT,
    KeyThroughLeafError,
    NestedKey,
    is_string_key,
    join_path,
    key_path,
    locked_error,
    missing_key_error,
    sort_key,
)
from tensordict._lock_parents import forget_parent, locked_parent, note_parent
from tensordict._mapping import is_plain_mapping
from tensordict._modules import params_view
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._primitives import CollectionPrimitives, Names
from tensordict._refine import grow_nested, misfit_message, misfits
from tensordict._repr import td_repr
from tensordict._shape import RefineNamesError
from tensordict._state import DenseStateOps
from tensordict._switches import list_to_stack, set_get_defaults_to_none
from tensordict._tolist import linked_entry
from tensordict._torch_compat import foreach, nested_sizes
from tensordict._update_batch import prepare_update, resize_update
from tensordict._views import FlatKeysView, IsLeaf, ItemsView, KeysView, ValuesView

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_values

_NO_DEFAULT: Any = NO_DEFAULT  # one sentinel for every get(key, default)
_COPY: Callable[[list[Tensor], list[Tensor]], Any] = foreach("copy_") or (
    lambda dst, src: [d.copy_(s) for d, s in zip(dst, src, strict=True)]
)
_NUMBER_TYPES = (bool, int, float, complex)


# torch.Size([n]) for the common n, built once at import (a Size is immutable). Never
# grown afterwards: torch.compile guards on this dict, and a new entry would recompile.
_SIZES: dict[int, torch.Size] = {n: torch.Size([n]) for n in range(1024)}


def is_tensor_collection(obj: object) -> bool:
    """Whether ``obj`` (an instance or a class) is a tensor collection such as a TensorDict.

    >>> import torch
    >>> from tensordict import TensorDict, is_tensor_collection
    >>> is_tensor_collection(TensorDict()), is_tensor_collection(torch.zeros(1))
    (True, False)
    """
    cls = obj if isinstance(obj, type) else type(obj)
    # (a class that forwards the TensorDict API, as tdnn's TensorDictParams, says so)
    return issubclass(cls, CollectionPrimitives) or getattr(cls, "_tensor_collection", False)


def _fit_batch(value: TensorDict, bs: torch.Size, call: str, key: object) -> TensorDict:
    """A shallow copy of ``value`` given the batch size ``bs`` its leaves allow, as upstream
    does for a nested TensorDict of another batch size (``value`` itself is left alone).
    Only a batch size that ``bs`` extends is refined so; any other one is an error."""
    have = value._batch_size
    if len(have) >= len(bs) or bs[: len(have)] != have:
        raise leaf_shape_error(call, key, have, bs)
    bad = misfits(value, bs, key if isinstance(key, tuple) else (key,))
    if bad:
        raise BatchDimMismatchError(
            f"{call}: the TensorDict at key {key!r} (batch_size {tuple(have)}) cannot take "
            f"batch_size {tuple(bs)}: {misfit_message(bad, bs)}"
        )
    out = value.clone(False)
    out.batch_size = bs
    return out


def _name_nested(td: TensorDict) -> None:
    """Give the nested TensorDicts of ``td`` its dimension names on their leading dims, as
    upstream keeps them (their own extra dims keep theirs)."""
    n = len(td._batch_size)
    lead = td._names if td._names is not None else [None] * n
    for value in td._tensordict.values():
        if _is_td(value):
            current = value._names
            if current is None and td._names is None:
                continue
            extra = current[n:] if current is not None else [None] * (len(value._batch_size) - n)
            value.names = [*lead, *extra]


def _adopt_names(td: TensorDict, value: TensorDict, call: str, key: str) -> None:
    """Names across a nested write: the value takes the parent's names (a dim named
    otherwise in both is refused, as upstream), or an unnamed parent takes those of the
    value's leading dims (upstream)."""
    n = len(td._batch_size)
    if td._names is not None:
        if value._names is None or value._names[:n] != td._names:
            if value._names is not None and any(
                a is not None and b is not None and a != b
                for a, b in zip(td._names, value._names[:n], strict=True)
            ):
                raise RefineNamesError(
                    f"{call}: key {key!r} holds a TensorDict whose dim names "
                    f"{list(value._names)} conflict with the names {list(td._names)}; "
                    "rename one of them first"
                )
            extra = value._names[n:] if value._names is not None else None
            value.names = [*td._names, *(extra or [None] * (len(value._batch_size) - n))]
    elif value._names is not None and any(x is not None for x in value._names[:n]):
        td.names = value._names[:n]


def _is_td(value: object) -> TypeGuard[TensorDict]:
    return isinstance(value, TensorDict)


def _is_ragged(value: Any) -> bool:
    """Whether ``value`` is a lazy stack (kept as such when nested, see ``_convert_stack``)."""
    return isinstance(value, CollectionPrimitives) and value._stack_parts() is not None


def _is_collection(value: object) -> bool:
    return isinstance(value, CollectionPrimitives)


def _is_mapping(value: object) -> bool:
    return isinstance(value, TensorDict) or is_plain_mapping(value)


def _check_nested_copy(value: Tensor, current: Tensor, name: Any, call: str) -> None:
    """An in-place write into a nested tensor entry needs a nested value of the same
    element shapes (torch copies no other)."""
    if not (value.is_nested and current.is_nested) or not torch.equal(
        nested_sizes(value), nested_sizes(current)
    ):
        what = f"nested, elements {nested_shape(value)}" if value.is_nested else "not nested"
        raise ValueError(
            f"{call}: key {name!r} holds a nested tensor of elements {nested_shape(current)}; "
            f"the value written in place must have the same element shapes, got one {what}"
        )


def _scalars_as_non_tensor(d: Mapping[Any, Any], batch_size: torch.Size) -> Any:
    """``d`` with its Python and NumPy scalars (nested dicts' too) as ``NonTensorData`` of
    ``batch_size``; None when it holds none, or when the batch size is empty."""
    if not batch_size:
        return None
    found = False
    out: dict[Any, Any] = {}
    for key, value in d.items():
        if isinstance(value, (Real, np.bool_)):
            out[key] = NonTensorData(value, batch_size=batch_size)
            found = True
        elif is_plain_mapping(value):
            inner = _scalars_as_non_tensor(value, batch_size)
            found = found or inner is not None
            out[key] = value if inner is None else inner
        else:
            out[key] = value
    return out if found else None


class TensorDict(IndexOps, DenseStateOps, DenseTensorDictBase):
    """A dictionary of tensors sharing leading dimensions, the ``batch_size``.

    Every leaf's shape starts with ``batch_size``; a nested TensorDict's batch size
    starts with its parent's. Indexing, reshaping and device moves act on all leaves.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"obs": torch.zeros(4, 3), "nested": {"r": torch.ones(4)}}, batch_size=[4])
    >>> td["nested", "r"].shape
    torch.Size([4])
    >>> td.batch_size
    torch.Size([4])
    """

    # _saved_folder: the checkpoint folder it was saved as or loaded from (unset: none)
    # _keys_view: the view ``keys()`` hands out (unset until the first call)
    # _locked_by: weak references to the locked TensorDicts holding it (see _lock_parents)
    __slots__ = ("_keys_view", "_locked_by", "_saved_folder", "_tensordict")
    _abstract = False
    # a tensorclass's keys are its fields and its values follow their annotations: entries
    # written into one nested in a TensorDict go through its ``_convert``
    _is_tensorclass = False
    _tensordict: dict[str, Any]
    _saved_folder: str
    _keys_view: FlatKeysView

    def __init__(
        self,
        source: Mapping[Any, Any] | TensorDict | None = None,
        batch_size: BatchSizeLike = None,
        device: DeviceLike = None,
        names: Sequence[str | None] | None = None,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        ragged = False
        if (  # the common [N] and torch.Size: checked here, no call
            type(batch_size) is list
            and len(batch_size) == 1
            and type(b0 := batch_size[0]) is int
            and b0 >= 0
        ):
            bs = _SIZES.get(b0) or torch.Size(batch_size)
        elif type(batch_size) is torch.Size and not (batch_size and min(batch_size) < 0):
            bs = batch_size
        else:  # (-1: a dim the elements of nested tensor leaves differ in)
            bs = as_batch_size(batch_size, "TensorDict", True)
            ragged = -1 in bs
        dev = None if device is None else as_device(device)
        self._batch_size = bs
        self._device = dev
        self._names = None
        self._is_locked = False
        if kwargs and source is not None:
            raise ValueError(
                "TensorDict: pass the entries as source or as keyword arguments, not both "
                f"(got source and {sorted(kwargs)})"
            )
        if type(source) is dict and dev is None and len(bs) == 1:
            # The hot path: copied in one C call, then each entry checked once. Under a
            # plain key, an entry that is not a plain tensor with the batch's first dim is
            # nested, converted or reported by _fill_one, which replaces it in place; any
            # other key sends the whole source to the general path.
            self._tensordict = store = dict(source)
            b0 = bs[0]
            for key, value in store.items():
                if type(key) is str and key:
                    if type(value) is Tensor:
                        try:
                            if value.shape[0] == b0:
                                continue
                        except (IndexError, RuntimeError):  # 0-dim or nested: _fill_one
                            pass
                    self._fill_one(key, value)
                else:
                    self._tensordict = {}
                    self._fill_pairs(source.items())
                    break
        else:
            self._tensordict = {}
            if type(source) is dict:
                if source:
                    self._fill_pairs(source.items())
            elif source is not None:
                if not _is_mapping(source):
                    view = params_view(source)  # a TensorDictParams: its TensorDict of leaves
                    if view is None:
                        raise TypeError(
                            f"TensorDict: source must be a mapping (dict or TensorDict), got "
                            f"{type(source).__name__}"
                        )
                    source = view
                self._fill(source.clone(recurse=False) if _is_td(source) else source)
        if kwargs:
            for key, value in kwargs.items():
                self._set_path((key,), value, "TensorDict")
        if names is not None:
            self.names = names
        if lock:
            self.lock_()
        if ragged:
            _check_minus_one_given(self)

    def _fill(self, source: Mapping[Any, Any] | TensorDict) -> None:
        """Store the entries of ``source``; plain dicts nest without re-normalising anything."""
        self._fill_pairs(source.items())

    def _fill_pairs(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        """Store ``(key, value)`` pairs, checking each against the batch size."""
        bs, dev, store = self._batch_size, self._device, self._tensordict
        n = len(bs)
        if n == 1 and dev is None:
            # The hot path: plain tensors under plain keys, checked on their first dim.
            b0 = bs[0]
            for key, value in pairs:
                if type(value) is Tensor and type(key) is str and key:
                    try:
                        if value.shape[0] == b0:
                            store[key] = value
                            continue
                    except (IndexError, RuntimeError):  # 0-dim or nested: reported below
                        pass
                self._fill_one(key, value)
        elif dev is None and type(self)._fill_one is TensorDict._fill_one:
            # plain tensors under plain keys, checked on their leading dims (a subclass
            # with its own _fill_one, a tensorclass that casts, sees every entry)
            if n == 0:  # no batch dims: any tensor (parameters too) and any unnamed
                # TensorDict fit, without reading a shape
                for key, value in pairs:
                    if (
                        type(key) is str
                        and key
                        and (
                            (isinstance(value, Tensor) and not isinstance(value, NonTensor))
                            or (type(value) is TensorDict and value._names is None)
                        )
                    ):
                        store[key] = value
                        continue
                    self._fill_one(key, value)
                return
            for key, value in pairs:
                if type(value) is Tensor and type(key) is str and key:
                    try:
                        if value.shape[:n] == bs:
                            store[key] = value
                            continue
                    except RuntimeError:  # a nested tensor: checked below
                        pass
                self._fill_one(key, value)
        else:
            for key, value in pairs:
                self._fill_one(key, value)

    def _fill_one(self, key: Any, value: Any) -> None:
        bs, dev = self._batch_size, self._device
        if type(key) is not str or not key:
            self._set_path(key_path(key, "TensorDict"), value, "TensorDict")
        elif isinstance(value, Tensor) and (dev is None or value.device == dev):
            try:
                shape = value.shape
            except RuntimeError as err:  # a strided nested tensor: no shape to read
                check_unreadable_shape("TensorDict", key, value, bs, err)
            else:
                if isinstance(value, NonTensor):  # an UnbatchedTensor: follows the batch
                    value = value._with(bs, dev)
                elif not starts_with(shape, bs):
                    raise leaf_shape_error("TensorDict", key, shape, bs)
            self._tensordict[key] = value
        elif type(value) is dict:
            child = self._new_unsafe({}, bs, dev, self._names)
            child._fill(value)
            self._tensordict[key] = child
        else:
            self._set_str(key, value, "TensorDict")

    @classmethod
    def _new_unsafe(
        cls,
        entries: dict[str, Any],
        batch_size: torch.Size,
        device: torch.device | None,
        names: list[str | None] | None,
    ) -> TensorDict:
        """Build without checks, from entries known to satisfy the batch-size rule."""
        td = cls.__new__(cls)
        td._tensordict = entries
        td._batch_size = batch_size
        td._device = device
        td._names = names
        td._is_locked = False
        return td

    def _checked_from_entries(
        self,
        entries: dict[str, Any],
        batch_size: torch.Size,
        device: torch.device | None,
        names: list[str | None] | None,
        call: str,
        prefix: tuple[str, ...] = (),
    ) -> TensorDict:
        """Build from entries computed by a user function: leaves are checked and moved."""
        n = len(batch_size)
        for key, value in entries.items():
            if isinstance(value, Tensor):
                if device is not None and value.device != device:
                    value = entries[key] = value.to(device)
                if type(value) is not Tensor and isinstance(value, NonTensor):
                    entries[key] = value._with(batch_size, device)  # an UnbatchedTensor
                elif n and value.shape[:n] != batch_size:
                    raise leaf_shape_error(call, join_path((*prefix, key)), value.shape, batch_size)
            elif isinstance(value, NonTensor):
                continue
            elif isinstance(value, CollectionPrimitives):  # nested, or a ragged lazy stack
                if not starts_with(value._batch_size, batch_size):
                    raise leaf_shape_error(
                        call, join_path((*prefix, key)), value._batch_size, batch_size
                    )
            else:
                entries[key] = non_tensor_result(call, value, (*prefix, key), batch_size, device)
        return self._new_unsafe(entries, batch_size, device, names)

    @classmethod
    def from_dict(
        cls,
        d: Mapping[NestedKey, Any],
        batch_size: BatchSizeLike = None,
        device: DeviceLike = None,
        batch_dims: int | None = None,
        names: Sequence[str | None] | None = None,
        *,
        auto_batch_size: bool | None = None,
    ) -> TensorDict:
        """Build from a (nested) dict, as upstream: ``batch_size`` when given; else, with
        ``auto_batch_size=True`` or ``batch_dims``, the common leading shape (at most
        ``batch_dims`` dims, nested levels getting their own); else an empty batch size.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> d = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
        >>> TensorDict.from_dict(d).batch_size
        torch.Size([])
        >>> td = TensorDict.from_dict(d, auto_batch_size=True)
        >>> td.batch_size, td["b"].batch_size
        (torch.Size([3, 4]), torch.Size([3, 4, 5]))
        >>> TensorDict.from_dict({"a": torch.zeros(3, 4)}, batch_dims=1).batch_size
        torch.Size([3])
        """
        if batch_size is not None and batch_dims is not None:
            raise ValueError("TensorDict.from_dict: pass batch_size or batch_dims, not both")
        if batch_size is not None:
            try:
                return cls(d, batch_size=batch_size, device=device, names=names)
            except BatchDimMismatchError:
                # as upstream: a Python scalar (what ``to_dict`` writes a one-value
                # non-tensor number as) cannot carry a batch size, so it is read as one
                wrapped = _scalars_as_non_tensor(d, as_batch_size(batch_size, "from_dict"))
                if wrapped is None:
                    raise
            return cls(wrapped, batch_size=batch_size, device=device, names=names)
        if auto_batch_size is None:
            auto_batch_size = batch_dims is not None
        tree: dict[str, Any] = {}
        _merge_tree(tree, (), d)
        converted = {
            key: cls.from_dict(
                value, device=device, batch_dims=batch_dims, auto_batch_size=auto_batch_size
            )
            if type(value) is dict
            else value
            for key, value in tree.items()
        }
        if not auto_batch_size:
            return cls(converted, batch_size=[], device=device, names=names)
        shapes = [s for s in (_entry_shape(v) for v in _flat_values(converted)) if s is not None]
        common = _common_prefix(shapes)
        if batch_dims is not None:
            common = common[:batch_dims]
        return cls(converted, batch_size=common, device=device, names=names)

    # ----------------------------------------------------------------- properties
    @property
    def batch_size(self) -> torch.Size:
        """The leading shape shared by every leaf; assigning it re-validates all leaves."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new: BatchSizeLike) -> None:
        size = as_batch_size(new, self._call("batch_size"))
        if self._is_locked and size != self._batch_size:
            raise RuntimeError(
                f"{self._call('batch_size')}: cannot change the batch size of a locked TensorDict"
            )
        grow = False
        for value in self._tensordict.values():
            shape = value._batch_size if _is_td(value) else value.shape
            if not isinstance(value, NonTensor) and not starts_with(shape, size):
                grow = True  # a leaf in the way, or a nested level to refine
                break
        if grow:
            bad = misfits(self, size, ())
            if bad:
                raise BatchDimMismatchError(
                    f"{type(self).__name__}.batch_size: cannot set batch_size {tuple(size)}: "
                    f"{misfit_message(bad, size)}"
                )
            grow_nested(self, size)
        for key, value in self._tensordict.items():
            if isinstance(value, NonTensor):
                self._tensordict[key] = value._with(size, value.device)
        if self._names is not None and len(self._names) != len(size):
            # the dims kept keep their names, new trailing dims are unnamed (upstream)
            kept = [*self._names[: len(size)], *[None] * (len(size) - len(self._names))]
            self._names = kept if any(n is not None for n in kept) else None
        self._batch_size = size

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (None for unnamed ones)."""
        if self._names is None:
            return [None] * len(self._batch_size)
        return list(self._names)

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        if value is None:
            self._names = None
            _name_nested(self)
            return
        names = list(value)
        if len(names) != len(self._batch_size):
            raise ValueError(
                f"{type(self).__name__}.names: got {len(names)} names {names} for "
                f"{len(self._batch_size)} batch dims {tuple(self._batch_size)} (the length "
                "of the dimension names must equate the tensordict batch_dims)"
            )
        given = [n for n in names if n is not None]
        if len(set(given)) != len(given):
            raise ValueError(f"{type(self).__name__}.names: names must be unique, got {names}")
        self._names = None if not given else names
        _name_nested(self)

    @property
    def is_locked(self) -> bool:
        """Whether keys may not be added, removed or replaced out of place."""
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        """``td.is_locked = flag`` locks (``lock_()``) or unlocks (``unlock_()``)."""
        self.lock_() if value else self.unlock_()

    # ------------------------------------------------------------- value intake
    def _convert(self, value: Any, key: str, call: str) -> Any:
        """Turn ``value`` into what this TensorDict stores, checking the batch-size rule."""
        bs = self._batch_size
        if isinstance(value, Tensor):
            if self._device is not None and value.device != self._device:
                value = value.to(self._device)
            if type(value) is not Tensor and isinstance(value, NonTensor):
                return value._with(bs, self._device)  # an UnbatchedTensor: any shape
            if bs:
                try:
                    lead = value.shape[: len(bs)]
                except RuntimeError as err:  # a strided nested tensor: no shape to read
                    check_unreadable_shape(call, key, value, bs, err)
                else:
                    if lead != bs:  # (starts_with inlined: every write)
                        raise leaf_shape_error(call, key, value.shape, bs)
            return value
        if _is_td(value):
            if not starts_with(value._batch_size, bs):
                value = _fit_batch(value, bs, call, key)
            if (self._names is not None or value._names is not None) and bs:
                _adopt_names(self, value, call, key)
            if self._device is not None and value._device != self._device:
                value = value.to(self._device)
            return value
        if isinstance(value, NonTensor):
            return value._with(bs, self._device)
        if isinstance(value, CollectionPrimitives):  # a lazy stack
            return _convert_stack(self, value, key, call)
        if is_plain_mapping(value):
            return type(self)(value, batch_size=bs, device=self._device, names=self._names)
        tensor = _as_tensor_or_none(value, self._device)
        if tensor is None and not bs and type(value) is list and not value:
            tensor = torch.tensor([], device=self._device)  # as upstream: an empty tensor
        if tensor is not None:
            if not starts_with(tensor.shape, bs):
                raise leaf_shape_error(call, key, tensor.shape, bs)
            return tensor
        if isinstance(value, list) and (not bs or len(value) == bs[0]) and list_to_stack():
            # a (nested) list shaped like the batch (any list for a 0-dim batch, as
            # upstream): one value per element
            stack = NonTensorStack._from_batch_list(value, max(len(bs), 1), self._device)
            if stack is not None:
                if starts_with(stack.batch_size, bs):
                    return stack
                if len(stack.batch_size) < len(bs):  # too shallow to cover the batch
                    raise leaf_shape_error(call, key, stack.batch_size, bs)
        view = params_view(value)
        if view is not None:  # a TensorDictParams: the TensorDict of its own leaves
            return self._convert(view, key, call)
        return NonTensorData(value, bs, self._device)

    def _check_unlocked(self, call: str, key: object) -> None:
        if self._is_locked:
            raise locked_error(call, key)

    def _subtd(self, part: str, call: str, create: bool) -> TensorDict:
        """The nested TensorDict under ``part``, created empty when missing and ``create``."""
        node = self._tensordict.get(part)
        if node is None:
            if not create:
                raise missing_key_error(call, part, self._tensordict)
            self._check_unlocked(call, part)
            node = self._new_unsafe({}, self._batch_size, self._device, self._names)
            self._tensordict[part] = node
            return node
        if not _is_td(node):
            if isinstance(node, CollectionPrimitives) and not isinstance(node, NonTensor):
                return node  # type: ignore[return-value]  # a ragged lazy stack
            raise KeyThroughLeafError(
                f"{call}: key {part!r} holds a {type(node).__name__}, not a nested TensorDict"
            )
        return node

    def _set_path(self, path: tuple[str, ...], value: Any, call: str) -> None:
        node = self
        locked = self._is_locked
        for i, part in enumerate(path[:-1]):
            if locked and part not in node._tensordict:
                self._check_unlocked(call, join_path(path))
            node = node._subtd(part, call, create=True)
            if not _is_td(node):  # a ragged lazy stack sets the rest in its members
                node.set(path[i + 1 :], value)
                return
            locked = locked or node._is_locked
        if locked:
            raise locked_error(call, join_path(path))
        node._set_str(path[-1], value, call)

    def _set_str(self, key: str, value: Any, call: str) -> None:
        if self._is_locked:
            self._check_unlocked(call, key)
        self._tensordict[key] = self._convert(value, key, call)

    def _set_inplace(
        self, key: str, value: Any, call: str, batched: bool = True, shown: object = None
    ) -> None:
        """Write ``value`` into the existing entry ``key`` without replacing it. A tensor
        value must start with the batch size (``set_``, ``set(inplace=True)``, as upstream);
        ``batched=False`` (``update_``) lets it broadcast over the batch dims too. Errors
        name the key as ``shown`` (the full nested key), else as ``key``."""
        try:
            current = self._tensordict[key]
        except KeyError:
            raise missing_key_error(
                call, key if shown is None else shown, self._tensordict
            ) from None
        name = key if shown is None else shown
        if isinstance(current, Tensor):
            if isinstance(value, (CollectionPrimitives, Mapping, NonTensor)) and not isinstance(
                value, Tensor
            ):
                raise TypeError(
                    f"{call}: key {name!r} holds a tensor; cannot write a "
                    f"{type(value).__name__} into it in place"
                )
            if not isinstance(value, Tensor):
                try:
                    value = torch.as_tensor(value, device=current.device)
                except (TypeError, ValueError, RuntimeError) as err:  # a str, say
                    raise TypeError(
                        f"{call}: key {name!r} holds a tensor; cannot write a "
                        f"{type(value).__name__} into it in place ({err})"
                    ) from None
            try:
                differ = value.shape != current.shape
            except RuntimeError:  # a strided nested tensor: its element shapes must match
                _check_nested_copy(value, current, name, call)
                differ = False
            if differ:
                bs = self._batch_size
                if batched and not starts_with(value.shape, bs):
                    raise leaf_shape_error(call, name, value.shape, bs)
                check_copy_broadcast(value.shape, current.shape, name, call)
            current.copy_(value)  # casts to the leaf's dtype, as Tensor.copy_ and upstream
        elif isinstance(current, NonTensor):
            new = self._convert(value, key, call)
            if not isinstance(new, NonTensor):
                raise TypeError(
                    f"{call}: key {name!r} holds non-tensor data; cannot write a "
                    f"{type(value).__name__} into it in place"
                )
            if getattr(self, "_saved_folder", None) is not None:  # saved: the file too
                from tensordict._memmap_rewrite import write_non_tensor

                write_non_tensor(self, key, new, call)
            else:
                self._tensordict[key] = new
        else:
            if not (_is_mapping(value) or isinstance(value, CollectionPrimitives)):
                raise TypeError(
                    f"{call}: key {name!r} holds a nested TensorDict; got {type(value).__name__}"
                )
            current.update_(value)

    # ----------------------------------------------------------------- reading
    def _get_path_or_none(self, path: tuple[str, ...]) -> Any:
        node: Any = self
        for i, part in enumerate(path):
            if not _is_td(node):
                if i and isinstance(node, CollectionPrimitives):  # under a ragged lazy stack
                    return node._get_path_or_none(path[i:])
                return None
            node = node._tensordict.get(part)
            if node is None:
                return None
        return node

    def _get_path(self, path: tuple[str, ...], call: str) -> Any:
        node: Any = self
        for i, part in enumerate(path):
            if not _is_td(node):
                if i and isinstance(node, CollectionPrimitives):  # under a ragged lazy stack
                    return node.get(path[i:])
                raise KeyThroughLeafError(
                    f"{call}: key {join_path(path)!r}: {join_path(path[:i])!r} holds a "
                    f"{type(node).__name__}, not a nested TensorDict"
                )
            try:
                node = node._tensordict[part]
            except KeyError:
                shown = join_path(path[: i + 1]) if i else part
                raise missing_key_error(call, shown, node._tensordict) from None
        return node

    def _unset_field(self, key: str) -> bool:
        """Whether ``key``, absent, reads as None (an unset tensorclass field); only asked
        once a key is found missing."""
        return False

    def _get_path_or_unset(self, path: tuple[str, ...], call: str) -> Any:
        """``_get_path``, but None where the first missing key on the path is an unset
        tensorclass field (as upstream, ``tc.get(("a", "x"))`` is None while ``a`` is)."""
        try:
            return self._get_path(path, call)
        except KeyError:
            node: Any = self
            for part in path:
                if not _is_td(node):
                    raise
                if part not in node._tensordict:
                    if node._unset_field(part):
                        return None
                    raise
                node = node._tensordict[part]
            raise

    def get(
        self,
        key: NestedKey,
        default: Any = _NO_DEFAULT,
        as_list: bool = False,
        as_padded_tensor: bool = False,
        as_nested_tensor: bool = False,
        padding_side: str = "right",
        padding_value: float = 0.0,
        layout: Any = None,
    ) -> Any:
        """The entry at ``key`` (a NonTensorData wrapper for non-tensor data), or ``default``.

        Keywords such as ``as_list=True`` or ``as_padded_tensor=True`` reach a ragged lazy
        stack on the way (see :meth:`LazyStackedTensorDict.get`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.get("b", None) is None
        True
        """
        if type(key) is str:  # one level: no lazy stack on the way, the keywords do nothing
            try:
                return self._tensordict[key]
            except KeyError:
                if default is _NO_DEFAULT:
                    if set_get_defaults_to_none._state or self._unset_field(key):  # None
                        return None
                    raise missing_key_error(self._call("get"), key, self._tensordict) from None
                return default
        if type(key) is tuple and key and not (as_list or as_padded_tensor or as_nested_tensor):
            node: Any = self  # plain nested keys: a walk down the stores, no path built
            try:
                for part in key:
                    node = node._tensordict[part]
                return node
            except (KeyError, TypeError, AttributeError):  # anything else: the general path
                pass
        if as_list or as_padded_tensor or as_nested_tensor:
            stacked: dict[str, Any] = {"as_list": as_list, "as_padded_tensor": as_padded_tensor}
            stacked.update(as_nested_tensor=as_nested_tensor, padding_side=padding_side)
            stacked.update(padding_value=padding_value, layout=layout)
            return _get_stacked(self, key, default, stacked)
        path = key_path(key, self._call("get"))
        if default is _NO_DEFAULT:
            if set_get_defaults_to_none._state:
                return self._get_path_or_none(path)
            return self._get_path_or_unset(path, self._call("get"))
        value = self._get_path_or_none(path)
        return default if value is None else value

    def __getitem__(self, key: Any) -> Any:
        if key.__class__ is tuple:
            return self._getitem_slow(key)
        try:
            value = self._tensordict[key]
        except (KeyError, TypeError):  # a nested key, an index, or a missing key
            return self._getitem_slow(key)
        cls = value.__class__
        if cls is Tensor:
            return value
        if cls is NonTensorData:
            return value.data
        if isinstance(value, NonTensor):
            if isinstance(value, NonTensorStack) and value.positions.ndim:  # a list writing
                return linked_entry(self, (key,), value)  # through to the entry
            return value._public()
        return value

    def _getitem_slow(self, key: Any) -> Any:
        if isinstance(key, str):
            if self._unset_field(key):
                return None
            call = f"{type(self).__name__}[]"
            raise missing_key_error(call, str.__str__(key), self._tensordict)
        if type(key) is tuple and key and (type(key[0]) is str or is_string_key(key)):
            node: Any = self
            try:
                for part in key:
                    node = node._tensordict[part]
            except (KeyError, TypeError, AttributeError):
                call = f"{type(self).__name__}[]"
                node = self._get_path_or_unset(key_path(key, call), call)
        else:
            return self._index(key)
        if isinstance(node, NonTensor):
            if isinstance(node, NonTensorStack) and node.positions.ndim:
                return linked_entry(self, tuple(key_path(key, "TensorDict[]")), node)
            return node._public()
        return node

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry at ``key`` (the batch size for nested and non-tensor ones)."""
        value = self.get(key)
        return value.shape  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        if type(key) is str:
            return key in self._tensordict
        if not isinstance(key, tuple):
            raise RuntimeError(
                f"TensorDict.__contains__: expected a NestedKey (a str or a tuple of str), "
                f"got {type(key).__name__}; to look for a value, compare the leaves"
            )
        return key in KeysView(self, True, False, None)

    # ----------------------------------------------------------------- writing
    def set(
        self, key: NestedKey, value: Any, inplace: bool = False, *, non_blocking: bool = False
    ) -> TensorDict:
        """Write ``value`` at ``key``, creating nested levels; ``inplace`` copies into the leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2]).set(("a", "b"), torch.ones(2, 3))
        >>> td["a"].batch_size
        torch.Size([2])
        """
        if type(key) is str and key and not inplace:  # a flat key: no path to walk
            self._set_str(key, value, self._call("set"))
            return self
        path = key_path(key, self._call("set"))
        if inplace and self._get_path_or_none(path) is not None:
            node = self
            for part in path[:-1]:
                node = node._subtd(part, self._call("set"), create=False)
            node._set_inplace(path[-1], value, self._call("set"))
        else:
            self._set_path(path, value, self._call("set"))
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        node: Any = self
        leaf_key = key
        if type(key) is not str:
            if isinstance(key, str):  # a str subclass such as a StrEnum member
                call = f"{type(self).__name__}[]="
                self._set_path(key_path(key, call), value, call)
                return
            if type(key) is not tuple or not key or not isinstance(key[0], str):
                self._set_at_index(key, value)
                return
            # walk to the parent of a nested key; missing levels take the slow path
            try:
                for part in key[:-1]:
                    node = node._tensordict[part]
                if node.__class__ is not TensorDict and node._is_tensorclass:
                    node = None  # (a leaf on the way raises AttributeError)
            except (KeyError, TypeError, AttributeError):
                node = None
            leaf_key = key[-1]
        if (
            node is not None
            and type(leaf_key) is str
            and leaf_key
            and (
                type(value) is Tensor
                or (isinstance(value, Tensor) and not isinstance(value, NonTensor))
            )  # (an UnbatchedTensor takes the general path)
            and not node._is_locked
            and not self._is_locked
        ):
            device = node._device
            if device is not None and value.device != device:
                value = value.to(device)
            bs = node._batch_size
            n = len(bs)
            try:
                bad = value.shape[0] != bs[0] if n == 1 else n != 0 and value.shape[:n] != bs
            except IndexError:  # a 0-dim tensor
                bad = True
            except RuntimeError:  # a strided nested tensor: the general path checks it
                call = f"{type(self).__name__}[]="
                self._set_path(key_path(key, call), value, call)
                return
            if bad:
                raise leaf_shape_error(f"{type(self).__name__}[]=", leaf_key, value.shape, bs)
            node._tensordict[leaf_key] = value
        else:
            call = f"{type(self).__name__}[]="
            self._set_path(key_path(key, call), value, call)

    def set_(self, key: NestedKey, value: Any, *, non_blocking: bool = False) -> TensorDict:
        """Copy ``value`` into the existing entry ``key``; its shape and dtype must match.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.zeros(2)
        >>> td = TensorDict({"a": a}, [2]).set_("a", torch.ones(2))
        >>> a
        tensor([1., 1.])
        """
        path = key_path(key, self._call("set_"))
        node = self
        for i, part in enumerate(path[:-1]):
            node = node._subtd(part, self._call("set_"), create=False)
            if not _is_td(node):  # a lazy stack writes the rest of the key into its members
                node.set_(path[i + 1 :], value, non_blocking=non_blocking)
                return self
        node._set_inplace(
            path[-1], value, self._call("set_"), shown=path if len(path) > 1 else None
        )
        return self

    def del_(self, key: NestedKey) -> TensorDict:
        """Remove the entry at ``key``."""
        path = key_path(key, self._call("del_"))
        self._check_unlocked(self._call("del_"), join_path(path))  # before the key, as upstream
        node = self
        for i, part in enumerate(path[:-1]):
            node = node._subtd(part, self._call("del_"), create=False)
            if not _is_td(node):  # a ragged lazy stack removes the rest from its members
                node.del_(path[i + 1 :])
                return self
        if path[-1] not in node._tensordict:
            raise missing_key_error(self._call("del_"), join_path(path), node._tensordict)
        node._check_unlocked(self._call("del_"), join_path(path))
        del node._tensordict[path[-1]]
        return self

    def update(
        self,
        other: Mapping[Any, Any] | TensorDict | None = None,
        inplace: bool = False,
        *,
        clone: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        non_blocking: bool = False,
        is_leaf: Any = None,
        update_batch_size: bool = False,
        **kwargs: Any,
    ) -> TensorDict:
        """Write every entry of ``other``; nested mappings merge into nested TensorDicts.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": torch.zeros(1)}}, [])
        >>> sorted(td.update({"a": {"c": torch.ones(1)}}).keys(include_nested=True), key=str)
        [('a', 'b'), ('a', 'c'), 'a']
        """
        done, other = prepare_update(
            self, other, inplace, clone, keys_to_update, update_batch_size, kwargs,
            lambda source: resize_update(self, source, is_leaf, self._call("update")),
        )  # fmt: skip
        if done is not None:
            return done  # type: ignore[no-any-return]
        items = other._tensordict.items() if _is_td(other) else other.items()
        call = self._call("update")
        for key, value in items:
            if type(value) is Tensor and type(key) is str and key and not inplace:
                self._set_str(key, value, call)  # a plain tensor under a flat key replaces
                continue
            path = key_path(key, call)
            target = self._get_path_or_none(path)
            if (
                _is_td(target)
                and _is_mapping(value)
                and (is_leaf is None or not is_leaf(type(value)))
            ):
                target.update(value, inplace, update_batch_size=update_batch_size, is_leaf=is_leaf)
            elif update_batch_size and _is_ragged(target) and _is_collection(value):
                # a lazy stack keeps its identity and takes the source's batch size
                target.update(value, inplace, update_batch_size=True, is_leaf=is_leaf)
            elif _is_td(target) and _is_ragged(value):  # the dense level becomes lazy too
                dim = value._stack_parts()[0]
                lazy = type(value)(*target.unbind(dim), stack_dim=dim)
                lazy.update(value, inplace, update_batch_size=update_batch_size)
                self._set_path(path, lazy, call)
            elif inplace and target is not None:
                self.set_(path, value)
            else:
                if _is_td(value):  # a structural copy: dst must not share src's nested levels
                    value = value.clone(recurse=False)
                self._set_path(path, value, call)
        return self

    def update_(
        self,
        other: Mapping[Any, Any] | TensorDict | None = None,
        *,
        clone: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> TensorDict:
        """Copy every entry of ``other`` into the existing entries, in place.

        Tensor entries are checked first (every key exists, every value broadcasts to its
        leaf's shape) and then copied by one multi-tensor ``copy_``, which casts to each
        leaf's dtype as ``Tensor.copy_`` does; other entries are written as ``set_`` writes
        them.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
        >>> _ = td.update_({"a": torch.ones(2), "n": {"b": torch.full((2,), 2.0)}})
        >>> td["a"].tolist(), td["n", "b"].tolist()
        ([1.0, 1.0], [2.0, 2.0])
        """
        if kwargs:  # keyword entries, written after ``other``
            self.update_(other, clone=clone, keys_to_update=keys_to_update)
            return self.update_(kwargs, clone=clone, keys_to_update=keys_to_update)
        if other is None:
            return self
        call = self._call("update_")
        if keys_to_update is not None:
            other = update_source(other, False, keys_to_update, call)
        dst: list[Tensor] = []
        src: list[Tensor] = []
        rest: list[tuple[TensorDict, Any, Any]] = []
        self._gather_copies(other, dst, src, rest, call)
        if dst:
            _COPY(dst, src)
        for node, key, value in rest:
            if type(key) is str:
                node._set_inplace(key, value, call, batched=False)
            else:
                node.set_(key, value)
        return self

    def _gather_copies(
        self,
        other: Mapping[Any, Any] | TensorDict,
        dst: list[Tensor],
        src: list[Tensor],
        rest: list[tuple[TensorDict, Any, Any]],
        call: str,
        prefix: tuple[str, ...] = (),
    ) -> None:
        """Sort the writes of ``update_``: matching tensor pairs into ``dst``/``src`` (checked
        here, errors naming the full key below ``prefix``), everything else into ``rest``."""
        store = self._tensordict
        items = other._tensordict.items() if _is_td(other) else other.items()
        for key, value in items:
            if type(key) is not str:  # a nested key: sorted at its own level
                path = key_path(key, call)
                node = self._get_path_or_none(path[:-1])
                if _is_td(node):
                    node._gather_copies({path[-1]: value}, dst, src, rest, call, path[:-1])
                elif node is None:
                    raise missing_key_error(call, (*prefix, *path), store)
                else:  # a lazy stack (or a leaf, which set_ reports) takes it as set_ does
                    rest.append((self, key, value))
                continue
            current = store.get(key)
            if isinstance(current, Tensor):
                if isinstance(value, Tensor):  # copied as Tensor.copy_ does: cast, broadcast
                    try:
                        differ = value.shape != current.shape
                    except RuntimeError:  # a strided nested tensor: written as set_ writes it
                        rest.append((self, key, value))
                        continue
                    if differ:
                        full = (*prefix, key) if prefix else key
                        check_copy_broadcast(value.shape, current.shape, full, call)
                    dst.append(current)
                    src.append(value)
                else:  # raises the error of set_ (or converts a non-tensor value)
                    nested = (*prefix, key) if prefix else None
                    self._set_inplace(key, value, call, batched=False, shown=nested)
            elif _is_td(current) and _is_mapping(value):
                current._gather_copies(value, dst, src, rest, call, (*prefix, key))
            elif current is None:
                raise missing_key_error(call, (*prefix, key) if prefix else key, store)
            else:
                rest.append((self, key, value))

    # -------------------------------------------------------------- containers
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: IsLeaf | None = None,
        *,
        sort: bool = False,
    ) -> KeysView:
        """The keys; nested ones as tuples when ``include_nested``; ``sort=True`` gives a
        list sorted by the ``"."``-joined key.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.zeros(1)}}, [1])
        >>> list(td.keys(include_nested=True, leaves_only=True))
        ['a', ('b', 'c')]
        """
        if sort:
            return sorted(KeysView(self, include_nested, leaves_only, is_leaf), key=sort_key)  # type: ignore[return-value]
        if not include_nested and not leaves_only:  # is_leaf only matters for leaves_only
            try:  # the one kept view, unless __init__ ran again and swapped the storage
                view = self._keys_view
                if view._store is self._tensordict:
                    return view
            except AttributeError:
                pass
            view = FlatKeysView(self._tensordict)
            # the slot itself (a class's own __setattr__ never sees it); dynamo cannot write one
            if not torch.compiler.is_dynamo_compiling():
                _SET_KEYS_VIEW(self, view)
            return view
        return KeysView(self, include_nested, leaves_only, is_leaf)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: IsLeaf | None = None,
        *,
        sort: bool = False,
    ) -> ValuesView | dict_values[str, Any]:
        """The values, in the order of :meth:`keys` (the storage's own view when flat)."""
        if sort:
            items = self.items(include_nested, leaves_only, is_leaf, sort=True)
            return [value for _, value in items]  # type: ignore[return-value]
        if not include_nested and not leaves_only:
            return self._tensordict.values()
        return ValuesView(self, include_nested, leaves_only, is_leaf)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: IsLeaf | None = None,
        *,
        sort: bool = False,
    ) -> ItemsView | dict_items[str, Any]:
        """``(key, value)`` pairs in the order of :meth:`keys` (the storage's own view if flat)."""
        if sort:
            items = ItemsView(self, include_nested, leaves_only, is_leaf)
            return sorted(items, key=lambda kv: sort_key(kv[0]))  # type: ignore[return-value]
        if not include_nested and not leaves_only:
            return self._tensordict.items()
        return ItemsView(self, include_nested, leaves_only, is_leaf)

    # ----------------------------------------------------------------- locking
    def lock_(self) -> TensorDict:
        """Forbid adding, removing or replacing keys (here and in nested TensorDicts)."""
        was = self._is_locked
        self._is_locked = True
        for value in self._tensordict.values():
            if _is_td(value):
                value.lock_()
                note_parent(value, self)
        return record(self, "lock_", (was,), None)

    def unlock_(self) -> TensorDict:
        """Allow keys to change again (here and in nested TensorDicts); a RuntimeError for
        a TensorDict nested in a live, locked one (unlock that one instead)."""
        if self._is_locked and locked_parent(self) is not None:
            raise RuntimeError(
                f"{self._call('unlock_')}: Cannot unlock a tensordict that is part of a "
                "locked graph: this TensorDict is nested in a locked TensorDict; unlock the "
                "parent instead"
            )
        was = self._is_locked
        self._is_locked = False
        for value in self._tensordict.values():
            if _is_td(value):
                forget_parent(value, self)
                value.unlock_()
        return record(self, "unlock_", (was,), None)

    def _apply_impl(
        self,
        fn: Callable[..., Any],
        others: tuple[DenseTensorDictBase, ...],
        key_fn: Callable[[tuple[str, ...]], Any] | None,
        batch_size: BatchSizeLike,
        device: Any,
        names: Any,
        inplace: bool,
        filter_empty: bool | None,
        call_on_nested: bool,
        default: Any = _NO_DEFAULT,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> TensorDict:
        from tensordict._apply import _NOT_GIVEN, ABSENT, apply_nested, leaf_rule

        call = self._call("apply")
        if not all(_is_td(other) for other in others):
            others = tuple(o if o is ABSENT else _dense_other(call, o) for o in others)
        bs = None if batch_size is None else as_batch_size(batch_size, call)
        out = apply_nested(
            self,
            fn,
            others,
            batch_size=bs,
            device=_NOT_GIVEN if device is None else as_device(device),
            names=_NOT_GIVEN if names is None else list(names),
            filter_empty=filter_empty,
            call_on_nested=call_on_nested,
            key_fn=key_fn,
            prefix=(),
            call=call,
            default=default,
            is_leaf=None if is_leaf is None else leaf_rule(is_leaf),
        )
        assert out is not None
        if names is not None:
            out.names = names
        if inplace:
            self.update_(out)
            return self
        return out

    def __repr__(self) -> str:
        return td_repr(self)

    # ---------------------------------------------------- primitives (dense storage)
    def _tensor_leaves(self, out: list[Tensor]) -> list[Tensor]:
        return tensor_leaves(self, out)

    def _rebuild(self, leaves: Iterator[Tensor], check: str | None = None) -> Any:
        return rebuild(self, leaves, check)

    def _other_leaves(
        self, call: str, other: CollectionPrimitives, extra_ok: bool = False
    ) -> list[Tensor]:
        return others_leaves(call, self, other, extra_ok)

    def _per_member(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self, *args)

    def _as_dense(self, call: str) -> TensorDict:
        return self

    def _stack_parts(self) -> None:
        return None

    def _remap(
        self,
        call: str,
        fn: Callable[[Any], Any],
        new_bs: torch.Size,
        names: Names,
        nontensor: Callable[[NonTensor], NonTensor] | None = None,
    ) -> Any:
        """Apply ``fn`` to every tensor and nested collection; non-tensors follow the batch
        (``fn`` applied to their positions, or ``nontensor`` when values need care)."""
        entries: dict[str, Any] = {}
        for key, value in self._tensordict.items():
            if type(value) is Tensor or not isinstance(value, NonTensor):
                entries[key] = fn(value)
            elif nontensor is not None and not isinstance(value, Tensor):  # (Unbatched: below)
                entries[key] = nontensor(value)
            else:
                entries[key] = value._remap(fn, new_bs)
        return self._new_unsafe(entries, new_bs, self._device, names)

    def _remap_many(
        self,
        call: str,
        fn: Callable[[Any], Sequence[Any]],
        new_bss: Sequence[torch.Size],
        names: Names,
    ) -> tuple[Any, ...]:
        """Like :meth:`_remap` for ops with several outputs (split, chunk, unbind)."""
        parts: list[dict[str, Any]] = [{} for _ in new_bss]
        for key, value in self._tensordict.items():
            if isinstance(value, NonTensor):
                for part, piece in zip(parts, value._remap_many(fn, new_bss), strict=True):
                    part[key] = piece
            else:
                for part, piece in zip(parts, fn(value), strict=True):
                    part[key] = piece
        return tuple(
            self._new_unsafe(part, bs, self._device, None if names is None else list(names))
            for part, bs in zip(parts, new_bss, strict=True)
        )


# Writes TensorDict's ``_keys_view`` slot directly (a subclass may define __setattr__).
_SET_KEYS_VIEW: Callable[[TensorDict, FlatKeysView], None] = TensorDict.__dict__[
    "_keys_view"
].__set__


def _get_stacked(td: TensorDict, key: NestedKey, default: Any, stacked: dict[str, Any]) -> Any:
    """``get`` with the keywords of a lazy stack's get, handed to the first one on the path."""
    path = key_path(key, td._call("get"))
    node: Any = td
    for i, part in enumerate(path):
        if not _is_td(node):
            if i and isinstance(node, CollectionPrimitives):
                return node.get(path[i:], default, **stacked)
            break
        node = node._tensordict.get(part)
        if node is None:
            break
    return td.get(key) if default is _NO_DEFAULT else td.get(key, default)


def _convert_stack(td: TensorDict, value: Any, key: str, call: str) -> Any:
    """A lazy stack as ``td`` stores it: dense when its members share one structure, else
    kept as the stack itself (a ragged entry), its batch size checked like a nested one's."""
    try:
        dense = value._as_dense(call)
    except RuntimeError:
        dense = None
    if dense is not None:
        return td._convert(dense, key, call)
    if not starts_with(value._batch_size, td._batch_size):
        raise leaf_shape_error(call, key, value._batch_size, td._batch_size)
    if td._device is not None and value._device != td._device:
        value = value.to(td._device)
    return value


def _merge_tree(tree: dict[str, Any], prefix: tuple[str, ...], d: Mapping[Any, Any]) -> None:
    """Place the entries of ``d`` (tuple keys, nested mappings) into one nested dict."""
    for key, value in d.items():
        path = (*prefix, *key_path(key, "TensorDict.from_dict"))
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if type(node) is not dict:
                raise ValueError(f"TensorDict.from_dict: key {path!r} needs {part!r} to be nested")
        if is_plain_mapping(value):
            child = node.setdefault(path[-1], {})
            if type(child) is not dict:
                raise ValueError(f"TensorDict.from_dict: key {join_path(path)!r} is given twice")
            _merge_tree(tree, path, value)
        elif path[-1] in node:
            raise ValueError(f"TensorDict.from_dict: key {join_path(path)!r} is given twice")
        else:
            node[path[-1]] = value


def _flat_values(d: Mapping[str, Any]) -> Iterator[Any]:
    for value in d.values():
        if is_plain_mapping(value):
            yield from _flat_values(value)
        else:
            yield value


def _entry_shape(value: Any) -> torch.Size | None:
    if isinstance(value, Tensor):
        return None if isinstance(value, NonTensor) else value.shape  # (Unbatched: no batch)
    if _is_td(value):
        return value._batch_size
    tensor = _as_tensor_or_none(value, None)
    if tensor is None and type(value) is list and value and list_to_stack():
        try:  # a list of non-tensor values: one per batch element, as upstream
            return NonTensorStack.from_list(value).batch_size
        except ValueError:
            return None
    return None if tensor is None else tensor.shape


def _common_prefix(shapes: list[torch.Size]) -> torch.Size:
    if not shapes:
        return torch.Size([])
    first = shapes[0]
    n = min(len(s) for s in shapes)
    for i in range(n):
        if any(s[i] != first[i] for s in shapes):
            return first[:i]
    return first[:n]


def _dense_other(call: str, other: Any) -> DenseTensorDictBase:
    """A dense TensorDict for an ``apply`` operand: another collection (a lazy stack) is
    densified, which names its differing keys if it cannot be."""
    if _is_td(other):
        return other
    if isinstance(other, CollectionPrimitives):
        return other._as_dense(call)
    raise TypeError(f"{call}: the other arguments must be TensorDicts, got {type(other).__name__}")


def _check_minus_one_given(td: TensorDict) -> None:
    """A -1 in a new TensorDict's batch size must be given by an entry: a nested tensor
    leaf (checked against it on the way in) or a nested collection with -1 there."""
    for value in td._tensordict.values():
        if isinstance(value, Tensor) and value.is_nested:
            return
        if not isinstance(value, NonTensor) and -1 in getattr(value, "batch_size", ()):
            return
    raise ValueError(
        f"TensorDict: batch_size {tuple(td._batch_size)} holds -1 (a ragged dim) but no "
        "nested tensor leaf differs in size there; give the dim its size"
    )


def _as_tensor_or_none(value: Any, device: torch.device | None) -> Tensor | None:
    """Numbers, numeric sequences and numeric numpy arrays as tensors; None for the rest."""
    if isinstance(value, _NUMBER_TYPES):
        return torch.tensor(value, device=device)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biufc":
            return torch.as_tensor(value, device=device)
        return None
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return torch.as_tensor(value, device=device)
    if isinstance(value, (list, tuple)) and value:
        try:
            return torch.as_tensor(value, device=device)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


register_type("TensorDict", TensorDict)
