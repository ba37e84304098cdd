"""Shape operations checked leaf by leaf with the positional oracle of test_index."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import NonTensorStack, TensorDict, pad
from tests.test_index import _positions, _td, check_against_oracle

BS = (4, 3)

# (name, op on a TensorDict or a positional tensor of the batch shape)
SINGLE: list[tuple[str, Callable[[Any], Any]]] = [
    ("reshape", lambda t: t.reshape(-1)),
    ("reshape2", lambda t: t.reshape(2, 6)),
    ("view", lambda t: t.view(3, 4)),
    ("view_merge", lambda t: t.view(-1)),
    ("view_merge12", lambda t: t.view(12)),
    ("flatten", lambda t: t.flatten(0, 1)),
    ("unflatten", lambda t: t.unflatten(0, (2, 2))),
    ("unsqueeze0", lambda t: t.unsqueeze(0)),
    ("unsqueeze-1", lambda t: t.unsqueeze(-1)),
    ("squeeze", lambda t: t.unsqueeze(1).squeeze(1)),
    ("squeeze_all", lambda t: t.unsqueeze(0).unsqueeze(-1).squeeze()),
    ("permute", lambda t: t.permute(1, 0)),
    ("transpose", lambda t: t.transpose(0, 1)),
    ("expand", lambda t: t.expand(2, 4, 3)),
    ("repeat", lambda t: t.repeat(2, 1)),
    ("narrow", lambda t: t.narrow(1, 1, 2)),
    ("flip", lambda t: t.flip(0)),
    ("flip2", lambda t: t.flip(0, 1)),
    ("roll", lambda t: t.roll(1, 0)),
    ("gather", lambda t: t.gather(1, torch.tensor([[2, 0, 1]] * 4))),
]

MULTI: list[tuple[str, Callable[[Any], Any]]] = [
    ("split", lambda t: t.split(3, 0)),
    ("split_sizes", lambda t: t.split([1, 2], 1)),
    ("chunk", lambda t: t.chunk(2, 0)),
    ("unbind0", lambda t: t.unbind(0)),
    ("unbind1", lambda t: t.unbind(1)),
]


@pytest.mark.parametrize(("name", "op"), SINGLE, ids=[s[0] for s in SINGLE])
def test_single_output_ops(name: str, op: Callable[[Any], Any]) -> None:
    td = _td(BS)
    check_against_oracle(td, op(td), op(_positions(BS)))


@pytest.mark.parametrize(("name", "op"), MULTI, ids=[m[0] for m in MULTI])
def test_multi_output_ops(name: str, op: Callable[[Any], Any]) -> None:
    td = _td(BS)
    outs, poss = op(td), op(_positions(BS))
    assert len(outs) == len(poss)
    for out, pos in zip(outs, poss, strict=True):
        check_against_oracle(td, out, pos)


def test_torch_functions_match_methods() -> None:
    td = _td(BS)
    pos = _positions(BS)
    check_against_oracle(td, torch.permute(td, (1, 0)), pos.permute(1, 0))
    check_against_oracle(td, torch.flatten(td), pos.flatten())
    check_against_oracle(td, torch.unsqueeze(td, 0), pos.unsqueeze(0))
    check_against_oracle(td, torch.squeeze(td.unsqueeze(0)), pos)
    check_against_oracle(td, torch.transpose(td, 0, 1), pos.transpose(0, 1))
    check_against_oracle(td, torch.flip(td, (1,)), pos.flip(1))
    check_against_oracle(td, torch.roll(td, 2, 1), pos.roll(2, 1))
    check_against_oracle(td, torch.narrow(td, 0, 1, 2), pos.narrow(0, 1, 2))
    check_against_oracle(td, torch.unflatten(td, 1, (3, 1)), pos.unflatten(1, (3, 1)))
    idx = torch.tensor([[0, 1, 2]] * 4)
    check_against_oracle(td, torch.gather(td, 1, idx), pos.gather(1, idx))
    for a, b in zip(torch.unbind(td, 1), pos.unbind(1), strict=True):
        check_against_oracle(td, a, b)
    for a, b in zip(torch.split(td, 2), pos.split(2), strict=True):
        check_against_oracle(td, a, b)
    clone = torch.clone(td)
    assert clone["a"] is not td["a"] and torch.equal(clone["a"], td["a"])
    for fn in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.rand_like):
        out = fn(td.exclude("nested", "inner").float())
        assert out["a"].shape == td["a"].shape
    assert (torch.full_like(td.float(), 3.0)["a"] == 3).all()
    assert (torch.zeros_like(td)["nested", "b"] == 0).all()


def test_roll_without_dims_rolls_the_flat_batch() -> None:
    td = _td(BS)
    check_against_oracle(td, td.roll(1), _positions(BS).roll(1))


def test_expand_is_a_view() -> None:
    datum = TensorDict({"images": torch.zeros((8, 8, 3), dtype=torch.uint8)}, batch_size=[])
    big = datum.expand(1_000_000)
    assert big.batch_size == (1_000_000,)
    assert big["images"].stride()[0] == 0
    assert big["images"].untyped_storage().nbytes() == 8 * 8 * 3
    assert (
        torch.broadcast_to(datum["images"], (2, 8, 8, 3)).shape
        == datum.broadcast_to([2])["images"].shape
    )
    assert datum.expand_as(torch.zeros(5)).batch_size == (5,)


def test_masked_fill_select_where() -> None:
    td = TensorDict({"a": torch.arange(6.0).reshape(3, 2), "n": {"b": torch.arange(3)}}, [3])
    mask = torch.tensor([True, False, True])
    filled = td.masked_fill(mask, -1)
    assert torch.equal(filled["a"][:, 0], torch.tensor([-1.0, 2.0, -1.0]))
    assert torch.equal(filled["n", "b"], torch.tensor([-1, 1, -1]))
    sel = td.masked_select(mask)
    assert sel.batch_size == (2,) and torch.equal(sel["n", "b"], torch.tensor([0, 2]))
    other = td.apply(lambda x: x * 0 + 100)
    mixed = torch.where(mask, td, other)
    assert torch.equal(mixed["n", "b"], torch.tensor([0, 100, 2]))
    assert torch.equal(td.where(mask, 7)["n", "b"], torch.tensor([0, 7, 2]))
    td.masked_fill_(~mask, 0)
    assert torch.equal(td["n", "b"], torch.tensor([0, 0, 2]))
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        td.masked_fill(torch.tensor([1, 0, 1]), 0)
    with pytest.raises(
        ValueError, match=r"mask shape \(2,\) does not broadcast to batch_size \(3,\)"
    ):
        td.masked_fill(torch.tensor([True, False]), 0)
    with pytest.raises(ValueError, match=r"mask shape \(2,\) must equal batch_size \(3,\)"):
        td.masked_select(torch.tensor([True, False]))


def test_masked_select_with_a_mask_over_the_leading_dims() -> None:
    td = TensorDict({"a": torch.arange(24.0).reshape(2, 3, 4), "s": "x"}, [2, 3], names=["i", "j"])
    rows = torch.tensor([False, True])
    sel = td.masked_select(rows)
    assert sel.batch_size == (1, 3) and sel.names == ["i", "j"] and sel["s"] == "x"
    assert torch.equal(sel["a"], td["a"][rows])
    both = torch.tensor([[True, False, True], [False, False, True]])
    assert torch.equal(td.masked_select(both)["a"], td["a"][both])
    with pytest.raises(
        ValueError, match=r"mask shape \(3,\) must equal batch_size \(2, 3\) or its leading"
    ):
        td.masked_select(torch.tensor([True, False, True]))
    with pytest.raises(ValueError, match=r"mask shape \(\) must equal batch_size"):
        td.masked_select(torch.tensor(True))
    with pytest.raises(
        TypeError, match="masked_select: mask must be a bool tensor, got torch.int64"
    ):
        td.masked_select(torch.ones(2, 3, dtype=torch.long))


def test_pad() -> None:
    td = TensorDict({"a": torch.ones(2, 3, 4), "n": {"b": torch.ones(2, 3)}}, [2, 3])
    out = pad(td, [1, 0, 0, 2], value=0.0)
    assert out.batch_size == (3, 5)
    assert out["a"].shape == (3, 5, 4) and out["n", "b"].shape == (3, 5)
    assert out["a"][0].sum() == 0 and out["a"][1:, :3].sum() == 2 * 3 * 4
    with pytest.raises(ValueError, match="pad_size needs"):
        pad(td, [1, 1, 1])


def test_shape_op_errors_name_the_call() -> None:
    td = _td(BS)
    with pytest.raises(
        RuntimeError, match=r"TensorDict.reshape: not valid for batch_size \(4, 3\)"
    ):
        td.reshape(5)
    with pytest.raises(IndexError, match="TensorDict.unsqueeze: dim 4 is out of range"):
        td.unsqueeze(4)
    with pytest.raises(ValueError, match="not a permutation"):
        td.permute(0, 0)
    with pytest.raises(RuntimeError, match="TensorDict.expand"):
        td.expand(5, 3)
    with pytest.raises(ValueError, match="index must have 2 dims"):
        td.gather(0, torch.tensor([0]))


def test_names_through_shape_ops() -> None:
    td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3], names=["b", "t"])
    assert td.permute(1, 0).names == ["t", "b"]
    assert td.unsqueeze(0).names == [None, "b", "t"]
    assert td.unsqueeze(0).squeeze(0).names == ["b", "t"]
    assert td.transpose(0, 1).names == ["t", "b"]
    assert td.flatten().names == [None]
    assert td.unbind(1)[0].names == ["b"]
    assert td.flip(0).names == ["b", "t"]
    assert td.expand(5, 2, 3).names == [None, "b", "t"]
    assert td.rename("x", "y").names == ["x", "y"] and td.names == ["b", "t"]
    assert td.rename(t="time").names == ["b", "time"]
    plain = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    assert plain.refine_names("x", None).names == ["x", None]
    with pytest.raises(ValueError, match="dim 0 is named 'x'; cannot refine to 'z'"):
        plain.refine_names("z", None)
    with pytest.raises(ValueError, match=r"no batch dims named \['q'\]"):
        plain.rename(q="r")


def test_non_tensor_stack_follows_shape_ops() -> None:
    words = NonTensorStack.from_list([["a", "b", "c"], ["d", "e", "f"]])
    td = TensorDict({"x": torch.zeros(2, 3), "w": words}, [2, 3])
    assert td["w"] == [["a", "b", "c"], ["d", "e", "f"]]
    assert td.permute(1, 0)["w"] == [["a", "d"], ["b", "e"], ["c", "f"]]
    assert td.flip(1)["w"][0] == ["c", "b", "a"]
    assert td.reshape(-1)["w"] == ["a", "b", "c", "d", "e", "f"]
    assert td[1, 2]["w"] == "f"
    assert td.roll(1, 1)["w"][0] == ["c", "a", "b"]
    assert [t["w"] for t in td.unbind(1)] == [["a", "d"], ["b", "e"], ["c", "f"]]
    assert td[:, torch.tensor([2, 0])]["w"] == [["c", "a"], ["f", "d"]]
    with pytest.raises(ValueError, match="values differ along the batch"):
        td.sum(dim=0)


def test_view_merging_every_batch_dim_per_leaf_rank() -> None:
    # the merge has its own per-leaf path by rank: no feature dim, one, several, none
    # with elements, a nested level; each leaf must equal torch's own view
    leaves = {
        "r0": torch.randn(4, 3),
        "r1": torch.randn(4, 3, 5),
        "r2": torch.randn(4, 3, 2, 5),
        "empty": torch.randn(4, 3, 0),
        "empty2": torch.randn(4, 3, 0, 2),
    }
    td = TensorDict({**leaves, "sub": TensorDict(dict(leaves), [4, 3])}, [4, 3])
    out = td.view(12)
    for key, x in leaves.items():
        expected = x.view(12, *x.shape[2:])
        for got in (out[key], out["sub", key]):
            assert got.shape == expected.shape
            assert got.data_ptr() == x.data_ptr() or not x.numel()
            assert torch.equal(got, expected)


def test_view_merge_of_a_leaf_that_cannot_be_viewed_raises_torchs_error() -> None:
    base = torch.randn(3, 4, 5).transpose(0, 1)  # batch dims (4, 3) not mergeable as a view
    td = TensorDict({"a": base}, [4, 3])
    with pytest.raises(RuntimeError, match="view"):
        td.view(12)
    assert td.reshape(12)["a"].shape == (12, 5)  # reshape copies instead


def test_permute_argument_checks_hold_on_repeated_calls() -> None:
    td = TensorDict({"a": torch.randn(4, 3, 2)}, [4, 3])
    for _ in range(2):  # the second call finds the first one's checked plan
        assert torch.equal(td.permute(1, 0)["a"], td["a"].permute(1, 0, 2))
        assert torch.equal(td.permute((1, 0))["a"], td["a"].permute(1, 0, 2))
        assert torch.equal(td.permute(-1, 0)["a"], td["a"].permute(1, 0, 2))
        with pytest.raises(TypeError, match="permute: dims must be ints"):
            td.permute(1.0, 0.0)
        with pytest.raises(ValueError, match="not a permutation"):
            td.permute(0, 0)
        with pytest.raises(IndexError):
            td.permute(2, 0)
    assert td.permute(True, False).batch_size == (3, 4)  # bools are ints, as in torch


def test_flatten_of_one_dim_shares_the_entries_and_keeps_the_names() -> None:
    td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3], names=["i", "j"]).lock_()
    out = td.flatten(1, -1)
    assert out is not td and out["a"] is td["a"]
    assert out.batch_size == (2, 3) and out.names == ["i", "j"] and out.is_locked
