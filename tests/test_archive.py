"""Single-file archives and background saves (docs/format.md, sections 10 and 11)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    TensorDict,
    TensorDictFuture,
    is_memmap_archive,
    lazy_stack,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict._archive import ALIGN
from tensordict._format import FormatError


def _sample() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(10.0),
            "b": {"c": torch.arange(30, dtype=torch.int16).reshape(10, 3)},
            "odd": torch.arange(10, dtype=torch.uint8),
            "text": "hello",
            "obj": {1, 2},
        },
        [10],
    )


def _check(back: TensorDict, allow_obj: bool = True) -> None:
    truth = _sample()
    for key in (("a",), ("b", "c"), ("odd",)):
        assert torch.equal(back[key], truth[key])
    assert back["text"] == "hello"
    if allow_obj:
        assert back["obj"] == {1, 2}


def test_tdz_prefix_writes_one_file_that_loads_lazily(tmp_path: Path) -> None:
    out = _sample().memmap(tmp_path / "x.tdz")
    assert sorted(os.listdir(tmp_path)) == ["x.tdz"]  # one file, no staging left
    assert is_memmap_archive(tmp_path / "x.tdz")
    _check(out)
    back = TensorDict.load(tmp_path / "x.tdz", allow_pickle=True)
    _check(back)
    assert back.is_memmap()
    # every leaf's data is aligned in the file, and is a view of one mapping
    with zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        assert zf.testzip() is None
    storages = {back[k].untyped_storage().data_ptr() for k in (("a",), ("b", "c"), ("odd",))}
    assert len(storages) == 1
    assert all(back[k].data_ptr() % ALIGN == 0 for k in (("a",), ("b", "c"), ("odd",)))
    sub = TensorDict.load_memmap(tmp_path / "x.tdz", subpath="b")
    assert torch.equal(sub["c"], _sample()["b", "c"])


def test_archive_pickle_needs_the_opt_in(tmp_path: Path) -> None:
    _sample().memmap(tmp_path / "x.tdz")
    with pytest.raises(RuntimeError, match="key 'obj' .* pass allow_pickle=True"):
        TensorDict.load_memmap(tmp_path / "x.tdz")


def test_pack_unpack_round_trip_and_lazy_stacks(tmp_path: Path) -> None:
    stack = lazy_stack([TensorDict({"a": torch.ones(1)}, []), TensorDict({"a": torch.ones(3)}, [])])
    stack.memmap(tmp_path / "s")
    assert pack_memmap(tmp_path / "s", tmp_path / "s.tdz") == tmp_path / "s.tdz"
    back = TensorDict.load_memmap(tmp_path / "s.tdz")
    assert isinstance(back, LazyStackedTensorDict)
    assert [m["a"].shape for m in back.tensordicts] == [(1,), (3,)]
    unpack_memmap(tmp_path / "s.tdz", tmp_path / "u")
    again = TensorDict.load_memmap(tmp_path / "u")
    assert [m["a"].shape for m in again.tensordicts] == [(1,), (3,)]
    with pytest.raises(ValueError, match="pack_memmap: .* is not a checkpoint"):
        pack_memmap(tmp_path, tmp_path / "no.tdz")
    with pytest.raises(ValueError, match="compression='deflate' is not supported"):
        pack_memmap(tmp_path / "s", tmp_path / "c.tdz", compression="deflate")


def test_modes_copy_on_write_and_write_through(tmp_path: Path) -> None:
    path = tmp_path / "x.tdz"
    _sample().memmap(path)
    before = path.read_bytes()
    cow = TensorDict.load_memmap(path, allow_pickle=True)
    cow["a"].fill_(-1.0)
    assert path.read_bytes() == before  # mode "r": private
    shared = TensorDict.load_memmap(path, mode="r+", allow_pickle=True)
    shared["a"].fill_(7.0)
    assert torch.equal(TensorDict.load_memmap(path, allow_pickle=True)["a"], torch.full((10,), 7.0))
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() == "a.memmap"  # its CRC is stale
    refresh_archive_checksums(path)
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
    with pytest.raises(ValueError, match="mode must be 'r', 'r\\+' or None, got 'w'"):
        TensorDict.load_memmap(path, mode="w")


def test_memmap_like_archive_leaves_write_through(tmp_path: Path) -> None:
    data = TensorDict({"x": torch.zeros(3)}, []).expand(4).memmap_like(tmp_path / "d.tdz")
    data["x"].fill_(2.0)
    assert torch.equal(TensorDict.load_memmap(tmp_path / "d.tdz")["x"], torch.full((4, 3), 2.0))


def test_is_memmap_archive_never_raises(tmp_path: Path) -> None:
    (tmp_path / "junk").write_bytes(b"PK\x05\x06" + b"\0" * 10)
    assert not is_memmap_archive(tmp_path / "junk")
    assert not is_memmap_archive(tmp_path / "missing")
    assert not is_memmap_archive(tmp_path)


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", method) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            zf.writestr(info, data)


def _members(tmp_path: Path) -> dict[str, bytes]:
    TensorDict({"a": torch.arange(4.0)}, [4]).memmap(tmp_path / "src")
    return {p.name: p.read_bytes() for p in (tmp_path / "src").iterdir()}


@pytest.mark.parametrize(
    ("rename", "pattern"),
    [
        ("../meta.json", "has a member named '../meta.json', not allowed"),
        ("/abs", "member named '/abs', not allowed"),
        ("a\\b", "not allowed"),
    ],
)
def test_hostile_member_names_are_refused(tmp_path: Path, rename: str, pattern: str) -> None:
    members = _members(tmp_path)
    members[rename] = b"x"
    _zip(tmp_path / "bad.tdz", members)
    # a load ignores members it does not use (as a folder's other files), never reading them
    assert torch.equal(TensorDict.load_memmap(tmp_path / "bad.tdz")["a"], torch.arange(4.0))
    meta = json.loads(members.pop("meta.json"))
    meta["entries"]["a"]["file"] = rename
    members["meta.json"] = json.dumps(meta).encode()
    _zip(tmp_path / "used.tdz", members)
    with pytest.raises(FormatError, match="file name .* of key 'a' in .* is not valid"):
        TensorDict.load_memmap(tmp_path / "used.tdz")
    with pytest.raises(FormatError, match=pattern):
        unpack_memmap(tmp_path / "bad.tdz", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_duplicate_compressed_and_truncated_archives_are_refused(tmp_path: Path) -> None:
    members = _members(tmp_path)
    _zip(tmp_path / "deflated.tdz", members, zipfile.ZIP_DEFLATED)
    with pytest.raises(FormatError, match="is compressed"):
        TensorDict.load_memmap(tmp_path / "deflated.tdz")
    with zipfile.ZipFile(tmp_path / "dup.tdz", "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("a.memmap", b"\0" * 16)
    with pytest.raises(FormatError, match="two members named 'a.memmap'"):
        TensorDict.load_memmap(tmp_path / "dup.tdz")
    _zip(tmp_path / "ok.tdz", members)
    raw = (tmp_path / "ok.tdz").read_bytes()
    (tmp_path / "cut.tdz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FormatError, match="not a memory-mapped tensordict archive"):
        TensorDict.load_memmap(tmp_path / "cut.tdz")


def test_sizes_that_lie_are_refused(tmp_path: Path) -> None:
    members = _members(tmp_path)
    _zip(tmp_path / "ok.tdz", members)
    raw = bytearray((tmp_path / "ok.tdz").read_bytes())
    with zipfile.ZipFile(tmp_path / "ok.tdz") as zf:
        starts = [i.header_offset for i in zf.infolist()]
        central = zf.start_dir
    # the central record of the first member claims 2**31 bytes (compressed and not)
    assert raw[central : central + 4] == b"PK\x01\x02"
    raw[central + 20 : central + 28] = struct.pack("<II", 2**31, 2**31)
    (tmp_path / "lie.tdz").write_bytes(bytes(raw))
    with pytest.raises(
        FormatError, match="beyond the end of the file|not a memory-mapped tensordict archive"
    ):
        TensorDict.load_memmap(tmp_path / "lie.tdz")
    # a leaf member whose size disagrees with its shape
    members["a.memmap"] = members["a.memmap"][:-4]
    _zip(tmp_path / "short.tdz", members)
    with pytest.raises(FormatError, match="holds 12 bytes; shape \\[4\\] of float32 needs 16"):
        TensorDict.load_memmap(tmp_path / "short.tdz")
    assert starts[0] == 0


def test_fuzzed_archives_raise_format_error(tmp_path: Path) -> None:
    _sample().memmap(tmp_path / "x.tdz")
    raw = (tmp_path / "x.tdz").read_bytes()
    rng = torch.Generator().manual_seed(0)
    for i in range(150):
        data = bytearray(raw)
        for _ in range(4):
            at = int(torch.randint(len(data), (), generator=rng))
            data[at] = int(torch.randint(256, (), generator=rng))
        path = tmp_path / f"f{i}.tdz"
        path.write_bytes(bytes(data))
        try:
            back = TensorDict.load_memmap(path, allow_pickle=False)
        except FormatError:
            continue
        assert back.batch_size == (10,)  # flipped bytes inside data: still the right shape


def test_return_early_returns_a_future_of_the_saved_tensordict(tmp_path: Path) -> None:
    td = _sample()
    future = td.memmap(tmp_path / "ckpt", return_early=True)
    assert isinstance(future, TensorDictFuture)
    _check(future.result())
    _check(TensorDict.load_memmap(tmp_path / "ckpt", allow_pickle=True))
    inplace = TensorDict({"a": torch.ones(3)}, [3])
    assert inplace.memmap_(tmp_path / "in", return_early=True).result() is inplace
    assert inplace.is_memmap()
    archive = td.memmap(tmp_path / "x.tdz", return_early=True, durable=True).result()
    _check(archive)


def test_return_early_errors_raise_from_result(tmp_path: Path) -> None:
    future = _sample().memmap(tmp_path / "ckpt", return_early=True, allow_pickle=False)
    with pytest.raises(TypeError, match="holds non-JSON data"):
        future.result()
    assert not (tmp_path / "ckpt").exists()


def test_unsupported_upstream_keywords_say_so(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.ones(3)}, [3])
    td.memmap(tmp_path / "plain", robust_key=False)  # plain keys: their own names
    assert sorted(os.listdir(tmp_path / "plain")) == ["a.memmap", "meta.json"]
    with pytest.raises(RuntimeError, match="memmap: robust_key=False .* can be named 'a/b'"):
        TensorDict({"a/b": torch.ones(3)}, [3]).memmap(tmp_path / "c", robust_key=False)
    with pytest.raises(TypeError, match="load_memmap: allow_pickle must be a bool or None"):
        TensorDict.load_memmap(tmp_path / "plain", allow_pickle=1)
    with pytest.raises(ValueError, match="share_non_tensor=True is not supported"):
        td.memmap(tmp_path / "c", share_non_tensor=True)
    with pytest.raises(ValueError, match="compression='lzma' is not supported"):
        td.memmap(tmp_path / "c.tdz", compression="lzma")
    assert torch.equal(TensorDict.load_memmap(tmp_path / "plain", robust_key=False)["a"], td["a"])
    td.memmap(tmp_path / "c", robust_key=None, existsok=True)
    target = TensorDict({"a": torch.zeros(3)}, [3])
    assert TensorDict.load_memmap(tmp_path / "c", None, False, out=target) is target
    assert torch.equal(target["a"], torch.ones(3))


_KILLED = textwrap.dedent(
    """
    import os, sys, threading, torch
    from tensordict import TensorDict
    import tensordict._save as save
    original = save._commit

    def stall(*args):  # the leaves are written; die before the commit
        os._exit(3)

    save._commit = stall
    td = TensorDict({"a": torch.zeros(1000), "b": torch.zeros(1000)}, [1000])
    td.memmap(sys.argv[1], return_early=True).result()
    """
)


def test_an_async_save_killed_mid_way_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    TensorDict({"a": torch.ones(1000)}, [1000]).memmap(tmp_path / "ckpt")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(tmp_path / "ckpt")],
        check=False,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    assert list(back.keys()) == ["a"] and torch.equal(back["a"], torch.ones(1000))


@pytest.mark.parametrize("name", ["saved", "saved.tdz"])
def test_subpath_as_a_nested_key_and_a_missing_one_named(tmp_path: Path, name: str) -> None:
    # a subpath is written as a nested key may be (tuples within tuples); one that names
    # nothing is a FileNotFoundError (and a ValueError) naming the subpath, also inside an
    # archive, where it was a bare format error
    td = TensorDict({"m": {"sub": {"y": torch.arange(3)}}}, [])
    td.save(tmp_path / name)
    for subpath in ["m/sub", ("m", "sub"), ("m", ("sub",)), [("m",), "sub"]]:
        assert TensorDict.load_memmap(tmp_path / name, subpath=subpath)["y"].tolist() == [0, 1, 2]
    for subpath in ["does/not/exist", ("does", ("not", "exist"))]:
        with pytest.raises(FileNotFoundError, match=r"No tensordict found under subpath") as err:
            TensorDict.load_memmap(tmp_path / name, subpath=subpath)
        assert isinstance(err.value, ValueError) and repr(subpath) in str(err.value)
    with pytest.raises(FileNotFoundError, match="nothing exists there"):
        TensorDict.load_memmap(tmp_path / name / "m" / "zz")  # without subpath: as before
    if name.endswith(".tdz"):  # a leaf file named as a subpath is not "nothing"
        with pytest.raises(ValueError, match="sub/y.memmap' is a file of the archive"):
            TensorDict.load_memmap(tmp_path / name, subpath="m/sub/y.memmap")


def test_archive_errors_in_upstreams_words(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.zeros(2)}, [])
    td.save(tmp_path / "x.tdz")
    with pytest.raises(RuntimeError, match=r"x.tdz' already exists"):
        td.memmap(tmp_path / "x.tdz", existsok=False)
    with pytest.raises(RuntimeError, match=r"x.tdz' already exists"):
        td.memmap_like(tmp_path / "x.tdz", existsok=False)
    (tmp_path / "bad.tdz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="bad.tdz' is not a memory-mapped tensordict archive"):
        TensorDict.load_memmap(tmp_path / "bad.tdz")
