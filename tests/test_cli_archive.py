"""The command line on single-file archives (``.tdz``): inspect, verify and diff read them
as they read folders, and refuse hostile ones in one line."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import TensorDict, pack_memmap
from tensordict._cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([os.fspath(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _sample() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.arange(12.0).reshape(4, 3),
            "info": {"step": torch.arange(4), "flag": torch.tensor([True, False, True, True])},
            "note": "hello",
            "blob": {1, 2},  # not JSON: a pickle member
        },
        [4],
    )


def _pair(tmp_path: Path, **kwargs: Any) -> tuple[Path, Path]:
    folder, archive = tmp_path / "ckpt", tmp_path / "ckpt.tdz"
    _sample().memmap(folder, **kwargs)
    pack_memmap(folder, archive)
    return folder, archive


def test_inspect_prints_the_same_tree_for_an_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, archive = _pair(tmp_path, checksum=True)
    code_f, out_f, _ = _run(capsys, "inspect", folder)
    code_a, out_a, _ = _run(capsys, "inspect", archive)
    assert code_f == code_a == 0
    # the same tree but its first line, which names the path (and sets the alignment)

    def tree(out: str) -> list[str]:
        return [" ".join(line.split()) for line in out.splitlines()[1:] if "note:" not in line]

    assert tree(out_a) == tree(out_f)
    assert out_a.startswith(str(archive))
    assert "pickle" in out_a and "step" in out_a


def test_verify_checks_the_checksums_inside_an_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, archive = _pair(tmp_path, checksum=True)
    code, out, _ = _run(capsys, "verify", archive)
    assert code == 0
    assert "valid checkpoint, format version 2; 3 tensor files, 3 checksums verified" in out
    # flip one byte of the "obs" member's data: the checksum fails, the format still holds
    loaded = TensorDict.load_memmap(archive, mode="r+", allow_pickle=True)
    loaded["obs"][0, 0] = 100.0
    del loaded
    code, _, err = _run(capsys, "verify", archive)
    assert code == 1
    assert "fails its checksum" in err and "'obs'" in err and "Traceback" not in err


def test_diff_compares_archives_and_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, archive = _pair(tmp_path)
    assert _run(capsys, "diff", folder, archive)[:2] == (0, "")
    assert _run(capsys, "diff", archive, archive)[:2] == (0, "")
    other = _sample()
    other["obs"][1, 2] = -1.0
    other["info", "flag"][0] = False
    other.memmap(tmp_path / "other.tdz")
    code, out, _ = _run(capsys, "diff", archive, tmp_path / "other.tdz")
    assert code == 1
    assert out.splitlines() == [
        "'obs': 1 of 12 values differ (largest absolute difference 6)",
        "('info', 'flag'): 1 of 4 values differ",
    ]


def test_diff_of_pickled_members_compares_their_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, archive = _pair(tmp_path)
    other = _sample()
    other["blob"] = {3}
    other.memmap(tmp_path / "other.tdz")
    code, out, _ = _run(capsys, "diff", archive, tmp_path / "other.tdz")
    assert code == 1
    assert out.strip() == "'blob': pickled data differs (compared as bytes, not unpickled)"


def _truncated(archive: Path) -> None:
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])


def _lying_size(archive: Path) -> None:
    # the central directory record of "obs.memmap" claims a larger size than it holds
    data = bytearray(archive.read_bytes())
    at = data.rindex(b"obs.memmap") - 46  # (the central directory comes last)
    assert data[at : at + 4] == b"PK\x01\x02"
    struct.pack_into("<II", data, at + 20, 1 << 30, 1 << 30)
    archive.write_bytes(bytes(data))


def _escaping_name(archive: Path) -> None:
    data = archive.read_bytes()
    archive.write_bytes(data.replace(b"obs.memmap", b"../x.memmap"[:10]))


@pytest.mark.parametrize("damage", [_truncated, _lying_size, _escaping_name])
@pytest.mark.parametrize("command", ["inspect", "verify", "diff"])
def test_a_hostile_archive_is_refused_in_one_line(
    damage: Any, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, archive = _pair(tmp_path)
    damage(archive)
    argv = [command, archive] + ([folder] if command == "diff" else [])
    code, _, err = _run(capsys, *argv)
    assert code == (2 if command == "diff" else 1)
    line = err.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert line.startswith(f"tensordict {command}: ") and str(archive) in line


def test_a_file_that_is_no_archive_is_no_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.tdz"
    path.write_bytes(b"not a zip file")
    code, _, err = _run(capsys, "inspect", path)
    assert code == 2
    assert "is a file, not a checkpoint folder or archive" in err


def test_pack_memmap_refuses_an_archive_as_its_source(tmp_path: Path) -> None:
    _, archive = _pair(tmp_path)
    with pytest.raises(ValueError, match=r"pack_memmap: .*ckpt\.tdz' is a file"):
        pack_memmap(archive, tmp_path / "again.tdz")
