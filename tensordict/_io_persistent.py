"""PersistentTensorDict: a TensorDict over an HDF5 file or zarr store, read lazily by index."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from tensordict._base import _NO_DEFAULT, TensorDictBase
from tensordict._batch import check_copy_broadcast, leaf_shape_error
from tensordict._io_common import FormatError
from tensordict._keys import NestedKey, key_path
from tensordict._nontensor import NonTensor, NonTensorData, is_non_tensor
from tensordict._nontensor_json import from_record, to_record
from tensordict._views import with_non_tensor

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import DenseTensorDictBase, TensorDictBase

_ATTR = "tensordict"  # per group: JSON {"batch_size": [...], "non_tensor": {...}}


def _backend(name: str) -> Any:
    if name == "h5":
        from tensordict._io_h5 import H5Backend

        return H5Backend()
    if name == "zarr":
        from tensordict._io_zarr import ZarrBackend

        return ZarrBackend()
    raise ValueError(f"PersistentTensorDict: unknown backend {name!r}; expected 'h5' or 'zarr'")


class _Handle:
    """The open file of one process: reopened (never shared) after a fork or unpickling,
    so each ``map`` worker reads through its own handle."""

    __slots__ = ("backend", "filename", "meta", "mode", "nodes", "pid", "root")

    def __init__(self, backend: Any, filename: Any, mode: str, root: Any = None) -> None:
        self.backend, self.filename, self.mode = backend, filename, mode
        self.root, self.pid = root, os.getpid() if root is not None else -1
        self.meta: dict[tuple[str, ...], dict[str, Any]] = {}  # group attributes, as read
        # checked array and group nodes by full path (opening one costs more than a small
        # read); cleared with ``meta`` by every write through this library
        self.nodes: dict[tuple[str, ...], Any] = {}

    def get(self) -> Any:
        if self.root is None or self.pid != os.getpid():
            self.root = self.backend.open(self.filename, self.mode)
            self.pid = os.getpid()
            self.meta = {}
            self.nodes = {}
        return self.root

    def __getstate__(self) -> dict[str, Any]:
        return {"backend": self.backend.name, "filename": self.filename, "mode": self.mode}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.backend = _backend(state["backend"])
        self.filename, self.mode = state["filename"], state["mode"]
        self.root, self.pid, self.meta, self.nodes = None, -1, {}, {}


def _read_attr(backend: Any, node: Any, where: str) -> dict[str, Any]:
    raw = backend.get_attr(node, _ATTR)
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as err:
        raise FormatError(f"PersistentTensorDict: {where}: malformed {_ATTR!r} attribute") from err
    if not isinstance(doc, dict):
        raise FormatError(f"PersistentTensorDict: {where}: malformed {_ATTR!r} attribute")
    return doc


def _batch_index(index: Any, batch: torch.Size) -> tuple[Any, ...] | None:
    """``index`` as a tuple the storage reads directly (ints, slices, and at most one
    sorted unique integer array, first), or None when it needs the in-memory path."""
    if not isinstance(index, tuple):
        index = (index,)
    out: list[Any] = []
    for pos, item in enumerate(index):
        if isinstance(item, bool) or item is None or item is Ellipsis:
            return None
        if isinstance(item, (int, slice)):
            out.append(item)
            continue
        if pos != 0:
            return None
        arr = item.cpu().numpy() if isinstance(item, Tensor) else np.asarray(item)
        if arr.dtype == np.bool_:
            if arr.ndim != 1 or arr.shape[0] != batch[0]:
                return None
            arr = np.flatnonzero(arr)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            return None
        out.append(arr.astype(np.int64))
    if len(out) > len(batch):
        return None
    return tuple(out)


class PersistentTensorDict(TensorDictBase):
    """A TensorDict whose entries live in an HDF5 file (``backend="h5"``, h5py) or a zarr
    store (``backend="zarr"``): groups are nested PersistentTensorDicts, datasets tensors
    read on access. ``td[idx]`` reads only the rows asked for (one sorted read per
    dataset) and returns an in-memory TensorDict; ``to_tensordict()`` reads everything.
    Other operations work on the in-memory copy. Pickling keeps the file name, not the
    handle: each process (``map`` worker) opens its own.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, PersistentTensorDict
    >>> path = tempfile.mkdtemp() + "/data.h5"
    >>> td = TensorDict({"x": torch.arange(6).view(3, 2), "n": {"y": torch.ones(3)}}, [3])
    >>> ptd = PersistentTensorDict.from_dict(td, path)
    >>> ptd[torch.tensor([2, 0])]["x"]
    tensor([[4, 5],
            [0, 1]])
    >>> PersistentTensorDict.from_h5(path)["n", "y"]
    tensor([1., 1., 1.])
    >>> ptd.close()
    """

    __slots__ = ("_handle", "_kwargs", "_path")
    _abstract = False

    def __init__(
        self,
        *,
        batch_size: Any = None,
        filename: Any = None,
        group: Any = None,
        mode: str = "r",
        backend: str = "h5",
        device: Any = None,
        **kwargs: Any,
    ) -> None:
        if (filename is None) == (group is None):
            raise ValueError("PersistentTensorDict: pass exactly one of filename and group")
        impl = _backend(backend)
        attrs = kwargs.pop("_attrs", None)
        root = impl.open(group if group is not None else filename, mode, attrs)
        name = impl.filename(root) if group is not None else filename
        after = "r" if mode == "r" else "r+"
        self._handle = _Handle(impl, name, after, root)
        self._path: tuple[str, ...] = ()
        self._kwargs = kwargs
        self._batch_size = torch.Size(batch_size if batch_size is not None else ())
        self._device = None if device is None else torch.device(device)
        self._names = None
        self._is_locked = False
        self._check_batch()

    # ------------------------------------------------------------------ construction
    @classmethod
    def _at(cls, parent: PersistentTensorDict, path: tuple[str, ...], batch: Any) -> Self:
        sub = cls.__new__(cls)
        sub._handle, sub._path, sub._kwargs = parent._handle, path, parent._kwargs
        sub._batch_size, sub._device = torch.Size(batch), parent._device
        sub._names, sub._is_locked = None, parent._is_locked
        return sub

    @classmethod
    def from_h5(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Any = None,
    ) -> Self:
        """Open an HDF5 file; without ``batch_size`` it is the one recorded by
        ``from_dict``/``to_h5``, else the leading dims every dataset shares.

        >>> import tempfile, h5py, numpy as np
        >>> from tensordict import PersistentTensorDict
        >>> path = tempfile.mkdtemp() + "/f.h5"
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("a", data=np.zeros((4, 2)))
        ...     _ = f.create_dataset("b", data=np.zeros(4))
        >>> PersistentTensorDict.from_h5(path).batch_size
        torch.Size([4])
        """
        return cls._opened("from_h5", filename, mode, auto_batch_size, batch_dims, batch_size)

    @classmethod
    def from_zarr(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Any = None,
    ) -> Self:
        """Open a zarr store (a folder, or a ``zarr`` store object); the batch size as in
        ``from_h5``.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict, PersistentTensorDict
        >>> path = tempfile.mkdtemp() + "/s.zarr"
        >>> _ = TensorDict({"a": torch.zeros(5, 2)}, [5]).to_zarr(path)
        >>> PersistentTensorDict.from_zarr(path)["a"].shape
        torch.Size([5, 2])
        """
        return cls._opened("from_zarr", filename, mode, auto_batch_size, batch_dims, batch_size)

    @classmethod
    def _opened(
        cls,
        call: str,
        filename: Any,
        mode: str,
        auto_batch_size: bool,
        batch_dims: int | None,
        batch_size: Any,
    ) -> Self:
        if auto_batch_size and batch_size is not None:
            raise TypeError(f"{call}: pass batch_size or auto_batch_size=True, not both")
        out = cls.__new__(cls)  # a subclass (TensorDictStore) has its own constructor
        PersistentTensorDict.__init__(
            out, filename=filename, mode=mode, backend="h5" if call == "from_h5" else "zarr"
        )
        if batch_size is None:
            recorded = out._meta().get("batch_size")
            batch_size = recorded if recorded is not None else out._common_batch()
            if batch_dims is not None:
                batch_size = list(batch_size)[:batch_dims]
        out._batch_size = torch.Size(batch_size)
        out._check_batch()
        names = out._meta().get("names")
        if isinstance(names, list) and len(names) == len(out._batch_size):
            out._names = names
        return out

    @classmethod
    def from_dict(  # type: ignore[override]  # upstream: (input_dict, filename, ...)
        cls,
        input_dict: Any,
        filename: Any,
        *,
        auto_batch_size: bool = False,
        batch_size: Any = None,
        device: Any = None,
        backend: str = "h5",
        **kwargs: Any,
    ) -> Self:
        """Write a TensorDict (or a dict) to a new file or store and open it for reading
        and writing; ``kwargs`` go to ``h5py``'s ``create_dataset`` or zarr's
        ``create_array`` (``chunks=``, ``compression=``, ...).

        >>> import tempfile, torch
        >>> from tensordict import PersistentTensorDict
        >>> ptd = PersistentTensorDict.from_dict(
        ...     {"a": torch.arange(3)}, tempfile.mkdtemp() + "/f.h5", batch_size=[3]
        ... )
        >>> ptd["a"]
        tensor([0, 1, 2])
        >>> ptd.close()
        """
        from tensordict._td import TensorDict, is_tensor_collection

        if is_tensor_collection(input_dict):
            td = input_dict if batch_size is None else input_dict.clone(False)
            if batch_size is not None:
                td.batch_size = batch_size
        elif auto_batch_size:
            td = TensorDict.from_dict(dict(input_dict), auto_batch_size=True)
        else:
            td = TensorDict(dict(input_dict), batch_size=batch_size or [])
        attrs = {_ATTR: json.dumps(_meta_of(td))}
        out = cls.__new__(cls)
        PersistentTensorDict.__init__(
            out, filename=filename, mode="w", backend=backend, device=device, _attrs=attrs, **kwargs
        )
        out._batch_size = td.batch_size
        out._names = td._names if getattr(td, "_names", None) else None
        _write_tree(out._handle.backend, out._node(), td, kwargs)
        out._handle.backend.flush(out._handle.root)
        out._handle.meta.clear()
        out._handle.nodes.clear()
        return out

    # ------------------------------------------------------------------ storage access
    @property
    def filename(self) -> str:
        """The file (or store) this TensorDict reads."""
        return str(self._handle.filename)

    @property
    def file(self) -> Any:
        """The open h5py file or zarr group of this process."""
        return self._handle.get()

    def close(self) -> None:
        """Close this process's handle (a later access reopens it)."""
        if self._handle.root is not None:
            self._handle.backend.close(self._handle.root)
            self._handle.root = None

    def _node(self, path: tuple[str, ...] = ()) -> Any:
        node = self._handle.get()
        for part in (*self._path, *path):
            node = node[part]
        return node

    def _where(self, path: tuple[str, ...] = ()) -> str:
        return f"{self.filename!r}, key {'/'.join((*self._path, *path)) or '/'!r}"

    def _meta(self, path: tuple[str, ...] = ()) -> dict[str, Any]:
        """The attribute record of the group at ``path`` (cached per handle; every write
        through this library clears the cache)."""
        full = (*self._path, *path)
        cached = self._handle.meta.get(full)
        if cached is None:
            cached = _read_attr(self._handle.backend, self._node(path), self._where(path))
            self._handle.meta[full] = cached
        return cached

    def _write_meta(self, path: tuple[str, ...], update: dict[str, Any]) -> None:
        backend = self._handle.backend
        node = self._node(path)  # fetched afresh: a zarr group object caches its attributes
        doc = _read_attr(backend, node, self._where(path))
        doc.update(update)
        backend.set_attr(node, _ATTR, json.dumps(doc))
        self._handle.meta.clear()
        self._handle.nodes.clear()

    def _common_batch(self) -> list[int]:
        shapes: list[tuple[int, ...]] = []
        backend = self._handle.backend

        def walk(node: Any) -> None:
            for name in backend.names(node):
                child = backend.member(node, name)
                if backend.is_group(child):
                    walk(child)
                elif backend.is_array(child):
                    shapes.append(backend.shape(child))

        walk(self._node())
        if not shapes:
            return []
        common: list[int] = []
        for dims in zip(*shapes, strict=False):
            if len(set(dims)) != 1:
                break
            common.append(dims[0])
        return common[: min(len(s) for s in shapes)]

    def _check_batch(self) -> None:
        n = len(self._batch_size)
        for key in self.keys(True, True):
            path = (key,) if isinstance(key, str) else key
            shape = self._leaf_shape(path)
            if shape is not None and tuple(shape[:n]) != tuple(self._batch_size):
                raise ValueError(
                    f"PersistentTensorDict: {self._where(path)} has shape {tuple(shape)}, "
                    f"which does not start with batch_size {tuple(self._batch_size)}"
                )

    def _leaf_shape(self, path: tuple[str, ...]) -> tuple[int, ...] | None:
        backend = self._handle.backend
        parent = self._node(path[:-1])
        node = backend.member(parent, path[-1])
        return backend.shape(node) if backend.is_array(node) else None

    def _entry(self, path: tuple[str, ...]) -> Any:
        """The node at ``path`` (array or group), a non-tensor record, or None."""
        handle = self._handle
        known = handle.nodes.get((*self._path, *path)) if handle.root is not None else None
        if known is not None and handle.pid == os.getpid():
            return known
        node = self._find(path)
        if node is not None and not isinstance(node, dict):
            handle.nodes[(*self._path, *path)] = node
        return node

    def _find(self, path: tuple[str, ...]) -> Any:
        backend = self._handle.backend
        try:
            parent = self._node(path[:-1])
        except KeyError:
            return None
        if not backend.is_group(parent):
            return None
        node = backend.member(parent, path[-1])
        if node is None:
            record = _read_attr(backend, parent, self._where(path[:-1]))
            return record.get("non_tensor", {}).get(path[-1])
        if backend.is_group(node) or backend.is_array(node):
            return node
        raise FormatError(
            f"PersistentTensorDict: {self._where(path)} is a {type(node).__name__}, "
            "not a numeric array or a group"
        )

    def _sub(self, path: tuple[str, ...]) -> PersistentTensorDict:
        size = self._meta(path).get("batch_size")
        return type(self)._at(
            self, (*self._path, *path), self._batch_size if size is None else size
        )

    def _non_tensor(self, record: Any, path: tuple[str, ...], batch: Any) -> NonTensor:
        try:
            return from_record(record, batch, "PersistentTensorDict", self._where(path))
        except ValueError as err:
            raise FormatError(str(err)) from None

    # ------------------------------------------------------------------ entries
    def _names_here(self) -> list[str]:
        backend = self._handle.backend
        node = self._node()
        names: list[str] = list(backend.names(node))
        names += sorted(set(self._meta().get("non_tensor", {})) - set(names))
        return names

    def keys(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> list[Any]:
        """The keys, read from the file (nested ones as tuples with ``include_nested``)."""
        out: list[Any] = []
        backend = self._handle.backend
        here = self._node()
        rule = is_leaf
        for name in self._names_here():
            node = backend.member(here, name)
            if not backend.is_group(node):  # arrays, non-tensor records, refused nodes
                if leaves_only and node is None:  # a non-tensor record: a leaf on request
                    if rule is not None and rule(NonTensorData):
                        out.append(name)
                    continue
                out.append(name)
                continue
            if not leaves_only:
                out.append(name)
            if include_nested:
                for sub in self._sub((name,)).keys(True, leaves_only, is_leaf):
                    out.append((name, *((sub,) if isinstance(sub, str) else sub)))
        return out

    def values(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> Iterator[Any]:
        """The values (tensors read from the file), in the order of ``keys``."""
        return (self.get(k) for k in self.keys(include_nested, leaves_only, is_leaf))

    def items(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> Iterator[Any]:
        """``(key, value)`` pairs, in the order of ``keys``."""
        return ((k, self.get(k)) for k in self.keys(include_nested, leaves_only, is_leaf))

    def get(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """The entry at ``key``: a tensor read whole from the file, a nested
        PersistentTensorDict for a group, or ``default``."""
        path = key_path(key, self._call("get"))
        value = self._get_path_or_none(path)
        if value is None:
            if default is _NO_DEFAULT:
                raise KeyError(f"{self._call('get')}: key {key!r} is not in {self.filename!r}")
            return default
        return value

    def _get_path_or_none(self, path: tuple[str, ...]) -> Any:
        node = self._entry(path)
        if node is None:
            return None
        if isinstance(node, dict):
            return self._non_tensor(node, path, self._batch_size)
        if self._handle.backend.is_group(node):
            return self._sub(path)
        return self._tensor(self._handle.backend.read(node, ...))

    def _tensor(self, array: np.ndarray) -> Tensor:
        array = np.asarray(array)
        if not (array.flags.c_contiguous and array.flags.writeable):
            array = array.copy()  # (ascontiguousarray would turn a 0-d read into 1-d)
        tensor = torch.from_numpy(array)
        return tensor if self._device is None else tensor.to(self._device)

    def get_at(self, key: NestedKey, index: Any, default: Any = _NO_DEFAULT) -> Any:
        """``self.get(key)[index]``, reading only the indexed part of the dataset.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> ptd = TensorDict({"a": torch.arange(10)}, [10]).to_h5(tempfile.mkdtemp() + "/f.h5")
        >>> ptd.get_at("a", slice(2, 4))
        tensor([2, 3])
        >>> ptd.close()
        """
        path = key_path(key, self._call("get_at"))
        node = self._entry(path)
        if node is None or not self._handle.backend.is_array(node):
            value = self.get(key, default)
            return value if value is default else value[index]
        return self._read_rows(node, index)

    def _read_rows(self, node: Any, index: Any) -> Tensor:
        shape = self._handle.backend.shape(node)
        plan = _batch_index(index, torch.Size(shape))
        if plan is None:
            return self._tensor(self._handle.backend.read(node, ...))[index]
        return self._read_planned(node, plan, shape)

    def _read_planned(self, node: Any, plan: tuple[Any, ...], shape: tuple[int, ...]) -> Tensor:
        backend = self._handle.backend
        if plan and isinstance(plan[0], np.ndarray):
            rows = np.where(plan[0] < 0, plan[0] + shape[0], plan[0])
            if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
                raise IndexError(
                    f"{self._call('__getitem__')}: index out of range for {shape[0]} rows"
                )
            unique, inverse = np.unique(rows, return_inverse=True)
            if unique.size == 0:
                rest = np.empty(shape[1:], dtype=backend.dtype(node))[plan[1:]]
                return self._tensor(np.empty((0, *np.shape(rest)), dtype=backend.dtype(node)))
            data = backend.read(node, (unique, *plan[1:]))
            if unique.size != rows.size or not np.array_equal(unique, rows):
                data = data[inverse.reshape(-1)]  # back to the asked order (numpy: one copy)
            return self._tensor(data)
        return self._tensor(backend.read(node, plan))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) or (isinstance(key, tuple) and key and isinstance(key[0], str)):
            value = self.get(key)
            return value._public() if isinstance(value, NonTensor) else value
        return self._index(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, str) or (isinstance(key, tuple) and key and isinstance(key[0], str)):
            self.set(key, value)
        else:
            self._set_at_index(key, value)

    def __contains__(self, key: object) -> bool:
        try:
            path = key_path(key, "in")  # type: ignore[arg-type]
        except (TypeError, ValueError, KeyError):
            return False
        return self._entry(path) is not None

    # ------------------------------------------------------------------ writing
    def set(self, key: NestedKey, value: Any, inplace: bool = False) -> Self:
        """Write ``value`` to the file at ``key`` (a dataset, a group for a TensorDict,
        a JSON record for a non-tensor value)."""
        call = self._call("set")
        path = key_path(key, call)
        backend = self._handle.backend
        self._handle.meta.clear()
        self._handle.nodes.clear()
        parent = self._node()
        for part in path[:-1]:
            parent = backend.create_group(parent, part)
        name = path[-1]
        if isinstance(value, (dict, TensorDictBase)) and not is_non_tensor(value):
            from tensordict._td import TensorDict

            td = value if isinstance(value, TensorDictBase) else TensorDict(value, self._batch_size)
            self._check_shape(call, path, td.batch_size)
            backend.create_group(parent, name)
            sub = PersistentTensorDict._at(self, (*self._path, *path), td.batch_size)
            sub.update(td)
            self._write_meta(path, {"batch_size": list(td.batch_size)})
            return self
        if is_non_tensor(value) or not isinstance(value, (Tensor, np.ndarray, int, float)):
            record = _read_attr(backend, parent, self._where(path[:-1]))
            record.setdefault("non_tensor", {})[name] = _non_tensor_record(call, key, value)
            backend.set_attr(parent, _ATTR, json.dumps(record))
            return self
        tensor = torch.as_tensor(value)
        self._check_shape(call, path, tensor.shape)
        array = _as_numpy(call, key, tensor)
        existing = backend.member(parent, name)
        if inplace and existing is not None and backend.shape(existing) == array.shape:
            backend.write(existing, ..., array)
        else:
            backend.create_array(parent, name, array, self._kwargs)
        return self

    def _check_shape(self, call: str, path: tuple[str, ...], shape: Sequence[int]) -> None:
        n = len(self._batch_size)
        if tuple(shape[:n]) != tuple(self._batch_size):
            raise ValueError(
                f"{call}: shape {tuple(shape)} of key {'.'.join(path)!r} does not start with "
                f"batch_size {tuple(self._batch_size)}"
            )

    def set_(self, key: NestedKey, value: Any, *, non_blocking: bool = False) -> Self:
        """Copy ``value`` into the existing dataset ``key``."""
        path = key_path(key, self._call("set_"))
        node = self._entry(path)
        if node is None:
            raise KeyError(f"{self._call('set_')}: key {key!r} is not in {self.filename!r}")
        if isinstance(value, TensorDictBase):
            for sub, item in value.items(True, True, is_leaf=with_non_tensor):
                self.set_((*path, *((sub,) if isinstance(sub, str) else sub)), item)
            return self
        call = self._call("set_")
        tensor = torch.as_tensor(value)
        if not isinstance(node, dict):  # a dataset: the checks of TensorDict.set_, first
            n = len(self._batch_size)
            if tuple(tensor.shape[:n]) != tuple(self._batch_size):
                raise leaf_shape_error(call, key, tensor.shape, self._batch_size)
            check_copy_broadcast(tensor.shape, self._handle.backend.shape(node), key, call)
        array = _as_numpy(call, key, tensor)
        self._handle.backend.write(node, ..., array)
        return self

    def del_(self, key: NestedKey) -> Self:
        """Remove ``key`` from the file."""
        path = key_path(key, self._call("del_"))
        self._handle.meta.clear()
        self._handle.nodes.clear()
        node = self._entry(path)
        if node is None:
            raise KeyError(f"{self._call('del_')}: key {key!r} is not in {self.filename!r}")
        parent = self._node(path[:-1])
        if isinstance(node, dict):
            record = _read_attr(self._handle.backend, parent, self._where(path[:-1]))
            del record["non_tensor"][path[-1]]
            self._handle.backend.set_attr(parent, _ATTR, json.dumps(record))
        else:
            self._handle.backend.delete(parent, path[-1])
        self._handle.nodes.clear()  # (the lookup above cached the deleted node)
        return self

    def update(self, other: Any, inplace: bool = False) -> Self:
        """Write every entry of ``other``."""
        for key, value in other.items():
            self.set(key, value, inplace=inplace)
        return self

    def update_(self, other: Any) -> Self:
        """Copy every entry of ``other`` into the existing datasets."""
        for key, value in other.items():
            self.set_(key, value)
        return self

    def _set_at_index(self, index: Any, value: Any) -> None:
        backend = self._handle.backend
        plan = _batch_index(index, self._batch_size)
        for key in self.keys(True, True, is_leaf=with_non_tensor):
            path = (key,) if isinstance(key, str) else key
            node = self._entry(path)
            if isinstance(node, dict):
                continue
            item = value.get(key) if isinstance(value, TensorDictBase) else value
            array = _as_numpy(self._call("__setitem__"), key, torch.as_tensor(item))
            if plan is None:
                full = backend.read(node, ...)
                full[index] = array
                backend.write(node, ..., full)
            elif plan and isinstance(plan[0], np.ndarray):
                rows = np.where(plan[0] < 0, plan[0] + self._batch_size[0], plan[0])
                order = np.argsort(rows, kind="stable")
                if np.unique(rows).size != rows.size:
                    raise ValueError(f"{self._call('__setitem__')}: repeated rows in the index")
                if array.ndim and array.shape[0] == rows.size:
                    array = array[order]
                backend.write(node, (rows[order], *plan[1:]), array)
            else:
                backend.write(node, plan, array)

    def _memmap(self, call: str, prefix: Any, *args: Any, **kwargs: Any) -> Any:
        """The memmap family: the entries read into a TensorDict, which is then saved (a
        PersistentTensorDict's leaves live in its file: no in-place ``memmap_``)."""
        if kwargs.get("inplace"):
            raise RuntimeError(
                f"{call}: a PersistentTensorDict cannot be memory-mapped in place (its "
                "leaves live in its HDF5/zarr file); use memmap() for a memory-mapped copy"
            )
        return self.to_tensordict()._memmap(call, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ in memory
    def to_tensordict(self, *, retain_none: bool | None = None) -> DenseTensorDictBase:
        """Every entry read into an in-memory TensorDict.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> ptd = TensorDict({"a": torch.ones(2)}, [2]).to_h5(tempfile.mkdtemp() + "/f.h5")
        >>> type(ptd.to_tensordict()).__name__
        'TensorDict'
        >>> ptd.close()
        """
        from tensordict._td import TensorDict

        entries = {name: self._get_path_or_none((name,)) for name in self._names_here()}
        entries = {
            k: v.to_tensordict() if isinstance(v, PersistentTensorDict) else v
            for k, v in entries.items()
        }
        out = TensorDict(entries, batch_size=self._batch_size, device=self._device)
        if self._names is not None:
            out.names = self._names
        return out

    def _index(self, index: Any) -> Any:
        from tensordict._td import TensorDict

        plan = _batch_index(index, self._batch_size)
        if plan is None:
            return self.to_tensordict()[index]
        batch = torch.zeros(()).expand(self._batch_size)[index].shape
        entries: dict[str, Any] = {}
        for name in self._names_here():
            node = self._entry((name,))
            if isinstance(node, dict):
                entries[name] = self._non_tensor(node, (name,), self._batch_size)[index]
            elif self._handle.backend.is_group(node):
                entries[name] = self._sub((name,))._index(index)
            else:
                entries[name] = self._read_planned(node, plan, self._handle.backend.shape(node))
        return TensorDict(entries, batch_size=batch, device=self._device)

    def _as_dense(self, call: str) -> DenseTensorDictBase:
        return self.to_tensordict()

    def _tensor_leaves(self, out: list[Tensor]) -> list[Tensor]:
        return self.to_tensordict()._tensor_leaves(out)

    def _rebuild(self, leaves: Iterator[Tensor], check: str | None = None) -> Self:
        return self.to_tensordict()._rebuild(leaves, check)  # type: ignore[return-value]

    def _other_leaves(self, call: str, other: Any, extra_ok: bool = False) -> list[Tensor]:
        return self.to_tensordict()._other_leaves(call, other, extra_ok)

    def _per_member(self, fn: Callable[..., Any], *args: Any) -> Self:
        return fn(self.to_tensordict(), *args)  # type: ignore[no-any-return]

    def _apply_impl(
        self,
        fn: Callable[..., Any],
        others: tuple[Any, ...],
        key_fn: Callable[[tuple[str, ...]], Any] | None,
        batch_size: Any,
        device: Any,
        names: Any,
        inplace: bool,
        filter_empty: bool | None,
        call_on_nested: bool,
        default: Any = _NO_DEFAULT,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> Self:
        dense = self.to_tensordict()
        out = dense._apply_impl(
            fn,
            others,
            key_fn,
            batch_size,
            device,
            names,
            inplace,
            filter_empty,
            call_on_nested,
            default,
            is_leaf,
        )
        if inplace:
            self.update(dense, inplace=True)
            return self
        return out  # type: ignore[return-value]

    def _remap(
        self,
        call: str,
        fn: Callable[[Any], Any],
        new_bs: torch.Size,
        names: Any,
        nontensor: Callable[[Any], Any] | None = None,
    ) -> Self:
        return self.to_tensordict()._remap(call, fn, new_bs, names, nontensor)  # type: ignore[return-value]

    def _remap_many(
        self,
        call: str,
        fn: Callable[[Any], Sequence[Any]],
        new_bss: Sequence[torch.Size],
        names: Any,
    ) -> tuple[Self, ...]:
        return self.to_tensordict()._remap_many(call, fn, new_bss, names)  # type: ignore[return-value]

    def unbind(self, dim: int = 0) -> tuple[Self, ...]:
        """The slices along a batch dim, read from the file."""
        return self.to_tensordict().unbind(dim)  # type: ignore[return-value]

    def _stack_parts(self) -> tuple[int, list[Any]] | None:
        return None

    def is_contiguous(self) -> bool:
        """Never: the leaves are read from the file each time (as upstream)."""
        return False

    # ------------------------------------------------------------------ state
    @property
    def batch_size(self) -> torch.Size:
        """The leading shape every dataset shares."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        old = self._batch_size
        self._batch_size = torch.Size(value)
        try:
            self._check_batch()
        except ValueError:
            self._batch_size = old
            raise

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (recorded in the file's attributes)."""
        return list(self._names) if self._names is not None else [None] * self.batch_dims

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        names = None if value is None else list(value)
        if names is not None and len(names) != self.batch_dims:
            raise ValueError(
                f"PersistentTensorDict.names: got {len(names)} names {names} for "
                f"{self.batch_dims} batch dims {tuple(self._batch_size)}"
            )
        self._names = None if names is None or all(n is None for n in names) else names
        if self._handle.mode != "r":
            self._write_meta((), {"names": self._names})

    @property
    def is_locked(self) -> bool:
        """Whether keys may not change."""
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        """``td.is_locked = flag`` locks (``lock_()``) or unlocks (``unlock_()``)."""
        self.lock_() if value else self.unlock_()

    def lock_(self) -> Self:
        """Forbid adding or removing keys."""
        self._is_locked = True
        return self

    def unlock_(self) -> Self:
        """Allow keys to change."""
        self._is_locked = False
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        if self._handle.root is not None:  # the other process must see what was written
            self._handle.backend.flush(self._handle.root)
        state = (self._handle, self._path, self._batch_size, self._device, self._kwargs)
        return (_restore, (*state, type(self)))

    def __repr__(self) -> str:
        backend = self._handle.backend
        lines = []
        for name in sorted(self._names_here()):
            node = self._entry((name,))
            if isinstance(node, dict):
                lines.append(f"{name}: {self._non_tensor(node, (name,), self._batch_size)!r}")
            elif backend.is_group(node):
                sub = repr(self._sub((name,))).replace("\n", "\n        ")
                lines.append(f"{name}: {sub}")
            else:
                dtype = torch.from_numpy(np.empty(0, dtype=backend.dtype(node))).dtype
                shape = torch.Size(backend.shape(node))
                lines.append(
                    f"{name}: Tensor(shape={shape}, device=cpu, dtype={dtype}, is_shared=False)"
                )
        fields = ",\n        ".join(lines)
        return (
            f"{type(self).__name__}(\n    fields={{\n        {fields}}},\n"
            f"    batch_size={self._batch_size},\n    device={self._device},\n"
            "    is_shared=False)"
        )


def _restore(
    handle: _Handle,
    path: tuple[str, ...],
    batch: torch.Size,
    device: Any,
    kwargs: Any,
    cls: type[PersistentTensorDict] = PersistentTensorDict,
) -> PersistentTensorDict:
    sub = cls.__new__(cls)
    sub._handle, sub._path, sub._kwargs = handle, path, kwargs
    sub._batch_size, sub._device, sub._names, sub._is_locked = batch, device, None, False
    return sub


def _as_numpy(call: str, key: Any, tensor: Tensor) -> np.ndarray:
    if tensor.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        raise TypeError(
            f"{call}: entry {key!r} has dtype {tensor.dtype}, which the file format cannot "
            "hold; cast it first (for example td.float())"
        )
    return tensor.detach().cpu().contiguous().numpy()


def _non_tensor_record(call: str, key: Any, value: Any) -> dict[str, Any]:
    entry = value if isinstance(value, NonTensor) else NonTensorData(value)
    return to_record(entry, call, repr(key))


def _meta_of(td: Any) -> dict[str, Any]:
    """The attribute record of one level: its batch size and its non-tensor entries."""
    records = {
        str(k): _non_tensor_record("PersistentTensorDict.from_dict", k, v)
        for k, v in td.items()
        if is_non_tensor(v)
    }
    names = getattr(td, "_names", None)
    return {"batch_size": list(td.batch_size), "non_tensor": records, "names": names}


def _write_tree(backend: Any, group: Any, td: Any, kwargs: Any) -> None:
    """Write ``td`` under ``group``: each group created once with its final attributes."""
    for key, value in td.items():
        if is_non_tensor(value):
            continue
        if isinstance(value, Tensor):
            array = _as_numpy("PersistentTensorDict.from_dict", key, value)
            backend.create_array(group, str(key), array, kwargs)
        else:
            sub = backend.create_group(group, str(key), {_ATTR: json.dumps(_meta_of(value))})
            _write_tree(backend, sub, value, kwargs)
