"""Which locked TensorDicts hold a nested one: it cannot be unlocked while one of them is
alive and locked (as upstream). Keyed by identity (``==`` is element-wise on a
TensorDict), weak on both sides: an entry leaves with its child."""

from __future__ import annotations

import weakref
from typing import Any

# id(child) -> (a weak reference to the child, weak references to its locked parents)
_PARENTS: dict[int, tuple[weakref.ref[Any], list[weakref.ref[Any]]]] = {}


def _drop(key: int) -> Any:
    return lambda _ref: _PARENTS.pop(key, None)


def _parents(child: Any) -> list[weakref.ref[Any]] | None:
    entry = _PARENTS.get(id(child))
    if entry is None or entry[0]() is not child:  # an id reused by a newer object
        return None
    return entry[1]


def note_parent(child: Any, parent: Any) -> None:
    """Record that the locked ``parent`` holds ``child``."""
    refs = _parents(child)
    if refs is None:
        key = id(child)
        _PARENTS[key] = (weakref.ref(child, _drop(key)), [weakref.ref(parent)])
    elif not any(ref() is parent for ref in refs):
        refs.append(weakref.ref(parent))


def forget_parent(child: Any, parent: Any) -> None:
    """``parent`` no longer holds ``child`` locked (it was unlocked)."""
    refs = _parents(child)
    if refs is not None:
        refs[:] = [ref for ref in refs if ref() is not None and ref() is not parent]


def locked_parent(child: Any) -> Any:
    """A live, locked TensorDict that holds ``child``, or None."""
    for ref in _parents(child) or ():
        parent = ref()
        if parent is not None and parent._is_locked:
            return parent
    return None
