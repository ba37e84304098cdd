"""select/exclude/rename/flatten/unflatten/empty/is_empty and apply, over the catalogue."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, TensorDictBase, is_leaf_nontensor, is_tensorclass, lazy_stack
from tests.catalogue import assert_same, assert_shares, leaves


def test_select_exclude(example: TensorDict) -> None:
    keys = list(example.keys(True, True))
    picked = example.select(*keys[:1])
    assert set(picked.keys(True, True)) == set(keys[:1])
    rest = example.exclude(*keys[:1])
    assert set(rest.keys(True, True)) == set(keys[1:])
    assert_shares(rest, example, keys[1:])


def test_select_strict_and_inplace() -> None:
    td = TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)}, [1])
    with pytest.raises(KeyError, match=r"TensorDict.select: keys not found: \['c', \('x', 'y'\)\]"):
        td.select("a", "c", ("x", "y"))
    assert list(td.select("a", "c", strict=False).keys()) == ["a"]
    assert td.select("a", inplace=True) is td and list(td.keys()) == ["a"]


def test_rename_key() -> None:
    td = TensorDict({"a": torch.zeros(1), "b": torch.ones(1), "s": "x"}, [1])
    td.rename_key_("a", ("n", "a"))
    assert list(td.keys(True)) == ["b", "s", "n", ("n", "a")]
    with pytest.raises(KeyError, match=r"already present in TensorDict \(safe=True\)"):
        td.rename_key_("b", ("n", "a"), safe=True)
    with pytest.raises(KeyError, match="TensorDict.rename_key_: key 'zz' was not found in"):
        td.rename_key_("zz", "y")
    td.rename_key_("s", "t")
    assert td["t"] == "x"


def test_flatten_unflatten_round_trip(example: TensorDict) -> None:
    if is_tensorclass(example):  # its nested field's flat keys would not be fields
        with pytest.raises(ValueError, match="flatten_keys: the fields"):
            example.flatten_keys(".")
        example = example.to_tensordict()
    flat = example.flatten_keys(".")
    assert all(isinstance(k, str) for k in flat.keys())
    assert not any(isinstance(v, TensorDict) for v in flat.values())
    back = flat.unflatten_keys(".")
    assert set(back.keys(True, True)) == set(example.keys(True, True))
    assert_shares(back, example, list(leaves(example)))


def test_seed_flatten_keys() -> None:
    data = TensorDict(
        {
            "key 1": torch.ones(3, 4, 5),
            "key 2": TensorDict({"sub-key": torch.randn(3, 4, 5, 6)}, batch_size=[3, 4, 5]),
        },
        batch_size=[3, 4],
    )
    assert sorted(data.flatten_keys(separator=".").keys()) == ["key 1", "key 2.sub-key"]


def test_flatten_unflatten_errors() -> None:
    td = TensorDict({"a.b": torch.zeros(1), "a": {"b": torch.zeros(1)}}, [1])
    with pytest.raises(ValueError, match=r"key 'a.b' appears twice after flattening"):
        td.flatten_keys()
    with pytest.raises(ValueError, match=r"key 'a..b' splits into an empty part"):
        TensorDict({"a..b": torch.zeros(1)}, [1]).unflatten_keys()
    with pytest.raises(ValueError, match=r"needs 'a' to be nested, but it holds a leaf"):
        TensorDict({"a": torch.zeros(1), "a.b": torch.zeros(1)}, [1]).unflatten_keys()


def test_empty_and_is_empty(example: TensorDict) -> None:
    e = example.empty()
    assert e.batch_size == example.batch_size and not list(e.keys()) and e.is_empty()
    deep = example.empty(recurse=True)
    kept = [k for k, v in example.items() if not isinstance(v, torch.Tensor)]
    assert sorted(deep.keys()) == sorted(kept)  # nested levels and non-tensor entries
    assert not list(deep.keys(True, True))  # no tensor leaf at any depth
    assert deep.is_empty() == (kept == [k for k in kept if isinstance(example[k], TensorDictBase)])
    assert not example.is_empty()


def test_apply_filter_and_options() -> None:
    data = TensorDict(
        {"a": torch.tensor(1.0), "b": torch.tensor(1), "n": {"c": torch.tensor(2)}}, []
    )
    data_float = data.apply(lambda x: x if x.dtype == torch.float else None)
    assert "b" not in data_float and "n" not in data_float
    kept = data.apply(lambda x: x if x.dtype == torch.float else None, filter_empty=False)
    assert "n" in kept and kept["n"].is_empty()
    td = TensorDict({"x": torch.ones(2, 3)}, [2])
    summed = td.apply(lambda x: x.sum(0), batch_size=[])
    assert summed.batch_size == torch.Size([]) and summed["x"].shape == (3,)
    other = TensorDict({"x": torch.full((2, 3), 2.0)}, [2])
    assert torch.equal(td.apply(lambda x, y: x * y, other)["x"], torch.full((2, 3), 2.0))
    on_nested = TensorDict({"n": {"c": torch.ones(2)}}, [2]).apply(
        lambda v: v.clone() if isinstance(v, TensorDict) else v, call_on_nested=True
    )
    assert isinstance(on_nested["n"], TensorDict)
    with pytest.raises(
        ValueError,
        match=r"TensorDict.apply: shape \(3,\) of key 'x' does not start with batch_size \(2,\)",
    ):
        td.apply(lambda x: x[0])
    with pytest.raises(TypeError, match="the function returned int for key 'x'"):
        td.apply(lambda x: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(KeyError, match="key 'x' is missing from one of the other TensorDicts"):
        td.apply(lambda x, y: x, TensorDict({}, [2]))


def test_apply_matches_leafwise(example: TensorDict) -> None:
    out = example.apply(lambda x: x.detach() * 2 if x.is_floating_point() else x)
    for key, x in leaves(example).items():
        want = x.detach() * 2 if x.is_floating_point() else x
        torch.testing.assert_close(out.get(key), want)


def test_apply_inplace_and_named_apply() -> None:
    a = torch.ones(2)
    td = TensorDict({"a": a, "n": {"b": torch.ones(2)}}, [2])
    assert td.apply_(lambda x: x + 1) is td
    assert td["a"] is a and (a == 2).all()
    td.apply(lambda x: x * 0, inplace=True)
    assert (a == 0).all()
    names = []
    td.named_apply(lambda k, x: names.append(k), nested_keys=True)
    assert names == ["a", ("n", "b")]
    flat_names = []
    td.named_apply(lambda k, x: flat_names.append(k))
    assert flat_names == ["a", "b"]


def test_seed_apply_uniform() -> None:
    data = TensorDict({"key 1": torch.ones(3, 4, 5)}, batch_size=[3, 4])
    out = data.apply(lambda tensor: tensor.uniform_())
    assert ((out["key 1"] >= 0) & (out["key 1"] <= 1)).all()
    assert_same(out, data)


def test_flatten_keys_is_leaf_keeps_accepted_collections_whole() -> None:
    inner = TensorDict({"x": torch.zeros(2, 3), "deep": {"y": torch.ones(2)}}, [2])
    td = TensorDict({"a": torch.zeros(2), "inner": inner, "s": "text"}, [2])
    whole = td.flatten_keys("/", is_leaf=lambda cls: cls is TensorDict)
    assert list(whole.keys()) == ["inner"] and whole["inner"] is inner
    tensors = td.flatten_keys("/", is_leaf=lambda cls: issubclass(cls, torch.Tensor))
    assert sorted(tensors.keys()) == ["a", "inner/deep/y", "inner/x"]  # "s" is no leaf here
    assert tensors["inner/x"] is inner["x"]
    assert sorted(td.flatten_keys("/", is_leaf=is_leaf_nontensor).keys()) == sorted(
        td.flatten_keys("/").keys()
    )
    stack = lazy_stack([td, td.clone()])
    assert sorted(stack.flatten_keys("/", is_leaf=lambda c: c is TensorDict).keys()) == ["inner"]


def test_apply_keeps_a_non_tensor_result_as_non_tensor_data() -> None:
    td = TensorDict({"a": torch.zeros(2, 3), "n": {"b": torch.ones(2, dtype=torch.int64)}}, [2])
    out = td.apply(lambda t: str(t.dtype))
    assert out["a"] == "torch.float32" and out["n", "b"] == "torch.int64"
    assert out.get("a").batch_size == (2,) and out["n"].batch_size == (2,)
    dtypes = td.apply(lambda x, y: x.dtype, td.clone())
    assert dtypes["n", "b"] is torch.int64
    assert lazy_stack([td, td]).apply(lambda t: "s")["a"] == [["s", "s"], ["s", "s"]]
    for bad in (3, [1], {"k": 1}):
        with pytest.raises(TypeError, match=r"apply: the function returned \w+ for key 'a'"):
            td.apply(lambda t, bad=bad: bad)
