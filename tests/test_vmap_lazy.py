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


def test_tree_map_over_members_of_different_structure() -> None:
    first = TensorDict({"a": torch.zeros(3), "b": torch.zeros(4), "n": {"d": 1.0}}, [])
    second = TensorDict({"b": torch.ones(5), "n": {"d": 2.0}}, [])
    stack = LazyStackedTensorDict.lazy_stack([first, second])
    out = _pytree.tree_map(lambda t: t + 1, stack)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (2,)
    for member, source in zip(out.tensordicts, stack.tensordicts, strict=True):
        assert set(member.keys(True, True)) == set(source.keys(True, True))
        for key in source.keys(True, True):
            torch.testing.assert_close(member.get(key), source.get(key) + 1)
    with pytest.raises(RuntimeError, match="differ in structure"):
        torch.vmap(lambda t: t, 0)(
            LazyStackedTensorDict.lazy_stack(
                [TensorDict({"x": torch.ones(2)}, [2]), TensorDict({"y": torch.ones(2)}, [2])]
            )
        )


@pytest.mark.parametrize(("in_dim", "kept"), [(1, "A"), (0, "B")])
def test_vmap_drops_the_mapped_name_and_puts_none_back(in_dim: int, kept: str) -> None:
    b = TensorDict({"b": torch.randn(3, 5, 4)}, [3, 5], names=["A", "B"])

    def inside(t: TensorDict) -> TensorDict:
        assert t.names == [kept]
        return t.set("c", t["b"] + 1)

    out = torch.vmap(inside, (in_dim,))(b)
    assert out.names == [None, kept]
    torch.testing.assert_close(out["c"], b["b"].movedim(in_dim, 0) + 1)
