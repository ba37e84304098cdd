"""LazyStackedTensorDict: a stack that keeps its member TensorDicts (heterogeneous stacks).

It implements the primitives of :class:`~tensordict.TensorDictBase` by visiting its
members, and inherits every operation from it. What is its own is the index algebra of
a stack: indexing and the batch-dim moves that keep members whole (unbind, permute,
unsqueeze, split, ...) are translated to the members. An operation that would mix
elements of members of different structure (a reshape across the stack dim, say)
densifies when the members share one structure and raises otherwise, naming the
operation and the keys that differ.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tensordict._apply import ABSENT
from tensordict._base import TensorDictBase
from tensordict._batch import (
    BatchDimMismatchError,
    KeysMismatchError,
    StackDimError,
    check_copy_broadcast,
    dim_error,
    leaf_shape_error,
    permute_args,
    starts_with,
)
from tensordict._context import record
from tensordict._entry_ops import update_source
from tensordict._format import register_type
from tensordict._index import check_broadcast
from tensordict._keys import (
    NO_DEFAULT,
    KeyThroughLeafError,
    NestedKey,
    is_string_key,
    join_path,
    key_path,
    locked_error,
    sort_key,
    unravel_key,
)
from tensordict._lazy_fields import MISSING, class_attribute, is_field, read_field
from tensordict._lazy_index import (
    false_scalar,
    index_members,
    index_new_dims,
    split_index,
    whole_index,
)
from tensordict._lazy_ragged import RaggedShapeOps
from tensordict._lock_keep import keeps_lock
from tensordict._mapping import is_plain_mapping
from tensordict._modules import params_view
from tensordict._nontensor import NonTensor
from tensordict._primitives import CollectionPrimitives, Names, slot_setters
from tensordict._ragged import check_not_ragged, ragged_batch_size, ragged_error
from tensordict._ragged_pad import nested_of, padded_stack
from tensordict._repr import td_repr
from tensordict._shape import _dims_arg, _infer_shape
from tensordict._stack import _stack_nontensor, plain_stack, same_structure
from tensordict._switches import list_to_stack, set_get_defaults_to_none, set_lazy_legacy
from tensordict._td import TensorDict, _as_tensor_or_none, _fit_batch
from tensordict._update_batch import prepare_update
from tensordict._views import with_non_tensor

_NO_DEFAULT: Any = NO_DEFAULT  # one sentinel for every get(key, default)
_DYNAMO = torch.compiler.is_dynamo_compiling
# the stack's own public attributes, never taken for a field of its members
_OWN_ATTRS = frozenset({"stack_dim", "tensordicts", "batch_size", "names", "device", "is_locked"})


def _norm(call: str, dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise dim_error(call, dim, ndim)
    return dim % ndim


def lazy_stack(tds: Sequence[Any], dim: int = 0, *, out: Any = None, **kwargs: Any) -> Any:
    """Stack TensorDicts lazily along a new batch dim, whatever their structures
    (``out``, ``stack_dim_name``, ...: see :meth:`TensorDictBase.lazy_stack`).

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> s = lazy_stack([TensorDict({"a": torch.zeros(3)}), TensorDict({"a": torch.ones(4)})])
    >>> s.batch_size, s.get_item_shape("a")
    (torch.Size([2]), torch.Size([2, -1]))
    >>> [x.shape for x in s.get("a", as_list=True)]
    [torch.Size([3]), torch.Size([4])]
    """
    if out is None and not kwargs and not (tds and isinstance(tds[0], Tensor)):
        return LazyStackedTensorDict(*tds, stack_dim=dim)
    return LazyStackedTensorDict.lazy_stack(tds, dim, out=out, **kwargs)


class _Keys(list):  # type: ignore[type-arg]
    """A lazy stack's keys: a list whose ``in`` unravels a nested key first, as a
    TensorDict's keys view does (``("a", ("b",)) in s.keys(True)``)."""

    def __contains__(self, key: object) -> bool:
        if type(key) is not str and isinstance(key, tuple):
            try:
                key = unravel_key(key)
            except (TypeError, ValueError):
                return False
        return list.__contains__(self, key)


def _refuse_through_leaf(member: Any, path: tuple[str, ...], call: str) -> None:
    """Raise the member's KeyThroughLeafError (a KeyError and upstream's ValueError) when
    ``path`` runs through one of its leaves; return when the key is only missing."""
    try:
        member.get(path)
    except KeyThroughLeafError as err:
        raise KeyThroughLeafError(f"{call}: {err.args[0].split(': ', 1)[-1]}") from None
    except KeyError:
        pass


class LazyStackedTensorDict(RaggedShapeOps, TensorDictBase):
    """A stack of TensorDicts kept as its members, which may differ in structure.

    Members share a number of batch dims; where their sizes differ the stack's batch
    size holds -1 (a ragged dim: indexed member by member, refused by the operations
    that need one size there). Leaves may differ in shape (ragged dims show as -1 in
    :meth:`get_item_shape`) and keys may be present in only some members.
    Element-wise operations visit the members; an operation that would mix elements of
    members of different structure (a reshape across the stack dim) densifies when the
    members share one structure and raises otherwise.

    Constructor keywords besides ``stack_dim``: ``batch_size`` and ``device`` (an empty
    stack's, or checked/moved to), ``stack_dim_name`` (the stack dim's name), ``names``
    (an empty stack's stack-dim name, the others must be None; with members it is
    ignored with a ``FutureWarning``, as upstream 0.15), ``strict_shape`` (refuse members
    whose batch sizes differ) and upstream's deprecated
    ``hook_out``/``hook_in`` (refused with ``NotImplementedError``).

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> stack = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
    >>> stack.batch_size, stack.get_item_shape("a"), stack[1]["a"].shape
    (torch.Size([2]), torch.Size([2, -1]), torch.Size([3]))
    >>> (stack + 1)[0]["a"]
    tensor([1., 1.])
    """

    __slots__ = ("_member_bs", "_stack_name", "stack_dim", "tensordicts")
    _abstract = False
    tensordicts: list[Any]
    stack_dim: int
    _member_bs: torch.Size
    _stack_name: str | None

    def __init__(
        self,
        *tensordicts: Any,
        stack_dim: int = 0,
        hook_out: Any = None,
        hook_in: Any = None,
        batch_size: Any = None,
        device: Any = None,
        names: Sequence[str | None] | None = None,
        stack_dim_name: str | None = None,
        strict_shape: bool = False,
    ) -> None:
        call = type(self).__name__
        if hook_out is not None or hook_in is not None:
            raise NotImplementedError(
                f"{call}: hook_out / hook_in (deprecated upstream, part of its vmap support "
                "of lazy stacks) are not supported; vmap takes lazy stacks without them"
            )
        if len(tensordicts) == 1 and isinstance(tensordicts[0], (list, tuple)):
            tensordicts = tuple(tensordicts[0])  # the members as one sequence, too
        tds = list(tensordicts)
        ragged = False
        for i, td in enumerate(tds):
            if not isinstance(td, CollectionPrimitives):
                # a TensorDictParams member: the TensorDict of its own leaves (no copy)
                tds[i] = td = params_view(td)
                if td is None:
                    name = type(tensordicts[i]).__name__
                    raise TypeError(f"{call}: member {i} is a {name}, not a TensorDict")
            if td.batch_size != tds[0].batch_size:
                ragged = True
        if ragged:  # members of one number of dims that differ in some: -1 at those
            member_bs = ragged_batch_size(call, [td.batch_size for td in tds], strict_shape)
        elif tds:
            member_bs = tds[0].batch_size
        elif batch_size is not None:  # an empty stack of a known batch size
            full = torch.Size(batch_size)
            if -len(full) <= stack_dim < len(full) and full[stack_dim] == 0:
                d = stack_dim % len(full)  # the stack's own batch size, 0 at the stack dim
                member_bs = torch.Size([*full[:d], *full[d + 1 :]])
            else:  # the members' batch size (upstream's reading)
                member_bs = full
            batch_size = None
        else:
            member_bs = torch.Size([])
        if not -len(member_bs) - 1 <= stack_dim <= len(member_bs):
            raise StackDimError(dim_error(call, stack_dim, len(member_bs) + 1).args[0])
        dim = stack_dim % (len(member_bs) + 1)
        bs = torch.Size([*member_bs[:dim], len(tds), *member_bs[dim:]])
        if batch_size is not None and torch.Size(batch_size) != bs:
            raise ValueError(
                f"{call}: batch_size {tuple(batch_size)} does not match the stack's {tuple(bs)}"
            )
        first = tds[0].device if tds else None
        own_device = first if all(td.device == first for td in tds) else None
        if not tds and device is not None:
            own_device = torch.device(device)
            device = None
        # written past the class's __setattr__ (which looks for a member field first)
        if _DYNAMO():  # dynamo traces object.__setattr__, not a slot descriptor's __set__
            for name, value in zip(_INIT_SLOTS, (dim, tds, member_bs, bs, own_device), strict=True):
                object.__setattr__(self, name, value)
            for name in ("_names", "_stack_name"):
                object.__setattr__(self, name, None)
            object.__setattr__(self, "_is_locked", False)
        else:
            _SET_DIM(self, dim)
            _SET_MEMBERS(self, tds)
            _SET_MEMBER_BS(self, member_bs)
            _SET_BS(self, bs)
            _SET_DEVICE(self, own_device)
            _SET_NAMES(self, None)  # the names live on the members; the stack dim's: below
            _SET_STACK_NAME(self, None)
            _SET_LOCKED(self, False)
        if device is not None:
            moved = self.to(device)
            self.tensordicts, self._device = moved.tensordicts, moved._device
        if names is not None:
            if tds:  # as upstream 0.15: the members' names stand, the argument is ignored
                warnings.warn(
                    f"{call}: names is ignored when members are given (their names are the "
                    "stack's); pass stack_dim_name, or set names on the stack",
                    FutureWarning,
                    stacklevel=2,
                )
            else:  # no member holds the other dims' names: only the stack dim's is kept
                given = list(names)
                if len(given) == len(self._batch_size) and any(
                    n is not None for i, n in enumerate(given) if i != self.stack_dim
                ):
                    raise ValueError(
                        f"{call}: an empty stack keeps only the stack dim's name (it has no "
                        f"members to hold the others); got names {given}"
                    )
                self.names = names
        if stack_dim_name is not None:
            taken = [n for n in self.names if n is not None]
            if stack_dim_name in taken:
                raise ValueError(
                    f"{call}: stack_dim_name {stack_dim_name!r} is already the name of another "
                    f"dim ({self.names})"
                )
            self._stack_name = stack_dim_name

    @classmethod
    def from_dict(
        cls,
        input_dict: Any,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Sequence[str | None] | None = None,
        *,
        auto_batch_size: bool | None = None,
        stack_dim: int = 0,
        stack_dim_name: str | None = None,
    ) -> Any:
        """A lazy stack of one TensorDict per dict of a list (or of a dict keyed ``"0"``,
        ``"1"``, ...); the members may differ in keys and shapes. ``batch_size`` and
        ``names`` (with the stack dim's, or ``stack_dim_name``) describe the stack; any
        other dict is read as :meth:`TensorDict.from_dict` reads it.

        >>> import torch
        >>> from tensordict import LazyStackedTensorDict
        >>> td = LazyStackedTensorDict.from_dict(
        ...     [{"a": torch.zeros(3)}, {"a": torch.zeros(4)}], stack_dim_name="t"
        ... )
        >>> td.batch_size, td.names, td[1]["a"].shape
        (torch.Size([2]), ['t'], torch.Size([4]))
        """
        call = f"{cls.__name__}.from_dict"
        if isinstance(input_dict, Mapping):
            if list(input_dict) != [str(i) for i in range(len(input_dict))] or not input_dict:
                return super().from_dict(
                    input_dict, batch_size, device, batch_dims, names,
                    auto_batch_size=auto_batch_size,
                )  # fmt: skip
            input_dict = list(input_dict.values())
        member_names = None
        if names is not None:
            if stack_dim_name is not None:
                raise ValueError(f"{call}: pass names or stack_dim_name, not both")
            rest = list(names)
            stack_dim_name = rest.pop(stack_dim)
            member_names = rest if batch_size is not None else None
        members = [
            TensorDict.from_dict(
                d, batch_size, device, batch_dims, member_names, auto_batch_size=auto_batch_size
            )
            for d in input_dict
        ]
        if not members:
            raise ValueError(f"{call}: got no dicts to stack")
        return cls(*members, stack_dim=stack_dim, stack_dim_name=stack_dim_name)

    # ------------------------------------------------------------ properties
    @property
    def batch_size(self) -> torch.Size:
        """The members' batch size with the stack dim inserted; -1 at a dim where the
        members' sizes differ (a ragged dim)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        # the members' batch sizes make it: only the size it already has is taken, as upstream
        try:
            same = torch.Size(value) == self._batch_size
        except (TypeError, ValueError):
            same = False
        if not same:
            raise RuntimeError(
                f"{self._call('batch_size')}: cannot set batch size {value!r} on a lazy stack "
                f"of batch size {list(self._batch_size)}: its members' batch sizes make it. "
                "Build a TensorDict first (td = td.to_tensordict()), then set its batch size."
            )

    def numel(self) -> int:
        """The number of elements of the batch (the members' total over a ragged dim)."""
        if -1 in self._batch_size:
            return sum(m.numel() for m in self.tensordicts)
        return self._batch_size.numel()

    def __len__(self) -> int:
        n = self._batch_size[0] if self._batch_size else 0
        if n < 0:  # a ragged first dim has no one length
            raise ragged_error("len()", self, (0,))
        return n

    def _names_kept(self) -> list[str | None] | None:
        names = self.names
        return names if any(n is not None for n in names) else None

    @property
    def names(self) -> list[str | None]:
        """The members' dimension names, with the stack dim's own (None unless set).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict(batch_size=[2], names=["x"])] * 3, 1)
        >>> s.names
        ['x', None]
        >>> s.names = ["x", "copies"]
        >>> s.names, s.tensordicts[0].names
        (['x', 'copies'], ['x'])
        """
        inner = self.tensordicts[0].names if self.tensordicts else [None] * len(self._member_bs)
        inner.insert(self.stack_dim, getattr(self, "_stack_name", None))
        return inner

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        call = self._call("names")
        if value is None:
            self._stack_name = None
            for member in self.tensordicts:
                member.names = None
            return
        names = list(value)
        if len(names) != len(self._batch_size):
            raise ValueError(
                f"{call}: got {len(names)} names {names} for {len(self._batch_size)} batch "
                f"dims {tuple(self._batch_size)}"
            )
        given = [n for n in names if n is not None]
        if len(set(given)) != len(given):
            raise ValueError(f"{call}: names must be unique, got {names}")
        self._stack_name = names.pop(self.stack_dim)
        for member in self.tensordicts:
            member.names = names

    @property
    def is_locked(self) -> bool:
        """Whether every member is locked."""
        return all(m.is_locked for m in self.tensordicts) if self.tensordicts else self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        """``td.is_locked = flag`` locks (``lock_()``) or unlocks (``unlock_()``)."""
        self.lock_() if value else self.unlock_()

    def __getattr__(self, name: str) -> Any:
        """A field of the tensorclass / TypedTensorDict instances stacked here, read as a
        stacked entry (``lazy_stack([p, q]).x``, as upstream reads it on its stack of
        instances; a non-tensor field reads as its values), or a method, property or class
        attribute their class defines, bound to the stack."""
        if not name.startswith("_"):
            try:
                object.__getattribute__(self, "tensordicts")
            except AttributeError:  # (not initialised yet: unpickling, copying)
                pass
            else:
                if is_field(self, name):
                    return read_field(self, name)
                attr = class_attribute(self, name)  # a method of the instances' class
                if attr is not MISSING:
                    return attr
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        """``stack.x = v`` for a field ``x`` of the instances stacked here sets the entry
        (each member gets its slice), as ``instance.x = v`` does; any other name is an
        ordinary attribute."""
        if name[:1] != "_" and name not in _OWN_ATTRS and is_field(self, name):
            self.set(name, value)
            return
        object.__setattr__(self, name, value)

    def _restack(
        self, members: Sequence[Any], stack_dim: int | None = None, keep_name: bool = True
    ) -> Any:
        """A stack of ``members`` along ``stack_dim`` (this stack's by default); the stack
        dim keeps its name where it moved (a permute, an unsqueeze before it) unless
        ``keep_name`` is False (its elements were mixed with other dims')."""
        out = type(self)(*members, stack_dim=self.stack_dim if stack_dim is None else stack_dim)
        if keep_name and self._stack_name is not None:
            out._stack_name = self._stack_name
        return out

    # ----------------------------------------------------------------- keys
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> list[str | tuple[str, ...]]:
        """The keys present in every member, in the first member's order (``sort=True``:
        sorted by the ``"."``-joined key)."""
        if sort:
            return _Keys(sorted(self.keys(include_nested, leaves_only, is_leaf), key=sort_key))
        if not self.tensordicts:
            return _Keys()
        first, *others = self.tensordicts
        keys = [*first.keys(include_nested, leaves_only, is_leaf)]
        for other in others:  # one walk per member; filter only where members differ
            theirs = set(other.keys(include_nested, leaves_only, is_leaf))
            if len(theirs) != len(keys) or not theirs.issuperset(keys):
                keys = [k for k in keys if k in theirs]
        return _Keys(keys)

    valid_keys = keys  # upstream's name for the keys every member has

    @property
    def hook_out(self) -> None:
        """Upstream's hook on each tensor read from a lazy stack under ``vmap`` (it adds the
        vmapped dim back); always None here, where a lazy stack is vmapped member by member
        and no tensor needs one. Read-only."""
        return None

    @property
    def hook_in(self) -> None:
        """The converse of :attr:`hook_out` (removes the vmapped dim); always None here."""
        return None

    def partial_keys(self, include_nested: bool = False) -> list[str | tuple[str, ...]]:
        """Keys present in some members but not all."""
        every = set(self.keys(include_nested))
        seen: dict[Any, None] = {}
        for m in self.tensordicts:
            for k in m.keys(include_nested):
                if k not in every:
                    seen[k] = None
        return list(seen)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> Iterator[Any]:
        """``(key, stacked value)`` for the common keys."""
        keys = self.keys(include_nested, leaves_only, is_leaf, sort=sort)
        return ((k, self.get(k)) for k in keys)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> Iterator[Any]:
        """Stacked values of the common keys."""
        return (self.get(k) for k in self.keys(include_nested, leaves_only, is_leaf, sort=sort))

    def __contains__(self, key: object) -> bool:
        if isinstance(key, CollectionPrimitives):  # a member, by identity
            return any(key is m for m in self.tensordicts)
        return all(key in m for m in self.tensordicts)

    # ------------------------------------------------------------------ get
    def get(
        self,
        key: NestedKey,
        default: Any = _NO_DEFAULT,
        *,
        as_list: bool = False,
        as_padded_tensor: bool = False,
        as_nested_tensor: bool = False,
        padding_side: str = "right",
        padding_value: float = 0.0,
        layout: Any = None,
    ) -> Any:
        """The stacked entry at ``key``.

        Tensors of one shape are stacked (a copy); nested TensorDicts give a lazy stack
        of the members' nested TensorDicts (writes reach the members). Ragged tensors
        need ``as_list``, ``as_padded_tensor`` or ``as_nested_tensor``.
        """
        call = self._call("get")
        if padding_side not in ("left", "right"):
            raise ValueError(
                f"{call}: padding_side must be 'left' or 'right', got {padding_side!r}"
            )
        path = key_path(key, call)
        missing = [i for i, m in enumerate(self.tensordicts) if not _holds(m, path)]
        if missing:
            if default is not _NO_DEFAULT:
                return default
            if set_get_defaults_to_none._state:  # switched on: None
                return None
            if len(missing) == len(self.tensordicts) and _unset_in_all(self.tensordicts, path):
                return None  # a tensorclass field unset in every member: None, as upstream
            _refuse_through_leaf(self.tensordicts[missing[0]], path, call)
            raise KeyError(
                f"{call}: key {join_path(path)!r} is missing from members {missing} "
                f"of {len(self.tensordicts)}"
            )
        if as_list or as_padded_tensor:  # lazy members answer in the same form
            kw: dict[str, Any] = {"as_list": as_list, "as_padded_tensor": as_padded_tensor}
            kw.update(padding_side=padding_side, padding_value=padding_value)
            values = [
                m.get(path, **kw) if m._stack_parts() is not None else m.get(path)
                for m in self.tensordicts
            ]
        else:
            values = [m.get(path) for m in self.tensordicts]
        if as_list:
            return values
        if not values:
            raise KeyError(f"{call}: key {join_path(path)!r}: the stack has no members")
        first = values[0]
        if isinstance(first, NonTensor):  # (an UnbatchedTensor too)
            inner = values[0].batch_size
            d = self.stack_dim
            return _stack_nontensor(values, d, torch.Size([*inner[:d], len(values), *inner[d:]]))
        if isinstance(first, Tensor):
            if as_padded_tensor:
                return padded_stack(values, self.stack_dim, padding_value, padding_side)
            if as_nested_tensor:
                if self.stack_dim != 0:
                    raise ValueError(f"{call}: as_nested_tensor needs stack_dim=0")
                return nested_of(values)
            if any(v.shape != first.shape for v in values):
                raise RuntimeError(
                    f"{call}: Failed to stack tensors within a tensordict: key "
                    f"{join_path(path)!r} has shapes "
                    f"{[tuple(v.shape) for v in values]} across members; pass as_list=True, "
                    "as_padded_tensor=True or as_nested_tensor=True"
                )
            return torch.stack(values, self.stack_dim)
        return self._restack(values)

    def get_nestedtensor(
        self, key: NestedKey, default: Any = _NO_DEFAULT, *, layout: Any = None
    ) -> Any:
        """The entry at ``key`` as a nested tensor (members' shapes may differ).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3))])
        >>> s.get_nestedtensor("a").is_nested
        True
        """
        if self.stack_dim != 0:
            raise RuntimeError(
                f"{self._call('get_nestedtensor')}: LazyStackedTensorDict.get_nestedtensor can "
                f"only be called when the stack_dim is 0; this stack has stack_dim "
                f"{self.stack_dim}"
            )
        return self.get(key, default, as_nested_tensor=True)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) or (
            isinstance(key, tuple) and key and (isinstance(key[0], str) or is_string_key(key))
        ):
            value = self.get(key)
            return value._public() if isinstance(value, NonTensor) else value
        return self._index(key)

    def _get_path_or_none(self, path: tuple[str, ...]) -> Any:
        return self.get(path, None) if _holds(self, path) else None

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The stacked shape of ``key``, with -1 where members differ."""
        shapes = [m.get_item_shape(key) for m in self.tensordicts]
        if len({len(s) for s in shapes}) != 1:
            raise RuntimeError(
                f"{type(self).__name__}.get_item_shape: key {key!r} has a different number "
                f"of dims across members: {[tuple(s) for s in shapes]}"
            )
        merged = [s if all(x[i] == s for x in shapes) else -1 for i, s in enumerate(shapes[0])]
        d = self.stack_dim
        return torch.Size([*merged[:d], len(shapes), *merged[d:]])

    # ------------------------------------------------------------------ set
    def set(
        self, key: NestedKey, value: Any, inplace: bool = False, *, non_blocking: bool = False
    ) -> LazyStackedTensorDict:
        """Write ``value`` (batch-shaped, or non-tensor) into every member along the stack."""
        call = self._call("set")
        if not inplace and self.tensordicts and self.is_locked:
            raise locked_error(call, key)
        if isinstance(value, np.ndarray):  # a numeric array splits along the stack like a tensor
            numeric = _as_tensor_or_none(value, None)
            if numeric is not None:
                value = numeric
        if isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)):
            if value.shape[: len(self._batch_size)] != self._batch_size:
                if not isinstance(value, TensorDict):
                    raise leaf_shape_error(call, key, value.shape, self._batch_size)
                value = _fit_batch(value, self._batch_size, call, key)
            parts: Sequence[Any] = value.unbind(self.stack_dim)
        elif is_plain_mapping(value):
            return self.set(key, TensorDict(value, self._batch_size), inplace)
        elif isinstance(value, list) and self._batch_size and list_to_stack():
            if len(value) != self._batch_size[0]:
                raise leaf_shape_error(call, key, torch.Size([len(value)]), self._batch_size)
            # one element per batch entry: the members take their slice of the nesting
            parts = [_list_part(value, self.stack_dim, i) for i in range(len(self.tensordicts))]
        else:
            parts = [value] * len(self.tensordicts)
        for member, part in zip(self.tensordicts, parts, strict=True):
            member.set(key, part, inplace=inplace)
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, str) or (isinstance(key, tuple) and key and isinstance(key[0], str)):
            self.set(key, value)
        else:
            self._set_at_index(key, value)

    def set_(
        self, key: NestedKey, value: Any, *, non_blocking: bool = False
    ) -> LazyStackedTensorDict:
        """Copy ``value`` into the members' existing entries."""
        call = self._call("set_")
        if self._get_path_or_none(key_path(key, call)) is None:
            raise KeyError(
                f"{call}: key {key!r} was not found in the LazyStackedTensorDict (setting a value "
                "in-place on a stack of TensorDict needs the key in every member)"
            )
        if is_plain_mapping(value):
            value = TensorDict(value, self._batch_size)
        elif not isinstance(value, (Tensor, CollectionPrimitives)):
            value = torch.as_tensor(value)
        bs = self._batch_size
        shape = value.batch_size if isinstance(value, CollectionPrimitives) else value.shape
        if not starts_with(shape, bs):  # checked before any member is written
            raise leaf_shape_error(call, key, shape, bs)
        for member, part in zip(self.tensordicts, value.unbind(self.stack_dim), strict=True):
            member.set_(key, part)
        return self

    def update(
        self,
        other: Mapping[Any, Any] | Any = None,
        inplace: bool = False,
        *,
        clone: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        non_blocking: bool = False,
        is_leaf: Any = None,
        update_batch_size: bool = False,
        **kwargs: Any,
    ) -> LazyStackedTensorDict:
        """Write every entry of ``other`` (see :meth:`set`)."""
        done, other = prepare_update(
            self, other, inplace, clone, keys_to_update, update_batch_size, kwargs,
            lambda source: self._update_resized(source, inplace),
        )  # fmt: skip
        if done is not None:
            return done  # type: ignore[no-any-return]
        if isinstance(other, CollectionPrimitives) and other._stack_parts() is not None:
            call = self._call("update")  # member by member: ragged entries need no stacking
            parts = self._parts_of(call, other, update_batch_size)
            for member, part in zip(self.tensordicts, parts, strict=True):
                member.update(part, inplace, update_batch_size=update_batch_size)
            if update_batch_size:  # the members may have taken other batch sizes
                self._reset_batch_size()
            return self
        items = (
            other.items()
            if is_plain_mapping(other)
            else other.items(True, True, is_leaf=with_non_tensor)
        )
        for key, value in items:
            current = self.get(key, None) if is_plain_mapping(value) else None
            if isinstance(current, TensorDictBase):  # a dict into a nested level: merge
                current.update(value, inplace=inplace)
            else:
                self.set(key, value, inplace=inplace)
        return self

    def _update_resized(self, other: Any, inplace: bool) -> LazyStackedTensorDict:
        """``update(other, update_batch_size=True)``: the stack takes ``other``'s batch size,
        one member per entry of ``other`` along the stack dim (existing members updated)."""
        call = self._call("update")
        if len(other.batch_size) != len(self._batch_size):
            raise ValueError(
                f"{call}: update_batch_size needs the same number of batch dims; got "
                f"{tuple(other.batch_size)} for a stack of {tuple(self._batch_size)}"
            )
        parts = other._stack_parts()
        if parts is not None and parts[0] == self.stack_dim:
            pieces = list(parts[1])
        else:
            pieces = list(other.unbind(self.stack_dim))
        members = []
        for i, piece in enumerate(pieces):
            member = self.tensordicts[i] if i < len(self.tensordicts) else piece.empty()
            members.append(member.update(piece, inplace, update_batch_size=True))
        self.tensordicts = members
        self._reset_batch_size()
        return self

    def _reset_batch_size(self) -> None:
        """Recompute the batch size from the members (after they changed theirs)."""
        name = self._stack_name
        self.__init__(*self.tensordicts, stack_dim=self.stack_dim)  # type: ignore[misc]
        self._stack_name = name

    def update_(
        self,
        other: Any = None,
        *,
        clone: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> LazyStackedTensorDict:
        """Copy every entry of ``other`` (then of ``kwargs``) into the existing entries."""
        if kwargs:
            self.update_(other, keys_to_update=keys_to_update)
            return self.update_(kwargs, keys_to_update=keys_to_update)
        if other is None:
            return self
        if keys_to_update is None and isinstance(other, CollectionPrimitives):
            call = self._call("update_")  # member by member: ragged entries need no stacking
            for member, part in zip(self.tensordicts, self._parts_of(call, other), strict=True):
                member.update_(part)
            return self
        if keys_to_update is not None or is_plain_mapping(other):
            call = self._call("update_")
            flat = update_source(other, False, keys_to_update, call)
            each: list[dict[tuple[str, ...], Tensor]] = [{} for _ in self.tensordicts]
            for path, value in list(flat.items()):
                if isinstance(value, Tensor):
                    spread = self._spread(path, value, call)
                    if isinstance(spread, list):  # ragged leaves: written member by member
                        del flat[path]
                        for values, part in zip(each, spread, strict=True):
                            values[path] = part
                    else:
                        flat[path] = spread
            other = TensorDict.from_dict(flat, batch_size=self._batch_size)
            for member, values in zip(self.tensordicts, each, strict=True):
                if values:
                    member.update_(values)
        for key, value in other.items(True, True, is_leaf=with_non_tensor):
            self.set_(key, value)
        return self

    def _spread(self, path: tuple[str, ...], value: Tensor, call: str) -> Tensor | list[Tensor]:
        """``value`` for the leaf at ``path`` as ``update_`` writes it, spread over the batch
        dims as ``Tensor.copy_`` broadcasts: for leaves of one shape, ``value`` broadcast (a
        view) to their stacked shape; for ragged leaves, one value per member (``value``
        unbound along the stack dim when it has the batch dims, else ``value`` itself, which
        must stay clear of that dim), each checked against its member's leaf. A value for a
        missing key is returned as is, for the write to report."""
        leaves = [m._get_path_or_none(path) for m in self.tensordicts]
        if not leaves or not all(isinstance(leaf, Tensor) for leaf in leaves):
            return value
        shapes = [leaf.shape for leaf in leaves]
        shown = path[0] if len(path) == 1 else path
        first, sd = shapes[0], self.stack_dim
        batched = starts_with(value.shape, self._batch_size)
        if all(shape == first for shape in shapes):
            if batched:
                return value  # set_ checks it against the stacked leaf
            full = (*first[:sd], len(shapes), *first[sd:])
            check_copy_broadcast(value.shape, full, shown, call)
            return value.expand(full)
        parts = list(value.unbind(sd)) if batched else [value] * len(shapes)
        for part, shape in zip(parts, shapes, strict=True):
            if not batched and value.dim() > len(shape) - sd:  # it would need the stack dim
                raise leaf_shape_error(call, shown, value.shape, self._batch_size)
            check_copy_broadcast(part.shape, shape, shown, call)
        return parts

    def del_(self, key: NestedKey) -> LazyStackedTensorDict:
        """Remove ``key`` from every member that holds it (a key only some members hold
        too, as upstream); a key no member holds is a ``KeyError``."""
        path = key_path(key, self._call("del_"))
        if self.tensordicts and self.is_locked:  # before the key, as upstream
            raise locked_error(self._call("del_"), join_path(path))
        holders = [m for m in self.tensordicts if m._get_path_or_none(path) is not None]
        if not holders:
            raise KeyError(
                f"{self._call('del_')}: key {join_path(path)!r} was not found in any of the "
                f"{len(self.tensordicts)} stacked members"
            )
        for member in holders:
            member.del_(path)
        return self

    def append(self, td: Any) -> None:
        """Add a member at the end of the stack."""
        self.insert(len(self.tensordicts), td)

    def insert(self, index: int, td: Any) -> None:
        """Add a member at ``index`` of the stack (the first member of an empty stack sets
        the members' batch size; a stack with ragged dims takes any member of its number
        of batch dims, as upstream)."""
        call = self._call("insert")
        if not isinstance(td, CollectionPrimitives):
            raise TypeError(
                f"{call}: Expected new value to be TensorDictBase instance, got {type(td).__name__}"
            )
        bs = self._member_bs
        if (
            self.tensordicts
            and td.batch_size != bs
            and (-1 not in bs or len(td.batch_size) != len(bs))
        ):
            raise ValueError(
                f"{call}: batch size {tuple(td.batch_size)} differs from the members' "
                f"{tuple(self._member_bs)} (Batch sizes in tensordicts differs)"
            )
        if self.tensordicts and self._device is not None and td.device != self._device:
            raise ValueError(
                f"{call}: Devices differ: the stack is on {self._device}, the new member "
                f"on {td.device}"
            )
        members = list(self.tensordicts)
        members.insert(index, td)
        self.__init__(*members, stack_dim=self.stack_dim)  # type: ignore[misc]

    def extend(self, tds: Sequence[Any]) -> None:
        """Add members at the end of the stack."""
        for td in tds:
            self.append(td)

    # ------------------------------------------------------------- primitives
    def _as_dense(self, call: str) -> TensorDict:
        if not self.tensordicts:
            raise RuntimeError(f"{call}: the stack has no members")
        check_not_ragged(call, self)  # one dense batch size needs members of one
        if any(m._stack_parts() is not None for m in self.tensordicts):  # stacks of stacks
            members = [m._as_dense(call) for m in self.tensordicts]
            return self._restack(members)._as_dense(call)  # type: ignore[no-any-return]
        if not same_structure(self.tensordicts):
            shapes = {
                str(k): sorted({tuple(m.get(k).shape) for m in self.tensordicts}, key=str)
                for k in self.keys(True, True)
                if isinstance(self.tensordicts[0].get(k), Tensor)
            }
            ragged = {k: v for k, v in shapes.items() if len(v) > 1}
            raise RuntimeError(
                f"{call}: Failed to stack tensors within a tensordict: this needs one dense "
                "TensorDict, but the members of the "
                f"{type(self).__name__} differ in structure: keys in some members only "
                f"{sorted(map(str, self.partial_keys(True)))}, leaf shapes that differ {ragged}"
            )
        dense = plain_stack([m._as_dense(call) for m in self.tensordicts], self.stack_dim)
        assert isinstance(dense, TensorDict)
        if self._stack_name is not None:  # the stack dim's name goes with it
            dense.names = self.names
        return dense

    def _tensor_leaves(self, out: list[Tensor]) -> list[Tensor]:
        for member in self.tensordicts:
            member._tensor_leaves(out)
        return out

    def _rebuild(self, leaves: Iterator[Tensor], check: str | None = None) -> Any:
        return self._restack([m._rebuild(leaves, check) for m in self.tensordicts])

    def _parts_of(self, call: str, other: Any, resize: bool = False) -> Sequence[Any]:
        """``other`` cut along the stack dim into one part per member (each checked against
        its member's batch size unless ``resize``: ``update(..., update_batch_size=True)``)."""
        parts = other._stack_parts() if isinstance(other, CollectionPrimitives) else None
        if parts is not None and parts[0] == self.stack_dim and other.shape == self.shape:
            if -1 in self._batch_size and not resize:  # ragged: check all before any write
                for i, (member, part) in enumerate(zip(self.tensordicts, parts[1], strict=True)):
                    if part.batch_size[: len(member.batch_size)] != member.batch_size:
                        raise BatchDimMismatchError(
                            f"{call}: member {i} of the other operand has batch_size "
                            f"{tuple(part.batch_size)}, member {i} of the lazy stack has "
                            f"{tuple(member.batch_size)}"
                        )
            return parts[1]
        if other.shape[: len(self._batch_size)] != self._batch_size:
            raise ValueError(
                f"{call}: batch_size {tuple(other.shape)} of the other operand does not match "
                f"{tuple(self._batch_size)}"
            )
        return other.unbind(self.stack_dim)  # type: ignore[no-any-return]

    def _other_leaves(
        self, call: str, other: CollectionPrimitives, extra_ok: bool = False
    ) -> list[Tensor]:
        out: list[Tensor] = []
        for member, part in zip(self.tensordicts, self._parts_of(call, other), strict=True):
            out += member._other_leaves(call, part, extra_ok)
        return out

    def _per_member(self, fn: Callable[..., Any], *args: Any) -> Any:
        results = [m._per_member(fn, *args) for m in self.tensordicts]
        if all(r is m for r, m in zip(results, self.tensordicts, strict=True)):
            return self  # an in-place operation
        return self._restack(results)

    def _stack_parts(self) -> tuple[int, list[Any]]:
        return self.stack_dim, self.tensordicts

    def _remap(
        self,
        call: str,
        fn: Callable[[Any], Any],
        new_bs: torch.Size,
        names: Names,
        nontensor: Callable[[Any], Any] | None = None,
    ) -> Any:
        return self._as_dense(call)._remap(call, fn, new_bs, names, nontensor)

    def _remap_many(
        self,
        call: str,
        fn: Callable[[Any], Sequence[Any]],
        new_bss: Sequence[torch.Size],
        names: Names,
    ) -> tuple[Any, ...]:
        return self._as_dense(call)._remap_many(call, fn, new_bss, names)

    def contiguous(  # type: ignore[override]
        self, inplace: bool = False, *, canonical: bool = False
    ) -> TensorDict:
        """A dense TensorDict of the same content (see :meth:`densify`); ``canonical`` is
        taken for upstream's signature."""
        if inplace:
            raise NotImplementedError(
                f"{self._call('contiguous')}: inplace=True is not supported on a "
                "LazyStackedTensorDict; use the dense result of contiguous()"
            )
        return self._as_dense(self._call("contiguous"))

    def _apply_impl(
        self,
        fn: Callable[..., Any],
        others: tuple[Any, ...],
        key_fn: Callable[[tuple[str, ...]], Any] | None,
        batch_size: Any,
        device: Any,
        names: Any,
        inplace: bool,
        filter_empty: bool | None,
        call_on_nested: bool,
        default: Any = _NO_DEFAULT,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> Any:
        """Apply member by member (the others are cut along the stack dim)."""
        call = self._call("apply")
        member_bs = None
        if batch_size is not None:
            bs = list(batch_size)
            if not inplace and same_structure(self.tensordicts):
                # a new batch size: ``fn`` sees the stacked leaves, as upstream's dense
                # result does (and the new batch may mix the stack dim: a mask, a flattening)
                return self._as_dense(call)._apply_impl(
                    fn,
                    others,
                    key_fn,
                    batch_size,
                    device,
                    names,
                    inplace,
                    filter_empty,
                    call_on_nested,
                    default,
                    is_leaf,
                )
            if len(bs) <= self.stack_dim or bs[self.stack_dim] != len(self.tensordicts):
                raise ValueError(
                    f"{call}: batch_size {bs} must keep the stack dim "
                    f"{self.stack_dim} of size {len(self.tensordicts)}"
                )
            member_bs = bs[: self.stack_dim] + bs[self.stack_dim + 1 :]
        n = len(self.tensordicts)
        split = [[o] * n if o is ABSENT else self._parts_of(call, o) for o in others]
        out = [
            m._apply_impl(
                fn,
                tuple(s[i] for s in split),
                key_fn,
                member_bs,
                device,
                None,
                inplace,
                filter_empty,
                call_on_nested,
                default,
                is_leaf,
            )
            for i, m in enumerate(self.tensordicts)
        ]
        if inplace:
            return self
        result = self._restack(out)
        if names is not None:
            result.names = names
        return result

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
    ) -> Any:
        """Copy a (dense) state dict into the members' existing entries; with ``assign``
        the state's tensors replace the members' entries instead (nothing is written into
        the old tensors)."""
        dense = TensorDict().load_state_dict(state_dict, from_flatten=from_flatten)
        if strict:
            ours = set(self.keys(True, True, is_leaf=with_non_tensor))
            theirs = set(dense.keys(True, True, is_leaf=with_non_tensor))
            if ours != theirs or self.partial_keys(True):
                raise KeysMismatchError(
                    f"{type(self).__name__}.load_state_dict: missing keys "
                    f"{sorted(map(str, ours - theirs))}, unexpected keys "
                    f"{sorted(map(str, theirs - ours))}, keys in some members only "
                    f"{sorted(map(str, self.partial_keys(True)))}"
                )
        return self.update(dense) if assign else self.update_(dense)

    def _per_leaf(self, op: str, call: str, dim: Any, keepdim: bool, **kw: Any) -> Any:
        """Reductions: member by member unless the stack dim itself is reduced."""
        if same_structure(self.tensordicts):
            return self._as_dense(call)._per_leaf(op, call, dim, keepdim, **kw)
        if dim == "feature":
            return self._restack(
                [m._per_leaf(op, call, dim, keepdim, **kw) for m in self.tensordicts]
            )
        n = len(self._batch_size)
        dims = list(range(n)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
        norm = [_norm(call, d, n) for d in dims]
        if self.stack_dim in norm:
            raise RuntimeError(
                f"{call}: reducing over the stack dim of members with different "
                "structures is not possible; reduce other dims, or use as_padded_tensor"
            )
        sd = self.stack_dim
        member_dims = tuple(d if d < sd else d - 1 for d in norm)
        new_sd = sd if keepdim else sd - sum(1 for d in norm if d < sd)
        return self._restack(
            [m._per_leaf(op, call, member_dims, keepdim, **kw) for m in self.tensordicts], new_sd
        )

    def _reduction(self, op: str, dim: Any, keepdim: bool, reduce: bool, **kw: Any) -> Any:
        if not reduce:
            return self._per_leaf(op, f"{type(self).__name__}.{op}", dim, keepdim, **kw)
        if same_structure(self.tensordicts):
            return self._as_dense(self._call(op))._reduction(op, dim, keepdim, reduce, **kw)
        if dim is not None:
            raise RuntimeError(
                f"{type(self).__name__}.{op}: reduce=True with dim needs members of one "
                "structure; pass dim=None to reduce over every element"
            )
        leaves: list[Tensor] = [x.reshape(-1) for m in self.tensordicts for x in _leaf_list(m)]
        return getattr(torch, op)(torch.cat(leaves), **kw)

    def lock_(self) -> LazyStackedTensorDict:
        """Lock every member."""
        was = self._is_locked
        for m in self.tensordicts:
            m.lock_()
        self._is_locked = True
        return record(self, "lock_", (was,), None)

    def unlock_(self) -> LazyStackedTensorDict:
        """Unlock every member."""
        was = self._is_locked
        for m in self.tensordicts:
            m.unlock_()
        self._is_locked = False
        return record(self, "unlock_", (was,), None)

    def __reduce__(self) -> tuple[Any, ...]:
        args: tuple[Any, ...] = (type(self), self.tensordicts, self.stack_dim, self._batch_size)
        if self._stack_name is not None:  # (the stack dim's name; the members keep theirs)
            args = (*args, self._stack_name)
        return (_rebuild_stack, args)

    def __repr__(self) -> str:
        return td_repr(self)

    # --------------------------------------------------------------- index
    def _member(self, call: str, at: int) -> Any:
        n = len(self.tensordicts)
        if not -n <= at < n:
            raise IndexError(f"{call}: index {at} is out of bounds for the stack dim of size {n}")
        return self.tensordicts[at]

    def _index(self, index: Any) -> Any:
        if type(index) is bool:  # a Python bool is a 0-dim mask, as for a tensor
            index = torch.tensor(index)
        elif type(index) is tuple and any(false_scalar(i) for i in index):
            raise NotImplementedError(
                f"{type(self).__name__}[]: a scalar False inside a tuple index is not "
                "supported on a lazy stack; index with the bare scalar False instead"
            )
        split = split_index(self, index)
        if split is None:
            out = index_new_dims(self, index)
            if out is not None:
                return out
            return self._index_mixed(index)
        at, member_index, kept = split
        n = len(self.tensordicts)
        if isinstance(at, int):
            member = self._member(f"{type(self).__name__}[]", at)
            return member if whole_index(member_index) else member[member_index]
        chosen = torch.arange(n)[at]
        if chosen.ndim != 1:
            return self._index_mixed(index)
        ids = chosen.tolist()
        if not ids:
            return self._empty_selection(member_index, kept)
        members = [self.tensordicts[i] for i in ids]
        if not whole_index(member_index):
            members = [m[member_index] for m in members]
        return self._restack(members, kept)

    def _index_mixed(self, index: Any) -> Any:
        """``self[index]`` for an index that mixes the members' elements: through the
        dense stack when the members share one structure, else element by element from
        the members (masks and index tensors; see ``_lazy_index``)."""
        if not same_structure(self.tensordicts):
            out = index_members(self, index)
            if out is not None:
                return out
        return self._as_dense(f"{type(self).__name__}[]")[index]

    def _empty_selection(self, member_index: tuple[Any, ...], kept: int) -> TensorDict:
        """``self[index]`` when the index selects no member: an empty dense TensorDict of
        the indexed shape holding the keys every member holds (member 0's leaf shapes)."""
        first = self.tensordicts[0]
        view = first if whole_index(member_index) else first[member_index]
        empty = view.unsqueeze(kept)[(slice(None),) * kept + (slice(0, 0),)]
        if len(self.tensordicts) > 1 and not same_structure(self.tensordicts):
            empty = empty.select(*self.keys(True, True))
        return empty._as_dense(f"{type(self).__name__}[]")  # type: ignore[no-any-return]

    def _set_at_index(self, index: Any, value: Any) -> None:
        """Write into the members' entries; values covering the indexed batch are split
        along the stack dim, others broadcast to every selected member."""
        split = split_index(self, index)
        if split is None:
            # an index mixing dims (tensors or masks off the stack dim): write through one
            # dense copy, then copy each member's part back into its own tensors
            dense = self._as_dense(f"{type(self).__name__}[]=")
            dense[index] = value
            for member, part in zip(self.tensordicts, dense.unbind(self.stack_dim), strict=True):
                member.update_(part)
            return
        at, member_index, kept = split
        target = Ellipsis if whole_index(member_index) else member_index
        n = len(self.tensordicts)
        if isinstance(at, int):
            self._member(f"{type(self).__name__}[]=", at)[target] = value
            return
        chosen = torch.arange(n)[at].tolist()
        sub_bs = self._index(index).batch_size
        if isinstance(value, Tensor) and value.ndim:
            self._write_tensor(chosen, target, value, len(sub_bs) - kept)
            return
        if is_plain_mapping(value):
            value = TensorDict(value, batch_size=sub_bs)
        parts: Sequence[Any]
        covers = isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)) and (
            value.shape[: len(sub_bs)] == sub_bs
        )
        if covers:
            parts = value.unbind(kept)
        elif isinstance(value, (TensorDict, LazyStackedTensorDict)):
            check_broadcast(f"{type(self).__name__}[]=", value.batch_size, sub_bs)
            parts = value.expand(sub_bs).unbind(kept)
        else:
            parts = [value] * len(chosen)
        for i, part in zip(chosen, parts, strict=True):
            self.tensordicts[i][target] = part

    def _write_tensor(self, chosen: list[int], target: Any, value: Tensor, after: int) -> None:
        """Write ``value`` into every tensor leaf of the chosen members as torch writes it
        into the dense leaf: aligned with the leaf's trailing dims. ``after`` counts the
        indexed batch dims from the stack dim on, so the value reaches the stack dim only
        for leaves with fewer than ``value.ndim - after + 1`` feature dims; there each
        member takes its slice of the value."""
        n = len(chosen)
        for j, i in enumerate(chosen):
            member = self.tensordicts[i]
            if value.ndim < after:  # short of the stack dim for every leaf: one value
                member[target] = value
                continue
            bdims = len(member.batch_size)
            for path in member.keys(True, True):
                pos = value.ndim - after - (len(member.get_item_shape(path)) - bdims)
                if pos < 0:
                    member.set_at_(path, value, target)
                    continue
                if value.shape[pos] not in (1, n):
                    raise RuntimeError(
                        f"{type(self).__name__}[]=: shape mismatch: a value of shape "
                        f"{tuple(value.shape)} cannot be broadcast to key {path!r}, "
                        f"whose dim {pos - value.ndim} (the stack dim) has {n} entries"
                    )
                member.set_at_(path, value.select(pos, j if value.shape[pos] > 1 else 0), target)

    # ---------------------------------------------------------------- shape
    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """Members when ``dim`` is the stack dim; otherwise a lazy stack per slice."""
        d = _norm(self._call("unbind"), dim, len(self._batch_size))
        if d == self.stack_dim:
            return tuple(self.tensordicts)
        check_not_ragged(self._call("unbind"), self, (d,))
        md = d if d < self.stack_dim else d - 1
        per_member = [m.unbind(md) for m in self.tensordicts]
        new_stack = self.stack_dim - (1 if d < self.stack_dim else 0)
        return tuple(
            self._restack(list(parts), new_stack) for parts in zip(*per_member, strict=True)
        )

    @keeps_lock
    def unsqueeze(self, dim: int) -> Any:
        """Insert a batch dim of size one."""
        d = _norm(self._call("unsqueeze"), dim, len(self._batch_size) + 1)
        if d <= self.stack_dim:
            out = self._restack([m.unsqueeze(d) for m in self.tensordicts], self.stack_dim + 1)
        else:
            out = self._restack([m.unsqueeze(d - 1) for m in self.tensordicts])
        return record(out, "unsqueeze", (d,), self)

    @keeps_lock
    def unflatten(self, dim: int, unflattened_size: Sequence[int], inplace: bool = False) -> Any:
        """Split batch dim ``dim``; the stack dim splits into lazy stacks of lazy stacks
        (the members kept), as upstream."""
        call = self._call("unflatten")
        d = _norm(call, dim, len(self._batch_size))
        sizes = list(unflattened_size)
        n = len(self.tensordicts)
        if -1 in sizes and sizes.count(-1) == 1:
            known = math.prod(x for x in sizes if x != -1)
            sizes[sizes.index(-1)] = n // known if known else -1
        if inplace or d != self.stack_dim or math.prod(sizes) != n or min(sizes, default=0) < 1:
            return super().unflatten(dim, unflattened_size, inplace)
        out = _nest(type(self), self.tensordicts, sizes, d)
        return record(out, "unflatten", (d, tuple(sizes)), self)

    @keeps_lock
    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Any:
        """Like a TensorDict's; a view that only splits the stack dim keeps the members
        (a lazy stack of lazy stacks, as upstream)."""
        plain = len(shape) == 1 and type(shape[0]) is torch.dtype
        if plain or size is not None or batch_size is not None or set_lazy_legacy._state:
            return super().view(*shape, size=size, batch_size=batch_size)
        call = self._call("view")
        bs, sd = self._batch_size, self.stack_dim
        new_bs = _infer_shape(call, _dims_arg(call, shape), bs)
        k = len(new_bs) - len(bs) + 1  # the dims the stack dim would become
        if (
            k > 1
            and new_bs[:sd] == bs[:sd]
            and new_bs[sd + k :] == bs[sd + 1 :]
            and math.prod(new_bs[sd : sd + k]) == bs[sd]
        ):
            return record(self.unflatten(sd, new_bs[sd : sd + k]), "view", (), self)
        return super().view(*shape)

    @keeps_lock
    def squeeze(self, dim: int | tuple[int, ...] | None = None) -> Any:
        """Drop batch dims of size one (the stack dim too, when it has one member)."""
        if dim is None or not isinstance(dim, int):
            n = len(self._batch_size)
            asked = range(n) if dim is None else [_norm(self._call("squeeze"), d, n) for d in dim]
            out: Any = self
            for d in sorted({i for i in asked if self._batch_size[i] == 1}, reverse=True):
                out = out.squeeze(d)
            return record(out, "squeeze", (), self) if out is not self else out
        d = _norm(self._call("squeeze"), dim, len(self._batch_size))
        if self._batch_size[d] != 1:
            return self
        if d == self.stack_dim:
            return record(self.tensordicts[0], "squeeze", (), self)
        md = d if d < self.stack_dim else d - 1
        new_stack = self.stack_dim - (1 if d < self.stack_dim else 0)
        out = self._restack([m.squeeze(md) for m in self.tensordicts], new_stack)
        return record(out, "squeeze", (), self)

    @keeps_lock
    def permute(self, *args: Any, dims: Any = None) -> Any:
        """Reorder the batch dims; the stack dim moves to where it lands."""
        dims = permute_args(self._call("permute"), args, dims)
        order = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        n = len(self._batch_size)
        norm = [_norm(self._call("permute"), d, n) for d in order]
        if sorted(norm) != list(range(n)):
            raise ValueError(f"{type(self).__name__}.permute: {tuple(order)} is not a permutation")
        new_stack = norm.index(self.stack_dim)
        rest = [d for d in norm if d != self.stack_dim]
        member_order = [d if d < self.stack_dim else d - 1 for d in rest]
        out = self._restack([m.permute(*member_order) for m in self.tensordicts], new_stack)
        return record(out, "permute", (tuple(norm),), self)

    @keeps_lock
    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swap two batch dims."""
        n = len(self._batch_size)
        order = list(range(n))
        a = _norm(self._call("transpose"), dim0, n)
        b = _norm(self._call("transpose"), dim1, n)
        order[a], order[b] = order[b], order[a]
        return record(self.permute(*order), "transpose", (a, b), self)

    @keeps_lock
    def flip(self, *dims: Any) -> Any:
        """Reverse batch dims (the stack dim reverses the members)."""
        flat = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        n = len(self._batch_size)
        norm = [_norm(self._call("flip"), d, n) for d in flat]
        members = self.tensordicts[::-1] if self.stack_dim in norm else list(self.tensordicts)
        member_dims = [d if d < self.stack_dim else d - 1 for d in norm if d != self.stack_dim]
        if member_dims:
            members = [m.flip(member_dims) for m in members]
        return self._restack(members)

    @keeps_lock
    def expand(self, *shape: Any) -> Any:
        """Broadcast to ``shape``; new leading dims move the stack dim."""
        sizes = list(
            shape[0]
            if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size))
            else shape
        )
        extra = len(sizes) - len(self._batch_size)
        if extra < 0:
            raise RuntimeError(f"{type(self).__name__}.expand: fewer dims than the batch")
        d = self.stack_dim + extra
        if sizes[d] not in (-1, len(self.tensordicts)):
            raise RuntimeError(
                f"{type(self).__name__}.expand: the stack dim {d} has {len(self.tensordicts)} "
                f"members and cannot expand to {sizes[d]}"
            )
        kept = [i for i, s in enumerate(self._batch_size) if s == -1 and sizes[i + extra] != -1]
        if kept:  # a ragged dim keeps its members' sizes: -1 there
            raise ragged_error(self._call("expand"), self, kept)
        member_shape = sizes[:d] + sizes[d + 1 :]
        return self._restack([m.expand(*member_shape) for m in self.tensordicts], d)

    @keeps_lock
    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Any, ...]:
        """Split along ``dim`` (groups of members on the stack dim)."""
        d = _norm(self._call("split"), dim, len(self._batch_size))
        check_not_ragged(self._call("split"), self, (d,))
        return self._pieces(d, lambda x, at: x.split(split_size, at))

    @keeps_lock
    def tensor_split(
        self, indices_or_sections: int | Sequence[int] | Tensor, dim: int = 0
    ) -> tuple[Any, ...]:
        """``torch.tensor_split`` along ``dim``: groups of members on the stack dim, member
        by member elsewhere (their shapes may differ)."""
        d = _norm(self._call("tensor_split"), dim, len(self._batch_size))
        arg: Any = indices_or_sections
        if isinstance(arg, Tensor):
            arg = arg.tolist()
        return self._pieces(d, lambda x, at: x.tensor_split(arg, at))

    def _pieces(self, d: int, cut: Callable[[Any, int], Sequence[Any]]) -> tuple[Any, ...]:
        """The pieces of ``cut(x, dim)`` (a split) along batch dim ``d``: the member
        positions cut into groups of members on the stack dim (an empty group an empty
        stack), each member cut elsewhere (their shapes may differ)."""
        if d == self.stack_dim:
            return tuple(
                self._restack([self.tensordicts[i] for i in g.tolist()])
                if len(g)
                else type(self)(stack_dim=self.stack_dim, batch_size=self._member_bs)
                for g in cut(torch.arange(len(self.tensordicts)), 0)
            )
        md = d if d < self.stack_dim else d - 1
        per_member = [cut(m, md) for m in self.tensordicts]
        return tuple(self._restack(list(p)) for p in zip(*per_member, strict=True))

    @keeps_lock
    def repeat_interleave(
        self,
        repeats: int | Tensor,
        dim: int | None = None,
        *,
        output_size: int | None = None,
        inplace: bool = False,
    ) -> Any:
        """Repeat each element along ``dim``: copies of the members on the stack dim,
        member by member elsewhere (their shapes may differ)."""
        if inplace or dim is None:
            return super().repeat_interleave(repeats, dim, output_size=output_size, inplace=inplace)
        d = _norm(self._call("repeat_interleave"), dim, len(self._batch_size))
        if d == self.stack_dim:
            index = torch.arange(len(self.tensordicts)).repeat_interleave(
                repeats, output_size=output_size
            )
            return self._restack([self.tensordicts[i].clone() for i in index.tolist()])
        md = d if d < self.stack_dim else d - 1
        return self._restack(
            [m.repeat_interleave(repeats, md, output_size=output_size) for m in self.tensordicts]
        )

    @keeps_lock
    def chunk(self, chunks: int, dim: int = 0) -> tuple[Any, ...]:
        """Split into ``chunks`` pieces along ``dim``."""
        d = _norm(self._call("chunk"), dim, len(self._batch_size))
        check_not_ragged(self._call("chunk"), self, (d,))
        size = self._batch_size[d]
        return self.split(max(1, -(-size // chunks)), dim)

    @keeps_lock
    def narrow(self, dim: int, start: int, length: int) -> Any:
        """Narrow a batch dim (a slice of members on the stack dim), with torch's checks."""
        d = _norm(self._call("narrow"), dim, len(self._batch_size))
        check_not_ragged(self._call("narrow"), self, (d,))
        size = self._batch_size[d]
        begin = start + size if start < 0 else start
        if not 0 <= begin <= size or length < 0 or begin + length > size:
            raise RuntimeError(
                f"{type(self).__name__}.narrow: start {start} and length {length} do not fit "
                f"dim {d} of size {size}"
            )
        index: list[Any] = [slice(None)] * len(self._batch_size)
        index[d] = slice(begin, begin + length)
        return self._index(tuple(index))

    def masked_fill(self, mask: Tensor, value: float | bool) -> Any:
        """Fill masked batch elements, member by member."""
        parts = mask.expand(self._batch_size).unbind(self.stack_dim)
        return self._restack(
            [m.masked_fill(p, value) for m, p in zip(self.tensordicts, parts, strict=True)]
        )

    def masked_fill_(self, mask: Tensor, value: float | bool) -> Any:
        """Fill masked batch elements in place, member by member."""
        parts = mask.expand(self._batch_size).unbind(self.stack_dim)
        for member, part in zip(self.tensordicts, parts, strict=True):
            member.masked_fill_(part, value)
        return self

    def where(self, condition: Tensor, other: Any, *, out: Any = None, pad: Any = None) -> Any:
        """Member-wise ``where`` (locked members give locked results)."""
        if out is not None:
            from tensordict._shape import where

            return where(condition, self, other, out=out, pad=pad)  # (back here without out)
        conds = condition.expand(self._batch_size).unbind(self.stack_dim)
        covers = isinstance(other, (Tensor, TensorDict, LazyStackedTensorDict)) and (
            other.shape[: len(self._batch_size)] == self._batch_size
        )
        others = other.unbind(self.stack_dim) if covers else [other] * len(conds)
        return self._restack(
            [
                m.where(c, o, pad=pad)
                for m, c, o in zip(self.tensordicts, conds, others, strict=True)
            ]
        )


def _nest(cls: Any, members: Sequence[Any], sizes: Sequence[int], dim: int) -> Any:
    """``members`` stacked at ``dim`` as nested lazy stacks of ``sizes`` (row-major)."""
    if len(sizes) == 1:
        return cls(*members, stack_dim=dim)
    step = math.prod(sizes[1:])
    groups = [members[i * step : (i + 1) * step] for i in range(sizes[0])]
    return cls(*[_nest(cls, g, sizes[1:], dim) for g in groups], stack_dim=dim)


def _rebuild_stack(
    cls: Any, members: list[Any], stack_dim: int, batch_size: Any, name: str | None = None
) -> Any:
    return cls(*members, stack_dim=stack_dim, batch_size=batch_size, stack_dim_name=name)


def _leaf_list(td: Any) -> list[Tensor]:
    return [v for v in td.values(True, True) if isinstance(v, Tensor)]


def _holds(td: Any, path: tuple[str, ...]) -> bool:
    """Whether every member (of every nested stack) holds ``path``, without stacking."""
    parts = td._stack_parts()
    if parts is None:
        return td._get_path_or_none(path) is not None
    return all(_holds(m, path) for m in parts[1])


def _list_part(value: list[Any], dim: int, i: int) -> Any:
    """Entry ``i`` along ``dim`` of a nested list (dim 0: ``value[i]``)."""
    if dim == 0:
        return value[i]
    return [_list_part(v, dim - 1, i) for v in value]


register_type("LazyStackedTensorDict", LazyStackedTensorDict)


# the slots LazyStackedTensorDict.__init__ writes, past the class's __setattr__
_INIT_SLOTS = ("stack_dim", "tensordicts", "_member_bs", "_batch_size", "_device")
_SETTERS = slot_setters(CollectionPrimitives, LazyStackedTensorDict)
_SET_DIM = _SETTERS["stack_dim"]
_SET_MEMBERS = _SETTERS["tensordicts"]
_SET_MEMBER_BS = _SETTERS["_member_bs"]
_SET_BS = _SETTERS["_batch_size"]
_SET_DEVICE = _SETTERS["_device"]
_SET_NAMES = _SETTERS["_names"]
_SET_STACK_NAME = _SETTERS["_stack_name"]
_SET_LOCKED = _SETTERS["_is_locked"]


def _unset_in_all(members: Sequence[Any], path: tuple[str, ...]) -> bool:
    """Whether ``path`` reads as None (an unset tensorclass field) in every member."""
    for member in members:
        if not isinstance(member, TensorDict):
            return False
        try:
            if member._get_path_or_unset(path, "get") is not None:
                return False
        except KeyError:
            return False
    return True
