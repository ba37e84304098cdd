"""torch.stack / torch.cat of TensorDicts: the dense rule, non-tensor entries, errors."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from tests.catalogue import CATALOGUE, leaves


@pytest.mark.parametrize("name", sorted(CATALOGUE))
@pytest.mark.parametrize("dim", [0, -1])
def test_stack_matches_per_leaf_stack(name: str, dim: int) -> None:
    tds = [CATALOGUE[name]().detach() for _ in range(3)]
    out = torch.stack(tds, dim)
    # stacking lazy stacks keeps the members' own storage: the result is a lazy stack too
    assert type(out) is (LazyStackedTensorDict if name.startswith("lazy") else type(tds[0]))
    n = len(tds[0].batch_size)
    d = dim % (n + 1)
    assert out.batch_size == torch.Size([*tds[0].batch_size[:d], 3, *tds[0].batch_size[d:]])
    for key in leaves(tds[0]):
        torch.testing.assert_close(out.get(key), torch.stack([t.get(key) for t in tds], d))
    back = out.unbind(d)
    for a, b in zip(back, tds, strict=True):
        assert (a == b).all()


@pytest.mark.parametrize("name", [n for n in sorted(CATALOGUE) if n != "empty_batch"])
def test_cat_matches_per_leaf_cat(name: str) -> None:
    tds = [CATALOGUE[name]().detach() for _ in range(2)]
    out = torch.cat(tds, 0)
    for key in leaves(tds[0]):
        torch.testing.assert_close(out.get(key), torch.cat([t.get(key) for t in tds], 0))
    assert TensorDict.cat(tds, 0).batch_size == out.batch_size


def test_seed_stack_and_cat() -> None:
    tensordicts = [
        TensorDict(
            {"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)},
            batch_size=[3, 4],
        )
        for _ in range(2)
    ]
    stack_tensordict = torch.stack(tensordicts, 1)
    assert stack_tensordict.shape == torch.Size([3, 2, 4])
    assert stack_tensordict["key 1"].shape == torch.Size([3, 2, 4, 5])
    cat_tensordict = torch.cat(tensordicts, 0)
    assert cat_tensordict.shape == torch.Size([6, 4])
    assert cat_tensordict["key 1"].shape == torch.Size([6, 4, 5])
    assert TensorDict.stack(tensordicts, 0).batch_size == (2, 3, 4)


def test_non_tensor_rule() -> None:
    same = torch.stack([TensorDict({"s": "x"}, [2]), TensorDict({"s": "x"}, [2])])
    # one value per element, equal values too, as upstream: same["s"][i] is a value
    assert isinstance(same.get("s"), NonTensorStack)
    assert same["s"] == [["x", "x"], ["x", "x"]] and same["s"][1][0] == "x"
    same_cat = torch.cat([TensorDict({"s": "x"}, [1]), TensorDict({"s": "x"}, [2])])
    assert isinstance(same_cat.get("s"), NonTensorData) and same_cat["s"] == "x"  # upstream
    diff = torch.stack([TensorDict({"s": "x"}, [2]), TensorDict({"s": "y"}, [2])])
    assert isinstance(diff.get("s"), NonTensorStack)
    assert diff["s"] == [["x", "x"], ["y", "y"]]
    assert diff[1, 0]["s"] == "y"
    cat = torch.cat([TensorDict({"s": "x"}, [1]), TensorDict({"s": "y"}, [2])])
    assert cat["s"] == ["x", "y", "y"]
    again = torch.stack([diff, diff], 0)
    assert again["s"][1] == [["x", "x"], ["y", "y"]]


def test_heterogeneous_stacks_are_lazy() -> None:
    a = TensorDict({"x": torch.zeros(2, 3)}, [2])
    b = TensorDict({"x": torch.zeros(2, 4)}, [2])
    c = TensorDict({"y": torch.zeros(2)}, [2])
    assert isinstance(torch.stack([a, b]), LazyStackedTensorDict)
    assert isinstance(torch.stack([a, c]), LazyStackedTensorDict)


def test_stack_cat_errors() -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2])
    with pytest.raises(
        RuntimeError,
        match=r"torch.stack: TensorDicts must share a batch size; got \(2,\) at position 0 and \(3,\) at position 1",
    ):
        torch.stack([a, TensorDict({"x": torch.zeros(3)}, [3])])
    with pytest.raises(ValueError, match="expected a non-empty sequence"):
        TensorDict.stack([])
    with pytest.raises(KeyError, match=r"torch.cat: TensorDict 1 has keys \['y'\]"):
        torch.cat([a, TensorDict({"y": torch.zeros(2)}, [2])])
    with pytest.raises(RuntimeError, match="batch sizes must match except in dim 0"):
        torch.cat([TensorDict({}, [2, 3]), TensorDict({}, [2, 4])])
    with pytest.raises(RuntimeError, match=r"batch_size=\[\] cannot be concatenated"):
        torch.cat([TensorDict(), TensorDict()])
    with pytest.raises(IndexError, match="dim 3 is out of range"):
        torch.stack([a, a], 3)


@pytest.mark.parametrize("inner", [0, 1, 2])
@pytest.mark.parametrize("outer", [0, 1, 2])
def test_a_nested_lazy_level_stacks_member_by_member(inner: int, outer: int) -> None:
    # each member of the result's lazy level stacks the same member of every input, so
    # the members keep their own keys (as upstream); unbinding gives the inputs back
    from tensordict import dense_stack_tds, lazy_stack

    bs = (5, 6)
    narrow = TensorDict({"a": torch.randn(*bs, 3)}, bs)
    wide = TensorDict({"a": torch.randn(*bs, 4), "b": torch.randn(*bs, 2)}, bs)
    first = TensorDict({"lazy": lazy_stack([narrow, wide], inner)}, [])
    first.batch_size = first["lazy"].batch_size
    second = first.clone().apply_(lambda x: x + 1)
    for out in (
        dense_stack_tds(lazy_stack([first, second], outer)),
        torch.stack([first, second], outer),
    ):
        level = out["lazy"]
        assert type(out) is TensorDict and level.batch_size == out.batch_size
        assert [sorted(m.keys()) for m in level.tensordicts] == [["a"], ["a", "b"]]
        for got, source in zip(out.unbind(outer), (first, second), strict=True):
            for i, member in enumerate(source["lazy"].tensordicts):
                for key in member.keys():
                    torch.testing.assert_close(got["lazy"].tensordicts[i][key], member[key])


def test_lazy_stacks_stack_member_by_member_at_the_top_too() -> None:
    from tensordict import lazy_stack

    narrow = TensorDict({"a": torch.randn(3)}, [])
    wide = TensorDict({"a": torch.randn(3), "b": torch.randn(5)}, [])
    first = lazy_stack([narrow, wide])
    second = first.clone().apply_(lambda x: x + 1)
    out = torch.stack([first, second], 0)  # along a new dim before the stack dim
    assert out.stack_dim == 1 and out.batch_size == (2, 2)
    assert [type(m).__name__ for m in out.tensordicts] == ["TensorDict", "TensorDict"]
    assert sorted(out.tensordicts[1].keys()) == ["a", "b"]
    for got, source in zip(out.unbind(0), (first, second), strict=True):
        for i, member in enumerate(source.tensordicts):
            for key in member.keys():
                torch.testing.assert_close(got.tensordicts[i][key], member[key])
    uneven = lazy_stack([narrow, wide, wide])
    mixed = torch.stack([first, uneven[:2]], 0)  # (as many members: member-wise)
    assert mixed.batch_size == (2, 2)
    odd = torch.stack([first, lazy_stack([wide, narrow], 0).unsqueeze(0).squeeze(0)], 0)
    assert odd.batch_size == (2, 2)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stacked_non_tensor_values_sit_at_their_members_elements(dim: int) -> None:
    members = [
        TensorDict({"x": torch.full((2, 3), float(i)), "s": f"v{i}"}, [2, 3]) for i in range(4)
    ]
    out = torch.stack(members, dim)
    stacked_x = out["x"]
    for index in torch.cartesian_prod(*[torch.arange(n) for n in out.batch_size]).tolist():
        element = out[tuple(index)]
        member = int(stacked_x[tuple(index)])
        assert element["s"] == f"v{member}"
        assert type(element.get("s")) is NonTensorData  # one element: its value, as upstream
    assert torch.stack([members[0], members[0]]).get("s").tolist() == [[["v0"] * 3] * 2] * 2


def _labels_follow_members(out: Any) -> None:
    """Every element's label is the one of the member its ``i`` leaf came from."""
    ids = out["i"].reshape(-1).tolist()
    value = out.get("s")
    labels = value.tolist() if isinstance(value, NonTensorStack) else [value.data] * len(ids)
    flat: list[Any] = labels
    while flat and isinstance(flat[0], list):
        flat = [x for row in flat for x in row]
    assert flat == [f"v{i}" for i in ids]


SHAPE_OPS: list[tuple[str, Callable[[Any], Any]]] = [
    ("view", lambda t: t.view(-1)),
    ("reshape", lambda t: t.reshape(3, 8)),
    ("permute", lambda t: t.permute(2, 0, 1)),
    ("transpose", lambda t: t.transpose(0, 1)),
    ("unsqueeze", lambda t: t.unsqueeze(1)),
    ("flatten", lambda t: t.flatten(0, 1)),
    ("unflatten", lambda t: t.unflatten(2, (3, 1))),
    ("expand", lambda t: t.unsqueeze(0).expand(2, 4, 2, 3)),
    ("index", lambda t: t[1:, 0]),
    ("mask", lambda t: t[torch.tensor([True, False, True, True])]),
    ("clone", lambda t: t.clone()),
    ("cat", lambda t: torch.cat([t, t], 1)),
    ("unbind", lambda t: t.unbind(2)[1]),
    ("contiguous", lambda t: t.contiguous()),
    ("pickle", lambda t: pickle.loads(pickle.dumps(t))),
    ("consolidate", lambda t: t.consolidate()),
]


@pytest.mark.parametrize(("name", "op"), SHAPE_OPS, ids=[n for n, _ in SHAPE_OPS])
def test_stacked_labels_follow_their_members_through_shape_ops(
    name: str, op: Callable[[Any], Any]
) -> None:
    members = [TensorDict({"i": torch.full((2, 3), i), "s": f"v{i}"}, [2, 3]) for i in range(4)]
    stacked = torch.stack(members, 0)
    _labels_follow_members(op(stacked))


def test_writing_one_element_of_a_stacked_label_leaves_the_others() -> None:
    stacked = torch.stack([TensorDict({"s": f"v{i}"}, [2]) for i in range(3)], 1)
    stacked[0, 1] = TensorDict({"s": "new"}, [])
    assert stacked["s"] == [["v0", "new", "v2"], ["v0", "v1", "v2"]]
    labels = stacked.get("s")
    labels[1] = ["a", "b", "c"]
    assert stacked["s"] == [["v0", "new", "v2"], ["a", "b", "c"]]


def test_stacked_labels_survive_a_memmap_round_trip(tmp_path: Path) -> None:
    stacked = torch.stack(
        [TensorDict({"i": torch.full((2,), i), "s": f"v{i}"}, [2]) for i in range(3)]
    )
    stacked.memmap(tmp_path / "ckpt")
    _labels_follow_members(TensorDict.load_memmap(tmp_path / "ckpt"))
