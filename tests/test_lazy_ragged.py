"""Lazy stacks of members whose batch sizes differ: -1 at the ragged dims (as upstream)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, lazy_stack
from tensordict._format import FormatError


def _member(n: int, fill: float = 0.0) -> TensorDict:
    return TensorDict(
        {"a": torch.full((3, n, 2), fill), "n": {"b": torch.full((3, n), fill)}}, [3, n]
    )


def _ragged() -> LazyStackedTensorDict:
    """Two members of batch sizes (3, 4) and (3, 5) stacked at dim 1: (3, 2, -1)."""
    return LazyStackedTensorDict(_member(4), _member(5, 1.0), stack_dim=1)


# ------------------------------------------------------------------ construction
@pytest.mark.parametrize(
    ("dim", "shape"), [(-1, (-1, 5, 2)), (-2, (-1, 2, 5)), (-3, (2, -1, 5)), (0, (2, -1, 5))]
)
def test_batch_size_holds_minus_one_at_the_ragged_dim(dim: int, shape: tuple[int, ...]) -> None:
    stacked = lazy_stack([TensorDict(batch_size=(3, 5)), TensorDict(batch_size=(4, 5))], dim)
    assert stacked.batch_size == shape and stacked.shape == shape
    assert [m.batch_size for m in stacked.tensordicts] == [(3, 5), (4, 5)]


def test_members_that_agree_keep_a_plain_batch_size() -> None:
    stacked = lazy_stack([_member(4), _member(4)], 1)
    assert stacked.batch_size == (3, 2, 4) and len(stacked) == 3
    assert stacked.numel() == 24


def test_construction_errors() -> None:
    td0, td1 = TensorDict(batch_size=(3, 5)), TensorDict(batch_size=(4, 5))
    with pytest.raises(RuntimeError, match=r"dim -4 is out of range for a batch of 3 dims"):
        lazy_stack([td0, td1], -4)
    with pytest.raises(
        RuntimeError,
        match=r"batch sizes in tensordicts differs \(the members' number of batch dims "
        r"differ\): member 0 has \(3, 5\), member 2 has \(\)",
    ):
        lazy_stack([td0, td1, TensorDict()])
    with pytest.raises(
        RuntimeError, match=r"batch sizes in tensordicts differs \(strict_shape=True\)"
    ):
        LazyStackedTensorDict(td0, td1, strict_shape=True)
    with pytest.raises(
        RuntimeError,
        match=r"TensorDict.lazy_stack: strict_shape=True: stacking tensordicts requires them "
        r"to have congruent batch sizes; got \(3, 5\) at position 0 and \(4, 5\) at position 1",
    ):
        TensorDict.lazy_stack([td0, td1], strict_shape=True)
    # strict_shape accepts members that agree, and tensors (stacked densely)
    assert TensorDict.lazy_stack([td0, td0], strict_shape=True).batch_size == (2, 3, 5)
    assert TensorDict.lazy_stack([torch.zeros(2)] * 3, strict_shape=True).shape == (3, 2)


def test_append_to_a_ragged_stack() -> None:
    stacked = lazy_stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[4])])
    stacked.append(TensorDict(batch_size=[6]))
    assert stacked.batch_size == (3, -1)
    with pytest.raises(ValueError, match=r"batch size \(6, 1\) differs from the members'"):
        stacked.append(TensorDict(batch_size=[6, 1]))
    plain = lazy_stack([TensorDict(batch_size=[3])] * 2)  # (as upstream: members agree)
    with pytest.raises(ValueError, match=r"batch size \(6,\) differs from the members' \(3,\)"):
        plain.append(TensorDict(batch_size=[6]))


def test_repr_shows_the_ragged_dim() -> None:
    assert "batch_size=[3,2,-1], stack_dim=1" in repr(_ragged())


# ---------------------------------------------------------------------- indexing
def test_indexing_around_and_on_the_ragged_dim() -> None:
    s = _ragged()
    assert s[0].batch_size == (2, -1)
    assert s[:, 1] is s.tensordicts[1]
    assert s[:, :, 0].batch_size == (3, 2)
    assert s[..., 0].batch_size == (3, 2)
    assert torch.equal(s[:, :, 0]["a"], torch.stack([torch.zeros(3, 2), torch.ones(3, 2)], 1))
    assert s[:, :, :2].batch_size == (3, 2, 2)
    assert s[:, :, -2:].batch_size == (3, 2, 2)
    assert torch.equal(s[:, :, -2:].tensordicts[1]["n", "b"], s.tensordicts[1]["n", "b"][:, 3:])
    assert s[:, :, 1:].batch_size == (3, 2, -1)  # still ragged: 3 and 4 entries
    assert s[:, :, [0, 1]].batch_size == (3, 2, 2)
    assert s[:, :, torch.tensor([0, 3])].batch_size == (3, 2, 2)
    assert s[None].batch_size == (1, 3, 2, -1)
    assert s[0:2].batch_size == (2, 2, -1)
    assert s[:, 0:1].batch_size == (3, 1, 4)  # one member: its own batch size
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        s[:, :, 4]  # member 0 has 4 entries there


def test_writes_at_an_index_of_the_ragged_dim_reach_the_members() -> None:
    s = _ragged()
    s[:, :, 0] = TensorDict(
        {"a": torch.full((3, 2, 2), 7.0), "n": {"b": torch.full((3, 2), 7.0)}}, [3, 2]
    )
    assert (s.tensordicts[0]["a"][:, 0] == 7).all() and (s.tensordicts[1]["a"][:, 0] == 7).all()
    assert (s.tensordicts[1]["a"][:, 1:] == 1).all()


def test_a_mask_over_the_ragged_dim_names_it() -> None:
    s = lazy_stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[4])])
    with pytest.raises(
        RuntimeError,
        match=r"LazyStackedTensorDict\[\]: batch dim 1 of the lazy stack \(batch_size "
        r"\(2, -1\)\) is ragged: its members have sizes \[3, 4\] there",
    ):
        s[torch.ones(2, 4, dtype=torch.bool)]


# ------------------------------------------------------------------------ entries
def test_get_of_a_ragged_leaf() -> None:
    s = _ragged()
    with pytest.raises(
        RuntimeError, match=r"key 'a' has shapes \[\(3, 4, 2\), \(3, 5, 2\)\] across members"
    ):
        s.get("a")
    assert [x.shape for x in s.get("a", as_list=True)] == [(3, 4, 2), (3, 5, 2)]
    padded = s.get("a", as_padded_tensor=True, padding_value=-1.0)
    assert padded.shape == (3, 2, 5, 2) and (padded[:, 0, 4] == -1).all()
    assert s.get_item_shape("a") == (3, 2, -1, 2)
    assert s.get("n").batch_size == (3, 2, -1)  # a nested level: a ragged lazy stack too


def test_is_empty_reads_no_ragged_leaf() -> None:
    assert _ragged().is_empty() is False  # (it used to stack the leaves, and raise)
    assert lazy_stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[4])]).is_empty()


def test_to_padded_tensor_pads_the_ragged_dim_to_the_longest_member() -> None:
    padded = _ragged().to_padded_tensor(padding=-1.0)
    assert type(padded) is TensorDict and padded.batch_size == (3, 2, 5)
    assert padded["a"].shape == (3, 2, 5, 2) and (padded["a"][:, 0, 4] == -1).all()
    assert (padded["n", "b"][:, 1] == 1).all()


# ------------------------------------------------------------- member-wise ops
def test_member_wise_operations_keep_the_ragged_dim() -> None:
    s = _ragged()
    for out in (s.apply(lambda x: x + 1), s.clone(), s + 1, s.select("a"), s.exclude("a")):
        assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (3, 2, -1)
        assert [m.batch_size for m in out.tensordicts] == [(3, 4), (3, 5)]
    assert (s.clone() == s).all()
    assert not (s.apply(lambda x: x + 1) == s).any()
    assert s.numel() == 3 * 4 + 3 * 5  # the members' total
    assert s.permute(2, 1, 0).batch_size == (-1, 2, 3)
    assert s.transpose(0, 1).batch_size == (2, 3, -1)
    assert s.unsqueeze(0).batch_size == (1, 3, 2, -1)
    assert s.unsqueeze(0).squeeze(0).batch_size == (3, 2, -1)
    assert [x.batch_size for x in s.unbind(1)] == [(3, 4), (3, 5)]
    assert [x.batch_size for x in s.unbind(0)] == [(2, -1)] * 3
    assert torch.stack([s, s]).batch_size == (2, 3, 2, -1)
    assert s.expand(4, 3, 2, -1).batch_size == (4, 3, 2, -1)


def test_maybe_dense_stack_of_ragged_members_is_lazy() -> None:
    a = lazy_stack([TensorDict(batch_size=[3])] * 2)  # (2, 3)
    b = lazy_stack([TensorDict(batch_size=[2])] * 4, 1)  # (2, 4)
    assert TensorDict.maybe_dense_stack([a, b], 0).batch_size == (2, 2, -1)
    assert TensorDict.maybe_dense_stack([a, b], 2).batch_size == (2, -1, 2)
    with pytest.raises(RuntimeError, match="torch.stack: TensorDicts must share a batch size"):
        torch.stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[4])])  # as upstream


def test_update_batch_size_resizes_a_nested_ragged_stack_in_place() -> None:
    def stack_of(*sizes: int) -> LazyStackedTensorDict:
        members = [TensorDict(r=torch.full((n,), float(n)), batch_size=[n]) for n in sizes]
        return lazy_stack(members, -1)

    dest = TensorDict(s=stack_of(3, 4, 5))
    kept = dest["s"]
    dest.update(TensorDict(s=stack_of(6, 7)), update_batch_size=True)
    assert dest["s"] is kept and kept.batch_size == (-1, 2)
    assert [m.batch_size for m in kept.tensordicts] == [(6,), (7,)]
    assert [x.tolist() for x in kept.get("r", as_list=True)] == [[6.0] * 6, [7.0] * 7]
    # as many members, other sizes: each member takes its own
    dest.update(TensorDict(s=stack_of(2, 3)), update_batch_size=True)
    assert dest["s"] is kept and [m.batch_size for m in kept.tensordicts] == [(2,), (3,)]
    kept.update(stack_of(4, 4), update_batch_size=True)
    assert kept.batch_size == (4, 2)  # the members agree again: no ragged dim


def test_new_empty_empty_lazy_keeps_lazy_stacks_lazy() -> None:
    s = _ragged()
    empty = s.new_empty((4, 6, 1), empty_lazy=True)
    assert isinstance(empty, LazyStackedTensorDict) and empty.is_empty()
    assert empty.batch_size == (4, 6, 1) and empty.stack_dim == 1 and len(empty.tensordicts) == 6
    assert type(s.new_empty((4,), empty_lazy=True)) is TensorDict  # no stack dim left
    inner = lazy_stack(
        [TensorDict(batch_size=[3, 1]), TensorDict(a=torch.ones(3, 1, 2), batch_size=[3, 1])], 1
    )
    parent = TensorDict(s=inner, x=torch.zeros(3, 2), batch_size=[3, 2])
    out = parent.new_zeros((5, 7), empty_lazy=True)
    assert out["x"].shape == (5, 7) and (out["x"] == 0).all()
    # an empty level (stored dense, as any nested stack of agreeing members), no leaves
    assert out["s"].is_empty()
    assert out["s"].batch_size == (5, 7, 1)  # the new batch, then the stack's own dims
    with pytest.raises(
        RuntimeError,
        match=r"TensorDict.new_empty \(key 's'\): batch dim 2 of the lazy stack \(batch_size "
        r"\(3, 2, -1\)\) is ragged",
    ):
        TensorDict(s=s, batch_size=[3, 2]).new_empty((5, 7), empty_lazy=True)


# --------------------------------------------------------------- clear errors
@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("to_tensordict", lambda s: s.to_tensordict()),
        ("contiguous", lambda s: s.contiguous()),
        ("densify", lambda s: s.densify()),
        ("reshape", lambda s: s.reshape(-1)),
        ("view", lambda s: s.view(-1)),
        ("flatten", lambda s: s.flatten(0, 1)),
        ("unflatten", lambda s: s.unflatten(2, (1, 4))),
        ("unbind", lambda s: s.unbind(2)),
        ("split", lambda s: s.split(2, 2)),
        ("chunk", lambda s: s.chunk(2, 2)),
        ("narrow", lambda s: s.narrow(2, 0, 2)),
        ("expand", lambda s: s.expand(3, 2, 5)),
    ],
)
def test_operations_needing_one_size_name_the_ragged_dim(name: str, op: object) -> None:
    with pytest.raises(
        RuntimeError,
        match=rf"LazyStackedTensorDict.{name}: batch dim 2 of the lazy stack \(batch_size "
        r"\(3, 2, -1\)\) is ragged: its members have sizes \[4, 5\] there",
    ):
        op(_ragged())  # type: ignore[operator]


def test_len_and_iteration_over_a_ragged_first_dim() -> None:
    s = lazy_stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[4])], 1)
    assert s.batch_size == (-1, 2)
    with pytest.raises(RuntimeError, match=r"len\(\): batch dim 0 .* sizes \[3, 4\] there"):
        len(s)
    with pytest.raises(RuntimeError, match=r"batch dim 0 of the lazy stack"):
        list(s)  # never an empty iteration
    assert [x.batch_size for x in s.permute(1, 0)] == [(3,), (4,)]


# ------------------------------------------ a TensorDict's -1 (nested tensor leaves)
def _nested() -> torch.Tensor:
    with warnings.catch_warnings():  # torch warns that the strided layout is a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.ones(3, 4, 5), torch.full((3, 6, 5), 2.0)])


def test_a_tensordict_takes_minus_one_for_a_dim_its_nested_leaves_differ_in() -> None:
    td = TensorDict({"nested": _nested()}, batch_size=[2, 3, -1])
    assert td.batch_size == (2, 3, -1)
    with pytest.raises(TypeError, match=r"takes -1 in batch_size for that dim"):
        TensorDict({"nested": _nested()}, batch_size=[2, 3, 4])
    with pytest.raises(ValueError, match=r"shape \(3, 4\) of key 'a' does not start with"):
        TensorDict(a=torch.zeros(3, 4), batch_size=[3, -1])  # a plain leaf has a size there
    with pytest.raises(ValueError, match=r"must not hold negative sizes, got \(2, -2\)"):
        TensorDict(batch_size=[2, -2])
    with pytest.raises(ValueError, match=r"must not hold negative sizes, got \(-1, 3\)"):
        TensorDict(batch_size=[-1, 3])  # dim 0 counts a nested tensor's elements


@pytest.mark.parametrize("mask_key", [None, "mask"])
def test_to_padded_tensor_of_a_ragged_batch_dim(mask_key: str | None) -> None:
    td = TensorDict({"nested": _nested()}, batch_size=[2, 3, -1])
    padded = td.to_padded_tensor(padding=-1.0, mask_key=mask_key)
    assert padded.batch_size == (2, 3, 6) and padded["nested"].shape == (2, 3, 6, 5)
    assert (padded["nested"][0, :, 4:] == -1).all() and (padded["nested"][1] == 2).all()
    if mask_key is not None:
        mask = padded["mask"]
        assert mask.shape == (2, 3, 6) and mask.dtype == torch.bool
        assert mask[0, :, :4].all() and not mask[0, :, 4:].any() and mask[1].all()
        assert (padded["nested"][mask] != -1).all()


@pytest.mark.parametrize("layout", [torch.jagged, torch.strided])
def test_densify_a_ragged_stack_then_pad_it(layout: torch.layout) -> None:
    ones = TensorDict(a=torch.ones(4), batch_size=[4])
    stack = lazy_stack([TensorDict(a=torch.zeros(3), batch_size=[3]), ones])
    dense = stack.densify(layout=layout)
    assert dense.batch_size == (2, -1) and dense["a"].is_nested
    padded = dense.to_padded_tensor(padding=-1.0, mask_key="mask")
    assert padded.batch_size == (2, 4)
    assert padded["a"].tolist() == [[0.0, 0.0, 0.0, -1.0], [1.0, 1.0, 1.0, 1.0]]
    assert padded["mask"].tolist() == [[True, True, True, False], [True] * 4]


def test_to_padded_tensor_mask_of_a_ragged_lazy_stack() -> None:
    s = lazy_stack([TensorDict(a=torch.ones(1, 2), batch_size=[1]), _member_1d(3)])
    padded = s.to_padded_tensor(mask_key="m")
    assert padded["m"].tolist() == [[True, False, False], [True, True, True]]
    with pytest.raises(RuntimeError, match=r"to_padded_tensor: mask_key needs a ragged batch dim"):
        lazy_stack([_member_1d(3), _member_1d(3)]).to_padded_tensor(mask_key="m")


def _member_1d(n: int) -> TensorDict:
    return TensorDict(a=torch.ones(n, 2), batch_size=[n])


# ---------------------------------------------------------------- saving
def test_a_ragged_stack_saves_and_loads(tmp_path: Path) -> None:
    s = _ragged()
    s.memmap(tmp_path / "s")
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert loaded.batch_size == (3, 2, -1)
    assert [m.batch_size for m in loaded.tensordicts] == [(3, 4), (3, 5)]
    assert (loaded == s).all()


@pytest.mark.parametrize(
    ("claimed", "match"),
    [
        ([3, 2, 4], r"member 1 of .* has batch_size \[3, 5\], which does not fit"),
        ([3, -1, -1], r"has a ragged \(-1\) stack dim 1"),
        ([-1, 2, -1], r"has batch_size \[-1, 2, -1\], but its members make \[3, 2, -1\]"),
    ],
)
def test_the_loader_checks_a_ragged_batch_size(
    tmp_path: Path, claimed: list[int], match: str
) -> None:
    _ragged().memmap(tmp_path / "s")
    meta_file = tmp_path / "s" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["batch_size"] = meta["shape"] = claimed
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(FormatError, match=match):
        TensorDict.load_memmap(tmp_path / "s")


def test_a_tensordict_with_minus_one_is_refused_by_the_writer(tmp_path: Path) -> None:
    td = TensorDict({"nested": _nested()}, batch_size=[2, 3, -1])
    with pytest.raises(
        NotImplementedError,
        match=r"TensorDict.memmap: the root has a ragged batch dim \(-1 in batch_size "
        r"\(2, 3, -1\), from nested tensor leaves\)",
    ):
        td.memmap(tmp_path / "t")


# ------------------------------------------------ between two ragged stacks
def _flat(*sizes: int, fill: float = 0.0) -> LazyStackedTensorDict:
    return lazy_stack([TensorDict(x=torch.full((n,), fill), batch_size=[n]) for n in sizes])


@pytest.mark.parametrize("method", ["update", "update_"])
def test_update_between_ragged_stacks_checks_every_member_before_writing(method: str) -> None:
    dest, src = _flat(3, 4), _flat(3, 5, fill=1.0)
    with pytest.raises(
        RuntimeError,
        match=rf"LazyStackedTensorDict.{method}: member 1 of the other operand has batch_size "
        r"\(5,\), member 1 of the lazy stack has \(4,\)",
    ):
        getattr(dest, method)(src)
    assert all((m["x"] == 0).all() for m in dest.tensordicts)  # member 0 left as it was
    getattr(dest, method)(_flat(3, 4, fill=2.0))
    assert all((m["x"] == 2).all() for m in dest.tensordicts)


def test_update_batch_size_reaches_a_dense_level_that_becomes_lazy() -> None:
    def root(*sizes: int, fill: float) -> TensorDict:
        members = [TensorDict(x=torch.full((2, n), fill), batch_size=[2, n]) for n in sizes]
        return TensorDict(n=lazy_stack(members, 1), batch_size=[2])

    dest = root(3, 3, fill=0.0)  # members that agree: stored as a dense level
    with pytest.raises(RuntimeError, match=r"update_batch_size must be set to True"):
        dest.update(root(4, 5, fill=1.0))
    dest.update(root(4, 5, fill=1.0), update_batch_size=True)
    n = dest["n"]
    assert isinstance(n, LazyStackedTensorDict) and n.batch_size == (2, 2, -1)
    assert [m["x"].tolist() for m in n.tensordicts] == [[[1.0] * 4] * 2, [[1.0] * 5] * 2]


def test_a_non_tensor_value_in_a_tensordict_with_minus_one() -> None:
    td = TensorDict(x=_nested(), s="hi", batch_size=[2, 3, -1])
    assert td["s"] == "hi" and td.get("s").batch_size == (2, 3, -1)
    td.set("t", "there")
    assert td["t"] == "there" and td.get("t").batch_size == (2, 3, -1)
    with pytest.raises(
        RuntimeError, match=r"NonTensorData.tolist: batch_size \(2, 3, -1\) holds a ragged"
    ):
        td.get("s").tolist()
    with pytest.raises(ValueError, match=r"NonTensorData: batch_size must not hold negative"):
        NonTensorData("hi", batch_size=[-1, 2])  # -1 is never the first dim


def test_numel_and_shape_ops_of_a_tensordict_with_minus_one() -> None:
    td = TensorDict(x=_nested(), batch_size=[2, 3, -1])  # elements (3, 4, 5) and (3, 6, 5)
    assert td.numel() == 3 * 4 + 3 * 6
    ragged = r"batch dim 2 is ragged \(-1 in batch_size \(2, 3, -1\)\): the elements of the"
    for call, op in [
        ("reshape", lambda: td.reshape(-1)),
        ("view", lambda: td.view(-1)),
        ("flatten", lambda: td.flatten(1, 2)),
        ("unbind", lambda: td.unbind(2)),
    ]:
        with pytest.raises(RuntimeError, match=rf"TensorDict.{call}: {ragged}"):
            op()
    with pytest.raises(RuntimeError, match=r"TensorDict.unbind: batch dim 0 is ragged"):
        td.tolist()  # (down to the elements of the ragged dim)
    with pytest.raises(ValueError, match=r"holds -1 \(a ragged dim\) but no nested tensor leaf"):
        TensorDict({}, [2, -1])
    with pytest.raises(ValueError, match=r"holds -1 \(a ragged dim\) but no nested tensor leaf"):
        TensorDict(s="hi", batch_size=torch.Size([2, -1]))
    nested = TensorDict(n=td, batch_size=[2, 3, -1])  # a nested level gives the -1
    assert nested.numel() == td.numel()


@pytest.mark.parametrize(
    "index",
    [
        (slice(None), torch.ones(3, dtype=torch.bool)),
        (Ellipsis, torch.ones(4, dtype=torch.bool)),
        (slice(None), np.ones(3, dtype=bool)),
    ],
)
def test_a_one_dim_mask_on_the_ragged_dim_names_it(index: tuple[object, ...]) -> None:
    s = lazy_stack([TensorDict(batch_size=[3]), TensorDict(batch_size=[4])])
    with pytest.raises(
        RuntimeError,
        match=r"LazyStackedTensorDict\[\]: batch dim 1 of the lazy stack \(batch_size "
        r"\(2, -1\)\) is ragged: its members have sizes \[3, 4\] there",
    ):
        s[index]
    assert s[:, torch.tensor([0, 2])].batch_size == (2, 2)  # indices: member by member


# ------------------------------------------- shape ops on a stack with a ragged dim
def _s3() -> LazyStackedTensorDict:
    """Members (3, 5) and (4, 5) of arange values stacked at dim 1: (-1, 2, 5)."""
    members = [TensorDict(x=torch.arange(n * 5.0).view(n, 5), batch_size=[n, 5]) for n in (3, 4)]
    return lazy_stack(members, 1)


def test_repeat_unflatten_roll_go_member_by_member_off_the_ragged_dim() -> None:
    s3 = _s3()
    out = s3.repeat(1, 1, 2)
    assert out.batch_size == (-1, 2, 10)
    assert [m["x"].tolist() for m in out.tensordicts] == [
        m["x"].repeat(1, 2).tolist() for m in s3.tensordicts
    ]
    out = s3.repeat(2, 2, 1)  # the ragged dim tiles each member's own size; members tile
    assert [m.batch_size for m in out.tensordicts] == [(6, 5), (8, 5), (6, 5), (8, 5)]
    out = s3.unflatten(2, (5, 1))
    assert out.batch_size == (-1, 2, 5, 1)
    assert [m.batch_size for m in out.tensordicts] == [(3, 5, 1), (4, 5, 1)]
    out = s3.roll(1, 2)
    assert out.batch_size == (-1, 2, 5)
    assert out.tensordicts[1]["x"][0].tolist() == [4.0, 0.0, 1.0, 2.0, 3.0]
    out = s3.roll(1, 1)  # the stack dim rotates the members (copies, as any roll)
    assert [m.batch_size for m in out.tensordicts] == [(4, 5), (3, 5)]
    assert out.tensordicts[0]["x"].data_ptr() != s3.tensordicts[1]["x"].data_ptr()
    ragged = r"batch dim 0 of the lazy stack \(batch_size \(-1, 2, 5\)\) is ragged"
    with pytest.raises(RuntimeError, match=rf"LazyStackedTensorDict.unflatten: {ragged}"):
        s3.unflatten(0, (3, 1))
    with pytest.raises(RuntimeError, match=rf"LazyStackedTensorDict.roll: {ragged}"):
        s3.roll(1, 0)


def test_ops_needing_a_size_at_the_ragged_dim_name_it_not_torch() -> None:
    s3 = _s3()
    ragged = r"batch dim 0 is ragged \(-1 in batch_size \(-1, 2, 5\)\): this needs one size"
    with pytest.raises(RuntimeError, match=rf"LazyStackedTensorDict.gather: {ragged}"):
        s3.gather(2, torch.zeros(3, 2, 2, dtype=torch.long))
    with pytest.raises(
        RuntimeError, match=r"pad: batch dim 0 of the lazy stack \(batch_size \(-1, 2, 5\)\)"
    ):
        s3.pad([0, 0, 0, 0, 0, 1])
    td = TensorDict(x=_nested(), batch_size=[2, 3, -1])
    assert td[0].batch_size == (3, -1)  # ints and slices before the ragged dim: no probe
    with pytest.raises(
        IndexError, match=r"TensorDict\[\] \(index .*\): batch dim 2 is ragged \(-1 in batch_size"
    ):
        td[:, :, 0]


# ------------------------------------------------------------ to_padded_tensor
def test_to_padded_tensor_of_a_stack_of_ragged_stacks() -> None:
    def rs(a: int, b: int) -> LazyStackedTensorDict:
        return lazy_stack([TensorDict(x=torch.ones(a)), TensorDict(x=torch.ones(b))])

    out = lazy_stack([rs(2, 3), rs(4, 1)]).to_padded_tensor()
    assert out.batch_size == (2, 2)
    assert out["x"].sum(-1).tolist() == [[2.0, 3.0], [4.0, 1.0]] and out["x"].shape[-1] == 4


def test_to_padded_tensor_keeps_non_tensor_entries_and_refuses_partial_keys() -> None:
    s = lazy_stack(
        [
            TensorDict(x=torch.ones(2), s="a", n=TensorDict(t="u")),
            TensorDict(x=torch.ones(3), s="b", n=TensorDict(t="v")),
        ]
    )
    out = s.to_padded_tensor()
    assert out["s"] == ["a", "b"] and out["n", "t"] == ["u", "v"]
    partial = lazy_stack(
        [TensorDict(x=torch.ones(2), y=torch.ones(1)), TensorDict(x=torch.ones(3))]
    )
    with pytest.raises(KeyError, match=r"to_padded_tensor: keys \['y'\] are held by some"):
        partial.to_padded_tensor()
    ragged = lazy_stack([TensorDict(s="a", batch_size=[2]), TensorDict(s="b", batch_size=[3])])
    with pytest.raises(RuntimeError, match=r"non-tensor entries \['s'\] cannot be padded"):
        ragged.to_padded_tensor()
