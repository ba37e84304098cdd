"""Non-tensor entries and odd leaves against upstream: data_ptr, auto_batch_size_,
item assignment on non-tensor entries, tensor/non-tensor mismatches in binary ops,
nocast list fields, nested tensors, pytree keys."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from tensordict import (
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorClass,
    TensorDict,
    lazy_stack,
    set_list_to_stack,
)


# ------------------------------------------------------------------ data_ptr
def test_data_ptr_leaves_out_non_tensor_entries() -> None:
    a, b = torch.zeros(2), torch.ones(2, 3)
    td = TensorDict(
        a=a,
        s=NonTensorData("x", batch_size=[2]),
        n={"b": b, "s": "y"},
        m={"s": "z"},  # a level with no tensor: left out
        batch_size=[2],
    )
    ptrs = td.data_ptr()
    assert ptrs.batch_size == torch.Size([])
    assert list(ptrs.keys(True)) == ["a", "n", ("n", "b")]  # no "s", no "m"
    assert ptrs["a"].item() == a.data_ptr()
    assert ptrs["n", "b"].item() == b.data_ptr()
    sptrs = td.data_ptr(storage=True)
    assert sptrs["n", "b"].item() == b.untyped_storage().data_ptr()


def test_data_ptr_of_non_tensor_entries_is_empty() -> None:
    for entry in (NonTensorData("x", batch_size=[2]), NonTensorStack("a", "b")):
        out = entry.data_ptr()
        assert isinstance(out, TensorDict) and out.is_empty()


def test_data_ptr_of_lazy_stack_is_per_member() -> None:
    x, y = torch.zeros(1), torch.zeros(2)
    s = lazy_stack([TensorDict(a=x, s="p"), TensorDict(a=y, s="q")])
    ptrs = s.data_ptr()
    assert list(ptrs.keys()) == ["0", "1"]
    assert ptrs["0", "a"].item() == x.data_ptr() and ptrs["1", "a"].item() == y.data_ptr()


# ----------------------------------------------------------- auto_batch_size_
def test_auto_batch_size_counts_non_tensor_batch_size() -> None:
    td = TensorDict(
        a=torch.zeros(4, 3, 2, 5), data={"nt": NonTensorData("x")}, batch_size=[4, 3, 2]
    )
    td.batch_size = []  # the nested level keeps its own batch size (4, 3, 2)
    assert td.auto_batch_size_().batch_size == torch.Size([4, 3, 2])
    assert td.get(("data", "nt")).batch_size == torch.Size([4, 3, 2])
    only = TensorDict(data={"nt": NonTensorData("x")}, batch_size=[4, 3])
    only.batch_size = []
    assert only.auto_batch_size_().batch_size == torch.Size([4, 3])


def test_auto_batch_size_non_tensor_rules() -> None:
    # a 0-dim entry does not limit the batch; a stack limits it to its own batch size
    assert TensorDict(a=torch.zeros(4, 3), s="x").auto_batch_size_().batch_size == (4, 3)
    stack = NonTensorStack("a", "b", "c", "d")
    assert TensorDict(a=torch.zeros(4, 3), s=stack).auto_batch_size_().batch_size == (4,)
    nested = TensorDict(a=torch.zeros(4, 3), n={"s": "x", "b": torch.zeros(4, 3, 2)})
    assert nested.auto_batch_size_().batch_size == (4, 3)


# ------------------------------------------------------------- __setitem__
def test_non_tensor_stack_setitem() -> None:
    s = NonTensorStack("a", "b", "c")
    s[0] = "x"
    assert s.tolist() == ["x", "b", "c"]
    s[1:] = ["y", "z"]  # a list shaped like the indexed elements: one value each
    assert s.tolist() == ["x", "y", "z"]
    s[torch.tensor([True, False, True])] = NonTensorStack("p", "q")
    assert s.tolist() == ["p", "y", "q"]
    s[1] = 5  # kept as it is, not made a tensor
    assert s.tolist() == ["p", 5, "q"]
    grid = NonTensorStack(NonTensorStack("a", "b"), NonTensorStack("c", "d"))
    grid[0] = "x"
    assert grid.tolist() == [["x", "x"], ["c", "d"]]


def test_non_tensor_stack_setitem_new_dims() -> None:
    t = NonTensorStack(NonTensorStack("2", "3"), stack_dim=1)
    assert t.batch_size == (2, 1)
    for index in ((slice(None), None), (slice(None), True)):
        s = NonTensorStack("0", "1")
        s[index] = t
        assert s.tolist() == ["2", "3"]


def test_non_tensor_data_setitem() -> None:
    d = NonTensorData("a", batch_size=[])
    d[True] = NonTensorStack("b")
    assert isinstance(d, NonTensorData) and d.data == "b"
    d3 = NonTensorData("a", batch_size=[3])
    d3[:] = "x"  # every element: still one value
    assert d3.data == "x" and d3.batch_size == (3,)
    d3[0] = "x"  # the value it holds
    assert d3.data == "x"
    with pytest.raises(ValueError, match=r"NonTensorData.__setitem__: .*maybe_to_stack"):
        d3[0] = "y"
    assert d3.data == "x"  # untouched


def test_metadata_setitem_keeps_its_type() -> None:
    m = MetaData("a", batch_size=[3])
    m[:] = "b"
    assert type(m) is MetaData and m.data == "b"
    with pytest.raises(ValueError, match=r"MetaData.__setitem__: a MetaData holds one value"):
        m[0] = "z"
    typed = MetaData[int](3, batch_size=[2])
    typed[:] = 5
    assert typed.data == 5
    with pytest.raises(TypeError, match="Expected data of type int"):
        typed[:] = "x"
    assert typed.data == 5


def test_setitem_reaches_the_parent_through_get() -> None:
    td = TensorDict(s=NonTensorStack("a", "b"), batch_size=[2])
    entry = td.get("s")  # the stored entry: a write to it is a write to the TensorDict
    entry[1] = "z"
    assert td.get("s").tolist() == ["a", "z"] and td[1]["s"] == "z"


# ------------------------------------------------ tensor vs non-tensor in ops
def test_binary_op_tensor_against_non_tensor_names_the_kinds() -> None:
    t = TensorDict(x=torch.zeros(2), batch_size=[2])
    n = TensorDict(x=NonTensorData("x", batch_size=[2]), batch_size=[2])
    with pytest.raises(TypeError, match=r"TensorDict.eq: .*'x' holds a Tensor here and a Non"):
        _ = t == n
    with pytest.raises(TypeError, match=r"TensorDict.add: .*'x' holds a NonTensorData here"):
        _ = n + t
    nested = TensorDict(n={"x": torch.zeros(2)}, batch_size=[2])
    other = TensorDict(n={"x": "s"}, batch_size=[2])
    with pytest.raises(TypeError, match=r"\('n', 'x'\) holds a Tensor here"):
        _ = nested == other


def test_binary_op_key_mismatch_still_key_error() -> None:
    t = TensorDict(x=torch.zeros(2), y=torch.zeros(2), batch_size=[2])
    n = TensorDict(x=NonTensorData("x", batch_size=[2]), batch_size=[2])
    with pytest.raises(KeyError, match=r"missing from the other: \['x', 'y'\].*'x' holds a"):
        _ = t == n
    same = TensorDict(x=NonTensorData("x", batch_size=[2]), batch_size=[2])
    assert (n == same)["x"].tolist() == [True, True]


# ----------------------------------------------------------- nocast lists
class _Raw(TensorClass["nocast"]):
    foo: Any


def test_nocast_batch_shaped_list_is_one_value_per_element() -> None:
    tc = _Raw(foo=[["a", "b", "c"], ["d", "e", "f"]], batch_size=[2, 3])
    assert tc[1, 2].foo == "f"
    assert tc[0].foo == ["a", "b", "c"]
    assert tc.foo == [["a", "b", "c"], ["d", "e", "f"]]
    nums = _Raw(foo=[1, 2], batch_size=[2])  # numbers stay numbers (nocast)
    assert nums.foo == [1, 2] and nums[1].foo == 2 and type(nums[1].foo) is int


def test_nocast_other_lists_stay_whole() -> None:
    assert _Raw(foo=[1, 2], batch_size=[3])[0].foo == [1, 2]  # not batch-shaped
    assert _Raw(foo=[1, 2], batch_size=[]).foo == [1, 2]
    with set_list_to_stack(False):
        assert _Raw(foo=["a", "b"], batch_size=[2])[0].foo == ["a", "b"]


@pytest.mark.parametrize("build", ["td", "set", "nocast"])
def test_a_batch_long_list_of_lists_gives_each_element_its_own_list(build: str) -> None:
    rows = [["a", "b"], ["c", "d", "e"]]  # ragged below the batch: the lists are the values
    grid = [["a", 1], ["c", 2]]  # regular: stacked as deep as it goes, as upstream
    for value, first, shape in ((rows, ["a", "b"], (2,)), (grid, ["a", 1], (2, 2))):
        if build == "td":
            x: Any = TensorDict(k=value, batch_size=[2])
        elif build == "set":
            x = TensorDict(batch_size=[2]).set("k", value)
        else:
            x = _Raw(foo=value, batch_size=[2])
        key = "foo" if build == "nocast" else "k"
        assert x[0][key] == first and x[1][key] == value[1]
        assert x.get(key).batch_size == shape and x[key] == value


def test_a_list_in_a_zero_dim_collection_is_stacked_as_upstream() -> None:
    td = TensorDict(k=["a", "b"], x=torch.zeros(2))
    assert type(td.get("k")) is NonTensorStack and td.get("k").batch_size == (2,)
    assert td["k"] == ["a", "b"]
    td.auto_batch_size_()  # a batch dim found later: each element reads its own value
    assert td.batch_size == (2,) and td[1]["k"] == "b"
    ragged = TensorDict(k=[["a"], ["b", "c"]])
    assert ragged.get("k").batch_size == (2,) and ragged["k"] == [["a"], ["b", "c"]]
    assert _Raw(foo=["a", "b"], batch_size=[]).get("foo").batch_size == (2,)


# ------------------------------------------------------------ nested tensors
def _strided_nested() -> torch.Tensor:
    with warnings.catch_warnings():  # torch: the strided layout is a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])


def test_strided_nested_tensor_leaf_is_checked_on_its_regular_dims() -> None:
    nt = _strided_nested()  # two elements, of shapes (2,) and (3,)
    assert TensorDict(a=nt, batch_size=[2])["a"] is nt  # as upstream: its element count fits
    assert TensorDict({"x": {"b": nt}}, batch_size=[2])["x", "b"] is nt
    assert TensorDict(batch_size=[2]).set("a", nt)["a"] is nt
    ragged = r"key 'a' holds a nested tensor whose elements differ in a batch dim"
    with pytest.raises(TypeError, match=r"TensorDict: " + ragged):
        TensorDict({"a": nt}, batch_size=[2, 1])
    with pytest.raises(TypeError, match=r"TensorDict.set: " + ragged):
        TensorDict(batch_size=[2, 2]).set("a", nt)
    with pytest.raises(ValueError, match=r"key 'b' does not start with batch_size \(3,\)"):
        TensorDict({"x": {"b": nt}}, batch_size=[3])
    # padded, it is an ordinary leaf
    padded = torch.nested.to_padded_tensor(nt, 0.0)
    assert TensorDict(a=padded, batch_size=[2])["a"].shape == (2, 3)


def test_shape_mismatch_is_still_batch_dim_error() -> None:
    with pytest.raises(ValueError, match="does not start with batch_size"):
        TensorDict({"a": torch.zeros(3)}, batch_size=[2, 1])
    with pytest.raises(ValueError, match="does not start with batch_size"):
        TensorDict(batch_size=[2]).set("a", torch.zeros(3))


# ------------------------------------------------------------------- pytree
class _Key:
    pass


def test_pytree_keeps_non_string_keys() -> None:
    key = _Key()
    tree = {"a": torch.zeros(2), key: torch.ones(2), 3: [torch.zeros(1)]}
    td = TensorDict.from_pytree(tree)
    assert "3" in td.keys()
    back = td.to_pytree()
    assert list(back) == ["a", key, 3]
    assert torch.equal(back[key], tree[key]) and torch.equal(back[3][0], tree[3][0])
    assert isinstance(back[3], list)


def test_pytree_key_collision_raises() -> None:
    with pytest.raises(ValueError, match=r"from_pytree: the dict keys 3 and '3' both"):
        TensorDict.from_pytree({3: torch.zeros(1), "3": torch.zeros(1)})
    with pytest.raises(ValueError, match=r"from_pytree: the key '_pytree_keys' is reserved"):
        TensorDict.from_pytree({"_pytree_keys": torch.zeros(1)})


def test_shape_methods_take_upstreams_keywords() -> None:
    s = NonTensorStack("a", "b", "c", "d")
    assert s.view(size=(2, 2)).tolist() == [["a", "b"], ["c", "d"]]
    assert s.view(batch_size=(4, 1)).batch_size == (4, 1)
    assert s.unflatten(0, unflattened_size=(2, 2)).batch_size == (2, 2)
    assert s.repeat_interleave(2, output_size=8).tolist()[:3] == ["a", "a", "b"]
    assert s.contiguous(inplace=True) is s
    assert NonTensorStack.from_list(non_tensors=["x", "y"]).tolist() == ["x", "y"]
    for name, args in (("unflatten", (0, (2, 2))), ("flatten", ()), ("repeat", (2,))):
        with pytest.raises(NotImplementedError, match=rf"NonTensorStack.{name}: inplace=True"):
            getattr(s, name)(*args, inplace=True)  # as upstream: a stack is not resized
    assert s.batch_size == (4,)
    one = NonTensorData("x", batch_size=[2, 2])
    assert one.flatten(inplace=True) is one and one.batch_size == (4,)
    with pytest.raises(ValueError, match=r"NonTensorData.repeat: inplace=True would turn"):
        one.repeat(2, inplace=True)  # one value spread into a stack: not the same object
    assert one.batch_size == (4,)


def test_tolist_options() -> None:
    s = NonTensorStack("a", "b")
    rows = s.tolist(convert_nodes=True, tolist_first=False, as_linked_list=True)
    rows[1] = "z"
    assert s.tolist() == ["a", "z"] and rows == ["a", "z"]
    t = NonTensorStack(torch.ones(2), torch.zeros(2))
    assert t.tolist(convert_tensors=True) == [[1.0, 1.0], [0.0, 0.0]]
    arrays = t.tolist(convert_tensors="numpy")
    assert type(arrays[0]).__name__ == "ndarray"
    assert NonTensorData("x", batch_size=[2]).tolist(convert_tensors=True) == ["x", "x"]
    assert NonTensorData("x").tolist(as_linked_list=True) == "x"  # 0-dim: the value
