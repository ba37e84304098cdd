"""pbar=True outside notebooks: text bars on stderr that count leaves, and a clear error without tqdm."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tensordict import TensorDict


def _td() -> TensorDict:
    return TensorDict({f"k{i}": torch.arange(3.0) + i for i in range(4)}, [3])


def test_memmap_and_load_memmap_count_leaves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    td = _td()
    saved = td.memmap(tmp_path / "ckpt", pbar=True)
    err = capsys.readouterr().err
    assert "TensorDict.memmap" in err and "4/4" in err
    loaded = TensorDict.load_memmap(tmp_path / "ckpt", pbar=True)
    err = capsys.readouterr().err
    assert "TensorDict.load_memmap" in err and "4/4" in err
    for key in td.keys():
        assert torch.equal(saved[key], td[key]) and torch.equal(loaded[key], td[key])
    shared = td.memmap_(pbar=True)
    assert "TensorDict.memmap_" in capsys.readouterr().err and shared.is_memmap()


def test_no_bar_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _td().memmap(tmp_path / "ckpt")
    TensorDict.load_memmap(tmp_path / "ckpt")
    assert capsys.readouterr().err == ""


def test_pbar_without_tqdm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.raises(ModuleNotFoundError, match=r"TensorDict.memmap: pbar=True needs tqdm"):
        _td().memmap(tmp_path / "ckpt", pbar=True)
    assert not (tmp_path / "ckpt").exists()  # nothing committed


def test_consolidate_counts_leaves(capsys: pytest.CaptureFixture[str]) -> None:
    td = _td()
    n = len(list(td.keys(True, True)))
    ctd = td.consolidate(pbar=True)
    err = capsys.readouterr().err
    assert "TensorDict.consolidate" in err and f"{n}/{n}" in err
    assert ctd.is_consolidated() and (ctd == td).all()
    td.consolidate()
    assert capsys.readouterr().err == ""
