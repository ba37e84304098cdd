"""Writing checkpoints (docs/format.md): staging folder, leaf files, atomic commit."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from torch import Tensor

from tensordict import _memmap_nested as nested
from tensordict._format import (
    DTYPE_NAMES,
    FORMAT,
    META,
    VERSION,
    encode_name,
    is_json_value,
    type_name,
)
from tensordict._keys import join_path
from tensordict._memmap import MemoryMappedTensor, rename_files
from tensordict._memmap_backing import MemmapExistsError
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._nontensor_class import UnnamedClass, class_tag
from tensordict._progress import progress_bar
from tensordict._torch_compat import nested_sizes

Job = tuple[Tensor, str, dict[str, Any]]
_AUTO_THREADS_BYTES = 16 << 20


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def raw_bytes(tensor: Tensor) -> Tensor:
    """``tensor``'s elements in C order as a flat uint8 tensor, for every plain dtype
    (dtypes few kernels support, such as ``complex32`` or ``uint3``, go through the
    integer dtype of their item size, which every kernel supports)."""
    if not tensor.is_contiguous():
        same = _SAME_SIZE_INT.get(tensor.dtype.itemsize)
        tensor = (tensor if same is None else tensor.view(same)).contiguous()
    return tensor.reshape(-1).view(torch.uint8)


class _Writer:
    def __init__(self, call: str, like: bool, allow_pickle: bool | None, checksum: bool) -> None:
        self.call = call
        self.like = like
        self.allow_pickle = allow_pickle
        self.checksum = checksum
        self.jobs: list[Job] = []
        self.metas: list[tuple[str, dict[str, Any]]] = []

    def write_metas(self) -> None:
        """Write every meta.json, after the leaves (so optional checksums are in them);
        each describes its whole subtree (version 2: nested metas are inline)."""
        for path, meta in self.metas:
            text = json.dumps(meta)  # (one shot: json.dump would take the pure-Python encoder)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)

    def folder(self, td: Any, folder: str, prefix: tuple[str, ...]) -> dict[str, Any]:
        """Write ``td``'s folder (meta.json now, leaves later as jobs); returns the meta."""
        if -1 in td.batch_size and td._stack_parts() is None:  # (a lazy stack's is kept)
            at = f"key {join_path(prefix)!r}" if prefix else "the root"
            raise NotImplementedError(
                f"{self.call}: {at} has a ragged batch dim (-1 in batch_size "
                f"{tuple(td.batch_size)}, from nested tensor leaves), which the format has no "
                "place for; pad it first (to_padded_tensor())"
            )
        os.makedirs(folder)
        meta: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "type": type_name(type(td)),
            "batch_size": list(td.batch_size),
            "shape": list(td.batch_size),  # upstream's name for it, read by its tools
            "device": "cpu" if td.device is None else str(td.device),  # (leaves are files)
            "names": None,
            "entries": {},
        }
        parts = td._stack_parts()
        if parts is not None:
            meta["stack_dim"] = parts[0]
            names = td.names  # (kept when the stack dim has a name: the others are the members')
            meta["names"] = names if names[parts[0]] is not None else None
            meta["members"] = [
                self.folder(member, os.path.join(folder, str(i)), (*prefix, str(i)))
                for i, member in enumerate(parts[1])
            ]
        else:
            meta["names"] = td._names
            taken: set[str] = set()
            entries = meta["entries"]
            for key, value in td._tensordict.items():
                entries[key] = self.entry(key, value, folder, taken, (*prefix, key))
        self.metas.append((os.path.join(folder, META), meta))  # written after the leaves
        return meta

    def entry(
        self, key: str, value: Any, folder: str, taken: set[str], path: tuple[str, ...]
    ) -> dict[str, Any]:
        if isinstance(value, Tensor):
            if value.dtype not in DTYPE_NAMES or value.is_quantized:
                raise TypeError(
                    f"{self.call}: key {path!r} has dtype {value.dtype}, which has no on-disk "
                    "name (quantized tensors carry a scale beside their bytes)"
                )
            if value.is_nested:  # (a jagged one has no element shapes to store)
                nested.refuse_jagged(f"{self.call}({path!r})", value)
            if value.layout is not torch.strided or (value.is_meta and not self.like):
                what = "on the meta device" if value.is_meta else f"of layout {value.layout}"
                raise TypeError(
                    f"{self.call}: key {path!r} is a tensor {what}, which has no element bytes "
                    "to write; a checkpoint holds strided tensors with data (to_dense() a "
                    "sparse one)"
                )
            name = encode_name(key, ".memmap", taken)
            if value.is_nested:  # a ragged leaf: one row of sizes per element
                record = {
                    "kind": "nested",
                    "file": name,
                    "dtype": DTYPE_NAMES[value.dtype],
                    "shapes": nested_sizes(value).tolist(),
                }
            else:
                record = {
                    "kind": "tensor",
                    "file": name,
                    "dtype": DTYPE_NAMES[value.dtype],
                    "shape": list(value.shape),
                }
            self.jobs.append((value, os.path.join(folder, name), record))
            return record
        if isinstance(value, NonTensorData):
            if is_json_value(value.data):
                try:
                    tag = class_tag(value)
                except UnnamedClass:  # (a class only pickle keeps)
                    return self.pickled(key, value, folder, taken, path)
                if tag is None:
                    return {"kind": "json", "value": value.data}
                return {"kind": "json", "value": value.data, "class": tag}
            return self.pickled(key, value, folder, taken, path)
        if isinstance(value, NonTensorStack):
            if is_json_value(value.values):
                return {
                    "kind": "json_stack",
                    "values": value.values,
                    "positions": value.positions.tolist(),
                }
            return self.pickled(key, value, folder, taken, path)
        name = encode_name(key, "", taken)
        sub = self.folder(value, os.path.join(folder, name), path)
        return {"kind": "collection", "dir": name, "meta": sub}

    def pickled(
        self, key: str, value: NonTensor, folder: str, taken: set[str], path: tuple[str, ...]
    ) -> dict[str, Any]:
        if self.allow_pickle is False:  # (None, the default: the format's fallback)
            raise TypeError(
                f"{self.call}: key {path!r} holds non-JSON data ({type(value.tolist()).__name__}); "
                "allow_pickle=False refuses to store it with pickle (the default stores it in "
                "a file of its own; loading it needs allow_pickle=True)"
            )
        name = encode_name(key, ".pkl", taken)
        torch.save(value, os.path.join(folder, name))
        return {"kind": "pickle", "file": name}

    def run(self, num_threads: int, bar: Any = None) -> list[MemoryMappedTensor]:
        """Write every leaf file (on ``num_threads`` threads); worker errors are raised.
        ``bar``, a progress bar, advances by one per file written."""

        def write(job: Job) -> MemoryMappedTensor:
            out = write_one(job)
            if bar is not None:
                bar.update(1)
            return out

        def write_one(job: Job) -> MemoryMappedTensor:
            tensor, path, record = job
            tensor = tensor.detach()
            if tensor.is_conj() or tensor.is_neg():  # (a lazy view: write its values)
                tensor = tensor.resolve_conj().resolve_neg()
            if tensor.is_nested:  # (copied into the new file, even from another mapping)
                tensor = tensor.as_subclass(Tensor)
            if self.like or tensor.device.type != "cpu" or tensor.is_nested or not tensor.numel():
                out = MemoryMappedTensor.from_tensor(tensor, filename=path, copy_data=not self.like)
            else:
                # a plain sequential write beats copying into fresh mapped pages
                data = raw_bytes(tensor).numpy()
                with open(path, "wb") as handle:
                    handle.write(data.data)
                out = MemoryMappedTensor._from_checked_file(path, tensor.dtype, tensor.shape)
            if self.checksum:
                record["sha256"] = file_sha256(path)
            return out

        if num_threads < 0:  # automatic: threads pay off only for large checkpoints
            total = sum(job[0].numel() * job[0].element_size() for job in self.jobs)
            num_threads = min(os.cpu_count() or 1, 8) if total >= _AUTO_THREADS_BYTES else 1
        if num_threads <= 1 or len(self.jobs) <= 1:
            return [write(job) for job in self.jobs]
        with ThreadPoolExecutor(max_workers=num_threads) as pool:
            return list(pool.map(write, self.jobs))


def file_sha256(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_tree(root: str) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                os.fsync(handle.fileno())
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save(
    td: Any,
    prefix: str,
    *,
    call: str,
    like: bool = False,
    num_threads: int = 0,
    durable: bool = False,
    checksum: bool = False,
    allow_pickle: bool | None = None,
    on_leaves: Callable[[list[tuple[Tensor, MemoryMappedTensor]]], None] | None = None,
    pbar: bool = False,
) -> dict[str, Any]:
    """Write ``td`` as a checkpoint at ``prefix`` and commit it atomically (spec section 7);
    ``pbar`` shows a progress bar advancing per leaf file. Returns the root's metadata."""
    target = os.path.abspath(os.fspath(prefix))
    _check_replaceable(target, call)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    token = uuid.uuid4().hex[:12]
    staging = f"{target}.{token}.partial"
    writer = _Writer(call, like, allow_pickle, checksum)
    try:
        meta = writer.folder(td, staging, ())
        bar = progress_bar(call, len(writer.jobs), unit="leaf") if pbar else None
        try:
            leaves = writer.run(num_threads, bar)
        finally:
            if bar is not None:
                bar.close()
        writer.write_metas()
        if durable:
            _fsync_tree(staging)
        _commit(staging, target, token)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    rename_files(staging, target)
    if on_leaves is not None:
        on_leaves([(job[0], leaf) for job, leaf in zip(writer.jobs, leaves, strict=True)])
    return meta


def _check_replaceable(target: str, call: str) -> None:
    """Only an empty folder or a checkpoint may be replaced: never a folder of other files."""
    if not os.path.lexists(target):
        return
    if os.path.islink(target) or not os.path.isdir(target):
        raise MemmapExistsError(f"{call}: {target!r} exists and is not a folder")
    names = os.listdir(target)
    if names and not os.path.isfile(os.path.join(target, META)):
        links = [n for n in names if os.path.islink(os.path.join(target, n))]
        why = (
            f" (a nested TensorDict through symlink {links[0]!r} would be written outside it)"
            if links
            else ""
        )
        raise MemmapExistsError(
            f"{call}: {target!r} holds files and is not a checkpoint{why}; refusing to replace it"
        )


def _commit(staging: str, target: str, token: str) -> None:
    if not os.path.lexists(target):
        os.rename(staging, target)
        return
    old = f"{target}.{token}.old"
    os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)
