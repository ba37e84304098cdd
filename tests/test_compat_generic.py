"""Upstream-compatible semantics of generic TensorDict methods (issue 13, tier-A generic/misc)."""

from __future__ import annotations

import pytest
import torch
from torch.func import hessian, jacfwd, jacrev

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    is_leaf_nontensor,
    lazy_stack,
    make_tensordict,
    pad,
)


def _nested() -> TensorDict:
    return TensorDict(
        a=torch.randn(3, 4, 5, 6),
        b=TensorDict(c=torch.randn(3, 4, 5, 6, 7), d=torch.randn(3, 4, 5), batch_size=(3, 4, 5)),
        f=torch.randn(3, 4),
        batch_size=(3, 4),
    )


@pytest.mark.parametrize("op", ["sum", "mean", "nansum", "nanmean", "amax"])
def test_feature_reduction_keeps_nested_batch(op: str) -> None:
    td = _nested()
    out = getattr(td, op)(dim="feature")
    assert out.batch_size == (3, 4) and out["b"].batch_size == (3, 4, 5)
    fn = getattr(torch, op)
    torch.testing.assert_close(out["a"], fn(td["a"].flatten(2), dim=-1))
    torch.testing.assert_close(out["b", "c"], fn(td["b", "c"].flatten(3), dim=-1))
    torch.testing.assert_close(out["b", "d"], fn(td["b", "d"].unsqueeze(-1), dim=-1))
    torch.testing.assert_close(out["f"], fn(td["f"].unsqueeze(-1), dim=-1))


def test_feature_quantile_keeps_nested_batch() -> None:
    td = _nested()
    out = td.quantile(0.5, dim="feature")
    assert out["b"].batch_size == (3, 4, 5)
    torch.testing.assert_close(out["b", "c"], td["b", "c"].flatten(3).quantile(0.5, -1))


@pytest.mark.parametrize("op", ["sum", "mean", "std", "amin"])
def test_reduce_true_over_a_batch_dim_keeps_features(op: str) -> None:
    a, c = torch.randn(3, 4, 5), torch.randn(3, 4, 5)
    td = TensorDict(a=a, b=TensorDict(c=c, batch_size=(3, 4, 5)), batch_size=(3, 4))
    out = getattr(td, op)(dim=1, reduce=True)
    want = getattr(torch, op)(torch.cat([a, c], 1), dim=1)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(
        td.quantile(0.5, dim=1, reduce=True), torch.cat([a, c], 1).quantile(0.5, 1)
    )


def test_reduce_true_over_a_batch_dim_needs_matching_features() -> None:
    td = TensorDict(a=torch.zeros(3, 4, 5), b=torch.zeros(3, 4, 2), batch_size=(3, 4))
    with pytest.raises(ValueError, match=r"TensorDict\.sum: reduce=True over batch dims joins"):
        td.sum(dim=1, reduce=True)


def _f(td: TensorDict) -> TensorDict:
    return TensorDict(x=td["a"] ** 2, y=td["b"] ** 3, batch_size=td.batch_size)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's jacfwd uses jit.script
@pytest.mark.parametrize("transform", [jacrev, jacfwd])
@pytest.mark.parametrize("bs", [(2,), (2, 3)])
def test_jacobian_keeps_the_batch_size(transform: object, bs: tuple[int, ...]) -> None:
    td = TensorDict(a=torch.randn(*bs, 2), b=torch.randn(*bs, 2), batch_size=bs)
    jac = transform(_f)(td)  # type: ignore[operator]
    assert jac.batch_size == bs and jac["x"].batch_size == bs
    shape = td["a"].shape
    for key, factor in (("a", 2 * td["a"]), ("b", 3 * td["b"] ** 2)):
        out = "x" if key == "a" else "y"
        assert jac[out, key].shape == (*shape, *shape)
        torch.testing.assert_close(
            jac[out, key].reshape(shape.numel(), -1), torch.diag(factor.flatten())
        )
        other = "b" if key == "a" else "a"
        assert not jac[out, other].any()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_hessian_keeps_the_batch_size() -> None:
    td = TensorDict(a=torch.randn(2, 3), b=torch.randn(2, 3), batch_size=(2,))
    hess = hessian(_f)(td)
    assert hess.batch_size == (2,)
    assert hess["x", "a", "a"].shape == (2, 3, 2, 3, 2, 3)
    want = torch.zeros(6, 6, 6)  # d2 x_i / da_j da_k is 2 where i == j == k
    idx = torch.arange(6)
    want[idx, idx, idx] = 2.0
    torch.testing.assert_close(hess["x", "a", "a"].reshape(6, 6, 6), want)


def test_vmap_output_still_gains_the_mapped_dim() -> None:
    td = TensorDict(a=torch.randn(3, 3, 2), batch_size=(3, 3))
    out = torch.vmap(lambda t: t * 2)(td)
    assert out.batch_size == (3, 3)
    inner = torch.vmap(lambda t: TensorDict(a=t["a"], batch_size=t.batch_size), (0,))(
        TensorDict(a=torch.randn(3, 3), batch_size=(3, 3))
    )
    assert inner.batch_size == (3, 3)


@pytest.mark.parametrize(
    ("name", "fn"),
    [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
     ("pow", torch.pow), ("maximum", torch.maximum), ("clamp_min", torch.clamp_min),
     ("clamp_max", torch.clamp_max)],
)  # fmt: skip
def test_binary_default_fills_missing_keys(name: str, fn: object) -> None:
    x, y = torch.rand(3) + 1, torch.rand(3) + 1
    td0 = TensorDict(a=x, b={"c": x}, s="kept")
    td1 = TensorDict(b={"c": y}, d=y)
    with pytest.raises(KeyError):
        getattr(td0, name)(td1)
    fill = torch.tensor(2.0)
    out = getattr(td0, name)(td1, default=fill)
    torch.testing.assert_close(out["a"], fn(x, fill))  # type: ignore[operator]
    torch.testing.assert_close(out["b", "c"], fn(x, y))  # type: ignore[operator]
    torch.testing.assert_close(out["d"], fn(fill, y))  # type: ignore[operator]
    assert out["s"] == "kept"
    both = getattr(td0, name)(td1, default="intersection")
    assert set(both.keys(True, True)) == {("b", "c")}  # the tensors (as upstream)
    assert set(both.keys(True, True, is_leaf=is_leaf_nontensor)) == {("b", "c"), "s"}
    with pytest.raises(ValueError, match=rf"TensorDict\.{name}: default must be a tensor"):
        getattr(td0, name)(td1, default="union")


def test_binary_tensor_lines_up_with_batch_dims() -> None:
    a, b = torch.randn(3, 4), torch.randn(3, 4, 5)
    td = TensorDict(a=a, b=b, batch_size=(3, 4))
    for shape in [(4,), (3, 4), (2, 3, 4)]:
        other = torch.randn(shape)
        out = td * other
        assert out.batch_size == torch.broadcast_shapes(shape, (3, 4))
        torch.testing.assert_close(out["a"], a * other)
        torch.testing.assert_close(out["b"], b * other.unsqueeze(-1))
        lerp = td.lerp(torch.zeros(shape), other)
        torch.testing.assert_close(lerp["b"], torch.lerp(b, torch.zeros(()), other[..., None]))
    flat = TensorDict(a=torch.ones(2))  # no batch dims: torch broadcasts with each leaf
    torch.testing.assert_close((flat * torch.arange(2.0))["a"], torch.arange(2.0))
    torch.testing.assert_close(
        flat.addcmul(torch.ones(2), torch.ones(2))["a"], torch.full((2,), 2.0)
    )
    small = TensorDict(a=torch.ones(3), batch_size=(3,))
    grown = small + TensorDict(a=torch.ones(2, 3), batch_size=(2, 3))
    assert grown.batch_size == (2, 3)
    with pytest.raises(ValueError, match=r"TensorDict\.lerp: the shapes \[\(5,\)\]"):
        td.lerp(TensorDict(a=torch.zeros(5), batch_size=(5,)), 0.5)


def test_results_of_element_wise_ops_keep_the_lock() -> None:
    td = TensorDict(a=torch.ones(2, requires_grad=True), b={"c": torch.ones(2)}, batch_size=[2])
    assert not (td + 1).is_locked and not td.data.is_locked
    assert td.grad is None  # no leaf has a gradient yet
    td["a"].sum().backward()
    td.lock_()
    assert (td + 1).is_locked and (td * td).is_locked and td.exp().is_locked
    grad = td.grad
    assert td.data.is_locked and grad is not None and grad.is_locked
    torch.testing.assert_close(grad["a"], torch.ones(2))
    assert "b" not in grad.keys()


def test_reflected_bitwise_operators() -> None:
    td = TensorDict(a=torch.tensor([True, False]), batch_size=[2])
    for out, want in [(False | td, [True, False]), (True & td, [True, False]),
                      (True ^ td, [False, True])]:  # fmt: skip
        assert isinstance(out, TensorDict) and out["a"].tolist() == want


def _padded_like(x: torch.Tensor, pad_size: list[int], value: float) -> torch.Tensor:
    flat: list[int] = []
    for i in reversed(range(0, len(pad_size), 2)):
        flat += [pad_size[i], pad_size[i + 1]]
    return torch.nn.functional.pad(x, [0, 0] * (x.ndim - len(pad_size) // 2) + flat, value=value)


@pytest.mark.parametrize("pad_size", [[0, 1, 0, 2], [1, 0, 2, 1], [-1, 0, 0, 1]])
def test_pad_inplace_matches_functional(pad_size: list[int]) -> None:
    def build() -> TensorDict:
        return TensorDict(
            a=torch.arange(12.0).view(3, 4),
            n=TensorDict(c=torch.arange(24.0).view(3, 4, 2), batch_size=[3, 4]),
            s=NonTensorStack.from_list([[f"{i}{j}" for j in range(4)] for i in range(3)]),
            batch_size=[3, 4],
        )

    ref = pad(build(), pad_size, value=7.0)
    td = build()
    nested, stack = td["n"], td.get("s")
    assert pad(td, pad_size, value=7.0, inplace=True) is td
    assert td.batch_size == ref.batch_size and td["n"] is nested and td.get("s") is stack
    assert stack.tolist() == ref.get("s").tolist()
    for key in ("a", ("n", "c")):
        torch.testing.assert_close(td[key], _padded_like(build()[key], pad_size, 7.0))
        torch.testing.assert_close(td[key], ref[key])


def test_pad_inplace_lazy_stack_keeps_members() -> None:
    members = [TensorDict(x=torch.ones(4) * i, batch_size=[4]) for i in range(2)]
    lst = lazy_stack(members, dim=0)
    ids = [id(m) for m in lst.tensordicts]
    assert lst.pad([0, 0, 0, 1], value=5.0, inplace=True) is lst
    assert lst.batch_size == (2, 5) and [id(m) for m in lst.tensordicts] == ids
    assert lst.tensordicts[1]["x"].tolist() == [1.0, 1.0, 1.0, 1.0, 5.0]
    assert pad(lst, [1, 0], value=9.0, inplace=True) is lst
    assert lst.batch_size == (3, 5) and id(lst.tensordicts[1]) == ids[0]
    assert lst.tensordicts[0]["x"].tolist() == [9.0] * 5


def test_pad_safe_checks_before_anything_changes() -> None:
    td = TensorDict(a=torch.ones(3, 4), batch_size=[3, 4])
    old = td["a"]
    with pytest.raises(RuntimeError, match=r"pad: pad_size \[-10, 0\] .* negative output size"):
        td.pad([-10, 0], inplace=True)
    assert td["a"] is old
    with pytest.raises(RuntimeError):
        td.pad([-10, 0], inplace=True, safe=False)
    with pytest.raises(RuntimeError, match="negative output size"):
        pad(TensorDict(s=NonTensorStack("a", "b", "c"), batch_size=[3]), [-4, 0])


def test_pad_non_tensor_stack() -> None:
    stack = NonTensorStack("a", "b")
    assert pad(stack, [1, 1]).tolist() == [None, "a", "b", None]
    assert pad(stack, [0, 1], inplace=True) is stack and stack.tolist() == ["a", "b", None]
    with pytest.raises(RuntimeError, match="cannot preserve the identity of a NonTensorData"):
        pad(NonTensorData("a", batch_size=[2]), [0, 1], inplace=True)


def test_key_nested_in_tuples_reads_as_written() -> None:
    td = TensorDict({("m", "k"): torch.ones(2)}, [2])
    torch.testing.assert_close(td[(("m",), "k")], torch.ones(2))
    torch.testing.assert_close(td[(("m", "k"),)], torch.ones(2))
    lst = lazy_stack([td, td.clone()])
    torch.testing.assert_close(lst[(("m",), ("k",))], torch.ones(2, 2))


def _tolist_td() -> TensorDict:
    return TensorDict(
        a=torch.arange(24).view(2, 3, 4),
        b=TensorDict(c=torch.arange(12).view(2, 3, 2), batch_size=(2, 3, 2)),
        s="x",
        batch_size=(2, 3),
    )


def test_tolist_options() -> None:
    td = _tolist_td()
    plain = td.tolist()
    assert len(plain) == 2 and len(plain[1]) == 3
    torch.testing.assert_close(plain[1][2]["a"], td["a"][1, 2])
    torch.testing.assert_close(plain[1][2]["b"]["c"], td["b", "c"][1, 2])
    assert plain[1][2]["s"] == "x"
    nodes = td.tolist(convert_nodes=False)
    assert isinstance(nodes[0][1], TensorDict) and nodes[0][1].batch_size == ()
    torch.testing.assert_close(nodes[0][1]["b", "c"], td["b", "c"][0, 1])
    lists = td.tolist(convert_tensors=True)
    assert lists[1][0]["a"] == td["a"][1, 0].tolist()
    assert lists[1][0]["b"]["c"] == td["b", "c"][1, 0].tolist()
    first = td.tolist(tolist_first=True)
    assert isinstance(first[0][0]["b"], list) and len(first[0][0]["b"]) == 2
    torch.testing.assert_close(first[0][0]["b"][1]["c"], td["b", "c"][0, 0, 1])
    with pytest.raises(TypeError, match=r"TensorDict\.tolist: convert_tensors=True needs"):
        td.tolist(convert_nodes=False, convert_tensors=True)


def test_to_dict_options() -> None:
    td = TensorDict(a=torch.arange(3), n=None, b={"c": torch.ones(2)})
    assert td.to_dict(convert_tensors=True) == {"a": [0, 1, 2], "n": None, "b": {"c": [1.0, 1.0]}}
    assert "n" not in td.to_dict(retain_none=False)
    arrays = td.to_dict(convert_tensors="numpy")
    assert arrays["a"].tolist() == [0, 1, 2] and type(arrays["a"]).__name__ == "ndarray"


def _bd() -> TensorDict:
    return TensorDict(a=torch.randn(4, 5, 6, 7), batch_size=(4, 5, 6))


def test_permute_errors_are_both_upstream_types() -> None:
    td = _bd()
    for dims in [(1, 1, 0), (2, -1, 0), (2, 1), (3, 2, 1, 0)]:
        with pytest.raises(ValueError, match=r"TensorDict\.permute: dims"):
            td.permute(*dims)
        with pytest.raises(RuntimeError):
            td.permute(*dims)
    for dims in [(2, 3, 0), (2, -4, 0)]:
        with pytest.raises(IndexError, match=r"TensorDict\.permute: dim -?\d is out of range"):
            td.permute(*dims)
        with pytest.raises(ValueError):
            td.permute(*dims)


def test_movedim_and_fliplr_messages() -> None:
    td = _bd()
    with pytest.raises(RuntimeError, match=r"TensorDict\.movedim: .*repeated dim in source"):
        td.movedim((0, 0), (1, 2))
    with pytest.raises(RuntimeError, match="repeated dim in destination"):
        td.movedim((0, 1), (2, 2))
    with pytest.raises(ValueError, match=r"TensorDict\.movedim: .* same number of elements"):
        td.movedim((0,), (1, 2))
    assert td.movedim((0, 1), (2, 0)).batch_size == torch.movedim(td["a"], (0, 1), (2, 0)).shape[:3]
    with pytest.raises(RuntimeError, match=r"TensorDict\.fliplr: requires at least 2 batch dims"):
        TensorDict(a=torch.zeros(3), batch_size=[3]).fliplr()


def test_split_checks() -> None:
    td = TensorDict(a=torch.arange(6.0).view(3, 2), batch_size=[3, 2])
    with pytest.raises(IndexError, match=r"TensorDict\.split: Incompatible dim 2"):
        td.split(1, 2)
    with pytest.raises(IndexError, match="Incompatible dim 0"):
        TensorDict(a=torch.zeros(2)).split(1, 0)
    with pytest.raises(TypeError, match="split_size must be int or list of ints"):
        td.split(["1", 2], 0)  # type: ignore[list-item]
    with pytest.raises(RuntimeError, match="Insufficient number of elements in split_size"):
        td.split([], 0)
    with pytest.raises(RuntimeError, match="expects split_size to sum exactly to 3"):
        td.split([1, 1], 0)
    with pytest.raises(ValueError, match="split_size must be positive, got 0."):
        td.split(0, -1)
    parts = td.split([1, 2], 0)
    torch.testing.assert_close(parts[1]["a"], td["a"].split([1, 2], 0)[1])


def test_keys_values_items_sorted() -> None:
    td = TensorDict(e={"f": 3, "g": {"h": 4}}, d=2, a={"b": 0, "c": 1})
    keys = td.keys(True, True, sort=True)
    assert keys == [("a", "b"), ("a", "c"), "d", ("e", "f"), ("e", "g", "h")]
    assert [int(v) for v in td.values(True, True, sort=True)] == [0, 1, 2, 3, 4]
    assert [k for k, _ in td.items(True, True, sort=True)] == keys
    lst = lazy_stack([td, td.clone()])
    assert lst.keys(True, True, sort=True) == keys
    assert next(iter(lst.values(True, True, sort=True))).tolist() == [0, 0]


def test_update_with_keyword_entries() -> None:
    td = TensorDict(a=torch.zeros(3), batch_size=[3])
    td.update(
        {"a": torch.ones(3), "b": torch.ones(3)}, a=torch.full((3,), 7.0), c={"d": torch.ones(3)}
    )
    assert td["a"].tolist() == [7.0] * 3 and td["b"].tolist() == [1.0] * 3
    assert td["c", "d"].shape == (3,)
    assert td.update() is td and td.update_() is td
    a = td["a"]
    td.update_(a=torch.ones(3))
    assert td["a"] is a and a.tolist() == [1.0] * 3
    with pytest.raises(KeyError, match=r"TensorDict\.update_: key 'zz' was not found in"):
        td.update_(zz=torch.ones(3))
    lst = lazy_stack([TensorDict(a=torch.zeros(())) for _ in range(3)])
    lst.update(b=torch.ones(3))
    lst.update_(a=torch.ones(3))
    assert lst["b"].tolist() == [1.0] * 3 and lst["a"].tolist() == [1.0] * 3


def test_to_inplace_cat_out_contiguous_canonical() -> None:
    td = TensorDict(a=torch.randn(3, 4), b={"c": torch.randn(3, 4)}, batch_size=[3])
    nested = td["b"]
    out = td.to("cpu", inplace=True)
    assert out is td and td["b"] is nested and td.device == torch.device("cpu")
    assert td["b"].device == torch.device("cpu")
    dst = TensorDict(a=torch.zeros(6, 4), b={"c": torch.zeros(6, 4)}, batch_size=[6])
    ptr = dst["a"].data_ptr()
    assert torch.cat([td, td], 0, out=dst) is dst and dst["a"].data_ptr() == ptr
    torch.testing.assert_close(dst["b", "c"], torch.cat([td["b", "c"]] * 2))
    odd = torch.empty_strided((1, 4, 5), (5, 5, 1)).copy_(torch.arange(20.0).view(1, 4, 5))
    plain = TensorDict(x=odd, y=torch.randn(2, 3))
    assert plain.contiguous()["x"].data_ptr() == odd.data_ptr()
    canon = plain.contiguous(canonical=True)
    assert canon["x"].stride() == (20, 5, 1) and canon["y"] is plain["y"]
    torch.testing.assert_close(canon["x"], odd)


def test_depth_is_a_property() -> None:
    td = TensorDict(a={"b": {"c": {"d": 0}, "e": 0}, "f": 0}, g=0)
    assert td.depth == 3
    del td["a", "b", "c"]
    assert td.depth == 2
    assert TensorDict(a=0).depth == 0


def test_atleast_3d_adds_dims_in_front_and_rot90_needs_two() -> None:
    x = torch.randn(2, 3, 4)
    td = TensorDict(a=x, batch_size=[2, 3])
    out = td.atleast_3d()
    assert out.batch_size == (1, 2, 3)
    torch.testing.assert_close(out["a"], x.unsqueeze(0))
    assert torch.atleast_3d(td[0]).batch_size == (1, 1, 3)
    three = TensorDict(a=torch.zeros(1, 2, 3), batch_size=[1, 2, 3])
    assert three.atleast_3d() is three
    with pytest.raises(RuntimeError, match=r"TensorDict\.rot90: requires at least 2 batch dims"):
        td[0].rot90()


def test_expand_as_follows_the_other_leaves() -> None:
    td0 = TensorDict(a=torch.ones(3, 1, 4), b={"c": torch.ones(3, 2, 1, 4)}, batch_size=[3])
    td1 = TensorDict(
        a=torch.zeros(2, 3, 5, 4), b={"c": torch.zeros(2, 3, 2, 6, 4)}, batch_size=[2, 3]
    )
    out = td0.expand_as(td1)
    assert out.batch_size == (2, 3)
    torch.testing.assert_close(out["a"], td0["a"].expand(2, 3, 5, 4))
    torch.testing.assert_close(out["b", "c"], td0["b", "c"].expand(2, 3, 2, 6, 4))
    assert td0.expand_as(torch.zeros(2, 3)).batch_size == (2, 3)


def test_key_collisions_raise_key_error() -> None:
    td = TensorDict({"a.b": torch.zeros(3), "a": {"b": torch.zeros(3)}}, [])
    with pytest.raises(KeyError, match="Flattening keys in tensordict causes keys to collide"):
        td.flatten_keys(".")
    with pytest.raises(ValueError, match=r"key 'a\.b' appears twice after flattening"):
        td.flatten_keys(".")
    with pytest.raises(KeyError, match=r"Unflattening key\(s\) in tensordict will override"):
        td.unflatten_keys(".")
    leaf = TensorDict({"a.b.c": torch.zeros(3), "a": {"b": torch.zeros(3)}}, [])
    with pytest.raises(KeyError, match="needs 'b' to be nested, but it holds a leaf"):
        leaf.unflatten_keys(".")


def test_identity_permute_and_legacy_inverse_views() -> None:
    from tensordict import set_lazy_legacy

    td = TensorDict(a=torch.randn(3, 4, 5), batch_size=[3, 4, 5])
    assert td.permute(0, 1, 2) is td and td.movedim(1, 1) is td
    assert td.permute(2, 1, 0).permute(2, 1, 0) is not td  # a new TensorDict by default
    with set_lazy_legacy(True):
        assert td.permute(2, 0, 1).permute(1, 2, 0) is td
        assert td.permute(2, 0, 1).permute(2, 0, 1) is not td
        assert td.view(-1).view(3, 4, 5) is td and td.view(3, 4, 5) is td
    flat = td.view(-1)
    torch.testing.assert_close(flat.view(3, 4, 5)["a"], td["a"])


def test_small_upstream_semantics() -> None:
    with pytest.raises(ValueError, match="TensorDict: pass the entries as source or as keyword"):
        TensorDict({"b": 2}, a=1)
    td = TensorDict.fromkeys({"a", ("d", "e")}, 0)
    assert "a" in td and ("d", "e") in td and "f" not in td
    with pytest.raises(RuntimeError, match=r"TensorDict\.__contains__: expected a NestedKey"):
        0 in td  # noqa: B015
    grid = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(NotImplementedError, match=r"index\.ndim=1"):
        grid.gather(dim=0, index=torch.tensor([0, 1]), inplace=True)
    with pytest.raises(ValueError, match="index must have 2 dims"):
        grid.gather(dim=0, index=torch.tensor([0, 1]))
    empty = TensorDict()
    empty["key"] = []
    assert isinstance(empty["key"], torch.Tensor) and empty["key"].shape == (0,)


def test_separates_default_fills_missing_keys() -> None:
    td = TensorDict(a=0, b=TensorDict(c=0, d=0), unique=TensorDict(val=0))
    with pytest.raises(KeyError):
        td.clone().separates("a", "e")
    out = td.separates("a", ("b", ("d",)), "e", ("unique", "val"), default=None)
    assert out["e"] is None and out["a"] == 0 and out["b", "d"] == 0
    assert "a" not in td and ("b", "d") not in td and "unique" not in td
    kept = TensorDict(unique=TensorDict(val=0))
    kept.separates(("unique", "val"), filter_empty=False)
    assert "unique" in kept


def test_update_across_batch_sizes() -> None:
    td0 = TensorDict(a=torch.zeros(3), n={"b": torch.zeros(3, 2)}, batch_size=[3])
    td1 = TensorDict(a=torch.ones(4), n={"b": torch.ones(4, 2)}, batch_size=[4])
    with pytest.raises(RuntimeError, match=r"TensorDict\.update: update_batch_size must be set"):
        td0.update(td1)
    with pytest.raises(RuntimeError, match="inplace=True cannot achieve"):
        td0.update(td1, update_batch_size=True, inplace=True)
    with pytest.raises(RuntimeError, match="keys_to_update is not supported"):
        td0.update(td1, update_batch_size=True, keys_to_update=["a"])
    with pytest.raises(RuntimeError, match="locked TensorDict"):
        td0.clone().lock_().update(td1, update_batch_size=True)
    with pytest.raises(RuntimeError, match=r"keys \['z'\] are not in the source"):
        TensorDict(z=torch.zeros(3), batch_size=[3]).update(td1, update_batch_size=True)
    nested = td0["n"]
    assert td0.update(td1, update_batch_size=True) is td0
    assert td0.batch_size == (4,) and td0["n"] is nested and nested.batch_size == (4,)
    torch.testing.assert_close(td0["n", "b"], td1["n", "b"])
    assert td0["n"] is not td1["n"]
    with pytest.raises(RuntimeError, match="lock"):
        lazy_stack([td1.clone(), td1.clone()]).lock_().update(
            lazy_stack([td0[:3], td0[:3]]), update_batch_size=True
        )


def test_update_nested_batch_size_and_is_leaf() -> None:
    t = torch.arange(24).view(2, 3, 4)
    t1 = torch.arange(16).view(2, 2, 4)
    td0 = TensorDict(b=TensorDict(c=t, batch_size=(2, 3)), d=t, batch_size=(2,))
    td1 = TensorDict(b=TensorDict(c=t1, batch_size=(2, 2)), d=t, batch_size=(2,))
    td0.clone().update(td1, update_batch_size=True)
    out = td0.clone().update(td1, update_batch_size=True)
    assert out["b"].batch_size == (2, 2)
    torch.testing.assert_close(out["b", "c"], t1)
    replaced = td0.clone().update(td1, update_batch_size=True, is_leaf=lambda cls: True)
    assert replaced["b"].batch_size == (2, 2)


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch: nested jagged tensors are a prototype
def test_bytes_counts_gradients_and_nested_parts() -> None:
    import gc
    import weakref

    plain = torch.zeros(3)
    with_grad = torch.ones(3, requires_grad=True)
    with_grad.sum().backward()
    values, offsets, lengths = torch.ones(3), torch.tensor([0, 1, 3]), torch.tensor([1, 2])
    njt = torch.nested.nested_tensor_from_jagged(values, offsets, lengths=lengths)
    shared = torch.nested.nested_tensor_from_jagged(plain, offsets, lengths=lengths)
    td = TensorDict(plain=plain, with_grad=with_grad, njt=njt, shared=shared)
    njt_bytes = values.nbytes + offsets.nbytes + lengths.nbytes
    grad_bytes = 2 * with_grad.nbytes
    assert td.bytes() == plain.nbytes + grad_bytes + 2 * njt_bytes - values.nbytes + plain.nbytes
    assert td.bytes(count_duplicates=False) == plain.nbytes + grad_bytes + njt_bytes
    ref = weakref.ref(td)
    del td
    gc.collect()
    assert ref() is None


def test_rename_key_up_over_its_ancestor() -> None:
    td = TensorDict(a={"b": {"c": torch.zeros(2)}, "d": torch.ones(2)}, batch_size=[2])
    leaf = td["a", "b", "c"]
    td.rename_key_(("a", "b", "c"), ("a", "b"))
    assert td["a", "b"] is leaf and set(td.keys(True, True)) == {("a", "b"), ("a", "d")}
    level = td["a"]
    td.rename_key_("a", ("a", "e"))  # down under its own name, as upstream
    assert td["a", "e"] is level and set(td.keys(True, True)) == {("a", "e", "b"), ("a", "e", "d")}


def test_make_tensordict_from_a_tensordict_and_set_message() -> None:
    src = TensorDict(a={"b": torch.randn(3, 4), "c": torch.randn(3, 4, 5)}, d=torch.randn(3))
    td = make_tensordict(src, auto_batch_size=True)
    assert td.batch_size == (3,) and td["a"].batch_size == (3, 4)
    torch.testing.assert_close(td["a", "c"], src["a", "c"])
    with pytest.raises(ValueError, match=r"TensorDict\.set_: .*Failed to update 'a' in place"):
        TensorDict(a=torch.rand(())).set_("a", torch.randn(2))


def test_repeat_keeps_dim_names_and_from_any_list() -> None:
    td = TensorDict(obs=torch.zeros(1, 2, 3, 5), batch_size=(1, 2, 3), names=[None, "t", "o"])
    assert td.repeat_interleave(2, dim=-1).names == [None, "t", "o"]
    assert td.repeat(1, 1, 2).names == [None, "t", "o"]
    assert td.repeat(2, 1, 1, 2).names == [None, None, "t", "o"]
    torch.testing.assert_close(td.repeat(1, 1, 2)["obs"], td["obs"].repeat(1, 1, 2, 1))
    values = torch.randn(3, 4).tolist()
    torch.testing.assert_close(TensorDict.from_any(values), torch.tensor(values))
    values[0].append(0.0)
    ragged = TensorDict.from_any(values)
    assert isinstance(ragged, NonTensorStack) and ragged.tolist() == values


def test_from_dict_instance_rebuilds_nested_collections() -> None:
    from tensordict import tensorclass

    @tensorclass(autocast=True)
    class Pair:
        x: torch.Tensor = None  # type: ignore[assignment]
        y: int = None  # type: ignore[assignment]

    td = TensorDict(a=torch.randn(()), b=Pair(x=torch.zeros(()), y=1), c={"d": torch.ones(2)})
    out = td.from_dict_instance(td.to_dict(), auto_batch_size=True)
    assert isinstance(out["b"], Pair) and out["b"].y == 1
    torch.testing.assert_close(out["b"].x, torch.zeros(()))
    assert isinstance(out["c"], TensorDict) and out["c"].batch_size == (2,)


def test_sync_hook_is_a_no_op_on_cpu() -> None:
    td = TensorDict(a=torch.ones(2))
    assert td._sync_all() is None  # upstream's hook for non-blocking copies
    torch.testing.assert_close(td.to("cpu", non_blocking=True)["a"], torch.ones(2))


def test_legacy_lazy_mode_stacks_lazily_and_keeps_the_members() -> None:
    # upstream's tutorial: under set_lazy_legacy(True) torch.stack gives a lazy stack
    from tensordict import LazyStackedTensorDict, set_lazy_legacy

    td = TensorDict(a=torch.zeros(3, 2), batch_size=[3])
    other = td.clone()
    with set_lazy_legacy(True):
        lazy = torch.stack([td, other])
        assert isinstance(lazy, LazyStackedTensorDict) and lazy[0] is td
        assert isinstance(TensorDict.stack([td, other], 1), LazyStackedTensorDict)
        assert type(lazy.contiguous()) is TensorDict  # dense forms stay dense
        assert type(lazy.densify()) is TensorDict and lazy.densify().batch_size == (2, 3)
    assert type(torch.stack([td, other])) is TensorDict  # the flag restored: dense
