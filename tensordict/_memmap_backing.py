"""Where a memory-mapped storage lives: its file or shared memory, found by storage address."""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable
from typing import Any

import torch


class MemmapExistsError(FileExistsError, RuntimeError):
    """The target file exists and ``existsok`` was not given.

    Both a ``FileExistsError`` (what the OS would raise) and a ``RuntimeError`` (what
    upstream tensordict raises), so either ``except`` clause catches it.
    """


class Backing:
    """The memory a ``MemoryMappedTensor`` views: a file, or anonymous shared memory.

    For shared memory this record is the tensor's *handler*: ``MemoryMappedTensor.from_handler``
    builds new views of the same memory from it. It holds the storage weakly, so it never
    keeps memory alive on its own; ``shape`` is the shape the memory was allocated with
    (``parent_shape``).
    """

    __slots__ = ("__weakref__", "_storage", "filename", "nbytes", "shape")

    def __init__(
        self,
        filename: str | None,
        storage: torch.UntypedStorage,
        shape: torch.Size,
        on_free: Callable[[Any], None] | None = None,
    ) -> None:
        self.filename = filename
        self.nbytes = storage.nbytes()
        self.shape = shape
        self._storage = weakref.ref(storage, on_free)

    @property
    def buffer(self) -> torch.UntypedStorage:
        """The storage, while some tensor still holds it."""
        storage = self._storage()
        if storage is None:
            raise RuntimeError(
                "MemoryMappedTensor.from_handler: the memory of this handler was freed "
                "(no tensor viewing it is alive)"
            )
        return storage

    def __repr__(self) -> str:
        where = self.filename or "shared memory"
        return f"MemoryMappedTensor handler({where}, {self.nbytes} bytes)"


# storage address -> its backing: how views of a memory-mapped tensor find their file
# (or handler) again, as torch re-wraps op results without our attributes
_BACKINGS: dict[int, Backing] = {}


def _forget(address: int, _ref: Any = None) -> None:
    _BACKINGS.pop(address, None)


def register(storage: torch.UntypedStorage, filename: str | None, shape: torch.Size) -> Backing:
    """Record that ``storage`` is backed by ``filename`` (None: shared memory)."""
    address = storage.data_ptr()
    # the record goes when the storage does (a weakref callback: much cheaper than
    # weakref.finalize, which a loader would pay once per leaf)
    backing = Backing(filename, storage, shape, functools.partial(_forget, address))
    _BACKINGS[address] = backing
    return backing


def attach(storage: torch.UntypedStorage, filename: str, shape: torch.Size) -> None:
    """Record that ``storage`` maps ``filename``, on the storage object itself (torch
    keeps one Python object per storage while any tensor holds it): cheaper than
    :func:`register` for a loader's many leaves, with no registry entry and no callback
    when the storage goes. Only for files that are never renamed (:func:`rename_files`
    updates the registry's records, written by saves). The :class:`Backing` itself is
    made when first asked for (:func:`backing_of`): most leaves never are."""
    storage._td_backing = (filename, shape)  # type: ignore[attr-defined]


def backing_of(storage: torch.UntypedStorage) -> Backing | None:
    """The recorded backing of ``storage``, or None (zero-size or never recorded)."""
    if not storage.nbytes():
        return None
    found = _BACKINGS.get(storage.data_ptr())
    if found is not None:
        return found
    attached = getattr(storage, "_td_backing", None)
    if type(attached) is tuple:  # (recorded by attach: made into a Backing once)
        attached = storage._td_backing = Backing(attached[0], storage, attached[1])  # type: ignore[attr-defined]
    return attached


def rename_files(old_dir: str, new_dir: str) -> None:
    """Files under ``old_dir`` now live under ``new_dir`` (after a folder rename)."""
    old_dir, new_dir = os.path.abspath(old_dir), os.path.abspath(new_dir)
    for backing in _BACKINGS.values():
        name = backing.filename
        if name is not None and name.startswith(old_dir + os.sep):
            backing.filename = new_dir + name[len(old_dir) :]


def prepare_file(call: str, path: str, nbytes: int, existsok: bool) -> None:
    """Create ``path`` holding ``nbytes`` zero bytes, never writing through a symlink.

    An existing file is unlinked first (with ``existsok``), so tensors still mapping it keep
    their data: the new file is a new inode.
    """
    if os.path.islink(path):
        raise RuntimeError(f"{call}: refusing to write through symlink {path!r}")
    if os.path.lexists(path):
        if not existsok:
            raise MemmapExistsError(
                f"{call}: {path!r} already exists (pass existsok=True to overwrite it)"
            )
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise MemmapExistsError(f"{call}: {path!r} already exists (created concurrently)") from None
    try:
        os.ftruncate(fd, nbytes)
    finally:
        os.close(fd)
