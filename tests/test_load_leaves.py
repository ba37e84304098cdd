"""Loading leaves through the loader's fast paths (issue 15): every dtype, layout and size
loads bit-exactly, every malformed tensor entry is still refused with FormatError, and a
loaded leaf still knows its file (recorded on its storage, not in the registry)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict
from tensordict._format import DTYPES, FormatError
from tensordict._memmap_backing import _BACKINGS

_NAMED = sorted(DTYPES.items())


def _bytes_of(t: torch.Tensor) -> list[int]:
    """A contiguous tensor's elements as raw bytes (compares NaNs and -0.0 exactly; no
    kernel of the dtype runs, so every dtype works)."""
    assert t.is_contiguous()
    return t.reshape(-1).view(torch.uint8).tolist() if t.numel() else []


def _random_bytes(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Random bytes of ``shape`` elements of ``dtype``, as uint8 (one more dim: the bytes)."""
    high = 2 if dtype == torch.bool else 256  # (a bool byte other than 0 or 1 is not a bool)
    return torch.randint(0, high, (*shape, dtype.itemsize), dtype=torch.uint8)


def _as(raw: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return raw.view(dtype).squeeze(-1) if raw.dim() > 1 else raw.view(dtype).reshape(())


def _save_and_load(tmp_path: Path, td: TensorDict, where: str, threads: int = 0) -> Any:
    """Save ``td`` under key "sub" of a bigger collection, as a folder or an archive, and
    load it back: the whole (``where`` "folder", "archive") or "sub" alone."""
    outer = TensorDict({"first": torch.arange(5.0), "sub": td, "last": torch.ones(3)}, [])
    if where.startswith("folder"):
        outer.memmap(tmp_path / "ckpt")
        path, subpath = tmp_path / "ckpt", None
    else:
        outer.save(str(tmp_path / "x.tdz"))
        path, subpath = tmp_path / "x.tdz", None
    if where.endswith("sub"):
        subpath = "sub"
    loaded = TensorDict.load_memmap(path, subpath=subpath, num_threads=threads)
    return loaded if subpath else loaded["sub"]


_WHERE = ["folder", "folder sub", "archive", "archive sub"]


@pytest.mark.parametrize("where", _WHERE)
@pytest.mark.parametrize(("name", "dtype"), _NAMED, ids=[n for n, _ in _NAMED])
def test_every_dtype_loads_bit_exactly(
    tmp_path: Path, name: str, dtype: torch.dtype, where: str
) -> None:
    torch.manual_seed(0)
    raws = {
        "matrix": _random_bytes(dtype, (3, 5)),
        "scalar": _random_bytes(dtype, ()),
        "empty": _random_bytes(dtype, (0, 4)),
    }
    leaves = {key: _as(raw, dtype) for key, raw in raws.items()}
    # saved from non-contiguous layouts: a column and a transpose (expected: their bytes
    # gathered as uint8, with no kernel of the dtype itself)
    grid, pair = _random_bytes(dtype, (6, 4)), _random_bytes(dtype, (2, 3))
    try:
        leaves["column"] = _as(grid, dtype)[:, 1]
        leaves["transposed"] = _as(pair, dtype).t()
        leaves["column"].contiguous()  # (torch copies few sub-byte dtypes, warns for some)
        raws["column"], raws["transposed"] = grid[:, 1], pair.transpose(0, 1).contiguous()
    except (NotImplementedError, RuntimeError, UserWarning):  # (complex32 warns)
        leaves.pop("column", None)
        leaves.pop("transposed", None)
    assert leaves["scalar"].dim() == 0
    loaded = _save_and_load(tmp_path, TensorDict(dict(leaves), []), where)
    assert set(loaded.keys()) == set(leaves)
    for key, want in leaves.items():
        got = loaded[key]
        assert got.dtype == dtype, key
        assert got.shape == want.shape, key
        assert _bytes_of(got) == raws[key].reshape(-1).tolist(), key


@pytest.mark.parametrize("threads", [0, 4])
@pytest.mark.parametrize("where", _WHERE)
def test_leaves_of_several_dtypes_and_sizes_load_from_one_mapping(
    tmp_path: Path, where: str, threads: int
) -> None:
    td = TensorDict(
        {
            "tiny": torch.tensor([7], dtype=torch.int8),
            "f64": torch.arange(6, dtype=torch.float64).reshape(2, 3),
            "empty": torch.zeros(0, 3),
            "i16": torch.arange(-3, 4, dtype=torch.int16),
            "nested": {"b": torch.full((2, 2), 2.5, dtype=torch.bfloat16)},
        },
        [],
    )
    loaded = _save_and_load(tmp_path, td, where, threads)
    for key in ("tiny", "f64", "empty", "i16", ("nested", "b")):
        assert loaded[key].dtype == td[key].dtype
        assert torch.equal(loaded[key], td[key]), key


@pytest.mark.parametrize("where", ["archive", "archive sub"])
def test_an_archive_of_tiny_leaves_loads(tmp_path: Path, where: str) -> None:
    """Leaves of a few bytes in all: too small a window to map on its own."""
    td = TensorDict({"a": torch.tensor([1], dtype=torch.uint8), "b": torch.zeros(0)}, [])
    loaded = _save_and_load(tmp_path, td, where)
    assert loaded["a"].tolist() == [1]
    assert loaded["b"].shape == torch.Size([0])


def test_an_archive_leaf_written_through_a_copy_leaves_the_file(tmp_path: Path) -> None:
    td = TensorDict({"w": torch.arange(4.0)}, [])
    loaded = _save_and_load(tmp_path, td, "archive sub")
    loaded["w"][0] = 9.0  # copy-on-write: private to this mapping
    again = _save_and_load(tmp_path / "again", td, "archive sub")
    assert again["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    fresh = TensorDict.load_memmap(tmp_path / "x.tdz", subpath="sub")
    assert fresh["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_nested_and_batched_leaves_load_in_place(tmp_path: Path) -> None:
    td = TensorDict(
        {"a": torch.arange(12.0).reshape(3, 4), "sub": {"b": torch.ones(3, 2, dtype=torch.int16)}},
        [3],
    )
    td.memmap(tmp_path / "ckpt")
    loaded = TensorDict.load_memmap(tmp_path / "ckpt")
    assert loaded.batch_size == torch.Size([3])
    assert loaded["sub"].batch_size == torch.Size([3])
    torch.testing.assert_close(loaded["a"], td["a"])
    torch.testing.assert_close(loaded["sub", "b"], td["sub", "b"])


def test_a_loaded_leaf_knows_its_file_and_pickles_by_name(tmp_path: Path) -> None:
    TensorDict({"w": torch.arange(6.0).reshape(2, 3)}, []).memmap(tmp_path / "ckpt")
    before = len(_BACKINGS)
    w = TensorDict.load_memmap(tmp_path / "ckpt")["w"]
    assert len(_BACKINGS) == before  # recorded on the storage, not in the registry
    assert type(w) is MemoryMappedTensor
    assert w.filename == str(tmp_path / "ckpt" / "w.memmap")
    assert w[1].filename == w.filename  # a view finds the same record
    assert w.parent_shape == torch.Size([2, 3])
    data = pickle.dumps(w[1:])
    assert len(data) < 1000  # by name, not by value
    back = pickle.loads(data)
    assert back.tolist() == [[3.0, 4.0, 5.0]]
    w[0, 0] = 7.0  # writes reach the file
    again = TensorDict.load_memmap(tmp_path / "ckpt")["w"]
    assert again[0, 0].item() == 7.0


def _edit(folder: Path, change: Any) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    change(meta["entries"]["x"])
    (folder / "meta.json").write_text(json.dumps(meta))


def _saved(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    TensorDict({"x": torch.arange(6, dtype=torch.int32).reshape(2, 3)}, []).memmap(folder)
    return folder


def test_a_truncated_leaf_file_is_refused_before_mapping(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    os.truncate(folder / "x.memmap", 20)
    with pytest.raises(FormatError, match=r"x\.memmap.*holds 20 bytes; shape \[2, 3\] of int32"):
        TensorDict.load_memmap(folder)
    assert os.path.getsize(folder / "x.memmap") == 20  # never grown


def test_an_overlong_leaf_file_is_refused(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    with open(folder / "x.memmap", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(FormatError, match="holds 25 bytes"):
        TensorDict.load_memmap(folder)


def test_a_leaf_that_is_a_folder_or_missing_is_refused(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    os.remove(folder / "x.memmap")
    with pytest.raises(FormatError, match="missing or not a regular file"):
        TensorDict.load_memmap(folder)
    assert not (folder / "x.memmap").exists()  # not created by the load
    os.mkdir(folder / "x.memmap")
    with pytest.raises(FormatError, match="missing or not a regular file"):
        TensorDict.load_memmap(folder)


def test_a_leaf_link_inside_loads_and_one_leading_outside_is_refused(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    os.rename(folder / "x.memmap", folder / "real.bin")
    os.symlink("real.bin", folder / "x.memmap")
    assert TensorDict.load_memmap(folder)["x"].tolist() == [[0, 1, 2], [3, 4, 5]]
    os.remove(folder / "x.memmap")
    os.rename(folder / "real.bin", tmp_path / "outside.bin")
    os.symlink(tmp_path / "outside.bin", folder / "x.memmap")
    with pytest.raises(FormatError, match="leads outside the checkpoint"):
        TensorDict.load_memmap(folder)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(dtype="float99"), "unknown dtype 'float99'"),
        (lambda r: r.update(dtype=["int32"]), r"unknown dtype \['int32'\]"),
        (lambda r: r.pop("dtype"), "unknown dtype None"),
        (lambda r: r.update(shape=[2, -3]), "must be a list of non-negative ints"),
        (lambda r: r.update(shape=[2, 3.0]), "must be a list of non-negative ints"),
        (lambda r: r.update(shape=[True, 3]), "must be a list of non-negative ints"),
        (lambda r: r.update(shape="2,3"), "must be a list of non-negative ints"),
        (lambda r: r.update(shape=[2**62, 2]), "must be a list of non-negative ints"),
        (lambda r: r.update(shape=[2**40, 2**40]), "beyond"),
        (lambda r: r.update(shape=[0, 2**61]), "beyond"),
        (lambda r: r.update(file=".."), "file name '..' of key 'x'"),
        (lambda r: r.update(file="a/b"), "file name 'a/b' of key 'x'"),
        (lambda r: r.update(file="a\0b"), "file name 'a\\\\x00b' of key 'x'"),
        (lambda r: r.update(file=""), "file name '' of key 'x'"),
        (lambda r: r.update(file=7), "file name 7 of key 'x'"),
        (lambda r: r.update(sha256=5), "non-string sha256"),
    ],
)
def test_malformed_tensor_entries_are_refused(tmp_path: Path, change: Any, message: str) -> None:
    folder = _saved(tmp_path)
    _edit(folder, change)
    with pytest.raises(FormatError, match=message):
        TensorDict.load_memmap(folder)


def test_a_wrong_checksum_is_refused_only_with_verify(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    _edit(folder, lambda r: r.update(sha256="0" * 64))
    assert TensorDict.load_memmap(folder)["x"].shape == torch.Size([2, 3])
    with pytest.raises(FormatError, match="fails its checksum"):
        TensorDict.load_memmap(folder, verify=True)


@pytest.mark.parametrize(
    ("member", "value", "message"),
    [
        ("format", "other", "is not a tensordict checkpoint"),
        ("version", 3, "has format version 3"),
        ("version", True, "member 'version' has the wrong type"),
        ("batch_size", [-1], "batch_size must be a list of non-negative ints"),
        ("shape", [1], "differs from its 'batch_size'"),
        ("names", ["a"], "member 'names' must hold one string or null per batch dim"),
        ("device", 3, "member 'device' has the wrong type"),
    ],
)
def test_malformed_metadata_is_refused(
    tmp_path: Path, member: str, value: Any, message: str
) -> None:
    folder = _saved(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    meta[member] = value
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match=message):
        TensorDict.load_memmap(folder)


def test_named_and_batched_metadata_still_loads(tmp_path: Path) -> None:
    td = TensorDict({"x": torch.zeros(2, 3)}, [2, 3], names=["a", None])
    td.memmap(tmp_path / "ckpt")
    loaded = TensorDict.load_memmap(tmp_path / "ckpt")
    assert loaded.names == ["a", None]
    assert loaded.batch_size == torch.Size([2, 3])


def _nested(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    TensorDict({"s": {"x": torch.arange(3.0)}, "t": {"y": torch.ones(2)}}, []).memmap(folder)
    return folder


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "a\\b", "a\0b", 5])
def test_an_invalid_sub_folder_name_is_refused(tmp_path: Path, name: Any) -> None:
    folder = _nested(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    meta["entries"]["s"]["dir"] = name
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="folder name .* of key 's'"):
        TensorDict.load_memmap(folder)


def test_sub_folder_links_out_or_to_a_folder_already_loaded_are_refused(tmp_path: Path) -> None:
    folder = _nested(tmp_path)
    os.rename(folder / "s", tmp_path / "s_outside")
    os.symlink(tmp_path / "s_outside", folder / "s")
    with pytest.raises(FormatError, match="folder 's' of key 's' .* leads outside"):
        TensorDict.load_memmap(folder)
    os.remove(folder / "s")
    os.rename(tmp_path / "s_outside", folder / "s_real")
    os.symlink("s_real", folder / "s")  # a link inside: loads
    assert TensorDict.load_memmap(folder)["s", "x"].tolist() == [0.0, 1.0, 2.0]
    meta = json.loads((folder / "meta.json").read_text())
    meta["entries"]["t"]["dir"] = "s_real"  # two entries reaching one folder
    meta["entries"]["t"]["meta"] = meta["entries"]["s"]["meta"]
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="same folder as one already loaded"):
        TensorDict.load_memmap(folder)


@pytest.mark.parametrize("archive", [False, True])
def test_subpath_strings_join_as_os_path_join(tmp_path: Path, archive: bool) -> None:
    td = TensorDict({"sub": {"x": torch.arange(3)}, "y": torch.ones(1)}, [])
    path = tmp_path / ("x.tdz" if archive else "ckpt")
    td.save(str(path))
    for subpath in ("sub", "sub/", "./sub", "sub//"):
        assert TensorDict.load_memmap(path, subpath=subpath)["x"].tolist() == [0, 1, 2]
    assert set(TensorDict.load_memmap(path, subpath="").keys()) == {"sub", "y"}
    absolute = os.path.join(str(path), "sub")  # (an absolute sub-path replaces the prefix)
    assert TensorDict.load_memmap(tmp_path / "elsewhere", subpath=absolute)["x"].tolist() == [
        0,
        1,
        2,
    ]
