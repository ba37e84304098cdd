"""MemoryMappedTensor: file and shared-memory backing, views, pickling by reference."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from tensordict import MemmapTensor, MemoryMappedTensor


def test_from_tensor_to_file_round_trip(tmp_path: Path) -> None:
    data = torch.randn(4, 3)
    mm = MemoryMappedTensor.from_tensor(data, filename=tmp_path / "a.memmap")
    assert isinstance(mm, MemoryMappedTensor) and torch.equal(mm, data)
    assert os.path.getsize(tmp_path / "a.memmap") == data.numel() * 4
    back = MemoryMappedTensor.from_filename(tmp_path / "a.memmap", torch.float32, (4, 3))
    assert torch.equal(back, data)
    mm[0] = 7
    assert (back[0] == 7).all()  # both map the same file


def test_constructors(tmp_path: Path) -> None:
    assert MemoryMappedTensor.empty(2, 3).shape == (2, 3)
    assert (MemoryMappedTensor.zeros((2, 3), dtype=torch.int64) == 0).all()
    assert (MemoryMappedTensor.ones(2, filename=tmp_path / "o.memmap") == 1).all()
    full = MemoryMappedTensor.full((2, 2), 3.5)
    assert (full == 3.5).all() and full.dtype == torch.float32
    like = torch.zeros(3, dtype=torch.int16)
    assert MemoryMappedTensor.empty_like(like).dtype == torch.int16
    assert (MemoryMappedTensor.zeros_like(like) == 0).all()
    assert (MemoryMappedTensor.ones_like(like) == 1).all()
    assert (MemoryMappedTensor.full_like(like, 4) == 4).all()
    assert MemoryMappedTensor.zeros(0, 3).numel() == 0
    assert MemoryMappedTensor(3).item() == 3  # any tensor-like is copied into shared memory
    with pytest.raises(ValueError, match="negative"):
        MemoryMappedTensor.empty(-1)


def test_existing_files_and_sizes(tmp_path: Path) -> None:
    path = tmp_path / "x.memmap"
    MemoryMappedTensor.from_tensor(torch.zeros(3), filename=path)
    with pytest.raises(FileExistsError, match="exists"):
        MemoryMappedTensor.from_tensor(torch.zeros(3), filename=path)
    old = MemoryMappedTensor.from_filename(path, torch.float32, (3,))
    MemoryMappedTensor.from_tensor(torch.ones(3), filename=path, existsok=True)
    assert (old == 0).all()  # the old map keeps its data: the file was replaced, not rewritten
    with pytest.raises(ValueError, match=r"holds 12 bytes; shape \(4,\) of torch.float32 needs 16"):
        MemoryMappedTensor.from_filename(path, torch.float32, (4,))
    assert os.path.getsize(path) == 12  # never grown


def test_views_stay_mapped_and_results_are_tensors(tmp_path: Path) -> None:
    mm = MemoryMappedTensor.from_tensor(
        torch.arange(12.0).reshape(3, 4), filename=tmp_path / "v.memmap"
    )
    for view in (mm[1], mm[:, 1:3], mm.reshape(4, 3), mm.t(), mm.unsqueeze(0)):
        assert type(view) is MemoryMappedTensor and view.filename == mm.filename
    for result in (mm + 1, mm.sum(), mm.clone(), mm * mm):
        assert type(result) is torch.Tensor


def test_pickle_sends_a_reference(tmp_path: Path) -> None:
    big = MemoryMappedTensor.zeros(1000, 1000, filename=tmp_path / "big.memmap")
    view = big[10:20, 5:7]
    blob = pickle.dumps(view)
    assert len(blob) < 500
    back = pickle.loads(blob)
    assert type(back) is MemoryMappedTensor and back.shape == (10, 2)
    back.fill_(3)
    assert (big[10:20, 5:7] == 3).all()


def test_autograd_is_refused() -> None:
    with pytest.raises(RuntimeError, match="does not support autograd"):
        MemoryMappedTensor.from_tensor(torch.zeros(2, requires_grad=True))
    mm = MemoryMappedTensor.zeros(2)
    with pytest.raises(RuntimeError, match="memory-mapped tensors do not support autograd"):
        mm.requires_grad_()


def test_deprecated_aliases(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="MemmapTensor is deprecated"):
        old = MemmapTensor(3, 2, prefix=str(tmp_path))
    assert isinstance(old, MemoryMappedTensor) and old.shape == (3, 2)
    assert old.filename is not None and old.filename.startswith(str(tmp_path))


def _child_writes(t: MemoryMappedTensor) -> None:
    t[1] = 42


@pytest.mark.parametrize("backed", ["file", "shared"])
def test_writes_in_a_child_process_are_seen(tmp_path: Path, backed: str) -> None:
    filename = tmp_path / "shared.memmap" if backed == "file" else None
    t = MemoryMappedTensor.zeros(3, filename=filename)
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=_child_writes, args=(t,))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    assert t[1] == 42


@pytest.mark.parametrize("where", ["file", "shared"])
def test_allocation_without_copy_reads_as_zeros(tmp_path: Path, where: str) -> None:
    # memmap_like allocates without copying: in a file or in shared memory, the values
    # read as zeros, even where freed memory held something else just before
    for attempt in range(3):
        garbage = torch.full((1 << 14,), 7.0)
        del garbage
        filename = tmp_path / f"{attempt}.memmap" if where == "file" else None
        fresh = MemoryMappedTensor.from_tensor(
            torch.ones(1 << 14), filename=filename, copy_data=False
        )
        assert torch.equal(fresh, torch.zeros(1 << 14))
