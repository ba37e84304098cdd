"""Upstream's TensorDictBase surface (issue 13): every added method on every kind of
collection, checked leaf by leaf against plain torch."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, lazy_stack
from tests.test_base import BS, KINDS
from tests.test_index import _positions, _td, assert_text, check_against_oracle


def _float(kind: str) -> tuple[TensorDict, Any]:
    dense = _td(BS).apply(lambda x: x.float() + 1)
    return dense, KINDS[kind](dense)


def _leaves(td: TensorDict) -> list[tuple[Any, torch.Tensor]]:
    return [(k, v) for k, v in td.items(True, True) if isinstance(v, torch.Tensor)]


# ------------------------------------------------------------ element-wise maths
UNARY = ["acos", "asin", "atan", "cosh", "sinh", "tan", "erf", "erfc", "lgamma"]
PREDICATES = ["isfinite", "isnan", "isneginf", "isposinf", "isreal"]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", UNARY + PREDICATES)
def test_unary_oracle_on_every_kind(kind: str, name: str) -> None:
    dense, coll = _float(kind)
    coll = coll.apply(lambda x: x / 100)  # inside acos/asin's domain
    out = getattr(coll, name)()
    assert out.batch_size == dense.batch_size
    for key, leaf in _leaves(dense):
        torch.testing.assert_close(out.get(key), getattr(torch, name)(leaf / 100))
    if name in UNARY:
        copy = coll.clone()
        assert getattr(copy, name + "_")() is copy
        for key, leaf in _leaves(dense):
            torch.testing.assert_close(copy.get(key), getattr(torch, name)(leaf / 100))


BINARY: list[tuple[str, Callable[[Any, Any], Any], Callable[..., torch.Tensor]]] = [
    ("mod", lambda t, o: t.mod(3), lambda x, o: torch.remainder(x, 3)),
    ("rsub", lambda t, o: t.rsub(5, alpha=2), lambda x, o: 5 - 2 * x),
    ("lerp", lambda t, o: t.lerp(o, 0.25), lambda x, o: torch.lerp(x, o, 0.25)),
    ("addcdiv", lambda t, o: t.addcdiv(o, o + 1, value=2), lambda x, o: x + 2 * o / (o + 1)),
    ("addcmul", lambda t, o: t.addcmul(o, o, value=3), lambda x, o: x + 3 * o * o),
    ("logical_and", lambda t, o: t.logical_and(o > 3), lambda x, o: torch.logical_and(x, o > 3)),
    ("softmax", lambda t, o: t.softmax(1), lambda x, o: torch.softmax(x, 1)),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("name", "td_op", "t_op"), BINARY, ids=[b[0] for b in BINARY])
def test_binary_oracle_on_every_kind(
    kind: str, name: str, td_op: Callable[[Any, Any], Any], t_op: Callable[..., torch.Tensor]
) -> None:
    dense, coll = _float(kind)
    other = dense.apply(lambda x: x * 2)
    out = td_op(coll, other)
    for key, leaf in _leaves(dense):
        torch.testing.assert_close(out.get(key), t_op(leaf, other.get(key)))


def test_in_place_binary_forms() -> None:
    dense, _ = _float("dense")
    other = dense.apply(lambda x: x * 2)
    for op, expect in [
        (lambda t: t.lerp_(other, 0.5), lambda x, o: torch.lerp(x, o, 0.5)),
        (lambda t: t.addcdiv_(other, other), lambda x, o: x + 1),
        (lambda t: t.addcmul_(other, other, value=2), lambda x, o: x + 2 * o * o),
    ]:
        copy = dense.clone()
        assert op(copy) is copy
        for key, leaf in _leaves(dense):
            torch.testing.assert_close(copy.get(key), expect(leaf, other.get(key)))


# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_values_and_indices(kind: str, op: str) -> None:
    dense, coll = _float(kind)
    dense = dense.apply(torch.randn_like)
    coll = KINDS[kind](dense)
    whole = getattr(coll, op)()
    for dim in (0, 1):
        res = getattr(coll, op)(dim=dim)
        assert isinstance(res, getattr(torch.return_types, op))
        for key, leaf in _leaves(dense):
            torch.testing.assert_close(whole.get(key), getattr(torch, "a" + op)(leaf))
            expect = getattr(torch, op)(leaf, dim)
            torch.testing.assert_close(res.values.get(key), expect.values)
            torch.testing.assert_close(res.indices.get(key), expect.indices)
    assert getattr(coll, op)(dim=0, return_indices=False).batch_size == (3,)
    one = getattr(coll, op)(reduce=True)
    flat = torch.cat([v.reshape(-1) for _, v in _leaves(dense)])
    torch.testing.assert_close(one, getattr(torch, "a" + op)(flat))


@pytest.mark.parametrize("kind", ["dense", "lazy_dim0", "tensorclass"])
def test_cumulative_and_quantiles(kind: str) -> None:
    dense, coll = _float(kind)
    for op in ("cummin", "cummax"):
        res = getattr(coll, op)(1)
        for key, leaf in _leaves(dense):
            expect = getattr(torch, op)(leaf, 1)
            torch.testing.assert_close(res.values.get(key), expect.values)
            torch.testing.assert_close(res.indices.get(key), expect.indices)
    for key, leaf in _leaves(dense):
        torch.testing.assert_close(coll.quantile(0.3, 0).get(key), torch.quantile(leaf, 0.3, 0))
        torch.testing.assert_close(coll.logsumexp(1).get(key), torch.logsumexp(leaf, 1))
        torch.testing.assert_close(coll.nansum().get(key), torch.nansum(leaf))
        torch.testing.assert_close(coll.nanmean().get(key), torch.nanmean(leaf))
        torch.testing.assert_close(coll.norm().get(key), torch.linalg.vector_norm(leaf))


def test_reduction_errors() -> None:
    td = TensorDict(a=torch.zeros(3), batch_size=[3])
    with pytest.raises(TypeError, match=r"TensorDict\.min: dim must be an int or 'feature'"):
        td.min(dim=[0, 1])
    with pytest.raises(ValueError, match=r"TensorDict\.cummax: reduce=True is not supported"):
        td.cummax(0, reduce=True)
    with pytest.raises(ValueError, match=r"TensorDict\.quantile: dim must be an int, 'feature'"):
        td.quantile(0.5, dim="batch")


# ---------------------------------------------------------------- shape extras
SHAPES: list[tuple[str, Callable[[Any], Any]]] = [
    ("movedim", lambda t: t.movedim(0, 1)),
    ("moveaxis", lambda t: t.moveaxis(1, 0)),
    ("swapaxes", lambda t: t.swapaxes(0, 1)),
    ("swapdims", lambda t: t.swapdims(1, 0)),
    ("fliplr", lambda t: t.fliplr()),
    ("flipud", lambda t: t.flipud()),
    ("rot90", lambda t: t.rot90()),
    ("rot90_k3", lambda t: t.rot90(3, (1, 0))),
    ("tile", lambda t: t.tile((2,))),
    ("tile2", lambda t: t.tile((2, 1))),
    ("repeat_interleave", lambda t: t.repeat_interleave(2, 1)),
    ("atleast_1d", torch.atleast_1d),
    ("atleast_3d", lambda t: _front_3d(t) if isinstance(t, torch.Tensor) else t.atleast_3d()),
]


def _front_3d(t: torch.Tensor) -> torch.Tensor:
    """Upstream's atleast_3d of a batch: the new dims in front."""
    return t.reshape(*[1] * max(0, 3 - t.ndim), *t.shape)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("name", "op"), SHAPES, ids=[s[0] for s in SHAPES])
def test_shape_extras_oracle(kind: str, name: str, op: Callable[[Any], Any]) -> None:
    td = _td(BS)
    check_against_oracle(td, op(KINDS[kind](td)), op(_positions(BS)))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_tensor_split_oracle(kind: str) -> None:
    td = _td(BS)
    for outs, poss in [
        (KINDS[kind](td).tensor_split(3, 0), _positions(BS).tensor_split(3, 0)),
        (KINDS[kind](td).tensor_split([1], 1), _positions(BS).tensor_split([1], 1)),
    ]:
        assert len(outs) == len(poss)
        for out, pos in zip(outs, poss, strict=True):
            check_against_oracle(td, out, pos)


def test_flip_errors_and_join_entries() -> None:
    with pytest.raises(RuntimeError, match=r"TensorDict\.fliplr: requires at least 2 batch dims"):
        TensorDict(batch_size=[2]).fliplr()
    with pytest.raises(RuntimeError, match=r"TensorDict\.flipud: needs at least 1 batch dim"):
        TensorDict().flipud()
    a, b = torch.randn(2, 1), torch.randn(2, 2)
    td = TensorDict(a=a, b=b, batch_size=[2]).cat_tensors("a", "b", out_key="c", dim=-1)
    assert list(td.keys()) == ["c"] and torch.equal(td["c"], torch.cat([a, b], -1))
    td = TensorDict(a=a, b=a, batch_size=[2])
    td.stack_tensors("a", "b", out_key="s", keep_entries=True)
    assert torch.equal(td["s"], torch.stack([a, a])) and "a" in td.keys()


# ----------------------------------------------------- context managers
VIEWS: list[tuple[str, Callable[[Any], Any], Callable[[torch.Tensor], torch.Tensor]]] = [
    ("permute", lambda t: t.permute(1, 0), lambda x: x.permute(1, 0)),
    ("transpose", lambda t: t.transpose(0, 1), lambda x: x.transpose(0, 1)),
    ("unsqueeze", lambda t: t.unsqueeze(1), lambda x: x.unsqueeze(1)),
    ("view", lambda t: t.view(-1), lambda x: x.reshape(-1)),
    ("flatten", lambda t: t.flatten(0, 1), lambda x: x.flatten(0, 1)),
    ("unflatten", lambda t: t.unflatten(0, (2, 2)), lambda x: x.unflatten(0, (2, 2))),
]


# reshaping views of a lazy stack densify it: they have no stack to write back to
VIEW_CASES = [
    (kind, *v)
    for kind in ("dense", "lazy_dim0", "lazy_dim1", "tensorclass")
    for v in VIEWS
    if not (kind.startswith("lazy") and v[0] in ("view", "flatten", "unflatten"))
]


@pytest.mark.parametrize(
    ("kind", "name", "view", "t_view"), VIEW_CASES, ids=[f"{c[1]}-{c[0]}" for c in VIEW_CASES]
)
def test_views_write_back_on_exit(
    kind: str,
    name: str,
    view: Callable[[Any], Any],
    t_view: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    coll = KINDS[kind](_td(BS))
    new = torch.arange(12.0).reshape(BS)
    with view(coll) as v:
        if kind != "tensorclass":  # a tensorclass has a fixed set of fields
            v["new"] = t_view(new)
        v["a"] = v["a"] + 1
    if kind != "tensorclass":
        torch.testing.assert_close(coll["new"], new)
    torch.testing.assert_close(coll["a"], _td(BS)["a"] + 1)


def test_squeeze_writes_back_and_lock_contexts() -> None:
    td = TensorDict(a=torch.zeros(3, 1, 2), batch_size=[3, 1, 2])
    with td.squeeze(1) as v:
        assert v.batch_size == (3, 2)
        v["b"] = torch.ones(3, 2)
    torch.testing.assert_close(td["b"], torch.ones(3, 1, 2))
    td.lock_()
    with td.unlock_():
        assert not td.is_locked
        td["c"] = torch.zeros(3, 1, 2)
    assert td.is_locked
    with td.unlock_(), td.permute(2, 1, 0) as v:  # a locked source is written in place
        v["c"] += 1
    torch.testing.assert_close(td["c"], torch.ones(3, 1, 2))
    td.unlock_()
    with td.lock_():
        assert td.is_locked
    assert not td.is_locked
    with pytest.raises(ZeroDivisionError), td.lock_():
        raise ZeroDivisionError  # exceptions propagate; the lock stays as it was
    assert td.is_locked


# ----------------------------------------------------------------- entries
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_to_tensordict_is_a_dense_copy(kind: str) -> None:
    dense = _td(BS)
    coll = KINDS[kind](dense)
    out = coll.to_tensordict()
    assert type(out) is TensorDict and out.batch_size == dense.batch_size
    assert type(out["inner"]) is TensorDict
    for key, leaf in _leaves(dense):
        assert type(out.get(key)) is torch.Tensor
        torch.testing.assert_close(out.get(key), leaf)
        out.get(key).add_(1)  # a copy: the source is unchanged
    for key, leaf in _leaves(dense):
        torch.testing.assert_close(coll.get(key), leaf)
    assert_text(out, "hello", dense.batch_size)


@pytest.mark.parametrize("kind", ["dense", "lazy_dim0", "tensorclass"])
def test_non_tensor_entries(kind: str) -> None:
    coll = KINDS[kind](_td(BS))
    coll.set_non_tensor(("nested", "cfg"), 3)
    cfg = coll.get_non_tensor(("nested", "cfg"))
    if kind == "lazy_dim0":  # one value per member, and per element in each, as upstream
        assert cfg == [[3] * BS[1]] * BS[0]
    else:
        assert cfg == 3
    assert coll.get_non_tensor("a").shape == (*BS, 2)  # a tensor is returned as it is
    assert coll.get_non_tensor("missing", "dflt") == "dflt"
    keys = [k for k, _ in coll.non_tensor_items(include_nested=True)]
    assert set(keys) == {"text", ("nested", "cfg")}
    kept = coll.filter_non_tensor_data()
    assert "text" not in kept.keys() and "a" in kept.keys()


def test_split_keys_and_friends() -> None:
    a, b, c = torch.zeros(2), torch.ones(2), torch.full((2,), 2.0)
    td = TensorDict(a=a, b=b, n={"c": c}, batch_size=[2])
    ta, tb, rest = td.split_keys(["a"], {"b": "z"})
    assert list(ta.keys()) == ["a"] and ta["a"] is a and rest["n", "c"] is c
    assert list(tb.keys()) == ["z"] and list(rest.keys()) == ["n"]
    assert set(td.keys()) == {"a", "b", "n"}  # not in place
    with pytest.raises(KeyError, match="nope"):
        td.split_keys(["nope"])
    _, rest = td.split_keys(["nope", "a"], strict=False, inplace=True)
    assert rest is td and set(td.keys()) == {"b", "n"}
    sep = td.separates(("n", "c"))
    assert sep["n", "c"] is c and set(td.keys()) == {"b"}
    td = TensorDict(a=a, b=b, batch_size=[2])
    renamed = td.rename_keys({"a": ("x", "y")})
    assert renamed["x", "y"] is a and "a" in td.keys()
    assert td.replace(a=c)["a"] is c and td["a"] is a and td.replace() is td
    assert td.copy()["a"] is a and td.copy() is not td
    assert td.popitem() == ("b", b) and list(td.keys()) == ["a"]
    assert td.sorted_keys == ["a"] and td.depth == 0
    assert td.create_nested(("p", "q"))["p", "q"].batch_size == (2,)
    td["p", "q", "r"] = torch.zeros(2)
    assert td.depth == 2
    del td["p", "q", "r"]
    assert list(td.filter_empty_().keys()) == ["a"]
    assert td.clear().is_empty() and td.batch_size == (2,)
    with pytest.raises(KeyError, match=r"TensorDict\.popitem: the collection is empty"):
        td.popitem()
    with pytest.raises(TypeError, match=r"TensorDict\.replace: at most one mapping, got 2"):
        td.replace({}, {})
    assert TensorDict(a=torch.zeros(1)).entry_class("a") is torch.Tensor
    assert TensorDict(a="s").entry_class("a") is NonTensorData


@pytest.mark.parametrize("kind", ["dense", "tensorclass", "lazy_dim1"])
def test_writes_at_an_index(kind: str) -> None:
    dense = _td(BS).apply(lambda x: x.float())
    coll = KINDS[kind](dense.clone())
    expected = dense.clone()
    src = TensorDict(a=torch.full((3, 2), 7.0), nested={"b": torch.full((3,), 5.0)}, batch_size=[3])
    coll.update_at_(src, 1)
    expected["a"][1] = 7.0
    expected["nested", "b"][1] = 5.0
    for key, leaf in _leaves(expected):
        torch.testing.assert_close(coll.get(key), leaf)
    coll.set_at_("a", torch.zeros(2), (0, 0))
    assert coll.get_at("a", (0, 0)).tolist() == [0.0, 0.0]
    assert coll.get_at("missing", 0, None) is None
    coll.copy_at_(TensorDict(a=torch.ones(3, 2), batch_size=[3]), 2)
    torch.testing.assert_close(coll["a"][2], torch.ones(3, 2))
    with pytest.raises(KeyError, match=r"update_at_: key 'zz' was not found"):
        coll.update_at_({"zz": torch.zeros(3)}, 0)


def test_update_keywords_and_fill() -> None:
    a = torch.zeros(2)
    td = TensorDict(batch_size=[2])
    td.update({"a": a, "b": {"c": a}}, clone=True, keys_to_update=[("b", "c")])
    assert list(td.keys(True, True)) == [("b", "c")] and td["b", "c"] is not a
    td.update_({"b": {"c": torch.ones(2)}}, keys_to_update=["b"])
    torch.testing.assert_close(td["b", "c"], torch.ones(2))
    td.fill_(("b", "c"), 4.0)
    torch.testing.assert_close(td["b", "c"], torch.full((2,), 4.0))
    assert (td == td.to_dict()).all() and not (td != td.to_dict()).any()


# ------------------------------------------------------------ tensor-like
@pytest.mark.parametrize("kind", ["dense", "lazy_dim0", "tensorclass"])
def test_tensor_like_attributes(kind: str) -> None:
    dense, coll = _float(kind)
    assert coll.size() == BS and coll.size(1) == 3 and coll.ndimension() == 2
    assert coll.dtype == torch.float32 and coll.is_floating_point() and coll.is_cpu
    assert not coll.is_meta and not coll.is_cuda
    total = sum(v.numel() for _, v in _leaves(dense))
    assert coll.param_count() == total and coll.bytes() == 4 * total
    for cast, dtype in [("float64", torch.float64), ("int32", torch.int32), ("uint8", torch.uint8)]:
        out = getattr(coll, cast)()
        assert all(v.dtype == dtype for _, v in _leaves(out.to_tensordict()))
    assert coll.type(torch.int64).dtype == torch.int64
    zeros = coll.new_zeros(5)
    assert zeros.batch_size == (5,) and zeros["a"].shape == (5, 2) and not zeros["a"].any()
    assert coll.new_ones(2, 2)["a"].shape == (2, 2, 2) and coll.new_ones(2, 2)["a"].all()
    assert coll.new_empty([1]).batch_size == (1,)
    assert (coll.new_full([2], 3.0)["nested", "b"] == 3).all()
    with pytest.warns(UserWarning, match="To copy construct from a tensor") as caught:
        made = coll.new_tensor(torch.tensor([1, 2]))  # as Tensor.new_tensor warns
    assert len(caught) == 1 and caught[0].filename == __file__  # once, at the caller
    assert made["a"].dtype == torch.float32 and made["a"].tolist() == [1.0, 2.0]
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        again = coll.new_tensor(coll * 0, pin_memory=False)
    assert again.batch_size == coll.batch_size and not again["a"].any()
    assert coll.new_tensor([1, 2])["a"].tolist() == [1.0, 2.0]  # a list: no warning


def test_autograd_helpers() -> None:
    x = torch.ones(3, requires_grad=True)
    td = TensorDict(a=(x * 2).sum(), b=(x**2).sum())
    td.backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 4.0))
    leaf = TensorDict(w=x)
    assert leaf.grad["w"] is x.grad and not leaf.data["w"].requires_grad
    leaf.zero_grad(set_to_none=False)
    assert not x.grad.any()
    leaf.zero_grad()
    assert x.grad is None
    leaf.grad = TensorDict(w=torch.ones(3))
    torch.testing.assert_close(x.grad, torch.ones(3))
    out = TensorDict(y=(x * 5).sum())
    grads = torch.autograd.grad(out, leaf)
    torch.testing.assert_close(grads["w"], torch.full((3,), 5.0))
    with pytest.raises(
        ValueError, match=r"torch\.autograd\.grad: a TensorDict call takes a single"
    ):
        torch.autograd.grad((out, out), leaf)


def test_conversions() -> None:
    td = TensorDict(a=torch.arange(2), n={"s": "x"}, batch_size=[2])
    rows = td.tolist()
    assert [r["a"].item() for r in rows] == [0, 1] and [r["n"] for r in rows] == [{"s": "x"}] * 2
    arrays = td.numpy()
    assert isinstance(arrays["a"], np.ndarray) and arrays["n"] == {"s": "x"}
    nt = td.to_namedtuple()
    assert torch.equal(nt.a, td["a"]) and nt.n.s == "x"
    stack = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]).to_lazystack(1)
    assert isinstance(stack, LazyStackedTensorDict) and stack.stack_dim == 1
    auto = TensorDict(a=torch.zeros(3, 4), n={"b": torch.zeros(3, 4, 5)})
    assert auto.auto_batch_size_().batch_size == (3, 4) and auto["n"].batch_size == (3, 4, 5)
    assert TensorDict(a=torch.zeros(3, 4)).auto_batch_size_(1).batch_size == (3,)
    assert TensorDict(a=torch.zeros(1)).auto_device_().device == torch.device("cpu")
    assert type(td.as_tensor()["a"]) is torch.Tensor


# ------------------------------------------------------- torch functions
@pytest.mark.parametrize("kind", ["dense", "lazy_dim0", "tensorclass"])
def test_torch_reductions_and_losses_dispatch(kind: str) -> None:
    dense, coll = _float(kind)
    other = dense.apply(lambda x: x * 3)
    for fn in (torch.mean, torch.std, torch.var, torch.sum):
        out = fn(coll, 0)
        for key, leaf in _leaves(dense):
            torch.testing.assert_close(out.get(key), fn(leaf, 0))
    for loss in (F.l1_loss, F.mse_loss, F.smooth_l1_loss):
        for reduction in ("mean", "sum", "none"):
            out = loss(coll, other, reduction=reduction)
            for key, leaf in _leaves(dense):
                torch.testing.assert_close(
                    out.get(key), loss(leaf, other.get(key), reduction=reduction)
                )
    with pytest.raises(ValueError, match=r"l1_loss: reduction must be one of"):
        F.l1_loss(coll, other, reduction="max")
    torch.testing.assert_close(torch.maximum(coll, other)["a"], other["a"])
    torch.testing.assert_close(torch.rot90(coll)["a"], torch.rot90(dense["a"]))
    out = torch.gather(dense, 1, torch.zeros(4, 2, dtype=torch.long), out=dense[:, :2].clone())
    torch.testing.assert_close(out["a"], dense["a"][:, :1].expand(4, 2, 2))


# ----------------------------------------------------------- construction
def test_from_dict_and_class_constructors() -> None:
    d = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
    assert TensorDict.from_dict(d).batch_size == ()
    assert TensorDict.from_dict(d, auto_batch_size=True).batch_size == (3, 4)
    assert TensorDict.from_dict(d, batch_dims=1)["b"].batch_size == (3,)
    assert LazyStackedTensorDict.from_dict(d, batch_size=[3]).batch_size == (3,)
    P = collections.namedtuple("P", ["x", "y"])
    assert TensorDict.from_namedtuple(P(torch.zeros(2), torch.ones(2)))["y"].sum() == 2
    assert list(TensorDict.from_tuple((torch.zeros(1),)).keys()) == ["0"]
    assert TensorDict.from_any({"a": torch.zeros(2)}, auto_batch_size=True).batch_size == (2,)
    arr = np.zeros(2, dtype=[("a", "i8")])
    assert TensorDict.from_struct_array(arr)["a"].tolist() == [0, 0]
    assert TensorDict.fromkeys(["a", "b"], 1)["b"] == 1

    @dataclasses.dataclass
    class D:
        x: torch.Tensor

    assert TensorDict.from_dataclass(D(torch.zeros(2)))["x"].shape == (2,)
    assert lazy_stack([TensorDict()]).from_any({"a": 1})["a"] == 1


# ------------------------------------------------- keywords upstream accepts
def test_copy_at_fast_refuses_non_tensor_data() -> None:
    td = TensorDict({"val": NonTensorData(0, batch_size=[6]), "x": torch.zeros(6)}, [6])
    new = TensorDict({"val": NonTensorData(1, batch_size=[3]), "x": torch.ones(3)}, [3])
    with pytest.raises(RuntimeError, match=r"copy_at_: fast=True copies tensors only.*'val'"):
        td.copy_at_(new, slice(1, None, 2))
    assert td.get("val").tolist() == [0] * 6
    with pytest.warns(FutureWarning, match=r"fast=None is deprecated"):
        td.copy_at_(new, slice(1, None, 2), fast=None)
    assert td.get("val").tolist() == [0, 1] * 3 and td["x"].tolist() == [0.0, 1.0] * 3


def test_apply_default_and_out_and_stack_out() -> None:
    a, b = torch.randn(3), torch.randn(3)
    td = TensorDict(a=a, b=b, batch_size=[3])
    other = TensorDict(a=torch.ones(3), batch_size=[3])
    res = td.apply(lambda x, y: x if y is None else x + y, other, default=None)
    torch.testing.assert_close(res["a"], a + 1)
    torch.testing.assert_close(res["b"], b)
    out = td.clone().zero_()
    assert td.apply(torch.neg, out=out) is out
    torch.testing.assert_close(out["a"], -a)
    target = TensorDict(a=torch.zeros(2, 3), b=torch.zeros(2, 3), batch_size=[2, 3])
    assert TensorDict.lazy_stack([td, td], 0, out=target) is target
    torch.testing.assert_close(target["b"], torch.stack([b, b]))
    where_out = td.clone()
    mask = torch.tensor([True, False, True])
    assert torch.where(mask, td, td.apply(torch.zeros_like), out=where_out) is where_out
    torch.testing.assert_close(where_out["a"], torch.where(mask, a, 0.0))


def test_feature_quantile_and_nested_tensor_get() -> None:
    x = torch.randn(3, 4, 5)
    td = TensorDict(a=x, batch_size=[3, 4])
    torch.testing.assert_close(td.quantile(0.5, dim="feature")["a"], x.quantile(0.5, -1))
    torch.testing.assert_close(td.quantile(0.5, dim="feature", reduce=True), x.quantile(0.5, -1))
    s = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(3))])
    nested = s.get_nestedtensor("a")
    assert nested.is_nested and [t.shape[0] for t in nested.unbind()] == [2, 3]


# ------------------------------------------------------ conversions, round trips
def test_struct_array_pytree_and_list_round_trips() -> None:
    a, b = torch.arange(3), torch.randn(3, 2)
    td = TensorDict(a=a, b=b, n={"c": a * 2}, batch_size=[3])
    back = TensorDict.from_struct_array(td.to_struct_array(), auto_batch_size=True)
    for key, leaf in _leaves(td):
        torch.testing.assert_close(back.get(key), leaf)
    P = collections.namedtuple("P", ["x", "y"])
    tree = {"k": [a, (b, P(a, b))], "v": b}
    rebuilt = TensorDict.from_pytree(tree).to_pytree()
    assert type(rebuilt["k"]) is list and type(rebuilt["k"][1]) is tuple
    assert type(rebuilt["k"][1][1]) is P and rebuilt["k"][1][1].y is b
    assert rebuilt["v"] is b and td.to_pytree() is td
    import tensordict

    as_fn = tensordict.from_pytree((a, b), auto_batch_size=True)
    assert as_fn.batch_size == (3,) and as_fn.to_pytree()[1] is b
    stacked = TensorDict.from_list([{"a": a}, {"a": a + 1}])
    torch.testing.assert_close(stacked["a"], torch.stack([a, a + 1]))
    lazy = TensorDict.from_list([{"a": a}, {"a": b}], lazy=True)
    assert isinstance(lazy, LazyStackedTensorDict)
    assert TensorDict.from_list([[{"a": a}] * 2] * 3, auto_batch_size=True).batch_size == (3, 2, 3)


def test_whole_collection_tensors_and_padding() -> None:
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    td = TensorDict(b=b, a=a, batch_size=[2])
    torch.testing.assert_close(td.cat_from_tensordict(1), torch.cat([b, a], 1))
    torch.testing.assert_close(td.cat_from_tensordict(sorted=True), torch.cat([a, b]))
    torch.testing.assert_close(td.stack_from_tensordict(sorted=["a", "b"]), torch.stack([a, b]))
    torch.testing.assert_close(td.pad([1, 2])["a"], F.pad(a, [0, 0, 1, 2]))
    s = lazy_stack([TensorDict(x=torch.ones(1)), TensorDict(x=torch.ones(3))])
    torch.testing.assert_close(
        s.to_padded_tensor(-1.0)["x"], torch.tensor([[1.0, -1, -1], [1, 1, 1]])
    )
    with pytest.raises(RuntimeError, match=r"to_padded_tensor: mask_key needs a ragged batch"):
        s.to_padded_tensor(mask_key="m")
    assert td.is_non_tensor("a") is False and TensorDict(s="x").is_non_tensor("s")
    assert td.from_dict_instance({"q": a}, auto_batch_size=True).batch_size == (2, 3)


def test_base_face_and_no_default() -> None:
    from tensordict import base

    assert base.from_dict is tensordict_from_dict()
    with pytest.raises(KeyError):
        TensorDict().get("missing", base.NO_DEFAULT)
    with pytest.raises(KeyError):
        lazy_stack([TensorDict()]).get("missing", base.NO_DEFAULT)
    assert TensorDict().get("missing", None) is None


def tensordict_from_dict() -> Any:
    import tensordict

    return tensordict.from_dict


def test_get_defaults_to_none_switch_and_stack_errors() -> None:
    import tensordict

    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    stack = lazy_stack([td, td.clone()])
    assert tensordict.get_defaults_to_none() is False  # ours; upstream's default is True
    with tensordict.set_get_defaults_to_none(True):
        assert td.get("x") is None and td.get(("n", "x")) is None and stack.get("x") is None
        assert td.pop("x", 5) == 5
        with pytest.raises(KeyError, match=r"TensorDict\.pop: You are trying to pop key 'x'"):
            td.pop("x")
    with pytest.raises(KeyError, match=r"TensorDict\.get: key 'x' was not found in"):
        td.get("x")  # our default: a missing key raises, as td[key] does
    members = [
        TensorDict(a=torch.zeros(2, 1), batch_size=[2]),
        TensorDict(a=torch.zeros(2, 3), batch_size=[2]),
    ]
    ragged = lazy_stack(members, 1)
    with pytest.raises(RuntimeError, match=r"get_nestedtensor can only be called when the stack"):
        ragged.get_nestedtensor("a")
    with pytest.raises(RuntimeError, match=r"Failed to stack tensors within a tensordict"):
        ragged.contiguous()
    with pytest.raises(RuntimeError, match=r"Failed to stack tensors within a tensordict"):
        ragged.get("a")


@pytest.mark.parametrize("kind", ["dense", "lazy_dim0", "tensorclass"])
def test_setitem_batch_mismatch_is_refused(kind: str) -> None:
    coll = KINDS[kind](_td(BS))
    too_big = _td(BS).to_tensordict()
    with pytest.raises(RuntimeError, match=r"\[\]=: Cannot broadcast the tensordict of batch size"):
        coll[:2] = too_big
    with pytest.raises(ValueError, match=r"batch dimension mismatch"):
        coll[:2] = too_big


def test_update_at_non_tensor_shape_errors_and_like_devices() -> None:
    td = TensorDict({"val": NonTensorData(0, batch_size=[6])}, [6])
    td.update_at_(TensorDict({"val": NonTensorData(1, batch_size=[3])}, [3]), slice(1, None, 2))
    assert td.get("val").tolist() == [0, 1] * 3
    with pytest.raises(ValueError, match=r"does not start with batch_size \(3,\)"):
        TensorDict(batch_size=[3]).set("a", torch.zeros(2))
    src = TensorDict(a=torch.randn(3, 4), batch_size=[3])
    for fn in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.rand_like):
        assert fn(src, device="cpu").device == torch.device("cpu")
        assert fn(src).device is None
    assert (
        torch.zeros_like(src, dtype=torch.int64)["a"] == torch.zeros(3, 4, dtype=torch.int64)
    ).all()


INPLACE: list[tuple[str, Callable[..., Any]]] = [
    ("reshape", lambda t, **k: t.reshape(-1, **k)),
    ("flatten", lambda t, **k: t.flatten(0, 1, **k)),
    ("unflatten", lambda t, **k: t.unflatten(0, (2, 2), **k)),
    ("repeat", lambda t, **k: t.repeat(2, 1, **k)),
    ("roll", lambda t, **k: t.roll(1, 0, **k)),
    ("gather", lambda t, **k: t.gather(1, torch.tensor([[0, 2]] * 4), **k)),
    ("repeat_interleave", lambda t, **k: t.repeat_interleave(2, 1, **k)),
    ("pad", lambda t, **k: t.pad([1, 0], **k)),
    ("contiguous", lambda t, **k: t.contiguous(**k)),
]


@pytest.mark.parametrize(("name", "op"), INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_shape_ops_become_the_result(name: str, op: Callable[..., Any]) -> None:
    expected = op(_td(BS))
    td = _td(BS)
    nested = td["nested"]
    assert op(td, inplace=True) is td
    assert td["nested"] is nested  # nested levels keep their identity
    assert td.batch_size == expected.batch_size
    for key, leaf in _leaves(expected):
        torch.testing.assert_close(td.get(key), leaf)
    if name == "pad":  # pad in place works on a lazy stack too (test_compat_generic.py)
        return
    stack = lazy_stack(list(_td(BS).unbind(0)))
    with pytest.raises(NotImplementedError, match=rf"{name}: inplace=True is not supported"):
        op(stack, inplace=True)


def test_gather_out_and_inplace_are_exclusive() -> None:
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(ValueError, match=r"gather: out and inplace are mutually exclusive"):
        td.gather(0, torch.zeros(3, 4, dtype=torch.long), out=td.clone(), inplace=True)


def test_to_other_keyword() -> None:
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    out = td.to(other=torch.zeros(1, dtype=torch.float64))
    assert out["a"].dtype == torch.float64 and out.device == torch.device("cpu")
    with pytest.raises(
        TypeError, match=r"TensorDict\.to: unexpected keyword arguments \['bogus'\]"
    ):
        td.to(bogus=1)
