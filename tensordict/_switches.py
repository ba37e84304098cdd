"""Process-wide behaviour switches: setters (context managers, decorators) and their getters."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")


def _from_env(name: str) -> bool | None:
    """The boolean an environment variable spells, None when unset (or set to "none")."""
    raw = os.environ.get(name)
    if raw is None or raw.lower() == "none":
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError(f"tensordict: environment variable {name}={raw!r} is not a boolean")


class _Switch:
    """One global flag; an instance sets it for a ``with`` block or a decorated call.

    Subclasses name the flag's default and its environment variable; the flag's state
    (None: never set) lives on the subclass, so each switch is independent.
    """

    _state: ClassVar[bool | None]
    _default: ClassVar[bool]

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._saved: list[bool | None] = []

    def set(self) -> None:
        """Set the flag for good (no restore)."""
        type(self)._state = self.mode

    def __enter__(self) -> None:
        self._saved.append(type(self)._state)
        type(self)._state = self.mode

    def __exit__(self, *exc: object) -> None:
        type(self)._state = self._saved.pop()

    def __call__(self, func: _F) -> _F:
        """Decorate ``func``: the flag holds ``mode`` during each call."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)(self.mode):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    @classmethod
    def _get(cls, allow_none: bool) -> bool | None:
        if cls._state is None:
            return None if allow_none else cls._default
        return cls._state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mode})"


class set_lazy_legacy(_Switch):
    """Ask for upstream's legacy lazy results (kept for upstream code).

    While it is on, ``torch.stack`` and ``TensorDict.stack`` of TensorDicts give a
    :class:`LazyStackedTensorDict` (its members the TensorDicts themselves), as upstream's
    legacy mode does; ``torch.stack`` is dense otherwise. Upstream also returned lazy
    views from ``permute``, ``unsqueeze``, ... in this mode; those views are not built
    here: every shape method returns a plain TensorDict whatever the flag. One trace of
    them is kept while it is on: a ``view`` or ``permute`` that undoes the one that made a
    collection returns the collection it came from (and a ``view`` to the same shape
    returns the collection itself). Use it as ``set_lazy_legacy(mode)`` in a ``with``
    statement, as a decorator, or ``.set()`` it.

    >>> from tensordict import lazy_legacy, set_lazy_legacy
    >>> with set_lazy_legacy(True):
    ...     lazy_legacy()
    True
    >>> lazy_legacy()
    False
    """

    _state = _from_env("LAZY_LEGACY_OP")
    _default = False


def lazy_legacy(allow_none: bool = False) -> bool | None:
    """The ``set_lazy_legacy`` flag (False unless set; None if never set and ``allow_none``).

    >>> from tensordict import lazy_legacy, set_lazy_legacy
    >>> @set_lazy_legacy(True)
    ... def inside():
    ...     return lazy_legacy()
    >>> inside(), lazy_legacy()
    (True, False)
    """
    return set_lazy_legacy._get(allow_none)


class set_list_to_stack(_Switch):
    """Whether a list assigned to a TensorDict entry is stacked (True, the default).

    On: ``td["x"] = [a, b]`` stacks the elements along the batch (tensors into one tensor,
    other values into a ``NonTensorStack``). Off: the list is kept as one non-tensor value.
    Use it as a context manager, a decorator, or ``.set()`` it.

    >>> from tensordict import list_to_stack, set_list_to_stack
    >>> with set_list_to_stack(False):
    ...     list_to_stack()
    False
    >>> list_to_stack()
    True
    """

    _state = _from_env("LIST_TO_STACK")
    _default = True


def list_to_stack(allow_none: bool = False) -> bool | None:
    """The ``set_list_to_stack`` flag (True unless set; None if never set and ``allow_none``).

    >>> from tensordict import list_to_stack
    >>> list_to_stack()
    True
    """
    return set_list_to_stack._get(allow_none)


class set_capture_non_tensor_stack(_Switch):
    """Whether stacking equal non-tensor values yields one ``NonTensorData`` (the legacy way).

    Off: stacking ``NonTensorData("a")`` twice gives a ``NonTensorStack`` of two entries.
    On: equal values are captured into a single ``NonTensorData``. Never set (None), the
    stack captures equal values too (our rule, see docs/shapes.md; upstream stacks them),
    though the getter reports False as upstream's does. ``MetaData`` is always captured.
    Use it as a context manager, a decorator, or ``.set()`` it.

    >>> from tensordict import capture_non_tensor_stack, set_capture_non_tensor_stack
    >>> with set_capture_non_tensor_stack(True):
    ...     capture_non_tensor_stack()
    True
    >>> capture_non_tensor_stack()
    False
    """

    _state = _from_env("CAPTURE_NONTENSOR_STACK")
    _default = False


def capture_non_tensor_stack(allow_none: bool = False) -> bool | None:
    """The ``set_capture_non_tensor_stack`` flag (False unless set; None if never set and
    ``allow_none``).

    >>> from tensordict import capture_non_tensor_stack
    >>> capture_non_tensor_stack()
    False
    """
    return set_capture_non_tensor_stack._get(allow_none)


class set_get_defaults_to_none(_Switch):
    """Whether ``td.get(key)`` without a default answers None for a missing key.

    As upstream, calling it sets the flag at once (``set_get_defaults_to_none(False)``; None
    means False); used in a ``with`` statement, the old value comes back on exit. On,
    ``get`` returns None; off (our default: upstream's is on), it raises ``KeyError``,
    as ``td[key]`` does.

    >>> from tensordict import get_defaults_to_none, set_get_defaults_to_none
    >>> before = get_defaults_to_none()
    >>> with set_get_defaults_to_none(False):
    ...     get_defaults_to_none()
    False
    >>> get_defaults_to_none() == before
    True
    """

    _state = _from_env("TD_GET_DEFAULTS_TO_NONE")
    _default = False  # upstream: True; a silent None hides a misspelt key (docs/api.md)

    def __init__(self, set_to_none: bool | None = True) -> None:
        super().__init__(bool(set_to_none))
        self._before = type(self)._state
        self.set()

    def __enter__(self) -> None:
        self._saved.append(self._before)


def get_defaults_to_none(set_to_none: bool = True) -> bool:
    """The ``set_get_defaults_to_none`` flag (False unless set).

    >>> from tensordict import get_defaults_to_none
    >>> isinstance(get_defaults_to_none(), bool)
    True
    """
    return bool(set_get_defaults_to_none._get(False))


__all__ = [
    "capture_non_tensor_stack",
    "get_defaults_to_none",
    "lazy_legacy",
    "list_to_stack",
    "set_capture_non_tensor_stack",
    "set_get_defaults_to_none",
    "set_lazy_legacy",
    "set_list_to_stack",
]
