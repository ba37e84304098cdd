"""PersistentTensorDict over HDF5 and zarr: lazy reads by index, writes, hostile files."""

from __future__ import annotations

import multiprocessing
import pickle
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import tensordict
from tensordict import NonTensorStack, PersistentTensorDict, TensorDict

DTYPES = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.bool,
    torch.complex64,
]
BACKENDS = ["h5", "zarr"]


def _td(rows: int = 6) -> TensorDict:
    td = TensorDict(
        {str(d).split(".")[-1]: (torch.arange(rows * 2) % 3).to(d).view(rows, 2) for d in DTYPES},
        [rows],
    )
    td["nested", "x"] = torch.randn(rows, 3)
    td["nested", "deeper", "y"] = torch.arange(rows)
    td["empty"] = torch.zeros(rows, 0)
    td["note"] = "hello"
    td["nested", "words"] = NonTensorStack.from_list([f"w{i}" for i in range(rows)])
    return td


def _write(td: TensorDict, tmp_path: Path, backend: str, **kwargs: Any) -> PersistentTensorDict:
    if backend == "h5":
        return td.to_h5(tmp_path / "f.h5", **kwargs)
    return td.to_zarr(tmp_path / "s.zarr", **kwargs)


def _assert_same(a: Any, b: Any) -> None:
    ka = sorted(a.keys(include_nested=True, leaves_only=True), key=str)
    kb = sorted(b.keys(include_nested=True, leaves_only=True), key=str)
    assert ka == kb
    assert a.batch_size == b.batch_size
    for key in ka:
        x, y = a.get(key), b.get(key)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), key
        else:
            assert x.tolist() == y.tolist(), key


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_trip_and_reopen(tmp_path: Path, backend: str) -> None:
    td = _td()
    ptd = _write(td, tmp_path, backend)
    _assert_same(ptd, td)
    _assert_same(ptd.to_tensordict(), td)
    ptd.close()
    opened = (
        tensordict.from_h5(tmp_path / "f.h5")
        if backend == "h5"
        else tensordict.from_zarr(tmp_path / "s.zarr")
    )
    assert isinstance(opened["nested"], PersistentTensorDict)
    _assert_same(opened, td)
    assert "nested" in opened and ("nested", "x") in opened and "zzz" not in opened
    assert "PersistentTensorDict(" in repr(opened) and "deeper" in repr(opened)


INDICES: list[Any] = [
    2,
    -1,
    slice(1, 4),
    slice(None, None, 2),
    [4, 0, 4, 1],
    torch.tensor([5, -6, 3]),
    np.array([], dtype=np.int64),
    torch.tensor([True, False, True, True, False, False]),
    (None, 1),
    Ellipsis,
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_index_reads_match_memory(tmp_path: Path, backend: str, index: Any) -> None:
    td = _td().exclude("note", ("nested", "words"))
    ptd = _write(td, tmp_path, backend)
    got = ptd[index]
    assert isinstance(got, TensorDict)
    _assert_same(got, td[index])
    for key in td.keys(True, True):
        assert torch.equal(ptd.get_at(key, index), td.get(key)[index]), key


def test_two_dim_batch_and_non_tensor_rows(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.arange(12).view(3, 4)}, [3, 4])
    ptd = td.to_h5(tmp_path / "f.h5")
    _assert_same(ptd[1], td[1])
    _assert_same(ptd[[2, 0], 1:3], td[[2, 0], 1:3])
    words = _td()
    ptd2 = words.to_h5(tmp_path / "g.h5")
    assert ptd2[[3, 1]]["nested", "words"] == ["w3", "w1"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_reach_the_file(tmp_path: Path, backend: str) -> None:
    td = TensorDict({"a": torch.zeros(5, 2), "n": {"b": torch.zeros(5)}}, [5])
    ptd = _write(td, tmp_path, backend)
    expected = td.clone()
    rows = torch.tensor([4, 1])
    value = TensorDict({"a": torch.ones(2, 2), "n": {"b": torch.tensor([7.0, 8.0])}}, [2])
    ptd[rows] = value
    expected[rows] = value
    ptd[0] = TensorDict({"a": torch.full((2,), 3.0), "n": {"b": torch.tensor(5.0)}}, [])
    expected[0] = TensorDict({"a": torch.full((2,), 3.0), "n": {"b": torch.tensor(5.0)}}, [])
    ptd["c"] = torch.arange(5)
    expected["c"] = torch.arange(5)
    ptd.set_(("n", "b"), torch.full((5,), 2.0))
    expected.set_(("n", "b"), torch.full((5,), 2.0))
    ptd["label"] = "x"
    expected["label"] = "x"
    _assert_same(ptd, expected)
    ptd.del_("c")
    ptd.del_("label")
    assert sorted(ptd.keys()) == ["a", "n"]
    with pytest.raises(ValueError, match=r"PersistentTensorDict.set: shape \(4,\) of key 'd'"):
        ptd["d"] = torch.zeros(4)
    with pytest.raises(ValueError, match="repeated rows"):
        ptd[[1, 1]] = value
    with pytest.raises(KeyError, match="PersistentTensorDict.get: key 'zzz' is not in"):
        ptd.get("zzz")
    with pytest.raises(
        TypeError, match=r"PersistentTensorDict.set: entry 'h' has dtype torch.bfloat16"
    ):
        ptd["h"] = torch.zeros(5, dtype=torch.bfloat16)


def test_operations_use_the_memory_copy(tmp_path: Path) -> None:
    td = _td().select("int64", "float32", "nested").exclude(("nested", "words"))
    ptd = td.to_h5(tmp_path / "f.h5")
    _assert_same((ptd.apply(lambda x: x + 1)), td.apply(lambda x: x + 1))
    _assert_same(ptd.reshape(2, 3), td.reshape(2, 3))
    assert [t["nested", "deeper", "y"].item() for t in ptd.unbind(0)] == list(range(6))


def test_foreign_file_batch_size_and_hostile_nodes(tmp_path: Path) -> None:
    path = tmp_path / "foreign.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.zeros((4, 3)))
        f.create_dataset("g/b", data=np.ones((4, 2, 2)))
    ptd = PersistentTensorDict.from_h5(path)
    assert ptd.batch_size == torch.Size([4]) and ptd["g"].batch_size == torch.Size([4])
    assert PersistentTensorDict.from_h5(path, batch_size=[]).batch_size == torch.Size([])
    ptd.close()
    with h5py.File(path, "a") as f:
        f["broken"] = h5py.SoftLink("/nowhere")
        f.create_dataset("text", data=np.array([b"x", b"y", b"z", b"w"]))
        f["elsewhere"] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/a")
    ptd = PersistentTensorDict.from_h5(path, batch_size=[4])
    with pytest.raises(ValueError, match=r"foreign.h5', key 'broken' is a SoftLink, not a numeric"):
        ptd["broken"]
    with pytest.raises(ValueError, match=r"key 'text' is a Dataset, not a numeric array"):
        ptd["text"]
    with pytest.raises(ValueError, match=r"key 'elsewhere' is a ExternalLink, not a numeric"):
        ptd["elsewhere"]
    with pytest.raises(ValueError, match=r"key 'a' has shape \(4, 3\), which does not start with"):
        PersistentTensorDict.from_h5(path, batch_size=[5])
    with h5py.File(tmp_path / "bad.h5", "w") as f:
        f.attrs["tensordict"] = "{not json"
    with pytest.raises(ValueError, match=r"bad.h5', key '/': malformed 'tensordict' attribute"):
        PersistentTensorDict.from_h5(tmp_path / "bad.h5")
    with pytest.raises(ValueError, match="pass exactly one of filename and group"):
        PersistentTensorDict()
    with pytest.raises(ValueError, match="unknown backend 'x'"):
        PersistentTensorDict(filename=path, backend="x")


def test_an_open_group_and_batch_options(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    TensorDict({"a": torch.zeros(3, 2)}, [3]).to_h5(path).close()
    with h5py.File(path, "r") as f:
        ptd = PersistentTensorDict(group=f, batch_size=[3])
        assert torch.equal(ptd["a"], torch.zeros(3, 2))
    assert TensorDict.from_h5(path, batch_dims=0).batch_size == torch.Size([])
    with pytest.raises(TypeError, match="from_h5: pass batch_size or auto_batch_size"):
        TensorDict.from_h5(path, batch_size=[3], auto_batch_size=True)


def _worker_rows(ptd: PersistentTensorDict) -> list[float]:
    return ptd[[2, 0]]["a"].tolist()


def test_pickled_handles_reopen_in_each_process(tmp_path: Path) -> None:
    ptd = TensorDict({"a": torch.arange(4.0)}, [4]).to_h5(tmp_path / "f.h5")
    clone = pickle.loads(pickle.dumps(ptd))
    assert clone._handle is not ptd._handle and clone[[1]]["a"].tolist() == [1.0]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_worker_rows, (ptd,)) == [2.0, 0.0]


@pytest.mark.parametrize("storage", [None, "shared", "memmap", "h5", "zarr"])
def test_from_schema(tmp_path: Path, storage: str | None) -> None:
    schema = {"obs": ([4], torch.float32), "reward": ([], torch.int64)}
    kwargs: dict[str, Any] = {}
    if storage == "memmap":
        kwargs["prefix"] = tmp_path / "mm"
    elif storage in ("h5", "zarr"):
        kwargs["filename"] = tmp_path / f"buf.{storage}"
    td = TensorDict.from_schema(schema, batch_size=[10], storage=storage, **kwargs)
    assert td["obs"].shape == (10, 4) and td["reward"].dtype == torch.int64
    assert not td["obs"].any()
    td[3] = TensorDict(obs=torch.ones(4), reward=torch.tensor(2), batch_size=[])
    assert td["obs"][3].tolist() == [1.0] * 4 and td["reward"][3].item() == 2
    if storage == "memmap":
        assert td.is_memmap()


def test_from_schema_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"from_schema: storage='h5' needs filename="):
        TensorDict.from_schema({"a": ([], torch.float32)}, storage="h5")
    with pytest.raises(ValueError, match=r"from_schema: Unknown storage backend 'redis'"):
        TensorDict.from_schema({"a": ([], torch.float32)}, storage="redis")


def test_zarr_chunks_and_zip_store(tmp_path: Path) -> None:
    from zarr.storage import ZipStore

    td = TensorDict({"img": torch.randn(32, 3, 4), "y": torch.arange(32)}, [32])
    z = td.to_zarr(tmp_path / "c.zarr", chunks=(8, 3, 4))
    assert z.file["img"].chunks == (8, 3, 4) and z.file["y"].chunks == (8,)
    td.to_zarr(ZipStore(tmp_path / "d.zip", mode="w")).close()
    back = TensorDict.from_zarr(ZipStore(tmp_path / "d.zip", mode="r"))
    _assert_same(back, td)
    back.close()


def test_generic_get_at() -> None:
    td = TensorDict({"a": torch.arange(4)}, [4])
    assert td.get_at("a", 2).item() == 2
    assert td.get_at("b", 0, None) is None


def test_missing_packages_name_their_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "h5py", None)
    monkeypatch.setitem(sys.modules, "zarr", None)
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(ImportError, match=r"'h5py'.*tensordict\[h5\]"):
        td.to_h5(tmp_path / "f.h5")
    with pytest.raises(ImportError, match=r"'zarr'.*tensordict\[zarr\]"):
        td.to_zarr(tmp_path / "s.zarr")


def _double(td: TensorDict) -> TensorDict:
    return td.set("y", td["x"] * 2)


def test_map_workers_read_their_own_rows(tmp_path: Path) -> None:
    ptd = TensorDict({"x": torch.arange(8.0)}, [8]).to_h5(tmp_path / "f.h5")
    out = ptd.map(_double, num_workers=2, chunksize=2)
    assert torch.equal(out["y"], torch.arange(8.0) * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_see_every_write_after_nodes_were_cached(tmp_path: Path, backend: str) -> None:
    td = TensorDict({"a": torch.arange(6.0), "nested": {"b": torch.ones(6, 2)}}, [6])
    ptd = _write(td, tmp_path, backend)
    idx = torch.tensor([4, 1])
    assert torch.equal(ptd[idx]["a"], td["a"][idx])  # the nodes are now cached
    ptd.set("a", torch.arange(6) * 10)  # replaced with another dtype
    assert ptd[idx]["a"].dtype == torch.int64
    assert torch.equal(ptd[idx]["a"], torch.tensor([40, 10]))
    assert torch.equal(ptd.get_at(("nested", "b"), idx), torch.ones(2, 2))
    ptd.del_(("nested", "b"))
    assert ("nested", "b") not in ptd
    with pytest.raises(KeyError):
        ptd.get(("nested", "b"))
    ptd.close()
