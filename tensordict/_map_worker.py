"""What a TensorDict.map worker process runs: call ``fn`` on one chunk and hand the result back.

A task names a chunk (``start:stop`` along ``dim``) of the job's source. Results travel
back by reference, never through the pool's pipe:

- with a shared or memory-mapped ``out``, the worker writes into its slice of ``out``;
- otherwise a tensor or a TensorDict of tensors (a *gatherable* result) is written into
  one file per leaf holding the *whole* output, at the chunk's offset, so the parent
  concatenates nothing: it maps the files once every chunk is in;
- any other result is saved leaf by leaf to files of its own, sent back by file name.

Files live in a scratch folder (``/dev/shm`` when there is one) that the parent removes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import random
import traceback
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tensordict._cloudpickle import CloudpickleWrapper
from tensordict._memmap import MemoryMappedTensor
from tensordict._nontensor import NonTensor
from tensordict._primitives import CollectionPrimitives


@dataclass
class Job:
    """Everything a worker needs besides the chunk bounds (sent once, or inherited by fork)."""

    fn: CloudpickleWrapper  # lambdas and local functions reach workers too
    source: Any
    dim: int
    stack: bool  # chunksize=0: fn sees one item at a time; results are stacked
    total: int  # the source's size along dim
    out: Any  # a shared / memory-mapped destination, or None
    scratch: str  # the folder for result files
    gather: bool  # write gatherable results into whole-output files (map, not map_iter)
    seed: int | None = None  # task i (a chunk, or a group of items) runs under seed + i
    order: Tensor | None = None  # map_iter(shuffle=True): position i reads item order[i]
    threads: int = 1  # torch threads in each worker of a pool map starts


@dataclass
class Done:
    """A chunk finished: ``kind`` is "none", "written", "gathered" (``spec``), "values", or
    "cancelled" (not run: its call had ended)."""

    index: int
    count: int
    kind: str
    spec: Any = None
    values: Any = None


@dataclass
class Failed:
    """``fn`` (or the hand-back) raised in a worker."""

    index: int
    traceback: str
    error: BaseException | None
    item: int | None  # with chunksize=0: the item fn was called on


_JOB: Job | None = None  # installed in each worker of a pool that map starts itself
_ITEM: list[int | None] = [None]  # the item being processed (chunksize=0), for error reports


def install(job: Job) -> None:
    """Pool initializer: keep the job for every task and set torch's thread count."""
    global _JOB  # noqa: PLW0603
    _JOB = job
    torch.set_num_threads(job.threads)


def _seed(seed: int) -> None:
    """Seed torch, NumPy and ``random`` in this worker (the RNGs a user's ``fn`` draws from).
    torch's CPU generator directly: ``torch.manual_seed`` costs ~150 us, 150x more."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def run_task(task: tuple[Job | None, int, int, int]) -> Done | Failed:
    """Run one task; every exception comes back as a :class:`Failed` receipt."""
    job, index, start, stop = task
    _ITEM[0] = None
    try:
        if job is None:
            job = _JOB
            assert job is not None, "TensorDict.map: worker started without a job"
        if not os.path.isdir(job.scratch):  # the call is over (it failed or was closed):
            return Done(index, 0, "cancelled")  # leave the caller's data alone
        return _run(job, index, start, stop)
    except Exception as err:
        text = traceback.format_exc()
        try:
            pickle.loads(pickle.dumps(err))
        except Exception:
            err = None  # type: ignore[assignment]
        return Failed(index, text, err, _ITEM[0])


def at(dim: int, index: Any) -> Any:
    """``index`` applied along ``dim`` (for ``tensor[...]``)."""
    return index if dim == 0 else (*(slice(None),) * dim, index)


def _run(job: Job, index: int, start: int, stop: int) -> Done:
    fn, src, dim, order = job.fn.fn, job.source, job.dim, job.order
    if job.seed is not None:
        _seed(job.seed + index)
    if job.stack:
        results = []
        for j in range(start, stop):
            item = j if order is None else int(order[j])
            _ITEM[0] = item  # (errors name the item itself, shuffled or not)
            results.append(fn(src[at(dim, item)]))
        _ITEM[0] = None
        positions = list(range(start, stop))
    else:
        rows = slice(start, stop) if order is None else order[start:stop]
        results = [fn(src[at(dim, rows)])]
        positions = [start]
    count = stop - start
    nones = sum(r is None for r in results)
    if nones == len(results):
        return Done(index, count, "none")
    if nones:
        raise ValueError(
            "TensorDict.map: fn returned None for some items of this chunk and a value for "
            "others; it must return None always or a value always"
        )
    if job.out is not None:
        for pos, result in zip(positions, results, strict=True):
            where = at(dim, pos if job.stack else slice(start, stop))
            write_into(job.out[where], result)
        return Done(index, count, "written")
    length = None if job.stack else count
    specs = [_spec(r, dim, length, job.total, ()) for r in results] if job.gather else [None]
    if job.gather and specs[0] is not None and all(s == specs[0] for s in specs):
        for pos, result in zip(positions, results, strict=True):
            _fill(result, specs[0], job, pos, stop - start)
        return Done(index, count, "gathered", spec=specs[0])
    values = [_to_files(r, job.scratch, index, n) for n, r in enumerate(results)]
    return Done(index, count, "values", values=values)


def write_into(view: Any, result: Any) -> None:
    """Copy ``result`` into ``view`` (a tensor or a TensorDict), in place."""
    if isinstance(view, Tensor):
        view.copy_(result)
    else:
        view.update_(result)


# ------------------------------------------------------------------ gathered results
def _full(shape: torch.Size, dim: int, length: int | None, total: int) -> tuple[int, ...] | None:
    """The whole output's shape from one chunk's (None when it cannot be gathered)."""
    if length is None:  # stacked: a new dim
        return None if len(shape) < dim else (*shape[:dim], total, *shape[dim:])
    if len(shape) <= dim or shape[dim] != length:
        return None
    return (*shape[:dim], total, *shape[dim + 1 :])


def _spec(result: Any, dim: int, length: int | None, total: int, path: tuple[str, ...]) -> Any:
    """How ``result`` lies in the whole output, or None if it is not gatherable."""
    if isinstance(result, Tensor):
        if result.device.type != "cpu" or result.layout != torch.strided:
            return None
        full = _full(result.shape, dim, length, total)
        if full is None:
            return None
        sig = repr((path, str(result.dtype), full)).encode()
        name = hashlib.sha1(sig, usedforsecurity=False).hexdigest()[:20]
        return ("leaf", name, result.dtype, full)
    if not isinstance(result, CollectionPrimitives) or result._stack_parts() is not None:
        return None
    batch = _full(result._batch_size, dim, length, total)
    if batch is None or result._device not in (None, torch.device("cpu")):
        return None
    entries = []
    for key, value in result._tensordict.items():  # type: ignore[attr-defined]
        if isinstance(value, NonTensor):
            return None
        sub = _spec(value, dim, length, total, (*path, key))
        if sub is None:
            return None
        entries.append((key, sub))
    names = result._names
    if names is not None and length is None:  # items are stacked: the new dim has no name
        names = [*names[:dim], None, *names[dim:]]
    return ("td", type(result), batch, result._device, names, tuple(entries))


def _sized_file(path: str, nbytes: int) -> int:
    """Open (creating) the whole-output file of one leaf, at least ``nbytes`` long."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if os.fstat(fd).st_size < nbytes:
        os.ftruncate(fd, nbytes)
    return fd


def _fill(result: Any, spec: Any, job: Job, pos: int, length: int) -> None:
    """Copy ``result``'s leaves to their places in the whole-output files.

    Along dim 0 a chunk's place is one byte range, written with ``pwrite`` (no page
    faults on a fresh mapping); along other dims, through a mapping of the file.
    """
    if spec[0] == "td":
        for key, sub in spec[5]:
            _fill(result._tensordict[key], sub, job, pos, length)
        return
    _, name, dtype, full = spec
    size = torch.Size(full)
    if not size.numel():
        return
    path = os.path.join(job.scratch, name)
    value = result.detach()
    fd = _sized_file(path, size.numel() * dtype.itemsize)
    try:
        if job.dim == 0 and hasattr(os, "pwrite"):  # not on Windows
            row = size[1:].numel() * dtype.itemsize
            data = value.contiguous().reshape(-1).view(torch.uint8).numpy()
            view, offset = memoryview(data), pos * row
            while view.nbytes:
                written = os.pwrite(fd, view, offset)
                view, offset = view[written:], offset + written
            return
    finally:
        os.close(fd)
    whole = torch.from_file(path, shared=True, size=size.numel(), dtype=dtype).view(size)
    place = whole.select(job.dim, pos) if job.stack else whole.narrow(job.dim, pos, length)
    place.copy_(value)


def adopt(path: str, dtype: torch.dtype, size: torch.Size) -> MemoryMappedTensor:
    """The result file ``path`` as a memory-mapped tensor that owns it: moved out of the
    scratch folder (which the call removes), deleted when the last tensor on it dies.

    Being a file-backed ``MemoryMappedTensor``, a result pickles by name, so it can be sent
    on to other processes (a mapping of an unlinked file could not be)."""
    owned = os.path.join(
        os.path.dirname(os.path.dirname(path)), f"tensordict-out-{uuid.uuid4().hex}"
    )
    os.rename(path, owned)
    tensor = MemoryMappedTensor._from_checked_file(owned, dtype, size)
    weakref.finalize(tensor.untyped_storage(), _unlink, owned)
    return tensor


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def build(spec: Any, scratch: str) -> Any:
    """The parent side: the whole output, its leaves mapping the gathered files."""
    if spec[0] == "leaf":
        _, name, dtype, full = spec
        size = torch.Size(full)
        if not size.numel():
            return torch.empty(size, dtype=dtype)
        return adopt(os.path.join(scratch, name), dtype, size)
    _, cls, batch, device, names, entries = spec
    built = {key: build(sub, scratch) for key, sub in entries}
    return cls._new_unsafe(built, torch.Size(batch), device, names)


# ------------------------------------------------------------------ other results
def _to_files(result: Any, scratch: str, index: int, n: int) -> Any:
    """``result`` with its CPU tensor leaves moved to files of their own (sent by name)."""
    counter = iter(range(1 << 30))

    def save(x: Tensor) -> Tensor:
        if x.device.type != "cpu" or (isinstance(x, MemoryMappedTensor) and x.filename):
            return x
        name = os.path.join(scratch, f"chunk{index}-{n}-{next(counter)}")
        return MemoryMappedTensor.from_tensor(x.detach(), filename=name)

    if isinstance(result, Tensor):
        return save(result)
    if isinstance(result, CollectionPrimitives):
        from tensordict._convert import map_leaves

        return map_leaves(result, save)
    return result


def plain(value: Any, scratch: str) -> Any:
    """The parent side of :func:`_to_files`: the chunk's files, taken out of the scratch
    folder and owned by the tensors that map them (see :func:`adopt`)."""

    def own(x: Tensor) -> Tensor:
        name = x.filename if isinstance(x, MemoryMappedTensor) else None
        if name is not None and os.path.dirname(name) == os.path.abspath(scratch):
            return adopt(name, x.dtype, x.shape)
        return x

    if isinstance(value, Tensor):
        return own(value)
    if isinstance(value, CollectionPrimitives):
        from tensordict._convert import map_leaves

        return map_leaves(value, own)
    return value
