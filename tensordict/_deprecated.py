"""Upstream's deprecated module attributes: a PEP 562 ``__getattr__`` built from a table,
and the few small helpers those attributes name that have no other home here."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from tensordict._keys import unravel_key

#: ``name -> (loader, replacement)``: the loader returns the attribute's value, called on
#: each access (so that a costly value such as a numpy dtype table is built only when asked)
DeprecatedTable = Mapping[str, tuple[Callable[[], object], "str | None"]]


def module_getattr(
    module: str, table: DeprecatedTable, removal: str = "0.17"
) -> Callable[[str], object]:
    """A module ``__getattr__`` serving ``table``'s names, each access warning
    :class:`DeprecationWarning` with what to use instead.

    >>> import warnings
    >>> getattr_ = module_getattr("pkg.mod", {"old": (lambda: 1, "pkg.new")})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("old")
    1
    >>> print(caught[0].message)
    pkg.mod.old is deprecated (upstream removes it in TensorDict 0.17); use pkg.new instead.
    """

    def __getattr__(name: str) -> object:
        entry = table.get(name)
        if entry is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        loader, replacement = entry
        message = f"{module}.{name} is deprecated (upstream removes it in TensorDict {removal})"
        message += f"; use {replacement} instead." if replacement else "."
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return loader()

    return __getattr__


def deprecated_attributes(
    module: str, attributes: Mapping[str, tuple[Any, str | None]], *, removal: str = "0.17"
) -> Callable[[str], object]:
    """A module ``__getattr__`` (PEP 562) serving deprecated ``attributes`` (``name ->
    (value, replacement or None)``), each read warning :class:`DeprecationWarning`
    (upstream's ``tensordict.utils.deprecated_attributes``).

    >>> import warnings
    >>> getattr_ = deprecated_attributes("pkg.mod", {"OLD": (3, "pkg.NEW")})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("OLD")
    3
    >>> print(caught[0].message)
    pkg.mod.OLD is deprecated (upstream removes it in TensorDict 0.17); use pkg.NEW instead.
    """
    table = {
        name: (functools.partial(_same, value), replacement)
        for name, (value, replacement) in attributes.items()
    }
    return module_getattr(module, table, removal)


def _same(value: object) -> object:
    return value


def unravel_keys(*keys: Any) -> Any:
    """``unravel_key`` of one key, or the tuple of each key unravelled (upstream's
    deprecated ``tensordict.utils.unravel_keys``).

    >>> unravel_keys(("a", ("b",)))
    ('a', 'b')
    >>> unravel_keys("a", ("b", ("c",)))
    ('a', ('b', 'c'))
    """
    if len(keys) == 1:
        return unravel_key(keys[0])
    return tuple(unravel_key(key) for key in keys)


def is_nested_key(key: Any) -> bool:
    """Whether ``key`` is a str, or a non-empty list or tuple of str (upstream's old,
    loose rule: it accepts lists and rejects nested tuples).

    >>> is_nested_key(("a", "b")), is_nested_key(["a"]), is_nested_key(("a", ("b",)))
    (True, True, False)
    """
    if isinstance(key, str):
        return True
    if key and isinstance(key, (list, tuple)):
        return all(isinstance(part, str) for part in key)
    return False


def is_seq_of_nested_key(seq: Any) -> bool:
    """Whether ``seq`` is a sequence (possibly empty) whose items pass :func:`is_nested_key`.

    >>> is_seq_of_nested_key(["a", ("b", "c")]), is_seq_of_nested_key([]), is_seq_of_nested_key("a")
    (True, True, True)
    """
    return isinstance(seq, Sequence) and all(is_nested_key(key) for key in seq)


def is_namedtuple(obj: object) -> bool:
    """Whether ``obj`` is an instance of a namedtuple class.

    >>> import collections
    >>> is_namedtuple(collections.namedtuple("P", "x")(1)), is_namedtuple((1,))
    (True, False)
    """
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def is_namedtuple_class(cls: type) -> bool:
    """Whether ``cls`` has the attributes of a namedtuple class.

    >>> import collections
    >>> is_namedtuple_class(collections.namedtuple("P", "x")), is_namedtuple_class(tuple)
    (True, False)
    """
    return all(hasattr(cls, attr) for attr in ("_fields", "_replace", "_asdict"))


@functools.cache
def numpy_to_torch_dtypes() -> dict[Any, torch.dtype]:
    """Every torch dtype numpy also has, keyed by its ``numpy.dtype``.

    >>> import numpy as np, torch
    >>> numpy_to_torch_dtypes()[np.dtype("float32")]
    torch.float32
    """
    import numpy as np

    table: dict[Any, torch.dtype] = {}
    for dtype in vars(torch).values():
        if isinstance(dtype, torch.dtype):
            try:
                table.setdefault(np.dtype(str(dtype).removeprefix("torch.")), dtype)
            except TypeError:
                continue
    return table


def torch_to_numpy_dtypes() -> dict[torch.dtype, Any]:
    """The inverse of :func:`numpy_to_torch_dtypes`.

    >>> import torch
    >>> torch_to_numpy_dtypes()[torch.int64]
    dtype('int64')
    """
    return {value: key for key, value in numpy_to_torch_dtypes().items()}


_KEY_RULE_NOTE = "(which rejects lists and accepts nested tuples)"

#: upstream's deprecated names of ``tensordict.tensordict`` that mean something here
TENSORDICT_TABLE: DeprecatedTable = {
    "is_nested_key": (
        lambda: is_nested_key,
        f"isinstance(key, tensordict.NestedKey) {_KEY_RULE_NOTE}",
    ),
    "is_seq_of_nested_key": (
        lambda: is_seq_of_nested_key,
        f"isinstance(key, tensordict.NestedKey) on each key {_KEY_RULE_NOTE}",
    ),
}

#: upstream's deprecated names of ``tensordict.utils`` that mean something here
UTILS_TABLE: DeprecatedTable = {
    **TENSORDICT_TABLE,
    "NUMPY_TO_TORCH_DTYPE_DICT": (numpy_to_torch_dtypes, None),
    "TORCH_TO_NUMPY_DTYPE_DICT": (torch_to_numpy_dtypes, None),
    "is_namedtuple": (lambda: is_namedtuple, None),
    "is_namedtuple_class": (lambda: is_namedtuple_class, None),
    "prod": (lambda: math.prod, "math.prod"),
    "unravel_keys": (lambda: unravel_keys, "unravel_key or unravel_key_list"),
    "set_json_backend": (lambda: _json_backend().set_json_backend, None),
    "get_json_backend": (lambda: _json_backend().get_json_backend, None),
    "json_dumps": (lambda: _json_backend().json_dumps, "json.dumps or orjson.dumps"),
}


def _json_backend() -> Any:
    from tensordict import _json_backend as module

    return module
