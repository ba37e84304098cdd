"""Read a folder written by upstream tensordict's ``memmap`` (its own layout, no ``format``
member): validated like ours, nothing imported, pickled data only with ``allow_pickle``."""

from __future__ import annotations

import json
import math
import os
import pickle
import stat
from typing import Any

import torch

from tensordict import _memmap_nested as nested
from tensordict._format import DTYPES, META, FormatError, check_link, checked_name, lookup_type
from tensordict._memmap import MemoryMappedTensor, _map_file

# the members of an upstream meta.json that describe the folder, not an entry
_OWN = frozenset(
    {"shape", "device", "_type", "_class", "_format_version", "names", "stack_dim"}
    | {"stack_dim_name", "_is_non_tensor", "_metadata", "data", "_names"}
)
_UNSAFE = frozenset('/<>:"|?*\\ \0%') | {chr(i) for i in range(32)} | {chr(127)}
_MAX_DEPTH = 100


def _lead(value: Any, n: int) -> list[int] | None:
    """The first ``n`` sizes of an entry (a nested tensor's regular ones), None where it
    has fewer or a ragged one among them."""
    if hasattr(value, "batch_size"):
        return list(value.batch_size[:n])
    if not value.is_nested:
        return list(value.shape[:n])
    try:
        return [value.size(dim) for dim in range(n)]
    except (RuntimeError, IndexError):
        return None


def is_upstream(folder: str) -> bool:
    """Whether ``folder`` holds a meta.json in upstream's layout (no ``format`` member)."""
    try:
        meta = _read(folder, "")
    except (OSError, FormatError):
        return False
    return "format" not in meta and isinstance(meta.get("_type"), str)


def _read(folder: str, call: str) -> dict[str, Any]:
    """``folder``'s meta.json as a JSON object: a regular file (opened without blocking,
    so a FIFO swapped in is refused rather than waited on)."""
    path = os.path.join(folder, META)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FormatError(f"{call}: {path!r} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            text = handle.read()
    finally:
        os.close(fd)
    try:
        meta = json.loads(text.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FormatError(f"{call}: {path!r} is not valid JSON: {err}") from None
    if not isinstance(meta, dict):
        raise FormatError(f"{call}: {path!r} does not hold a JSON object")
    return meta


def _refuse_constant(name: str) -> Any:
    raise FormatError(f"{name} is not JSON")


def _encode(key: str) -> str:
    """Upstream's file name for ``key`` (its percent-encoding of unsafe characters)."""
    if key in ("", ".", ".."):
        return "%" if not key else "%2E" * len(key)
    return "".join(f"%{ord(c):02X}" if c in _UNSAFE else c for c in key)


class _UpstreamReader:
    """One load of an upstream folder (see the module docstring)."""

    def __init__(self, call: str, allow_pickle: bool | None, mode: str | None) -> None:
        self.call = call
        self.allow_pickle = allow_pickle
        self.mode = mode
        self.seen: set[tuple[int, int]] = set()

    def child(self, folder: str, key: str, suffix: str = "") -> str:
        """The path of ``key``'s file or folder: upstream's encoded name, else the key."""
        for name in dict.fromkeys((_encode(key) + suffix, key + suffix)):
            if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
                continue
            path = checked_name(folder, name, self.call, key, "entry")
            if os.path.lexists(path):
                if os.path.islink(path):
                    check_link(folder, path, self.call, key, "entry")
                return path
        raise FormatError(f"{self.call}: entry {key!r} of {folder!r} has no file or folder")

    def collection(self, folder: str, depth: int = 0, batch: list[int] | None = None) -> Any:
        """The collection saved in ``folder``; ``batch``: its parent's batch size (a
        non-tensor value, saved without one, takes it)."""
        if depth > _MAX_DEPTH:
            raise FormatError(f"{self.call}: {folder!r} is nested more than {_MAX_DEPTH} deep")
        info = os.stat(folder)
        if (info.st_dev, info.st_ino) in self.seen:
            raise FormatError(f"{self.call}: {folder!r} is reached twice; a checkpoint is a tree")
        self.seen.add((info.st_dev, info.st_ino))
        meta = _read(folder, self.call)
        kind = meta.get("_type")
        if not isinstance(kind, str):
            raise FormatError(f"{self.call}: {folder!r}'s meta.json has no '_type'")
        name = kind.removeprefix("<class '").removesuffix("'>").rpartition(".")[2]
        if name == "LazyStackedTensorDict":
            return self.stack(folder, meta, depth)
        if name in ("NonTensorData", "NonTensorStack", "MetaData"):
            return self.non_tensor(folder, meta, name, batch or [])
        if name != "TensorDict":  # a tensorclass: its entries are under _tensordict/
            cls = _tensorclass(kind.removeprefix("<class '").removesuffix("'>"), self.call, folder)
            inner = self.collection(checked_name(folder, "_tensordict", self.call, "", ""), depth)
            return cls.from_tensordict(inner)  # type: ignore[attr-defined]
        return self.dense(folder, meta, depth)

    def dense(self, folder: str, meta: dict[str, Any], depth: int) -> Any:
        from tensordict._td import TensorDict

        batch = _shape(meta.get("shape"), self.call, folder, "shape")
        entries: dict[str, Any] = {}
        for key, record in meta.items():
            if key in _OWN:
                continue
            if not isinstance(record, dict):
                raise FormatError(f"{self.call}: entry {key!r} of {folder!r} is not an object")
            if "dtype" in record:
                entries[key] = self.tensor(folder, key, record)
            else:
                entries[key] = self.collection(self.child(folder, key), depth + 1, batch)
        for key, value in entries.items():  # (a lazy stack is kept as it is: no constructor)
            if _lead(value, len(batch)) != batch:
                raise FormatError(
                    f"{self.call}: entry {key!r} of {folder!r} has leading dims "
                    f"{_lead(value, len(batch))}, which are not the batch size {batch}"
                )
        names = meta.get("_names", meta.get("names"))
        if not (
            isinstance(names, list)
            and len(names) == len(batch)
            and all(n is None or isinstance(n, str) for n in names)
        ):
            names = None
        device = None if meta.get("device") is None else torch.device("cpu")
        return TensorDict._new_unsafe(entries, torch.Size(batch), device, names)

    def tensor(self, folder: str, key: str, record: dict[str, Any]) -> Any:
        name = record.get("dtype")
        dtype = DTYPES.get(name.removeprefix("torch.")) if isinstance(name, str) else None
        if dtype is None:
            raise FormatError(f"{self.call}: entry {key!r} of {folder!r}: dtype {name!r}")
        shape = _shape(record.get("shape"), self.call, folder, key)
        shapes = None
        if record.get("is_nested"):  # upstream: the element shapes in "<key>.shape.memmap"
            shapes = self.element_shapes(folder, key, shape)
            shape = [nested.numel(shapes)]
        size = math.prod(shape) * dtype.itemsize
        if size == 0:  # (upstream writes no file for an empty tensor)
            return torch.empty(shape, dtype=dtype)
        path = self.child(folder, key, ".memmap")
        writable = self.mode != "r" and os.access(path, os.W_OK)
        if self.mode == "r+" and not writable:
            raise PermissionError(f"{self.call}: mode='r+' needs {path!r} to be writable")
        out = MemoryMappedTensor._wrap(
            _map_file(self.leaf_file(path, key, size), dtype, torch.Size(shape), False, writable)
        )
        return out if shapes is None else MemoryMappedTensor._nested(out, shapes)

    def leaf_file(self, path: str, key: str, size: int) -> str:
        """``path``, checked to be a regular file of at least ``size`` bytes: upstream maps
        the first bytes of a longer file (as ``numpy.memmap`` does), and so do we here."""
        if not os.path.isfile(path) or os.path.getsize(path) < size:
            raise FormatError(
                f"{self.call}: leaf file {path!r} of key {key!r} does not hold {size} bytes"
            )
        return path

    def element_shapes(self, folder: str, key: str, shape: list[int]) -> torch.Tensor:
        """The element shapes of upstream's nested leaf ``key``: an int64 tensor of
        ``shape`` (one row per element) in its ``<key>.shape.memmap`` file."""
        if len(shape) != 2 or not shape[0]:
            raise FormatError(
                f"{self.call}: nested entry {key!r} of {folder!r} has element shapes of "
                f"shape {shape}; expected one row per element, at least one"
            )
        path = self.child(folder, key, ".shape.memmap")
        count = math.prod(shape)
        self.leaf_file(path, key, count * 8)
        with open(path, "rb") as handle:
            raw = handle.read(count * 8)
        shapes = torch.frombuffer(bytearray(raw), dtype=torch.int64).view(shape)
        if int(shapes.min()) < 0 or int(shapes.prod(dim=1).sum()) >= 1 << 62:
            raise FormatError(
                f"{self.call}: nested entry {key!r} of {folder!r} has invalid element "
                f"shapes {shapes.tolist()}"
            )
        return shapes

    def non_tensor(self, folder: str, meta: dict[str, Any], name: str, batch: list[int]) -> Any:
        from tensordict._nontensor import MetaData, NonTensorData, NonTensorStack

        if "data" in meta:
            data = meta["data"]
        else:
            pickled = os.path.join(folder, "other.pickle")
            if not os.path.isfile(pickled):
                raise FormatError(f"{self.call}: {folder!r} holds no non-tensor value")
            if self.allow_pickle is not True:
                from tensordict._format import PickleRefusedError

                raise PickleRefusedError(
                    f"{self.call}: {pickled!r} is pickled data; pass allow_pickle=True to "
                    "unpickle it (only for files you trust)"
                )
            with open(pickled, "rb") as handle:
                data = pickle.load(handle)  # (the caller opted in)
            if isinstance(data, dict) and "data" in data:  # (upstream pickles its fields)
                data = data["data"]
        if name == "NonTensorStack":
            if not isinstance(data, list):
                raise FormatError(f"{self.call}: {folder!r}: a stack's data must be a list")
            return NonTensorStack.from_list(data)
        return (MetaData if name == "MetaData" else NonTensorData)(data, batch_size=batch)

    def stack(self, folder: str, meta: dict[str, Any], depth: int) -> Any:
        from tensordict._lazy import LazyStackedTensorDict

        dim = meta.get("stack_dim", 0)
        if type(dim) is not int:
            raise FormatError(f"{self.call}: {folder!r}: stack_dim must be an int, got {dim!r}")
        members: list[Any] = []
        while os.path.isdir(os.path.join(folder, str(len(members)))):
            path = checked_name(folder, str(len(members)), self.call, "", "member")
            members.append(self.collection(path, depth + 1))
        name = meta.get("stack_dim_name")
        try:
            return LazyStackedTensorDict(
                *members, stack_dim=dim, stack_dim_name=name if isinstance(name, str) else None
            )
        except ValueError as err:
            raise FormatError(f"{self.call}: {folder!r}: {err}") from None


def _tensorclass(path: str, call: str, folder: str) -> type:
    """The registered tensorclass upstream named by its import path (never imported: the
    process defines or imports it first), matched on module and qualified name, else on
    the class name alone."""
    from tensordict._format import _TYPES

    known = [c for n, c in _TYPES.items() if n.startswith("tensorclass:")]
    for match in (
        lambda c: f"{c.__module__}.{c.__qualname__}" == path,
        lambda c: c.__qualname__.rpartition(".")[2] == path.rpartition(".")[2],
    ):
        found = [c for c in known if match(c)]
        if len(found) == 1:
            return found[0]
    return lookup_type(path, call, folder)  # (raises, naming the registered ones)


def _shape(value: Any, call: str, folder: str, key: str) -> list[int]:
    if not isinstance(value, list) or not all(type(n) is int and n >= 0 for n in value):
        raise FormatError(f"{call}: {key!r} in {folder!r}: a shape must be a list of ints >= 0")
    if math.prod(max(n, 1) for n in value) > 2**62:
        raise FormatError(f"{call}: {key!r} in {folder!r}: shape {value} is too large")
    return value


def load_upstream(folder: str, call: str, allow_pickle: bool | None, mode: str | None) -> Any:
    """The collection saved in ``folder`` by upstream tensordict (see the module docstring)."""
    return _UpstreamReader(call, allow_pickle, mode).collection(os.path.abspath(folder))
