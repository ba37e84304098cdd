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


def _members() -> list[Any]:
    return [
        TensorDict(
            a=torch.arange(6.0).reshape(2, 3) + i,
            b=TensorDict(c=torch.ones(2, 1), batch_size=[2]),
            batch_size=[2],
        )
        for i in range(3)
    ]


@pytest.mark.parametrize("sd", [0, 1])
@pytest.mark.parametrize(
    "at",
    [slice(0, 0), torch.zeros(3, dtype=torch.bool), torch.tensor([], dtype=torch.long), []],
    ids=["slice", "mask", "long", "list"],
)
def test_selecting_no_member_keeps_the_structure(sd: int, at: Any) -> None:
    tds = _members()
    dense = torch.stack(tds, sd)
    lazy = LazyStackedTensorDict.lazy_stack(tds, sd)
    index = (slice(None),) * sd + (at,)
    expected = dense[index]
    got = lazy[index]
    assert got.batch_size == expected.batch_size
    assert sorted(map(str, got.keys(True, True))) == sorted(map(str, expected.keys(True, True)))
    for key in expected.keys(True, True):
        torch.testing.assert_close(got[key], expected[key])
    # the empty result goes on like the dense one
    torch.testing.assert_close(got[..., :0]["a"], expected[..., :0]["a"])
    torch.testing.assert_close((got + 1)["b", "c"], (expected + 1)["b", "c"])
    assert torch.stack([got, got], 0)["a"].shape == torch.stack([expected, expected], 0)["a"].shape
    torch.testing.assert_close(torch.cat([got, lazy], sd)["a"], dense["a"])
    assert got.to_dict()["b"]["c"].shape == expected["b", "c"].shape


def test_selecting_no_member_of_a_heterogeneous_stack_keeps_the_common_keys() -> None:
    tds = _members()
    tds[1]["x"] = torch.zeros(2)
    tds[0]["y"] = torch.zeros(2)
    got = LazyStackedTensorDict.lazy_stack(tds, 0)[:0]
    assert sorted(map(str, got.keys(True, True))) == ["('b', 'c')", "a"]
    assert got["a"].shape == (0, 2, 3)


def test_get_on_a_stack_without_members_raises_key_error() -> None:
    empty = LazyStackedTensorDict(stack_dim=0, batch_size=[0, 2])
    with pytest.raises(KeyError, match="LazyStackedTensorDict.get: key 'a': the stack has no"):
        empty.get("a")


def _scalar_td(shift: float = 0.0) -> Any:
    return TensorDict(
        a=torch.arange(3.0) + shift,
        s=torch.tensor(2.0 + shift),
        b=TensorDict(c=torch.ones(2, 2) + shift),
        batch_size=[],
    )


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("lazy", [False, True], ids=["dense", "lazy"])
def test_zero_dim_masks_like_torch(flag: bool, lazy: bool) -> None:
    mask = torch.tensor(flag)
    if lazy:  # members of batch_size [] see a 0-d mask each
        td = LazyStackedTensorDict.lazy_stack([_scalar_td(), _scalar_td(1.0)], 0)
        mask = torch.stack([mask, ~mask])
    else:
        td = _scalar_td()
    results = {
        "where": (td.where(mask, 0.5), lambda x, m: torch.where(m, x, 0.5)),
        "torch.where": (torch.where(mask, td, -td), lambda x, m: torch.where(m, x, -x)),
        "masked_fill": (td.masked_fill(mask, 7.0), lambda x, m: x.masked_fill(m, 7.0)),
        "masked_fill_": (td.clone().masked_fill_(mask, 7.0), lambda x, m: x.masked_fill(m, 7.0)),
    }
    for got, op in results.values():
        for key in td.keys(True, True):
            leaf = td[key]
            m = mask.reshape(mask.shape + (1,) * (leaf.ndim - mask.ndim))
            torch.testing.assert_close(got[key], op(leaf, m), rtol=0, atol=0)


def test_zero_dim_mask_on_a_lazy_stack_broadcasts() -> None:
    td = LazyStackedTensorDict.lazy_stack([_scalar_td(), _scalar_td(1.0)], 0)
    got = td.where(torch.tensor(False), 0.5)
    for key in td.keys(True, True):
        torch.testing.assert_close(got[key], torch.full_like(td[key], 0.5))


def test_nested_without_batch_size_is_refined_to_the_parents() -> None:
    e = torch.ones(2)
    td = TensorDict(b=TensorDict(c=torch.zeros(2), d=TensorDict(e=e)), batch_size=[2])
    assert td["b"].batch_size == (2,) and td["b", "d"].batch_size == (2,)
    torch.testing.assert_close(td["b", "d", "e"], e)
    assert td[1]["b", "d", "e"] == e[1]


def test_batch_size_setter_refines_nested_prefixes() -> None:
    td = TensorDict(
        c=torch.zeros(2, 3),
        d=TensorDict(e=torch.ones(2, 3), f=TensorDict(g=torch.ones(2, 3, 4))),
        h=TensorDict(i=torch.ones(2, 3, 5), batch_size=[2]),
    )
    td.batch_size = [2, 3]
    assert td["d"].batch_size == td["d", "f"].batch_size == td["h"].batch_size == (2, 3)
    assert td[1, 2]["d", "f", "g"].shape == (4,)


def test_nested_refinement_refused_by_a_leaf_names_it() -> None:
    with pytest.raises(
        RuntimeError,
        match=r"TensorDict: the TensorDict at key 'b' \(batch_size \(\)\) cannot "
        r"take batch_size \(2,\): shapes of \('b', 'd', 'e'\) \(3,\) do not start with it",
    ):
        TensorDict(b=TensorDict(c=torch.zeros(2), d=TensorDict(e=torch.ones(3))), batch_size=[2])
    td = TensorDict(c=torch.zeros(2, 3), d=TensorDict(e=torch.ones(2)))
    with pytest.raises(
        ValueError, match=r"batch_size: cannot set batch_size \(2, 3\): shapes of \('d', 'e'\) "
    ):
        td.batch_size = [2, 3]
    assert td.batch_size == () and td["d"].batch_size == ()


def _stackable() -> list[Any]:
    return [
        TensorDict(
            a=torch.full((3,), float(i)),
            b=TensorDict(c=torch.full((3, 2), float(i)), batch_size=[3]),
            batch_size=[3],
        )
        for i in range(2)
    ]


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("lazy_out", [False, True])
def test_stack_writes_into_out(dim: int, lazy_out: bool) -> None:
    tds = _stackable()
    expected = torch.stack(tds, dim)
    out = expected.clone().zero_()
    if lazy_out:
        out = LazyStackedTensorDict.lazy_stack(list(out.unbind(0)), 0)
    leaf = out.get("a", as_list=True)[-1] if lazy_out else out["a"]
    assert torch.stack(tds, dim, out=out) is out
    assert TensorDict.stack(tds, dim, out=out) is out
    for key in expected.keys(True, True):
        torch.testing.assert_close(out[key], torch.stack([td[key] for td in tds], dim % 2))
    assert leaf.abs().sum() > 0  # written into out's own tensors


def test_stack_out_mismatches_raise() -> None:
    tds = _stackable()
    with pytest.raises(RuntimeError, match=r"torch.stack: out has batch_size \(2, 3\), the result"):
        torch.stack(tds, 1, out=torch.stack(tds, 0))
    with pytest.raises(KeyError, match=r"torch.stack: out lacks the keys \['a'\] of the result"):
        torch.stack(tds, 0, out=torch.stack(tds, 0).exclude("a"))
    with pytest.raises(TypeError, match="torch.stack: out must be a TensorDict, got Tensor"):
        torch.stack(tds, 0, out=torch.zeros(2, 3))
    with pytest.raises(KeyError, match=r"torch.cat: out lacks the keys \['a'\] of the result"):
        torch.cat(tds, 0, out=torch.cat(tds, 0).exclude("a"))


def test_cat_classmethod_takes_out() -> None:
    tds = _stackable()
    out = torch.cat(tds, 0).zero_()
    assert TensorDict.cat(tds, 0, out=out) is out
    torch.testing.assert_close(out["b", "c"], torch.cat([td["b", "c"] for td in tds], 0))


def _apply_src() -> Any:
    return TensorDict(
        a=torch.zeros(2),
        b=TensorDict(c=torch.ones(2), batch_size=[2]),
        e=TensorDict(batch_size=[2]),
        batch_size=[2],
    )


def _keys(td: Any) -> list[str]:
    return sorted(map(str, td.keys(True)))


@pytest.mark.parametrize("lazy", [False, True], ids=["dense", "lazy"])
def test_apply_filter_empty_rules(lazy: bool) -> None:
    src = _apply_src()
    if lazy:
        src = LazyStackedTensorDict.lazy_stack([src.clone(), src.clone()], 0)
    none: Any = lambda x: None  # noqa: E731
    only_a: Any = lambda x: x if x.sum() == 0 else None  # noqa: E731
    # None (the default): levels emptied by dropped leaves go, empty ones stay
    assert _keys(src.apply(none)) == ["e"]
    flat = src.exclude("e")
    assert flat.apply(none) is None and flat.apply(none, filter_empty=None) is None
    assert flat.named_apply(lambda k, x: None) is None
    assert _keys(src.apply(only_a)) == ["a", "e"]
    # True: every empty level goes
    assert src.apply(none, filter_empty=True) is None
    assert _keys(src.apply(lambda x: x, filter_empty=True)) == ["('b', 'c')", "a", "b"]
    # False: every level stays
    kept = src.apply(none, filter_empty=False)
    assert kept is not None and _keys(kept) == ["b", "e"]
    # out= and others follow the same rule
    assert flat.apply(none, out=flat.clone()) is None
    assert flat.apply(lambda x, y: None, flat) is None


def test_apply_on_an_empty_td() -> None:
    empty = TensorDict(batch_size=[2])
    got = empty.apply(lambda x: None)
    assert got is not None and got.batch_size == (2,) and not list(got.keys())
    assert empty.apply(lambda x: x, filter_empty=True) is None


def test_memmap_into_an_existing_target_is_a_runtime_error_too(tmp_path: Any) -> None:
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    td.memmap(tmp_path / "x")
    with pytest.raises(RuntimeError, match=r"TensorDict.memmap: .* exists \(pass existsok=True"):
        td.memmap(tmp_path / "x", existsok=False)
    with pytest.raises(FileExistsError, match=r"TensorDict.memmap_like: .* exists"):
        td.memmap_like(tmp_path / "x", existsok=False)
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "f").write_text("")
    with pytest.raises(RuntimeError, match="holds files and is not a checkpoint"):
        td.memmap(tmp_path / "y")
    (tmp_path / "z").write_text("")
    with pytest.raises(RuntimeError, match="exists and is not a folder"):
        td.memmap(tmp_path / "z")
    with pytest.raises(RuntimeError, match="exists and is not an archive file"):
        td.memmap(tmp_path / "x", archive=True)


_NEW_DIM_INDICES = [
    (None,),
    (None, 1),
    (1, None, 0),
    (Ellipsis, None),
    (None, Ellipsis, None),
    (slice(None), None),
    (None, slice(None), 0),
    (0, None),
    (None, None),
    (None, torch.tensor([0, 1])),
    (None, 1, None),
    (slice(None), None, torch.tensor([1, 0])),
]


@pytest.mark.parametrize("sd", [0, 1])
@pytest.mark.parametrize("index", _NEW_DIM_INDICES, ids=str)
def test_new_dims_keep_a_heterogeneous_stack_lazy(sd: int, index: Any) -> None:
    members = [
        TensorDict(x=torch.arange(6.0).reshape(2, 3) + 10 * i, batch_size=[2]) for i in range(3)
    ]
    members[1]["y"] = torch.zeros(2)  # the members differ in keys: no dense form
    lazy = LazyStackedTensorDict.lazy_stack(members, sd)
    expected = torch.stack([m["x"] for m in members], sd)[(*index, slice(None))]
    got = lazy[index]
    assert got.batch_size == expected.shape[:-1]
    torch.testing.assert_close(got["x"], expected, rtol=0, atol=0)
    if isinstance(got, LazyStackedTensorDict):  # each member keeps its own keys
        assert sum("y" in m.keys() for m in got.tensordicts) <= 1


def _hetero_pair() -> tuple[Any, Any, Any]:
    td0 = TensorDict(a=torch.zeros(3), b=torch.zeros(4), c=TensorDict(d=torch.zeros(())))
    td1 = TensorDict(b=torch.ones(5), c=TensorDict(d=torch.ones(())), a=torch.ones(3))
    return LazyStackedTensorDict.lazy_stack([td0, td1]), td0, td1


def test_stacking_lazy_stacks_pairs_their_members_when_they_agree() -> None:
    td_a, _, _ = _hetero_pair()
    td_b = td_a.clone()
    out = torch.stack([td_a, td_b], 0)
    assert out.stack_dim == 1 and all(type(m) is TensorDict for m in out.tensordicts)
    for i in range(2):
        torch.testing.assert_close(out[:, i]["b"], torch.stack([td_a[i]["b"], td_b[i]["b"]]))


def test_stacking_lazy_stacks_that_differ_keeps_them_whole() -> None:
    td_a, td0, _ = _hetero_pair()
    td_b = td_a.clone()
    del td0["a"]  # td_a's first member lacks "a" now, td_b's does not
    out = torch.stack([td_a, td_b], 0)
    assert out.stack_dim == 0
    assert out.tensordicts[0] is td_a and out.tensordicts[1] is td_b
    torch.testing.assert_close(out[1, 1]["b"], td_b[1]["b"])
    assert "a" not in out[0, 0].keys() and "a" in out[1, 0].keys()


def test_lazy_keys_take_nested_keys_in_any_nesting() -> None:
    members = [TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])] * 2
    keys = LazyStackedTensorDict.lazy_stack(members, 0).keys(True)
    assert ("n", ("b",)) in keys and ("n", "b") in keys and ("a",) in keys and "a" in keys
    assert "z" not in keys and ("n", "z") not in keys and (1, 2) not in keys
    assert keys == ["a", "n", ("n", "b")]  # still the list it was


def test_setting_a_lazy_stacks_batch_size_takes_only_the_size_it_has() -> None:
    # as upstream: the members make the batch size, so another one is a RuntimeError (it
    # was Python's AttributeError for a property without a setter); the same one is a no-op
    lazy = LazyStackedTensorDict.lazy_stack([TensorDict({"a": torch.zeros(3)}, [3])] * 2)
    lazy.batch_size = (2, 3)
    assert lazy.batch_size == (2, 3)
    for bad in ([2], [2, 3, 1], "x"):
        with pytest.raises(RuntimeError, match=r"cannot set batch size .* of batch size \[2, 3\]"):
            lazy.batch_size = bad
    assert lazy.batch_size == (2, 3)


@pytest.mark.parametrize("key", [("a", "x"), ("n", "b", "c")])
def test_a_lazy_stacks_key_through_a_leaf_is_the_dual_error(key: tuple[str, ...]) -> None:
    # as a TensorDict's: a KeyError, and the ValueError upstream raises (it was a plain
    # KeyError saying the key is missing from the members)
    member = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3])
    lazy = LazyStackedTensorDict.lazy_stack([member, member.clone()])
    for read in (lazy.get, lazy.__getitem__):
        with pytest.raises(ValueError, match=r"LazyStackedTensorDict.get: key .* holds a Tensor"):
            read(key)
    with pytest.raises(KeyError, match="missing from members"):
        lazy.get(("n", "zz"))
    assert lazy.get(key, None) is None
