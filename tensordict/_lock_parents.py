"""Which locked TensorDicts hold a nested one: it cannot be unlocked while one of them is
alive and locked (as upstream). Kept on the child itself, as weak references to its
locked parents (its ``_locked_by`` slot): no process-wide table, nothing to clean up."""

from __future__ import annotations

import weakref
from typing import Any


def note_parent(child: Any, parent: Any) -> None:
    """Record that the locked ``parent`` holds ``child``."""
    try:
        refs = child._locked_by
    except AttributeError:  # (the slot is set on the first lock by a parent)
        object.__setattr__(child, "_locked_by", [weakref.ref(parent)])
        return
    if not any(ref() is parent for ref in refs):
        refs.append(weakref.ref(parent))


def forget_parent(child: Any, parent: Any) -> None:
    """``parent`` no longer holds ``child`` locked (it was unlocked)."""
    refs = getattr(child, "_locked_by", None)
    if refs:
        refs[:] = [ref for ref in refs if ref() is not None and ref() is not parent]


def locked_parent(child: Any) -> Any:
    """A live, locked TensorDict that holds ``child``, or None."""
    for ref in getattr(child, "_locked_by", ()):
        parent = ref()
        if parent is not None and parent._is_locked:
            return parent
    return None
