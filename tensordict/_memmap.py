"""MemoryMappedTensor: a tensor backed by a file (or by anonymous shared memory)."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tensordict import _memmap_nested as nested
from tensordict._memmap_backing import (
    Backing,
    MemmapExistsError,
    attach,
    backing_of,
    prepare_file,
    register,
    rename_files,
)
from tensordict._memmap_views import MappedViews
from tensordict._torch_compat import (
    disable_subclass_dispatch,
    is_packed_nested,
    nested_sizes,
    new_shared_storage,
)

__all__ = [
    "MemmapExistsError",
    "MemmapTensor",
    "Memmaptensor",
    "MemoryMappedTensor",
    "rename_files",
]

_NO_SHAPE = "pass a shape: f(2, 3), f((2, 3)) or f(shape=(2, 3))"


def _shape_arg(call: str, size: tuple[Any, ...], shape: Any = None) -> torch.Size:
    """The shape given as ``*size`` ints, one sequence, or the ``shape=`` keyword."""
    if size and shape is not None:
        raise TypeError(f"{call}: shape given both positionally and as shape=")
    if not size:
        if shape is None:
            raise TypeError(f"{call}: {_NO_SHAPE}")
        size = (shape,)
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    if any(isinstance(s, Tensor) and s.ndim > 0 for s in size):
        raise TypeError(
            f"{call}: a nested (ragged) shape is one 2-D integer tensor, given alone; got {size!r}"
        )
    try:
        out = torch.Size(size)
    except TypeError:
        raise TypeError(
            f"{call}: shape must be ints or one sequence of ints, got {size!r}"
        ) from None
    if any(s < 0 for s in out):
        raise ValueError(f"{call}: shape must not hold negative sizes, got {tuple(out)}")
    return out


def _nested_arg(call: str, size: tuple[Any, ...], shape: Any) -> Tensor | None:
    """The element shapes when a constructor's ``*size`` / ``shape=`` is a nested shape."""
    if size and shape is None and len(size) == 1:
        shape = size[0]
    return nested.element_shapes(call, shape) if isinstance(shape, Tensor) else None


def _like_shape(input: Tensor) -> Any:
    """The shape of ``input`` as the constructors take it (a nested tensor's element shapes)."""
    if input.is_nested:
        nested.refuse_jagged("MemoryMappedTensor.*_like", input)
        return nested_sizes(input)
    return input.shape


def _index(tensor: MemoryMappedTensor, index: Any) -> MemoryMappedTensor:
    """``tensor[index]``: a view, so still memory-mapped (a copying index gives a Tensor)."""
    view: MemoryMappedTensor = tensor[index]
    return view


def _cpu(call: str, device: Any) -> None:
    if device is not None and torch.device(device).type != "cpu":
        raise RuntimeError(f"{call}: only CPU memory can be mapped, got device {str(device)!r}")


def _map_file(
    filename: str,
    dtype: torch.dtype,
    shape: torch.Size,
    normalised: bool = False,
    writable: bool = True,
) -> Tensor:
    """Map ``filename`` (which must already hold exactly the right number of bytes);
    ``normalised`` says the name is already absolute and normal (the loader's are).
    A file this process may not write is read into private memory instead."""
    numel = shape.numel()
    if numel == 0:  # (through bytes: torch.empty warns for some dtypes, e.g. complex32)
        return torch.empty(0, dtype=torch.uint8).view(dtype).reshape(shape)
    flat = torch.from_file(filename, shared=writable, size=numel, dtype=dtype)
    if writable:
        name = filename if normalised else os.path.abspath(filename)
        register(flat.untyped_storage(), name, shape)
    return flat.view(shape)


def _read_only_mount(path: str) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class MemoryMappedTensor(MappedViews):
    """A tensor whose data lives in a file, so it can be larger than RAM, shared between
    processes, and sent by reference (pickling sends the file name and the view, not
    the data). Without a file, the data lives in anonymous shared memory.

    Operations run as on a plain tensor (no Python in between) and give ordinary
    tensors; views made by indexing and by Tensor methods (slicing, ``reshape``,
    ``unbind``, ...) stay memory-mapped, while ``torch.*`` functions give plain views.

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
    >>> MemoryMappedTensor([1, 2, 3]).tolist()  # any tensor-like, copied to shared memory
    [1, 2, 3]

    A nested (ragged) tensor of the strided layout is mapped too: every factory takes
    its element shapes as one 2-D integer tensor (one row per element), and the
    elements lie end to end in the file.

    >>> ragged = MemoryMappedTensor.ones(torch.tensor([[1, 2], [1, 3]]), dtype=torch.int64)
    >>> ragged.is_nested, [element.tolist() for element in ragged.unbind()]
    (True, [[[1, 1]], [[1, 1, 1]]])
    """

    @staticmethod
    def __new__(
        cls,
        source: Any,
        *,
        dtype: torch.dtype | None = None,
        shape: Any = None,
        index: Any = None,
        device: Any = None,
        handler: Backing | None = None,
        filename: str | os.PathLike[str] | None = None,
    ) -> MemoryMappedTensor:
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(
                f"MemoryMappedTensor: only CPU memory can be mapped, got device {str(device)!r}"
            )
        if isinstance(source, (str, os.PathLike)):
            if filename is not None:
                raise TypeError("MemoryMappedTensor: filename given twice (source and filename=)")
            if dtype is None or shape is None:
                raise TypeError("MemoryMappedTensor(filename): pass dtype= and shape= of the file")
            return MemoryMappedTensor.from_filename(source, dtype, shape, index)
        if isinstance(source, (torch.UntypedStorage, torch.TypedStorage)):
            return MemoryMappedTensor.from_storage(
                source, dtype=dtype, shape=shape, index=index, filename=filename
            )
        if handler is not None:
            if dtype is None or shape is None:
                raise TypeError("MemoryMappedTensor(handler=): pass dtype= and shape=")
            return MemoryMappedTensor.from_handler(handler, dtype, shape, index)
        out = MemoryMappedTensor.from_tensor(
            torch.as_tensor(source, dtype=dtype), filename=filename, shape=shape
        )
        return out if index is None else _index(out, index)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Everything happens in ``__new__``."""

    # ----------------------------------------------------------- construction
    @classmethod
    def _wrap(cls, tensor: Tensor) -> MemoryMappedTensor:
        return tensor.as_subclass(cls)

    @classmethod
    def _nested(cls, flat: Tensor, shapes: Tensor) -> MemoryMappedTensor:
        """The nested tensor of element ``shapes`` over the mapped 1-D tensor ``flat``."""
        return cls._wrap(nested.view(flat.as_subclass(Tensor), shapes))

    @classmethod
    def _allocate(
        cls,
        call: str,
        size: torch.Size,
        dtype: torch.dtype,
        filename: Any,
        existsok: bool,
        zero: bool = False,
    ) -> MemoryMappedTensor:
        """A new tensor of ``size``: a fresh file (reads as zeros), or shared memory
        (zeroed when ``zero``)."""
        if filename is None:  # made in shared memory (not made, then copied there)
            nbytes = size.numel() * dtype.itemsize
            fresh = torch.empty(0, dtype=dtype, device="cpu")
            fresh = fresh.set_(new_shared_storage(nbytes)).view(size)
            if zero:
                fresh.zero_()
            if fresh.numel():
                register(fresh.untyped_storage(), None, size)
            return cls._wrap(fresh)
        path = os.fspath(filename)
        prepare_file(call, path, size.numel() * dtype.itemsize, existsok)
        return cls._wrap(_map_file(path, dtype, size))

    @classmethod
    def from_tensor(
        cls,
        input: Tensor,
        *,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
        copy_existing: bool = False,
        copy_data: bool = True,
        shape: Sequence[int] | None = None,
    ) -> MemoryMappedTensor:
        """A memory-mapped copy of ``input``: in ``filename``, or in anonymous shared memory.

        ``input`` may live on any device; the copy is on the CPU. ``copy_data=False``
        allocates without copying (the values read as zeros; an expanded ``input`` is never
        materialised). ``shape`` allocates another shape, ``input`` broadcast into it.
        A ``MemoryMappedTensor`` already where asked (same file, or shared memory asked
        and had) is returned as is; copying one file-backed tensor to another file needs
        ``copy_existing=True``, so data is never duplicated on disk by mistake.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> mm = MemoryMappedTensor.from_tensor(torch.arange(3))
        >>> MemoryMappedTensor.from_tensor(mm) is mm
        True
        >>> MemoryMappedTensor.from_tensor(torch.ones(2), copy_data=False).tolist()
        [0.0, 0.0]
        """
        call = "MemoryMappedTensor.from_tensor"
        if isinstance(input, np.ndarray):
            raise TypeError(f"{call}: convert the numpy array with torch.as_tensor first")
        if not isinstance(input, Tensor):
            raise TypeError(f"{call}: expected a tensor, got {type(input).__name__}")
        if isinstance(input, MemoryMappedTensor) and copy_data and shape is None:
            mine = input.filename
            wanted = None if filename is None else os.path.abspath(os.fspath(filename))
            if mine == wanted and (mine is not None or input._handler is not None):
                return input
            if mine is not None and wanted is not None and not copy_existing:
                raise RuntimeError(
                    f"{call}: the tensor is already mapped from {mine!r}; pass "
                    f"copy_existing=True to copy it to {wanted!r}"
                )
        if copy_data and hasattr(input, "full_tensor"):  # a DTensor: gather its whole value
            input = input.full_tensor()  # (a collective: every rank of its mesh calls it)
        if input.requires_grad:
            raise RuntimeError(
                f"{call}: MemoryMappedTensor does not support autograd; pass a detached tensor"
            )
        if input.is_nested:
            nested.refuse_jagged(call, input)
            if shape is not None:
                raise TypeError(f"{call}: shape= cannot be given for a nested tensor")
            shapes = nested_sizes(input)
            size = torch.Size([nested.numel(shapes)])
            flat = cls._allocate(call, size, input.dtype, filename, existsok, zero=not copy_data)
            if copy_data and size.numel():
                with disable_subclass_dispatch():
                    flat.copy_(nested.flat_values(input))
            return cls._nested(flat, shapes)
        size = input.shape if shape is None else _shape_arg(call, (shape,))
        out = cls._allocate(call, size, input.dtype, filename, existsok, zero=not copy_data)
        if copy_data and size.numel():
            with disable_subclass_dispatch():
                out.copy_(input)
        return out

    @classmethod
    def from_filename(
        cls,
        filename: str | os.PathLike[str],
        dtype: torch.dtype,
        shape: Sequence[int] | Tensor,
        index: Any = None,
        mode: str | None = None,
    ) -> MemoryMappedTensor:
        """Map the file ``filename`` as a tensor of ``shape`` and ``dtype`` (then ``index``).

        The file must hold at least ``prod(shape) * itemsize`` bytes (it is never grown or
        cut; a longer one is mapped from its start, as upstream); a missing file is
        created, zero-filled. ``mode="r+"`` maps it shared (writes
        reach the file; a ``PermissionError`` if this process may not write it),
        ``mode="r"`` copy-on-write (writes stay in memory); the default, ``None``, is
        ``"r+"`` for a file this process may write and ``"r"`` otherwise.

        >>> import os, tempfile, torch
        >>> from tensordict import MemoryMappedTensor
        >>> path = os.path.join(tempfile.mkdtemp(), "x.memmap")
        >>> _ = MemoryMappedTensor.from_tensor(torch.arange(6), filename=path)
        >>> MemoryMappedTensor.from_filename(path, torch.int64, (2, 3), index=1).tolist()
        [3, 4, 5]
        """
        call = "MemoryMappedTensor.from_filename"
        if mode not in (None, "r", "r+"):
            raise ValueError(f"{call}: mode must be 'r', 'r+' or None, got {mode!r}")
        path = os.fspath(filename)
        shapes = _nested_arg(call, (), shape)
        if shapes is not None:
            flat = cls.from_filename(path, dtype, (nested.numel(shapes),), mode=mode)
            out = cls._nested(flat, shapes)
            return out if index is None else _index(out, index)
        size = _shape_arg(call, (tuple(shape),))
        expected = math.prod(size) * dtype.itemsize
        if not os.path.lexists(path):
            prepare_file(call, path, expected, existsok=False)
        actual = os.path.getsize(path)
        if actual < expected:  # a longer file maps its first bytes (as numpy.memmap)
            raise ValueError(
                f"{call}: {path!r} holds {actual} bytes; shape {tuple(size)} of {dtype} "
                f"needs {expected}"
            )
        writable = mode != "r" and os.access(path, os.W_OK)
        if mode == "r+" and not writable:
            raise PermissionError(f"{call}: mode='r+' needs a writable file; {path!r} is not")
        out = cls._wrap(_map_file(path, dtype, size, writable=writable))
        return out if index is None else _index(out, index)

    @classmethod
    def from_storage(
        cls,
        storage: torch.UntypedStorage | torch.TypedStorage,
        *,
        shape: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        index: Any = None,
        filename: str | os.PathLike[str] | None = None,
        handler: Backing | None = None,
    ) -> MemoryMappedTensor:
        """A tensor of ``dtype`` and ``shape`` over the whole of ``storage`` (then ``index``).

        A storage that is not yet shared is moved to shared memory (in place: tensors
        already using it follow). ``filename``, when given, must be the storage's file.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> mm = MemoryMappedTensor.from_tensor(torch.arange(4, dtype=torch.int32))
        >>> MemoryMappedTensor.from_storage(
        ...     mm.untyped_storage(), dtype=torch.int32, shape=(2, 2)
        ... ).tolist()
        [[0, 1], [2, 3]]
        """
        call = "MemoryMappedTensor.from_storage"
        _cpu(call, device)
        if isinstance(storage, torch.TypedStorage):
            dtype = dtype or storage.dtype
            raw: torch.UntypedStorage = storage.untyped()  # type: ignore[no-untyped-call]
        else:
            raw = storage
        storage = raw
        dtype = dtype or torch.uint8
        if storage.device.type != "cpu":
            raise RuntimeError(f"{call}: only CPU memory can be mapped, got {storage.device}")
        backing = backing_of(storage)
        own = backing.filename if backing is not None else getattr(storage, "filename", None)
        if filename is not None:
            wanted = os.path.abspath(os.fspath(filename))
            if own is None or os.path.abspath(own) != wanted:
                raise RuntimeError(
                    f"{call}: the storage is backed by {own or 'memory'!r}, not by the "
                    f"filename {wanted!r}; pass filename=None"
                )
        if own is None and storage.nbytes() and not storage.is_shared():
            storage.share_memory_()
        count = storage.nbytes() // dtype.itemsize
        shapes = _nested_arg(call, (), shape)
        if shapes is not None:
            out = cls._nested(
                cls.from_storage(raw, shape=(nested.numel(shapes),), dtype=dtype), shapes
            )
            return out if index is None else _index(out, index)
        size = torch.Size([count]) if shape is None else _shape_arg(call, (shape,))
        if size.numel() > count:
            raise ValueError(
                f"{call}: shape {tuple(size)} of {dtype} needs {size.numel() * dtype.itemsize} "
                f"bytes; the storage holds {storage.nbytes()}"
            )
        flat = torch.empty(0, dtype=dtype).set_(raw, 0, (count,), (1,))
        if raw.nbytes() and backing_of(raw) is None:
            register(raw, None if own is None else os.path.abspath(own), size)
        out = cls._wrap(flat[: size.numel()].view(size))
        return out if index is None else _index(out, index)

    @classmethod
    def from_handler(
        cls, handler: Backing, dtype: torch.dtype, shape: Sequence[int], index: Any = None
    ) -> MemoryMappedTensor:
        """A new view of the shared memory behind ``handler`` (a tensor's ``_handler``).

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> mm = MemoryMappedTensor.zeros(4)
        >>> view = MemoryMappedTensor.from_handler(mm._handler, torch.float32, (2, 2))
        >>> _ = view.fill_(1)
        >>> mm.tolist()
        [1.0, 1.0, 1.0, 1.0]
        """
        if not isinstance(handler, Backing):
            raise TypeError(
                "MemoryMappedTensor.from_handler: expected the _handler of a MemoryMappedTensor, "
                f"got {type(handler).__name__}"
            )
        return cls.from_storage(handler.buffer, dtype=dtype, shape=shape, index=index)

    @classmethod
    def _from_checked_file(
        cls, path: str, dtype: torch.dtype, shape: torch.Size, renamed: bool = True
    ) -> MemoryMappedTensor:
        """Map a file whose size the caller has just checked (the loader; its paths are
        absolute and normal). A file this process may not write (read-only media, mode
        0444) is mapped copy-on-write: writes stay in private memory, the file is untouched.
        ``renamed=False``: the file will not be renamed (a loaded checkpoint's), so its
        name is recorded on the storage (:func:`attach`), not in the registry.
        """
        numel = shape.numel()
        if not numel:
            return cls._wrap(_map_file(path, dtype, shape, normalised=True))
        try:  # (_map_file, inlined: a load makes one call per leaf)
            mapped = torch.from_file(path, True, numel, dtype=dtype)  # (shared; positional)
        except RuntimeError:
            if os.access(path, os.W_OK) and not _read_only_mount(path):
                raise
            return cls._wrap(_map_file(path, dtype, shape, normalised=True, writable=False))
        if renamed:
            register(mapped.untyped_storage(), path, shape)
        else:
            attach(mapped.untyped_storage(), path, shape)
        if len(shape) > 1:
            mapped = mapped.view(*shape)  # (unpacked: half the cost of a torch.Size argument)
        elif not shape:
            mapped = mapped.view(shape)
        mapped.__class__ = cls  # (a fresh object: no alias, as as_subclass makes)
        return mapped  # type: ignore[return-value]

    @classmethod
    def _alloc(
        cls,
        call: str,
        size: tuple[Any, ...],
        shape: Any,
        dtype: torch.dtype | None,
        device: Any,
        filename: Any,
        existsok: bool,
        fill: Any = None,
    ) -> MemoryMappedTensor:
        _cpu(call, device)
        if dtype is not None and not isinstance(dtype, torch.dtype):  # torch's: float, bool, ...
            try:
                dtype = torch.empty(0, dtype=dtype).dtype
            except TypeError:
                raise TypeError(
                    f"{call}: dtype must be a torch.dtype, got {type(dtype).__name__} {dtype!r}"
                ) from None
        shapes = _nested_arg(call, size, shape)
        if shapes is not None:
            flat = cls._alloc(
                call, (nested.numel(shapes),), None, dtype, device, filename, existsok, fill
            )
            return cls._nested(flat, shapes)
        out = cls._allocate(
            call,
            _shape_arg(call, size, shape),
            dtype or torch.get_default_dtype(),
            filename,
            existsok,
            zero=fill == 0,
        )
        if fill is not None and fill != 0 and out.numel():
            with disable_subclass_dispatch():
                out.fill_(fill)
        return out

    @classmethod
    def empty(
        cls,
        *size: Any,
        shape: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
    ) -> MemoryMappedTensor:
        """An uninitialised memory-mapped tensor: ``empty(2, 3)``, ``empty((2, 3))`` or
        ``empty(shape=(2, 3))``; in ``filename`` (replaced with ``existsok``) or in
        shared memory. ``device`` may only be the CPU.

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.empty(shape=(2, 3)).shape
        torch.Size([2, 3])
        """
        call = "MemoryMappedTensor.empty"
        return cls._alloc(call, size, shape, dtype, device, filename, existsok)

    @classmethod
    def zeros(
        cls,
        *size: Any,
        shape: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor of zeros (arguments as ``empty``).

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros(2, dtype=torch.int8).tolist()
        [0, 0]
        """
        call = "MemoryMappedTensor.zeros"
        return cls._alloc(call, size, shape, dtype, device, filename, existsok, 0)

    @classmethod
    def ones(
        cls,
        *size: Any,
        shape: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor of ones (arguments as ``empty``).

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.ones((2,)).tolist()
        [1.0, 1.0]
        """
        call = "MemoryMappedTensor.ones"
        return cls._alloc(call, size, shape, dtype, device, filename, existsok, 1)

    @classmethod
    def full(
        cls,
        *size: Any,
        fill_value: Any = None,
        shape: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor filled with ``fill_value``: ``full(2, 3, fill_value=v)``,
        ``full((2, 3), fill_value=v)``, ``full(shape=(2, 3), fill_value=v)`` or
        ``full((2, 3), v)``; other arguments as ``empty``.

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.full(2, fill_value=3.5).tolist()
        [3.5, 3.5]
        >>> MemoryMappedTensor.full((1, 2), 7).tolist()
        [[7.0, 7.0]]
        """
        call = "MemoryMappedTensor.full"
        if fill_value is None and len(size) == 2 and not isinstance(size[0], int):
            fill_value = size[1]
            size = size[:1]
        if fill_value is None:
            raise TypeError(f"{call}: pass fill_value=")
        return cls._alloc(call, size, shape, dtype, device, filename, existsok, fill_value)

    @classmethod
    def empty_like(
        cls, input: Tensor, *, filename: str | os.PathLike[str] | None = None
    ) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, uninitialised.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.empty_like(torch.zeros(2, dtype=torch.int16)).dtype
        torch.int16
        """
        return cls.empty(_like_shape(input), dtype=input.dtype, filename=filename)

    @classmethod
    def zeros_like(
        cls, input: Tensor, *, filename: str | os.PathLike[str] | None = None
    ) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, zeros.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros_like(torch.ones(2)).tolist()
        [0.0, 0.0]
        """
        return cls.zeros(_like_shape(input), dtype=input.dtype, filename=filename)

    @classmethod
    def ones_like(
        cls, input: Tensor, *, filename: str | os.PathLike[str] | None = None
    ) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, ones.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.ones_like(torch.zeros(2, dtype=torch.bool)).tolist()
        [True, True]
        """
        return cls.ones(_like_shape(input), dtype=input.dtype, filename=filename)

    @classmethod
    def full_like(
        cls, input: Tensor, fill_value: Any, *, filename: str | os.PathLike[str] | None = None
    ) -> MemoryMappedTensor:
        """Shape and dtype of ``input``, filled with ``fill_value``.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.full_like(torch.zeros(2, dtype=torch.int64), 4).tolist()
        [4, 4]
        """
        return cls.full(
            _like_shape(input), fill_value=fill_value, dtype=input.dtype, filename=filename
        )

    # ------------------------------------------------------------- properties
    @property
    def filename(self) -> str | None:
        """The backing file (absolute), or None for shared memory or a zero-size tensor.

        (Upstream raises ``RuntimeError`` where there is no file; None is easier to test.)

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros(2).filename is None
        True
        """
        if self.numel() == 0:
            return None
        backing = backing_of(self.untyped_storage())
        return backing.filename if backing is not None else None

    @property
    def _filename(self) -> str | None:
        return self.filename

    @property
    def _handler(self) -> Backing | None:
        """The shared-memory handler (None for a file-backed or zero-size tensor)."""
        if self.numel() == 0:
            return None
        storage = self.untyped_storage()
        backing = backing_of(storage)
        if backing is None:  # e.g. received from another process
            itemsize = self.dtype.itemsize
            backing = register(storage, None, torch.Size([storage.nbytes() // itemsize]))
        return backing if backing.filename is None else None

    @property
    def parent_shape(self) -> torch.Size:
        """The shape the file or shared memory was allocated with (views share it).

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros(4, 3)[1:, 0].parent_shape
        torch.Size([4, 3])
        """
        if self.numel() == 0:
            return self.shape
        backing = backing_of(self.untyped_storage())
        return backing.shape if backing is not None else self.shape

    def requires_grad_(self, requires_grad: bool = True) -> MemoryMappedTensor:
        """Refused: gradients cannot flow into a file.

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros(1).requires_grad_(False).requires_grad
        False
        """
        if requires_grad:
            raise RuntimeError(
                "MemoryMappedTensor.requires_grad_: memory-mapped tensors do not support "
                "autograd; clone() the data into a regular tensor first"
            )
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A deep copy is a regular tensor in memory: copying never creates or shares a file.

        >>> import copy, torch
        >>> from tensordict import MemoryMappedTensor
        >>> m = MemoryMappedTensor.from_tensor(torch.arange(3.0))
        >>> c = copy.deepcopy(m)
        >>> type(c).__name__, c.tolist()
        ('Tensor', [0.0, 1.0, 2.0])
        """
        out = memo.get(id(self))
        if out is None:
            out = memo[id(self)] = self.as_subclass(Tensor).clone()
        return out

    def __reduce_ex__(self, protocol: Any) -> Any:
        filename = self.filename
        if filename is None:  # anonymous: the tensor's own reduction (shared memory by fd)
            return (_from_plain, (self.as_subclass(Tensor),))
        if self.is_nested:
            shapes = nested_sizes(self).tolist()
            if is_packed_nested(self):  # its file's start, end to end: the shapes say it all
                return (_from_file_nested, (filename, self.dtype, shapes))
            # a view with other strides or offsets (or inside an archive): sent by value
            return (_nested_by_value, (nested.flat_values(self), shapes))
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


def _from_file_nested(
    filename: str, dtype: torch.dtype, shapes: list[list[int]]
) -> MemoryMappedTensor:
    """Rebuild a file-backed nested tensor in another process from its reference."""
    return MemoryMappedTensor.from_filename(filename, dtype, torch.tensor(shapes))


def _nested_by_value(values: Tensor, shapes: list[list[int]]) -> MemoryMappedTensor:
    """A nested tensor sent by value, as a fresh one in shared memory."""
    flat = MemoryMappedTensor.from_tensor(values)
    return MemoryMappedTensor._nested(flat, torch.tensor(shapes))


class _LegacyMeta(type):
    """Metaclass of the deprecated spellings: calling one warns and builds a
    ``MemoryMappedTensor``; every ``MemoryMappedTensor`` is an instance of them."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, MemoryMappedTensor)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, MemoryMappedTensor)

    def __call__(
        cls, *shape: Any, prefix: Any = None, dtype: torch.dtype | None = None, **kw: Any
    ) -> Any:
        name = cls.__name__
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


class MemmapTensor(metaclass=_LegacyMeta):
    """Deprecated spelling of ``MemoryMappedTensor``: calling it warns and builds one.

    ``MemmapTensor(*shape, dtype=..., prefix=...)`` is ``MemoryMappedTensor.zeros`` with a
    file under ``prefix``; ``MemmapTensor(tensor)`` is ``MemoryMappedTensor.from_tensor``.
    ``isinstance(x, MemmapTensor)`` holds for every ``MemoryMappedTensor``.

    >>> import warnings
    >>> from tensordict import MemmapTensor, MemoryMappedTensor
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     tensor = MemmapTensor(2, 3)
    >>> type(tensor).__name__, tensor.shape, caught[0].category.__name__
    ('MemoryMappedTensor', torch.Size([2, 3]), 'DeprecationWarning')
    >>> isinstance(MemoryMappedTensor.zeros(1), MemmapTensor)
    True
    """


class Memmaptensor(metaclass=_LegacyMeta):
    """Deprecated spelling of ``MemoryMappedTensor`` (as ``MemmapTensor``).

    >>> import warnings
    >>> from tensordict import Memmaptensor, MemoryMappedTensor
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     tensor = Memmaptensor(2)
    >>> isinstance(tensor, Memmaptensor), isinstance(tensor, MemoryMappedTensor)
    (True, True)
    """
