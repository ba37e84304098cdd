"""The fixed cost of a load (issue 15): what the faster paths reuse is still checked."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from tensordict import TensorDict, unpack_memmap
from tensordict._archive import _INDEXES, _ArchiveLoader
from tensordict._format import FormatError


def _model(scale: float) -> TensorDict:
    return TensorDict(
        {
            "0": {"weight": torch.arange(12.0).reshape(3, 4) * scale, "bias": torch.ones(3)},
            "1": {"weight": torch.full((2, 2), scale)},
        },
        [],
    )


def _central(path: Path) -> tuple[int, list[str]]:
    with zipfile.ZipFile(path) as zf:
        return zf.start_dir, [info.filename for info in zf.infolist()]


def test_an_archive_loaded_again_reads_the_same_leaves(tmp_path: Path) -> None:
    _model(1.0).memmap(tmp_path / "x.tdz")
    for _ in range(3):  # (the second and third loads reuse the parsed directory)
        sub = TensorDict.load_memmap(tmp_path / "x.tdz", subpath="0")
        assert torch.equal(sub["weight"], torch.arange(12.0).reshape(3, 4))
        assert torch.equal(sub["bias"], torch.ones(3))
        whole = TensorDict.load_memmap(tmp_path / "x.tdz")
        assert torch.equal(whole["1", "weight"], torch.ones(2, 2))
    assert any(key[1] == b"0/" for key in _INDEXES)


def test_a_directory_changed_in_place_is_parsed_again(tmp_path: Path) -> None:
    """A reused index is keyed by the directory's bytes, not by the file's identity or
    times: rewriting the directory in place (same inode, same size, same times) is seen."""
    path = tmp_path / "x.tdz"
    _model(1.0).memmap(path)
    TensorDict.load_memmap(path, subpath="0")  # (parsed and remembered)
    start, names = _central(path)
    raw = bytearray(path.read_bytes())
    times = os.stat(path)
    # the central record of 0/bias.memmap renamed (its local header still names it)
    at = raw.index(b"0/bias.memmap", start)
    raw[at : at + 13] = b"0/bias.memmaq"
    with open(path, "r+b") as handle:  # (in place: the same inode, the same size)
        handle.write(raw)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert os.stat(path).st_ino == times.st_ino
    with pytest.raises(FormatError, match=r"bias\.memmap' of key 'bias' is missing from the"):
        TensorDict.load_memmap(path, subpath="0")
    assert "0/bias.memmap" in names


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_an_archive_replaced_before_mapping_is_never_viewed_at_old_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Another archive (another layout) replacing the file after validation: a read-only
    load maps the file it validated (through its descriptor), a writing load opens the
    name anew, so it notices the replacement and loads again; neither views the new file
    at the old file's offsets."""
    path = tmp_path / "x.tdz"
    _model(1.0).memmap(path)
    newer = _model(5.0)
    newer["0", "extra"] = torch.zeros(1000)  # (shifts the members' offsets)
    newer.memmap(tmp_path / "y.tdz")
    assert _central(path)[0] != _central(tmp_path / "y.tdz")[0]
    real = _ArchiveLoader.validated
    calls = []

    def swap(self: _ArchiveLoader) -> None:
        real(self)
        if not calls:
            os.replace(tmp_path / "y.tdz", path)
        calls.append(1)

    monkeypatch.setattr(_ArchiveLoader, "validated", swap)
    sub = TensorDict.load_memmap(path, subpath="0", mode=mode)
    if mode == "r":
        assert len(calls) == 1
        assert torch.equal(sub["weight"], torch.arange(12.0).reshape(3, 4))
        assert "extra" not in sub.keys()
    else:
        assert len(calls) == 2  # read again
        assert torch.equal(sub["weight"], torch.arange(12.0).reshape(3, 4) * 5.0)
        assert torch.equal(sub["extra"], torch.zeros(1000))


def test_truncated_and_overlong_central_records_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.tdz"
    _model(1.0).memmap(path)
    start, _ = _central(path)
    raw = path.read_bytes()
    for name_len, pattern in (
        (0xFFFF, "not a memory-mapped tensordict archive"),
        (200, "not a memory-mapped tensordict archive"),
    ):
        bad = bytearray(raw)
        assert bad[start : start + 4] == b"PK\x01\x02"
        bad[start + 28 : start + 30] = struct.pack("<H", name_len)  # the first record's name
        (tmp_path / "bad.tdz").write_bytes(bytes(bad))
        with pytest.raises(FormatError, match=pattern):
            TensorDict.load_memmap(tmp_path / "bad.tdz", subpath="1")
        with pytest.raises(FormatError, match=pattern):
            unpack_memmap(tmp_path / "bad.tdz", tmp_path / "out")
    # the last record's lengths reach past the directory's end (into the end record)
    with zipfile.ZipFile(path) as zf:
        last = zf.infolist()[-1]
    at = raw.index(b"PK\x01\x02" + raw[start + 4 : start + 6], start)
    while True:  # (the last central record)
        nxt = raw.find(b"PK\x01\x02", at + 4)
        if nxt < 0 or nxt >= raw.index(b"PK\x05\x06"):
            break
        at = nxt
    assert raw[at + 46 : at + 46 + len(last.filename)] == last.filename.encode()
    bad = bytearray(raw)
    bad[at + 32 : at + 34] = struct.pack("<H", 100)  # a comment beyond the directory
    (tmp_path / "bad.tdz").write_bytes(bytes(bad))
    with pytest.raises(FormatError, match="central directory is truncated"):
        TensorDict.load_memmap(tmp_path / "bad.tdz")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_place_of_an_archive_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.tdz")
    with pytest.raises(FormatError, match="x.tdz' is not a file"):
        unpack_memmap(tmp_path / "x.tdz", tmp_path / "out")
    with pytest.raises(FormatError, match="is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / "x.tdz")
    with pytest.raises(FormatError, match="is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / "x.tdz", subpath="0")


def test_a_sub_folder_load_maps_only_its_leaves(tmp_path: Path) -> None:
    _model(2.0).memmap(tmp_path / "ckpt")
    sub = TensorDict.load_memmap(tmp_path / "ckpt" / "0")
    assert sorted(sub.keys()) == ["bias", "weight"]
    assert torch.equal(sub["weight"], torch.arange(12.0).reshape(3, 4) * 2.0)
    assert sub["bias"].shape == (3,) and sub["bias"].filename == str(
        tmp_path / "ckpt" / "0" / "bias.memmap"
    )
    with pytest.raises(FormatError, match="is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / "ckpt" / "missing")
    with pytest.raises(
        FormatError, match="bias.memmap' is not a memory-mapped tensordict archive: no end of"
    ):
        TensorDict.load_memmap(tmp_path / "ckpt" / "0" / "bias.memmap" / "x")


def _zip_of(folder: Path, target: Path, extra: bytes = b"", comment: bytes = b"") -> None:
    """``folder`` as a ZIP written by zipfile (unaligned), meta.json with ``extra``."""
    with zipfile.ZipFile(target, "w") as zf:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                info = zipfile.ZipInfo(file.relative_to(folder).as_posix())
                if file.name == "meta.json":
                    info.extra = extra
                zf.writestr(info, file.read_bytes())
        zf.comment = comment


def test_metadata_behind_a_long_extra_field_and_a_large_directory(tmp_path: Path) -> None:
    many = TensorDict({f"k{i:03d}": torch.full((2,), float(i)) for i in range(300)}, [])
    many["0"] = _model(3.0)["0"]
    many.memmap(tmp_path / "src")
    padding = struct.pack("<HH", 0x6474, 600) + bytes(600)  # (longer than one read guesses)
    for comment in (b"", b"a comment" * 10):  # (the end record at the end, or not)
        _zip_of(tmp_path / "src", tmp_path / "x.tdz", padding, comment)
        start, names = _central(tmp_path / "x.tdz")
        assert os.path.getsize(tmp_path / "x.tdz") - start > 16 << 10  # (beyond a first read)
        back = TensorDict.load_memmap(tmp_path / "x.tdz")
        for i in (0, 150, 299):
            assert torch.equal(back[f"k{i:03d}"], torch.full((2,), float(i)))
        sub = TensorDict.load_memmap(tmp_path / "x.tdz", subpath="0")
        assert torch.equal(sub["weight"], torch.arange(12.0).reshape(3, 4) * 3.0)
        assert len(names) == 304


def test_a_metadata_member_whose_local_header_disagrees_is_refused(tmp_path: Path) -> None:
    _model(1.0).memmap(tmp_path / "x.tdz")
    raw = bytearray((tmp_path / "x.tdz").read_bytes())
    with zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        at = zf.getinfo("0/meta.json").header_offset
        bias = zf.getinfo("0/bias.memmap").header_offset
    assert raw[at + 30 : at + 41] == b"0/meta.json"
    raw[at + 30 : at + 41] = b"0/meta.jsoN"  # (the local header names another member)
    (tmp_path / "bad.tdz").write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="member '0/meta.json': headers disagree"):
        TensorDict.load_memmap(tmp_path / "bad.tdz", subpath="0")
    raw[at + 30 : at + 41] = b"0/meta.json"
    raw[at : at + 4] = b"PK\x00\x00"
    (tmp_path / "bad.tdz").write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="member '0/meta.json' has no local header"):
        TensorDict.load_memmap(tmp_path / "bad.tdz", subpath="0")
    raw[at : at + 4] = b"PK\x03\x04"
    raw[bias + 30 : bias + 31] = b"1"  # (a leaf's local header: checked too)
    (tmp_path / "bad.tdz").write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="member '0/bias.memmap': headers disagree"):
        TensorDict.load_memmap(tmp_path / "bad.tdz", subpath="0")


def test_the_directories_kept_are_few(tmp_path: Path) -> None:
    for i in range(20):
        TensorDict({"a": torch.full((2,), float(i))}, []).memmap(tmp_path / f"{i}.tdz")
        assert TensorDict.load_memmap(tmp_path / f"{i}.tdz")["a"].tolist() == [i, i]
    assert len(_INDEXES) <= 16
    assert TensorDict.load_memmap(tmp_path / "0.tdz")["a"].tolist() == [0.0, 0.0]


def test_subpath_spellings_load_the_same_sub_folder(tmp_path: Path) -> None:
    _model(4.0).memmap(tmp_path / "ckpt")
    want = torch.arange(12.0).reshape(3, 4) * 4.0
    for subpath in ("0", Path("0"), ("0",), ["0"]):
        sub = TensorDict.load_memmap(tmp_path / "ckpt", subpath=subpath)
        assert torch.equal(sub["weight"], want)
    with pytest.raises(FormatError, match="is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / "ckpt", subpath="2")


def test_metadata_around_json_whitespace_loads_and_anything_else_is_refused(
    tmp_path: Path,
) -> None:
    _model(2.0).memmap(tmp_path / "ckpt")
    meta = tmp_path / "ckpt" / "meta.json"
    text = meta.read_text()
    meta.write_text("\n \t" + text + " \r\n\t ")  # (JSON whitespace on both sides)
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    assert torch.equal(back["0", "weight"], torch.arange(12.0).reshape(3, 4) * 2.0)
    assert torch.equal(back["1", "weight"], torch.full((2, 2), 2.0))
    for bad in (text + " x", text + text, text + "\f", ""):
        meta.write_text(bad)
        with pytest.raises(FormatError, match="is not valid JSON"):
            TensorDict.load_memmap(tmp_path / "ckpt")


@pytest.mark.parametrize("dims", [[1.0], [True], [2, -1], [2, 2**62], [2, "2"], [None]])
def test_a_shape_holding_anything_but_small_ints_is_refused(
    tmp_path: Path, dims: list[object]
) -> None:
    _model(1.0).memmap(tmp_path / "ckpt")
    meta = tmp_path / "ckpt" / "meta.json"
    tree = json.loads(meta.read_text())
    tree["entries"]["0"]["meta"]["entries"]["bias"]["shape"] = dims
    meta.write_text(json.dumps(tree))
    with pytest.raises(FormatError, match="must be a list of non-negative ints"):
        TensorDict.load_memmap(tmp_path / "ckpt")
    assert os.path.getsize(tmp_path / "ckpt" / "0" / "bias.memmap") == 12  # untouched


def test_loaded_leaves_of_every_rank_keep_their_file(tmp_path: Path) -> None:
    td = TensorDict(
        {
            "scalar": torch.tensor(3.5),
            "vector": torch.arange(5),
            "cube": torch.arange(24.0).reshape(2, 3, 4),
            "empty": torch.zeros(0, 3),
        },
        [],
    )
    td.memmap(tmp_path / "ckpt")
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    for key in ("scalar", "vector", "cube", "empty"):
        assert back[key].shape == td[key].shape and back[key].dtype == td[key].dtype
        assert torch.equal(back[key], td[key])
    for key in ("scalar", "vector", "cube"):  # (asked twice: the record is made once)
        expected = str(tmp_path / "ckpt" / f"{key}.memmap")
        assert back[key].filename == expected and back[key].filename == expected
    back["cube"][1, 2, 3] = -1.0  # (mapped shared: the write reaches the file)
    again = TensorDict.load_memmap(tmp_path / "ckpt")
    assert again["cube"][1, 2, 3].item() == -1.0
    assert torch.equal(again["cube"].flatten()[:23], torch.arange(23.0))
