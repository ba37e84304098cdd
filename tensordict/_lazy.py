"""LazyStackedTensorDict: a stack that keeps its member TensorDicts (heterogeneous stacks).

Element-wise operations, reductions and conversions come from the shared mixins (the
leaf walks visit the members); this module supplies the storage view (keys and get/set
across members), indexing, and the shape operations, each translated to the members.
An operation that would mix elements of members of different structure (a reshape
across the stack dim, say) densifies when the members share one structure and
raises otherwise.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._convert import ConvertOps
from tensordict._format import register_type
from tensordict._html import HtmlRepr
from tensordict._index import _normalise
from tensordict._keys import NestedKey, join_path, key_path
from tensordict._map import MapOps
from tensordict._memmap_ops import MemmapOps
from tensordict._nontensor import NonTensor
from tensordict._pointwise import PointwiseOps
from tensordict._reduce import ReduceOps
from tensordict._stack import _stack_nontensor, same_structure, stack
from tensordict._td import TensorDict
from tensordict._torch_fn import TorchFunctionOps

_NO_DEFAULT: Any = object()


def _norm(call: str, dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"{call}: dim {dim} is out of range for a batch of {ndim} dims")
    return dim % ndim


def lazy_stack(tds: Sequence[Any], dim: int = 0) -> LazyStackedTensorDict:
    """Stack TensorDicts lazily along a new batch dim, whatever their structures.

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> s = lazy_stack([TensorDict({"a": torch.zeros(3)}), TensorDict({"a": torch.ones(4)})])
    >>> s.batch_size, s.get_item_shape("a")
    (torch.Size([2]), torch.Size([2, -1]))
    >>> [x.shape for x in s.get("a", as_list=True)]
    [torch.Size([3]), torch.Size([4])]
    """
    return LazyStackedTensorDict(list(tds), stack_dim=dim)


class LazyStackedTensorDict(
    PointwiseOps, ReduceOps, ConvertOps, TorchFunctionOps, MemmapOps, MapOps, HtmlRepr
):
    """A stack of TensorDicts kept as its members, which may differ in structure.

    Members share one batch size; leaves may differ in shape (ragged dims show as -1
    in :meth:`get_item_shape`) and keys may be present in only some members.
    Element-wise operations visit the members; an operation that would mix elements of
    members of different structure (a reshape across the stack dim) densifies when the
    members share one structure and raises otherwise.

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> stack = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
    >>> stack.batch_size, stack.get_item_shape("a"), stack[1]["a"].shape
    (torch.Size([2]), torch.Size([2, -1]), torch.Size([3]))
    >>> (stack + 1)[0]["a"]
    tensor([1., 1.])
    """

    __slots__ = ("stack_dim", "tensordicts")
    _lazy = True

    def __init__(self, tensordicts: Sequence[Any], stack_dim: int = 0) -> None:
        tds = list(tensordicts)
        if not tds:
            raise ValueError("LazyStackedTensorDict: needs at least one member")
        for i, td in enumerate(tds):
            if not isinstance(td, (TensorDict, LazyStackedTensorDict)):
                raise TypeError(
                    f"LazyStackedTensorDict: member {i} is a {type(td).__name__}, not a TensorDict"
                )
            if td.batch_size != tds[0].batch_size:
                raise ValueError(
                    f"LazyStackedTensorDict: members must share a batch size; member 0 has "
                    f"{tuple(tds[0].batch_size)}, member {i} has {tuple(td.batch_size)}"
                )
        n = len(tds[0].batch_size)
        self.stack_dim = _norm("LazyStackedTensorDict", stack_dim, n + 1)
        self.tensordicts = tds
        bs = tds[0].batch_size
        self._batch_size = torch.Size([*bs[: self.stack_dim], len(tds), *bs[self.stack_dim :]])
        device = tds[0].device
        self._device = device if all(td.device == device for td in tds) else None
        self._names = None
        self._is_locked = False

    # ------------------------------------------------------------ properties
    @property
    def batch_size(self) -> torch.Size:
        """The members' batch size with the stack dim inserted."""
        return self._batch_size

    @property
    def names(self) -> list[str | None]:
        """Batch dims are unnamed on a lazy stack."""
        return [None] * len(self._batch_size)

    def __len__(self) -> int:
        return self._batch_size[0]

    def __bool__(self) -> bool:
        raise RuntimeError("LazyStackedTensorDict: the truth value is ambiguous")

    def _restack(self, members: Sequence[Any], stack_dim: int | None = None) -> Any:
        return type(self)(members, self.stack_dim if stack_dim is None else stack_dim)

    # ----------------------------------------------------------------- keys
    def keys(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> list[str | tuple[str, ...]]:
        """The keys present in every member, in the first member's order."""
        per_member = [set(m.keys(include_nested, leaves_only, is_leaf)) for m in self.tensordicts]
        common = set.intersection(*per_member)
        return [
            k for k in self.tensordicts[0].keys(include_nested, leaves_only, is_leaf) if k in common
        ]

    def partial_keys(self, include_nested: bool = False) -> list[str | tuple[str, ...]]:
        """Keys present in some members but not all."""
        every = set(self.keys(include_nested))
        seen: dict[Any, None] = {}
        for m in self.tensordicts:
            for k in m.keys(include_nested):
                if k not in every:
                    seen[k] = None
        return list(seen)

    def items(self, include_nested: bool = False, leaves_only: bool = False) -> Iterator[Any]:
        """``(key, stacked value)`` for the common keys."""
        return ((k, self.get(k)) for k in self.keys(include_nested, leaves_only))

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> Iterator[Any]:
        """Stacked values of the common keys."""
        return (self.get(k) for k in self.keys(include_nested, leaves_only))

    def __contains__(self, key: object) -> bool:
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
        padding_value: float = 0.0,
    ) -> Any:
        """The stacked entry at ``key``.

        Tensors of one shape are stacked (a copy); nested TensorDicts give a lazy stack
        of the members' nested TensorDicts (writes reach the members). Ragged tensors
        need ``as_list``, ``as_padded_tensor`` or ``as_nested_tensor``.
        """
        call = "LazyStackedTensorDict.get"
        path = key_path(key, call)
        missing = [i for i, m in enumerate(self.tensordicts) if m._get_path_or_none(path) is None]
        if missing:
            if default is not _NO_DEFAULT:
                return default
            raise KeyError(
                f"{call}: key {join_path(path)!r} is missing from members {missing} "
                f"of {len(self.tensordicts)}"
            )
        values = [m.get(path) for m in self.tensordicts]
        if as_list:
            return values
        first = values[0]
        if isinstance(first, Tensor):
            if as_padded_tensor:
                return _padded_stack(values, self.stack_dim, padding_value)
            if as_nested_tensor:
                if self.stack_dim != 0:
                    raise ValueError(f"{call}: as_nested_tensor needs stack_dim=0")
                return _nested(values)
            if any(v.shape != first.shape for v in values):
                raise RuntimeError(
                    f"{call}: key {join_path(path)!r} has shapes "
                    f"{[tuple(v.shape) for v in values]} across members; pass as_list=True, "
                    "as_padded_tensor=True or as_nested_tensor=True"
                )
            return torch.stack(values, self.stack_dim)
        if isinstance(first, NonTensor):
            inner = values[0].batch_size
            d = self.stack_dim
            return _stack_nontensor(values, d, torch.Size([*inner[:d], len(values), *inner[d:]]))
        return self._restack(values)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) or (isinstance(key, tuple) and key and isinstance(key[0], str)):
            value = self.get(key)
            return value._public() if isinstance(value, NonTensor) else value
        return self._index(key)

    def _get_path_or_none(self, path: tuple[str, ...]) -> Any:
        return self.get(path, None)

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The stacked shape of ``key``, with -1 where members differ."""
        shapes = [m.get_item_shape(key) for m in self.tensordicts]
        if len({len(s) for s in shapes}) != 1:
            raise RuntimeError(
                f"LazyStackedTensorDict.get_item_shape: key {key!r} has a different number "
                f"of dims across members: {[tuple(s) for s in shapes]}"
            )
        merged = [s if all(x[i] == s for x in shapes) else -1 for i, s in enumerate(shapes[0])]
        d = self.stack_dim
        return torch.Size([*merged[:d], len(shapes), *merged[d:]])

    # ------------------------------------------------------------------ set
    def set(self, key: NestedKey, value: Any, inplace: bool = False) -> LazyStackedTensorDict:
        """Write ``value`` (batch-shaped, or non-tensor) into every member along the stack."""
        call = "LazyStackedTensorDict.set"
        if isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)):
            if value.shape[: len(self._batch_size)] != self._batch_size:
                raise ValueError(
                    f"{call}: shape {tuple(value.shape)} of key {key!r} does not start with "
                    f"batch_size {tuple(self._batch_size)}"
                )
            parts: Sequence[Any] = value.unbind(self.stack_dim)
        elif isinstance(value, Mapping):
            return self.set(key, TensorDict(value, self._batch_size), inplace)
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

    def set_(self, key: NestedKey, value: Any) -> LazyStackedTensorDict:
        """Copy ``value`` into the members' existing entries."""
        for member, part in zip(self.tensordicts, value.unbind(self.stack_dim), strict=True):
            member.set_(key, part)
        return self

    def update(
        self, other: Mapping[Any, Any] | Any, inplace: bool = False
    ) -> LazyStackedTensorDict:
        """Write every entry of ``other`` (see :meth:`set`)."""
        items = other.items() if isinstance(other, Mapping) else other.items(True, True)
        for key, value in items:
            self.set(key, value, inplace=inplace)
        return self

    def update_(self, other: Any) -> LazyStackedTensorDict:
        """Copy every entry of ``other`` into the existing entries."""
        for key, value in other.items(True, True):
            self.set_(key, value)
        return self

    def __delitem__(self, key: NestedKey) -> None:
        for member in self.tensordicts:
            del member[key]

    def append(self, td: Any) -> None:
        """Add a member at the end of the stack."""
        self.insert(len(self.tensordicts), td)

    def insert(self, index: int, td: Any) -> None:
        """Add a member at ``index`` of the stack."""
        if td.batch_size != self.tensordicts[0].batch_size:
            raise ValueError(
                f"LazyStackedTensorDict.insert: batch size {tuple(td.batch_size)} differs "
                f"from the members' {tuple(self.tensordicts[0].batch_size)}"
            )
        self.tensordicts.insert(index, td)
        self.__init__(self.tensordicts, self.stack_dim)  # type: ignore[misc]

    # -------------------------------------------------------------- densify
    def densify(self) -> TensorDict:
        """A dense TensorDict with the same content (the members must share a structure)."""
        if not same_structure(self.tensordicts):
            raise RuntimeError(
                "LazyStackedTensorDict.densify: members differ in keys or leaf shapes; "
                f"partial keys: {self.partial_keys(True)}"
            )
        dense = stack([m.densify() if m._lazy else m for m in self.tensordicts], self.stack_dim)
        assert isinstance(dense, TensorDict)
        return dense

    def contiguous(self) -> TensorDict:
        """Same as :meth:`densify`."""
        return self.densify()

    def _dense_or_raise(self, call: str) -> TensorDict:
        if same_structure(self.tensordicts):
            return self.densify()
        raise RuntimeError(
            f"{call}: this mixes elements of members of different structure; only "
            "possible on members that share keys and leaf shapes"
        )

    # ---------------------------------------------------------------- apply
    def apply(
        self,
        fn: Callable[..., Tensor | None],
        *others: Any,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        inplace: bool = False,
        filter_empty: bool = True,
        call_on_nested: bool = False,
    ) -> Any:
        """:meth:`TensorDict.apply`, member by member (others are split along the stack)."""
        member_bs = None
        if batch_size is not None:
            bs = list(batch_size)
            if len(bs) <= self.stack_dim or bs[self.stack_dim] != len(self.tensordicts):
                raise ValueError(
                    f"LazyStackedTensorDict.apply: batch_size {bs} must keep the stack dim "
                    f"{self.stack_dim} of size {len(self.tensordicts)}"
                )
            member_bs = bs[: self.stack_dim] + bs[self.stack_dim + 1 :]
        split = [o.unbind(self.stack_dim) for o in others]
        out = [
            m.apply(
                fn,
                *[s[i] for s in split],
                batch_size=member_bs,
                device=device,
                inplace=inplace,
                filter_empty=filter_empty,
                call_on_nested=call_on_nested,
            )
            for i, m in enumerate(self.tensordicts)
        ]
        return self if inplace else self._restack(out)

    def named_apply(
        self, fn: Callable[..., Tensor | None], *others: Any, nested_keys: bool = False, **kw: Any
    ) -> Any:
        """:meth:`TensorDict.named_apply`, member by member."""
        split = [o.unbind(self.stack_dim) for o in others]
        return self._restack(
            [
                m.named_apply(fn, *[s[i] for s in split], nested_keys=nested_keys, **kw)
                for i, m in enumerate(self.tensordicts)
            ]
        )

    def pop(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """Remove ``key`` from every member and return its stacked value."""
        if default is not _NO_DEFAULT and key not in self:
            return default
        value = self.get(key)
        del self[key]
        return value

    def setdefault(self, key: NestedKey, default: Any) -> Any:
        """The stacked value at ``key``, written from ``default`` first when missing."""
        if key not in self:
            self.set(key, default)
        return self.get(key)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> Any:
        """Copy a (dense) state dict into the members' existing entries."""
        dense = TensorDict().load_state_dict(state_dict)
        if strict:
            ours, theirs = set(self.keys(True, True)), set(dense.keys(True, True))
            if ours != theirs or self.partial_keys(True):
                raise KeyError(
                    "LazyStackedTensorDict.load_state_dict: missing keys "
                    f"{sorted(map(str, ours - theirs))}, unexpected keys "
                    f"{sorted(map(str, theirs - ours))}, keys in some members only "
                    f"{sorted(map(str, self.partial_keys(True)))}"
                )
        return self.update_(dense)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dicts of the stacked entries (members must share a structure)."""
        return self._dense_or_raise("LazyStackedTensorDict.to_dict").to_dict()

    def __getitems__(self, indices: list[int]) -> Any:
        """A batch of items at once, as ``torch.utils.data.DataLoader`` asks for it."""
        return self._index(torch.as_tensor(indices, dtype=torch.long))

    def apply_(self, fn: Callable[..., Tensor], *others: Any) -> LazyStackedTensorDict:
        """Apply ``fn`` to every leaf of every member, in place."""
        return self.apply(fn, *others, inplace=True)  # type: ignore[no-any-return]

    def _per_leaf(self, op: str, call: str, dim: Any, keepdim: bool, **kw: Any) -> Any:
        """Reductions: member by member unless the stack dim itself is reduced."""
        if same_structure(self.tensordicts):
            return self.densify()._per_leaf(op, call, dim, keepdim, **kw)
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
            return self._per_leaf(op, f"LazyStackedTensorDict.{op}", dim, keepdim, **kw)
        if same_structure(self.tensordicts):
            return self.densify()._reduction(op, dim, keepdim, reduce, **kw)
        if dim is not None:
            raise RuntimeError(
                f"LazyStackedTensorDict.{op}: reduce=True with dim needs members of one "
                "structure; pass dim=None to reduce over every element"
            )
        leaves: list[Tensor] = [x.reshape(-1) for m in self.tensordicts for x in _leaf_list(m)]
        return getattr(torch, op)(torch.cat(leaves), **kw)

    def _map(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._restack([getattr(m, name)(*args, **kwargs) for m in self.tensordicts])

    def select(self, *keys: NestedKey, inplace: bool = False, strict: bool = True) -> Any:
        """:meth:`TensorDict.select` on every member."""
        return self._map("select", *keys, inplace=inplace, strict=strict)

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> Any:
        """:meth:`TensorDict.exclude` on every member."""
        return self._map("exclude", *keys, inplace=inplace)

    def flatten_keys(self, separator: str = ".") -> Any:
        """:meth:`TensorDict.flatten_keys` on every member."""
        return self._map("flatten_keys", separator)

    def unflatten_keys(self, separator: str = ".") -> Any:
        """:meth:`TensorDict.unflatten_keys` on every member."""
        return self._map("unflatten_keys", separator)

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> Any:
        """:meth:`TensorDict.rename_key_` on every member."""
        for m in self.tensordicts:
            m.rename_key_(old_key, new_key, safe=safe)
        return self

    def empty(self, recurse: bool = False) -> Any:
        """Empty members (nested ones kept empty with ``recurse``)."""
        return self._map("empty", recurse)

    def is_empty(self) -> bool:
        """Whether no member holds a leaf."""
        return all(m.is_empty() for m in self.tensordicts)

    def lock_(self) -> LazyStackedTensorDict:
        """Lock every member."""
        for m in self.tensordicts:
            m.lock_()
        self._is_locked = True
        return self

    def unlock_(self) -> LazyStackedTensorDict:
        """Unlock every member."""
        for m in self.tensordicts:
            m.unlock_()
        self._is_locked = False
        return self

    @property
    def is_locked(self) -> bool:
        """Whether every member is locked."""
        return all(m.is_locked for m in self.tensordicts)

    def state_dict(self, keep_vars: bool = False, flatten: bool = True) -> Any:
        """The state dict of the densified stack (members must share a structure)."""
        return self._dense_or_raise("LazyStackedTensorDict.state_dict").state_dict(
            keep_vars, flatten
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (LazyStackedTensorDict, (self.tensordicts, self.stack_dim))

    def __repr__(self) -> str:
        keys = sorted(map(str, self.keys(True, True)))
        return (
            f"LazyStackedTensorDict(\n    fields={keys},\n    exclusive_fields="
            f"{sorted(map(str, self.partial_keys(True)))},\n    batch_size={self._batch_size},\n"
            f"    device={self._device},\n    is_shared={self.is_shared()},\n"
            f"    stack_dim={self.stack_dim})"
        )

    # --------------------------------------------------------------- index
    def _split_index(self, index: Any) -> tuple[Any, tuple[Any, ...], int] | None:
        """(item at the stack dim, index for members, members' kept dims before it), or
        None when the index needs the dense path (None, masks or arrays off the stack dim).
        """
        idx = _normalise(index, len(self._batch_size))
        if any(i is None for i in idx):
            return None
        idx = idx + (slice(None),) * (len(self._batch_size) - len(idx))
        if len(idx) > len(self._batch_size):
            return None
        d = self.stack_dim
        pre, at, post = idx[:d], idx[d], idx[d + 1 :]
        for item in (*pre, *post):
            if not isinstance(item, (int, slice)):
                return None
        kept = sum(1 for item in pre if isinstance(item, slice))
        return at, (*pre, *post), kept

    def _member(self, call: str, at: int) -> Any:
        n = len(self.tensordicts)
        if not -n <= at < n:
            raise IndexError(f"{call}: index {at} is out of bounds for the stack dim of size {n}")
        return self.tensordicts[at]

    def _index(self, index: Any) -> Any:
        split = self._split_index(index)
        if split is None:
            return self._dense_or_raise("LazyStackedTensorDict[]")[index]
        at, member_index, kept = split
        n = len(self.tensordicts)
        if isinstance(at, int):
            member = self._member("LazyStackedTensorDict[]", at)
            return member if _whole(member_index) else member[member_index]
        chosen = torch.arange(n)[at]
        if chosen.ndim != 1:
            return self._dense_or_raise("LazyStackedTensorDict[]")[index]
        ids = chosen.tolist()
        if not ids:  # nothing selected: an empty dense result shaped by member 0
            first = self.tensordicts[0]
            view = first if _whole(member_index) else first[member_index]
            return view.unsqueeze(kept)[(slice(None),) * kept + (slice(0, 0),)]
        members = [self.tensordicts[i] for i in ids]
        if not _whole(member_index):
            members = [m[member_index] for m in members]
        return self._restack(members, kept)

    def __iter__(self) -> Iterator[Any]:
        return (self._index(i) for i in range(self._batch_size[0]))

    def _set_at_index(self, index: Any, value: Any) -> None:
        """Write into the members' entries; values covering the indexed batch are split
        along the stack dim, others broadcast to every selected member."""
        split = self._split_index(index)
        if split is None:
            raise IndexError(
                f"LazyStackedTensorDict[]=: index {index!r} is not supported on a lazy stack; "
                "use ints and slices, with tensors only on the stack dim"
            )
        at, member_index, kept = split
        target = Ellipsis if _whole(member_index) else member_index
        n = len(self.tensordicts)
        if isinstance(at, int):
            self._member("LazyStackedTensorDict[]=", at)[target] = value
            return
        chosen = torch.arange(n)[at].tolist()
        sub_bs = self._index(index).batch_size
        if isinstance(value, Mapping) and not isinstance(value, TensorDict):
            value = TensorDict(value, batch_size=sub_bs)
        parts: Sequence[Any]
        if isinstance(value, Tensor) and 0 < value.ndim <= len(sub_bs):
            try:  # a tensor is broadcast over the indexed batch dims, then split
                value = value.expand(sub_bs)
            except RuntimeError:
                raise ValueError(
                    f"LazyStackedTensorDict[]=: a tensor of shape {tuple(value.shape)} does not "
                    f"broadcast to the indexed batch size {tuple(sub_bs)}"
                ) from None
        covers = isinstance(value, (Tensor, TensorDict, LazyStackedTensorDict)) and (
            value.shape[: len(sub_bs)] == sub_bs
        )
        if covers:
            parts = value.unbind(kept)
        elif isinstance(value, (TensorDict, LazyStackedTensorDict)):
            raise ValueError(
                f"LazyStackedTensorDict[]=: value batch size {tuple(value.batch_size)} does not "
                f"match the indexed batch size {tuple(sub_bs)}"
            )
        else:
            parts = [value] * len(chosen)
        for i, part in zip(chosen, parts, strict=True):
            self.tensordicts[i][target] = part

    # ---------------------------------------------------------------- shape
    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """Members when ``dim`` is the stack dim; otherwise a lazy stack per slice."""
        d = _norm("LazyStackedTensorDict.unbind", dim, len(self._batch_size))
        if d == self.stack_dim:
            return tuple(self.tensordicts)
        md = d if d < self.stack_dim else d - 1
        per_member = [m.unbind(md) for m in self.tensordicts]
        new_stack = self.stack_dim - (1 if d < self.stack_dim else 0)
        return tuple(
            self._restack(list(parts), new_stack) for parts in zip(*per_member, strict=True)
        )

    def unsqueeze(self, dim: int) -> Any:
        """Insert a batch dim of size one."""
        d = _norm("LazyStackedTensorDict.unsqueeze", dim, len(self._batch_size) + 1)
        if d <= self.stack_dim:
            return self._restack([m.unsqueeze(d) for m in self.tensordicts], self.stack_dim + 1)
        return self._restack([m.unsqueeze(d - 1) for m in self.tensordicts])

    def squeeze(self, dim: int | tuple[int, ...] | None = None) -> Any:
        """Drop batch dims of size one (the stack dim too, when it has one member)."""
        if dim is None or not isinstance(dim, int):
            n = len(self._batch_size)
            asked = (
                range(n)
                if dim is None
                else [_norm("LazyStackedTensorDict.squeeze", d, n) for d in dim]
            )
            out: Any = self
            for d in sorted({i for i in asked if self._batch_size[i] == 1}, reverse=True):
                out = out.squeeze(d)
            return out
        d = _norm("LazyStackedTensorDict.squeeze", dim, len(self._batch_size))
        if self._batch_size[d] != 1:
            return self
        if d == self.stack_dim:
            return self.tensordicts[0]
        md = d if d < self.stack_dim else d - 1
        new_stack = self.stack_dim - (1 if d < self.stack_dim else 0)
        return self._restack([m.squeeze(md) for m in self.tensordicts], new_stack)

    def permute(self, *dims: Any) -> Any:
        """Reorder the batch dims; the stack dim moves to where it lands."""
        order = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        n = len(self._batch_size)
        norm = [_norm("LazyStackedTensorDict.permute", d, n) for d in order]
        if sorted(norm) != list(range(n)):
            raise ValueError(f"LazyStackedTensorDict.permute: {tuple(order)} is not a permutation")
        new_stack = norm.index(self.stack_dim)
        rest = [d for d in norm if d != self.stack_dim]
        member_order = [d if d < self.stack_dim else d - 1 for d in rest]
        return self._restack([m.permute(*member_order) for m in self.tensordicts], new_stack)

    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swap two batch dims."""
        n = len(self._batch_size)
        order = list(range(n))
        a = _norm("LazyStackedTensorDict.transpose", dim0, n)
        b = _norm("LazyStackedTensorDict.transpose", dim1, n)
        order[a], order[b] = order[b], order[a]
        return self.permute(*order)

    def flip(self, *dims: Any) -> Any:
        """Reverse batch dims (the stack dim reverses the members)."""
        flat = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        n = len(self._batch_size)
        norm = [_norm("LazyStackedTensorDict.flip", d, n) for d in flat]
        members = self.tensordicts[::-1] if self.stack_dim in norm else list(self.tensordicts)
        member_dims = [d if d < self.stack_dim else d - 1 for d in norm if d != self.stack_dim]
        if member_dims:
            members = [m.flip(member_dims) for m in members]
        return self._restack(members)

    def expand(self, *shape: Any) -> Any:
        """Broadcast to ``shape``; new leading dims move the stack dim."""
        sizes = list(
            shape[0]
            if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size))
            else shape
        )
        extra = len(sizes) - len(self._batch_size)
        if extra < 0:
            raise RuntimeError("LazyStackedTensorDict.expand: fewer dims than the batch")
        d = self.stack_dim + extra
        if sizes[d] not in (-1, len(self.tensordicts)):
            raise RuntimeError(
                f"LazyStackedTensorDict.expand: the stack dim {d} has {len(self.tensordicts)} "
                f"members and cannot expand to {sizes[d]}"
            )
        member_shape = sizes[:d] + sizes[d + 1 :]
        return self._restack([m.expand(*member_shape) for m in self.tensordicts], d)

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Any, ...]:
        """Split along ``dim`` (groups of members on the stack dim)."""
        d = _norm("LazyStackedTensorDict.split", dim, len(self._batch_size))
        if d == self.stack_dim:
            index = torch.arange(len(self.tensordicts)).split(split_size)  # type: ignore[no-untyped-call]
            return tuple(self._restack([self.tensordicts[i] for i in g.tolist()]) for g in index)
        md = d if d < self.stack_dim else d - 1
        per_member = [m.split(split_size, md) for m in self.tensordicts]
        return tuple(self._restack(list(p)) for p in zip(*per_member, strict=True))

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Any, ...]:
        """Split into ``chunks`` pieces along ``dim``."""
        size = self._batch_size[_norm("LazyStackedTensorDict.chunk", dim, len(self._batch_size))]
        return self.split(max(1, -(-size // chunks)), dim)

    def _dense_op(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._dense_or_raise(f"LazyStackedTensorDict.{name}"), name)(*args, **kwargs)

    def reshape(self, *shape: Any) -> Any:
        """Reshape (densifies: elements of several members mix)."""
        return self._dense_op("reshape", *shape)

    def view(self, *shape: Any) -> Any:
        """View (densifies)."""
        return self._dense_op("view", *shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        """Flatten batch dims (densifies)."""
        return self._dense_op("flatten", start_dim, end_dim)

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Any:
        """Unflatten a batch dim (densifies)."""
        return self._dense_op("unflatten", dim, sizes)

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        """Roll batch elements (densifies)."""
        return self._dense_op("roll", shifts, dims)

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """Narrow a batch dim (a slice of members on the stack dim), with torch's checks."""
        d = _norm("LazyStackedTensorDict.narrow", dim, len(self._batch_size))
        size = self._batch_size[d]
        begin = start + size if start < 0 else start
        if not 0 <= begin <= size or length < 0 or begin + length > size:
            raise RuntimeError(
                f"LazyStackedTensorDict.narrow: start {start} and length {length} do not fit "
                f"dim {d} of size {size}"
            )
        index: list[Any] = [slice(None)] * len(self._batch_size)
        index[d] = slice(begin, begin + length)
        return self._index(tuple(index))

    def repeat(self, *repeats: Any) -> Any:
        """Tile batch dims (densifies)."""
        return self._dense_op("repeat", *repeats)

    def gather(self, dim: int, index: Tensor) -> Any:
        """Gather (densifies)."""
        return self._dense_op("gather", dim, index)

    def masked_fill(self, mask: Tensor, value: float | bool) -> Any:
        """Fill masked batch elements, member by member."""
        parts = mask.expand(self._batch_size).unbind(self.stack_dim)
        return self._restack(
            [m.masked_fill(p, value) for m, p in zip(self.tensordicts, parts, strict=True)]
        )

    def masked_select(self, mask: Tensor) -> Any:
        """Masked batch elements (densifies)."""
        return self._dense_op("masked_select", mask)

    def where(self, condition: Tensor, other: Any) -> Any:
        """Member-wise ``where``."""
        conds = condition.expand(self._batch_size).unbind(self.stack_dim)
        covers = isinstance(other, (Tensor, TensorDict, LazyStackedTensorDict)) and (
            other.shape[: len(self._batch_size)] == self._batch_size
        )
        others = other.unbind(self.stack_dim) if covers else [other] * len(conds)
        return self._restack(
            [m.where(c, o) for m, c, o in zip(self.tensordicts, conds, others, strict=True)]
        )


def _leaf_list(td: Any) -> list[Tensor]:
    return [v for v in td.values(True, True) if isinstance(v, Tensor)]


def _whole(index: tuple[Any, ...]) -> bool:
    """Whether a member index selects everything (only full slices)."""
    return all(isinstance(i, slice) and i == slice(None) for i in index)


def _nested(values: list[Tensor]) -> Tensor:
    """A nested tensor of the members' leaves: jagged when only the first dim differs."""
    if all(v.shape[1:] == values[0].shape[1:] for v in values) and values[0].ndim:
        return torch.nested.nested_tensor(values, layout=torch.jagged)
    with warnings.catch_warnings():  # torch warns that the strided layout is a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor(values)


def _padded_stack(values: list[Tensor], dim: int, padding_value: float) -> Tensor:
    ndim = values[0].ndim
    if any(v.ndim != ndim for v in values):
        raise RuntimeError("LazyStackedTensorDict.get: as_padded_tensor needs leaves of one ndim")
    target = [max(v.shape[i] for v in values) for i in range(ndim)]
    padded = []
    for v in values:
        pad: list[int] = []
        for i in reversed(range(ndim)):
            pad += [0, target[i] - v.shape[i]]
        padded.append(torch.nn.functional.pad(v, pad, value=padding_value))
    return torch.stack(padded, dim)


register_type("LazyStackedTensorDict", LazyStackedTensorDict)
