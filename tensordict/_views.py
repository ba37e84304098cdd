"""Live views of a TensorDict's keys, values and items, flat or nested."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from torch import Tensor

from tensordict._keys import join_path, key_path
from tensordict._nontensor import NonTensor

if TYPE_CHECKING:
    from tensordict._td import TensorDict

IsLeaf = Callable[[type], bool]


def default_is_leaf(cls: type) -> bool:
    """Tensors and non-tensor entries are leaves; nested collections are not."""
    return issubclass(cls, (Tensor, NonTensor))


def walk(
    td: TensorDict,
    include_nested: bool,
    leaves_only: bool,
    is_leaf: IsLeaf,
    prefix: tuple[str, ...] = (),
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Yield ``(path, value)`` for the entries selected by the three options."""
    for key, value in td._tensordict.items():
        path = (*prefix, key)
        leaf = is_leaf(type(value))
        if leaf or not leaves_only:
            yield path, value
        if include_nested and not isinstance(value, (Tensor, NonTensor)):
            yield from walk(value, include_nested, leaves_only, is_leaf, path)


class _View:
    __slots__ = ("_include_nested", "_is_leaf", "_leaves_only", "_td")

    def __init__(
        self, td: TensorDict, include_nested: bool, leaves_only: bool, is_leaf: IsLeaf | None
    ) -> None:
        self._td = td
        self._include_nested = include_nested
        self._leaves_only = leaves_only
        self._is_leaf = default_is_leaf if is_leaf is None else is_leaf

    def _walk(self) -> Iterator[tuple[tuple[str, ...], Any]]:
        if not self._include_nested and not self._leaves_only:
            return (((key,), value) for key, value in self._td._tensordict.items())
        return walk(self._td, self._include_nested, self._leaves_only, self._is_leaf)

    def __len__(self) -> int:
        if not self._include_nested and not self._leaves_only:
            return len(self._td._tensordict)
        return sum(1 for _ in self._walk())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"  # type: ignore[call-overload]


class KeysView(_View):
    """The keys of a TensorDict; nested keys are tuples when ``include_nested=True``."""

    __slots__ = ()

    def __iter__(self) -> Iterator[str | tuple[str, ...]]:
        if not self._include_nested and not self._leaves_only:
            return iter(self._td._tensordict)
        return (join_path(path) for path, _ in self._walk())

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
        return not self._leaves_only or self._is_leaf(type(value))


class ValuesView(_View):
    """The values of a TensorDict (tensors, nested TensorDicts, NonTensorData)."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return (value for _, value in self._walk())


class ItemsView(_View):
    """``(key, value)`` pairs of a TensorDict."""

    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[str | tuple[str, ...], Any]]:
        return ((join_path(path), value) for path, value in self._walk())
