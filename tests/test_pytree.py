"""Pytree rebuilds of TensorDicts: the batch size a rebuilt collection gets."""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import TensorDict
from tensordict import _pytree as tdpytree


def _nested() -> TensorDict:
    return TensorDict(
        {"a": torch.randn(3, 4), "sub": {"b": torch.zeros(3, 2, dtype=torch.int64)}},
        [3],
        names=["n"],
    )


def test_elementwise_tree_map_keeps_everything() -> None:
    td = _nested().lock_()
    out = pytree.tree_map(lambda t: t + 1, td)
    assert out.batch_size == (3,)
    assert out.names == ["n"]
    assert out.is_locked
    assert out["sub"].batch_size == (3,)
    torch.testing.assert_close(out["a"], td["a"] + 1)
    torch.testing.assert_close(out["sub", "b"], td["sub", "b"] + 1)


def test_rebuild_with_non_tensor_leaves_keeps_the_batch_size() -> None:
    # vmap rebuilds the input structure with its in_dims (ints) as leaves
    td = _nested()
    leaves, spec = pytree.tree_flatten(td)
    out = pytree.tree_unflatten([0] * len(leaves), spec)
    assert out.batch_size == (3,)
    assert out["sub"].batch_size == (3,)
    assert out["a"] == 0


def test_leaves_losing_a_dim_shrink_the_batch() -> None:
    td = TensorDict({"a": torch.randn(3, 4, 5)}, [3, 4])
    out = pytree.tree_map(lambda t: t.sum(-1), td)
    assert out.batch_size == (3,)
    torch.testing.assert_close(out["a"], td["a"].sum(-1))


def test_one_leaf_changed_takes_the_general_rule() -> None:
    td = TensorDict({"a": torch.randn(3, 4), "b": torch.randn(3, 4)}, [3, 4])
    leaves, spec = pytree.tree_flatten(td)
    out = pytree.tree_unflatten([leaves[0], leaves[1][:, :2]], spec)
    assert out.batch_size == (3,)  # what the two leaves still share


_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    batch=_shapes,
    extras=st.lists(_shapes, min_size=1, max_size=3),
    changes=st.lists(st.sampled_from(["same", "drop", "grow", "int"]), min_size=3, max_size=3),
)
def test_fast_rule_agrees_with_the_general_rule(
    batch: list[int], extras: list[list[int]], changes: list[str]
) -> None:
    """Wherever the shortcut for unchanged leaves applies, the general rule gives the
    same batch size."""
    bs = torch.Size(batch)
    originals = [torch.zeros((*bs, *extra)) for extra in extras]
    ndims = [t.ndim for t in originals]
    values: list[object] = []
    for t, change in zip(originals, changes, strict=False):
        if change == "drop" and t.ndim:
            values.append(t[0])
        elif change == "grow":
            values.append(t.unsqueeze(0))
        elif change == "int":
            values.append(0)
        else:
            values.append(t)
    tensors = tuple(True for _ in originals)
    if tdpytree._unchanged(values, ndims, bs):
        general = (
            bs
            if tdpytree._keeps_batch_size(values, ndims, tensors, bs)
            else tdpytree._recomputed_batch_size(values, ndims, tensors, bs)
        )
        assert general == bs
