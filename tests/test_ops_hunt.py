"""Tensor operations over TensorDicts, for the cases a differential hunt against upstream found."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack, tensorclass


def _locked() -> TensorDict:
    return TensorDict(
        a=torch.arange(6.0).reshape(2, 3),
        n=TensorDict(b=torch.zeros(2, 3, 2), batch_size=[2, 3]),
        batch_size=[2, 3],
    ).lock_()


@tensorclass
class _Pair:
    x: torch.Tensor
    y: torch.Tensor


@tensorclass
class _Tagged:
    x: torch.Tensor
    tag: str


def _locked_tc() -> Any:
    return _Pair(x=torch.zeros(2, 3), y=torch.ones(2, 3, 2), batch_size=[2, 3]).lock_()


def _locked_lazy() -> LazyStackedTensorDict:
    members = [TensorDict(a=torch.arange(3.0), batch_size=[3]) for _ in range(2)]
    return lazy_stack(members).lock_()


_BOOL = torch.ones(2, 3, dtype=torch.bool)
# results holding the same entries leaf for leaf: locked, as upstream
_KEEP: dict[str, Callable[[Any], Any]] = {
    "view": lambda t: t.view(-1),
    "view_same": lambda t: t.view(2, 3),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "squeeze": lambda t: t.squeeze(),
    "expand": lambda t: t.expand(4, 2, 3),
    "expand_as": lambda t: t.expand_as(torch.zeros(4, 2, 3)),
    "flatten": lambda t: t.flatten(0, 1),
    "unflatten": lambda t: t.unflatten(1, (3, 1)),
    "reshape": lambda t: t.reshape(-1),
    "permute": lambda t: t.permute(1, 0),
    "transpose": lambda t: t.transpose(0, 1),
    "split": lambda t: t.split(1, 0),
    "chunk": lambda t: t.chunk(2, 1),
    "tensor_split": lambda t: t.tensor_split(2, 1),
    "narrow": lambda t: t.narrow(1, 0, 2),
    "flip": lambda t: t.flip(0),
    "roll": lambda t: t.roll(1, 0),
    "repeat": lambda t: t.repeat(2, 1),
    "repeat_interleave": lambda t: t.repeat_interleave(2, dim=0),
    "rot90": lambda t: t.rot90(),
    "torch.flatten": lambda t: torch.flatten(t, 0, 1),
    "torch.unsqueeze": lambda t: torch.unsqueeze(t, 0),
    "torch.split": lambda t: torch.split(t, 1, 0),
    "to_dtype": lambda t: t.to(torch.float64),
    "to_device": lambda t: t.to("cpu"),
    "float": lambda t: t.float(),
    "double": lambda t: t.double(),
    "half": lambda t: t.half(),
    "bool": lambda t: t.bool(),
    "cpu": lambda t: t.cpu(),
    "detach": lambda t: t.detach(),
    "as_tensor": lambda t: t.as_tensor(),
    "exp": lambda t: t.exp(),
    "add": lambda t: t + 1,
    "rsub": lambda t: 1 - t,
    "rtruediv": lambda t: 1 / (t + 1),
    "lerp": lambda t: t.lerp(t, 0.5),
    "addcmul": lambda t: t.addcmul(t, t),
    "addcdiv": lambda t: t.addcdiv(t, t + 1),
    "norm": lambda t: t.norm(),
    "where": lambda t: t.where(_BOOL, 0.0),
    "torch.where": lambda t: torch.where(_BOOL, t, 0.0),
    "zeros_like": torch.zeros_like,
    "full_like": lambda t: torch.full_like(t, 2.0),
}
# results that gather entries into a new collection, and comparisons: unlocked, as upstream
_FRESH: dict[str, Callable[[Any], Any]] = {
    "index": lambda t: t[0],
    "unbind": lambda t: t.unbind(0),
    "clone": lambda t: t.clone(),
    "select": lambda t: t.select("a"),
    "apply": lambda t: t.apply(lambda x: x + 1),
    "sum": lambda t: t.sum(0),
    "stack": lambda t: torch.stack([t, t]),
    "gather": lambda t: torch.gather(t, 1, torch.zeros(2, 1, dtype=torch.long)),
    "pad": lambda t: tensordict.pad(t, [0, 1]),
    "masked_fill": lambda t: t.masked_fill(_BOOL, 1.0),
    "eq": lambda t: t == 0,
    "ne": lambda t: t != 0,
    "lt": lambda t: t < 1,
    "ge": lambda t: t >= t,
}


def _results(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("op", sorted(_KEEP))
def test_lock_kept_by_same_entry_results(op: str) -> None:
    src = _locked()
    for out in _results(_KEEP[op](src)):
        assert out.is_locked, op
        nested = out.get("n", None) if "n" in out.keys() else None
        assert nested is None or nested.is_locked
        with pytest.raises(RuntimeError, match="locked"):
            out["new"] = torch.zeros(out.shape)


@pytest.mark.parametrize("op", sorted(_FRESH))
def test_lock_dropped_by_new_collections(op: str) -> None:
    for out in _results(_FRESH[op](_locked())):
        assert not out.is_locked, op
        out["new"] = torch.zeros(out.shape)  # a fresh collection takes new keys


@pytest.mark.parametrize(
    "op", ["view", "unsqueeze", "expand", "split", "float", "detach", "exp", "where"]
)
def test_lock_kept_by_tensorclass_results(op: str) -> None:
    tc = _locked_tc()
    for out in _results(_KEEP[op](tc)):
        assert isinstance(out, _Pair) and out.is_locked, op
    for out in _results(_FRESH["index"](tc)):
        assert not out.is_locked


@pytest.mark.parametrize("op", ["unsqueeze", "expand", "split", "narrow", "float", "flip"])
def test_lock_kept_by_lazy_stack_results(op: str) -> None:
    for out in _results(_KEEP[op](_locked_lazy().unsqueeze(-1).squeeze(-1))):
        assert out.is_locked, op


def test_lock_unlocked_source_gives_unlocked_results() -> None:
    src = _locked().unlock_()
    for op in ("view", "split", "float", "exp", "lerp", "zeros_like", "rsub"):
        assert not any(out.is_locked for out in _results(_KEEP[op](src))), op


def test_locked_view_still_writes_back_in_a_with_block() -> None:
    src = _locked()
    with src.view(-1) as flat:
        flat["a"].add_(1)  # an in-place write: allowed while locked
    torch.testing.assert_close(src["a"], torch.arange(6.0).reshape(2, 3) + 1)
    view = src.view(-1)
    assert view.unlock_().is_locked is False  # the view unlocks on its own


def test_where_out_is_not_locked_by_a_locked_input() -> None:
    out = TensorDict(a=torch.ones(2, 3), n=TensorDict(b=torch.ones(2, 3, 2), batch_size=[2, 3]))
    out.batch_size = [2, 3]
    result = _locked().where(_BOOL, 0.0, out=out)
    assert result is out and not out.is_locked


# ------------------------------------------------------------------ reductions
def test_reduce_true_over_an_empty_batch() -> None:
    td = TensorDict(a=torch.randn(0, 3), b=torch.randn(0), batch_size=[0])
    torch.testing.assert_close(td.sum(reduce=True), torch.tensor(0.0))
    torch.testing.assert_close(td.prod(reduce=True), torch.tensor(1.0))
    assert bool(td.mean(reduce=True).isnan())
    torch.testing.assert_close(td.sum(dim="feature", reduce=True), torch.zeros(0))


def test_reduce_true_matches_torch_on_all_elements() -> None:
    td = TensorDict(a=torch.randn(2, 3), b=torch.randn(2, 4), batch_size=[2])
    flat = torch.cat([td["a"].reshape(-1), td["b"].reshape(-1)])
    torch.testing.assert_close(td.sum(reduce=True), flat.sum())
    torch.testing.assert_close(td.std(reduce=True), flat.std())
    joined = torch.cat([td["a"], td["b"]], dim=-1)
    torch.testing.assert_close(td.mean(dim="feature", reduce=True), joined.mean(-1))


@pytest.mark.parametrize("op", ["softmax", "cummax", "cummin", "logsumexp"])
def test_feature_dim_where_it_has_no_meaning(op: str) -> None:
    td = TensorDict(a=torch.randn(2, 3), batch_size=[2, 3])
    with pytest.raises(ValueError, match=rf"TensorDict\.{op}: dim must be a batch dim .*'feature'"):
        getattr(td, op)(dim="feature")


def test_softmax_member_by_member_on_a_ragged_lazy_stack() -> None:
    members = [
        TensorDict(a=torch.randn(3), b=torch.randn(3, i + 1), batch_size=[3]) for i in (0, 1)
    ]
    stack = lazy_stack(members)
    out = stack.softmax(1)
    assert isinstance(out, LazyStackedTensorDict)
    for got, member in zip(out.tensordicts, members, strict=True):
        torch.testing.assert_close(got["a"], torch.softmax(member["a"], 0))
        torch.testing.assert_close(got["b"], torch.softmax(member["b"], 0))
    # across the stack dim the members' shapes must agree (upstream: a silently wrong result)
    with pytest.raises(RuntimeError, match=r"LazyStackedTensorDict\.softmax: .*differ"):
        stack.softmax(0)
    dense = lazy_stack([TensorDict(a=torch.randn(3), batch_size=[3]) for _ in range(2)])
    torch.testing.assert_close(dense.softmax(0)["a"], torch.softmax(dense["a"], 0))


# -------------------------------------------------------------------- pointwise
@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float32])
def test_maximum_in_place_on_any_dtype(op: str, dtype: torch.dtype) -> None:
    a = torch.tensor([[0, 3, 1], [2, 0, 5]]).to(dtype)
    b = torch.tensor([[1, 1, 1], [1, 1, 1]]).to(dtype)
    td = TensorDict(a=a.clone(), batch_size=[2, 3])
    expected = getattr(torch, op)(a, b)
    assert getattr(td, f"{op}_")(TensorDict(a=b, batch_size=[2, 3])) is td
    torch.testing.assert_close(td["a"], expected)
    td = TensorDict(a=a.clone(), batch_size=[2, 3])
    getattr(td, f"{op}_")(b)
    torch.testing.assert_close(td["a"], expected)


# --------------------------------------------------- tensor operands and key sets
def _grid() -> TensorDict:
    return TensorDict(
        a=torch.arange(12.0).reshape(3, 4),
        b=torch.arange(24.0).reshape(3, 4, 2),
        batch_size=[3, 4],
    )


@pytest.mark.parametrize("w", [torch.arange(1.0, 5.0), torch.arange(1.0, 13.0).reshape(3, 4)])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_tensor_on_the_left_lines_up_with_the_batch(w: torch.Tensor, op: str) -> None:
    td = _grid()
    fn = getattr(torch, op)
    out = getattr(operator, "truediv" if op == "div" else op)(w, td)  # w's dims: batch dims
    full = w.expand(3, 4)
    torch.testing.assert_close(out["a"], fn(full, td["a"]))
    torch.testing.assert_close(out["b"], fn(full.unsqueeze(-1), td["b"]))


@pytest.mark.parametrize("op", ["add_", "mul_", "maximum_"])
def test_in_place_tensor_operand_lines_up_with_the_batch(op: str) -> None:
    # a batch [2] with leaves [2, 2]: torch's own broadcasting would pair w with the columns
    td = TensorDict(a=torch.arange(4.0).reshape(2, 2), batch_size=[2])
    w = torch.tensor([10.0, 20.0])
    expected = getattr(td["a"].clone(), op)(w.unsqueeze(-1)) if op != "maximum_" else None
    if expected is None:
        expected = torch.maximum(td["a"], w.unsqueeze(-1))
    getattr(td, op)(w)
    torch.testing.assert_close(td["a"], expected)
    grid = _grid()
    grid *= torch.arange(4.0)
    torch.testing.assert_close(grid["b"], _grid()["b"] * torch.arange(4.0).unsqueeze(-1))
    with pytest.raises(ValueError, match=r"TensorDict\.mul_: the shape \(2, 3, 4\) .*\(3, 4\)"):
        grid.mul_(torch.ones(2, 3, 4))


def test_tensor_operand_on_a_ragged_lazy_stack() -> None:
    members = [
        TensorDict(a=torch.randn(3), b=torch.randn(3, i + 1), batch_size=[3]) for i in (0, 1)
    ]
    w = torch.arange(1.0, 7.0).reshape(2, 3)
    out = lazy_stack(members) * w
    stack = lazy_stack([m.clone() for m in members])
    stack *= w[:, :1]  # broadcast over the second batch dim
    for i, member in enumerate(members):
        torch.testing.assert_close(out.tensordicts[i]["a"], member["a"] * w[i])
        torch.testing.assert_close(out.tensordicts[i]["b"], member["b"] * w[i].unsqueeze(-1))
        torch.testing.assert_close(stack.tensordicts[i]["b"], member["b"] * w[i, 0])
    torch.testing.assert_close(
        (w + lazy_stack(members)).tensordicts[1]["a"], members[1]["a"] + w[1]
    )


@pytest.mark.parametrize(
    "op",
    [
        lambda t, o: t.add_(o),
        lambda t, o: t.mul_(o),
        lambda t, o: t.pow_(o),
        lambda t, o: t.lerp_(o, 0.5),
        lambda t, o: t.addcmul_(o, o),
        lambda t, o: t.clamp_(o - 1, o + 1),
    ],
)
def test_in_place_with_more_keys_in_the_other(op: Callable[[Any, Any], Any]) -> None:
    # as upstream: an in-place operation writes its own keys, the other's extra ones unused
    mine = TensorDict(a=torch.arange(3.0), batch_size=[3])
    theirs = TensorDict(a=torch.full((3,), 2.0), b=torch.ones(3), batch_size=[3])
    expected = op(mine["a"].clone(), theirs["a"])
    assert op(mine, theirs) is mine
    torch.testing.assert_close(mine["a"], expected)
    assert set(mine.keys()) == {"a"}
    with pytest.raises(KeyError, match=r"TensorDict\.\w+_: .*missing from the other: \['b'\]"):
        op(theirs.clone(), mine)


# ------------------------------------------------------------ torch.* functions
_TORCH_POINTWISE: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (torch.exp, (), {}),
    (torch.abs, (), {}),
    (torch.sigmoid, (), {}),
    (torch.isfinite, (), {}),
    (torch.round, (), {}),
    (torch.add, (2.0,), {"alpha": 3}),
    (torch.sub, (1.0,), {}),
    (torch.mul, (2.0,), {}),
    (torch.div, (2.0,), {}),
    (torch.pow, (2,), {}),
    (torch.clamp, (), {"min": 1.0, "max": 4.0}),
    (torch.clamp_min, (2.0,), {}),
    (torch.lerp, (torch.ones(()), 0.5), {}),
    (torch.rsub, (1.0,), {}),
]


@pytest.mark.parametrize(("fn", "args", "kwargs"), _TORCH_POINTWISE)
def test_torch_pointwise_functions_take_a_tensordict(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    td = _grid()
    out = fn(td, *args, **kwargs)
    assert isinstance(out, TensorDict) and out.batch_size == td.batch_size
    for key in ("a", "b"):
        torch.testing.assert_close(out[key], fn(td[key], *args, **kwargs))
    tc = _Pair(x=torch.ones(2), y=torch.zeros(2, 3), batch_size=[2])
    assert isinstance(fn(tc, *args, **kwargs), _Pair)


def test_torch_pointwise_in_place_and_errors() -> None:
    td = _grid()
    assert torch.exp_(td) is td
    torch.testing.assert_close(td["a"], _grid()["a"].exp())
    with pytest.raises(TypeError, match=r"torch\.add: takes the TensorDict as its first"):
        torch.add(torch.ones(4), _grid())


def test_torch_where_with_the_tensordict_second() -> None:
    td = _grid()
    cond = td["a"] > 5
    out = torch.where(cond, 0.0, td)
    torch.testing.assert_close(out["a"], torch.where(cond, 0.0, td["a"]))
    torch.testing.assert_close(out["b"], torch.where(cond.unsqueeze(-1), 0.0, td["b"]))


def test_torch_shape_functions_repeat_interleave_and_tensor_split() -> None:
    td = _grid()
    out = torch.repeat_interleave(td, 2, dim=0)
    torch.testing.assert_close(out["b"], torch.repeat_interleave(td["b"], 2, dim=0))
    parts = torch.tensor_split(td, 3, 1)
    assert [tuple(p.batch_size) for p in parts] == [(3, 2), (3, 1), (3, 1)]


# ------------------------------------------------------------- stacking functions
def test_dense_stack_tds_falls_back_to_a_lazy_stack() -> None:
    members = [
        TensorDict(a=torch.zeros(3), batch_size=[3]),
        TensorDict(b=torch.ones(3), batch_size=[3]),
    ]
    out = tensordict.dense_stack_tds(members, dim=1)
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 1
    assert out.batch_size == torch.Size([3, 2])
    same = tensordict.dense_stack_tds(lazy_stack([members[0], members[0].clone()]))
    assert type(same) is TensorDict


def test_lazy_stack_keywords_and_tensors() -> None:
    a = TensorDict(a=torch.arange(3.0), batch_size=[3])
    named = lazy_stack([a, a.clone()], stack_dim_name="time")
    assert named.names == ["time", None]
    target = lazy_stack([a.clone().zero_(), a.clone().zero_()])
    assert lazy_stack([a, a + 1], out=target) is target
    torch.testing.assert_close(target.tensordicts[1]["a"], a["a"] + 1)
    assert lazy_stack([a, a], strict_shape=True).batch_size == torch.Size([2, 3])
    expected = torch.tensor([[0.0, 1.0], [0.0, 1.0]])
    torch.testing.assert_close(lazy_stack([torch.zeros(2), torch.ones(2)], 1), expected)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        lazy_stack([torch.zeros(2), torch.zeros(3)])


def test_lazy_stack_of_tensorclass_reads_fields() -> None:
    p = _Pair(x=torch.zeros(2), y=torch.zeros(2, 1), batch_size=[2])
    q = _Pair(x=torch.ones(2), y=torch.ones(2, 3), batch_size=[2])
    stack = lazy_stack([p, q])
    torch.testing.assert_close(stack.x, torch.stack([p.x, q.x]))
    assert [t.shape for t in stack.get("y", as_list=True)] == [
        torch.Size([2, 1]),
        torch.Size([2, 3]),
    ]
    with pytest.raises(AttributeError, match="has no attribute 'z'"):
        _ = stack.z
    tagged = lazy_stack([_Tagged(x=torch.zeros(2), tag="a", batch_size=[2])] * 2)
    assert tagged.tag == [["a", "a"], ["a", "a"]]  # a non-tensor field reads as its values
    with pytest.raises(AttributeError, match="has no attribute 'x'"):
        _ = lazy_stack([TensorDict(x=torch.zeros(1), batch_size=[1])]).x


# ----------------------------------------------------------------- apply & co
def test_lazy_apply_with_a_batch_size_sees_the_stacked_leaves() -> None:
    members = [TensorDict(a=torch.randn(3), b=torch.randn(3, 2), batch_size=[3]) for _ in range(2)]
    stack = lazy_stack(members)
    out = stack.apply(lambda x: x[:, 0], batch_size=[2])  # as upstream: fn sees [2, 3, ...]
    assert type(out) is TensorDict and out.batch_size == torch.Size([2])
    torch.testing.assert_close(out["b"], stack["b"][:, 0])
    named = stack.apply(lambda x: x + 1, names=["s", "t"])
    assert named.names == ["s", "t"]
    ragged = lazy_stack([TensorDict(a=torch.randn(3, i + 1), batch_size=[3]) for i in (0, 1)])
    kept = ragged.apply(lambda x: x * 2, batch_size=[2, 3])  # members differ: member by member
    assert isinstance(kept, LazyStackedTensorDict)
    torch.testing.assert_close(kept.tensordicts[1]["a"], ragged.tensordicts[1]["a"] * 2)


def test_sorted_keys_is_a_property_and_named_apply_prefix() -> None:
    td = TensorDict(
        b=torch.zeros(2), a=TensorDict(c=torch.zeros(2), batch_size=[2]), batch_size=[2]
    )
    assert td.sorted_keys == ["a", "b"]
    seen: list[Any] = []
    td.named_apply(lambda k, x: seen.append(k), nested_keys=True, prefix=("p",))
    assert seen == [("p", "b"), ("p", "a", "c")]


def test_auto_batch_size_of_a_lazy_stack() -> None:
    stack = lazy_stack([TensorDict(a=torch.zeros(3, 4), batch_size=[3]) for _ in range(2)])
    assert stack.auto_batch_size_(batch_dims=2) is stack  # as upstream: unchanged, kept
    for dims, given in [(1, r"\(2,\)"), (None, r"\(2, 3, 4\)")]:
        with pytest.raises(RuntimeError, match=rf"auto_batch_size_: the leaves give .*{given}"):
            stack.auto_batch_size_(batch_dims=dims)
    ragged = lazy_stack([TensorDict(a=torch.zeros(3, 4 + i), batch_size=[3]) for i in (0, 1)])
    outer = TensorDict(s=ragged, x=torch.zeros(2, 3, 4))
    assert isinstance(outer["s"], LazyStackedTensorDict)
    assert outer.auto_batch_size_().batch_size == torch.Size([2, 3])
    assert outer["s"].batch_size == torch.Size([2, 3])  # a nested stack keeps its own


def test_to_another_tensordict_positionally_moves_only() -> None:
    td = TensorDict(a=torch.zeros(2), i=torch.arange(2), m=torch.ones(2, dtype=torch.bool))
    ref = TensorDict(z=torch.zeros(1, dtype=torch.float64))
    moved = td.to(ref)  # as upstream: the device of ref; an index or a mask stays one
    assert [moved[k].dtype for k in ("a", "i", "m")] == [torch.float32, torch.int64, torch.bool]
    cast = td.to(other=ref)  # the keyword casts to the dtype ref's leaves share
    assert {cast[k].dtype for k in ("a", "i", "m")} == {torch.float64}
    img = TensorDict(x=torch.randn(2, 3, 4, 5), batch_size=[2])
    out = img.to(memory_format=torch.channels_last)
    assert out["x"].is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out["x"], img["x"])
    assert img.to(memory_format=torch.preserve_format) is img


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t + TensorDict(a=torch.ones(3), b=torch.ones(3, 2), batch_size=[3]),
        lambda t: t.mul_(torch.ones(2, 3, 4)),
        lambda t: t.sum(dim=0, reduce=True),
    ],
)
def test_shape_errors_are_value_and_runtime_errors(op: Callable[[Any], Any]) -> None:
    # upstream raises torch's RuntimeError for these: code catching either keeps working
    for kind in (ValueError, RuntimeError):
        with pytest.raises(kind, match=r"TensorDict\.(add|mul_|sum): "):
            op(_grid())


def test_operand_without_batch_dims_pairs_leaf_by_leaf() -> None:
    td = _grid()
    stats = TensorDict(a=torch.arange(12.0).reshape(3, 4), b=torch.ones(2))  # batch_size []
    out = td - stats  # as upstream: torch's broadcasting per leaf, td's batch size kept
    assert out.batch_size == td.batch_size
    torch.testing.assert_close(out["a"], td["a"] - stats["a"])
    torch.testing.assert_close(out["b"], td["b"] - stats["b"])
    assert (stats + td)["a"].shape == torch.Size([3, 4, 3, 4])  # as upstream: stats expands


@pytest.mark.parametrize("op", ["prod", "amax", "amin", "sum"])
def test_tuple_dim_reduces_every_dim_it_names(op: str) -> None:
    td = _grid()
    out = getattr(td, op)(dim=(0, 1))
    assert out.batch_size == torch.Size([])
    expected = td["b"]
    for d in (1, 0):  # (torch.prod takes one dim at a time)
        expected = getattr(torch, op)(expected, d)
    torch.testing.assert_close(out["b"], expected)


@pytest.mark.parametrize(("stack_dim", "member_bs"), [(0, ()), (1, (2,))])
def test_view_of_the_stack_dim_keeps_a_lazy_stack(
    stack_dim: int, member_bs: tuple[int, ...]
) -> None:
    members = [
        TensorDict(a=torch.full(member_bs, float(i)), batch_size=member_bs) for i in range(12)
    ]
    stack = LazyStackedTensorDict(*members, stack_dim=stack_dim)
    shape = (*member_bs[:stack_dim], 3, 4, *member_bs[stack_dim:])
    view = stack.view(*shape)
    assert isinstance(view, LazyStackedTensorDict) and view.batch_size == torch.Size(shape)
    inner = view[0] if stack_dim == 0 else view[:, 1]
    assert isinstance(inner, LazyStackedTensorDict)
    torch.testing.assert_close(view["a"], stack["a"].view(shape))
    torch.testing.assert_close(
        stack.unflatten(stack_dim, (2, -1))["a"], stack["a"].unflatten(stack_dim, (2, 6))
    )
    assert view.tensordicts[1].tensordicts[0] is members[4]  # the members are kept


@pytest.mark.parametrize("dim", [0, 1])
def test_tensor_split_and_repeat_interleave_on_a_ragged_lazy_stack(dim: int) -> None:
    members = [
        TensorDict(a=torch.randn(4), b=torch.randn(4, i + 1), batch_size=[4]) for i in range(3)
    ]
    stack = lazy_stack(members)
    parts = stack.tensor_split(2, dim)
    assert [tuple(p.batch_size) for p in parts] == (
        [(2, 4), (1, 4)] if dim == 0 else [(3, 2), (3, 2)]
    )
    for part in parts:
        assert isinstance(part, LazyStackedTensorDict)
    expected = members[2]["b"] if dim == 0 else members[0]["b"][2:]
    torch.testing.assert_close(parts[1].tensordicts[0]["b"], expected)
    rep = stack.repeat_interleave(2, dim)
    assert isinstance(rep, LazyStackedTensorDict)
    if dim == 0:
        assert rep.batch_size == torch.Size([6, 4])
        torch.testing.assert_close(rep.tensordicts[3]["b"], members[1]["b"])
        assert rep.tensordicts[3] is not members[1]  # a copy, as a dense repeat makes
    else:
        assert rep.batch_size == torch.Size([3, 8])
        torch.testing.assert_close(rep.tensordicts[2]["b"], members[2]["b"].repeat_interleave(2, 0))


@pytest.mark.parametrize("sizes", [[1], [1, 1, 1, 1, 1, 1]])
def test_pad_size_errors_are_value_and_runtime_errors(sizes: list[int]) -> None:
    for kind in (ValueError, RuntimeError):  # upstream raises a RuntimeError
        with pytest.raises(kind, match=r"pad: pad_size needs \(before, after\) pairs"):
            tensordict.pad(_grid(), sizes)


def test_public_submodules_are_attributes_of_the_package() -> None:
    import tensordict as package

    for name in ("base", "functional", "persistent", "tensordict", "utils"):
        module = package.__getattr__(name)  # (the PEP 562 hook, whether loaded or not)
        assert module.__name__ == f"tensordict.{name}"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        package.__getattr__("nope")


@pytest.mark.parametrize(
    "reduce",
    [lambda td: td.max(0), lambda td: td.min(dim=-1, keepdim=True), lambda td: td.cummax(1)],
)
def test_values_and_indices_hold_the_tensor_leaves_only(reduce: Any) -> None:
    # as upstream: a non-tensor entry has no index, so neither result holds it (the
    # indices held the string), nor a level that held only non-tensor entries
    td = TensorDict({"a": torch.arange(6.0).reshape(2, 3), "n": {"b": torch.ones(2, 3)}}, [2, 3])
    td.set_non_tensor(("n", "t"), "x")
    td.set_non_tensor(("m", "u"), "y")
    values, indices = reduce(td)
    for out in (values, indices):
        assert sorted(out.keys(True), key=str) == [("n", "b"), "a", "n"]
    assert ("n", "t") in td.keys(True) and "m" in td.keys()  # the source keeps its entries
    assert ("n", "t") in td.max(0, return_indices=False).keys(True)  # values alone keep them


@pytest.mark.parametrize("keepdim", [False, True])
def test_quantile_along_a_dim_keeps_a_nested_collections_own_batch_dims(keepdim: bool) -> None:
    # as the other reductions and upstream: the nested TensorDict's dims past the parent's
    # stay batch dims (they were dropped, as if the level were reduced to the parent's)
    td = TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "n": TensorDict({"x": torch.arange(24.0).reshape(2, 3, 4)}, [2, 3, 4]),
        },
        [2],
    )
    out = td.quantile(0.5, dim=0, keepdim=keepdim)
    lead = [1] if keepdim else []
    assert out.batch_size == torch.Size(lead) and out["n"].batch_size == torch.Size([*lead, 3, 4])
    assert torch.equal(out["n", "x"], torch.quantile(td["n", "x"], 0.5, 0, keepdim))
