"""update_: the multi-tensor copy checks every pair first and writes what set_ writes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def _td() -> TensorDict:
    td = TensorDict(
        {"a": torch.zeros(3, 2), "b": torch.zeros(3, dtype=torch.long), "n": {"c": torch.zeros(3)}},
        [3],
    )
    td["text"] = "old"
    return td


def test_update_inplace_matches_per_key_set_() -> None:
    new = {
        "a": torch.randn(3, 2),
        "b": torch.arange(3),
        "n": {"c": torch.randn(3)},
        "text": "new",
    }
    td, expected = _td(), _td()
    before = {k: td.get(k) for k in ("a", "b")}
    td.update_(new)
    for key, value in new.items():
        if isinstance(value, dict):
            expected.set_(("n", "c"), value["c"])
        else:
            expected.set_(key, value)
    for key in ("a", "b", ("n", "c")):
        torch.testing.assert_close(td[key], expected[key])
    assert td["text"] == "new"
    assert td.get("a") is before["a"] and td.get("b") is before["b"]  # written in place


def test_update_inplace_from_a_tensordict_tuple_keys_and_numbers() -> None:
    td = _td()
    td.update_(TensorDict({"n": {"c": torch.ones(3)}}, [3]))
    td.update_({("n", "c"): torch.full((3,), 2.0), "a": [[5.0, 5.0]] * 3})
    torch.testing.assert_close(td["n", "c"], torch.full((3,), 2.0))
    torch.testing.assert_close(td["a"], torch.full((3, 2), 5.0))
    locked = _td().lock_()
    locked.update_({"a": torch.ones(3, 2)})
    torch.testing.assert_close(locked["a"], torch.ones(3, 2))


@pytest.mark.parametrize(
    ("new", "error", "match"),
    [
        ({"a": torch.ones(3, 2), "zz": torch.ones(3)}, KeyError, r"update_.*'zz'"),
        ({"a": torch.ones(3, 2), "b": torch.ones(4)}, ValueError, r"update_.*shape \(4,\).*'b'"),
        ({"a": torch.ones(3, 2), "b": torch.ones(2, 3)}, RuntimeError, r"Failed to update 'b'"),
        ({"a": torch.ones(3, 2), "n": {"zz": torch.ones(3)}}, KeyError, r"update_.*'zz'"),
    ],
)
def test_a_bad_tensor_entry_is_reported_before_any_copy(
    new: dict[str, object], error: type[Exception], match: str
) -> None:
    td = _td()
    with pytest.raises(error, match=match):
        td.update_(new)
    torch.testing.assert_close(td["a"], torch.zeros(3, 2))  # nothing was copied


def test_update_inplace_casts_and_broadcasts_as_tensor_copy_() -> None:
    td = _td()
    leaves = (td["a"], td["b"], td["n", "c"])
    new = {
        "a": torch.tensor([[1.5], [2.5], [3.5]], dtype=torch.float64),  # (3, 1) into (3, 2)
        "b": torch.tensor([1.9, -2.2, 7.0]),  # float into long
        "n": {"c": torch.tensor(4, dtype=torch.int8)},  # a 0-d value spreads
    }
    td.update_(new)
    for leaf, key in zip(leaves, ["a", "b", ("n", "c")], strict=True):
        assert td[key] is leaf  # written in place
    value: Any = new
    for part in ("n", "c"):
        value = value[part]
    oracle = [torch.zeros(3, 2), torch.zeros(3, dtype=torch.long), torch.zeros(3)]
    for o, v in zip(oracle, [new["a"], new["b"], value], strict=True):
        o.copy_(v)
    for got, want in zip(leaves, oracle, strict=True):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_set_inplace_wants_the_batch_size_where_update_inplace_broadcasts() -> None:
    td = TensorDict({"a": torch.zeros(2, 3)}, [2])
    for value in (torch.ones(3), torch.tensor(5.0)):  # would spread over the batch: refused
        with pytest.raises(RuntimeError, match=r"set_: shape .* of key 'a' does not start with"):
            td.set_("a", value)
        with pytest.raises(ValueError, match="batch dimension mismatch"):
            td.set("a", value, inplace=True)
    assert torch.equal(td["a"], torch.zeros(2, 3))
    td.set_("a", torch.tensor([[1.0], [2.0]], dtype=torch.float64))  # feature dims broadcast
    assert torch.equal(td["a"], torch.tensor([[1.0] * 3, [2.0] * 3]))
    td.update_({"a": torch.full((3,), 4.0)})  # update_ broadcasts as Tensor.copy_, as upstream
    assert torch.equal(td["a"], torch.full((2, 3), 4.0))


def test_lazy_set_inplace_checks_the_batch_size_before_writing_any_member() -> None:
    members = [TensorDict({"a": torch.zeros(3)}, []), TensorDict({"a": torch.zeros(3)}, [])]
    stack = LazyStackedTensorDict.lazy_stack(members, 0)
    with pytest.raises(ValueError, match=r"shape \(3,\) of key 'a' does not start with"):
        stack.set_("a", torch.tensor([1.0, 2.0, 3.0]))
    assert all(torch.equal(m["a"], torch.zeros(3)) for m in members)
    stack.set_("a", torch.tensor([[1.0], [2.0]], dtype=torch.float64))
    assert members[1]["a"].tolist() == [2.0, 2.0, 2.0] and members[1]["a"].dtype == torch.float32


def test_update_nested_key_errors_name_the_full_key() -> None:
    td = _td()
    with pytest.raises(ValueError, match=r"TensorDict.update_: .* key \('n', 'c'\)"):
        td.update_({("n", "c"): torch.ones(3, 4)})
    with pytest.raises(ValueError, match=r"TensorDict.update_: .* key \('n', 'c'\)"):
        td.update_({"n": {"c": torch.ones(3, 4)}})
    with pytest.raises(ValueError, match=r"TensorDict.set_: .* key \('n', 'c'\)"):
        td.set_(("n", "c"), torch.ones(3, 4))
    with pytest.raises(KeyError, match=r"TensorDict.update_: key \('n', 'd'\)"):
        td.update_({"a": torch.ones(3, 2), ("n", "d"): torch.ones(3)})
    assert td["a"].eq(0).all()  # nothing written before the refusal
    td.update_({("n", "c"): torch.full((3,), 4.0)})  # a nested key written like a nested dict
    assert td["n", "c"].tolist() == [4.0, 4.0, 4.0]


def test_update_at_checks_every_key_before_writing() -> None:
    td = _td()
    with pytest.raises(
        ValueError, match=r"update_at_: shape \(5,\) .* shape \(\) of key \('n', 'c'\)"
    ):
        td.update_at_({"a": torch.ones(2), ("n", "c"): torch.ones(5)}, 1)
    assert td["a"].eq(0).all()
    mask = torch.tensor([True, False, True])
    with pytest.raises(ValueError, match=r"shape \(3,\) .* shape \(2, 2\) of key 'a'"):
        td.update_at_({"b": torch.ones(2, dtype=torch.long), "a": torch.ones(3)}, mask)
    assert td["b"].eq(0).all()
    td.update_at_({"a": torch.ones(2), "n": {"c": torch.ones(2)}}, mask)
    assert td["a"].tolist() == [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    assert td["n", "c"].tolist() == [1.0, 0.0, 1.0]


def _lazy() -> LazyStackedTensorDict:
    return LazyStackedTensorDict(
        *(
            TensorDict(
                a=torch.zeros(3), n=TensorDict(c=torch.zeros(3, 2), batch_size=[3]), batch_size=[3]
            )
            for _ in range(2)
        ),
        stack_dim=0,
    )


@pytest.mark.parametrize(
    "value", [torch.tensor(5.0), torch.arange(3.0), torch.ones(1, 3), torch.arange(2.0).view(2, 1)]
)
def test_lazy_update_from_a_dict_broadcasts_as_dense(value: torch.Tensor) -> None:
    lazy, dense = _lazy(), _lazy().to_tensordict()
    lazy.update_({"a": value, "n": {"c": torch.ones(2)}})
    dense.update_({"a": value, "n": {"c": torch.ones(2)}})
    assert torch.equal(lazy["a"], dense["a"]) and torch.equal(lazy["n", "c"], dense["n", "c"])
    with pytest.raises(ValueError, match=r"LazyStackedTensorDict.update_: shape \(4,\) .* key 'a'"):
        lazy.update_({"a": torch.ones(4)})


def test_ragged_lazy_update_gives_a_broadcast_value_to_each_member() -> None:
    lazy = LazyStackedTensorDict(TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(4)))
    lazy.update_({"a": torch.tensor(2.0)})
    assert [m["a"].tolist() for m in lazy.tensordicts] == [[2.0] * 3, [2.0] * 4]
    with pytest.raises(ValueError, match=r"key 'a'"):
        lazy.update_({"a": torch.ones(1, 3)})  # it would need the stack dim
    assert [m["a"].tolist() for m in lazy.tensordicts] == [[2.0] * 3, [2.0] * 4]


def test_update_at_checks_the_slot_the_write_fills() -> None:
    # an Ellipsis counts a leaf's own dims in set_at_ (leaf[..., 1]), as upstream: the
    # check sizes that same slot, so what the write takes passes and the rest is refused
    td = TensorDict(a=torch.zeros(3, 4, 5), b=torch.zeros(3, 4), batch_size=[3, 4])
    td.update_at_({"b": torch.ones(3), "a": torch.ones(3, 4)}, (..., 1))
    assert td["a"][..., 1].eq(1).all() and td["b"][..., 1].eq(1).all()
    fresh = TensorDict(a=torch.zeros(3, 4, 5), b=torch.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(ValueError, match=r"shape \(3, 5\) .* shape \(3, 4\) of key 'a'"):
        fresh.update_at_({"b": torch.ones(3), "a": torch.ones(3, 5)}, (..., 1))
    assert fresh["b"].eq(0).all()  # nothing written
