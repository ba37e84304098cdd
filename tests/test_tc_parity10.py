"""Parity with upstream 0.15.3 outside the conformance tiers: deprecated module aliases,
the type aliases of ``tensordict.utils``, and a few tensorclass / module / compile cases."""

from __future__ import annotations

import collections
import importlib
import math
import typing

import numpy as np
import pytest
import torch

import tensordict
from tensordict import unravel_key

# (module, name, check of the value)
_ALIASES = [
    ("tensordict.utils", "unravel_keys", lambda f: f("a", ("b", ("c",))) == ("a", ("b", "c"))),
    ("tensordict.utils", "prod", lambda f: f([2, 3, 4]) == 24),
    ("tensordict.utils", "is_nested_key", lambda f: f(["a", "b"]) and not f(("a", ("b",)))),
    ("tensordict.utils", "is_seq_of_nested_key", lambda f: f([]) and not f([1])),
    ("tensordict.tensordict", "is_nested_key", lambda f: f("a") and not f(())),
    ("tensordict.tensordict", "is_seq_of_nested_key", lambda f: f(["a", ("b", "c")])),
    ("tensordict.utils", "is_namedtuple", lambda f: f(collections.namedtuple("P", "x")(1))),
    ("tensordict.utils", "is_namedtuple_class", lambda f: not f(tuple)),
    (
        "tensordict.utils",
        "NUMPY_TO_TORCH_DTYPE_DICT",
        lambda d: d[np.dtype("int16")] is torch.int16 and len(d) == 14,
    ),
    ("tensordict.utils", "TORCH_TO_NUMPY_DTYPE_DICT", lambda d: d[torch.bool] == np.dtype(bool)),
    ("tensordict.nn.utils", "StrEnum", lambda c: issubclass(c, str)),
    ("tensordict.nn.distributions", "distributions_maps", lambda d: "delta" in d),
    (
        "tensordict.nn.distributions.truncated_normal",
        "CONST_LOG_SQRT_2PI_E",
        lambda c: c == pytest.approx(0.5 * math.log(2 * math.pi * math.e)),
    ),
]


@pytest.mark.parametrize(("module", "name", "check"), _ALIASES, ids=lambda v: str(v)[:40])
def test_deprecated_alias_warns_and_works(module: str, name: str, check: object) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module.split('.')[-1]}\.{name} is deprecated"):
        value = getattr(mod, name)
    assert callable(check) and check(value)


def test_unravel_keys_matches_unravel_key() -> None:
    with pytest.warns(DeprecationWarning, match="use unravel_key or unravel_key_list"):
        from tensordict.utils import unravel_keys  # type: ignore[attr-defined]
    for key in ["a", ("a",), ("a", ("b", ("c",)))]:
        assert unravel_keys(key) == unravel_key(key)


def test_unknown_module_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'tensordict.utils' has no attribute 'nope'"):
        tensordict.utils.nope  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(tensordict.utils, "KeyDependentDefaultDict")


def test_utils_type_aliases_and_buffer() -> None:
    from tensordict.utils import Buffer, DeviceType, IndexType

    assert Buffer is torch.nn.Buffer
    assert isinstance(torch.device("cpu"), DeviceType)
    assert {slice, type(None), torch.Tensor} <= set(typing.get_args(IndexType))
    assert {"Buffer", "DeviceType", "IndexType"} <= set(tensordict.utils.__all__)
