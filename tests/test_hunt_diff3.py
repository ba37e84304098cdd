"""Divergences from upstream 0.15.3 found by a differential run over tensorclasses, saving
and loading, and lazy stacks of TensorDicts that differ; each pinned down."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from tensordict import TensorDict, lazy_stack, tensorclass


@tensorclass
class _Tagged:
    w: torch.Tensor
    meta: Any = None


def test_tensorclass_tolist_leaves_unset_fields_out_as_upstream() -> None:
    unset = _Tagged(w=torch.zeros(2), batch_size=[2])
    assert unset.tolist() == [{"w": torch.tensor(0.0)}] * 2
    assert unset[0].tolist() == {"w": torch.tensor(0.0)}
    assert unset.tolist(convert_tensors=True) == [{"w": 0.0}, {"w": 0.0}]
    # to_dict keeps listing them as None, as upstream's does
    assert list(unset.to_dict()) == ["w", "meta"] and unset.to_dict()["meta"] is None
    tagged = _Tagged(w=torch.zeros(2), meta="m", batch_size=[2])
    assert [row["meta"] for row in tagged.tolist()] == ["m", "m"]


@tensorclass(frozen=True)
class _Frozen:
    x: torch.Tensor


@pytest.mark.parametrize(("name", "value"), [("batch_size", [2]), ("names", ["a", "b"])])
def test_frozen_tensorclass_refuses_batch_size_and_names_assignments(
    name: str, value: list[Any]
) -> None:
    frozen = _Frozen(x=torch.zeros(2, 3), batch_size=[2, 3])
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"_Frozen.{name}: cannot assign"):
        setattr(frozen, name, value)
    assert frozen.batch_size == (2, 3) and frozen.names == [None, None]
    # operations still make new (frozen) instances of other shapes, and name dims
    assert frozen.reshape(-1).batch_size == (6,) and frozen[0].batch_size == (3,)
    assert frozen.rename("a", "b").names == ["a", "b"] and frozen.names == [None, None]
    assert frozen.refine_names("a", None).names == ["a", None]
    assert frozen.rename_(None, "c").names == [None, "c"]


def test_select_non_strict_keeps_the_levels_a_missing_key_passes_through() -> None:
    td = TensorDict(
        a=torch.ones(3), n={"x": torch.ones(3), "m": {"z": torch.ones(3)}}, batch_size=[3]
    )
    kept = td.select(("n", "m", "y"), ("n", "zz", "y"), ("a", "y"), "zz", strict=False)
    assert sorted(kept.keys(True), key=str) == [("n", "m"), "n"]
    assert kept["n", "m"].batch_size == (3,) and kept["n", "m"].is_empty()
    td.select(("n", "m", "y"), strict=False, inplace=True)
    assert sorted(td.keys(True), key=str) == [("n", "m"), "n"]
    # a lazy stack: each member keeps the levels it has
    stack = lazy_stack([TensorDict(n={"x": torch.ones(())}), TensorDict(n={"y": torch.ones(())})])
    members = stack.select(("n", "y"), strict=False).tensordicts
    assert [sorted(m.keys(True), key=str) for m in members] == [["n"], [("n", "y"), "n"]]


@tensorclass
class _Outer:
    inner: _Tagged
    note: Any = None


def test_tensorclass_tolist_lists_unset_fields_of_nested_levels_as_upstream() -> None:
    outer = _Outer(inner=_Tagged(w=torch.zeros(2), batch_size=[2]), batch_size=[2])
    # the element's own unset field is left out, a nested level's is listed as None
    assert [list(row) for row in outer.tolist()] == [["inner"], ["inner"]]
    assert [row["inner"]["meta"] for row in outer.tolist()] == [None, None]
    # tolist_first turns the nested level into a list first: left out there too
    assert [list(row["inner"]) for row in outer.tolist(tolist_first=True)] == [["w"], ["w"]]


def test_unknown_constructor_keyword_is_also_upstreams_attribute_error() -> None:
    with pytest.raises(AttributeError, match="unexpected field 'q'"):
        _Tagged(w=torch.zeros(2), q=1, batch_size=[2])
    with pytest.raises(TypeError, match="unexpected field 'auto_batch_size'"):
        _Tagged(w=torch.zeros(2), auto_batch_size=True)


def test_a_stacked_non_tensor_member_taken_whole_is_its_one_value() -> None:
    first = TensorDict(v=torch.zeros(2, 3), batch_size=[2, 3])
    first.set_non_tensor("tag", "t")
    second = TensorDict(v=torch.zeros(2, 3), batch_size=[2, 3])
    second.set_non_tensor("tag", "u")
    stack = torch.stack([first, second])
    # upstream's stack keeps its members: one of them, whole, is a NonTensorData
    assert stack[1]["tag"] == "u" and stack.unbind(0)[1]["tag"] == "u"
    assert type(stack[1].get("tag")).__name__ == "NonTensorData"
    assert stack[1].get("tag").batch_size == (2, 3)
    assert stack[1, 0]["tag"] == "u" and stack[0, :, 1]["tag"] == "t"
    # a slice keeps the stack dim, and across members the values stay one per element
    assert stack[1:]["tag"] == [[["u"] * 3] * 2]
    assert stack[:, 0]["tag"] == [["t"] * 3, ["u"] * 3]


def test_to_tensordict_retain_none_keeps_unset_fields_as_upstream() -> None:
    unset = _Tagged(w=torch.zeros(2), batch_size=[2])
    assert list(unset.to_tensordict().keys()) == ["w"]
    assert list(unset.to_tensordict(retain_none=False).keys()) == ["w"]
    kept = unset.to_tensordict(retain_none=True)
    assert sorted(kept.keys()) == ["meta", "w"] and kept["meta"] is None
    assert type(kept.get("meta")).__name__ == "NonTensorData"
    assert kept.get("meta").batch_size == (2,)
    outer = TensorDict(inner=unset, batch_size=[2])  # nested levels keep them too
    assert sorted(map(str, outer.to_tensordict(retain_none=True).keys(True))) == [
        "('inner', 'meta')",
        "('inner', 'w')",
        "inner",
    ]


def test_lazy_stack_del_removes_a_key_some_members_hold() -> None:
    stack = lazy_stack(
        [
            TensorDict(a=torch.zeros(3), b=torch.ones(3), n={"q": torch.ones(3)}, batch_size=[3]),
            TensorDict(a=torch.ones(3), batch_size=[3]),
        ]
    )
    stack.del_(("n", "q"))
    del stack["b"]
    assert [sorted(m.keys(True)) for m in stack.tensordicts] == [["a", "n"], ["a"]]
    with pytest.raises(KeyError, match="'zz' was not found in any of the 2 stacked members"):
        stack.del_("zz")
