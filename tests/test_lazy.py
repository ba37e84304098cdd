"""LazyStackedTensorDict: members kept, ragged leaves, partial keys, ops over members."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack


def _members() -> list[TensorDict]:
    a = TensorDict({"x": torch.zeros(3, 2), "n": {"y": torch.ones(3)}, "s": "a"}, [3])
    b = TensorDict(
        {"x": torch.ones(3, 4), "n": {"y": torch.ones(3)}, "only": torch.zeros(3), "s": "b"}, [3]
    )
    return [a, b]


def test_shape_keys_and_ragged_get() -> None:
    a, b = _members()
    s = lazy_stack([a, b], 1)
    assert s.batch_size == (3, 2)
    assert s.get_item_shape("x") == (3, 2, -1)
    assert set(s.keys()) == {"x", "n", "s"} and s.partial_keys() == ["only"]
    assert s["n", "y"].shape == (3, 2)
    assert s["s"] == [["a", "b"]] * 3
    xs = s.get("x", as_list=True)
    assert xs[0] is a["x"] and xs[1] is b["x"]
    padded = s.get("x", as_padded_tensor=True, padding_value=-1)
    assert padded.shape == (3, 2, 4) and (padded[:, 0, 2:] == -1).all()
    with pytest.raises(
        RuntimeError,
        match=r"key 'x' has shapes \[\(3, 2\), \(3, 4\)\] across members; pass as_list=True",
    ):
        s.get("x")
    with pytest.raises(KeyError, match=r"key 'only' is missing from members \[0\] of 2"):
        s.get("only")
    nested = lazy_stack([a, b]).get("x", as_nested_tensor=True)
    assert nested.is_nested


def test_indexing_returns_members() -> None:
    a, b = _members()
    s = lazy_stack([a, b])
    assert s[0] is a and s[1] is b and s[-1] is b
    assert isinstance(s[:, 1:], LazyStackedTensorDict) and s[:, 1:].batch_size == (2, 2)
    assert torch.equal(s[1, 2]["x"], b["x"][2])
    assert s[torch.tensor([1, 0])][0] is b
    assert [m is x for m, x in zip(s, [a, b], strict=True)] == [True, True]
    with pytest.raises(IndexError, match="index 2 is out of bounds for the stack dim of size 2"):
        s[2]
    t = lazy_stack([a, b], 1)
    assert t[:, 0] is a
    assert t[1].batch_size == (2,)


def test_writes_reach_members() -> None:
    a, b = _members()
    s = lazy_stack([a, b])
    s["n", "z"] = torch.full((2, 3), 5.0)
    assert (a["n", "z"] == 5).all() and (b["n", "z"] == 5).all()
    s["tag"] = "t"
    assert a["tag"] == "t"
    s[1] = TensorDict({"x": torch.full((3, 4), 2.0)}, [3])
    assert (b["x"] == 2).all()
    s.get("n")["w"] = torch.zeros(2, 3)
    assert "w" in a["n"]
    s.append(TensorDict({"x": torch.zeros(3, 1), "n": {"y": torch.ones(3)}}, [3]))
    assert s.batch_size == (3, 3)


def test_element_wise_ops_and_reductions_over_members() -> None:
    a, b = _members()
    s = lazy_stack([a, b])
    out = (s + 1) * 2
    assert isinstance(out, LazyStackedTensorDict)
    assert torch.equal(out[1]["x"], (b["x"] + 1) * 2)
    assert out[0]["s"] == "a"
    assert (s.apply(lambda x: x - x)[1]["only"] == 0).all()
    assert s.clone()[0]["x"] is not a["x"]
    assert s.to(torch.float64)[1]["x"].dtype == torch.float64
    assert bool((s >= 0).all())
    assert (s.sum(dim=1)[1]["x"] == b["x"].sum(0)).all()
    s.zero_()
    assert (a["n", "y"] == 0).all()


def test_shape_ops_over_members() -> None:
    a, b = _members()
    s = lazy_stack([a, b])
    assert s.unsqueeze(0).batch_size == (1, 2, 3) and s.unsqueeze(0).stack_dim == 1
    assert s.unsqueeze(-1).batch_size == (2, 3, 1)
    assert s.permute(1, 0).batch_size == (3, 2) and s.permute(1, 0).stack_dim == 1
    assert s.transpose(0, 1)[:, 1]["x"].shape == (3, 4)
    assert s.unbind(0)[1] is b
    assert [t.batch_size for t in s.unbind(1)] == [(2,)] * 3
    assert s.flip(0)[0] is b
    assert s.expand(4, 2, 3).batch_size == (4, 2, 3)
    assert [p.batch_size for p in s.split(1, 0)] == [(1, 3), (1, 3)]
    assert s.unsqueeze(0).squeeze().batch_size == (2, 3)
    assert s.narrow(1, 0, 2).batch_size == (2, 2)
    with pytest.raises(
        RuntimeError,
        match=r"LazyStackedTensorDict.reshape: .* differ in structure: .* leaf shapes that differ \{.x.: \[\(3, 2\), \(3, 4\)\]\}",
    ):
        s.reshape(-1)


def test_homogeneous_lazy_stack_densifies() -> None:
    tds = [TensorDict({"x": torch.full((2,), float(i))}, [2]) for i in range(3)]
    s = lazy_stack(tds)
    dense = s.densify()
    assert isinstance(dense, TensorDict) and dense.batch_size == (3, 2)
    assert torch.equal(s.reshape(-1)["x"], dense.reshape(-1)["x"])
    assert torch.equal(s[:, 1]["x"], torch.tensor([0.0, 1.0, 2.0]))
    assert torch.equal(s[torch.tensor([True, False, True])]["x"][:, 0], torch.tensor([0.0, 2.0]))
    assert s.state_dict()["x"].shape == (3, 2)
    back = pickle.loads(pickle.dumps(s))
    assert isinstance(back, LazyStackedTensorDict) and torch.equal(back.densify()["x"], dense["x"])


def test_upstream_constructor_spellings() -> None:
    a, b = TensorDict({"x": torch.zeros(2)}, [2]), TensorDict({"x": torch.ones(2)}, [2])
    s = LazyStackedTensorDict(a, b, stack_dim=1)
    assert s.batch_size == (2, 2) and s.tensordicts == [a, b]
    assert LazyStackedTensorDict.lazy_stack([a, b], 1).batch_size == (2, 2)
    assert type(TensorDict.lazy_stack([a, b])) is LazyStackedTensorDict
    assert type(TensorDict.maybe_dense_stack([a, b])) is TensorDict
    ragged = TensorDict.maybe_dense_stack([a, TensorDict({"y": torch.ones(2)}, [2])])
    assert type(ragged) is LazyStackedTensorDict
    empty = LazyStackedTensorDict()
    assert empty.batch_size == (0,) and empty.tensordicts == []
    empty.append(a)
    empty.extend([b, b])
    assert empty.batch_size == (3, 2) and torch.equal(empty[1]["x"], b["x"])
    empty.insert(0, b)
    assert empty.batch_size == (4, 2) and empty.tensordicts[0] is b
    sized = LazyStackedTensorDict(stack_dim=1, batch_size=[2, 0])
    sized.append(a)
    assert sized.batch_size == (2, 1)
    # without a 0 at the stack dim, batch_size is the members' (upstream's reading)
    assert LazyStackedTensorDict(stack_dim=1, batch_size=[2, 3]).batch_size == (2, 0, 3)
    assert LazyStackedTensorDict(stack_dim=0, device="cpu").device == torch.device("cpu")
    with pytest.raises(
        ValueError, match=r"LazyStackedTensorDict.insert: batch size \(3,\) differs"
    ):
        sized.append(TensorDict({}, [3]))


def test_construction_errors() -> None:
    with pytest.raises(RuntimeError, match=r"member 0 has \(2,\), member 1 has \(3, 1\)"):
        lazy_stack([TensorDict({}, [2]), TensorDict({}, [3, 1])])
    with pytest.raises(TypeError, match="member 1 is a Tensor"):  # (tensors alone: stacked)
        lazy_stack([TensorDict({}, [2]), torch.zeros(2)])


def test_nesting_a_lazy_stack() -> None:
    same = lazy_stack([TensorDict({"x": torch.zeros(2)}, [2]) for _ in range(3)])
    td = TensorDict({"s": same}, [3])
    assert isinstance(td["s"], TensorDict) and td["s", "x"].shape == (3, 2)
    mixed = lazy_stack([TensorDict({"x": torch.zeros(2)}, [2]), TensorDict({}, [2])])
    assert TensorDict({"s": mixed}, [2])["s"] is mixed  # ragged: kept as the stack itself
    with pytest.raises(ValueError, match="shape \\(2, 2\\) of key 's' does not start with"):
        TensorDict({"s": mixed}, [3])


def test_remaining_container_methods() -> None:
    a, b = _members()
    s = lazy_stack([a, b])
    seen = []
    s.named_apply(lambda k, x: seen.append(k), nested_keys=True)
    assert seen.count("x") == 2 and ("n", "y") in seen
    popped = s.pop(("n", "y"))
    assert popped.shape == (2, 3) and ("n", "y") not in a
    assert s.pop("nope", None) is None
    got = s.setdefault("new", torch.ones(2, 3))
    assert torch.equal(got, torch.ones(2, 3)) and "new" in b
    assert s.__getitems__([1, 0])[0] is b
    same = lazy_stack([TensorDict({"x": torch.zeros(2)}, [2]) for _ in range(3)])
    src = TensorDict({"x": torch.ones(3, 2)}, [3, 2])
    same.load_state_dict(src.state_dict())
    assert (same[2]["x"] == 1).all()
    with pytest.raises(KeyError, match="unexpected keys"):
        same.load_state_dict(
            TensorDict({"x": torch.ones(3, 2), "y": torch.ones(3, 2)}, [3, 2]).state_dict()
        )
    assert set(same.to_dict()) == {"x"}
    with pytest.raises(RuntimeError, match="LazyStackedTensorDict.to_dict: .* differ in structure"):
        s.to_dict()


def test_set_numpy_array_splits_along_the_stack() -> None:
    s = lazy_stack([TensorDict({"a": torch.zeros(3, 2)}, [3]) for _ in range(4)], 1)
    arr = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    s.set("n", arr)
    torch.testing.assert_close(s.get("n"), torch.as_tensor(arr))
    assert s.tensordicts[2].get("n").tolist() == arr[:, 2].tolist()


def test_invalid_index_at_the_stack_dim_is_a_type_error() -> None:
    s = lazy_stack([TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(4)], 1)
    with pytest.raises(TypeError, match=r"LazyStackedTensorDict\[\]: Invalid index \{1, 2\}"):
        s[:, {1, 2}]
    assert s[:, np.int64(1)].batch_size == (3,)
    assert s[:, range(2)].batch_size == (3, 2)


def test_load_state_dict_assign_replaces_without_writing() -> None:
    s = lazy_stack([TensorDict({"a": torch.randn(3)}, [3]) for _ in range(2)], 0)
    zero = s.clone().zero_()
    old = zero.clone(False)
    zero.load_state_dict(s.state_dict(), assign=True)
    assert (old == 0).all() and (zero == s).all()
    copied = s.clone().zero_()
    kept = copied.clone(False)
    copied.load_state_dict(s.state_dict())
    assert (kept == s).all()  # without assign the existing tensors are written


def _dense_and_lazy() -> tuple[TensorDict, LazyStackedTensorDict]:
    dense = TensorDict({"a": torch.randn(4, 3, 5), "n": {"b": torch.randn(4, 3)}}, [4, 3])
    return dense, lazy_stack(list(dense.clone().unbind(1)), 1)


def test_functional_losses_take_a_lazy_stack_against_a_tensordict() -> None:
    dense, lazy = _dense_and_lazy()
    other = dense.apply(lambda x: x + 1)
    got = torch.nn.functional.l1_loss(other, lazy)
    torch.testing.assert_close(got["a"], torch.nn.functional.l1_loss(other["a"], dense["a"]))


def test_setitem_with_an_index_off_the_stack_dim_writes_the_members() -> None:
    dense, lazy = _dense_and_lazy()
    members = list(lazy.tensordicts)
    for index in (torch.tensor([0, 2]), range(2), torch.rand(4, 3) > 0.5):
        value = torch.randn(4, 3)[index] if not isinstance(index, range) else torch.randn(2, 3)
        dense["n", "b"][index] = value
        lazy[index] = TensorDict({"a": dense["a"][index], "n": {"b": value}}, value.shape)
        dense["a"][index] = dense["a"][index]
        assert (lazy == dense).all()
    assert all(a is b for a, b in zip(lazy.tensordicts, members, strict=True))


def test_fill_and_nested_update_reach_the_members() -> None:
    _, lazy = _dense_and_lazy()
    assert lazy.fill_("a", 0.5) is lazy
    assert all((m["a"] == 0.5).all() for m in lazy.tensordicts)
    lazy.update({"n": {"y": torch.zeros(4, 3)}})
    assert {("n", "b"), ("n", "y")} <= set(lazy.keys(True))


def test_apply_to_a_new_batch_mixing_the_stack_dim_densifies() -> None:
    dense, lazy = _dense_and_lazy()
    mask = torch.rand(4, 3) > 0.5
    n = int(mask.sum())
    got = lazy.apply(lambda x: x[mask], batch_size=[n])
    torch.testing.assert_close(got["a"], dense["a"][mask])
    ragged = lazy_stack(
        [TensorDict({"x": torch.zeros(2, 1)}, [2]), TensorDict({"x": torch.zeros(2, 3)}, [2])]
    )
    with pytest.raises(ValueError, match="must keep the stack dim"):
        ragged.apply(lambda x: x.flatten(0, 1), batch_size=[4])


def test_torch_where_on_a_lazy_stack_matches_the_dense_result() -> None:
    dense, lazy = _dense_and_lazy()
    mask = torch.rand(4, 3) > 0.5
    for other in (0.0, torch.ones_like(dense), torch.ones_like(lazy)):
        got = torch.where(mask, lazy, other)
        want = torch.where(mask, dense, 0.0 if isinstance(other, float) else torch.ones_like(dense))
        assert isinstance(got, LazyStackedTensorDict)
        assert (got == want).all()


def test_torch_where_with_out_on_a_lazy_stack_cuts_the_condition_per_member() -> None:
    dense, lazy = _dense_and_lazy()
    mask = torch.rand(4, 3) > 0.5
    out = lazy.clone()
    returned = torch.where(mask, lazy, torch.ones_like(lazy), out=out)
    assert returned is out
    want = torch.where(mask, dense, torch.ones_like(dense))
    for key in dense.keys(True, True):
        torch.testing.assert_close(out[key], want[key])


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_apply_with_default_cuts_the_others_member_by_member(stack_dim: int) -> None:
    members = [TensorDict({"a": torch.full((4, 2), float(i))}, [4]) for i in range(3)]
    stack = LazyStackedTensorDict.lazy_stack(members, stack_dim)
    with stack.unlock_():
        stack["nested", "new"] = torch.zeros(stack.shape)
    other = TensorDict({"a": stack["a"] * 10 + 1}, stack.batch_size)  # lacks ("nested", "new")
    seen: list[object] = []

    def fn(x: torch.Tensor, y: torch.Tensor | None) -> torch.Tensor:
        seen.append(y)
        return x - 1 if y is None else x + y

    out = stack.apply(fn, other, default=None)
    assert isinstance(out, LazyStackedTensorDict)
    assert out.stack_dim == stack_dim
    torch.testing.assert_close(out["a"], stack["a"] * 11 + 1)  # each member got its own part
    torch.testing.assert_close(out["nested", "new"], torch.full(stack.shape, -1.0))
    assert sum(y is None for y in seen) == 3  # one missing level per member
    with pytest.raises(KeyError, match="missing from one of the other TensorDicts"):
        stack.apply(fn, other)


def test_apply_with_default_on_a_nested_lazy_level_missing_from_the_other() -> None:
    inner = LazyStackedTensorDict.lazy_stack(
        [
            TensorDict({"x": torch.ones(2)}, []),
            TensorDict({"x": torch.ones(2), "y": torch.ones(1)}, []),
        ]
    )
    td = TensorDict({"a": torch.zeros(2), "inner": inner}, [2])
    other = TensorDict({"a": torch.ones(2)}, [2])
    out = td.apply(lambda x, y: x * 0 + 7 if y is None else x + y, other, default=None)
    torch.testing.assert_close(out["a"], torch.ones(2))
    assert isinstance(out["inner"], LazyStackedTensorDict)
    torch.testing.assert_close(out["inner"][1]["y"], torch.full((1,), 7.0))
    torch.testing.assert_close(out["inner", "x"], torch.full((2, 2), 7.0))


def test_named_apply_takes_default_and_out_as_apply_does() -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    other = TensorDict({"a": torch.full((2,), 3.0)}, [2])
    seen: list[object] = []

    def fn(key: object, x: torch.Tensor, y: torch.Tensor | None) -> torch.Tensor:
        seen.append(key)
        return x - 1 if y is None else x + y

    result = td.named_apply(fn, other, nested_keys=True, default=None)
    assert seen == ["a", ("n", "b")]
    torch.testing.assert_close(result["a"], torch.full((2,), 3.0))
    torch.testing.assert_close(result["n", "b"], torch.full((2,), -1.0))
    with pytest.raises(KeyError, match="missing from one of the other TensorDicts"):
        td.named_apply(fn, other, nested_keys=True)
    out = td.clone()
    assert td.named_apply(lambda k, x: x + 5, out=out) is out
    torch.testing.assert_close(out["n", "b"], torch.full((2,), 5.0))
    torch.testing.assert_close(td["n", "b"], torch.zeros(2))  # the source is left alone


@pytest.mark.parametrize("locked", [False, True])
def test_apply_propagate_lock_locks_a_new_result_of_a_locked_collection(locked: bool) -> None:
    members = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(2)]
    for td in (
        TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2]),
        lazy_stack(members),
    ):
        if locked:
            td.lock_()
        assert not td.apply(lambda x: x + 1).is_locked  # off by default
        assert td.apply(lambda x: x + 1, propagate_lock=True).is_locked == locked
        assert td.named_apply(lambda k, x: x + 1, propagate_lock=True).is_locked == locked


@pytest.mark.parametrize(
    ("op", "names"),
    [
        (lambda s: s.permute(1, 0), ["y", "stack"]),
        (lambda s: s.transpose(0, 1), ["y", "stack"]),
        (lambda s: s.unsqueeze(0), [None, "stack", "y"]),
        (lambda s: s.expand(4, 2, 3), [None, "stack", "y"]),
        (lambda s: s.unbind(1)[0], ["stack"]),
        (lambda s: s[:, [0, 2]], ["stack", "y"]),
        (lambda s: s[:, 0], ["stack"]),
        (lambda s: s[torch.tensor([True, False])], ["stack", "y"]),
        (lambda s: s[:, torch.tensor([True, False, True])], ["stack", "y"]),
    ],
    ids=["permute", "transpose", "unsqueeze", "expand", "unbind", "list", "int", "mask", "mask1"],
)
def test_the_stack_dim_keeps_its_name_where_it_moves(op: Any, names: list[str | None]) -> None:
    s = lazy_stack([TensorDict(x=torch.zeros(3, 2), batch_size=[3]) for _ in range(2)])
    s.names = ["stack", "y"]
    assert op(s).names == names
    assert s.names == ["stack", "y"]


def test_a_mask_over_several_dims_of_a_ragged_stack_drops_the_names() -> None:
    s = lazy_stack(_members())
    s.names = ["stack", "y"]
    assert s[torch.tensor([True, False])].names == ["stack", "y"]
    assert s[torch.tensor([[True, False, True], [False, True, True]])].names == [None]


@pytest.mark.parametrize("dims", [(0, 0), (1, -1)], ids=str)
def test_flatten_of_one_dim_keeps_a_ragged_stack_lazy(dims: tuple[int, int]) -> None:
    s = lazy_stack(_members())
    out = s.flatten(*dims)
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == s.batch_size
    assert out.get("x", as_list=True)[1] is s.tensordicts[1]["x"]


def test_a_lazy_stack_is_never_contiguous() -> None:
    s = lazy_stack([TensorDict(x=torch.zeros(3), batch_size=[3]) for _ in range(2)])
    assert all(m.is_contiguous() for m in s.tensordicts)
    assert not s.is_contiguous()  # its leaves are stacked when read, as upstream
    assert s.contiguous().is_contiguous()


def test_strict_shape_of_no_items_is_the_empty_stack() -> None:
    # it raised a bare IndexError from reading items[0]
    for stack in (lazy_stack([], strict_shape=True), TensorDict.lazy_stack([], strict_shape=True)):
        assert stack.batch_size == (0,) and isinstance(stack, LazyStackedTensorDict)
