"""Core parity with upstream 0.15.3: apply's is_leaf and keywords, to() identity,
empty(recurse=True) keeping non-tensor entries, lazy-stack masks, nested lazy stacks."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    default_is_leaf,
    is_leaf_nontensor,
)


def _nested() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(2.0), "n": {"b": torch.ones(2, 3)}, "s": "hello"}, batch_size=[2]
    )


def _tds_are_leaves(cls: type) -> bool:
    return issubclass(cls, (torch.Tensor, TensorDictBase))


# ------------------------------------------------------------------ apply(is_leaf=)
def test_apply_is_leaf_passes_nested_td_whole() -> None:
    td = _nested()
    seen: list[type] = []

    def fn(x: Any) -> Any:
        seen.append(type(x))
        return x.apply(lambda y: y.sum(-1)) if isinstance(x, TensorDict) else x + 1

    out = td.apply(fn, is_leaf=_tds_are_leaves)
    assert seen == [torch.Tensor, TensorDict]
    # fn saw the nested TensorDict whole: its result is stored under the key
    assert isinstance(out["n"], TensorDict)
    torch.testing.assert_close(out["n", "b"], td["n", "b"].sum(-1))
    torch.testing.assert_close(out["a"], td["a"] + 1)
    assert out["s"] == "hello"  # non-tensor entries still carried over


def test_apply_is_leaf_nontensor_calls_fn_on_non_tensor() -> None:
    td = _nested()
    out = td.apply(
        lambda x: x.data.upper() if isinstance(x, NonTensorData) else x * 2,
        is_leaf=is_leaf_nontensor,
    )
    assert out["s"] == "HELLO"
    assert isinstance(out.get("s"), NonTensorData) and out.get("s").batch_size == (2,)
    torch.testing.assert_close(out["n", "b"], td["n", "b"] * 2)
    # returning None drops the non-tensor entry too
    kept = td.apply(lambda x: x if isinstance(x, torch.Tensor) else None, is_leaf=is_leaf_nontensor)
    assert sorted(kept.keys()) == ["a", "n"]


def test_apply_default_is_leaf_is_the_plain_walk() -> None:
    td = _nested()
    out = td.apply(lambda x: x * 3, is_leaf=default_is_leaf)
    torch.testing.assert_close(out["n", "b"], td["n", "b"] * 3)
    assert out["s"] == "hello"


def test_named_apply_and_apply_inplace_take_is_leaf() -> None:
    td = _nested()
    seen: list[tuple[Any, type]] = []
    td.named_apply(
        lambda k, x: seen.append((k, type(x))), nested_keys=True, is_leaf=_tds_are_leaves
    )
    assert seen == [("a", torch.Tensor), ("n", TensorDict)]
    b = td["n", "b"]
    td.apply_(lambda x: x.mul(2), is_leaf=_tds_are_leaves)
    assert td["n", "b"] is b  # written into the existing leaf
    torch.testing.assert_close(b, torch.full((2, 3), 2.0))
    torch.testing.assert_close(td["a"], torch.arange(2.0) * 2)


def test_apply_is_leaf_nested_lazy_stack_whole() -> None:
    ragged = LazyStackedTensorDict(
        TensorDict({"x": torch.ones(3)}), TensorDict({"x": torch.ones(3), "y": torch.ones(1)})
    )
    outer = TensorDict({"lz": ragged, "a": torch.ones(2)}, [2])
    seen: list[Any] = []
    out = outer.apply(
        lambda x: seen.append(x) or x,
        is_leaf=lambda cls: issubclass(cls, (torch.Tensor, LazyStackedTensorDict)),
    )
    assert seen[0] is ragged and len(seen) == 2
    assert out["lz"] is ragged


def test_apply_takes_upstream_engine_keywords() -> None:
    td = _nested()
    keys: list[Any] = []
    td.apply(lambda k, x: keys.append(k), named=True, nested_keys=True, checked=True)
    assert keys == ["a", ("n", "b")]
    keys.clear()
    td.apply(lambda k, x: keys.append(k), named=True, nested_keys=True, prefix=("p",))
    assert keys == [("p", "a"), ("p", "n", "b")]


def test_apply_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"TensorDict.apply: unexpected keyword argument\(s\) "):
        _nested().apply(lambda x: x, lock=True)
    with pytest.raises(TypeError, match=r"TensorDict.apply: nested_keys and prefix need named"):
        _nested().apply(lambda x: x, nested_keys=True)
    with pytest.raises(TypeError, match=r"TensorDict.apply_: inplace is always True"):
        _nested().apply_(lambda x: x, inplace=False)


# ------------------------------------------------------------------ to() identity
def test_to_own_device_returns_self() -> None:
    td = TensorDict({"a": torch.ones(2)}, [2], device="cpu")
    assert td.to("cpu") is td
    assert td.to(torch.device("cpu")) is td
    assert td.to(device="cpu") is td
    assert td.cpu() is td
    # a cast, another device, or a TensorDict without a device still copies
    cast = td.to(torch.float64)
    assert cast is not td and cast["a"].dtype == torch.float64
    assert td.to("cpu", torch.float32) is not td
    assert td.to(td) is not td
    no_device = TensorDict({"a": torch.ones(2)}, [2])
    moved = no_device.to("cpu")
    assert moved is not no_device and moved.device == torch.device("cpu")


def test_to_own_device_lazy_stack_returns_self() -> None:
    lz = LazyStackedTensorDict(
        TensorDict({"x": torch.ones(3)}, device="cpu"),
        TensorDict({"x": torch.ones(3)}, device="cpu"),
    )
    assert lz.to("cpu") is lz and lz.cpu() is lz
    assert lz.to(torch.float64) is not lz


# ------------------------------------------------------------------ empty(recurse=True)
def test_empty_recurse_keeps_non_tensor_entries() -> None:
    td = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2), "s": "x"}, "s": "hi"}, [2])
    out = td.empty(recurse=True)
    assert sorted(map(str, out.keys(True, True, is_leaf=is_leaf_nontensor))) == [
        "('n', 's')",
        "s",
    ]
    assert out["s"] == "hi" and out["n", "s"] == "x"
    out["s"] = "changed"
    assert td["s"] == "hi"
    assert list(td.empty().keys()) == []
    lz = LazyStackedTensorDict(TensorDict({"s": "a", "x": torch.ones(1)}), TensorDict({"s": "b"}))
    assert lz.empty(recurse=True)["s"] == ["a", "b"]


# ------------------------------------------------------------------ masks on ragged stacks
def _ragged(batch: list[int], dim: int) -> tuple[LazyStackedTensorDict, torch.Tensor]:
    n = torch.Size(batch).numel()
    x = [torch.arange(float(n)).view(*batch, 1).expand(*batch, 2) + 100 * i for i in range(2)]
    a = TensorDict({"x": x[0].clone(), "y": torch.zeros(*batch, 4)}, batch)
    b = TensorDict({"x": x[1].clone(), "z": torch.ones(*batch, 5)}, batch)
    return LazyStackedTensorDict(a, b, stack_dim=dim), torch.stack(x, dim)


_g = torch.Generator().manual_seed(0)


@pytest.mark.parametrize(
    ("batch", "dim", "make_index"),
    [
        ([3], 0, lambda bs: torch.rand(bs, generator=_g) > 0.4),  # a mask over every dim
        ([3, 4], 0, lambda bs: torch.rand(bs[:2], generator=_g) > 0.4),  # leading dims
        ([3, 4], 1, lambda bs: torch.rand(bs[:2], generator=_g) > 0.4),
        ([3, 4], 2, lambda bs: torch.rand(bs[:2], generator=_g) > 0.4),  # off the stack dim
        ([3, 4], 1, lambda bs: torch.rand(bs, generator=_g) > 0.4),
        ([2, 3], 1, lambda bs: (slice(None), torch.rand(bs[1:], generator=_g) > 0.4)),
        ([3], 0, lambda bs: (torch.tensor([0, 1, 1]), torch.tensor([2, 0, -1]))),
        ([3], 0, lambda bs: (torch.tensor([[0, 1], [1, 0]]), torch.tensor([[2, 0], [1, 1]]))),
        ([3], 1, lambda bs: (slice(None), torch.tensor([1, 0, 1]))),
    ],
)
def test_ragged_lazy_stack_advanced_index(batch: list[int], dim: int, make_index: Any) -> None:
    lz, dense_x = _ragged(batch, dim)
    index = make_index(lz.batch_size)
    out = lz[index]
    expected = dense_x[index]
    assert isinstance(out, LazyStackedTensorDict)
    assert out.batch_size == expected.shape[:-1]
    torch.testing.assert_close(out["x"], expected)
    assert "x" in out.keys()


def test_ragged_lazy_stack_bad_mask_still_raises() -> None:
    lz, _ = _ragged([3], 0)
    with pytest.raises(IndexError, match="shape of the mask"):
        lz[torch.ones(3, dtype=torch.bool)]


# ------------------------------------------------------------------ I/O
def test_from_filename_maps_the_start_of_a_longer_file(tmp_path: Any) -> None:
    path = str(tmp_path / "long.bin")
    torch.arange(10, dtype=torch.float32).numpy().tofile(path)
    out = MemoryMappedTensor.from_filename(path, dtype=torch.float32, shape=[2, 2])
    torch.testing.assert_close(out, torch.arange(4, dtype=torch.float32).view(2, 2))
    out[0, 0] = 7.0  # mapped shared: the write reaches the file
    assert MemoryMappedTensor.from_filename(path, torch.float32, [10])[0].item() == 7.0
    with pytest.raises(ValueError, match=r"from_filename: .* holds 40 bytes; shape \(12,\)"):
        MemoryMappedTensor.from_filename(path, dtype=torch.float32, shape=[12])


def test_consolidate_to_a_file_sets_the_cpu_device(tmp_path: Any) -> None:
    td = TensorDict({"a": torch.ones(2)}, [2])
    assert td.consolidate().device is None
    out = td.consolidate(filename=str(tmp_path / "c.bin"))
    assert out.device == torch.device("cpu") and out["a"].device == torch.device("cpu")
    torch.testing.assert_close(out["a"], td["a"])


def test_persistent_set_checks_shapes_before_writing(tmp_path: Any) -> None:
    from tensordict import PersistentTensorDict

    src = TensorDict({"a": torch.ones(2), "n": {"b": torch.zeros(2, 3)}}, [2])
    p = PersistentTensorDict.from_dict(src, filename=str(tmp_path / "p.h5"))
    with pytest.raises(ValueError, match=r"PersistentTensorDict.set_: shape \(2, 3\) does not "):
        p.set_("a", torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"set_: shape \(3, 3\) of key \('n', 'b'\) does not st"):
        p.set_(("n", "b"), torch.ones(3, 3))
    with pytest.raises(RuntimeError, match=r"set_: shape \(1,\) of key 'a' does not start with"):
        p.set_("a", torch.ones(1))  # (the error is a ValueError and a RuntimeError, as upstream)
    p.set_(("n", "b"), torch.full((2, 1), 5.0))  # broadcasts over the trailing dim
    torch.testing.assert_close(p["n", "b"], torch.full((2, 3), 5.0))
    torch.testing.assert_close(p["a"], torch.ones(2))


# ------------------------------------------------------------------ NonTensorStack views
def test_write_into_an_element_of_a_non_tensor_stack_reaches_it() -> None:
    s = NonTensorStack("a string")
    s[0][True] = NonTensorStack("another string")
    assert s[0].data == "another string"
    s = NonTensorStack("a", "b", "c")
    s[1][True] = "z"
    assert s.tolist() == ["a", "z", "c"]
    part = s[0:2]  # a slice views, as a tensor's does
    part[0] = "q"
    part[1][True] = "w"
    assert s.tolist() == ["q", "w", "c"] and part.tolist() == ["q", "w"]
    copy = s[torch.tensor([1])]  # an index tensor copies, as a tensor's does
    copy[0] = "y"
    assert s.tolist() == ["q", "w", "c"] and copy.tolist() == ["y"]
    element = s[2]
    del s
    element[True] = "x"  # no other reference to the stack: the element still takes it
    assert element.data == "x"
