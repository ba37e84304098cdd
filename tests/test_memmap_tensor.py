"""MemoryMappedTensor: file and shared-memory backing, views, pickling by reference."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
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


ALL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("backed", ["file", "shared"])
def test_every_dtype_round_trips(tmp_path: Path, dtype: torch.dtype, backed: str) -> None:
    data = (torch.arange(6) % 2).reshape(2, 3).to(dtype)
    filename = tmp_path / "d.memmap" if backed == "file" else None
    mm = MemoryMappedTensor.from_tensor(data, filename=filename)
    assert mm.dtype == dtype and torch.equal(mm.as_subclass(torch.Tensor), data)
    assert torch.equal(pickle.loads(pickle.dumps(mm)).as_subclass(torch.Tensor), data)
    full = MemoryMappedTensor.full_like(data, 1)
    assert torch.equal(full.as_subclass(torch.Tensor), torch.ones_like(data))


@pytest.mark.parametrize("make", ["empty", "zeros", "ones", "full"])
@pytest.mark.parametrize("form", ["ints", "sequence", "keyword"])
@pytest.mark.parametrize("backed", ["file", "shared"])
def test_constructor_spellings(tmp_path: Path, make: str, form: str, backed: str) -> None:
    filename = tmp_path / "c.memmap" if backed == "file" else None
    kwargs: dict[str, object] = {"dtype": torch.int32, "device": "cpu", "filename": filename}
    if make == "full":
        kwargs["fill_value"] = 5
    fn = getattr(MemoryMappedTensor, make)
    if form == "ints":
        out = fn(2, 3, **kwargs)
    elif form == "sequence":
        out = fn((2, 3), **kwargs)
    else:
        out = fn(shape=(2, 3), **kwargs)
    assert out.shape == (2, 3) and out.dtype == torch.int32
    expected = {"zeros": 0, "ones": 1, "full": 5}.get(make)
    if expected is not None:
        assert torch.equal(
            out.as_subclass(torch.Tensor), torch.full((2, 3), expected, dtype=torch.int32)
        )
    if filename is not None:
        assert out.filename == str(filename.absolute())
    else:
        assert out.filename is None and out._handler is not None


def test_constructor_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"MemoryMappedTensor.zeros: pass a shape"):
        MemoryMappedTensor.zeros()
    with pytest.raises(TypeError, match="given both positionally and as shape="):
        MemoryMappedTensor.ones(2, shape=(2,))
    with pytest.raises(TypeError, match=r"MemoryMappedTensor.full: pass fill_value="):
        MemoryMappedTensor.full(2, 3)
    with pytest.raises(RuntimeError, match="only CPU memory can be mapped, got device 'meta'"):
        MemoryMappedTensor.empty(2, device="meta")
    with pytest.raises(ValueError, match="only CPU memory can be mapped"):
        MemoryMappedTensor([1, 2], device="meta")
    with pytest.raises(TypeError, match="convert the numpy array"):
        MemoryMappedTensor.from_tensor(np.zeros(2))  # type: ignore[arg-type]
    path = tmp_path / "e.memmap"
    MemoryMappedTensor.zeros(2, filename=path)
    with pytest.raises(RuntimeError, match="already exists"):  # upstream's type
        MemoryMappedTensor.zeros(2, filename=path)
    assert (MemoryMappedTensor.ones(2, filename=path, existsok=True) == 1).all()


def test_symlinks_are_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    link = tmp_path / "link.memmap"
    link.symlink_to(target)
    with pytest.raises(RuntimeError, match="refusing to write through symlink"):
        MemoryMappedTensor.from_tensor(torch.zeros(2), filename=link, existsok=True)
    assert target.read_bytes() == b"keep"


def test_from_tensor_placement_rules(tmp_path: Path) -> None:
    shared = MemoryMappedTensor.from_tensor(torch.arange(3))
    assert MemoryMappedTensor.from_tensor(shared) is shared
    assert MemoryMappedTensor.from_tensor(shared[1:])._handler is shared._handler
    path = tmp_path / "a.memmap"
    filed = MemoryMappedTensor.from_tensor(torch.arange(3), filename=path)
    assert MemoryMappedTensor.from_tensor(filed, filename=path) is filed
    with pytest.raises(RuntimeError, match="pass copy_existing=True"):
        MemoryMappedTensor.from_tensor(filed, filename=tmp_path / "b.memmap")
    copy = MemoryMappedTensor.from_tensor(filed, filename=tmp_path / "b.memmap", copy_existing=True)
    assert copy is not filed and torch.equal(copy.as_subclass(torch.Tensor), torch.arange(3))
    # another shape: input broadcast into it
    wide = MemoryMappedTensor.from_tensor(torch.arange(3), shape=(2, 3))
    assert torch.equal(wide.as_subclass(torch.Tensor), torch.arange(3).expand(2, 3))


@pytest.mark.parametrize("backed", ["file", "shared"])
def test_from_storage_and_handler_share_memory(tmp_path: Path, backed: str) -> None:
    filename = str(tmp_path / "s.memmap") if backed == "file" else None
    base = MemoryMappedTensor.from_tensor(torch.arange(6, dtype=torch.float64), filename=filename)
    view = MemoryMappedTensor.from_storage(
        base.untyped_storage(), shape=(2, 3), dtype=torch.float64, filename=filename
    )
    assert torch.equal(view.as_subclass(torch.Tensor), torch.arange(6.0).view(2, 3))
    view[0, 0] = 42
    assert base[0] == 42
    assert view.filename == base.filename
    if backed == "shared":
        again = MemoryMappedTensor.from_handler(base._handler, torch.float64, (6,), index=slice(4))
        assert torch.equal(again.as_subclass(torch.Tensor), base[:4].as_subclass(torch.Tensor))
    else:
        assert base._handler is None
        with pytest.raises(RuntimeError, match="pass filename=None"):
            MemoryMappedTensor.from_storage(base.untyped_storage(), filename=tmp_path / "other")
    with pytest.raises(ValueError, match="the storage holds 48"):
        MemoryMappedTensor.from_storage(base.untyped_storage(), shape=(7,), dtype=torch.float64)
    with pytest.raises(TypeError, match="expected the _handler"):
        MemoryMappedTensor.from_handler("nope", torch.float32, (1,))  # type: ignore[arg-type]


def test_parent_shape_and_index(tmp_path: Path) -> None:
    path = tmp_path / "p.memmap"
    mm = MemoryMappedTensor.zeros(4, 3, filename=path)
    assert mm[1:, 0].parent_shape == (4, 3) and mm.parent_shape == (4, 3)
    row = MemoryMappedTensor.from_filename(path, torch.float32, (4, 3), index=2)
    assert row.shape == (3,) and row.filename == mm.filename
    assert MemoryMappedTensor.zeros(0).parent_shape == (0,)


def test_from_filename_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "new.memmap"
    mm = MemoryMappedTensor.from_filename(path, torch.int16, (2, 2))
    assert os.path.getsize(path) == 8 and (mm == 0).all()


def test_legacy_names_are_classes() -> None:
    mm = MemoryMappedTensor.zeros(2)
    assert isinstance(mm, MemmapTensor) and not isinstance(torch.zeros(2), MemmapTensor)
    assert issubclass(MemoryMappedTensor, MemmapTensor)


def test_factories_take_torchs_dtype_spellings_and_refuse_others() -> None:
    # a Python type is a dtype for torch (and upstream); a string was an AttributeError
    assert MemoryMappedTensor.zeros(2, dtype=float).dtype == torch.float64
    assert MemoryMappedTensor.ones(2, dtype=bool).tolist() == [True, True]
    for make in (MemoryMappedTensor.zeros, MemoryMappedTensor.empty):
        with pytest.raises(
            TypeError, match=r"\.(zeros|empty): dtype must be a torch.dtype, got str"
        ):
            make(2, dtype="float32")
    with pytest.raises(TypeError, match=r"MemoryMappedTensor.full: dtype must be a torch.dtype"):
        MemoryMappedTensor.full((2,), 1, dtype=1)
