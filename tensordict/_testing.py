"""Assertions for tests: two tensor collections are equal within a tolerance, leaf by leaf."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._nontensor import NonTensor
from tensordict._primitives import as_collection
from tensordict._td import is_tensor_collection
from tensordict._views import with_non_tensor

__all__ = ["assert_allclose_td", "assert_close"]


def _leaves(td: Any) -> dict[Any, Any]:
    keys = td.keys(include_nested=True, leaves_only=True, is_leaf=with_non_tensor)
    return {key: _leaf(td, key) for key in keys}


def _leaf(td: Any, key: Any) -> Any:
    """The leaf at ``key``; a ragged one of a lazy stack as the (nested) list of its parts."""
    try:
        return td.get(key)
    except RuntimeError:
        return td.get(key, as_list=True)


def assert_close(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    intersection: bool = False,
    msg: str = "",
    prefix: Any = (),
) -> bool:
    """Raise ``AssertionError`` unless every tensor leaf of ``actual`` is close to the same
    leaf of ``expected`` (``torch.testing.assert_close`` tolerances); returns True.

    The two must hold the same leaf keys, or, with ``intersection=True``, only the common
    keys are compared. Non-tensor entries are not compared.

    >>> import torch
    >>> from tensordict import TensorDict, assert_close
    >>> a = TensorDict({"x": torch.zeros(2), "n": {"y": torch.ones(2)}}, [2])
    >>> assert_close(a, a.clone())
    True
    >>> assert_close(a, a + 1)
    Traceback (most recent call last):
    ...
    AssertionError: assert_close: key 'n.y'... not close...
    """
    call = "assert_close"
    actual, expected = as_collection(actual), as_collection(expected)
    if not is_tensor_collection(actual) or not is_tensor_collection(expected):
        raise TypeError(
            f"{call}: expected two tensor collections, got {type(actual).__name__} and "
            f"{type(expected).__name__}"
        )
    mine, theirs = _leaves(actual), _leaves(expected)
    if intersection:
        keys = [k for k in mine if k in theirs]
    else:
        only_a = [k for k in mine if k not in theirs]
        only_b = [k for k in theirs if k not in mine]
        if only_a or only_b:
            raise KeyError(
                f"{call}: the keys differ; only in actual: {only_a}, only in expected: {only_b}"
            )
        keys = list(mine)
    prefix = (prefix,) if isinstance(prefix, str) else tuple(prefix)
    for key in sorted(keys, key=str):
        a, b = mine[key], theirs[key]
        if isinstance(a, NonTensor) or not isinstance(a, (Tensor, list)):
            continue
        path = prefix + ((key,) if isinstance(key, str) else tuple(key))
        label = ".".join(path)
        try:
            torch.testing.assert_close(
                _detached(a), _detached(b), rtol=rtol, atol=atol, equal_nan=equal_nan
            )
        except AssertionError as err:
            extra = f" ({msg})" if msg else ""
            raise AssertionError(f"{call}: key {label!r}{extra} not close: {err}") from None
    return True


assert_allclose_td = assert_close


def _detached(value: Any) -> Any:
    if isinstance(value, list):
        return [_detached(v) for v in value]
    return value.detach() if isinstance(value, Tensor) else value
