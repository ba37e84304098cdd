"""A locked collection refuses writes that replace an existing key, and takes in-place ones."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from tdnn import TensorDictModule, TensorDictParams
from tensordict import LazyStackedTensorDict, TensorDict, tensorclass

LOCKED = (
    r"Cannot modify locked TensorDict\. For in-place modification of an existing key use "
    r"set_\(\) / update_\(\), or call unlock_\(\) first \(cannot add, remove or replace key"
)


def _locked() -> TensorDict:
    return TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3]).lock_()


@pytest.mark.parametrize(
    ("call", "key", "write"),
    [
        ("TensorDict.set", "'a'", lambda td: td.set("a", torch.ones(3))),
        ("TensorDict.set", r"\('n', 'b'\)", lambda td: td.set(("n", "b"), torch.ones(3))),
        (r"TensorDict\[\]=", "'a'", lambda td: td.__setitem__("a", torch.ones(3))),
        (r"TensorDict\[\]=", r"\('n', 'b'\)", lambda td: td.__setitem__(("n", "b"), torch.ones(3))),
        ("TensorDict.update", "'a'", lambda td: td.update({"a": torch.ones(3)})),
        ("TensorDict.update", "'b'", lambda td: td.update({"n": {"b": torch.ones(3)}})),
        ("TensorDict.set", "'c'", lambda td: td.set("c", torch.ones(3), inplace=True)),
    ],
)
def test_replacing_a_key_of_a_locked_tensordict_raises(call: str, key: str, write: object) -> None:
    td = _locked()
    before = td["a"], td["n", "b"]
    with pytest.raises(RuntimeError, match=rf"^{call}: {LOCKED} {key}\)$"):
        write(td)  # type: ignore[operator]
    assert td["a"] is before[0] and td["n", "b"] is before[1]
    assert td["a"].eq(0).all() and td["n", "b"].eq(0).all()


def test_in_place_writes_into_a_locked_tensordict_keep_the_leaves() -> None:
    td = _locked()
    a, b = td["a"], td["n", "b"]
    td.set("a", torch.ones(3), inplace=True)
    td.set_(("n", "b"), torch.full((3,), 2.0))
    assert a.tolist() == [1.0] * 3 and b.tolist() == [2.0] * 3
    td.update({"a": torch.full((3,), 3.0), "n": {"b": torch.full((3,), 4.0)}}, inplace=True)
    assert a.tolist() == [3.0] * 3 and b.tolist() == [4.0] * 3
    td.update_({"a": torch.full((3,), 5.0)})
    td[1] = TensorDict({"a": torch.tensor(6.0), "n": {"b": torch.tensor(7.0)}}, [])
    assert a.tolist() == [5.0, 6.0, 5.0] and b.tolist() == [4.0, 7.0, 4.0]
    td.copy_(TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3)}}, [3]))
    assert a.tolist() == [1.0] * 3 and b.tolist() == [1.0] * 3
    assert td["a"] is a and td["n", "b"] is b
    with td.unlock_():
        td["a"] = torch.zeros(3)
    assert td["a"] is not a and td.is_locked


def test_a_locked_lazy_stack_refuses_set_and_takes_set_() -> None:
    members = [TensorDict({"a": torch.zeros(1)}, [1]) for _ in range(2)]
    stack = LazyStackedTensorDict.lazy_stack(members).lock_()
    with pytest.raises(RuntimeError, match=rf"^LazyStackedTensorDict.set: {LOCKED} 'a'"):
        stack.set("a", torch.ones(2, 1))
    with pytest.raises(RuntimeError, match=rf"^LazyStackedTensorDict.set: {LOCKED} 'a'"):
        stack["a"] = torch.ones(2, 1)
    stack.set_("a", torch.ones(2, 1))
    assert [m["a"].item() for m in members] == [1.0, 1.0]


def test_a_locked_tensorclass_refuses_field_assignment() -> None:
    @tensorclass
    class Point:
        x: torch.Tensor

    p = Point(x=torch.zeros(3), batch_size=[3]).lock_()
    with pytest.raises(RuntimeError, match=rf"^Point.x: {LOCKED} 'x'"):
        p.x = torch.ones(3)
    p.set_("x", torch.ones(3))
    p[0] = Point(x=torch.tensor(5.0), batch_size=[])
    assert p.x.tolist() == [5.0, 1.0, 1.0]


def test_a_module_refuses_to_replace_an_output_of_a_locked_tensordict() -> None:
    module = TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
    td = TensorDict({"x": torch.ones(4, 2), "y": torch.zeros(4, 2)}, [4]).lock_()
    with pytest.raises(RuntimeError, match=rf"{LOCKED} 'y'"):
        module(td)
    with td.unlock_():
        module(td)
    assert torch.equal(td["y"], module.module(td["x"]))


def test_to_module_swaps_a_locked_tensordict_and_restores_the_module() -> None:
    net = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    original = TensorDict.from_module(net)
    zeros = original.detach().clone().zero_().lock_()
    x = torch.ones(5, 2)
    with zeros.to_module(net):
        assert net(x).eq(0).all()
    assert net[0].weight is original["0", "weight"]
    params = TensorDictParams(zeros.clone().unlock_())
    with params.to_module(net):
        assert net(x).eq(0).all()
    assert torch.equal(net(x), nn.functional.linear(net[0](x), net[1].weight, net[1].bias))


def test_a_nested_tensordict_cannot_be_unlocked_while_its_locked_parent_lives() -> None:
    import gc

    td = TensorDict({"a": torch.zeros(3)}, [3])
    td.set(("some", "nested"), torch.zeros(3))
    td.lock_()
    some = td.get("some")
    assert some.is_locked
    with pytest.raises(
        RuntimeError,
        match=r"TensorDict.unlock_: Cannot unlock .* locked graph: this TensorDict is nested",
    ):
        some.unlock_()
    assert some.is_locked and td.is_locked
    with td.unlock_():  # unlocking the parent unlocks the child; relocked on exit
        assert not some.is_locked
    assert td.is_locked and some.is_locked
    del td
    gc.collect()
    some.unlock_()  # the parent is gone: nothing holds it locked
    assert not some.is_locked


def test_a_nested_tensordict_of_an_unlocked_parent_unlocks() -> None:
    td = TensorDict({"n": {"x": torch.zeros(2)}}, [2]).lock_()
    td.unlock_()
    nested = td["n"]
    nested.lock_()
    nested.unlock_()  # its parent is no longer locked
    assert not nested.is_locked


def test_rename_of_a_memory_mapped_tensordict_is_unlocked_at_every_level(tmp_path: Any) -> None:
    td = TensorDict({"a": torch.zeros(2, 3), "n": {"x": torch.ones(2, 3)}}, [2, 3])
    td.memmap_(tmp_path)
    out = td.rename("u", "v")
    assert not out.is_locked and not out["n"].is_locked
    out["n", "new"] = torch.zeros(2, 3)  # a new key in the copy's nested level
    assert out.names == ["u", "v"] and td.is_locked and "new" not in td["n"].keys()


@pytest.mark.parametrize(
    "write",
    [
        lambda td: td.del_("missing"),
        lambda td: td.__delitem__(("n", "missing")),
        lambda td: td.del_(("nowhere", "b")),
        lambda td: td.rename_key_("missing", "x"),
        lambda td: td.rename_key_("a", ("n", "b"), safe=True),  # the new key exists
        lambda td: LazyStackedTensorDict(_locked(), _locked()).lock_().del_("missing"),
    ],
)
def test_a_locked_tensordict_refuses_del_and_rename_before_looking_at_the_keys(
    write: Any,
) -> None:
    # as upstream: the lock is the first thing checked, so a missing key is not a KeyError
    with pytest.raises(RuntimeError, match=r"Cannot modify locked TensorDict"):
        write(_locked())  # (the lazy case builds its own locked stack)
