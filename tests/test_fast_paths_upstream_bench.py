"""The short paths added where upstream's own benchmarks timed us slower: each gives what
the general path gives (checked against it, or against torch), and bad input still gets
the general path's error."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import MemoryMappedTensor, TensorDict, tensorclass
from tensordict._index import _indexed_shape

_sizes = st.lists(st.integers(0, 4), min_size=1, max_size=3)
_slice = st.builds(
    slice,
    st.one_of(st.none(), st.integers(-6, 6)),
    st.one_of(st.none(), st.integers(-6, 6)),
    st.one_of(st.none(), st.integers(1, 3)),
)


@settings(max_examples=300, deadline=None)
@given(bs=_sizes, data=st.data())
def test_indexed_shape_of_ints_and_slices_matches_torch(bs: list[int], data: Any) -> None:
    n = data.draw(st.integers(1, len(bs)))
    items = []
    for size in bs[:n]:
        ints = st.integers(-size, size - 1) if size else st.nothing()
        items.append(data.draw(st.one_of(ints, _slice) if size else _slice))
    idx = tuple(items)
    expected = torch.zeros(bs)[idx].shape
    assert _indexed_shape("t", idx, idx, torch.Size(bs)) == expected


def test_indexed_shape_still_refuses_an_int_out_of_range() -> None:
    with pytest.raises(IndexError, match="not valid for batch_size"):
        _indexed_shape("t", (5,), (5,), torch.Size([3]))


@pytest.mark.parametrize("index", [1, (2, 1), (slice(None), 1), (slice(0, 3, 2), 0)])
def test_setitem_at_an_index_writes_what_torch_writes(index: Any) -> None:
    td = TensorDict({"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 4)}}, [3, 4])
    value = td[index].clone().apply(lambda x: x + 1)
    td[index] = value
    a, c = torch.zeros(3, 4, 5), torch.zeros(3, 4)
    a[index] = 1
    c[index] = 1
    torch.testing.assert_close(td["a"], a)
    torch.testing.assert_close(td["b", "c"], c)


def test_setitem_with_a_batch_that_does_not_broadcast_is_refused() -> None:
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    with pytest.raises(ValueError, match="Cannot broadcast"):
        td[0] = TensorDict({"a": torch.zeros(3)}, [3])


@tensorclass
class _FastPathPoint:
    x: torch.Tensor


def _nested() -> TensorDict:
    td = TensorDict({"a": {"b": {"c": torch.arange(3)}}, "s": "text"}, [3])
    td["p"] = _FastPathPoint(x=torch.ones(3, 2), batch_size=[3])
    return td


@pytest.mark.parametrize(
    "key", [("a",), ("a", "b"), ("a", "b", "c"), ("p", "x"), (("a", "b"), "c"), ("s",)]
)
def test_get_of_a_tuple_key_is_what_the_general_path_gives(key: Any) -> None:
    td = _nested()
    from tensordict._keys import key_path

    expected = td._get_path(key_path(key, "t"), "t")
    got = td.get(key)
    assert got is expected


def test_get_of_a_missing_or_bad_tuple_key_keeps_its_errors_and_default() -> None:
    td = _nested()
    assert td.get(("a", "zz"), None) is None
    with pytest.raises(KeyError, match="zz"):
        td.get(("a", "zz"))
    with pytest.raises(ValueError, match="empty string"):
        td.get(("a", ""))
    with pytest.raises(KeyError, match="not a nested TensorDict"):
        td.get(("a", "b", "c", "d"))


def test_update_of_plain_tensors_keeps_its_checks() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3])
    td.update({"a": torch.ones(3), "b": torch.ones(3, 2)})
    assert td["a"].sum() == 3 and td["b"].shape == (3, 2)
    with pytest.raises(ValueError, match="'c'"):
        td.update({"c": torch.ones(4)})
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.update({"d": torch.ones(3)})
    with pytest.raises(RuntimeError, match="locked"):  # nor replace one
        td.update({"a": torch.full((3,), 2.0)})
    td.update({"a": torch.full((3,), 2.0)}, inplace=True)  # in place: allowed
    assert td["a"].tolist() == [2.0, 2.0, 2.0]


def test_update_across_batch_sizes_is_still_refused() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3])
    with pytest.raises(RuntimeError, match="update_batch_size"):
        td.update(TensorDict({"a": torch.zeros(4)}, [4]))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 7),
    split=st.one_of(st.integers(1, 8), st.lists(st.integers(0, 4), min_size=1, max_size=4)),
)
def test_split_matches_torch_split(n: int, split: Any) -> None:
    if isinstance(split, list):
        if sum(split) != n:
            split = [*split, n] if n else split
        if sum(split) != n:
            return
    leaf = torch.arange(n * 2).reshape(n, 2)
    td = TensorDict({"a": leaf, "n": {"b": leaf.clone()}, "s": "text"}, [n])
    parts = td.split(split, 0)
    expected = leaf.split(split, 0)
    assert len(parts) == len(expected)
    for part, ref in zip(parts, expected, strict=True):
        assert part.batch_size == ref.shape[:1]
        assert torch.equal(part["a"], ref) and torch.equal(part["n", "b"], ref)
        assert part["s"] == "text"


def test_split_of_a_memory_mapped_leaf_goes_through_its_class() -> None:
    td = TensorDict({"a": torch.arange(6.0)}, [6]).memmap_()
    parts = td.split([2, 4])
    assert [tuple(p["a"].shape) for p in parts] == [(2,), (4,)]
    assert parts[1]["a"].tolist() == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("shape", [(3, 4, 5), (0,), ()])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bool])
def test_empty_and_zeros_in_shared_memory(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    empty = MemoryMappedTensor.empty(shape, dtype=dtype)
    zeros = MemoryMappedTensor.zeros(shape, dtype=dtype)
    for t in (empty, zeros):
        assert isinstance(t, MemoryMappedTensor)
        assert t.shape == shape and t.dtype == dtype and t.is_contiguous()
        assert t.is_shared() and t.filename is None
    assert not zeros.any()
    zeros.fill_(1)
    assert zeros.all()


@pytest.mark.parametrize(("sizes", "kind"), [([-1, 5], RuntimeError), ([True, True, 2], TypeError)])
def test_split_refuses_negative_sizes_and_bools_naming_the_call(sizes: Any, kind: type) -> None:
    with pytest.raises(kind, match="TensorDict.split"):
        TensorDict({"a": torch.zeros(4)}, [4]).split(sizes)


def test_a_swap_is_truthy_though_its_originals_have_no_batch_dims() -> None:
    from torch import nn

    model = nn.Linear(2, 2)
    swap = TensorDict.from_module(model).to_module(model)
    assert bool(swap) and len(swap) == 0
    swap.restore()
