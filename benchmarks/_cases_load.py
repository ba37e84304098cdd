"""Floor rows under the checkpoint loads (issue 15): the same syscalls and torch calls
as a load, written bare (no validation logic, no TensorDict), against the same baselines."""

from __future__ import annotations

import json
import mmap
import os
import struct
import zipfile

import torch

from benchmarks._cases_checkpoint import _safetensors_file, _saved
from benchmarks._cases_checkpoint_v2 import _archive
from benchmarks._harness import Case, Fn


def load_floor() -> tuple[Fn, Fn]:
    """A folder load's work alone: the stat before and after, the one metadata read and
    parse, an ``lstat`` per sub-folder and per leaf, one ``torch.from_file`` and a view
    per leaf (sizes unpacked: the cheapest form); the tensors are freed (unmapped) inside
    the timing, as the row's are."""
    from safetensors.torch import load_file

    folder, st = _saved(), _safetensors_file()
    meta_path = os.path.join(folder, "meta.json")

    def floor() -> list[torch.Tensor]:
        os.stat(folder)
        with open(meta_path, "rb") as handle:
            meta = json.loads(handle.read())
        out = []
        for record in meta["entries"].values():
            sub = folder + "/" + record["dir"]
            os.lstat(sub)
            for leaf in record["meta"]["entries"].values():
                path = sub + "/" + leaf["file"]
                os.lstat(path)
                shape = leaf["shape"]
                numel = 1
                for dim in shape:
                    numel *= dim
                out.append(torch.from_file(path, True, numel, dtype=torch.float32).view(*shape))
        os.stat(folder)
        return out

    return floor, (lambda: load_file(st))


def archive_one_floor() -> tuple[Fn, Fn]:
    """A sub-folder load from the archive, its work alone: the failed stat of the
    sub-path, the archive's open and fstat, one read of its end (record and directory),
    the metadata member's read and parse, the two leaves' local-header reads, one
    copy-on-write map of the file and two views; unmapped inside the timing."""
    from safetensors import safe_open

    archive, st = _archive(), _safetensors_file()
    size = os.path.getsize(archive)
    with open(archive, "rb") as handle:  # (where the members are: found once, outside)
        infos = {i.filename: i.header_offset for i in zipfile.ZipFile(handle).infolist()}
    wanted = [("0/weight.memmap", (2000, 2000)), ("0/bias.memmap", (2000,))]
    meta_at = infos["0/meta.json"]
    local = struct.Struct("<4s5H3I2H")

    def floor() -> list[torch.Tensor]:
        try:  # noqa: SIM105 (as the loader does: cheaper than contextlib.suppress)
            os.stat(archive + "/0")
        except OSError:
            pass
        fd = os.open(archive, os.O_RDONLY)
        try:
            os.fstat(fd)
            os.pread(fd, min(size, 16 << 10), size - min(size, 16 << 10))
            head = os.pread(fd, 4096, meta_at)
            fixed = local.unpack_from(head)
            start = local.size + fixed[9] + fixed[10]
            json.loads(head[start : start + fixed[8]])
            spans = []
            for name, shape in wanted:
                fixed = local.unpack(os.pread(fd, local.size, infos[name]))
                spans.append((infos[name] + local.size + fixed[9] + fixed[10], shape))
            base = torch.frombuffer(mmap.mmap(fd, size, access=mmap.ACCESS_COPY), dtype=torch.uint8)
        finally:
            os.close(fd)
        flat = torch.empty(0, dtype=torch.uint8).view(torch.float32)
        flat = flat.set_(base.untyped_storage(), 0, (size // 4,), (1,))
        return [
            flat.as_strided(shape, (shape[-1], 1)[-len(shape) :], offset // 4)
            for offset, shape in spans
        ]

    def base() -> dict[str, torch.Tensor]:
        with safe_open(st, framework="pt") as handle:
            return {k: handle.get_tensor(k) for k in ("0.weight", "0.bias")}

    return floor, base


CASES = [
    Case(
        "floor of load_memmap: 50 leaves lstat'ed and mapped by torch, no TensorDict",
        "safetensors load_file",
        None,
        load_floor,
        rounds=7,
    ),
    Case(
        'floor of load_memmap("x.tdz", subpath="0"): its reads and one map, bare',
        "safetensors safe_open, those keys",
        None,
        archive_one_floor,
    ),
]
