"""TensorDict.map / map_iter: split along a dim, call ``fn`` on the chunks in worker processes.

The parent splits, starts (or borrows) a pool, hands out chunk bounds and collects
receipts (see ``_map_worker`` for how results come back without a copy through a pipe).

Choices made here:

- Inputs travel by reference. Memory-mapped leaves are sent as file names; other CPU
  leaves are moved to shared memory *in place*, once, before the first task (what
  ``torch.multiprocessing`` does to any tensor sent to another process). So an in-place
  write in a worker (``chunk.set_(...)``) is seen by the parent, whatever the input.
- A pool that map starts uses ``fork`` where it is available and CUDA is not initialised
  (no interpreter start, no import, no pickling of the job: workers inherit it), else
  ``spawn``. Its workers run torch on one thread each. The pool is terminated when the
  call ends, also on error. A caller's ``pool`` gets the job with every task and is
  never closed.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import multiprocessing.pool
import os
import queue
import shutil
import tempfile
import warnings
from collections.abc import Callable, Generator, Iterator
from typing import Any

import torch
from torch import Tensor

from tensordict._cloudpickle import CloudpickleWrapper
from tensordict._map_worker import (
    Done,
    Failed,
    Job,
    at,
    build,
    install,
    plain,
    run_task,
    write_into,
)
from tensordict._memmap import MemoryMappedTensor
from tensordict._primitives import CollectionPrimitives
from tensordict._progress import progress_bar

_FORK_WARNING = r".*use of fork\(\) may lead to deadlocks"
_POLL_S = 0.05  # how often a wait for results checks that the workers are alive


def _scratch_root() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _start_method(call: str, requested: str | None) -> str:
    methods = mp.get_all_start_methods()
    if requested is None:
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
        return "fork" if "fork" in methods and not cuda else "spawn"
    if requested not in methods:
        raise ValueError(f"{call}: mp_start_method must be one of {methods}, got {requested!r}")
    return requested


def _cpus() -> int:
    """The CPUs this process may run on (all of them where affinity is unknown)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _positive(call: str, name: str, value: int | None, minimum: int) -> None:
    if value is not None and (not isinstance(value, int) or value < minimum):
        raise ValueError(f"{call}: {name} must be an int >= {minimum}, got {value!r}")


def _bounds(total: int, chunksize: int | None, num_chunks: int | None, workers: int) -> list[int]:
    """Chunk boundaries along the dim: ``[0, b1, ..., total]``."""
    if chunksize == 0:  # one item per call; tasks group items to keep the pipes quiet
        chunksize = max(1, math.ceil(total / (4 * workers)))
    if chunksize is not None:
        return [*range(0, total, chunksize), total]
    k = min(num_chunks or workers, total)
    step, extra = divmod(total, k)
    bounds = [0]
    for i in range(k):
        bounds.append(bounds[-1] + step + (i < extra))
    return bounds


def _share_leaves(td: Any) -> None:
    """Move the CPU leaves that are neither file-backed nor shared to shared memory, in place."""
    for leaf in td._tensor_leaves([]):
        if leaf.device.type != "cpu":
            continue
        if isinstance(leaf, MemoryMappedTensor) or leaf.is_shared():
            continue
        leaf.share_memory_()


def _is_shared(out: Any) -> bool:
    if isinstance(out, Tensor):
        return isinstance(out, MemoryMappedTensor) or bool(out.is_shared())  # type: ignore[no-untyped-call]
    leaves = out._tensor_leaves([])
    return bool(leaves) and all(isinstance(x, MemoryMappedTensor) or x.is_shared() for x in leaves)


def _dead_worker(pool: Any, seen: set[Any]) -> int | None:
    """The exit code of a pool worker seen so far that died (a crash, a kill), if any.

    The pool replaces dead workers within ~0.1 s, so ``seen`` keeps every worker ever
    observed (``multiprocessing.pool.Pool`` lists its current ones in ``_pool``).
    """
    seen.update(getattr(pool, "_pool", ()))
    for proc in seen:
        code = proc.exitcode
        if code not in (None, 0):
            return int(code)
    return None


class _Plan:
    """The validated arguments of one map/map_iter call."""

    def __init__(
        self,
        td: Any,
        call: str,
        fn: Any,
        dim: int,
        num_workers: int | None,
        chunksize: int | None,
        num_chunks: int | None,
        pool: Any,
        out: Any,
        mp_start_method: str | None,
        max_tasks_per_child: int | None,
        generator: torch.Generator | None = None,
        worker_threads: int = 1,
        index_with_generator: bool = False,
        shuffle: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"{call}: fn must be callable, got {type(fn).__name__}")
        ndim = len(td.batch_size)
        if ndim == 0:
            raise ValueError(f"{call}: cannot split a TensorDict with batch_size=[] along a dim")
        if not isinstance(dim, int) or not -ndim <= dim < ndim:
            raise IndexError(
                f"{call}: dim {dim!r} is out of range for batch_size {tuple(td.batch_size)}"
            )
        if chunksize is not None and num_chunks is not None:
            raise ValueError(f"{call}: pass chunksize or num_chunks, not both")
        _positive(call, "chunksize", chunksize, 0)
        _positive(call, "num_chunks", num_chunks, 1)
        _positive(call, "num_workers", num_workers, 1)
        _positive(call, "max_tasks_per_child", max_tasks_per_child, 1)
        _positive(call, "worker_threads", worker_threads, 1)
        for name, flag in (("index_with_generator", index_with_generator), ("shuffle", shuffle)):
            if not isinstance(flag, bool):
                raise TypeError(f"{call}: {name} must be a bool, got {type(flag).__name__}")
        if shuffle and not index_with_generator:
            raise RuntimeError(
                f"{call}: shuffle=True indexes each chunk when a worker asks for it; it needs "
                "index_with_generator=True"
            )
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"{call}: generator must be a torch.Generator, got {type(generator).__name__}"
            )
        if pool is not None:
            if not hasattr(pool, "apply_async"):
                raise TypeError(
                    f"{call}: pool must be a multiprocessing.pool.Pool, got {type(pool).__name__}"
                )
            for name, value in (
                ("mp_start_method", mp_start_method),
                ("max_tasks_per_child", max_tasks_per_child),
            ):
                if value is not None:
                    raise ValueError(f"{call}: {name} applies to a pool map starts; got a pool")
            workers = num_workers or getattr(pool, "_processes", None) or _cpus()
        else:
            workers = num_workers or _cpus()
        self.dim = dim % ndim
        self.total = td.batch_size[self.dim]
        if out is not None:
            shape = out.shape if isinstance(out, Tensor) else out.batch_size
            if len(shape) <= self.dim or shape[self.dim] != self.total:
                raise ValueError(
                    f"{call}: out must have size {self.total} along dim {self.dim} like the "
                    f"input (batch_size {tuple(td.batch_size)}), got {tuple(shape)}"
                )
        self.call, self.fn, self.td, self.pool, self.out = call, fn, td, pool, out
        self.stack = chunksize == 0
        self.workers = workers
        self.method = None if pool is not None else _start_method(call, mp_start_method)
        self.max_tasks = max_tasks_per_child
        self.bounds = _bounds(self.total, chunksize, num_chunks, workers) if self.total else [0]
        self.threads = worker_threads
        self.shuffle = shuffle
        # The workers of a pool map starts are seeded (a caller's pool only when given a
        # generator): the base seed comes from ``generator``, else from torch's global RNG
        # (as DataLoader's), so calls differ and torch.manual_seed makes them reproducible.
        self.seed = None
        if generator is not None and isinstance(pool, multiprocessing.pool.ThreadPool):
            raise ValueError(
                f"{call}: generator= seeds the worker processes; the threads of a ThreadPool "
                "share this process's random state, which seeding them would reset"
            )
        if pool is None or generator is not None:
            source = generator if generator is not None else torch.default_generator
            self.seed = int(torch.randint(0, 2**62, (), generator=source))
        self.order = torch.randperm(self.total, generator=generator) if shuffle else None

    @property
    def chunks(self) -> list[tuple[int, int]]:
        return list(zip(self.bounds[:-1], self.bounds[1:], strict=True))


def receipts(
    plan: _Plan, out_shared: bool, pbar: bool, scratch: str, gather: bool
) -> Generator[Done, None, None]:
    """Run every chunk; yield the receipts in chunk order. Owned pools end with the call."""
    bar = progress_bar(plan.call, plan.total, unit="item") if pbar else None
    job = Job(
        CloudpickleWrapper(plan.fn),
        plan.td,
        plan.dim,
        plan.stack,
        plan.total,
        plan.out if out_shared else None,
        scratch,
        gather,
        plan.seed,
        plan.order,
        plan.threads,
    )
    pool = plan.pool
    owned = pool is None
    inbox: queue.Queue[tuple[int, Any]] = queue.Queue()
    try:
        if owned:
            ctx = mp.get_context(plan.method)
            with warnings.catch_warnings():  # Python >= 3.12 warns on any fork with threads
                warnings.filterwarnings("ignore", _FORK_WARNING, DeprecationWarning)
                pool = ctx.Pool(
                    min(plan.workers, len(plan.chunks)) or 1,
                    initializer=install,
                    initargs=(job,),
                    maxtasksperchild=plan.max_tasks,
                )
        seen: set[Any] = set()
        _dead_worker(pool, seen)
        for i, (start, stop) in enumerate(plan.chunks):
            task = (None if owned else job, i, start, stop)
            pool.apply_async(
                run_task,
                (task,),
                callback=lambda r, i=i: inbox.put((i, r)),
                error_callback=lambda e, i=i: inbox.put((i, e)),
            )
        ready: dict[int, Any] = {}
        for want in range(len(plan.chunks)):
            while (not ready) if plan.shuffle else (want not in ready):
                try:
                    i, receipt = inbox.get(timeout=_POLL_S)
                except queue.Empty:
                    code = _dead_worker(pool, seen)
                    if code is not None:
                        raise RuntimeError(
                            f"{plan.call}: a worker process died (exit code {code}) while "
                            f"chunk {want} was pending"
                        ) from None
                    continue
                if bar is not None and isinstance(receipt, Done):
                    bar.update(receipt.count)
                ready[i] = receipt
            if plan.shuffle:  # shuffled chunks come back as they finish
                want = next(iter(ready))
            receipt = ready.pop(want)
            _check(plan, want, receipt)  # in chunk order: the first failing chunk is named
            yield receipt
    finally:
        if bar is not None:
            bar.close()
        if owned and pool is not None:
            pool.terminate()
            pool.join()


def _check(plan: _Plan, index: int, receipt: Any) -> None:
    start, stop = plan.chunks[index]
    where = f"chunk {index} (items {start}:{stop} along dim {plan.dim})"
    if plan.order is not None:  # shuffled: the chunk's items are the permutation's
        where = f"chunk {index} (items {plan.order[start:stop].tolist()} along dim {plan.dim})"
    if isinstance(receipt, Failed):
        if receipt.item is not None:
            where = f"item {receipt.item} along dim {plan.dim} (chunksize=0)"
        kind = type(receipt.error).__name__ if receipt.error is not None else "an exception"
        raise RuntimeError(
            f"{plan.call}: fn raised {kind} on {where}; worker traceback:\n{receipt.traceback}"
        ) from receipt.error
    if isinstance(receipt, BaseException):  # the pool could not send the task or its result
        raise RuntimeError(
            f"{plan.call}: {where} failed in the pool: {type(receipt).__name__}: {receipt}"
        ) from receipt


def _scratch(td: Any) -> str:
    """A fresh folder for result files: in ``/dev/shm`` when it has room for about twice
    the input (results are usually no larger), else in the temporary folder on disk, so a
    small ``/dev/shm`` (a container's default 64 MB) does not fail a large call."""
    root = _scratch_root()
    if root is not None:
        need = 2 * sum(t.numel() * t.element_size() for t in td._tensor_leaves([]))
        info = os.statvfs(root)
        if info.f_bavail * info.f_frsize < need:
            root = None
    return tempfile.mkdtemp(prefix="tensordict-map-", dir=root)


def _remove(scratch: str) -> None:
    """Delete the scratch folder. It is renamed first, atomically: tasks of a failed call
    still running in a caller's pool then fail to create files instead of racing the
    removal (a file created before the rename is listed and removed with the rest)."""
    trash = scratch + "-removed"
    try:
        os.rename(scratch, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def run_map(plan: _Plan, pbar: bool) -> Any:
    """TensorDict.map's body: results joined along the dim (or written into ``out``)."""
    if plan.total == 0:
        return _empty(plan)
    _share_leaves(plan.td)
    out = plan.out
    out_shared = out is not None and _is_shared(out)
    scratch = _scratch(plan.td)
    try:
        got = list(receipts(plan, out_shared, pbar, scratch, gather=True))
        kinds = {r.kind for r in got}
        if kinds in ({"none"}, {"written"}):
            return out
        if "none" in kinds:
            first = next(i for i, r in enumerate(got) if r.kind == "none")
            raise ValueError(
                f"{plan.call}: fn returned None on chunk {first} and a value on others; it "
                "must return None always or a value always"
            )
        if kinds == {"gathered"} and all(r.spec == got[0].spec for r in got):
            result = build(got[0].spec, scratch)
        else:
            result = _join(plan, got, scratch)
        if out is None:
            return result
        write_into(out, result)
        return out
    finally:
        _remove(scratch)


def _empty(plan: _Plan) -> Any:
    """Nothing to split: ``fn`` on the empty chunk, here (it shows the result's structure)."""
    if plan.stack:
        raise ValueError(
            f"{plan.call}: the input has no items along dim {plan.dim}; with chunksize=0 fn "
            "is called on items, so the result's structure is unknown"
        )
    idx = (*(slice(None),) * plan.dim, slice(0, 0))
    result = plan.fn(plan.td[idx])
    if plan.out is not None and result is not None:
        write_into(plan.out, result)
        return plan.out
    return result


def _join(plan: _Plan, got: list[Done], scratch: str) -> Any:
    """The general case: each chunk's value rebuilt, then one torch.cat / torch.stack."""
    parts: list[Any] = []
    for receipt, (start, stop) in zip(got, plan.chunks, strict=True):
        if receipt.kind == "gathered":
            whole = build(receipt.spec, scratch)
            if plan.stack:
                parts.extend(whole[at(plan.dim, j)] for j in range(start, stop))
            else:
                parts.append(whole[at(plan.dim, slice(start, stop))])
        else:
            parts.extend(plain(v, scratch) for v in receipt.values)
    try:
        return torch.stack(parts, plan.dim) if plan.stack else torch.cat(parts, plan.dim)
    except (RuntimeError, ValueError, TypeError, KeyError) as err:
        verb = "stack" if plan.stack else "concatenate"
        raise RuntimeError(
            f"{plan.call}: could not {verb} the results of the chunks along dim {plan.dim}: {err}"
        ) from err


def run_map_iter(plan: _Plan, pbar: bool) -> Iterator[Any]:
    """TensorDict.map_iter's body: each chunk's result (or each item's, with chunksize=0)."""
    if plan.total == 0:
        return
    _share_leaves(plan.td)
    scratch = _scratch(plan.td)
    # closed first (its pool terminated) whatever the interpreter's collection order
    source = receipts(plan, False, pbar, scratch, gather=False)
    try:
        for receipt in source:
            start, stop = plan.chunks[receipt.index]
            if receipt.kind == "none":
                yield from [None] * (stop - start if plan.stack else 1)
            else:
                for value in receipt.values:
                    yield plain(value, scratch)
    finally:
        source.close()
        _remove(scratch)


class MapOps(CollectionPrimitives):
    """``map`` and ``map_iter``: a function over chunks of the collection, in worker processes."""

    __slots__ = ()

    def map(
        self,
        fn: Callable[[Any], Any],
        dim: int = 0,
        num_workers: int | None = None,
        *,
        chunksize: int | None = None,
        num_chunks: int | None = None,
        pool: multiprocessing.pool.Pool | None = None,
        out: Any = None,
        pbar: bool = False,
        mp_start_method: str | None = None,
        max_tasks_per_child: int | None = None,
        generator: torch.Generator | None = None,
        worker_threads: int = 1,
        index_with_generator: bool = False,
    ) -> Any:
        """Call ``fn`` on chunks along ``dim`` in worker processes and join the results.

        ``chunksize`` items per chunk, or ``num_chunks`` chunks (default: one per worker);
        ``chunksize=0`` calls ``fn`` on one item at a time and stacks the results. The
        results are concatenated along ``dim`` in chunk order, or written into ``out``
        (by the workers themselves when ``out`` is shared or memory-mapped). When ``fn``
        returns None (it wrote into its chunk in place), map returns ``out`` (or None).

        Task ``i`` (chunk ``i``; with ``chunksize=0``, the ``i``-th group of items) runs
        with torch, NumPy and ``random`` seeded by a base seed plus ``i``, the base drawn
        from ``generator`` (default: torch's global RNG), so workers draw different
        numbers; a caller's ``pool`` is seeded only when given a ``generator``.
        ``worker_threads`` sets torch's threads per worker. Chunks are always indexed in
        the workers, so ``index_with_generator`` changes nothing.
        See docs/map.md.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(6.0)}, [6])
        >>> td.map(lambda c: c * 10, num_workers=2, chunksize=2)["x"]
        MemoryMappedTensor([ 0., 10., 20., 30., 40., 50.])
        """
        plan = _Plan(
            self,
            self._call("map"),
            fn,
            dim,
            num_workers,
            chunksize,
            num_chunks,
            pool,
            out,
            mp_start_method,
            max_tasks_per_child,
            generator,
            worker_threads,
            index_with_generator,
        )
        return run_map(plan, pbar)

    def map_iter(
        self,
        fn: Callable[[Any], Any],
        dim: int = 0,
        num_workers: int | None = None,
        *,
        chunksize: int | None = None,
        num_chunks: int | None = None,
        pool: multiprocessing.pool.Pool | None = None,
        pbar: bool = False,
        mp_start_method: str | None = None,
        max_tasks_per_child: int | None = None,
        shuffle: bool = False,
        generator: torch.Generator | None = None,
        worker_threads: int = 1,
        index_with_generator: bool = True,
    ) -> Iterator[Any]:
        """Like :meth:`map`, yielding each chunk's result in order instead of joining them
        (each item's result with ``chunksize=0``). Workers stop when the iterator is closed.

        ``shuffle=True`` fills the chunks from a random permutation along ``dim`` (drawn
        from ``generator``, default torch's global RNG) and yields them as they finish.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(4)}, [4])
        >>> [c["x"].tolist() for c in td.map_iter(lambda c: c + 1, num_workers=2, chunksize=2)]
        [[1, 2], [3, 4]]
        """
        plan = _Plan(
            self,
            self._call("map_iter"),
            fn,
            dim,
            num_workers,
            chunksize,
            num_chunks,
            pool,
            None,
            mp_start_method,
            max_tasks_per_child,
            generator,
            worker_threads,
            index_with_generator,
            shuffle,
        )
        return run_map_iter(plan, pbar)
