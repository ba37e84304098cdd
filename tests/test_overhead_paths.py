"""The fast paths added for per-call overhead give what the general paths give."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict, tensorclass

_INDICES: list[Any] = [
    1,
    -1,
    slice(1, 3),
    slice(None, None, 2),
    (slice(None), 0),
    (1, torch.tensor([0, 2])),  # advanced: a copy
    (torch.tensor([0, 3]),),
    (slice(1, 3), None),
    (torch.tensor([True, False, True, True]), 2),
]


@pytest.mark.parametrize("index", _INDICES, ids=repr)
def test_index_of_mixed_plain_and_mapped_leaves(index: Any) -> None:
    plain = {
        "p": torch.randn(4, 3),
        "m": torch.randn(4, 3, 2),
        "q": torch.randn(4, 3),
        "empty": torch.zeros(4, 3, 0),
        "n": torch.randn(4, 3),
    }
    mapped = {k: MemoryMappedTensor.from_tensor(plain[k]) for k in ("m", "empty", "n")}
    td = TensorDict({**plain, **mapped}, [4, 3])
    td["nested"] = TensorDict({"x": MemoryMappedTensor.from_tensor(torch.randn(4, 3, 5))}, [4, 3])
    out = td[index]
    assert list(out.keys()) == ["p", "m", "q", "empty", "n", "nested"]
    for key, value in td.items(True, True):
        expected = value[index]  # the tensor's own indexing is the reference
        got = out[key]
        assert type(got) is type(expected), key
        torch.testing.assert_close(
            got.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor)
        )
        if isinstance(expected, MemoryMappedTensor):
            assert got.data_ptr() == expected.data_ptr()  # a view of the same bytes


def test_construction_keeps_source_order_through_every_kind_of_entry() -> None:
    a, b = torch.randn(4, 2), torch.randn(4)
    source: dict[Any, Any] = {
        "a": a,
        "nested": {"x": b},
        "arr": np.arange(4),
        "text": "hello",
        "b": b,
    }
    td = TensorDict(source, [4])
    assert list(td.keys()) == ["a", "nested", "arr", "text", "b"]
    assert td["a"] is a and td["b"] is b and td["nested", "x"] is b
    assert torch.equal(td["arr"], torch.arange(4))
    assert td["text"] == "hello"
    assert source["nested"] == {"x": b}  # the caller's dict is not touched


def test_construction_with_a_nested_key_takes_the_general_path() -> None:
    a = torch.randn(4)
    td = TensorDict({"a": a, ("n", "x"): a, "z": a}, [4])
    assert list(td.keys(True, True)) == ["a", ("n", "x"), "z"]
    assert td["n", "x"] is a


@pytest.mark.parametrize(
    ("source", "error", "match"),
    [
        ({"a": torch.zeros(4), "b": torch.zeros(3)}, ValueError, "'b'"),
        ({"a": torch.zeros(4), "b": torch.tensor(1.0)}, ValueError, "'b'"),
        ({"a": torch.zeros(4), "": torch.zeros(4)}, (ValueError, KeyError), "TensorDict"),
    ],
)
def test_construction_still_reports_bad_entries(
    source: dict[str, Any], error: Any, match: str
) -> None:
    with pytest.raises(error, match=match):
        TensorDict(source, [4])


@tensorclass
class _Two:
    obs: torch.Tensor
    reward: Any


@tensorclass
class _Empty:
    pass


def test_tensorclass_positional_fields_stored_as_given() -> None:
    obs, reward = torch.randn(3, 2), torch.randn(3)
    x = _Two(obs, reward, batch_size=[3])
    assert x.obs is obs and x.reward is reward
    assert list(x.to_tensordict().keys()) == ["obs", "reward"]


@pytest.mark.parametrize(
    ("reward", "check"),
    [
        (None, lambda x: x.reward is None),
        (np.arange(3), lambda x: torch.equal(x.reward, torch.arange(3))),
        ("text", lambda x: x.reward == "text"),
    ],
)
def test_tensorclass_positional_fields_that_need_care(reward: Any, check: Any) -> None:
    x = _Two(torch.zeros(3, 2), reward, batch_size=[3])
    assert check(x)


def test_tensorclass_positional_fields_are_still_checked() -> None:
    with pytest.raises(ValueError, match="reward"):
        _Two(torch.zeros(3, 2), torch.zeros(4), batch_size=[3])
    with pytest.raises(ValueError, match="reward"):
        _Two(torch.zeros(3, 2), torch.tensor(1.0), batch_size=[3])


@pytest.mark.parametrize("batch_size", [[2], [2, 3], torch.Size([5])])
def test_tensorclass_without_fields(batch_size: Any) -> None:
    x = _Empty(batch_size=batch_size)
    assert x.batch_size == torch.Size(batch_size) and list(x.to_tensordict().keys()) == []


def test_view_merging_every_batch_dim_shares_memory() -> None:
    td = TensorDict(
        {"a": torch.randn(4, 3, 2), "e": torch.zeros(4, 3, 0), "s": torch.randn(4, 3)}, [4, 3]
    )
    td["n"] = TensorDict({"b": torch.randn(4, 3, 5), "m": {"c": torch.randn(4, 3)}}, [4, 3])
    td["text"] = "hello"
    out = td.view(12)
    assert out.batch_size == out["n"].batch_size == out["n", "m"].batch_size == torch.Size([12])
    for key, value in td.items(True, True):
        if isinstance(value, torch.Tensor):
            assert torch.equal(out[key], value.view(12, *value.shape[2:])), key
    assert out["text"] == "hello"
    out["a"][0] = 7.0
    out["n", "b"][0] = 7.0
    assert (td["a"][0, 0] == 7.0).all() and (td["n", "b"][0, 0] == 7.0).all()  # views


def test_view_merging_a_non_viewable_leaf_raises() -> None:
    leaf = torch.randn(3, 4).t()  # [4, 3], not contiguous: no view merges its dims
    td = TensorDict({"a": leaf}, [4, 3])
    with pytest.raises(RuntimeError, match="view"):
        leaf.view(12)
    with pytest.raises(RuntimeError, match="view"):
        td.view(12)
    assert torch.equal(td.reshape(12)["a"], leaf.reshape(12))


def test_cat_keeps_names_and_device_only_when_all_members_share_them() -> None:
    a = TensorDict({"x": torch.zeros(2, 3)}, [2, 3], names=["n", "m"], device="cpu")
    b = TensorDict({"x": torch.ones(1, 3)}, [1, 3], names=["n", "m"], device="cpu")
    c = TensorDict({"x": torch.ones(1, 3)}, [1, 3])
    both = torch.cat([a, b], 0)
    assert both.names == ["n", "m"] and both.device == torch.device("cpu")
    assert both.batch_size == torch.Size([3, 3])
    mixed = torch.cat([a, c], 0)
    assert mixed.names == [None, None] and mixed.device is None
    assert torch.equal(mixed["x"], torch.cat([a["x"], c["x"]]))


def test_cat_errors_name_the_nested_level() -> None:
    a = TensorDict({"n": {"x": torch.zeros(2), "y": torch.zeros(2)}}, [2])
    b = TensorDict({"n": {"x": torch.zeros(2)}}, [2])
    with pytest.raises(KeyError, match="at n, expected"):
        torch.cat([a, b], 0)
    c = TensorDict({"n": {"x": torch.zeros(2), "z": torch.zeros(2)}}, [2])
    with pytest.raises(KeyError, match="TensorDict 1 has keys .* at n"):
        torch.cat([a, c], 0)
    with pytest.raises(RuntimeError, match="batch sizes must match except in dim 0"):
        torch.cat([TensorDict({}, [2, 3]), TensorDict({}, [2, 4])], 0)


def test_flat_keys_view_is_live_and_answers_like_the_general_view() -> None:
    from tensordict._views import KeysView

    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    flat = td.keys()
    general = KeysView(td, False, False, None)
    assert isinstance(flat, KeysView)
    for key in ["a", "n", ("a",), ("n", "b"), "zz", ("n", "zz"), 3]:
        assert (key in flat) == (key in general), key
    assert repr(flat) == repr(general) == "KeysView(['a', 'n'])"
    td["c"] = torch.ones(2)
    assert list(flat) == ["a", "n", "c"] and len(flat) == 3
    del td["a"]
    assert list(flat) == list(general) == ["n", "c"]


@pytest.mark.parametrize("method", ["reshape", "view"])
def test_reshape_to_one_dim_checks_the_size(method: str) -> None:
    td = TensorDict({"a": torch.randn(4, 3, 2)}, [4, 3])
    assert getattr(td, method)(12).batch_size == torch.Size([12])
    assert getattr(td, method)(-1).batch_size == torch.Size([12])
    with pytest.raises(RuntimeError, match=rf"TensorDict.{method}: .*invalid for input of size 12"):
        getattr(td, method)(13)
    empty = TensorDict({"a": torch.zeros(0, 3)}, [0, 3])
    assert getattr(empty, method)(0)["a"].shape == torch.Size([0])
