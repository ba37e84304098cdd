"""vmap and pytree round trips of lazy stacks, and a one-element out_dims tuple."""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree

from tensordict import LazyStackedTensorDict, TensorDict


def _stack(stack_dim: int) -> LazyStackedTensorDict:
    members = [
        TensorDict({"a": torch.randn(3, 4), ("n", "b"): torch.randn(3)}, [3]) for _ in range(2)
    ]
    return LazyStackedTensorDict.lazy_stack(members, stack_dim)


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_tree_map_keeps_a_lazy_stack(stack_dim: int) -> None:
    x = _stack(stack_dim)
    out = _pytree.tree_map(lambda t: t * 2, x)
    assert isinstance(out, LazyStackedTensorDict)
    assert out.stack_dim == stack_dim and out.batch_size == x.batch_size
    for key in (("a",), ("n", "b")):
        torch.testing.assert_close(out.get(key), x.get(key) * 2)


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("in_dim", [0, 1])
@pytest.mark.parametrize("out_dim", [0, 1])
def test_vmap_over_a_lazy_stack_matches_torch(stack_dim: int, in_dim: int, out_dim: int) -> None:
    x = _stack(stack_dim)
    y = x.clone()

    def add(p: LazyStackedTensorDict, q: LazyStackedTensorDict) -> LazyStackedTensorDict:
        return p.set("a", p.get("a") + q.get("a"))

    out = torch.vmap(add, (in_dim, in_dim), (out_dim,))(x, y)
    assert isinstance(out, LazyStackedTensorDict)
    expected = torch.vmap(torch.add, (in_dim, in_dim), out_dim)(x.get("a"), y.get("a"))
    torch.testing.assert_close(out.get("a"), expected)
    assert out.shape[out_dim] == x.shape[in_dim]


def test_vmap_out_dims_one_tuple_on_a_tensordict_matches_an_int() -> None:
    td = TensorDict({"a": torch.randn(4, 3)}, [4])
    by_tuple = torch.vmap(lambda t: t * 2, 0, (1,))(td)
    by_int = torch.vmap(lambda t: t * 2, 0, 1)(td)
    torch.testing.assert_close(by_tuple["a"], by_int["a"])
    torch.testing.assert_close(by_tuple["a"], (td["a"] * 2).T)
    with pytest.raises(ValueError, match="out_dims is not compatible"):
        torch.vmap(lambda t: (t, t), 0, (0,))(td)  # a tuple output still needs its own dims
