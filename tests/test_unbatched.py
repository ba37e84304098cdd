"""UnbatchedTensor entries: stored whatever the batch size, kept whole (same storage) by
shape and index ops with the result's batch size, transformed by data ops, refused with a
clear error where they cannot be stored or chosen element-wise."""

from __future__ import annotations

import copy
import math
import pickle
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import (
    NonTensorData,
    TensorDict,
    UnbatchedTensor,
    default_is_leaf,
    is_leaf_nontensor,
    lazy_stack,
    pad,
    pad_sequence,
    tensorclass,
)
from tensordict.tensorclass import is_non_tensor

BS = (3, 4)


def make() -> TensorDict:
    """A [3, 4] TensorDict: ``x`` shaped like the batch (the plain-tensor reference), an
    unbatched ``u`` of another shape, and a nested level holding another unbatched."""
    return TensorDict(
        x=torch.arange(12.0).reshape(BS),
        u=UnbatchedTensor(torch.arange(5.0)),
        n={"y": torch.ones(*BS, 2), "v": UnbatchedTensor(torch.zeros(2, 2))},
        batch_size=BS,
    )


def check_unbatched(result: Any, source: TensorDict) -> None:
    """Each unbatched entry of ``result`` is ``source``'s data, with the result's batch size."""
    for key, parent in (("u", result), (("n", "v"), result.get("n"))):
        got, want = result.get(key), source.get(key)
        assert type(got) is UnbatchedTensor
        assert got.data_ptr() == want.data_ptr()
        assert got.shape == want.shape
        assert got.batch_size == parent.batch_size


MASK = torch.tensor([[True, False, True, False], [False, True, False, False], [True] * 4])

# (name, op on the TensorDict, the same op on a plain tensor shaped like the batch)
SHAPE_OPS: list[tuple[str, Callable[[Any], Any], Callable[[torch.Tensor], Any]]] = [
    ("int index", lambda t: t[0], lambda x: x[0]),
    ("slice", lambda t: t[:, 1:], lambda x: x[:, 1:]),
    ("index tensor", lambda t: t[torch.tensor([0, 2])], lambda x: x[torch.tensor([0, 2])]),
    ("mask", lambda t: t[MASK], lambda x: x[MASK]),
    ("None and ellipsis", lambda t: t[None, ..., 1], lambda x: x[None, ..., 1]),
    ("unbind", lambda t: t.unbind(1)[2], lambda x: x.unbind(1)[2]),
    ("split", lambda t: t.split([1, 2], 0)[1], lambda x: x.split([1, 2], 0)[1]),
    ("chunk", lambda t: t.chunk(2, 1)[0], lambda x: x.chunk(2, 1)[0]),
    (
        "gather",
        lambda t: t.gather(1, torch.tensor([[0], [3], [1]])),
        lambda x: x.gather(1, torch.tensor([[0], [3], [1]])),
    ),
    ("masked_select", lambda t: t.masked_select(MASK), lambda x: x.masked_select(MASK)),
    ("reshape", lambda t: t.reshape(12), lambda x: x.reshape(12)),
    ("view", lambda t: t.view(4, 3), lambda x: x.view(4, 3)),
    ("transpose", lambda t: t.transpose(0, 1), lambda x: x.transpose(0, 1)),
    ("permute", lambda t: t.permute(1, 0), lambda x: x.permute(1, 0)),
    ("unsqueeze", lambda t: t.unsqueeze(1), lambda x: x.unsqueeze(1)),
    ("squeeze", lambda t: t.unsqueeze(0).squeeze(0), lambda x: x.unsqueeze(0).squeeze(0)),
    ("flatten", lambda t: t.flatten(0, 1), lambda x: x.flatten(0, 1)),
    ("unflatten", lambda t: t.unflatten(1, (2, 2)), lambda x: x.unflatten(1, (2, 2))),
    ("expand", lambda t: t.expand(2, *BS), lambda x: x.expand(2, *BS)),
    ("repeat", lambda t: t.repeat(2, 1), lambda x: x.repeat(2, 1)),
    (
        "repeat_interleave",
        lambda t: t.repeat_interleave(2, dim=0),
        lambda x: x.repeat_interleave(2, dim=0),
    ),
    ("flip", lambda t: t.flip(0), lambda x: x.flip(0)),
    ("roll", lambda t: t.roll(1, 1), lambda x: x.roll(1, 1)),
    ("narrow", lambda t: t.narrow(1, 1, 2), lambda x: x.narrow(1, 1, 2)),
    ("torch.stack", lambda t: torch.stack([t, t], 1), lambda x: torch.stack([x, x], 1)),
    ("torch.cat", lambda t: torch.cat([t, t], 0), lambda x: torch.cat([x, x], 0)),
    ("torch.unbind", lambda t: torch.unbind(t, 0)[1], lambda x: torch.unbind(x, 0)[1]),
    ("torch.flatten", lambda t: torch.flatten(t, 0, 1), lambda x: torch.flatten(x, 0, 1)),
    ("torch.permute", lambda t: torch.permute(t, (1, 0)), lambda x: torch.permute(x, (1, 0))),
    ("lazy_stack", lambda t: lazy_stack([t, t], 0), lambda x: torch.stack([x, x], 0)),
    ("lazy_stack[1]", lambda t: lazy_stack([t, t], 0)[1, :2], lambda x: x[:2]),
    ("pad", lambda t: pad(t, [1, 0]), lambda x: torch.nn.functional.pad(x, [0, 0, 1, 0])),
]


@pytest.mark.parametrize(("name", "td_op", "tensor_op"), SHAPE_OPS, ids=[o[0] for o in SHAPE_OPS])
def test_shape_op_keeps_unbatched_data(
    name: str, td_op: Callable[[Any], Any], tensor_op: Callable[[torch.Tensor], Any]
) -> None:
    td = make()
    result = td_op(td)
    expected = tensor_op(td["x"])
    assert result.batch_size == expected.shape
    assert torch.equal(result["x"], expected)
    check_unbatched(result, td)


def test_stored_whatever_the_batch_size() -> None:
    data = torch.randn(10)
    td = TensorDict(a=UnbatchedTensor(data), b=torch.randn(3), batch_size=(3,))
    assert isinstance(td["a"], UnbatchedTensor) and isinstance(td["a"], torch.Tensor)
    assert td.get("a") is td["a"]
    assert td["a"].data_ptr() == data.data_ptr()
    assert td["a"].batch_size == torch.Size([3])
    assert "a: f32[10]" in repr(td)


@pytest.mark.parametrize("bs", [(), (4,), (2, 2)])
def test_any_batch_size_sets_its_batch_size(bs: tuple[int, ...]) -> None:
    u = UnbatchedTensor(torch.zeros(3), batch_size=[7])
    assert u.batch_size == torch.Size([7])
    td = TensorDict(u=u, batch_size=bs)
    assert td.get("u").batch_size == torch.Size(bs)
    td2 = TensorDict(batch_size=bs)
    td2["u"] = u
    td2.set("w", u)
    assert td2.get("u").batch_size == td2.get("w").batch_size == torch.Size(bs)
    assert u.batch_size == torch.Size([7])  # the original keeps its own


def test_batch_size_setter_follows() -> None:
    td = make()
    td.batch_size = [3]
    assert td.get("u").batch_size == torch.Size([3])
    assert td.get(("n", "v")).batch_size == td.get("n").batch_size == torch.Size(BS)
    td["n"].batch_size = [3]
    assert td.get(("n", "v")).batch_size == torch.Size([3])


def test_plain_leaf_of_other_shape_still_refused() -> None:
    with pytest.raises(RuntimeError, match="does not start with batch_size"):
        TensorDict(a=torch.zeros(5), batch_size=[3])


def test_data_ops_apply_and_return_unbatched() -> None:
    td = make()
    u = td["u"]
    for result, expected in [
        (td.int(), u.as_subclass(torch.Tensor).int()),
        (td.to(torch.float64), u.as_subclass(torch.Tensor).double()),
        (td + 1, u.as_subclass(torch.Tensor) + 1),
        (td * td, u.as_subclass(torch.Tensor) ** 2),
        (td.apply(lambda x: x - 2), u.as_subclass(torch.Tensor) - 2),
        (td.clone(), u.as_subclass(torch.Tensor)),
        (torch.ones_like(td), torch.ones(5)),
    ]:
        got = result["u"]
        assert type(got) is UnbatchedTensor
        assert got.batch_size == result.batch_size
        assert got.dtype == expected.dtype
        assert torch.equal(got.as_subclass(torch.Tensor), expected)
    assert td.clone()["u"].data_ptr() != u.data_ptr()
    assert td.to("cpu")["u"].device == torch.device("cpu")


def test_in_place_data_ops() -> None:
    td = make()
    ptr = td["u"].data_ptr()
    td.add_(1)
    assert td["u"].data_ptr() == ptr
    assert torch.equal(td["u"].as_subclass(torch.Tensor), torch.arange(5.0) + 1)
    td.zero_()
    assert td["u"].sum().item() == 0


def test_same_object_through_key_ops() -> None:
    td = TensorDict(
        a=UnbatchedTensor(torch.randn(10)),
        b=torch.randn(3),
        c_d=UnbatchedTensor(torch.randn(2)),
        batch_size=(3,),
    )
    assert td.copy()["a"] is td["a"]
    assert td.select("a")["a"] is td["a"]
    assert td.exclude("b")["a"] is td["a"]
    nested = td.unflatten_keys(separator="_")
    assert nested["c", "d"] is td["c_d"]
    assert nested.flatten_keys(".")["c.d"] is td["c_d"]


def test_stack_same_storage_silent_different_storage_warns() -> None:
    data = torch.randn(5)
    tds = [TensorDict(a=torch.ones(3), u=UnbatchedTensor(data), batch_size=[3]) for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.stack(tds).get("u").data_ptr() == data.data_ptr()
    other = TensorDict(a=torch.ones(3), u=UnbatchedTensor(torch.ones(5)), batch_size=[3])
    with pytest.warns(UserWarning, match="different data storage"):
        stacked = torch.stack([tds[0], other])
    assert stacked.get("u").data_ptr() == data.data_ptr()  # the first member's data
    assert stacked.get("u").batch_size == torch.Size([2, 3])
    with pytest.warns(UserWarning, match="different data storage"):
        assert lazy_stack([tds[0], other]).get("u").data_ptr() == data.data_ptr()


def test_stack_with_non_tensor_column_refused() -> None:
    a = TensorDict(u=UnbatchedTensor(torch.ones(2)), batch_size=[3])
    b = TensorDict(u=NonTensorData("x"), batch_size=[3])
    with pytest.raises(TypeError, match="can only be joined with UnbatchedTensors"):
        torch.cat([a, b])


def test_stack_out_and_cat_out() -> None:
    data = torch.tensor(1)
    items = [TensorDict(x=torch.zeros(2), u=UnbatchedTensor(data), batch_size=[2])] * 3
    out = TensorDict(x=torch.empty(3, 2), u=UnbatchedTensor(data), batch_size=[3, 2])
    assert torch.stack(items, 0, out=out) is out
    assert out.get("u").batch_size == torch.Size([3, 2])
    assert out.get("u").data_ptr() == data.data_ptr()


def test_index_write_writes_payload_whole() -> None:
    td = make()
    ptr = td["u"].data_ptr()
    td[0] = TensorDict(
        x=torch.full((4,), -1.0),
        u=UnbatchedTensor(torch.full((5,), 7.0)),
        n={"y": torch.zeros(4, 2), "v": UnbatchedTensor(torch.ones(2, 2))},
        batch_size=[4],
    )
    assert td["u"].data_ptr() == ptr  # written in place
    assert torch.equal(td["u"].as_subclass(torch.Tensor), torch.full((5,), 7.0))
    assert torch.equal(td["x"][0], torch.full((4,), -1.0))
    assert torch.equal(td["x"][1], torch.arange(4.0, 8.0))


def test_index_write_without_the_key_or_scalar_keeps_it() -> None:
    td = make()
    td[0] = TensorDict(x=torch.zeros(4), batch_size=[4])
    td[1] = 5.0
    td.masked_fill_(MASK, 9.0)
    assert torch.equal(td["u"].as_subclass(torch.Tensor), torch.arange(5.0))
    assert torch.equal(td.masked_fill(MASK, 3.0)["u"].as_subclass(torch.Tensor), torch.arange(5.0))
    assert td["x"][1].tolist() == [5.0, 9.0, 5.0, 5.0]


def test_index_write_errors() -> None:
    td = make()
    with pytest.raises(ValueError, match=r"key 'u' holds an UnbatchedTensor of shape \(5,\)"):
        td[0] = TensorDict(u=UnbatchedTensor(torch.zeros(2)), batch_size=[4])
    with pytest.raises(TypeError, match="key 'x' holds a Tensor; cannot write an UnbatchedTensor"):
        td[0] = TensorDict(x=UnbatchedTensor(torch.zeros(4)), batch_size=[4])


def test_update_and_set_() -> None:
    td = make()
    td.update({"u": UnbatchedTensor(torch.zeros(2))})
    assert td.get("u").shape == (2,) and td.get("u").batch_size == torch.Size(BS)
    ptr = td["u"].data_ptr()
    td.set_("u", torch.ones(2))
    td.update_({"u": UnbatchedTensor(torch.full((2,), 4.0))})
    assert td["u"].data_ptr() == ptr
    assert td["u"].tolist() == [4.0, 4.0]
    with pytest.raises(RuntimeError, match="does not broadcast to the shape"):
        td.update_({"u": torch.zeros(3)})


def test_comparisons_and_reductions() -> None:
    td = make()
    eq = td == td.clone()
    assert type(eq["u"]) is UnbatchedTensor and bool(eq["u"].all())
    assert (td == td).all()
    for result in (td.sum(), td.mean(0), td.amax(1, keepdim=True), td.logsumexp(0)):
        assert torch.equal(result["u"].as_subclass(torch.Tensor), torch.arange(5.0))
        assert result["u"].batch_size == result.batch_size
    assert torch.equal(td.sum()["x"], td["x"].sum())
    # reduce=True: the batch's leaves only (the unbatched ones are not part of the batch)
    assert td.sum(reduce=True) == td["x"].sum() + td["n", "y"].sum()
    assert td.max(dim=0).values["u"].tolist() == list(range(5))
    assert td.cummax(0).values["u"].tolist() == list(range(5))
    assert td.softmax(1)["u"].tolist() == list(range(5))


def test_where_keeps_shared_and_refuses_different() -> None:
    td = make()
    cond = MASK
    out = td.where(cond, td.clone())
    assert torch.equal(out["u"].as_subclass(torch.Tensor), torch.arange(5.0))
    assert torch.equal(out["x"], td["x"])
    assert td.where(cond, 0.0)["u"].data_ptr() == td["u"].data_ptr()
    with pytest.raises(ValueError, match="cannot be chosen element-wise"):
        td.where(cond, td + 1)


def test_memmap_and_consolidate_refused() -> None:
    td = make()
    with pytest.raises(NotImplementedError, match=r"cannot be memory-mapped yet, but 'u' is one"):
        td.memmap(tempfile.mkdtemp())
    with pytest.raises(NotImplementedError, match=r"cannot be consolidated yet, but 'u' is one"):
        td.consolidate()
    with pytest.raises(NotImplementedError, match=r"\('n', 'v'\) is one"):
        td.exclude("u").memmap_like(tempfile.mkdtemp())
    kept = td.exclude("u", ("n", "v")).consolidate()
    assert torch.equal(kept["x"], td["x"])


@pytest.mark.parametrize(
    ("call", "suffix"), [("to_h5", "x.h5"), ("to_zarr", "x.zarr"), ("to_safetensors", "x.st")]
)
def test_file_writers_refuse_it(call: str, suffix: str) -> None:
    path = tempfile.mkdtemp() + "/" + suffix
    with pytest.raises(NotImplementedError, match=rf"TensorDict.{call}: .*'u' is one"):
        getattr(make(), call)(path)


def test_to_tensordict_keeps_it_and_copies() -> None:
    td = make()
    out = lazy_stack([td, td]).to_tensordict()
    assert type(out.get("u")) is UnbatchedTensor
    assert out.get("u").batch_size == out.batch_size == (2, *BS)
    assert out.get("u").data_ptr() != td["u"].data_ptr()


def test_from_dict_auto_batch_size_ignores_it() -> None:
    d = {"u": UnbatchedTensor(torch.zeros(5)), "x": torch.zeros(3, 4)}
    td = TensorDict.from_dict(d, auto_batch_size=True)
    assert td.batch_size == BS
    assert td.get("u").batch_size == BS
    strings = TensorDict.from_dict({"q": ["a", "b", "c", "d"]}, auto_batch_size=True)
    assert strings.batch_size == (4,)
    assert strings["q"] == ["a", "b", "c", "d"]


def test_pickle_and_deepcopy() -> None:
    td = make()
    for back in (pickle.loads(pickle.dumps(td)), copy.deepcopy(td)):
        assert type(back.get("u")) is UnbatchedTensor
        assert back.get("u").batch_size == torch.Size(BS)
        assert torch.equal(back["u"].as_subclass(torch.Tensor), td["u"].as_subclass(torch.Tensor))
        assert back["u"].data_ptr() != td["u"].data_ptr()
    u = pickle.loads(pickle.dumps(UnbatchedTensor(torch.ones(2), batch_size=[6])))
    assert type(u) is UnbatchedTensor and u.batch_size == torch.Size([6])


def test_auto_batch_size_ignores_unbatched() -> None:
    td = TensorDict(a=UnbatchedTensor(0), b=torch.randn(2, 3)).auto_batch_size_()
    assert td.batch_size == (2, 3)
    assert td.get("a").batch_size == (2, 3)
    assert TensorDict(a=UnbatchedTensor(0), b=torch.randn(2, 3)).auto_batch_size_(
        batch_dims=1
    ).batch_size == (2,)


def test_vmap_passes_it_through() -> None:
    data = torch.randn(7, 11)
    td = TensorDict(a=torch.randn(4, 3, 5), u=UnbatchedTensor(data), batch_size=[4, 3])
    out = torch.vmap(lambda x: x)(td)
    assert out.batch_size == (4, 3)
    assert type(out.get("u")) is UnbatchedTensor
    assert out.get("u").data_ptr() == data.data_ptr()
    assert out.get("u").batch_size == (4, 3)
    direct = torch.vmap(lambda x: x)(UnbatchedTensor(data, batch_size=[4]))
    assert type(direct) is UnbatchedTensor and direct.batch_size == (4,)


def test_tensorclass_field() -> None:
    @tensorclass
    class Holder:
        config: torch.Tensor
        value: torch.Tensor

    data = torch.tensor([1.0, 2.0])
    tc = Holder(config=UnbatchedTensor(data), value=torch.randn(3), batch_size=[3])
    assert type(tc.config) is UnbatchedTensor
    assert tc.config.data_ptr() == data.data_ptr()
    assert tc[0].config.batch_size == ()
    assert tc.get("config").batch_size == (3,)


def test_pad_sequence_shares_it() -> None:
    td = make()
    out = pad_sequence([td, td[:2]])
    assert out.get("u").data_ptr() == td["u"].data_ptr()
    assert out.get("u").batch_size == out.batch_size


@pytest.mark.parametrize(
    "data",
    [torch.tensor(3), torch.tensor([3]), torch.tensor(1.25), torch.tensor(True), torch.empty(0)],
)
def test_python_conversions_match_tensor(data: torch.Tensor) -> None:
    funs: list[Callable[[Any], Any]] = [
        str,
        format,
        bool,
        int,
        float,
        complex,
        round,
        math.trunc,
        math.floor,
        math.ceil,
        lambda x: x.item(),
        lambda x: x.tolist(),
    ]
    for fun in funs:
        try:
            expected: Any = fun(data)
        except Exception as err:  # the same error for both
            with pytest.raises(type(err)):
                fun(UnbatchedTensor(data))
            continue
        got = fun(UnbatchedTensor(data))
        assert not isinstance(got, UnbatchedTensor)
        assert (
            got == expected
            if not isinstance(expected, torch.Tensor)
            else torch.equal(got, expected)
        )


def test_numpy_repr_and_leaf_rules() -> None:
    data = torch.tensor([[1, 2], [3, 4]])
    u = UnbatchedTensor(data)
    np.testing.assert_array_equal(np.asarray(u), data.numpy())
    np.testing.assert_array_equal(u.numpy(), data.numpy())
    assert repr(u) == f"UnbatchedTensor({data!r})"
    assert [10, 20, 30][UnbatchedTensor(torch.tensor(2))] == 30
    assert default_is_leaf(UnbatchedTensor) and is_leaf_nontensor(UnbatchedTensor)
    assert not is_non_tensor(u)
    assert not make().is_non_tensor("u")
    assert ("u" in make().keys(True, True)) and "u" not in dict(make().non_tensor_items())


def test_autograd_through_it() -> None:
    p = torch.ones(3, requires_grad=True)
    (UnbatchedTensor(p) * 2).sum().backward()
    assert p.grad is not None and torch.equal(p.grad, torch.full((3,), 2.0))


def test_the_wire_refuses_an_unbatched_entry_by_name() -> None:
    from tensordict._consolidate import wire_plan

    td = TensorDict(a=torch.zeros(3), n={"u": UnbatchedTensor(torch.ones(5))}, batch_size=[3])
    with pytest.raises(NotImplementedError, match=r"\(sent\): UnbatchedTensor .* \('n', 'u'\)"):
        wire_plan(td)
