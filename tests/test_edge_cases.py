"""Edge cases found in review: aliasing, locking, round trips and error types."""

from __future__ import annotations

import enum
import pickle

import pytest
import torch

from tensordict import NonTensorData, TensorDict


def test_cast_keeps_integer_values_exact() -> None:
    td = TensorDict({"i": torch.tensor([100000, 257]), "h": torch.ones(2, dtype=torch.half)}, [2])
    assert torch.equal(td.float()["i"], torch.tensor([100000.0, 257.0]))
    big = TensorDict({"i": torch.tensor([2**24 + 1]), "f": torch.zeros(1)}, [1])
    assert int(big.double()["i"].long()) == 2**24 + 1


def test_cast_grad_leaves_can_be_modified_in_place() -> None:
    td = TensorDict(
        {"a": torch.ones(2, requires_grad=True), "b": torch.ones(2, requires_grad=True)}, [2]
    )
    out = td.double()
    out["a"].mul_(2)
    out += 1
    assert out["a"].dtype == torch.float64


def test_from_dict_merges_tuple_keys_and_nested_dicts() -> None:
    td = TensorDict.from_dict({("b", "d"): torch.zeros(3, 2), "b": {"c": torch.zeros(3)}})
    assert set(td.keys(True, True)) == {("b", "d"), ("b", "c")}
    with pytest.raises(ValueError, match="key 'a' is given twice"):
        TensorDict.from_dict({("a",): torch.zeros(1), "a": torch.zeros(1)})


def test_rename_key_overlaps() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    td.rename_key_("a", "a")
    assert "a" in td
    nested = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
    nested.rename_key_("a", ("a", "c"))  # down under its own name, as upstream
    assert list(nested.keys(True, True)) == [("a", "c", "b")]
    nested.rename_key_(("a", "c"), "a")  # and back up
    assert list(nested.keys(True, True)) == [("a", "b")]
    with pytest.raises(KeyError, match=r"key \('a', 'b'\) already present"):
        nested.rename_key_("a", ("a", "b"), safe=True)
    leaf = TensorDict({"t": torch.zeros(3)}, [3])
    leaf.rename_key_("t", ("t", "u"))  # a tensor leaf moves under a new level of its name
    assert leaf["t", "u"].shape == (3,) and leaf["t"].batch_size == (3,)
    leaf = nested["a", "b"]
    nested.rename_key_(("a", "b"), "a")  # up over its own ancestor, as upstream
    assert nested["a"] is leaf and list(nested.keys(True)) == ["a"]


def test_failing_inplace_op_does_not_apply_twice() -> None:
    td = TensorDict({"a": torch.tensor([1.0, 2.0]), "i": torch.tensor([1, 2])}, [2])
    with pytest.raises(RuntimeError, match="can't be cast"):
        td += 0.5
    assert torch.equal(td["a"], torch.tensor([1.5, 2.5]))


def test_new_tensordicts_do_not_share_nested_levels() -> None:
    td = TensorDict({"n": {"b": torch.zeros(2)}, "e": {}}, [2])
    td.select("n")["n", "new"] = torch.ones(2)
    assert "e" not in td.flatten_keys()  # leaves only, as upstream: no level to share
    assert ("n", "new") not in td
    TensorDict(td, batch_size=[2], lock=True)
    assert not td["n"].is_locked
    dst = TensorDict({}, [2]).update(td)
    dst["n", "other"] = torch.ones(2)
    assert ("n", "other") not in td


def test_unflatten_checks_merged_batch_and_ignores_order() -> None:
    inner = TensorDict({"c": torch.zeros(2, 3)}, [2, 3])
    with pytest.raises(
        ValueError, match=r"shape \(2,\) of key 'a.b' does not start with batch_size \(2, 3\)"
    ):
        TensorDict({"a": inner, "a.b": torch.zeros(2)}, [2]).unflatten_keys()
    one = TensorDict({"a.b": torch.zeros(2), "a": {"c": torch.zeros(2)}}, [2]).unflatten_keys()
    two = TensorDict({"a": {"c": torch.zeros(2)}, "a.b": torch.zeros(2)}, [2]).unflatten_keys()
    assert set(one.keys(True, True)) == set(two.keys(True, True)) == {("a", "b"), ("a", "c")}


def test_locked_structure_cannot_change() -> None:
    td = TensorDict({"s": "text", "n": {"c": torch.zeros(2)}}, [2]).lock_()
    with pytest.raises(TypeError, match="holds non-tensor data"):
        td.set_("s", torch.ones(2))
    with pytest.raises(RuntimeError, match="cannot change the batch size of a locked"):
        td.batch_size = []
    with pytest.raises(
        RuntimeError,
        match="Cannot unlock a tensordict that is part of a locked graph: this TensorDict is nested",
    ):
        td["n"].unlock_()  # the root's lock holds its nested levels (upstream)
    with pytest.raises(
        RuntimeError, match=r"For in-place .* \(cannot add, remove or replace key \('n', 'x'\)\)"
    ):
        td["n", "x"] = torch.zeros(2)
    with pytest.raises(RuntimeError, match="locked"):
        del td["n", "c"]
    empty = TensorDict({}, [2]).lock_()
    with pytest.raises(RuntimeError, match="locked and empty"):
        empty.load_state_dict(TensorDict({"a": torch.ones(3)}, [3], device="cpu").state_dict())
    assert empty.batch_size == (2,) and empty.device is None


def test_apply_names_reach_nested_leading_dims_only() -> None:
    td = TensorDict({"n": TensorDict({"y": torch.zeros(2, 3)}, [2, 3])}, [2])
    out = td.named_apply(lambda k, x: x, names=["b"])
    assert out.names == ["b"]
    assert out["n"].names == ["b", None]  # a nested level shares its parent's names (upstream)
    assert td["n"].names == [None, None]  # the source is left alone


def test_state_dict_metadata_keys_and_dotted_nested_keys() -> None:
    # the metadata lives in the _metadata attribute: a key named like the old entries loads
    odd = TensorDict({"__device": torch.ones(2), "n": {"__batch_size": torch.ones(2)}}, [2])
    for flatten in (True, False):
        back = TensorDict().load_state_dict(odd.state_dict(flatten=flatten))
        assert back.batch_size == (2,)
        assert set(back.keys(True, True)) == set(odd.keys(True, True))
    td = TensorDict({"a.b": torch.ones(2)}, [2])
    sd = td.state_dict(flatten=False)
    assert list(TensorDict().load_state_dict(sd, from_flatten=False).keys()) == ["a.b"]
    td.load_state_dict(sd, from_flatten=False)
    nested = TensorDict({"n": {"a.b": torch.ones(2)}}, [2]).state_dict(flatten=False)
    assert ("n", "a.b") in TensorDict().load_state_dict(nested).keys(True)


def test_index_write_type_mismatches() -> None:
    td = TensorDict({"x": {"y": torch.zeros(2)}}, [2])
    with pytest.raises(TypeError, match=r"key \('x',\) holds a TensorDict; cannot write a tensor"):
        td[0] = {"x": torch.tensor(5.7)}
    flat = TensorDict({"x": torch.zeros(2)}, [2])
    with pytest.raises(TypeError, match="cannot write a nested TensorDict into it"):
        flat[0] = {"x": {"y": torch.tensor(1.0)}}


def test_pickle_keeps_nested_names_and_locks() -> None:
    td = TensorDict({}, [3], names=["t"])
    td["n", "b"] = torch.zeros(3)
    td["n"].lock_()
    back = pickle.loads(pickle.dumps(td))
    assert back["n"].names == ["t"] and back["n"].is_locked


def test_clear_type_errors_instead_of_attribute_errors() -> None:
    with pytest.raises(TypeError, match="key 'x' is a nested TensorDict here but a Tensor"):
        TensorDict({"x": {"y": torch.zeros(2)}}, [2]).apply(
            lambda u, v: u + v, TensorDict({"x": torch.zeros(2)}, [2])
        )
    with pytest.raises(TypeError, match="key 'n' is a Tensor here but a nested TensorDict"):
        TensorDict({"n": torch.zeros(2)}, [2]).load_state_dict(
            TensorDict({"n": {"b": torch.ones(2)}}, [2]).state_dict(), strict=False
        )
    with pytest.raises(TypeError, match="holds a tensor; cannot write a TensorDict"):
        TensorDict({"a": torch.zeros(2)}, [2]).lock_().set_("a", TensorDict({}, [2]))
    with pytest.raises(ValueError, match=r"dim=\(\) names no dimension"):
        TensorDict({"a": torch.zeros(2)}, [2]).sum(dim=())


def test_str_subclass_keys() -> None:
    class K(enum.StrEnum):
        OBS = "obs"
        MISSING = "missing"

    td = TensorDict({}, [2])
    td[K.OBS] = torch.ones(2)
    assert list(td.keys()) == ["obs"] and type(next(iter(td.keys()))) is str
    assert torch.equal(td[K.OBS], torch.ones(2))
    td["n", K.OBS] = torch.zeros(2)
    assert ("n", "obs") in td.keys(True)
    with pytest.raises(KeyError, match="key 'missing' was not found in"):
        td[K.MISSING]


def test_equality_compares_non_tensor_entries() -> None:
    """As upstream: == and != compare non-tensor entries too, one bool per element."""
    a = TensorDict({"a": torch.ones(2), "s": NonTensorData("x")}, [2])
    b = TensorDict({"a": torch.ones(2), "s": NonTensorData("y")}, [2])
    assert not (a == b).all() and (a == b).exclude("s").all()
    assert torch.equal((a != b)["s"], torch.ones(2, dtype=torch.bool))
    assert a["s"] != b["s"]
