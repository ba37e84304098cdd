"""New memory-mapped entries (make_memmap*), refreshing from disk, and the save/load aliases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict, lazy_stack


def test_make_memmap_from_tensor_copies_or_only_shapes() -> None:
    td = TensorDict({}, [3])
    source = torch.arange(6, dtype=torch.int16).reshape(3, 2)
    leaf = td.make_memmap_from_tensor("a", source)
    assert isinstance(leaf, MemoryMappedTensor) and td["a"] is leaf
    assert torch.equal(leaf, source)
    empty = td.make_memmap_from_tensor(("n", "b"), source, copy_data=False)
    assert (empty.shape, empty.dtype) == (source.shape, source.dtype)
    assert isinstance(td["n", "b"], MemoryMappedTensor)


def test_make_memmap_from_storage_shares_the_storage() -> None:
    source = MemoryMappedTensor.zeros(2, 3)
    td = TensorDict({}, [2])
    leaf = td.make_memmap_from_storage("a", source.untyped_storage(), (2, 3), dtype=torch.float32)
    source.fill_(5.0)
    assert torch.equal(leaf, torch.full((2, 3), 5.0))


@pytest.mark.parametrize(
    "op", ["make_memmap", "make_memmap_from_tensor", "make_memmap_from_storage"]
)
def test_a_new_memmap_entry_refuses_an_existing_key(op: str) -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    args: dict[str, tuple[object, ...]] = {
        "make_memmap": ((2,),),
        "make_memmap_from_tensor": (torch.zeros(2),),
        "make_memmap_from_storage": (MemoryMappedTensor.zeros(2).untyped_storage(), (2,)),
    }
    with pytest.raises(KeyError, match=f"TensorDict.{op}: the key .a. already exists within"):
        getattr(td, op)("a", *args[op])
    assert not isinstance(td["a"], MemoryMappedTensor)


def test_memmap_refresh_takes_what_is_on_disk_now(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"a": torch.zeros(2)}, [2]).memmap(path)
    TensorDict({"a": torch.ones(2), "b": torch.full((2,), 7)}, [2]).memmap(path, existsok=True)
    assert td["a"].tolist() == [0.0, 0.0]  # still the mapping taken at load
    td.lock_()
    out = td.memmap_refresh_()
    assert out is td and td.is_locked  # the lock is kept
    assert td["a"].tolist() == [1.0, 1.0] and td["b"].tolist() == [7, 7]


def test_memmap_refresh_needs_a_checkpoint() -> None:
    with pytest.raises(RuntimeError, match=r"TensorDict.memmap_refresh_: not memory-mapped"):
        TensorDict({"a": torch.zeros(2)}, [2]).memmap_refresh_()


def test_dumps_and_load_are_save_and_load_memmap_(tmp_path: Path) -> None:
    src = TensorDict({"a": torch.arange(3.0), "n": {"b": torch.ones(3, 2)}}, [3])
    saved = src.dumps(tmp_path / "x")
    assert saved.is_memmap()
    dst = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3, 2)}}, [3])
    assert dst.load_(tmp_path / "x") is dst
    assert (dst == src).all()


def test_saved_path_is_the_checkpoint_root(tmp_path: Path) -> None:
    nested_only = TensorDict({"net": {"w": torch.zeros(2)}}, []).memmap(tmp_path / "a")
    assert nested_only.saved_path == str(tmp_path / "a")  # not the sub-folder "net"
    stack = lazy_stack(
        [
            TensorDict({"x": torch.zeros(2)}, [2]),
            TensorDict({"x": torch.ones(2), "y": torch.ones(2)}, [2]),
        ]
    ).memmap(tmp_path / "s")
    assert stack.saved_path == str(tmp_path / "s")
    assert TensorDict.load_memmap(tmp_path / "s" / "1").saved_path == str(tmp_path / "s" / "1")
    mixed = nested_only.clone(recurse=False)
    with mixed.unlock_():
        mixed["plain"] = torch.zeros(())
    assert mixed.saved_path is None  # a leaf in memory: not one checkpoint


def test_memmap_refresh_of_a_nested_only_checkpoint_keeps_the_structure(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"net": {"w": torch.zeros(2)}}, []).memmap(path)
    TensorDict({"net": {"w": torch.ones(2)}}, []).memmap(path, existsok=True)
    td.memmap_refresh_()
    assert set(td.keys(include_nested=True)) == {"net", ("net", "w")}
    assert td["net", "w"].tolist() == [1.0, 1.0]


# ------------------------------------------------------------ memory-mapped means locked
@pytest.mark.parametrize(
    ("make", "writable"),
    [
        (lambda td, p: td.memmap(p), True),
        (lambda td, p: td.memmap_(p), True),
        (lambda td, p: td.memmap_like(p), True),
        (lambda td, p: td.memmap(), True),
        (lambda td, p: td.memmap(str(p) + ".tdz"), False),  # an archive maps read-only
        (lambda td, p: td.memmap_(p, return_early=True).result(), True),
        (lambda td, p: td.share_memory_(), True),
    ],
)
def test_memory_mapped_and_shared_collections_are_locked(
    tmp_path: Path, make: Any, writable: bool
) -> None:
    """As upstream: a key added afterwards would live in RAM only, silently missing from
    the files (or from the other processes); in-place writes still go through."""
    td = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3])
    out = make(td, tmp_path / "ckpt")
    assert out.is_locked and out["n"].is_locked
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        out["c"] = torch.zeros(3)
    if writable:
        out.set_("a", torch.ones(3))
        assert out["a"].eq(1).all()
    out.unlock_()
    out["c"] = torch.zeros(3)
    assert "c" in out.keys()


def test_make_memmap_adds_to_a_locked_collection_and_keeps_it_locked(tmp_path: Path) -> None:
    td = TensorDict({}, []).memmap_(tmp_path / "ckpt")
    assert td.is_locked
    td.make_memmap("a", shape=[3, 4], dtype=torch.float32).fill_(1)
    td.make_memmap_from_tensor(("b", "c"), torch.ones(5))
    assert td.is_locked and td["b"].is_locked
    assert td["a"].eq(1).all() and td["b", "c"].eq(1).all()
    with pytest.raises(KeyError):
        td.make_memmap("a", shape=[1])
    assert td.is_locked
