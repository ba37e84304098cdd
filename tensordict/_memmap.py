"""MemoryMappedTensor: a tensor backed by a file (or by anonymous shared memory)."""

from __future__ import annotations

import math
import os
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._torch_compat import disable_subclass_dispatch

# storage address -> (file name, storage byte size): how views of a file-backed tensor find
# their file again (torch re-wraps op results without our attributes)
_FILES: dict[int, tuple[str, int]] = {}


def _shape_arg(call: str, shape: tuple[Any, ...]) -> torch.Size:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    try:
        size = torch.Size(shape)
    except TypeError:
        raise TypeError(
            f"{call}: shape must be ints or one sequence of ints, got {shape!r}"
        ) from None
    if any(s < 0 for s in size):
        raise ValueError(f"{call}: shape must not hold negative sizes, got {tuple(size)}")
    return size


def rename_files(old_dir: str, new_dir: str) -> None:
    """Files under ``old_dir`` now live under ``new_dir`` (after a folder rename)."""
    old_dir, new_dir = os.path.abspath(old_dir), os.path.abspath(new_dir)
    for address, (name, nbytes) in list(_FILES.items()):
        if name.startswith(old_dir + os.sep):
            _FILES[address] = (new_dir + name[len(old_dir) :], nbytes)


def _forget(address: int) -> None:
    _FILES.pop(address, None)


def _map_file(
    filename: str, dtype: torch.dtype, shape: torch.Size, normalised: bool = False
) -> Tensor:
    """Map ``filename`` (which must already hold exactly the right number of bytes);
    ``normalised`` says the name is already absolute and normal (the loader's are)."""
    numel = shape.numel()
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.from_file(filename, shared=True, size=numel, dtype=dtype)
    storage = flat.untyped_storage()
    address = storage.data_ptr()
    _FILES[address] = (filename if normalised else os.path.abspath(filename), storage.nbytes())
    weakref.finalize(storage, _forget, address)
    return flat.view(shape)


class MemoryMappedTensor(Tensor):
    """A tensor whose data lives in a file, so it can be larger than RAM, shared between
    processes, and sent by reference (pickling sends the file name and the view, not
    the data).

    Results of operations that read the data are ordinary tensors; views (indexing,
    slicing, reshaping) of a file-backed tensor stay file-backed.

    >>> import tempfile, os, pickle, torch
    >>> from tensordict import MemoryMappedTensor
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "x.memmap")
    >>> mm = MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=path)
    >>> view = mm[2:4]
    >>> type(view).__name__, view.filename == mm.filename, type(mm + 1).__name__
    ('MemoryMappedTensor', True, 'Tensor')
    >>> len(pickle.dumps(view)) < 400
    True
    """

    @staticmethod
    def __new__(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        raise TypeError(
            "MemoryMappedTensor: use MemoryMappedTensor.from_tensor, .empty, .zeros, .ones, "
            ".full, .from_filename or the *_like constructors"
        )

    # ----------------------------------------------------------- construction
    @classmethod
    def _wrap(cls, tensor: Tensor) -> MemoryMappedTensor:
        return tensor.as_subclass(cls)

    @classmethod
    def _allocate(
        cls, call: str, size: torch.Size, dtype: torch.dtype, filename: Any, existsok: bool
    ) -> MemoryMappedTensor:
        """A new tensor of ``size``: a fresh file of the right length, or shared memory."""
        if filename is None:
            return cls._wrap(torch.empty(size, dtype=dtype).share_memory_())  # type: ignore[no-untyped-call]
        path = os.fspath(filename)
        if os.path.exists(path) and not existsok:
            raise FileExistsError(f"{call}: {path!r} exists (pass existsok=True to overwrite)")
        if os.path.exists(path):
            os.unlink(path)  # a new inode: tensors still mapping the old file keep their data
        nbytes = size.numel() * torch.empty((), dtype=dtype).element_size()
        with open(path, "wb") as handle:
            handle.truncate(nbytes)
        return cls._wrap(_map_file(path, dtype, size))

    @classmethod
    def from_tensor(
        cls,
        input: Tensor,
        *,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
        copy_data: bool = True,
    ) -> MemoryMappedTensor:
        """A memory-mapped copy of ``input``: in ``filename``, or in anonymous shared memory.

        ``copy_data=False`` allocates the file without copying the values (an expanded
        ``input`` is never materialised).
        """
        call = "MemoryMappedTensor.from_tensor"
        if input.requires_grad:
            raise RuntimeError(
                f"{call}: MemoryMappedTensor does not support autograd; pass a detached tensor"
            )
        out = cls._allocate(call, input.shape, input.dtype, filename, existsok)
        if copy_data and input.numel():
            with disable_subclass_dispatch():
                out.copy_(input)
        return out

    @classmethod
    def from_filename(
        cls, filename: str | os.PathLike[str], dtype: torch.dtype, shape: Sequence[int]
    ) -> MemoryMappedTensor:
        """Map an existing file of exactly ``prod(shape) * itemsize`` bytes (never grown)."""
        path = os.fspath(filename)
        size = _shape_arg("MemoryMappedTensor.from_filename", (tuple(shape),))
        expected = math.prod(size) * dtype.itemsize
        actual = os.path.getsize(path)
        if actual != expected:
            raise ValueError(
                f"MemoryMappedTensor.from_filename: {path!r} holds {actual} bytes; shape "
                f"{tuple(size)} of {dtype} needs {expected}"
            )
        return cls._wrap(_map_file(path, dtype, size))

    @classmethod
    def _from_checked_file(
        cls, path: str, dtype: torch.dtype, shape: torch.Size
    ) -> MemoryMappedTensor:
        """Map a file whose size the caller has just checked (the loader; its paths are
        absolute and normal)."""
        return cls._wrap(_map_file(path, dtype, shape, normalised=True))

    @classmethod
    def _alloc(
        cls,
        call: str,
        shape: tuple[Any, ...],
        dtype: torch.dtype | None,
        filename: Any,
        fill: Callable[[Tensor], Any] | None,
    ) -> MemoryMappedTensor:
        size = _shape_arg(call, shape)
        out = cls._allocate(call, size, dtype or torch.get_default_dtype(), filename, False)
        if fill is not None:
            with disable_subclass_dispatch():
                fill(out)
        return out

    @classmethod
    def empty(
        cls, *shape: Any, dtype: torch.dtype | None = None, filename: Any = None
    ) -> MemoryMappedTensor:
        """An uninitialised memory-mapped tensor (``empty(2, 3)`` or ``empty((2, 3))``)."""
        return cls._alloc("MemoryMappedTensor.empty", shape, dtype, filename, None)

    @classmethod
    def zeros(
        cls, *shape: Any, dtype: torch.dtype | None = None, filename: Any = None
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor of zeros."""
        return cls._alloc("MemoryMappedTensor.zeros", shape, dtype, filename, Tensor.zero_)

    @classmethod
    def ones(
        cls, *shape: Any, dtype: torch.dtype | None = None, filename: Any = None
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor of ones."""
        return cls._alloc("MemoryMappedTensor.ones", shape, dtype, filename, lambda t: t.fill_(1))

    @classmethod
    def full(
        cls,
        shape: Sequence[int],
        fill_value: float,
        *,
        dtype: torch.dtype | None = None,
        filename: Any = None,
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor filled with ``fill_value``."""
        return cls._alloc(
            "MemoryMappedTensor.full",
            (tuple(shape),),
            dtype,
            filename,
            lambda t: t.fill_(fill_value),
        )

    @classmethod
    def empty_like(cls, input: Tensor, *, filename: Any = None) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, uninitialised."""
        return cls.empty(input.shape, dtype=input.dtype, filename=filename)

    @classmethod
    def zeros_like(cls, input: Tensor, *, filename: Any = None) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, zeros."""
        return cls.zeros(input.shape, dtype=input.dtype, filename=filename)

    @classmethod
    def ones_like(cls, input: Tensor, *, filename: Any = None) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, ones."""
        return cls.ones(input.shape, dtype=input.dtype, filename=filename)

    @classmethod
    def full_like(
        cls, input: Tensor, fill_value: float, *, filename: Any = None
    ) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, filled with ``fill_value``."""
        return cls.full(input.shape, fill_value, dtype=input.dtype, filename=filename)

    # ------------------------------------------------------------- properties
    @property
    def filename(self) -> str | None:
        """The backing file, or None for anonymous shared memory (or a zero-size tensor)."""
        if self.numel() == 0:
            return None
        entry = _FILES.get(self.untyped_storage().data_ptr())
        return entry[0] if entry else None

    def requires_grad_(self, requires_grad: bool = True) -> MemoryMappedTensor:
        """Refused: gradients cannot flow into a file."""
        if requires_grad:
            raise RuntimeError(
                "MemoryMappedTensor.requires_grad_: memory-mapped tensors do not support "
                "autograd; clone() the data into a regular tensor first"
            )
        return self

    # --------------------------------------------------------------- dispatch
    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        with disable_subclass_dispatch():
            out = func(*args, **(kwargs or {}))
        return _rewrap(out, args)

    def __reduce_ex__(self, protocol: Any) -> Any:
        filename = self.filename
        if filename is None:  # anonymous: the tensor's own reduction (shared memory by fd)
            return (_from_plain, (self.as_subclass(Tensor),))
        return (
            _from_file_view,
            (
                filename,
                self.dtype,
                self.untyped_storage().nbytes(),
                tuple(self.shape),
                tuple(self.stride()),
                self.storage_offset(),
            ),
        )


def _rewrap(out: Any, args: tuple[Any, ...]) -> Any:
    """Keep views of a memory-mapped tensor memory-mapped; everything else is a Tensor."""
    if isinstance(out, (tuple, list)):
        return type(out)(_rewrap(o, args) for o in out)
    if not isinstance(out, Tensor) or (
        type(out) is not Tensor and not isinstance(out, MemoryMappedTensor)
    ):
        return out
    source = next((a for a in args if isinstance(a, MemoryMappedTensor)), None)
    plain = out.as_subclass(Tensor) if isinstance(out, MemoryMappedTensor) else out
    if (
        source is not None
        and plain.numel()
        and (plain.untyped_storage().data_ptr() == source.untyped_storage().data_ptr())
    ):
        return plain.as_subclass(MemoryMappedTensor)
    return plain


def _from_plain(tensor: Tensor) -> MemoryMappedTensor:
    return tensor.as_subclass(MemoryMappedTensor)


def _from_file_view(
    filename: str,
    dtype: torch.dtype,
    nbytes: int,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    offset: int,
) -> MemoryMappedTensor:
    """Rebuild a (view of a) file-backed tensor in another process from its reference."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    base = MemoryMappedTensor.from_filename(filename, dtype, (nbytes // itemsize,))
    with disable_subclass_dispatch():
        view = torch.as_strided(base, shape, stride, offset)
    return view.as_subclass(MemoryMappedTensor)


def _deprecated(name: str) -> Callable[..., Any]:
    def alias(*shape: Any, prefix: Any = None, dtype: torch.dtype | None = None, **kw: Any) -> Any:
        warnings.warn(
            f"{name} is deprecated; use MemoryMappedTensor.empty(...) / .from_tensor(...)",
            DeprecationWarning,
            stacklevel=2,
        )
        if len(shape) == 1 and isinstance(shape[0], Tensor):
            return MemoryMappedTensor.from_tensor(shape[0], filename=kw.get("filename"))
        filename = None
        if prefix is not None:
            os.makedirs(prefix, exist_ok=True)
            filename = os.path.join(os.fspath(prefix), f"{id(shape)}.memmap")
        return MemoryMappedTensor.zeros(*shape, dtype=dtype, filename=filename)

    return alias


MemmapTensor = _deprecated("MemmapTensor")
Memmaptensor = _deprecated("Memmaptensor")
