"""Live views of a TensorDict's keys, values and items, flat or nested."""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from torch import Tensor

from tensordict._keys import key_path
from tensordict._nontensor import NonTensor

if TYPE_CHECKING:
    from tensordict._base import DenseTensorDictBase

IsLeaf = Callable[[type], bool]

_KEYS, _VALUES, _ITEMS = 0, 1, 2

# What a stored type is, learned once per type so that the walk costs one dict lookup:
# True for a leaf, False for a nested collection (the walk descends into those only),
# and, in the default table, None for a non-tensor entry, which is neither: as upstream
# (where it is a tensorclass), ``leaves_only`` lists tensors only by default, and
# ``is_leaf=is_leaf_nontensor`` reads the other table, where a non-tensor entry is a leaf.
_DEFAULT_KIND: dict[type, bool | None] = {Tensor: True}
_WITH_NON_TENSOR_KIND: dict[type, bool | None] = {Tensor: True}


def default_is_leaf(cls: type) -> bool:
    """Tensors are leaves; non-tensor entries and nested collections are not."""
    return issubclass(cls, Tensor)


def with_non_tensor(cls: type) -> bool:
    """The leaf rule that also lists non-tensor entries (``is_leaf=with_non_tensor``): what
    the library's own walks use where a non-tensor entry is data to carry (update, pad,
    compare, save). The public spelling is ``tensordict.is_leaf_nontensor``."""
    return issubclass(cls, (Tensor, NonTensor))


with_non_tensor._stored_leaves = True  # type: ignore[attr-defined]


def _tables(is_leaf: IsLeaf | None) -> tuple[dict[type, bool | None], IsLeaf | None]:
    """The kind table to read, and the ``is_leaf`` to call (None: the table answers)."""
    if is_leaf is None:
        return _DEFAULT_KIND, None
    if getattr(is_leaf, "_stored_leaves", False):  # is_leaf_nontensor: answered by a table
        return _WITH_NON_TENSOR_KIND, None
    return _WITH_NON_TENSOR_KIND, is_leaf


def _learn(cls: type, table: dict[type, bool | None]) -> bool | None:
    tensor, other = issubclass(cls, Tensor), issubclass(cls, NonTensor)
    _DEFAULT_KIND[cls] = True if tensor else None if other else False
    _WITH_NON_TENSOR_KIND[cls] = tensor or other
    return table[cls]


def walk(
    store: dict[str, Any],
    mode: int,
    include_nested: bool,
    leaves_only: bool,
    is_leaf: IsLeaf | None,
) -> Iterator[Any]:
    """Yield the keys (``mode`` 0), values (1) or items (2) of ``store`` selected by the options.

    Depth first, a node before its entries, in one generator frame: the nested levels
    are an explicit stack, so no item is re-yielded through one frame per level.
    """
    known, call = _tables(is_leaf)
    stack: list[tuple[tuple[str, ...], Iterator[tuple[str, Any]]]] = []
    prefix: tuple[str, ...] = ()
    entries = iter(store.items())
    while True:
        for key, value in entries:
            cls = type(value)
            try:
                leaf = known[cls]
            except KeyError:
                leaf = _learn(cls, known)
            if not leaves_only or (leaf if call is None else call(cls)):
                if mode == _VALUES:
                    yield value
                else:
                    name = (*prefix, key) if prefix else key
                    yield name if mode == _KEYS else (name, value)
            if include_nested and leaf is False:
                if not hasattr(value, "_tensordict"):  # a ragged lazy stack: its common keys
                    yield from _walk_stack(value, (*prefix, key), mode, leaves_only, is_leaf)
                    continue
                stack.append((prefix, entries))
                prefix = (*prefix, key)
                entries = iter(value._tensordict.items())
                break
        else:
            if not stack:
                return
            prefix, entries = stack.pop()


def _count(
    store: dict[str, Any], include_nested: bool, leaves_only: bool, is_leaf: IsLeaf | None
) -> int:
    """How many entries ``walk`` yields, without building their keys (the nested levels
    an explicit stack, as in ``walk``: no call per level)."""
    known, call = _tables(is_leaf)
    n = 0
    pending = [store]
    while pending:
        for value in pending.pop().values():
            cls = type(value)
            try:
                leaf = known[cls]
            except KeyError:
                leaf = _learn(cls, known)
            if not leaves_only or (leaf if call is None else call(cls)):
                n += 1
            if include_nested and leaf is False:
                if hasattr(value, "_tensordict"):
                    pending.append(value._tensordict)
                else:  # a ragged lazy stack: its common keys
                    n += len(value.keys(True, leaves_only, is_leaf))
    return n


def _walk_stack(
    stack: Any, prefix: tuple[str, ...], mode: int, leaves_only: bool, is_leaf: IsLeaf | None
) -> Iterator[Any]:
    """``walk`` below a lazy stack nested in a TensorDict: the keys every member holds."""
    for key in stack.keys(True, leaves_only, is_leaf):
        name = (*prefix, *key) if type(key) is tuple else (*prefix, key)
        if mode == _KEYS:
            yield name
        else:
            value = stack.get(key)
            yield value if mode == _VALUES else (name, value)


class _View:
    __slots__ = ("_include_nested", "_is_leaf", "_leaves_only", "_td")
    _mode = _KEYS

    def __init__(
        self,
        td: DenseTensorDictBase,
        include_nested: bool,
        leaves_only: bool,
        is_leaf: IsLeaf | None,
    ) -> None:
        self._td = td
        self._include_nested = include_nested
        self._leaves_only = leaves_only
        self._is_leaf = is_leaf

    def __iter__(self) -> Iterator[Any]:
        store = self._td._tensordict
        if not self._include_nested and not self._leaves_only:
            if self._mode == _KEYS:
                return iter(store)
            return iter(store.values() if self._mode == _VALUES else store.items())
        return walk(store, self._mode, self._include_nested, self._leaves_only, self._is_leaf)

    def __len__(self) -> int:
        if not self._include_nested and not self._leaves_only:
            return len(self._td._tensordict)
        return _count(self._td._tensordict, self._include_nested, self._leaves_only, self._is_leaf)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class KeysView(_View, collections.abc.Set):  # type: ignore[type-arg]
    """The keys of a TensorDict; nested keys are tuples when ``include_nested=True``. It
    compares and combines as a set (``td.keys() == {"a", "b"}``, ``&``, ``|``, ``-``), as
    upstream's (a ``collections.abc.KeysView``)."""

    __slots__ = ()

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)

    def __iter__(self) -> Iterator[str | tuple[str, ...]]:
        if not self._include_nested and not self._leaves_only:
            return iter(self._td._tensordict)
        return walk(
            self._td._tensordict, _KEYS, self._include_nested, self._leaves_only, self._is_leaf
        )

    def __contains__(self, key: object) -> bool:
        if type(key) is str:
            if key not in self._td._tensordict:
                return False
            path: tuple[str, ...] = (key,)
        else:
            try:
                path = key_path(key, "keys().__contains__")  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return False
            if len(path) > 1 and not self._include_nested:
                return False
        value = self._td._get_path_or_none(path)
        if value is None:
            return False
        if not self._leaves_only:
            return True
        return (default_is_leaf if self._is_leaf is None else self._is_leaf)(type(value))


class FlatKeysView(KeysView):
    """``keys()`` without options: a view of the storage dict alone. It holds no reference
    to its TensorDict, so a TensorDict keeps one and hands it out again (no cycle)."""

    __slots__ = ("_store",)
    # the options, fixed: these class attributes shadow the (unused) slots of _View
    _include_nested = False
    _leaves_only = False
    _is_leaf = None

    def __init__(self, store: dict[str, Any]) -> None:
        self._store = store

    def __iter__(self) -> Iterator[str]:
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        if type(key) is str:
            return key in self._store
        try:
            path = key_path(key, "keys().__contains__")  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return len(path) == 1 and path[0] in self._store

    def __repr__(self) -> str:
        return f"KeysView({list(self)!r})"


class ValuesView(_View):
    """The values of a TensorDict (tensors, nested TensorDicts, NonTensorData)."""

    __slots__ = ()
    _mode = _VALUES


class ItemsView(_View):
    """``(key, value)`` pairs of a TensorDict."""

    __slots__ = ()
    _mode = _ITEMS
