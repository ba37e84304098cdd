"""Upstream's private methods that code outside upstream calls (``_fast_apply``,
``_check_batch_size``, ``_has_non_tensor``): each answers as the public operation it
spells, on every kind of collection."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import TensorDict, UnbatchedTensor, lazy_stack, tensorclass


@tensorclass
class _Pair:
    x: torch.Tensor
    s: Any = None


def _collections() -> list[Any]:
    td = TensorDict({"a": torch.ones(2, 3), "n": {"b": torch.zeros(2)}}, [2])
    return [
        td,
        lazy_stack([td.clone(), td.clone()], 1),
        _Pair(x=torch.ones(2, 4), batch_size=[2]),
        td.clone().lock_(),
    ]


@pytest.mark.parametrize("td", _collections(), ids=["dense", "lazy", "tensorclass", "locked"])
def test_fast_apply_is_apply_with_empty_levels_kept(td: Any) -> None:
    out = td._fast_apply(lambda x: x + 1)
    want = td.apply(lambda x: x + 1)
    assert type(out) is type(want) and out.batch_size == want.batch_size
    assert (out == want).all()
    named = td._fast_apply(lambda k, x: x * 0 + len(k), named=True, nested_keys=True)
    assert (named == td.named_apply(lambda k, x: x * 0 + len(k), nested_keys=True)).all()
    assert td._check_batch_size() is True


def test_fast_apply_keeps_empty_levels_and_takes_upstream_keywords() -> None:
    td = TensorDict({"a": torch.ones(2), "empty": {}, "n": {"b": torch.ones(2)}}, [2])
    out = td._fast_apply(lambda x: None)  # every leaf dropped, the levels kept
    assert sorted(out.keys(True)) == ["empty", "n"] and out.batch_size == (2,)
    assert list(td.apply(lambda x: None).keys(True)) == ["empty"]  # apply drops "n"
    out = td._fast_apply(lambda x: x.double(), num_threads=2, checked=False, device="cpu")
    assert out["n", "b"].dtype == torch.float64 and out.device == torch.device("cpu")
    written = td._fast_apply(lambda x: x.mul_(3), inplace=True)
    assert written is td and td["n", "b"].tolist() == [3.0, 3.0]


def test_check_batch_size_names_the_entry_that_breaks_it() -> None:
    td = TensorDict({"a": torch.ones(2), "n": {"b": torch.zeros(2, 5)}}, [2])
    td.set("u", UnbatchedTensor(torch.zeros(7)))  # not batched: not checked
    assert td._check_batch_size() is True
    td["n"]._tensordict["b"] = torch.zeros(3)  # what only a bypass of every check makes
    with pytest.raises(RuntimeError, match=r"entry \('n', 'b'\) has shape \(3,\).*\(2,\)"):
        td._check_batch_size()
    assert td._check_batch_size(raise_exception=False) is False


def test_has_non_tensor_looks_at_every_level() -> None:
    assert TensorDict({"a": torch.zeros(1)}, [1])._has_non_tensor is False
    assert TensorDict({"n": {"m": {"s": "text"}}}, [])._has_non_tensor is True
    members = [TensorDict({"s": str(i)}, []) for i in range(2)]
    assert lazy_stack(members)._has_non_tensor is True
    assert _Pair(x=torch.zeros(1), s="v", batch_size=[1])._has_non_tensor is True


def test_fast_apply_ignores_nested_keys_unless_named() -> None:
    td = TensorDict({"n": {"b": torch.ones(2)}}, [2])
    out = td._fast_apply(lambda x: x * 2, named=False, nested_keys=True, prefix=("p",))
    assert out["n", "b"].tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="nested_keys and prefix need named=True"):
        td.apply(lambda x: x, nested_keys=True)  # the public spelling still refuses it


def test_check_device_names_the_leaf_off_the_device() -> None:
    td = TensorDict({"n": {"b": torch.zeros(2)}}, [2], device="cpu")
    assert td._check_device() is True
    assert TensorDict({"a": torch.zeros(2)}, [2])._check_device() is True  # no device
    td["n"]._tensordict["b"] = torch.zeros(2, device="meta")  # only a bypass makes it
    with pytest.raises(RuntimeError, match=r"leaf \('n', 'b'\) is on meta, expected cpu"):
        td._check_device()
    assert td._check_device(raise_exception=False) is False


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_private_checks_read_nested_leaves_and_ragged_stacks() -> None:
    # a nested tensor's shape cannot be read, and a ragged stack's leaves do not stack:
    # both raised where upstream answers
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    assert TensorDict({"a": nested}, [2])._check_batch_size() is True
    ragged = torch.nested.nested_tensor([torch.ones(3, 4), torch.ones(5, 4)])
    assert TensorDict({"x": ragged}, [2, -1])._check_batch_size() is True
    members = [TensorDict({"x": torch.zeros(n)}, [n]) for n in (3, 4)]
    assert lazy_stack(members)._has_non_tensor is False
    members[1]["s"] = "text"
    assert lazy_stack(members)._has_non_tensor is True


@pytest.mark.parametrize("td", _collections(), ids=["dense", "lazy", "tensorclass", "locked"])
@pytest.mark.parametrize("spelling", ["apply", "_fast_apply"])
def test_inplace_apply_that_writes_no_leaf_answers_none(td: Any, spelling: str) -> None:
    call = getattr(td, spelling)
    assert call(lambda x: None, inplace=True, filter_empty=True) is None
    assert call(lambda x: None, inplace=True, filter_empty=None) is None
    assert call(lambda x: None, inplace=True, filter_empty=False) is td
    assert call(lambda x: x.mul_(1), inplace=True) is td  # one written leaf is enough
    assert td.apply_(lambda x: None) is td  # apply_ always answers the collection


def test_inplace_apply_writing_nothing_keeps_non_tensor_holders_and_empty_levels() -> None:
    with_text = TensorDict({"a": torch.zeros(2), "s": "text"}, [2])
    assert with_text.apply(lambda x: None, inplace=True) is with_text
    no_leaf = TensorDict({"n": {}}, [])
    assert no_leaf.apply(lambda x: None, inplace=True) is no_leaf  # None asks for a leaf
    assert no_leaf.apply(lambda x: None, inplace=True, filter_empty=True) is None
    seen: list[str] = []
    flat = TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}, [2])
    assert flat.named_apply(lambda k, x: seen.append(k), inplace=True) is None
    assert seen == ["a", "b"]
