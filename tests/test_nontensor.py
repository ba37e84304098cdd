"""Non-tensor entries as objects: construction, shape methods, MetaData, stacking."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import MetaData, NonTensorData, NonTensorStack, TensorDict, is_non_tensor
from tensordict._nontensor import _rebuild


def _grid(shape: tuple[int, ...]) -> list[Any]:
    """Strings naming each position, nested like a tensor of that shape."""
    return _nest([f"v{i}" for i in range(torch.Size(shape).numel())], shape)


def _nest(flat: list[Any], shape: tuple[int, ...]) -> Any:
    if not shape:
        return flat[0]
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


SHAPE_OPS: list[tuple[str, Callable[[Any], Any]]] = [
    ("reshape", lambda x: x.reshape(3, 2)),
    ("view", lambda x: x.view(6)),
    ("flatten", lambda x: x.flatten()),
    ("unflatten", lambda x: x.unflatten(1, (3, 1))),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("squeeze", lambda x: x.unsqueeze(0).squeeze(0)),
    ("permute", lambda x: x.permute(1, 0)),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("flip", lambda x: x.flip(1)),
    ("expand", lambda x: x.expand(4, 2, 3)),
    ("repeat", lambda x: x.repeat(2, 1)),
    ("repeat_interleave", lambda x: x.repeat_interleave(2, dim=1)),
    ("index", lambda x: x[1, ::2]),
    ("mask", lambda x: x[torch.tensor([True, False])]),
]


@pytest.mark.parametrize(("name", "op"), SHAPE_OPS, ids=[o[0] for o in SHAPE_OPS])
def test_shape_ops_follow_a_tensor_of_positions(name: str, op: Callable[[Any], Any]) -> None:
    values = _grid((2, 3))
    stack = NonTensorStack.from_list(values)
    positions = torch.arange(6).reshape(2, 3)
    out = op(stack)
    expected = op(positions)
    assert out.batch_size == expected.shape, name
    flat = [f"v{i}" for i in range(6)]
    assert out.tolist() == _nest([flat[i] for i in expected.reshape(-1).tolist()], expected.shape)


def test_construction_spellings() -> None:
    a = NonTensorStack("a", "b")
    assert a.batch_size == (2,) and a.tolist() == ["a", "b"]
    b = NonTensorStack(NonTensorData("x", [3]), NonTensorData("y", [3]), stack_dim=1)
    assert b.batch_size == (3, 2) and b[0].tolist() == ["x", "y"]
    assert NonTensorStack().batch_size == (0,)
    assert NonTensorStack(NonTensorStack("a", "b"), NonTensorStack("c", "d")).shape == (2, 2)
    assert NonTensorStack.from_list([["a", NonTensorData("b")]])[0, 1].data == "b"
    with pytest.raises(ValueError, match=r"NonTensorStack: batch_size \(3,\) does not match"):
        NonTensorStack("a", "b", batch_size=[3])
    with pytest.raises(ValueError, match="NonTensorStack: the entries' batch sizes do not stack"):
        NonTensorStack(NonTensorData("x", [3]), NonTensorData("y", [2]))
    assert NonTensorData(NonTensorData(5)).data == 5


def test_data_tolist_and_protocol() -> None:
    d = NonTensorData("s", batch_size=[2, 2])
    assert d.tolist() == [["s", "s"], ["s", "s"]] and NonTensorData(4).tolist() == 4
    assert d.dtype is None and d.ndim == 2 and d.numel() == 4 and d.dim() == 2 and len(d) == 2
    assert NonTensorData(lambda x: x + 1)(1) == 2
    assert is_non_tensor(d) and is_non_tensor(NonTensorStack("a")) and not is_non_tensor("s")
    assert d[0].batch_size == (2,) and type(d[0]) is NonTensorData
    assert type(NonTensorStack("a", "b")[1]) is NonTensorData
    assert [x.data for x in NonTensorStack("a", "b").unbind(0)] == ["a", "b"]
    with pytest.raises(TypeError, match="NonTensorData: len"):
        len(NonTensorData(1))
    with pytest.raises(RuntimeError, match=r"NonTensorStack.reshape: shape '\[4\]' is invalid"):
        NonTensorStack("a", "b", "c").reshape(4)


def test_expanding_a_value_spreads_it_unless_metadata() -> None:
    d = NonTensorData(0, batch_size=[3])
    e = d.expand(2, 3)
    assert isinstance(e, NonTensorStack) and e.tolist() == [[0, 0, 0], [0, 0, 0]]
    assert isinstance(d.reshape(3, 1), NonTensorData)  # a re-view keeps one value
    m = MetaData(0, batch_size=[3]).expand(2, 3)
    assert type(m) is MetaData and m.batch_size == (2, 3) and m.data == 0


@pytest.mark.parametrize("batch", [(), (2,)])
def test_a_tensordict_spreads_its_values_as_the_value_itself_does(batch: tuple[int, ...]) -> None:
    td = TensorDict(foo=NonTensorData("v"), batch_size=batch)
    up = td.unsqueeze(0)
    assert type(up.get("foo")) is NonTensorStack and up.get("foo").batch_size == (1, *batch)
    assert up["foo"] == NonTensorData("v", batch_size=batch).unsqueeze(0).tolist()
    big = td.expand(3, *batch)
    assert type(big.get("foo")) is NonTensorStack and big.get("foo").batch_size == (3, *batch)
    for back in (up.squeeze(0), up.squeeze(), big[:1].squeeze(0)):  # one value again
        assert type(back.get("foo")) is NonTensorData and back.get("foo").batch_size == batch
        assert back.get("foo").data == "v"
    other = TensorDict(foo=NonTensorStack("a", "b").unsqueeze(0), batch_size=[1, 2])
    assert other.squeeze(0).get("foo").tolist() == ["a", "b"]  # differing values stay a stack


def test_metadata_typed_and_through_a_tensordict() -> None:
    d = MetaData[int](0, batch_size=[3])
    assert isinstance(d, MetaData[int]) and isinstance(d, MetaData) and MetaData[int] is type(d)
    with pytest.raises(TypeError, match=r"MetaData\[int\]: Expected data of type int, got str"):
        MetaData[int]("a string")
    td = TensorDict(foo=MetaData("cfg"))
    assert type(td.unsqueeze(0).get("foo")) is MetaData and td.unsqueeze(0)["foo"] == "cfg"
    stacked = torch.stack([td, td.clone()])
    assert type(stacked.get("foo")) is MetaData and stacked.get("foo").batch_size == (2,)
    back = pickle.loads(pickle.dumps(d))
    assert type(back) is MetaData[int] and back.data == 0 and back.batch_size == (3,)


def test_torch_stack_cat_and_where() -> None:
    s = torch.stack([NonTensorData(torch.zeros(3)), NonTensorData(torch.ones(4))])
    assert isinstance(s, NonTensorStack) and [t.shape for t in s.tolist()] == [(3,), (4,)]
    assert torch.cat([NonTensorStack("a", "b"), NonTensorStack("c")]).tolist() == ["a", "b", "c"]
    assert type(torch.stack([MetaData(1), MetaData(1)])) is MetaData
    a, b = NonTensorStack("a", "a"), NonTensorStack("b", "b")
    assert a.where(torch.tensor([True, False]), other=b).tolist() == ["a", "b"]


def test_stack_longer_than_the_batch_is_kept() -> None:
    td = TensorDict(a=NonTensorStack("a", "b").unsqueeze(-1), batch_size=[2])
    assert td.get("a").batch_size == (2, 1) and td[1]["a"] == ["b"]
    assert TensorDict(a=NonTensorStack(1, 2))["a"] == [1, 2]


def test_pickles_of_the_first_version_still_load() -> None:
    old = _rebuild("x", (2,), None)  # what version 1 pickled: (data, batch_size, device)
    assert type(old) is NonTensorData and old.data == "x" and old.batch_size == (2,)
    s = pickle.loads(pickle.dumps(NonTensorStack("a", "b")))
    assert s.tolist() == ["a", "b"]


def test_to_dict_of_a_non_tensor_entry_is_its_value() -> None:
    # as upstream: the value (a stack's values nested like the batch), not {"data": ...}
    assert NonTensorData("x", batch_size=[2]).to_dict() == "x"
    assert MetaData({"k": 1}).to_dict() == {"k": 1}
    assert NonTensorStack.from_list([["a", "b"], ["c", "d"]]).to_dict() == [["a", "b"], ["c", "d"]]
    assert NonTensorData(torch.ones(2), batch_size=[2]).to_dict(convert_tensors=True) == [1.0, 1.0]


def test_spreading_one_value_keeps_one_position_in_memory() -> None:
    # unsqueeze/expand of a NonTensorData (and of a TensorDict holding one) made a
    # position per element: 48 MB and ~60 ms for a batch of 300 x 400 x 50
    entry = NonTensorData("hello", batch_size=[300, 400, 50])
    spread = entry.unsqueeze(0)
    assert isinstance(spread, NonTensorStack) and spread.batch_size == (1, 300, 400, 50)
    assert spread.positions.untyped_storage().nbytes() == 8  # one int64 seen everywhere
    back = spread.squeeze(0)
    assert isinstance(back, NonTensorData) and back.data == "hello"
    written = NonTensorData("a", batch_size=[2, 3]).unsqueeze(0)
    written[0, 1, 2] = "b"  # a write copies the positions first: the others keep "a"
    assert written.tolist() == [[["a", "a", "a"], ["a", "a", "b"]]]


def _member_stack(dim: int = 0) -> TensorDict:
    return torch.stack([TensorDict(s="a", batch_size=[2]), TensorDict(s="b", batch_size=[2])], dim)


def test_a_view_inside_one_stacked_member_reads_as_that_member() -> None:
    # upstream's lazy stack gives its member NonTensorData; here positions say so
    td = _member_stack()
    assert td[1]["s"] == "b" and isinstance(td[1].get("s"), NonTensorData)
    assert td[1, :1]["s"] == "b" and td[1, :1].get("s").batch_size == (1,)
    assert [part["s"] for part in td.unbind(0)] == ["a", "b"]
    assert [row["s"] for row in td] == ["a", "b"]
    # views that cross members stay stacks, one value per element
    assert td[:, 0]["s"] == ["a", "b"] and td[:1].get("s").tolist() == [["a", "a"]]
    assert [part["s"] for part in td.unbind(1)] == [["a", "b"], ["a", "b"]]
    assert td[torch.tensor([1])].get("s").tolist() == [["b", "b"]]  # a copy, not a view
    assert td[:1][0]["s"] == "a"  # a slice of the stack keeps its members
    along_1 = _member_stack(1)
    assert along_1[:, 0]["s"] == "a" and along_1[0]["s"] == ["a", "b"]
    # the constructor stacks NonTensorData members the same way
    built = NonTensorStack(NonTensorData("x", [2]), NonTensorData("y", [2]), stack_dim=1)
    assert built.tolist() == [["x", "y"], ["x", "y"]] and built[:, 1].data == "y"
    # kept through set, pickle and a TensorDict's pickle
    holder = TensorDict(batch_size=[2, 2])
    holder.set("s", td.get("s"))
    assert holder[0]["s"] == "a"
    assert pickle.loads(pickle.dumps(td))[1]["s"] == "b"
    assert pickle.loads(pickle.dumps(td.get("s")))[0].data == "a"


def test_stacks_not_made_of_members_stay_stacks_when_indexed() -> None:
    same = NonTensorStack("a", "a")
    assert isinstance(same[0:2], NonTensorStack) and same[0].data == "a"
    spread = NonTensorStack("a", "b").expand(3, 2)  # a stack of stacks: column 0 is a stack
    assert isinstance(spread[:, 0], NonTensorStack) and spread[:, 0].tolist() == ["a"] * 3
    expanded = _member_stack().expand(4, 2, 2)  # new dims across members: a column is
    assert isinstance(expanded[:, 0].get("s"), NonTensorStack)  # a stack of members' values
    assert [type(r.get("s")) for r in expanded.unbind(1)] == [NonTensorStack] * 2
    written = _member_stack()
    written[0, 1] = TensorDict(s="c", batch_size=[])  # a write breaks member 0 apart
    assert written[0]["s"] == ["a", "c"]
