"""Nested keys: what a key may be, how nested tuples unravel, and key-error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    NestedKey: TypeAlias = str | tuple["NestedKey", ...]
    """A key of a TensorDict: a non-empty string, or a (nested) tuple of them."""
else:

    class _NestedKeyMeta(type):
        def __instancecheck__(cls, obj: object) -> bool:
            if isinstance(obj, str):
                return True
            return isinstance(obj, tuple) and bool(obj) and all(isinstance(p, cls) for p in obj)

    class NestedKey(metaclass=_NestedKeyMeta):
        """The type of a key: a string, or a non-empty tuple of keys (nested tuples
        unravel). Type checkers read it as ``str | tuple[NestedKey, ...]``; at run time
        ``isinstance(key, NestedKey)`` tells a key.

        >>> from tensordict import NestedKey
        >>> isinstance(("a", ("b",)), NestedKey), isinstance(("a", 1), NestedKey)
        (True, False)
        """


NO_DEFAULT: Any = object()
"""The "no default given" marker of ``get(key, default)``: a missing key raises KeyError."""

_KEY_RULE = "a TensorDict key is a non-empty string or a (nested) tuple of non-empty strings"


def _describe(obj: object) -> str:
    return f"{type(obj).__name__} {obj!r}"


def _unravel_into(key: object, out: list[str], call: str, whole: object) -> None:
    if type(key) is str:
        if not key:
            raise ValueError(f"{call}: empty string in key {whole!r}; {_KEY_RULE}")
        out.append(key)
    elif isinstance(key, tuple):
        for part in key:
            _unravel_into(part, out, call, whole)
    elif isinstance(key, str):  # a str subclass (StrEnum, ...): its plain string content
        _unravel_into(str.__str__(key), out, call, whole)
    else:
        raise TypeError(f"{call}: got {_describe(whole)}; {_KEY_RULE}")


def unravel_key(key: NestedKey, call: str = "unravel_key") -> str | tuple[str, ...]:
    """Flatten any nesting of tuples in ``key``; a one-element tuple becomes its string.

    >>> unravel_key(("a", ("b", ("c",))))
    ('a', 'b', 'c')
    >>> unravel_key((("a",),))
    'a'
    """
    if type(key) is str and key:
        return key
    parts: list[str] = []
    _unravel_into(key, parts, call, key)
    if not parts:
        raise ValueError(f"{call}: empty key {key!r}; {_KEY_RULE}")
    return parts[0] if len(parts) == 1 else tuple(parts)


def key_path(key: NestedKey, call: str) -> tuple[str, ...]:
    """The key as a tuple of strings (``"a"`` -> ``("a",)``)."""
    if type(key) is str and key:
        return (key,)
    parts: list[str] = []
    _unravel_into(key, parts, call, key)
    if not parts:
        raise ValueError(f"{call}: empty key {key!r}; {_KEY_RULE}")
    return tuple(parts)


def unravel_key_list(keys: Iterable[NestedKey]) -> list[str | tuple[str, ...]]:
    """Unravel every key of a list.

    >>> unravel_key_list(["a", ("b", ("c",)), (("d",),)])
    ['a', ('b', 'c'), 'd']
    """
    return [unravel_key(key, "unravel_key_list") for key in keys]


def join_path(path: Sequence[str]) -> str | tuple[str, ...]:
    """The public spelling of a key path: a string for one part, else a tuple."""
    return path[0] if len(path) == 1 else tuple(path)


class KeyThroughLeafError(KeyError, ValueError):
    """A nested key that runs through a leaf (``("a", "b")`` where ``"a"`` holds a tensor):
    a KeyError as a missing key is, and the ValueError upstream raises."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def missing_key_error(call: str, key: object, available: Iterable[str]) -> KeyError:
    """A KeyError naming ``key`` and the closest existing keys at that level."""
    names = list(available)
    leaf = key[-1] if isinstance(key, tuple) and key else key
    close = difflib.get_close_matches(str(leaf), names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(repr(n) for n in sorted(names)[:10]) + (", ..." if len(names) > 10 else "")
    owner = call.split(".", 1)[0].split("[", 1)[0]
    # (upstream's words: "was not found" and "not found in TensorDict with keys [...]",
    # with the keys at the level the path stopped at)
    return KeyError(f"{call}: key {key!r} was not found in {owner} with keys [{shown}]{hint}")


def locked_error(call: str, key: object, what: str = "add, remove or replace") -> RuntimeError:
    """The RuntimeError of a write that would change the keys of a locked collection."""
    return RuntimeError(
        f"{call}: Cannot modify locked TensorDict. For in-place modification of an "
        f"existing key use set_() / update_(), or call unlock_() first (cannot {what} "
        f"key {key!r})"
    )


def is_string_key(key: tuple[Any, ...]) -> bool:
    """Whether a tuple holds only strings, in nested tuples too (a key, not an index).

    >>> is_string_key(("a", ("b",))), is_string_key(((0, 1),))
    (True, False)
    """
    return all(type(k) is str or (type(k) is tuple and k and is_string_key(k)) for k in key)


def sort_key(key: str | tuple[str, ...]) -> str:
    """The order of ``keys(sort=True)``: by the ``"."``-joined key.

    >>> sorted(["b", ("a", "c")], key=sort_key)
    [('a', 'c'), 'b']
    """
    return key if type(key) is str else ".".join(key)
