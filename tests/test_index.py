"""Indexing and index writes against an oracle: a positional tensor of the batch shape.

For any index or shape op ``f``, ``pos = f(arange(numel).reshape(batch_size))`` says which
batch element lands where; each leaf of ``f(td)`` must equal ``leaf.flatten(batch)[pos]``.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import NonTensorStack, TensorDict, lazy_stack

SHAPES = [(5,), (4, 3), (2, 3, 4), (0,), (3, 0), (1, 4), (6, 1, 2)]


def _td(bs: tuple[int, ...]) -> TensorDict:
    n = int(np.prod(bs)) if bs else 1
    td = TensorDict(
        {
            "a": torch.arange(n * 2, dtype=torch.float32).reshape(*bs, 2),
            "nested": {"b": torch.arange(n).reshape(bs)},
        },
        batch_size=bs,
    )
    td["inner"] = TensorDict({"c": torch.arange(n * 3).reshape(*bs, 3)}, [*bs, 3])
    td["text"] = "hello"
    return td


def _positions(bs: tuple[int, ...]) -> torch.Tensor:
    return torch.arange(int(np.prod(bs)) if bs else 1).reshape(bs)


def _expected(leaf: torch.Tensor, bs: tuple[int, ...], pos: torch.Tensor) -> torch.Tensor:
    flat = leaf.reshape(-1, *leaf.shape[len(bs) :]) if bs else leaf.unsqueeze(0)
    return flat[pos]


def _flat(values: object) -> list[object]:
    return [v for item in values for v in _flat(item)] if isinstance(values, list) else [values]


def assert_text(out: Any, text: str, shape: tuple[int, ...] | torch.Size) -> None:
    """``out["text"]`` reads ``text`` at every element of ``shape``: one value, or (from a
    stack or cat of lazy members, as upstream) a ``NonTensorStack`` of one per element."""
    value = out.get("text")
    assert value.batch_size == shape
    if isinstance(value, NonTensorStack):
        values = _flat(value.tolist())
        assert len(values) == math.prod(shape) and set(values) <= {text}
    else:
        assert value.data == text


def check_against_oracle(td: TensorDict, out: TensorDict, pos: torch.Tensor) -> None:
    bs = tuple(td.batch_size)
    assert out.batch_size == pos.shape
    assert_text(out, "hello", pos.shape)
    for key in [("a",), ("nested", "b"), ("inner", "c")]:
        torch.testing.assert_close(out.get(key), _expected(td.get(key), bs, pos))
    assert out["inner"].batch_size == (*pos.shape, 3)


def _random_item(rng: random.Random, size: int) -> object:
    kind = rng.choice(["int", "slice", "list", "range", "np", "tensor", "tensor2d", "mask", "none"])
    lo, hi = -size - 1, size + 1  # out of range on purpose, sometimes
    if kind == "int":
        return rng.randint(lo, hi - 1) if size else rng.randint(-1, 0)
    if kind == "slice":
        return slice(
            rng.choice([None, rng.randint(lo, hi)]),
            rng.choice([None, rng.randint(lo, hi)]),
            rng.choice([None, 1, 2, 3, -1]),
        )
    if kind in ("list", "range", "np", "tensor", "tensor2d"):
        values = [rng.randint(-size, size - 1) for _ in range(rng.randint(0, 3))] if size else []
        if kind == "list":
            return values
        if kind == "range":
            return range(0, size, rng.randint(1, 2))
        if kind == "np":
            return np.array(values, dtype=np.int64)
        if kind == "tensor2d":
            return torch.tensor(values + values, dtype=torch.long).reshape(2, -1)
        return torch.tensor(values, dtype=torch.long)
    if kind == "mask":
        return torch.rand(size) > 0.5
    return None


def _random_index(rng: random.Random, bs: tuple[int, ...]) -> object:
    items: list[object] = []
    for size in bs:
        if rng.random() < 0.6:
            items.append(_random_item(rng, size))
    if rng.random() < 0.3:
        items.insert(rng.randint(0, len(items)), Ellipsis)
    if rng.random() < 0.2:
        items.insert(rng.randint(0, len(items)), None)
    if rng.random() < 0.15 and len(bs) >= 2:
        return torch.rand(bs[:2]) > 0.5  # an n-D mask
    if len(items) == 1 and rng.random() < 0.5:
        return items[0]
    return tuple(items)


@pytest.mark.parametrize("bs", SHAPES, ids=str)
def test_indexing_oracle(bs: tuple[int, ...]) -> None:
    rng = random.Random(hash(bs) % 1000)
    td = _td(bs)
    pos_all = _positions(bs)
    checked = 0
    for _ in range(500):
        index = _random_index(rng, bs)
        try:
            pos = pos_all[index]
        except (IndexError, TypeError, RuntimeError, ValueError) as err:
            expected_kind = TypeError if isinstance(err, TypeError) else IndexError
            with pytest.raises(expected_kind, match=r"batch_size|out of bounds|ellipsis"):
                td[index]
            continue
        check_against_oracle(td, td[index], pos)
        checked += 1
    assert checked > 100


def test_empty_batch_only_takes_trivial_indices() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [])
    assert td[()].batch_size == ()
    assert td[...].batch_size == ()
    assert td[None].batch_size == (1,)
    assert td[None]["a"].shape == (1, 3)
    for bad in (0, slice(None), torch.tensor([0])):
        with pytest.raises(IndexError, match=r"is not valid for batch_size \(\)"):
            td[bad]


def test_fast_paths_match_general_path() -> None:
    td = _td((6, 2))
    rows = torch.tensor([5, 0, 3])
    check_against_oracle(td, td[rows], _positions((6, 2))[rows])
    check_against_oracle(td, td[torch.tensor([-1, 2])], _positions((6, 2))[torch.tensor([-1, 2])])
    check_against_oracle(td, td[1:5:2], _positions((6, 2))[1:5:2])
    with pytest.raises(
        IndexError, match=r"index 6 is out of bounds for dim 0 of batch_size \(6, 2\)"
    ):
        td[6]
    with pytest.raises(IndexError, match="batch_size"):
        td[torch.tensor([7])]


def test_names_through_indexing() -> None:
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4], names=["x", "y"])
    assert td[0].names == ["y"]
    assert td[1:].names == ["x", "y"]
    assert td[torch.tensor([0, 1])].names == ["x", "y"]


_T = torch.tensor([0, 1])
_MASK = torch.ones(4, 5, dtype=torch.bool)


@pytest.mark.parametrize(
    ("index", "names"),
    [
        ((0, slice(None), _T), ["b", "c", "d"]),  # an int is applied first
        ((slice(None), _T, 0, _T), ["a", None]),  # ints do not part index tensors
        ((slice(None), _T, _T), ["a", None, "d"]),  # together: one unnamed dim, in place
        ((_T, slice(None), _T), [None, "b", "d"]),  # apart: first
        ((slice(None), _T, None, _T), [None, "a", None, "d"]),  # a new dim parts them
        ((slice(None), torch.tensor(0), slice(None), _T), ["a", "c", "d"]),  # 0-d: an int
        ((slice(None), _MASK), ["a", None, "d"]),
        ((slice(None), _MASK, _T[:1]), ["a", None]),
        ((slice(None), torch.zeros(2, 2, dtype=torch.long)), ["a", None, None, "c", "d"]),
        ((torch.zeros(2, 2, dtype=torch.long), _T), [None, None, "c", "d"]),
    ],
)
def test_names_where_torch_puts_the_indexed_dims(index: Any, names: list[Any]) -> None:
    # the dims index tensors make are unnamed; every other dim keeps its name (they
    # were all dropped when an index held more than one tensor)
    td = TensorDict({"v": torch.zeros(3, 4, 5, 6)}, [3, 4, 5, 6], names=list("abcd"))
    out = td[index]
    assert out.batch_size == torch.zeros(3, 4, 5, 6)[index].shape
    assert out.names == names


def test_lazy_stack_index_keeps_the_stack_dims_name() -> None:
    member = TensorDict({"v": torch.zeros(3, 4)}, [3, 4], names=["a", "b"])
    stack = lazy_stack([member.clone(), member.clone()], 1, stack_dim_name="s")
    assert stack[:, 0].names == ["a", "b"]
    assert stack[1:, :1].names == ["a", "s", "b"]
    assert stack[..., 0].names == ["a", "s"]
    assert stack[:, torch.tensor([1, 0])].names == ["a", "s", "b"]
    assert stack[0].names == ["s", "b"]
    assert stack[_T, _T].names == [None, "b"]  # the stack dim indexed with another
    assert [m.names for m in stack.unbind(0)] == [["s", "b"]] * 3


@pytest.mark.parametrize(
    "index",
    [0, slice(1, None), [1, 0], (slice(None), [0, 2]), (1, slice(0, 2)), (None, 0), Ellipsis],
    ids=repr,
)
def test_nested_levels_keep_their_names_through_indexing(index: Any) -> None:
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4], names=["x", "y"])
    td["inner"] = TensorDict({"b": torch.zeros(3, 4, 2)}, [3, 4, 2])
    td["inner"].names = ["x", "y", "z"]
    out = td[index]
    assert out["inner"].names == [*out.names, "z"]
    assert td["inner"].names == ["x", "y", "z"]


@pytest.mark.parametrize("bs", [(5,), (4, 3), (2, 3, 4)], ids=str)
def test_scalar_writes_oracle(bs: tuple[int, ...]) -> None:
    rng = random.Random(7)
    pos_all = _positions(bs)
    for _ in range(200):
        index = _random_index(rng, bs)
        try:
            pos = pos_all[index]
        except (IndexError, TypeError, RuntimeError, ValueError):
            continue
        td = _td(bs)
        td[index] = -1
        want = _td(bs)
        for key in [("a",), ("nested", "b"), ("inner", "c")]:
            leaf = want.get(key)
            flat = leaf.reshape(-1, *leaf.shape[len(bs) :])
            flat[pos.reshape(-1)] = -1
            torch.testing.assert_close(td.get(key), leaf)


def test_td_writes_and_broadcast() -> None:
    td = TensorDict({"a": torch.zeros(4, 3), "n": {"b": torch.zeros(4)}}, [4])
    td[1] = TensorDict({"a": torch.ones(3), "n": {"b": torch.tensor(2.0)}}, [])
    td[2:] = {"a": torch.full((3,), 5.0)}  # broadcast over the two rows
    assert torch.equal(td["a"][1], torch.ones(3)) and td["n", "b"][1] == 2
    assert torch.equal(td["a"][2:], torch.full((2, 3), 5.0))
    td[torch.tensor([True, False, False, False])] = 7.0
    assert (td["a"][0] == 7).all() and td["n", "b"][0] == 7


def test_lazy_preallocation_shuffled_and_nested() -> None:
    def foo() -> TensorDict:
        data = TensorDict({}, batch_size=[])
        data["a"] = torch.randn(3)
        data["b"] = TensorDict({"c": torch.zeros(2)}, batch_size=[])
        return data

    n = 10
    perm = torch.randperm(n).tolist()
    made = {i: foo() for i in range(n)}
    data = TensorDict({}, batch_size=[n])
    for i in perm:
        data[i] = made[i]
    assert data["a"].shape == (n, 3) and data["b", "c"].shape == (n, 2)
    assert data["b"].batch_size == (n,)
    for i in range(n):
        assert torch.equal(data["a"][i], made[i]["a"])
    stacked = torch.stack([made[i] for i in range(n)])
    assert (stacked == data).all()


def test_lazy_preallocation_respects_lock_and_shapes() -> None:
    data = TensorDict({}, batch_size=[4]).lock_()
    with pytest.raises(RuntimeError, match="locked"):
        data[0] = TensorDict({"a": torch.zeros(2)}, [])
    data = TensorDict({}, batch_size=[4])
    with pytest.raises(ValueError, match=r"does not start with the indexed batch size \(2,\)"):
        data[:2] = {"a": torch.zeros(3)}


def test_getitems() -> None:
    td = _td((6,))
    out = td.__getitems__([4, 1])
    check_against_oracle(td, out, torch.tensor([4, 1]))


def _write_reversed(td: TensorDict) -> None:
    td[:, ::-1] = 0


@pytest.mark.parametrize("op", [lambda td: td[::-2], _write_reversed], ids=["read", "write"])
def test_a_negative_slice_step_is_the_value_error_torch_raises(op: Any) -> None:
    with pytest.raises(ValueError, match="step must be greater than zero") as info:
        op(_td((4, 3)))
    assert isinstance(info.value, IndexError)  # as the other invalid indices
