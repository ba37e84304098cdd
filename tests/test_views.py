"""keys/values/items: every option against a reference walk over plain nested dicts."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, tensorclass
from tests.catalogue import CATALOGUE


@tensorclass
class _Point:
    x: torch.Tensor


def _reference(
    td: TensorDict,
    include_nested: bool,
    leaves_only: bool,
    is_leaf: Callable[[type], bool] | None,
    prefix: tuple[str, ...] = (),
) -> Iterator[tuple[Any, Any]]:
    """The documented order: depth first, a nested TensorDict before its entries."""
    for key, value in td._tensordict.items():
        path = (*prefix, key)
        stored_leaf = isinstance(value, (torch.Tensor, NonTensorData))
        # by default only tensors are leaves (as upstream, a non-tensor entry is not one)
        leaf = isinstance(value, torch.Tensor) if is_leaf is None else is_leaf(type(value))
        if leaf or not leaves_only:
            yield (path[0] if len(path) == 1 else path), value
        if include_nested and not stored_leaf:
            yield from _reference(value, include_nested, leaves_only, is_leaf, path)


def _deep() -> TensorDict:
    td = TensorDict(
        {"a": torch.zeros(2), "n": {"b": torch.ones(2, 3), "m": {"c": torch.zeros(2)}}},
        batch_size=[2],
    )
    td["text"] = "hi"
    td["n", "p"] = _Point(torch.arange(2.0), batch_size=[2])
    td["e"] = TensorDict(batch_size=[2])  # an empty nested level
    return td


_SOURCES: dict[str, Callable[[], TensorDict]] = {
    # the reference walks a dense storage; lazy stacks have their own tests below
    **{name: make for name, make in CATALOGUE.items() if not name.startswith("lazy")},
    "deep": _deep,
    "locked": lambda: _deep().lock_(),
}
_LEAF_RULES: dict[str, Callable[[type], bool] | None] = {
    "default": None,
    "tensors only": lambda cls: issubclass(cls, torch.Tensor),
    "everything": lambda cls: True,
}
_OPTIONS = list(itertools.product([False, True], [False, True], _LEAF_RULES))


@pytest.mark.parametrize("source", _SOURCES)
@pytest.mark.parametrize(("include_nested", "leaves_only", "rule"), _OPTIONS)
def test_views_match_the_reference(
    source: str, include_nested: bool, leaves_only: bool, rule: str
) -> None:
    td = _SOURCES[source]()
    is_leaf = _LEAF_RULES[rule]
    expected = list(_reference(td, include_nested, leaves_only, is_leaf))
    keys = td.keys(include_nested, leaves_only, is_leaf)
    values = td.values(include_nested, leaves_only, is_leaf)
    items = td.items(include_nested, leaves_only, is_leaf)
    assert list(keys) == [k for k, _ in expected]
    assert [id(v) for v in values] == [id(v) for _, v in expected]
    assert [(k, id(v)) for k, v in items] == [(k, id(v)) for k, v in expected]
    assert len(keys) == len(values) == len(items) == len(expected)
    assert all(k in keys for k, _ in expected)


def test_views_are_live() -> None:
    td = _deep()
    keys, values, items = td.keys(True, True), td.values(), td.items()
    td["z"] = torch.ones(2)
    td["n", "y"] = torch.ones(2)
    assert "z" in keys and ("n", "y") in keys and ("n", "y") in list(keys)
    assert any(v is td["z"] for v in values)
    assert ("z", td["z"]) in [(k, v) for k, v in items]
    assert len(values) == len(items) == len(td.keys())


def test_keys_contains_follows_the_options() -> None:
    td = _deep()
    assert ("n", "b") in td.keys(True) and ("n", "b") not in td.keys()
    assert ("a",) in td.keys() and "n" not in td.keys(True, True)
    assert "n" in td.keys(True, True, is_leaf=lambda cls: True)
    assert [1] not in td.keys() and ("n", "zz") not in td.keys(True)
    assert "missing" not in td and ("n", "m", "c") in td and ("a", "b") not in td


def test_flat_values_and_items_are_the_storage_views() -> None:
    td = _deep()
    assert list(td.values()) == list(td._tensordict.values())
    assert list(td.items()) == list(td._tensordict.items())
    assert len(td.values()) == len(td._tensordict)


def test_lazy_stack_keys_are_the_common_ones_in_the_first_members_order() -> None:
    a = TensorDict({"x": torch.zeros(2), "n": {"y": torch.zeros(2)}, "only_a": torch.zeros(2)}, [2])
    b = TensorDict({"n": {"y": torch.ones(2), "z": torch.ones(2)}, "x": torch.ones(2)}, [2])
    stack = LazyStackedTensorDict(a, b)
    assert stack.keys(True, True) == ["x", ("n", "y")]
    assert stack.keys() == ["x", "n"]
    same = LazyStackedTensorDict(a, a.clone())
    assert same.keys(True) == list(a.keys(True))
    for key, value in stack.items(True, True):
        torch.testing.assert_close(value, torch.stack([a[key], b[key]]))
    assert LazyStackedTensorDict(stack_dim=0).keys() == []
