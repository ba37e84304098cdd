"""Where an element read from a NonTensorStack came from, so that writing into it
(``stack[i][True] = value``) reaches the stack, as upstream's member objects do."""

from __future__ import annotations

import weakref
from typing import Any

# id(element) -> (a weak reference to it, the stack it was read from, the index)
_ORIGINS: dict[int, tuple[weakref.ref[Any], Any, Any]] = {}


def _basic(index: Any) -> bool:
    """Whether ``index`` views (ints, slices, None, ``...``, bools), as a tensor index
    does; an index tensor or a list copies, and its result writes nowhere else."""
    items = index if type(index) is tuple else (index,)
    return all(i is None or i is Ellipsis or type(i) in (int, bool, slice) for i in items)


def remember(element: Any, stack: Any, index: Any) -> None:
    """Record that ``element`` is ``stack[index]`` when the index views (forgotten when
    ``element`` dies)."""
    if not _basic(index):
        return
    key = id(element)
    ref = weakref.ref(element, lambda _ref: _ORIGINS.pop(key, None))
    _ORIGINS[key] = (ref, stack, index)


def write_back(element: Any, sub: Any = None, value: Any = None) -> None:
    """After an in-place write into ``element``, copy it into the stack it was read from
    (which passes it on to its own origin, if it has one). For a view of several elements
    (a slice) given the write (``element[sub] = value``), only that write is repeated on
    the stack's current values: other positions the stack changed since the view was read
    are not overwritten with the view's older copies."""
    entry = _ORIGINS.get(id(element))
    if entry is None or entry[0]() is not element:
        return
    _, stack, index = entry
    if sub is not None and not _one_element(index):
        fresh = stack[index]
        _ORIGINS.pop(id(fresh), None)  # (written back below, once)
        fresh[sub] = value
        stack[index] = fresh
    else:
        stack[index] = element


def _one_element(index: Any) -> bool:
    items = index if type(index) is tuple else (index,)
    return all(type(i) is int or i is None or i is Ellipsis for i in items)
