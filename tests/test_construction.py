"""Construction, the batch-size rule, devices, names and from_dict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict


@pytest.mark.parametrize("bs", [3, [3], (3,), torch.Size([3])])
def test_batch_size_spellings(bs: object) -> None:
    td = TensorDict({"a": torch.zeros(3, 2)}, batch_size=bs)  # type: ignore[arg-type]
    assert td.batch_size == torch.Size([3])
    assert td.shape == td.batch_size and td.batch_dims == td.ndim == td.dim() == 1


def test_defaults_and_kwargs() -> None:
    td = TensorDict(a=torch.zeros(2), b={"c": torch.ones(2)})
    assert td.batch_size == torch.Size([])
    assert td.device is None
    assert td["b"].batch_size == torch.Size([])
    assert torch.equal(td["b", "c"], torch.ones(2))


def test_nested_dicts_and_tuple_keys() -> None:
    td = TensorDict({"a": {"b": torch.zeros(2, 3)}, ("x", "y"): torch.ones(2)}, [2])
    assert isinstance(td["a"], TensorDict) and td["a"].batch_size == torch.Size([2])
    assert torch.equal(td["x", "y"], torch.ones(2))


def test_nested_may_have_longer_batch() -> None:
    inner = TensorDict({"c": torch.zeros(2, 5)}, [2, 5])
    td = TensorDict({"inner": inner}, [2])
    assert td["inner"].batch_size == torch.Size([2, 5])


@pytest.mark.parametrize(
    ("entries", "bs", "pattern"),
    [
        (
            {"a": torch.zeros(4, 3)},
            [5],
            r"TensorDict: shape \(4, 3\) of key 'a' does not start with batch_size \(5,\)",
        ),
        ({"a": torch.zeros(())}, [5], r"shape \(\) of key 'a'"),
        (
            {"a": torch.zeros(5, 2)},
            [5, 3],
            r"shape \(5, 2\) of key 'a' does not start with batch_size \(5, 3\)",
        ),
        ({"n": {"b": torch.zeros(4)}}, [5], r"shape \(4,\) of key 'b'"),
        ({"n": TensorDict({}, [4])}, [5], r"shape \(4,\) of key 'n'"),
        ({"x": 3.0}, [2], r"shape \(\) of key 'x'"),
    ],
)
def test_batch_rule_violations_name_the_key(entries: dict, bs: list[int], pattern: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=pattern):
        TensorDict(entries, bs)


def test_bad_batch_size_and_source() -> None:
    with pytest.raises(ValueError, match="negative"):
        TensorDict({}, [-1])
    with pytest.raises(TypeError, match="batch_size must be an int or a sequence of ints"):
        TensorDict({}, "abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="source must be a mapping"):
        TensorDict([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "exc", "pattern"),
    [
        (3, TypeError, "TensorDict: got int 3; a TensorDict key is a non-empty string"),
        ("", ValueError, "empty string in key ''"),
        ((), ValueError, "empty key"),
        (("a", 1), TypeError, r"got tuple \('a', 1\)"),
    ],
)
def test_bad_keys(key: object, exc: type[Exception], pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        TensorDict({key: torch.zeros(1)}, [])
    with pytest.raises(exc, match=pattern.replace("TensorDict: ", "TensorDict.set: ")):
        TensorDict({}, []).set(key, torch.zeros(1))  # type: ignore[arg-type]


def test_batch_size_setter_revalidates() -> None:
    td = TensorDict({"a": torch.zeros(3, 4), "s": "text"}, [3])
    td.batch_size = [3, 4]
    assert td.batch_size == torch.Size([3, 4])
    assert td.get("s").batch_size == torch.Size([3, 4])
    with pytest.raises(ValueError, match=r"cannot set batch_size \(3, 5\): shapes of 'a' \(3, 4\)"):
        td.batch_size = [3, 5]
    assert td.batch_size == torch.Size([3, 4])


def test_device_casts_every_write() -> None:
    td = TensorDict({"a": torch.zeros(2, dtype=torch.float64)}, [2], device="cpu")
    td["b"] = torch.ones(2)
    td["n", "c"] = torch.ones(2)
    assert td.device == torch.device("cpu")
    assert td["n"].device == torch.device("cpu")
    assert all(x.device.type == "cpu" for x in td.values(True, True))


def test_names() -> None:
    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3], names=["batch", None])
    assert td.names == ["batch", None]
    with pytest.raises(ValueError, match=r"got 1 names \['x'\] for 2 batch dims"):
        td.names = ["x"]
    with pytest.raises(ValueError, match="names must be unique"):
        td.names = ["x", "x"]
    assert TensorDict({}, [2]).names == [None]


def test_lock_at_construction() -> None:
    td = TensorDict({"a": torch.zeros(1)}, [1], lock=True)
    assert td.is_locked


def test_python_values_become_tensors() -> None:
    td = TensorDict({}, [])
    td["i"] = 3
    td["f"] = 2.5
    td["b"] = True
    td["l"] = [1.0, 2.0]
    td["np"] = np.arange(3)
    assert td["i"].dtype == torch.int64 and td["f"].dtype == torch.float32
    assert td["b"].dtype == torch.bool
    assert torch.equal(td["l"], torch.tensor([1.0, 2.0]))
    assert torch.equal(td["np"], torch.arange(3))


def test_non_tensor_data() -> None:
    td = TensorDict({"a-tensor": torch.randn(1, 2)}, batch_size=[1, 2])
    td["non-tensor"] = "a string!"
    assert td["non-tensor"] == "a string!"
    wrapper = td.get("non-tensor")
    assert isinstance(wrapper, NonTensorData)
    assert wrapper.batch_size == torch.Size([1, 2])
    td["obj"] = {"not", "a", "tensor"}
    assert td["obj"] == {"not", "a", "tensor"}
    td["strs"] = ["a", "b"]
    assert td["strs"] == ["a", "b"]


def test_from_dict_infers_batch() -> None:
    d = {"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 4)}}
    assert TensorDict.from_dict(d).batch_size == torch.Size([])  # upstream: no inference
    td = TensorDict.from_dict(d, auto_batch_size=True)
    assert td.batch_size == torch.Size([3, 4])
    assert td["b"].batch_size == torch.Size([3, 4])
    assert TensorDict.from_dict(d, batch_dims=1).batch_size == torch.Size([3])
    assert TensorDict.from_dict(d, batch_size=[3]).batch_size == torch.Size([3])
    with pytest.raises(ValueError, match="pass batch_size or batch_dims, not both"):
        TensorDict.from_dict(d, batch_size=[3], batch_dims=1)


def test_from_dict_with_a_batch_size_reads_python_scalars_as_non_tensor_data() -> None:
    td = TensorDict({"x": torch.zeros(2, 3), "n": {}}, [2])
    td.set_non_tensor("flag", True)
    td.set_non_tensor(("n", "k"), 7)
    back = TensorDict.from_dict(td.to_dict(), batch_size=[2])
    assert back["n", "k"] == 7 and back["flag"] is True and back["n"].batch_size == (2,)
    assert isinstance(back.get("flag"), NonTensorData)
    scalars = TensorDict.from_dict({"f": 1.5, "i": np.int64(3)}, batch_size=[4])
    assert scalars["f"] == 1.5 and scalars["i"] == 3
    # without a batch size a scalar is a 0-dim tensor, as ever; a misfit tensor still fails
    assert isinstance(TensorDict.from_dict({"f": 1.5}, batch_size=[]).get("f"), torch.Tensor)
    with pytest.raises(ValueError, match=r"shape \(3,\) of key 'x' does not start with"):
        TensorDict.from_dict({"x": torch.zeros(3), "f": 1.5}, batch_size=[2])


def test_construction_shares_leaves() -> None:
    a = torch.zeros(2)
    assert TensorDict({"a": a}, [2])["a"] is a


def test_an_unbatched_tensordict_keeps_each_value_it_is_given() -> None:
    """Without batch dims every tensor fits: parameters, subclasses and nested
    TensorDicts are stored as given (the same objects); the rest is converted as ever."""
    weight = torch.nn.Parameter(torch.randn(3, 2))
    nested = TensorDict({"x": torch.zeros(4)}, [4])
    named = TensorDict({"y": torch.zeros(2, 3)}, [2], names=["n"])
    td = TensorDict(
        {"w": weight, "sub": nested, "named": named, "d": {"z": torch.ones(1)}, "s": "text"},
        torch.Size([]),
    )
    assert td["w"] is weight and type(td["w"]) is torch.nn.Parameter
    assert td.get("sub") is nested and td.get("named") is named
    assert td["named"].names == ["n"] and td["d", "z"].tolist() == [1.0]
    assert td["s"] == "text" and td.batch_size == torch.Size([])
    with pytest.raises(ValueError, match="empty"):
        TensorDict({"": torch.zeros(1)}, torch.Size([]))
