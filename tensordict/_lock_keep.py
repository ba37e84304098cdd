"""Which results keep the lock of a locked TensorDict: one rule, applied by one decorator.

The rule (upstream's, made consistent): a result that holds the same entries, leaf for
leaf, keeps the lock -- batch-shape views (``view``, ``unsqueeze``, ``squeeze``,
``expand``, ``flatten``, ``unflatten``, ``reshape``, ``permute``, ``transpose``,
``split``, ``chunk``, ``narrow``, ``flip``, ``roll``, ``repeat``, ...), casts and moves
(``to``, ``float``, ``double``, ``cpu``, ``detach``, ...) and element-wise maths
(``exp``, ``+``, ``lerp``, ``where``, ``torch.zeros_like``, ...). A result that gathers
entries into a new collection is unlocked: indexing, ``unbind``, ``clone``, ``select``,
``exclude``, ``apply``, reductions, ``stack``/``cat``, ``gather``, ``pad``. As upstream,
comparisons, ``clamp(min, max)``, ``masked_fill`` and ``type`` give unlocked results too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from tensordict._primitives import CollectionPrimitives

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
# writes the slot directly: a tensorclass's __setattr__ would take the name for a field
_SET_LAST_OP: Callable[[Any, Any], None] = CollectionPrimitives.__dict__["_last_op"].__set__


def keep_lock(source: Any, out: T) -> T:
    """``out`` (a collection, or a tuple of them) locked when ``source`` is locked.

    The view's record for ``with td.view(...) as v:`` survives the locking.
    """
    if not source.is_locked:
        return out
    for result in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(result, CollectionPrimitives) and not result.is_locked:
            last = getattr(result, "_last_op", None)
            result.lock_()
            _SET_LAST_OP(result, last)
    return out


def keeps_lock(method: F) -> F:
    """Decorate an operation whose result keeps the lock of ``self`` (see the module)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        if self.is_locked:
            keep_lock(self, out)
        return out

    return wrapper  # type: ignore[return-value]
