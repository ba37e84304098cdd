"""Reading and writing entries: get/set/set_/del/pop/setdefault/update, keys views, locking."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import TensorDict


@pytest.fixture
def td() -> TensorDict:
    return TensorDict(
        {"a": torch.zeros(3, 2), "nested": {"b": torch.ones(3), "deep": {"c": torch.ones(3, 1)}}},
        [3],
    )


def test_get_and_getitem(td: TensorDict) -> None:
    assert td.get("a") is td["a"]
    assert td["nested", "b"] is td.get(("nested", "b"))
    assert td["nested", ("deep", ("c",))] is td["nested"]["deep"]["c"]
    assert td.get("missing", None) is None
    assert td.get(("nested", "missing"), 7) == 7


def test_missing_key_errors_suggest(td: TensorDict) -> None:
    with pytest.raises(
        KeyError,
        match=r"TensorDict\[\]: key 'aa' was not found in TensorDict with keys \['a', 'nested'\]; did you mean 'a'",
    ):
        td["aa"]
    with pytest.raises(
        KeyError,
        match=r"TensorDict.get: key \('nested', 'bb'\) was not found in TensorDict with keys \['b', 'deep'\]; did you mean 'b'",
    ):
        td.get(("nested", "bb"))
    with pytest.raises(KeyError, match=r"'a' holds a Tensor, not a nested TensorDict"):
        td.get(("a", "x"))
    with pytest.raises(KeyError, match=r"with keys \['a', 'nested'\]'?\"?$"):
        td["zzzzzz"]


@pytest.mark.parametrize(
    "op",
    [
        lambda td: td.get(("a", "x")),
        lambda td: td["a", "x"],
        lambda td: td.del_(("a", "x")),
        lambda td: td.pop(("a", "x")),
        lambda td: td.set_(("a", "x"), torch.zeros(3)),
    ],
    ids=["get", "getitem", "del_", "pop", "set_"],
)
def test_a_key_through_a_leaf_is_a_key_error_and_a_value_error(td: TensorDict, op: Any) -> None:
    with pytest.raises(ValueError, match="'a' holds a Tensor, not a nested TensorDict") as info:
        op(td)
    assert isinstance(info.value, KeyError)  # as a missing key; ValueError is upstream's type
    assert td.get(("a", "x"), "default") == "default"


def test_nested_set_creates_levels(td: TensorDict) -> None:
    td["x", "y", "z"] = torch.zeros(3, 4)
    assert td["x"].batch_size == torch.Size([3])
    assert ("x", "y", "z") in td.keys(include_nested=True)
    td.set(("nested", "deep", "e"), torch.ones(3))
    assert torch.equal(td["nested", "deep", "e"], torch.ones(3))
    with pytest.raises(ValueError, match=r"TensorDict\[\]=: shape \(2,\) of key 'w'"):
        td["x", "w"] = torch.zeros(2)


def test_seed_nested_keys() -> None:
    data = TensorDict({"key 1": torch.ones(3, 4, 5)}, batch_size=[3, 4])
    data["nested", "key"] = torch.zeros(3, 4)
    data["nested", ("supernested", ("key",))] = torch.zeros(3, 4)
    assert (data["nested", "supernested", "key"] == 0).all()
    assert (("nested",), "supernested", (("key",),)) in data.keys(include_nested=True)
    assert ("nested", "supernested", "key") in data
    assert ("nested", "nope") not in data
    assert ("nested", "key") not in data.keys()


def test_set_inplace_and_set_(td: TensorDict) -> None:
    leaf = td["a"]
    td.set("a", torch.ones(3, 2), inplace=True)
    assert td["a"] is leaf and torch.equal(leaf, torch.ones(3, 2))
    td.set_(("nested", "b"), torch.full((3,), 5.0))
    assert torch.equal(td["nested", "b"], torch.full((3,), 5.0))
    with pytest.raises(
        ValueError,
        match=r"TensorDict.set_: shape \(3, 3\) does not broadcast to the shape \(3, 2\) of key 'a'",
    ):
        td.set_("a", torch.ones(3, 3))
    with pytest.raises(RuntimeError, match=r"Failed to update 'a' in place"):  # upstream's type
        td.set_("a", torch.ones(3))
    assert td["a"] is leaf and torch.equal(leaf, torch.ones(3, 2))  # nothing written
    # as Tensor.copy_ (and upstream): another dtype is cast, a broadcastable shape spreads
    td.set_("a", torch.full((3, 2), 2, dtype=torch.long))
    assert leaf.dtype == torch.float32 and torch.equal(leaf, torch.full((3, 2), 2.0))
    td.set_("a", torch.tensor([[3.0], [4.0], [5.0]], dtype=torch.float64))
    assert torch.equal(leaf, torch.tensor([[3.0, 3.0], [4.0, 4.0], [5.0, 5.0]]))
    with pytest.raises(
        KeyError, match="TensorDict.set_: key 'nope' was not found in TensorDict with keys"
    ):
        td.set_("nope", torch.ones(3))


def test_del_pop_setdefault(td: TensorDict) -> None:
    del td["nested", "b"]
    assert ("nested", "b") not in td
    with pytest.raises(KeyError, match="TensorDict.del_: key"):
        del td["nested", "b"]
    leaf = td.pop("a")
    assert leaf.shape == (3, 2) and "a" not in td
    assert td.pop("a", "gone") == "gone"
    with pytest.raises(KeyError, match="TensorDict.pop"):
        td.pop("a")
    new = td.setdefault("s", torch.ones(3))
    assert td.setdefault("s", torch.zeros(3)) is new


def test_update(td: TensorDict) -> None:
    leaf = td["a"]
    td.update({"a": torch.full((3, 2), 2.0), "nested": {"new": torch.zeros(3)}})
    assert td["a"] is not leaf
    assert ("nested", "deep", "c") in td and ("nested", "new") in td
    b = td["nested", "b"]
    td.update(TensorDict({"nested": {"b": torch.full((3,), 9.0)}}, [3]), inplace=True)
    assert td["nested", "b"] is b and (b == 9).all()
    td.update_({"a": torch.zeros(3, 2)})
    assert (td["a"] == 0).all()


def test_keys_values_items(td: TensorDict) -> None:
    assert list(td.keys()) == ["a", "nested"]
    assert list(td.keys(include_nested=True)) == [
        "a",
        "nested",
        ("nested", "b"),
        ("nested", "deep"),
        ("nested", "deep", "c"),
    ]
    assert list(td.keys(True, True)) == ["a", ("nested", "b"), ("nested", "deep", "c")]
    assert len(td.keys(True, True)) == 3
    assert [v.shape for v in td.values(True, True)] == [(3, 2), (3,), (3, 1)]
    assert dict(td.items(True, True))["nested", "b"] is td["nested", "b"]
    only_td = list(td.keys(True, True, is_leaf=lambda cls: issubclass(cls, TensorDict)))
    assert only_td == ["nested", ("nested", "deep")]
    assert "a" in td.keys() and 3 not in td.keys()  # type: ignore[operator]


def test_len_iter_bool() -> None:
    td = TensorDict({"a": torch.arange(3)}, [3])
    assert len(td) == 3
    assert [int(x["a"]) for x in td] == [0, 1, 2]
    assert len(TensorDict({}, [])) == 0
    with pytest.raises(TypeError, match="TensorDict: iteration over a collection with batch_size"):
        iter(TensorDict({}, []))
    with pytest.raises(RuntimeError, match="truth value of a TensorDict is ambiguous"):
        bool(td)


def test_lock(td: TensorDict) -> None:
    td.lock_()
    assert td.is_locked and td["nested"].is_locked
    leaf = td["a"]
    td.set("a", torch.ones(3, 2), inplace=True)  # in place while locked
    assert td["a"] is leaf and (leaf == 1).all()
    td.set_(("nested", "b"), torch.zeros(3))
    td[0] = TensorDict({"a": torch.full((2,), 2.0)}, [])  # an indexed write is in place too
    assert td["a"] is leaf and leaf[0].tolist() == [2.0, 2.0]
    with pytest.raises(
        RuntimeError,
        match=r"TensorDict\[\]=: Cannot modify locked TensorDict\. For in-place modification"
        r".*\(cannot add, remove or replace key 'new'\)",
    ):
        td["new"] = torch.zeros(3)
    with pytest.raises(RuntimeError, match=r"Cannot modify locked.*key \('nested', 'new'\)"):
        td["nested", "new"] = torch.zeros(3)
    with pytest.raises(
        RuntimeError, match="TensorDict.del_: Cannot modify locked TensorDict\\. .* key 'a'"
    ):
        del td["a"]
    with pytest.raises(RuntimeError, match="locked"):
        td.exclude("a", inplace=True)
    td.unlock_()
    td["new"] = torch.zeros(3)
    assert not td["nested"].is_locked


def test_get_item_shape(td: TensorDict) -> None:
    assert td.get_item_shape("a") == torch.Size([3, 2])
    assert td.get_item_shape("nested") == torch.Size([3])
    td["s"] = "x"
    assert td.get_item_shape("s") == torch.Size([3])


def test_basic_indexing_reaches_all_leaves(td: TensorDict) -> None:
    td["s"] = "text"
    sub = td[1]
    assert sub.batch_size == torch.Size([])
    assert torch.equal(sub["nested", "deep", "c"], td["nested", "deep", "c"][1])
    assert sub["s"] == "text"
    assert td[-1]["a"].shape == (2,)
    assert td[:2].batch_size == torch.Size([2])
    with pytest.raises(
        IndexError, match=r"index 3 is out of bounds for dim 0 of batch_size \(3,\)"
    ):
        td[3]
    with pytest.raises(IndexError, match=r"index 0 is not valid for batch_size \(\)"):
        TensorDict({}, [])[0]


def test_seed_ellipsis_indexing() -> None:
    data = TensorDict(
        {"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)},
        batch_size=[3, 4],
    )
    sub = data[..., :2]
    assert sub.shape == torch.Size([3, 2])
    assert sub["key 1"].shape == torch.Size([3, 2, 5])


def test_getitems_for_dataloader() -> None:
    td = TensorDict({"x": torch.arange(10)}, [10])
    batch = td.__getitems__([3, 1, 4])
    assert batch.batch_size == torch.Size([3])
    assert torch.equal(batch["x"], torch.tensor([3, 1, 4]))


def test_lock_contexts_restore_the_state_before() -> None:
    """As upstream: ``with td.lock_()`` on a locked TensorDict leaves it locked."""
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    with td.lock_():
        assert td.is_locked
        with td.unlock_():
            assert not td.is_locked and not td["n"].is_locked
        assert td.is_locked and td["n"].is_locked
        with td.lock_():
            assert td.is_locked
        assert td.is_locked
    assert not td.is_locked
    with td.unlock_():
        assert not td.is_locked
    assert not td.is_locked


def test_a_clone_is_unlocked_but_a_shallow_one_of_mapped_data(tmp_path: Any) -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2]).lock_()
    for copy in (td.clone(), td.clone(False)):
        assert not copy.is_locked and not copy["n"].is_locked
        copy["new"] = torch.ones(2)  # one clones to modify
    mapped = td.memmap(tmp_path / "m")
    assert mapped.clone(False).is_locked  # its keys are still the files
    assert not mapped.clone().is_locked


def test_auto_batch_size_respects_the_lock() -> None:
    td = TensorDict({"a": torch.zeros(2, 3)}, []).lock_()
    with pytest.raises(
        RuntimeError, match=r"auto_batch_size_: cannot change the batch size of a locked"
    ):
        td.auto_batch_size_()
    assert td.unlock_().auto_batch_size_().batch_size == (2, 3)


def test_new_collections_from_a_locked_memory_mapped_one(tmp_path: Any) -> None:
    td = TensorDict({"a": torch.zeros(4, 3), "b": torch.ones(4, 3)}, [4, 3])
    td.memmap_(tmp_path / "m")
    first, rest = td.split_keys(["a"])
    assert list(first.keys()) == ["a"] and list(rest.keys()) == ["b"]
    assert td.is_locked and sorted(td.keys()) == ["a", "b"]
    resized = td.to(batch_size=[4])
    assert resized.batch_size == (4,) and resized.is_locked and td.batch_size == (4, 3)


def test_keys_views_compare_and_combine_as_sets_as_upstream() -> None:
    a = TensorDict({"x": torch.zeros(1), "n": {"y": torch.zeros(1)}}, [1])
    b = TensorDict({"n": {"y": torch.ones(1)}, "x": torch.ones(1)}, [1])
    assert a.keys() == b.keys() and a.keys() == {"x", "n"} and a.keys() != {"x"}
    assert a.keys(True, True) == {"x", ("n", "y")} == b.keys(True, True)
    assert a.keys() & {"x", "z"} == {"x"} and a.keys() - {"x"} == {"n"}
    assert a.keys() | {"z"} == {"x", "n", "z"} and a.keys() <= {"x", "n", "z"}
    assert a.keys() != ["x", "n"]  # a set is not a list, as for dict views
    assert a.keys() != TensorDict({"x": torch.zeros(1)}, [1]).keys()
