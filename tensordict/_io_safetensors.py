"""safetensors files and Hub-style sharded checkpoints: validated headers, mapped leaves."""

from __future__ import annotations

import itertools
import json
import os
import struct
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._io_common import FormatError, require, write_atomically
from tensordict._nontensor import is_non_tensor
from tensordict._nontensor_json import from_record, to_record

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "C64": torch.complex64,
}
_MAX_HEADER = 100_000_000  # the limit safetensors itself applies
_META_KEY = "tensordict"  # our structure record inside ``__metadata__``
_INDEX_NAME = "model.safetensors.index.json"
_SINGLE_NAME = "model.safetensors"


class _Header:
    """One validated safetensors header: entries ``name -> (dtype, shape, begin, end)``
    (offsets from the start of the file), the string metadata and the file size."""

    __slots__ = ("entries", "metadata", "path", "size")

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise FormatError(f"from_safetensors: {path!r} is shorter than 8 bytes")
            (n,) = struct.unpack("<Q", head)
            if n > self.size - 8 or n > _MAX_HEADER:
                raise FormatError(
                    f"from_safetensors: {path!r} declares a header of {n} bytes, but the "
                    f"file has {self.size - 8} bytes after the length"
                )
            raw = f.read(n)
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise FormatError(f"from_safetensors: {path!r} has a header that is not JSON") from err
        if not isinstance(header, dict):
            raise FormatError(f"from_safetensors: {path!r} has a header that is not an object")
        meta = header.pop("__metadata__", None) or {}
        if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
        ):
            raise FormatError(f"from_safetensors: {path!r} has __metadata__ that is not str->str")
        self.metadata: dict[str, str] = meta
        start = 8 + n
        data_size = self.size - start
        self.entries: dict[str, tuple[torch.dtype, tuple[int, ...], int, int]] = {}
        spans: list[tuple[int, int, str]] = []
        for name, info in header.items():
            dtype, shape, begin, end = _entry(path, name, info, data_size)
            spans.append((begin, end, name))
            self.entries[name] = (dtype, shape, start + begin, start + end)
        spans.sort()
        for (_, prev_end, prev), (begin, end, name) in itertools.pairwise(spans):
            if begin < prev_end and end > begin:
                raise FormatError(
                    f"from_safetensors: {path!r}: tensor {name!r} overlaps tensor {prev!r}"
                )


def _entry(
    path: str, name: str, info: Any, data_size: int
) -> tuple[torch.dtype, tuple[int, ...], int, int]:
    where = f"from_safetensors: {path!r}, tensor {name!r}"
    if not isinstance(info, dict):
        raise FormatError(f"{where}: the entry is not an object")
    dtype = _DTYPES.get(info.get("dtype"))  # type: ignore[arg-type]
    if dtype is None:
        raise FormatError(f"{where}: unknown dtype {info.get('dtype')!r}")
    shape = info.get("shape")
    offsets = info.get("data_offsets")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise FormatError(f"{where}: shape {shape!r} is not a list of non-negative integers")
    if not (
        isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
    ):
        raise FormatError(f"{where}: data_offsets {offsets!r} is not a pair of integers")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise FormatError(
            f"{where}: data_offsets {offsets!r} lie outside the {data_size} data bytes"
        )
    numel = 1
    for d in shape:
        numel *= d
    expected = numel * dtype.itemsize
    if end - begin != expected:
        raise FormatError(
            f"{where}: shape {shape} of {info['dtype']} needs {expected} bytes, the offsets "
            f"span {end - begin}"
        )
    return dtype, tuple(shape), begin, end


def _map(header: _Header, names: list[str], lazy: bool) -> dict[str, Tensor]:
    """The tensors ``names`` of a validated file: views of one private (copy-on-write)
    mapping when ``lazy`` (nothing is read until used), else read into memory."""
    if lazy:
        buf = torch.from_file(header.path, shared=False, size=header.size, dtype=torch.uint8)
    else:
        with open(header.path, "rb") as f:
            buf = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    out: dict[str, Tensor] = {}
    for name in names:
        dtype, shape, begin, end = header.entries[name]
        if begin == end:
            out[name] = torch.empty(shape, dtype=dtype)
            continue
        raw = buf[begin:end]
        if begin % dtype.itemsize:  # unaligned in the file: one copy makes it viewable
            raw = raw.clone()
        out[name] = raw.view(dtype).view(shape)
    return out


def _is_within(folder: str, name: str, real_folder: str | None = None) -> bool:
    if os.path.isabs(name) or not name:
        return False
    real = os.path.realpath(os.path.join(folder, name))
    return real.startswith((real_folder or os.path.realpath(folder)) + os.sep)


def _resolve(path: str) -> tuple[str, bool]:
    """The file to open for ``path`` and whether it is a sharded index."""
    if os.path.isdir(path):
        for name, is_index in ((_INDEX_NAME, True), (_SINGLE_NAME, False)):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name), is_index
        found = sorted(n for n in os.listdir(path) if n.endswith(".safetensors.index.json"))
        if len(found) == 1:
            return os.path.join(path, found[0]), True
        found = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
        if len(found) == 1:
            return os.path.join(path, found[0]), False
        raise FileNotFoundError(
            f"from_safetensors: {path!r} holds no {_INDEX_NAME}, {_SINGLE_NAME} or single "
            f"*.safetensors file (found {found})"
        )
    return path, path.endswith(".json")


def _selected(names: list[str], prefix: str | None) -> dict[str, str]:
    """``stored name -> name in the result`` for the names under ``prefix``."""
    if prefix is None:
        return {n: n for n in names}
    lead = prefix + "."
    return {n: n[len(lead) :] for n in names if n.startswith(lead)}


def _index_shards(index: str) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """``shard path -> tensor names`` of a Hub-style ``*.safetensors.index.json``, and its
    ``metadata`` object."""
    try:
        with open(index, encoding="utf-8") as f:
            doc = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FormatError(f"from_safetensors: {index!r} is not a JSON index") from err
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict):
        raise FormatError(f"from_safetensors: {index!r} has no 'weight_map' object")
    folder = os.path.dirname(os.path.abspath(index))
    by_shard: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise FormatError(
                f"from_safetensors: {index!r} maps tensor {name!r} to {shard!r}, which is not "
                f"a file inside {folder!r}"
            )
        by_shard.setdefault(shard, []).append(name)
    shards: dict[str, list[str]] = {}
    real = os.path.realpath(folder)
    for shard, names in by_shard.items():  # each shard name checked once, not once per tensor
        if not _is_within(folder, shard, real):
            raise FormatError(
                f"from_safetensors: {index!r} maps tensor {names[0]!r} to {shard!r}, which is "
                f"not a file inside {folder!r}"
            )
        shards[os.path.join(folder, shard)] = names
    meta = doc.get("metadata")
    return shards, meta if isinstance(meta, dict) else {}


def read_safetensors(
    path: str | os.PathLike[str],
    *,
    device: Any = None,
    lazy: bool = True,
    prefix: str | None = None,
) -> TensorDictBase:
    """Open a safetensors file, a sharded index or a folder holding either (see
    ``TensorDictBase.from_safetensors``)."""
    target, is_index = _resolve(os.fspath(path))
    leaves: dict[str, Tensor] = {}
    metadata: dict[str, Any] = {}
    if is_index:
        shards, metadata = _index_shards(target)
        for shard, names in shards.items():
            wanted = _selected(names, prefix)
            if not wanted:
                continue  # a shard holding nothing asked for is never opened
            header = _Header(shard)
            lacking = sorted(set(wanted) - set(header.entries))
            if lacking:
                raise FormatError(
                    f"from_safetensors: {target!r} places tensors {lacking} in {shard!r}, "
                    "which does not hold them"
                )
            for name, tensor in _map(header, list(wanted), lazy).items():
                leaves[wanted[name]] = tensor
    else:
        header = _Header(target)
        metadata = header.metadata
        wanted = _selected(list(header.entries), prefix)
        for name, tensor in _map(header, list(wanted), lazy).items():
            leaves[wanted[name]] = tensor
    if prefix is not None and not leaves:
        raise KeyError(f"from_safetensors: no tensor of {target!r} is under prefix {prefix!r}")
    record = metadata.get(_META_KEY)
    structure = _structure(target, record if isinstance(record, str) else None)
    structure = structure if prefix is None else {}
    td = _assemble(target, leaves, structure)
    return td if device is None else td.to(device)


def _structure(path: str, raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as err:
        raise FormatError(f"from_safetensors: {path!r} has a malformed tensordict record") from err
    ok = (
        isinstance(doc, dict)
        and doc.get("version") == 1
        and isinstance(doc.get("batch_size", {}), dict)
        and isinstance(doc.get("non_tensor", {}), dict)
    )
    if not ok:
        raise FormatError(f"from_safetensors: {path!r} has an unsupported tensordict record")
    return doc  # type: ignore[no-any-return]


def _assemble(path: str, leaves: dict[str, Tensor], structure: dict[str, Any]) -> TensorDictBase:
    from tensordict._td import TensorDict  # the concrete class sits above this module

    tree: dict[str, Any] = {}
    values: dict[str, Any] = dict(leaves)
    for name, record in structure.get("non_tensor", {}).items():
        try:  # (a value broadcasts over its level's batch size)
            values[name] = from_record(record, [], f"from_safetensors: {path!r}", repr(name))
        except ValueError as err:
            raise FormatError(str(err)) from None
    for name, value in values.items():
        node = tree
        parts = name.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise FormatError(f"from_safetensors: {path!r}: {name!r} nests under a tensor")
            node = child
        if parts[-1] in node:
            raise FormatError(f"from_safetensors: {path!r}: {name!r} is a tensor and a prefix")
        node[parts[-1]] = value
    sizes: dict[str, Any] = structure.get("batch_size", {})

    def build(node: dict[str, Any], where: str) -> TensorDict:
        entries = {
            k: build(v, f"{where}{k}.") if isinstance(v, dict) else v for k, v in node.items()
        }
        size = sizes.get(where[:-1], [])
        try:
            return TensorDict(entries, batch_size=size)
        except (RuntimeError, ValueError, TypeError) as err:
            raise FormatError(
                f"from_safetensors: {path!r}: batch size {size} recorded for "
                f"{where[:-1] or 'the root'!r} does not fit its entries"
            ) from err

    return build(tree, "")


def _collect(td: Any, call: str) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """The flat ``name -> tensor`` dict safetensors stores, and our structure record."""
    tensors: dict[str, Tensor] = {}
    sizes: dict[str, list[int]] = {}
    non_tensor: dict[str, Any] = {}

    def walk(node: Any, where: str) -> None:
        if node.batch_size:
            sizes[where[:-1]] = list(node.batch_size)
        for key, value in node.items():
            name = f"{where}{key}"
            if name in tensors or name in non_tensor:
                raise ValueError(f"{call}: two entries are both stored under the name {name!r}")
            if isinstance(value, Tensor):
                tensors[name] = value
            elif is_non_tensor(value):
                non_tensor[name] = to_record(value, call, repr(name))
            else:
                walk(value, name + ".")

    walk(td, "")
    record: dict[str, Any] = {}
    if sizes or non_tensor:
        record = {"version": 1, "batch_size": sizes, "non_tensor": non_tensor}
    return tensors, record


def _unshared(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Contiguous CPU tensors, overlapping ones (tied weights) copied: safetensors refuses
    to store two names over the same bytes."""
    out: dict[str, Tensor] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    for name, tensor in tensors.items():
        t = tensor.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        if type(t) is not Tensor:
            t = t.as_subclass(Tensor)
        if t.numel():
            key = t.untyped_storage().data_ptr()
            start = t.data_ptr()
            stop = start + t.numel() * t.element_size()
            taken = spans.setdefault(key, [])
            if any(start < b and a < stop for a, b in taken):
                t = t.clone()
            else:
                taken.append((start, stop))
        out[name] = t
    return out


def _parse_size(call: str, size: int | str) -> int:
    if isinstance(size, int):
        value = size
    else:
        units = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
        text = size.strip().upper()
        unit = next((u for u in sorted(units, key=len, reverse=True) if text.endswith(u)), "")
        try:
            value = int(float(text[: len(text) - len(unit)]) * units.get(unit, 1))
        except ValueError:
            value = 0
    if value <= 0:
        raise ValueError(f"{call}: max_shard_size {size!r} is not a positive size (like '5GB')")
    return value


def write_safetensors(
    td: Any,
    path: str | os.PathLike[str],
    metadata: dict[str, str] | None,
    call: str,
    max_shard_size: int | str | None = None,
) -> None:
    """Write ``td`` as one safetensors file, or as a Hub-style sharded checkpoint in the
    folder ``path`` when ``max_shard_size`` is given; every file atomically."""
    st = require("safetensors.torch", "safetensors", call)
    tensors, record = _collect(td, call)
    meta = dict(metadata or {})
    if _META_KEY in meta:
        raise ValueError(f"{call}: metadata key {_META_KEY!r} is reserved for the structure")
    ready = _unshared(tensors)
    if max_shard_size is None:
        if record:
            meta[_META_KEY] = json.dumps(record, sort_keys=True)
        write_atomically(path, lambda tmp: st.save_file(ready, tmp, metadata=meta or None))
        return
    limit = _parse_size(call, max_shard_size)
    groups: list[dict[str, Tensor]] = [{}]
    used = 0
    for name, tensor in ready.items():
        size = tensor.numel() * tensor.element_size()
        if groups[-1] and used + size > limit:
            groups.append({})
            used = 0
        groups[-1][name] = tensor
        used += size
    folder = os.fspath(path)
    os.makedirs(folder, exist_ok=True)
    weight_map: dict[str, str] = {}
    n = len(groups)
    for i, group in enumerate(groups):
        shard = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        shard_meta = {**meta, "format": "pt"}
        write_atomically(
            os.path.join(folder, shard),
            lambda tmp, g=group, m=shard_meta: st.save_file(g, tmp, metadata=m),  # type: ignore[misc]
        )
        weight_map.update(dict.fromkeys(group, shard))
    total = sum(t.numel() * t.element_size() for t in ready.values())
    index_meta: dict[str, Any] = {"total_size": total}
    if record:
        index_meta[_META_KEY] = json.dumps(record, sort_keys=True)
    doc = {"metadata": index_meta, "weight_map": weight_map}

    def write_index(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)

    write_atomically(os.path.join(folder, _INDEX_NAME), write_index)
