"""Edge cases found in review of indexing, shape ops, stacking and lazy stacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import NonTensorStack, TensorDict, lazy_stack, pad


def _words() -> TensorDict:
    return TensorDict({"s": NonTensorStack.from_list(["x", "y", "z"])}, [3])


def test_non_tensor_writes_are_copy_on_write() -> None:
    td = _words()
    c = td.clone()
    c[0] = {"s": "NEW"}
    assert td["s"] == ["x", "y", "z"] and c["s"] == ["NEW", "y", "z"]
    view = td[0:2]
    view[0] = {"s": "V"}
    assert td["s"] == ["x", "y", "z"]


def test_masked_fill_and_pad_keep_non_tensor_values() -> None:
    td = _words()
    assert td.masked_fill(torch.tensor([True, False, False]), 7.0)["s"] == ["x", "y", "z"]
    assert pad(td, [1, 0])["s"] == [None, "x", "y", "z"]


def test_no_op_shape_ops_do_not_share_nested_levels() -> None:
    td = TensorDict({"n": {"b": torch.zeros(3)}}, [3])
    for out in (td.reshape(3), td.view(3), td.squeeze(), td.rename(None)):
        out["n", "new"] = torch.ones(3)
        assert ("n", "new") not in td.keys(True)


def test_numpy_non_tensor_values_stack() -> None:
    a = TensorDict({"s": np.array(["a", "b"])}, [])
    out = torch.stack([a, a])
    assert all(np.array_equal(v, np.array(["a", "b"])) for v in out["s"])  # one per element
    b = TensorDict({"s": np.array(["c", "d"])}, [])
    assert len(torch.stack([a, b])["s"]) == 2


def test_non_tensor_stack_with_zero_size_dims() -> None:
    td = TensorDict({"s": NonTensorStack.from_list([["a", "b"], ["c", "d"]])}, [2, 2])
    assert td[:, :0]["s"] == [[], []]
    assert td[:0]["s"] == []


def test_lazy_preallocation_of_stacks_and_longer_nested_batches() -> None:
    td = TensorDict({}, [4])
    td[0:2] = TensorDict({"s": NonTensorStack.from_list(["a", "b"])}, [2])
    assert td["s"] == ["a", "b", None, None]
    td = TensorDict({}, [4])
    td[0] = TensorDict({"n": TensorDict({"b": torch.ones(3)}, [3])}, [])
    assert td["n"].batch_size == (4, 3)
    assert torch.equal(td["n", "b"][0], torch.ones(3))


def test_names_follow_basic_indexing() -> None:
    tdn = TensorDict({"a": torch.zeros(3, 4)}, [3, 4], names=["x", "y"])
    assert tdn[0].names == ["y"]
    assert tdn[:, 0].names == ["x"]
    assert tdn[..., 1:].names == ["x", "y"]
    assert tdn[None].names == [None, "x", "y"]
    assert tdn[torch.tensor([0, 1])].names == ["x", "y"]


def test_bad_sequence_indices_raise_index_errors() -> None:
    td = TensorDict({"a": torch.zeros(3)}, [3])
    with pytest.raises(IndexError, match="not a list of ints or bools"):
        td[["a"]]
    with pytest.raises(IndexError, match="not a list of ints or bools"):
        td[[0, slice(None)]]


def test_torch_spellings_accept_torch_keywords() -> None:
    td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2, 3])
    assert torch.equal(torch.flip(td, dims=(0,))["a"], td["a"].flip(0))
    assert torch.permute(td, dims=(1, 0)).batch_size == (3, 2)
    assert torch.reshape(td, shape=(6,)).batch_size == (6,)
    assert torch.unflatten(td, 1, sizes=(3, 1)).batch_size == (2, 3, 1)
    assert len(torch.split(td, split_size_or_sections=1, dim=0)) == 2


def test_cat_of_mixed_entry_kinds_names_the_key() -> None:
    def make(v: object) -> TensorDict:
        return TensorDict({"k": v}, [3])

    with pytest.raises(TypeError, match="torch.cat: key 'k' holds"):
        torch.cat([make("x"), make(torch.zeros(3))])
    with pytest.raises(TypeError, match="torch.cat: key 'k' holds"):
        torch.cat([make({"b": torch.zeros(3)}), make(torch.zeros(3))])


def _lazy() -> object:
    return lazy_stack([TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)], 1)


def test_lazy_stack_with_lazy_inputs() -> None:
    lz = _lazy()
    assert torch.stack([lz, lz]).batch_size == (2, 3, 2)
    assert torch.cat([lz, lz]).batch_size == (6, 2)
    td = TensorDict({"a": torch.ones(3, 2)}, [3, 2])
    td[:] = lz
    assert (td["a"] == 0).all()


def test_lazy_narrow_and_empty_selection() -> None:
    lz = lazy_stack([TensorDict({"a": torch.zeros(3, 4)}, [3]) for _ in range(2)])
    assert lz.narrow(1, -1, 1).batch_size == (2, 1)
    with pytest.raises(RuntimeError, match="do not fit dim 1 of size 3"):
        lz.narrow(1, 2, 5)
    assert lz.narrow(0, -1, 1).batch_size == (1, 3)
    assert lz[0:0].batch_size == (0, 3)
    assert lz[[]].batch_size == (0, 3)


def test_lazy_index_writes() -> None:
    lz = _lazy()
    v = lz[1]
    v[0] = {"a": torch.tensor(9.0)}
    assert lz.tensordicts[0]["a"][1] == 9
    lz2 = lazy_stack([TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)])
    lz2[:, 0] = {"a": torch.tensor([1.0, 2.0])}
    assert lz2.tensordicts[0]["a"][0] == 1 and lz2.tensordicts[1]["a"][0] == 2
    lz2[0:2] = torch.ones(2, 1)
    assert (lz2.tensordicts[1]["a"] == 1).all()
    lz2[0] = {"a": torch.full((3,), 4.0)}
    assert (lz2.tensordicts[0]["a"] == 4).all()
    with pytest.raises(RuntimeError):
        lz2[0] = {"a": torch.ones(3, 7)}


def test_lazy_small_fixes() -> None:
    lz = lazy_stack([TensorDict({"a": torch.zeros(3, 1)}, [3, 1]) for _ in range(2)])
    assert lz.squeeze((2,)).batch_size == (2, 3)
    out = lz.where(torch.ones(2, 3, 1, dtype=torch.bool), torch.tensor(1.0))
    assert out.batch_size == (2, 3, 1)
    nested = lazy_stack([TensorDict({"n": TensorDict({"s": "v"}, [3, 5])}, [3]) for _ in range(2)])
    assert nested.get(("n", "s")).batch_size == (2, 3, 5)
