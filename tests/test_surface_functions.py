"""Top-level and utils functions: construction, padded/dense stacking, merging, predicates,
key and tensor helpers, test assertions; each checked against plain torch."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses

import numpy as np
import pytest
import torch

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    UnbatchedTensor,
    _construct,  # TensorDict.from_dataclass lands with issue 13
    functional,
    lazy_stack,
    utils,
)


def test_faces_reexport_the_same_objects() -> None:
    import tensordict.tensordict as face
    from tensordict.memmap import MemoryMappedTensor

    assert MemoryMappedTensor is tensordict.MemoryMappedTensor
    assert face.TensorDict is TensorDict and face.LazyStackedTensorDict is LazyStackedTensorDict
    for name in ("dense_stack_tds", "make_tensordict", "merge_tensordicts", "pad", "pad_sequence"):
        assert getattr(functional, name) is getattr(tensordict, name)
        assert getattr(face, name) is getattr(tensordict, name)
    assert utils.assert_allclose_td is tensordict.assert_close


# ------------------------------------------------------------------ construction
def test_from_dict_batch_size_rules() -> None:
    d = {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 4, 5)}}
    assert tensordict.from_dict(d).batch_size == ()
    assert tensordict.from_dict(d, auto_batch_size=True).batch_size == (3, 4)
    assert tensordict.from_dict(d, batch_dims=1).batch_size == (3,)
    assert tensordict.from_dict(d, batch_size=[3]).batch_size == (3,)
    td = tensordict.from_dict(d)
    assert tensordict.from_dict(td) is td
    assert torch.equal(td["b", "c"], d["b"]["c"])  # type: ignore[index]
    with pytest.raises(ValueError, match="from_dict: pass batch_size or batch_dims"):
        tensordict.from_dict(d, batch_size=[3], batch_dims=1)


def test_from_tuple_namedtuple_dataclass_struct() -> None:
    x, y = torch.randn(3, 2), torch.randn(3)
    td = tensordict.from_tuple((x, (y, 2.0)), auto_batch_size=True)
    assert td.batch_size == ()  # the scalar 2.0 shares no leading dim
    assert torch.equal(td["0"], x) and torch.equal(td["1", "0"], y)
    assert td["1", "1"].item() == 2.0
    assert tensordict.from_tuple((x, (y,)), auto_batch_size=True).batch_size == (3,)

    Point = collections.namedtuple("Point", ["x", "y"])
    td = tensordict.from_namedtuple(Point(x, y), batch_size=[3])
    assert torch.equal(td["x"], x) and torch.equal(td["y"], y)
    mx = x.max(1)
    td = tensordict.from_namedtuple(mx)
    assert torch.equal(td["values"], mx.values) and torch.equal(td["indices"], mx.indices)

    @dataclasses.dataclass
    class Obs:
        pixels: torch.Tensor
        label: str

    tc = tensordict.from_dataclass(Obs(x, "cat"), auto_batch_size=True)
    assert type(tc).__name__ == "Obs_tc" and tc.label == "cat"
    assert tc.batch_size == (3, 2) and torch.equal(tc.pixels, x)
    td = _construct.from_dataclass(Obs(x, "cat"), auto_batch_size=True)
    assert isinstance(td, tensordict.TensorDict) and torch.equal(td["pixels"], x)

    arr = np.zeros(3, dtype=[("a", "i8"), ("b", "f4", (2,))])
    arr["a"] = [1, 2, 3]
    td = tensordict.from_struct_array(arr, auto_batch_size=True)
    assert td.batch_size == (3,) and td["a"].tolist() == [1, 2, 3] and td["b"].shape == (3, 2)

    for fn, bad in (
        (tensordict.from_tuple, [1]),
        (tensordict.from_namedtuple, (1, 2)),
        (tensordict.from_dataclass, 3),
        (tensordict.from_struct_array, np.zeros(2)),
    ):
        with pytest.raises(TypeError, match=f"{fn.__name__}: expected"):
            fn(bad)
    with pytest.raises(TypeError, match="from_tuple: pass batch_size or auto_batch_size"):
        tensordict.from_tuple((x,), auto_batch_size=True, batch_size=[3])
    made = _construct.from_dataclass(Obs(x, "a"), as_tensorclass=True)  # (as upstream)
    assert type(made).__name__ == "Obs_tc" and made.label == "a"


def test_from_any_dispatches() -> None:
    x = torch.randn(2, 3)
    assert tensordict.from_any(x) is x
    td = tensordict.from_any({"t": (x,), "n": 1}, auto_batch_size=True)
    assert torch.equal(td["t", "0"], x) and td["n"].item() == 1
    assert tensordict.from_any(3) == 3  # any other object comes back as it is (upstream's)


def test_fromkeys_and_make_tensordict() -> None:
    td = tensordict.fromkeys(["a", ("n", "b")], torch.ones(2))
    assert torch.equal(td["a"], torch.ones(2)) and torch.equal(td["n", "b"], torch.ones(2))
    assert td["a"].data_ptr() != td["n", "b"].data_ptr()  # no shared storage between keys
    td = tensordict.make_tensordict(
        {"a": torch.zeros(3, 4)}, b=torch.zeros(3), auto_batch_size=True
    )
    assert td.batch_size == (3,)
    assert tensordict.make_tensordict(a=torch.zeros(3)).batch_size == ()
    with pytest.raises(ValueError, match=r"keys given twice .*\['a'\]"):
        tensordict.make_tensordict({"a": 1}, a=2)


# ----------------------------------------------------------------- stacking
@pytest.mark.parametrize("padding_value", [0.0, -1.0])
def test_pad_sequence_matches_torch(padding_value: float) -> None:
    seqs = [torch.randn(n, 2) for n in (2, 4, 1)]
    tds = [TensorDict({"a": s, "n": {"b": s.sum(-1)}}, [len(s)]) for s in seqs]
    out = tensordict.pad_sequence(tds, padding_value=padding_value, return_mask=True)
    expected = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=padding_value)
    assert out.batch_size == (3, 4)
    assert torch.equal(out["a"], expected)
    lengths = torch.tensor([2, 4, 1])
    mask = torch.arange(4) < lengths[:, None]
    assert torch.equal(out["masks", "a"], mask) and torch.equal(out["masks", "n", "b"], mask)


def test_pad_sequence_past_the_batch_dims_and_options() -> None:
    tds = [TensorDict({"a": torch.ones(2, n)}, [2]) for n in (1, 3)]
    out = tensordict.pad_sequence(tds, pad_dim=1, return_mask="valid")
    assert out.batch_size == (2, 2) and out["a"].shape == (2, 2, 3)
    assert out["valid", "a"].shape == (2, 2, 3) and out["valid", "a"][0].sum() == 2
    strings = [TensorDict({"a": torch.ones(n), "s": str(n)}, []) for n in (1, 2)]
    out = tensordict.pad_sequence(strings)
    assert out["s"] == ["1", "2"]
    with pytest.raises(RuntimeError, match="pad_sequence: list_of_tensordicts is empty"):
        tensordict.pad_sequence([])
    with pytest.raises(KeyError, match="TensorDict 1 does not hold the keys"):
        tensordict.pad_sequence(
            [TensorDict({"a": torch.ones(1)}), TensorDict({"b": torch.ones(1)})]
        )
    with pytest.raises(RuntimeError, match="cannot pad the scalar entry 'a'"):
        tensordict.pad_sequence([TensorDict({"a": torch.tensor(1.0)})] * 2)


def test_dense_stack_tds_and_maybe_dense_stack() -> None:
    tds = [
        TensorDict({"a": torch.full((2,), float(i)), "n": {"b": torch.ones(2, 3)}}, [2])
        for i in range(3)
    ]
    for dim in (0, 1, -1):
        out = tensordict.dense_stack_tds(tds, dim)
        assert type(out) is TensorDict
        assert torch.equal(out["a"], torch.stack([td["a"] for td in tds], dim))
    lazy = lazy_stack(tds, 1)
    out = tensordict.dense_stack_tds(lazy)
    assert out.batch_size == (2, 3) and torch.equal(
        out["a"], torch.stack([td["a"] for td in tds], 1)
    )
    # members of different structures give a lazy stack, as upstream documents
    ragged = tensordict.dense_stack_tds(
        [TensorDict({"a": torch.ones(1)}), TensorDict({"b": torch.ones(1)})], 0
    )
    assert isinstance(ragged, LazyStackedTensorDict)
    assert torch.equal(ragged.tensordicts[1]["b"], torch.ones(1))
    assert type(tensordict.maybe_dense_stack(tds)) is TensorDict
    mixed = [TensorDict({"a": torch.ones(1)}), TensorDict({"b": torch.ones(1)})]
    assert isinstance(tensordict.maybe_dense_stack(mixed), LazyStackedTensorDict)
    assert torch.equal(tensordict.stack(tds)["a"], torch.stack([td["a"] for td in tds]))
    assert torch.equal(tensordict.cat(tds)["a"], torch.cat([td["a"] for td in tds]))


def test_merge_tensordicts() -> None:
    a = TensorDict({"x": torch.tensor(1), "n": {"y": torch.tensor(2)}})
    b = TensorDict({"x": torch.tensor(10), "z": torch.tensor(3), "n": {"w": torch.tensor(4)}})
    out = tensordict.merge_tensordicts(a, b)
    assert out["x"].item() == 1 and out["z"].item() == 3 and out["n", "w"].item() == 4
    out = tensordict.merge_tensordicts(a, b, callback_exist={"x": lambda p, q: p * q})
    assert out["x"].item() == 10
    with pytest.raises(RuntimeError, match="pass at least 2 TensorDicts, got 1"):
        tensordict.merge_tensordicts(a)


# ----------------------------------------------------------------- helpers
def test_predicates() -> None:
    t = {
        d: torch.zeros(1, dtype=d)
        for d in (torch.bool, torch.uint8, torch.int64, torch.float16, torch.complex64)
    }
    assert [tensordict.is_bool(x) for x in t.values()] == [True, False, False, False, False]
    assert [tensordict.is_integer(x) for x in t.values()] == [False, True, True, False, False]
    assert [tensordict.is_floating("k", x) for x in t.values()] == [
        False,
        False,
        False,
        True,
        False,
    ]
    assert [tensordict.is_inexact(x) for x in t.values()] == [False, False, False, True, True]
    assert not tensordict.is_floating("not a tensor")
    with pytest.raises(TypeError, match="pass the value to test"):
        tensordict.is_bool()
    assert tensordict.is_non_tensor(NonTensorData("a")) and not tensordict.is_non_tensor(
        torch.zeros(1)
    )
    assert tensordict.default_is_leaf(torch.Tensor) and not tensordict.default_is_leaf(TensorDict)
    assert tensordict.default_is_leaf(UnbatchedTensor)
    assert tensordict.is_leaf_nontensor(NonTensorData) and not tensordict.is_leaf_nontensor(
        TensorDict
    )
    assert not tensordict.is_batchedtensor(torch.zeros(1))
    seen = torch.vmap(lambda x: x + tensordict.is_batchedtensor(x))(torch.zeros(2))
    assert seen.tolist() == [1.0, 1.0]


def test_key_and_shape_helpers() -> None:
    assert utils.unravel_key_to_tuple(("a", ("b",), "c")) == ("a", "b", "c")
    assert utils.unravel_key_to_tuple(3) == ()
    assert isinstance(utils.KEY_SEPARATOR, str)
    x = torch.randn(3, 4)
    assert torch.equal(utils.expand_right(x, (3, 4, 5)), x.unsqueeze(-1).expand(3, 4, 5))
    assert torch.equal(utils.expand_as_right(x, torch.zeros(3, 4, 2)), x[..., None].expand(3, 4, 2))
    with pytest.raises(RuntimeError, match="expand_right: tensor has 2 dims"):
        utils.expand_right(x, (3,))
    with pytest.raises(RuntimeError, match=r"expand_as_right: tensor shape \(3, 4\) does not fit"):
        utils.expand_as_right(x, torch.zeros(3, 5, 2))
    idx = utils.convert_ellipsis_to_idx((0, ..., None, 1), [2, 3, 4, 5])
    ref = torch.zeros(2, 3, 4, 5)
    assert torch.equal(ref[idx], ref[0, ..., None, 1])
    assert utils.convert_ellipsis_to_idx(..., [2]) == (slice(None),)
    with pytest.raises(RuntimeError, match="at most one ellipsis"):
        utils.convert_ellipsis_to_idx((..., ...), [2])
    assert utils.infer_size_impl([2, -1, 3], 12) == [2, 2, 3]
    with pytest.raises(RuntimeError, match="is invalid for 7 elements"):
        utils.infer_size_impl([2, -1], 7)


def test_isin_and_remove_duplicates() -> None:
    x = torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6]])
    td = TensorDict({"x": x, "y": torch.arange(4)}, [4])
    ref = TensorDict({"x": torch.tensor([[1, 2], [5, 6]])}, [2])
    expected = torch.tensor([(row == ref["x"]).all(-1).any().item() for row in x])
    assert torch.equal(utils.isin(td, ref, "x"), expected)
    out, inverse = utils.remove_duplicates(td, "x", return_indices=True)
    uniq, inv = torch.unique(x, dim=0, return_inverse=True)
    assert torch.equal(out["x"], uniq) and torch.equal(inverse, inv)
    assert out["y"].tolist() == [0, 1, 3]  # the first occurrence of each value
    with pytest.raises(KeyError, match="isin: Key 'q' not found in input or not a tensor"):
        utils.isin(td, ref, "q")
    with pytest.raises(KeyError, match="isin: Key 'y' not found in reference or not a tensor"):
        utils.isin(td, ref, "y")
    with pytest.raises(ValueError, match=r"isin: The number of dimensions .* \(4,\) and \(\)"):
        utils.isin(td, ref[0], "x")
    with pytest.raises(ValueError, match=r"dimension '1' is invalid .* batch size \(4,\)"):
        utils.remove_duplicates(td, "x", dim=1)
    with pytest.raises(KeyError, match="remove_duplicates: The key 'q' does not exist"):
        utils.remove_duplicates(td, "q")
    td["n"] = {"z": torch.zeros(4)}
    with pytest.raises(KeyError, match="'n' does not point to a tensor .* holds a TensorDict"):
        utils.remove_duplicates(td, "n")


def test_assert_close() -> None:
    a = TensorDict({"x": torch.zeros(2), "n": {"y": torch.ones(2)}, "s": "text"}, [2])
    assert tensordict.assert_close(a, a.clone())
    with pytest.raises(AssertionError, match=r"key 'n.y' \(ctx\) not close"):
        tensordict.assert_close(a, a.apply(lambda t: t + 1), msg="ctx")
    assert tensordict.assert_close(a, a.apply(lambda t: t + 1e-9), atol=1e-6, rtol=0)
    b = a.clone()
    b["extra"] = torch.zeros(2)
    with pytest.raises(KeyError, match=r"only in expected: \['extra'\]"):
        tensordict.assert_close(a, b)
    assert tensordict.assert_close(a, b, intersection=True)
    with pytest.raises(TypeError, match="expected two tensor collections, got Tensor"):
        tensordict.assert_close(torch.zeros(1), a)


def test_tensordict_future() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = tensordict.TensorDictFuture([pool.submit(td["a"].fill_, 2.0)], td)
        assert future.result() is td and future.done()
        failing = tensordict.TensorDictFuture([pool.submit(lambda: 1 / 0)], td)
        with pytest.raises(ZeroDivisionError):
            failing.result()


def test_unbatched_tensor() -> None:
    u = UnbatchedTensor(torch.arange(3.0))
    assert type(u) is UnbatchedTensor and u.batch_size == ()
    assert type(u + 1) is UnbatchedTensor and torch.equal(u + 1, torch.arange(3.0) + 1)  # upstream


def test_timeit_accumulates() -> None:
    utils.timeit._REG.pop("t", None)

    @utils.timeit("t")
    def fn() -> int:
        return 1

    for _ in range(3):
        fn()
    with pytest.raises(ValueError, match="boom"), utils.timeit("t"):
        raise ValueError("boom")
    mean, total, count = utils.timeit._REG["t"]
    assert count == 4 and total >= 0 and mean == pytest.approx(total / 4)
    utils.timeit.erase()
    assert utils.timeit._REG["t"] == [0.0, 0.0, 0]
    del utils.timeit._REG["t"]


def test_memmap_is_the_function_and_its_module_still_imports() -> None:
    # as upstream: ``tensordict.memmap`` names the function, also after importing the face
    import importlib

    face = importlib.import_module("tensordict.memmap")
    assert face.MemoryMappedTensor is tensordict.MemoryMappedTensor
    assert callable(tensordict.memmap) and tensordict.memmap.__module__.startswith("tensordict._")


def test_tensor_collection_is_the_root_of_every_collection() -> None:
    from tensordict import TensorCollection, tensorclass

    @tensorclass
    class Point:
        x: torch.Tensor

    td = TensorDict({"a": torch.zeros(2)}, [2])
    for value in (td, lazy_stack([td, td]), Point(x=torch.zeros(2), batch_size=[2])):
        assert isinstance(value, TensorCollection)
    assert not isinstance(torch.zeros(2), TensorCollection)
