"""Lazy stacks against the dense TensorDict they stack, for cases a differential hunt found."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def _pair(bs: tuple[int, ...], feats: list[tuple[int, ...]], sd: int) -> tuple[Any, Any]:
    leaves = {
        f"x{k}": torch.arange(float(torch.Size(bs + f).numel())).reshape(*bs, *f)
        for k, f in enumerate(feats)
    }
    dense = TensorDict(leaves, batch_size=bs)
    lazy = LazyStackedTensorDict.lazy_stack(list(dense.clone().unbind(sd)), sd)
    return dense, lazy


_LAYOUTS = [
    ((3,), [(2,)], 0),
    ((3,), [(), (2,)], 0),
    ((3,), [(3,)], 0),
    ((3, 3), [(), (2,)], 0),
    ((3, 3), [(), (2,), (3, 3)], 1),
    ((3, 3), [(3,)], 1),
]
_INDICES = [
    (),
    slice(None),
    Ellipsis,
    0,
    slice(0, 2),
    [0, 2],
    torch.tensor([2, 0]),
    (slice(None), 0),
    (0, slice(None)),
    (slice(0, 2), 1),
    (Ellipsis, 0),
]
_VALUES = [(), (1,), (2,), (3,), (2, 1), (3, 3), (1, 3), (2, 3), (3, 2), (3, 3, 2), (1, 2)]


@pytest.mark.parametrize(("bs", "feats", "sd"), _LAYOUTS)
@pytest.mark.parametrize("index", _INDICES, ids=str)
def test_setitem_tensor_aligns_with_each_leaf_like_dense(
    bs: tuple[int, ...], feats: list[tuple[int, ...]], sd: int, index: Any
) -> None:
    for vshape in _VALUES:
        dense, lazy = _pair(bs, feats, sd)
        value = torch.arange(100.0, 100.0 + torch.Size(vshape).numel()).reshape(vshape)
        try:
            dense[index] = value
        except (RuntimeError, IndexError):
            with pytest.raises((RuntimeError, IndexError)):
                lazy[index] = value
            continue
        lazy[index] = value
        for key in dense.keys():
            torch.testing.assert_close(lazy[key], dense[key], rtol=0, atol=0)


def test_setitem_tensor_hunt_repro() -> None:
    td = TensorDict(a=torch.zeros(2, 2), batch_size=[2])
    for index in [(), slice(None)]:
        s = LazyStackedTensorDict.lazy_stack(list(td.clone().unbind(0)), 0)
        s[index] = torch.tensor([3.0, 4.0])
        assert s["a"].tolist() == [[3.0, 4.0], [3.0, 4.0]]
    s = LazyStackedTensorDict.lazy_stack([TensorDict(a=torch.zeros(2), batch_size=[])] * 3, 0)
    s = s.clone()
    s[:] = torch.tensor([3.0, 4.0])
    assert s["a"].tolist() == [[3.0, 4.0]] * 3


def test_setitem_tensor_mask_like_dense() -> None:
    dense, lazy = _pair((3, 2), [(), (2,)], 0)
    mask = torch.tensor([True, False, True])
    for value in [torch.tensor(7.0), torch.tensor([5.0, 6.0]), torch.ones(2, 1)]:
        dense[mask] = value
        lazy[mask] = value
        for key in dense.keys():
            torch.testing.assert_close(lazy[key], dense[key], rtol=0, atol=0)


def test_setitem_tensor_mismatch_at_stack_dim_raises() -> None:
    _, lazy = _pair((3,), [()], 0)
    with pytest.raises(RuntimeError, match=r"LazyStackedTensorDict\[\]=: shape mismatch.*'x0'"):
        lazy[:] = torch.ones(2)
