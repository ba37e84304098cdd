"""Cases for TensorDict.map (issue 7): a 20,000-item memory-mapped dataset, chunks of 1,000,
2 workers, against a single-process loop over the same chunks and one ``torch.cat``."""

from __future__ import annotations

import atexit
import functools
import multiprocessing as mp
import os
import shutil
import tempfile

import torch
import torch.nn.functional as F

from benchmarks._harness import Case, Fn
from tensordict import TensorDict

_N, _CHUNK, _WORKERS = 20_000, 1_000, 2


@functools.cache
def _data() -> TensorDict:
    """20,000 items: a 3x32x32 float image and an int label each (~246 MB on disk, removed
    at exit)."""
    root = tempfile.mkdtemp(prefix="tdbench-map-")
    atexit.register(shutil.rmtree, root, True)
    torch.manual_seed(0)
    td = TensorDict({"image": torch.rand(_N, 3, 32, 32), "label": torch.randint(10, (_N,))}, [_N])
    return td.memmap(os.path.join(root, "data"))


def cheap(chunk: TensorDict) -> TensorDict:
    """An element-wise rescale of the images (memory-bound)."""
    return chunk.set("image", chunk["image"] * 2.0 - 1.0)


_WEIGHT = torch.randn(8, 3, 3, 3)


def heavy(chunk: TensorDict) -> TensorDict:
    """An 8-filter 3x3 convolution of every image, pooled to 8 features (CPU-bound)."""
    features = F.conv2d(chunk["image"], _WEIGHT, padding=1).relu().mean((2, 3))
    return TensorDict({"features": features, "label": chunk["label"]}, chunk.batch_size)


def _loop(fn: object) -> Fn:
    data = _data()
    f = fn

    def base() -> object:
        return torch.cat([f(data[i : i + _CHUNK]) for i in range(0, _N, _CHUNK)])  # type: ignore[operator]

    return base


def map_with_pool_start() -> tuple[Fn, Fn]:
    data = _data()
    return (lambda: data.map(cheap, num_workers=_WORKERS, chunksize=_CHUNK)), _loop(cheap)


def map_reused_pool() -> tuple[Fn, Fn]:
    data = _data()
    pool = _pool()
    return (lambda: data.map(cheap, chunksize=_CHUNK, pool=pool)), _loop(cheap)


def map_heavy() -> tuple[Fn, Fn]:
    data = _data()
    return (lambda: data.map(heavy, num_workers=_WORKERS, chunksize=_CHUNK)), _loop(heavy)


@functools.cache
def _pool() -> mp.pool.Pool:
    # fork, like the pools map starts; the workers run torch on one thread like the parent
    return mp.get_context("fork").Pool(_WORKERS, initializer=torch.set_num_threads, initargs=(1,))


_BASE = "loop over chunks + torch.cat"
CASES = [
    Case(
        "map 20k memmapped items, chunk 1000, 2 workers, cheap fn, pool start included",
        _BASE,
        1.2,
        map_with_pool_start,
        rounds=7,
    ),
    Case(
        "map 20k memmapped items, chunk 1000, cheap fn, reused pool of 2",
        _BASE,
        1.0,
        map_reused_pool,
        rounds=7,
    ),
    Case(
        "map 20k memmapped items, chunk 1000, 2 workers, CPU-heavy fn, pool start included",
        _BASE,
        0.62,
        map_heavy,
        rounds=5,
    ),
]
