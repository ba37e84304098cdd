"""A ragged lazy stack nested in a TensorDict, and the lazy-stack semantics around it."""

from __future__ import annotations

import pickle

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    assert_close,
    lazy_stack,
    set_list_to_stack,
)


def _ragged() -> LazyStackedTensorDict:
    """Two members: leaf 'x' of lengths 2 and 3, 'only0' in member 0 only, a shared nest."""
    m0 = TensorDict({"x": torch.arange(2.0), "only0": torch.ones(1), "n": {"y": torch.zeros(4)}})
    m1 = TensorDict({"x": torch.arange(3.0), "n": {"y": torch.ones(4)}})
    return lazy_stack([m0, m1])


def _parent() -> TensorDict:
    return TensorDict({"lazy": _ragged(), "dense": torch.arange(2.0)}, [2])


def test_ragged_stack_is_kept_and_read_through_paths() -> None:
    stack = _ragged()
    td = TensorDict({"lazy": stack}, [2])
    assert td["lazy"] is stack
    assert torch.equal(td["lazy", "n", "y"], torch.stack([torch.zeros(4), torch.ones(4)]))
    with pytest.raises(RuntimeError, match="Failed to stack tensors within a tensordict"):
        td.get(("lazy", "x"))
    parts = td.get(("lazy", "x"), as_list=True)
    assert [p.tolist() for p in parts] == [[0.0, 1.0], [0.0, 1.0, 2.0]]
    padded = td.get(("lazy", "x"), as_padded_tensor=True, padding_value=-1.0)
    assert padded.tolist() == [[0.0, 1.0, -1.0], [0.0, 1.0, 2.0]]
    left = td.get(("lazy", "x"), as_padded_tensor=True, padding_side="left")
    assert left.tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 2.0]]
    with pytest.raises(ValueError, match="padding_side must be 'left' or 'right', got 'up'"):
        td.get(("lazy", "x"), as_padded_tensor=True, padding_side="up")
    assert ("lazy", "n", "y") in list(td.keys(include_nested=True, leaves_only=True))


def test_ragged_stack_batch_size_is_checked() -> None:
    with pytest.raises(ValueError, match=r"shape \(2,\) of key 'lazy' does not start with"):
        TensorDict({"lazy": _ragged()}, [3])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        TensorDict({"lazy": _ragged()}, [3])


def test_set_and_del_through_a_ragged_stack() -> None:
    td = _parent()
    td.set(("lazy", "z"), torch.ones(2, 5))
    assert torch.equal(td["lazy"].tensordicts[1]["z"], torch.ones(5))
    td.del_(("lazy", "z"))
    assert "z" not in td["lazy"].tensordicts[0]


def test_elementwise_ops_visit_the_members() -> None:
    td = _parent()
    for out in (td + 1, td.clone().apply_(lambda x: x + 1), td.apply(lambda x: x + 1)):
        assert isinstance(out["lazy"], LazyStackedTensorDict)
        for member, orig in zip(out["lazy"].tensordicts, td["lazy"].tensordicts, strict=True):
            assert torch.equal(member["x"], orig["x"] + 1)
        assert torch.equal(out["dense"], td["dense"] + 1)
    two = td.apply(lambda x, y: x + y, td.clone())
    assert torch.equal(two["lazy"].tensordicts[1]["x"], 2 * td["lazy"].tensordicts[1]["x"])
    assert (td == td.clone()).all()
    doubled = td.to(torch.float64)
    assert doubled["lazy"].tensordicts[0]["x"].dtype == torch.float64
    assert_close(td, td.clone())


def test_index_and_setitem_with_a_ragged_child() -> None:
    td = _parent()
    row = td[1]
    assert torch.equal(row["lazy", "x"], torch.arange(3.0))
    sub = td[torch.tensor([1, 0])]
    assert torch.equal(sub["lazy"].tensordicts[0]["x"], torch.arange(3.0))
    target = td.clone()
    target[0] = (td + 10)[0]
    assert torch.equal(target["lazy"].tensordicts[0]["x"], torch.arange(2.0) + 10)
    assert torch.equal(target["lazy"].tensordicts[1]["x"], torch.arange(3.0))


def test_select_exclude_update_with_a_ragged_child() -> None:
    td = _parent()
    picked = td.select(("lazy", "x"), "dense")
    assert list(picked["lazy"].tensordicts[0].keys()) == ["x"]
    dropped = td.exclude(("lazy", "n"))
    assert "n" not in dropped["lazy"].tensordicts[1] and "n" in td["lazy"].tensordicts[1]
    target = td.clone().zero_()
    target.update_(td)
    assert torch.equal(target["lazy"].tensordicts[1]["x"], torch.arange(3.0))
    dense = TensorDict({"lazy": {"x": torch.zeros(2, 3), "keep": torch.ones(2, 1)}}, [2])
    dense.update(td)  # the dense level becomes lazy, entries it alone held kept
    assert isinstance(dense["lazy"], LazyStackedTensorDict)
    assert torch.equal(dense["lazy"].tensordicts[0]["x"], torch.arange(2.0))
    assert torch.equal(dense["lazy"].tensordicts[1]["keep"], torch.ones(1))


def test_stack_of_parents_keeps_the_parent_dense() -> None:
    td = _parent()
    both = torch.stack([td, td + 1])
    assert type(both) is TensorDict and isinstance(both["lazy"], LazyStackedTensorDict)
    assert both["lazy"].batch_size == (2, 2)
    assert torch.equal(both[1]["lazy"].tensordicts[1]["x"], torch.arange(3.0) + 1)


def test_pickle_keeps_a_ragged_child() -> None:
    td = _parent()
    back = pickle.loads(pickle.dumps(td))
    assert isinstance(back["lazy"], LazyStackedTensorDict)
    assert_close(back, td)


def test_cat_lazy_stacks_along_and_across_the_stack_dim() -> None:
    a = _ragged()
    along = torch.cat([a, a + 1], 0)
    assert isinstance(along, LazyStackedTensorDict) and len(along.tensordicts) == 4
    assert torch.equal(along.tensordicts[3]["x"], torch.arange(3.0) + 1)
    members = [TensorDict({"v": torch.full((2, 3), float(i))}, [2]) for i in range(2)]
    lazy = lazy_stack(members, 0)
    dense = TensorDict({"v": torch.arange(12.0).reshape(2, 2, 3)}, [2, 2])
    across = torch.cat([lazy, dense], 1)
    assert isinstance(across, LazyStackedTensorDict) and across.batch_size == (2, 4)
    assert torch.equal(across["v"], torch.cat([lazy["v"], dense["v"]], 1))
    with pytest.raises(RuntimeError, match="same number of stacked tensordicts"):
        torch.cat([lazy, TensorDict({"v": torch.zeros(3, 2, 3)}, [3, 2])], 1)
    out = TensorDict({"v": torch.zeros(4, 2, 3)}, [4, 2])
    assert torch.cat([lazy, dense], 0, out=out) is out
    assert torch.equal(out["v"], torch.cat([lazy["v"], dense["v"]], 0))


def test_mask_off_the_stack_dim_indexes_each_member() -> None:
    members = [TensorDict({"a": torch.full((6, k), float(k))}, [6]) for k in (3, 4)]
    stack = lazy_stack(members, 1)
    mask = torch.tensor([True, False, True, True, False, False])
    picked = stack[mask]
    assert isinstance(picked, LazyStackedTensorDict) and picked.batch_size == (3, 2)
    for got, member in zip(picked.tensordicts, members, strict=True):
        assert torch.equal(got["a"], member["a"][mask])
    dense = lazy_stack([TensorDict({"a": torch.rand(4, 5)}, [4, 5]) for _ in range(3)], 0)
    grid = torch.rand(3, 4) > 0.5
    assert torch.equal(dense[grid]["a"], dense["a"][grid])


def test_empty_stack_batch_size_and_device() -> None:
    empty = LazyStackedTensorDict(stack_dim=1, batch_size=[1, 2], device="cpu")
    assert empty.batch_size == (1, 0, 2) and empty.device == torch.device("cpu")
    assert LazyStackedTensorDict(stack_dim=0, batch_size=[0, 3]).batch_size == (0, 3)


def test_insert_refuses_a_tensor() -> None:
    stack = lazy_stack([TensorDict({"a": torch.zeros(4)}, [4])] * 2)
    with pytest.raises(TypeError, match="Expected new value to be TensorDictBase instance"):
        stack.insert(0, torch.rand(10))
    with pytest.raises(ValueError, match="Batch sizes in tensordicts differs"):
        stack.append(TensorDict({"a": torch.ones(17)}, [17]))


def test_lists_follow_set_list_to_stack() -> None:
    with set_list_to_stack(True):
        stack = LazyStackedTensorDict(TensorDict(), TensorDict())
        stack["s"] = ["0", "1"]
        assert stack[1]["s"] == "1"
        grid = lazy_stack([lazy_stack([TensorDict() for _ in range(2)]) for _ in range(3)], 1)
        grid["t"] = [[torch.ones(i + j + 1) for j in range(3)] for i in range(2)]
        assert grid[1, 2]["t"].shape == (4,)
        with pytest.raises(ValueError, match=r"shape \(3,\) of key 's' does not start with"):
            stack["s"] = ["a", "b", "c"]
        with pytest.raises(RuntimeError, match="batch dimension mismatch"):
            TensorDict({"z": ["a", "b", "c"]}, [3, 4])
    with set_list_to_stack(False):
        td = TensorDict({"z": ["a", "b", "c"]}, [3, 4])
        assert isinstance(td.get("z"), NonTensorData) and td["z"] == ["a", "b", "c"]


def test_non_tensor_entries_are_compared() -> None:
    td = TensorDict({"a": torch.zeros(2), "s": "x", "n": {"t": "y"}}, [2])
    other = td.clone()
    other["n", "t"] = "z"
    eq = td == other
    assert torch.equal(eq["s"], torch.ones(2, dtype=torch.bool))
    assert torch.equal(eq["n", "t"], torch.zeros(2, dtype=torch.bool))
    assert torch.equal((td != other)["n", "t"], torch.ones(2, dtype=torch.bool))
    flags = TensorDict({"f": NonTensorData(True)}, [])
    assert (flags ^ flags).get("f").data is False
    assert (flags | flags).get("f").data is True


def test_reflected_bitwise_ops() -> None:
    td = TensorDict({"m": torch.tensor([True, False])}, [2])
    assert torch.equal((True ^ td)["m"], torch.tensor([False, True]))
    assert torch.equal((False | td)["m"], td["m"])
    assert torch.equal((True & td)["m"], td["m"])


def test_zero_dim_index_error_is_runtime_error_too() -> None:
    with pytest.raises(RuntimeError, match="batch_dims==0 is not permitted"):
        TensorDict({"a": torch.zeros(3)})[1]
    with pytest.raises(IndexError, match="batch_dims==0 is not permitted"):
        TensorDict({"a": torch.zeros(3)})[1]


def test_to_inplace_and_to_dict_keywords() -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2])
    assert td.to(torch.float64, inplace=True) is td and td["n", "b"].dtype == torch.float64
    assert td.to_dict(convert_tensors=True) == {"a": [0.0, 0.0], "n": {"b": [1.0, 1.0]}}
    assert td.to_dict(retain_none=False)["a"] is td["a"]


def test_lazy_stack_to_inplace_converts_each_member_where_it_is() -> None:
    # was a NotImplementedError; members (and their nested TensorDicts) keep identity
    members = [
        TensorDict({"a": torch.zeros(3, dtype=torch.long), "n": {"b": torch.ones(3)}}, [3])
        for _ in range(2)
    ]
    stack = lazy_stack(members, 1)
    nested = members[0]["n"]
    assert stack.to(torch.float64, inplace=True) is stack
    assert stack.tensordicts[0] is members[0] and members[0]["n"] is nested
    assert members[1]["a"].dtype == torch.float64 and stack["n", "b"].dtype == torch.float64
    assert stack.to("cpu", inplace=True).device == torch.device("cpu")
    assert members[0].device == torch.device("cpu")
    with pytest.raises(
        NotImplementedError,
        match=r"flatten: inplace=True .* as many members along the same dim and of the same batch size",
    ):
        stack.flatten(0, 1, inplace=True)  # its result is no stack of these members
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        stack.lock_().to(torch.float32, inplace=True)
    assert members[0]["a"].dtype == torch.float64


def test_lazy_to_inplace_is_all_or_nothing_and_keeps_nested_stacks() -> None:
    # a locked member refused the call after member 0 was already converted
    members = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)]
    members[1].lock_()
    stack = lazy_stack(members)
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        stack.to(torch.float64, inplace=True)
    assert [m["a"].dtype for m in members] == [torch.float32] * 3
    # a lazy stack nested in a member is converted where it is (it was replaced)
    inner = lazy_stack(
        [
            TensorDict({"b": torch.zeros(2)}, [2]),
            TensorDict({"b": torch.zeros(2), "c": torch.zeros(2)}, [2]),
        ],
        1,
    )
    member = TensorDict({"a": torch.zeros(2), "l": inner}, [2])
    outer = lazy_stack([member, member.clone()])
    nested = outer.tensordicts[0]["l"]
    assert outer.to(torch.float64, inplace=True) is outer
    assert outer.tensordicts[0]["l"] is nested and nested["b"].dtype == torch.float64


def test_update_with_keyword_entries() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    td.update({"a": torch.ones(2)}, b=torch.full((2,), 2.0))
    assert td["a"].tolist() == [1.0, 1.0] and td["b"].tolist() == [2.0, 2.0]
    td.update_(b=torch.zeros(2))
    assert td["b"].tolist() == [0.0, 0.0]
    assert td.update() is td and td.update_() is td


def test_nested_stacks_answer_as_list_and_padded() -> None:
    inner = lazy_stack([TensorDict(a=torch.ones(3)), TensorDict(a=torch.ones(4))])
    outer = lazy_stack([inner, inner.clone()])
    parts = outer.get("a", as_list=True)
    assert [[t.shape[0] for t in row] for row in parts] == [[3, 4], [3, 4]]
    padded = outer.get("a", as_padded_tensor=True)
    assert padded.shape == (2, 2, 4) and padded[0, 0, 3] == 0
    assert outer.get("missing", None) is None


def test_membership_split_and_empty_selection() -> None:
    members = [TensorDict({"a": torch.full((2, k), float(k))}, [2]) for k in (3, 4, 5)]
    stack = lazy_stack(members, 1)
    assert members[1] in stack and members[1].clone() not in stack and "a" in stack
    pieces = stack.split([2, 0, 1], 1)
    assert [p.batch_size for p in pieces] == [(2, 2), (2, 0), (2, 1)]
    rebuilt = torch.cat(pieces, 1)
    assert [m["a"].shape[1] for m in rebuilt.tensordicts] == [3, 4, 5]
    empty = stack[:, 0:0]  # no member selected: a dense empty TensorDict, as upstream
    assert type(empty) is TensorDict and empty.batch_size == (2, 0)
    assert empty["a"].shape == (2, 0, 3)


def test_new_zeros_keeps_non_tensor_stacks() -> None:
    td = TensorDict(a=TensorDict(b=NonTensorStack("x", "y", "z").unsqueeze(-1), batch_size=[3]))
    td.batch_size = [3]
    fresh = td.new_zeros(4, empty_lazy=True)
    assert isinstance(fresh.get(("a", "b")), NonTensorStack)
    assert fresh.get(("a", "b")).batch_size == (4, 1)
    fresh[torch.tensor([True, False, True, True])] = td
    assert fresh.get(("a", "b")).tolist() == [["x"], ["x"], ["y"], ["z"]]


def test_contiguous_takes_canonical() -> None:
    stack = lazy_stack([TensorDict(q=NonTensorData(f"s{i}"), x=torch.zeros(())) for i in range(2)])
    dense = stack.contiguous(canonical=True)
    assert type(dense) is TensorDict and dense.get("q").tolist() == ["s0", "s1"]
    words = NonTensorStack("a", "b")
    assert words.contiguous(canonical=False) is words


def test_utils_logger() -> None:
    from tensordict.utils import logger

    assert logger.name == "tensordict"


def test_capture_non_tensor_stack_flag() -> None:
    from tensordict import set_capture_non_tensor_stack

    tds = [TensorDict({"s": "x"}, []), TensorDict({"s": "x"}, [])]
    never_set = torch.stack(tds).get("s")  # never set: one value per element, as upstream
    assert isinstance(never_set, NonTensorStack) and never_set.tolist() == ["x", "x"]
    with set_capture_non_tensor_stack(False):
        kept = torch.stack(tds).get("s")
        assert isinstance(kept, NonTensorStack) and kept.tolist() == ["x", "x"]
    with set_capture_non_tensor_stack(True):
        assert isinstance(torch.stack(tds).get("s"), NonTensorData)


def test_densify_with_a_layout() -> None:
    m0 = TensorDict(a=torch.zeros(1), b=torch.zeros(2), d=TensorDict(e=torch.zeros(())))
    m1 = TensorDict(b=torch.ones(1), c=torch.ones(2), d=TensorDict(e=torch.ones(())))
    stack = lazy_stack([m0, m1])
    for layout in (torch.jagged, torch.strided):
        dense = stack.densify(layout=layout)
        assert type(dense) is TensorDict and dense["b"].is_nested
        assert torch.equal(dense["d", "e"], torch.tensor([0.0, 1.0]))
        assert dense["c"].unbind(0)[0].shape == (0,)  # m0 lacks c: no rows, as upstream
        parent = TensorDict(s=stack, batch_size=[2]).densify(layout=layout)
        assert torch.equal(parent["s", "b"].unbind(0)[1], torch.ones(1))
    with pytest.raises(ValueError, match="layout must be torch.strided or torch.jagged"):
        stack.densify(layout=torch.sparse_coo)
    default = stack.densify()  # strided nested tensors by default, as upstream
    assert default["b"].is_nested and default["b"].layout == torch.strided
    assert torch.equal(default["b"].unbind(0)[1], torch.ones(1))
    plain = TensorDict(a=torch.zeros(2), n=TensorDict(b=torch.ones(2, 1), batch_size=[2]))
    assert plain.densify() is plain  # nothing lazy below: the collection itself
    uniform = lazy_stack([m0.clone(), m0.clone()])
    assert uniform.densify()["b"].shape == (2, 2) and not uniform.densify()["b"].is_nested


def test_bool_scalars_index_a_lazy_stack_as_masks() -> None:
    stack = lazy_stack([TensorDict({"a": torch.full((), float(i))}) for i in range(2)])
    assert stack[True].batch_size == (1, 2) and stack[False].batch_size == (0, 2)
    assert stack[(torch.tensor(True),)]["a"].tolist() == [[0.0, 1.0]]
    with pytest.raises(NotImplementedError, match="scalar False inside a tuple"):
        stack[(torch.tensor(False),)]


def test_stack_keeps_dense_above_a_differing_nested_level() -> None:
    a = TensorDict({"x": torch.zeros(()), "n": TensorDict({"c": torch.zeros(())})})
    b = TensorDict({"x": torch.ones(()), "n": TensorDict({"d": torch.ones(())})})
    both = torch.stack([a, b])
    assert type(both) is TensorDict and isinstance(both["n"], LazyStackedTensorDict)
    assert torch.equal(both["x"], torch.tensor([0.0, 1.0]))


def test_update_batch_size() -> None:
    for make_lazy in (False, True):
        stack = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4]).to_lazystack(0)
        src = TensorDict(a=torch.ones(2, 4), batch_size=[2, 4])
        stack.update(src.to_lazystack(0) if make_lazy else src, update_batch_size=True)
        assert stack.batch_size == (2, 4) and torch.equal(stack["a"], torch.ones(2, 4))
    td = TensorDict(a=torch.zeros(3), c=torch.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=r"keys \['c'\] are not in the source"):
        td.update(TensorDict(a=torch.ones(2), batch_size=[2]), update_batch_size=True)
    assert td.batch_size == (3,) and torch.equal(td["a"], torch.zeros(3))  # left unchanged
    td.update(TensorDict(a=torch.ones(2), c=torch.ones(2), batch_size=[2]), update_batch_size=True)
    assert td.batch_size == (2,) and torch.equal(td["c"], torch.ones(2))


def test_densify_keeps_non_tensor_entries_names_and_empty_levels() -> None:
    a = TensorDict(a=torch.zeros(3), s="x", e=TensorDict())
    b = TensorDict(a=torch.ones(4), s="y", e=TensorDict(), only=torch.ones(2))
    dense = lazy_stack([a, b], stack_dim_name="t").densify()
    assert dense["s"] == ["x", "y"] and dense.names == ["t"]
    assert "e" in dense.keys() and dense["e"].is_empty()
    only = dense["only"].unbind(0)
    assert only[0].shape == (0,) and only[1].tolist() == [1.0, 1.0]  # a lacks it: no rows
    partial = lazy_stack([TensorDict(a=torch.zeros(1), s="x"), TensorDict(a=torch.ones(2))])
    assert partial.densify()["s"] == ["x", None]
