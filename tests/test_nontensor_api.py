"""The TensorDict API on NonTensorData and NonTensorStack (issue 13): batch operations keep
each value with its element (the oracle: the same op on a tensor of element positions),
maths leaves the value alone, in-place methods act on the entry itself."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import MetaData, NonTensorData, NonTensorStack, TensorDict


def _stack() -> NonTensorStack:
    return NonTensorStack.from_list([["a", "b", "c"], ["d", "e", "f"]])


def _values(entry: Any) -> Any:
    return entry.tolist()


# each op, as applied to the entry and to a tensor of the element positions
SHAPE_OPS: dict[str, tuple[Callable[[Any], Any], Callable[[torch.Tensor], Any]]] = {
    "unbind": (lambda e: e.unbind(1), lambda t: t.unbind(1)),
    "split": (lambda e: e.split([1, 2], 1), lambda t: t.split([1, 2], 1)),
    "chunk": (lambda e: e.chunk(2, 0), lambda t: t.chunk(2, 0)),
    "tensor_split": (lambda e: e.tensor_split(3, 1), lambda t: t.tensor_split(3, 1)),
    "narrow": (lambda e: e.narrow(1, 1, 2), lambda t: t.narrow(1, 1, 2)),
    "movedim": (lambda e: e.movedim(0, 1), lambda t: t.movedim(0, 1)),
    "swapaxes": (lambda e: e.swapaxes(0, 1), lambda t: t.swapaxes(0, 1)),
    "fliplr": (lambda e: e.fliplr(), lambda t: t.fliplr()),
    "flipud": (lambda e: e.flipud(), lambda t: t.flipud()),
    "rot90": (lambda e: e.rot90(), lambda t: t.rot90()),
    "roll": (lambda e: e.roll(1, 1), lambda t: t.roll(1, 1)),
    "tile": (lambda e: e.tile((2, 1)), lambda t: t.tile((2, 1))),
    # new dims in front, as upstream's TensorDict.atleast_3d (not torch.atleast_3d)
    "atleast_3d": (lambda e: e.atleast_3d(), lambda t: t.unsqueeze(0)),
    "expand_as": (lambda e: e.expand_as(torch.zeros(4, 2, 3)), lambda t: t.expand(4, 2, 3)),
    "gather": (
        lambda e: e.gather(1, torch.tensor([[2, 0], [1, 1]])),
        lambda t: t.gather(1, torch.tensor([[2, 0], [1, 1]])),
    ),
    "masked_select": (
        lambda e: e.masked_select(torch.tensor([[True, False, True], [False, True, True]])),
        lambda t: t.masked_select(torch.tensor([[True, False, True], [False, True, True]])),
    ),
}


def _nest(flat: list[str], shape: list[int]) -> Any:
    if not shape:
        return flat[0]
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_batch_ops_keep_each_value_with_its_element(name: str) -> None:
    on_entry, on_tensor = SHAPE_OPS[name]
    stack = _stack()
    values = [v for row in stack.tolist() for v in row]
    positions = on_tensor(torch.arange(6).reshape(2, 3))
    out = on_entry(stack)
    if isinstance(positions, (tuple, list)):
        assert isinstance(out, tuple) and len(out) == len(positions)
        for part, pos in zip(out, positions, strict=True):
            assert part.batch_size == pos.shape
            assert _values(part) == _nest(
                [values[i] for i in pos.reshape(-1).tolist()], list(pos.shape)
            )
    else:
        assert out.batch_size == positions.shape
        assert _values(out) == _nest(
            [values[i] for i in positions.reshape(-1).tolist()], list(positions.shape)
        )


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_batch_ops_on_one_shared_value(name: str) -> None:
    on_entry, on_tensor = SHAPE_OPS[name]
    entry = NonTensorData("v", batch_size=[2, 3])
    positions = on_tensor(torch.zeros(2, 3))
    out = on_entry(entry)
    parts = out if isinstance(out, tuple) else (out,)
    shapes = positions if isinstance(positions, (tuple, list)) else (positions,)
    for part, pos in zip(parts, shapes, strict=True):
        assert part.batch_size == pos.shape
        assert set(_flat(part.tolist())) == {"v"}


def _flat(x: Any) -> list[Any]:
    return [y for v in x for y in _flat(v)] if isinstance(x, list) else [x]


MATHS = ["exp", "abs", "neg", "sigmoid", "float", "double", "int64", "bfloat16", "detach"]


@pytest.mark.parametrize("name", MATHS)
@pytest.mark.parametrize("make", [lambda: NonTensorData({"cfg": 1}, [2]), _stack])
def test_maths_and_casts_leave_the_value_alone(name: str, make: Callable[[], Any]) -> None:
    entry = make()
    out = getattr(entry, name)()
    assert type(out) is type(entry)
    assert out.batch_size == entry.batch_size
    assert out.tolist() == entry.tolist()
    assert entry.tolist() == make().tolist()


def test_binary_maths_with_a_tensor_keeps_the_value() -> None:
    entry = NonTensorData("v", [3])
    assert entry.add(1).data == "v" and entry.mul(torch.ones(3)).batch_size == (3,)
    assert entry.clamp(0, 1).data == "v"


def test_in_place_methods_act_on_the_entry() -> None:
    entry = NonTensorData("old", batch_size=[2])
    assert entry.update({"data": "new"}) is entry and entry.data == "new"
    assert entry.zero_() is entry and entry.data == "new"
    assert entry.to("cpu").device == torch.device("cpu") and entry.device is None
    stack = _stack()
    other = NonTensorStack.from_list([["u", "v", "w"], ["x", "y", "z"]])
    assert stack.update({"data": other}) is stack
    assert stack.tolist() == other.tolist()


def test_in_place_methods_refuse_a_second_key() -> None:
    entry = NonTensorData("v", batch_size=[2])
    with pytest.raises(
        TypeError,
        match=r"NonTensorData.update: a NonTensorData holds one value under 'data'; the call would leave keys \['data', 'x'\]",
    ):
        entry.update({"x": torch.zeros(2)})
    assert entry.data == "v"
    with pytest.raises(TypeError, match=r"NonTensorData.update: .* holding a NonTensorStack"):
        entry.update({"data": NonTensorStack("a", "b")})
    assert entry.data == "v"


@pytest.mark.parametrize(
    ("name", "call", "left"),
    [
        ("pop", lambda e: e.pop("data"), []),
        ("popitem", lambda e: e.popitem(), []),
        ("setdefault", lambda e: e.setdefault("x", torch.zeros(2)), ["data", "x"]),
        ("make_memmap", lambda e: e.make_memmap("x", (2,)), ["data", "x"]),
        (
            "make_memmap_from_tensor",
            lambda e: e.make_memmap_from_tensor("x", torch.ones(2)),
            ["data", "x"],
        ),
    ],
)
def test_methods_that_add_or_take_entries_refuse(name: str, call: Any, left: list[str]) -> None:
    # they returned a value and dropped the change: the entry holds one value at "data"
    for entry in (NonTensorData("v", batch_size=[2]), NonTensorStack("a", "b")):
        kind = type(entry).__name__
        with pytest.raises(
            TypeError, match=rf"{kind}.{name}: .*would leave keys {re.escape(str(left))}"
        ):
            call(entry)
        assert entry.tolist() == (["v", "v"] if kind == "NonTensorData" else ["a", "b"])
    entry = NonTensorData("v", batch_size=[2])
    assert entry.pop("missing", None) is None and entry.data == "v"


def test_conversions_and_introspection() -> None:
    entry = NonTensorData("v", batch_size=[2, 3], device="cpu")
    assert entry.batch_dims == 2 and entry.names == [None, None]
    assert list(entry.keys()) == ["data"] and entry.get("data").data == "v"
    assert entry.to_dict() == "v"  # the value, as upstream
    assert entry.clone() is not entry and entry.clone().data == "v"
    assert entry.is_empty() is False and entry.ndimension() == 2
    assert entry.cpu().device == torch.device("cpu")
    assert [f.name for f in entry.fields()] == ["data"]
    maybe = entry.maybe_to_stack()
    assert type(maybe) is NonTensorStack and maybe.tolist() == entry.tolist()
    assert NonTensorData("v").maybe_to_stack().data == "v"


def test_class_methods_take_entries() -> None:
    a, b = NonTensorData("x", [2]), NonTensorData("y", [2])
    assert NonTensorData.stack([a, b]).tolist() == [["x", "x"], ["y", "y"]]
    assert NonTensorData.cat([a, b]).tolist() == ["x", "x", "y", "y"]
    td = TensorDict(data=a, batch_size=[2])
    assert NonTensorData.from_tensordict(td).data == "x"
    assert NonTensorData.from_tensordict(TensorDict(batch_size=[2]), {"data": 3}).data == 3
    with pytest.raises(
        KeyError,
        match=r"NonTensorData.from_tensordict: expected a TensorDict holding one non-tensor entry at 'data', got keys \['a'\]",
    ):
        NonTensorData.from_tensordict(TensorDict(a=torch.zeros(())))


def test_memmap_and_save_round_trip(tmp_path: Path) -> None:
    entry = NonTensorData({"lr": 0.1}, batch_size=[2])
    out = entry.memmap(tmp_path / "m")
    assert out.data == {"lr": 0.1}
    back = NonTensorData.load_memmap(tmp_path / "m")
    assert type(back) is NonTensorData and back.data == {"lr": 0.1} and back.batch_size == (2,)
    stack = _stack()
    stack.save(tmp_path / "s")
    assert NonTensorStack.load(tmp_path / "s").tolist() == stack.tolist()


def test_metadata_keeps_its_class_through_delegated_ops() -> None:
    meta = MetaData("cfg", batch_size=[2])
    assert type(meta.clone()) is MetaData
    assert type(meta.unbind(0)[0]) is MetaData


@pytest.mark.parametrize("cls", [NonTensorData, NonTensorStack, MetaData])
def test_every_public_tensordict_name(cls: type) -> None:
    missing = [n for n in dir(TensorDict) if not n.startswith("_") and not hasattr(cls, n)]
    assert missing == []


def test_setting_the_value_takes_a_non_tensor_entry_as_a_value() -> None:
    entry = NonTensorData("old", batch_size=[3])
    entry.set("data", NonTensorData("new", batch_size=[3]))
    assert entry.data == "new"
    entry.set("data", "plain")
    assert entry.data == "plain"
