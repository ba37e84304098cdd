"""Cases for the format bridges (issue 16): safetensors files and sharded checkpoints against
``safetensors.torch.load_file``, PersistentTensorDict row reads against h5py indexing."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import tempfile

import numpy as np
import torch
from torch import nn

from benchmarks._cases_checkpoint import _model, _safetensors_file
from benchmarks._harness import Case, Fn
from tensordict import PersistentTensorDict, TensorDict

_ROOT = tempfile.mkdtemp(prefix="tdbench-io-")
atexit.register(shutil.rmtree, _ROOT, True)  # (hundreds of MB a run: not left behind)


def from_safetensors_vs_load_file() -> tuple[Fn, Fn]:
    from safetensors.torch import load_file

    path = _safetensors_file()
    return (lambda: TensorDict.from_safetensors(path)), (lambda: load_file(path))


@functools.cache
def _sharded() -> tuple[str, list[str]]:
    """The ~400 MB model as a 4-shard Hub-style checkpoint (layers 0-6, 7-12, 13-18, 19-24)."""
    from safetensors.torch import save_file

    folder = os.path.join(_ROOT, "sharded")
    os.makedirs(folder, exist_ok=True)
    state = {k: v.contiguous() for k, v in _model().state_dict().items()}
    groups = [range(7), range(7, 13), range(13, 19), range(19, 25)]
    weight_map: dict[str, str] = {}
    shards = []
    for i, layers in enumerate(groups):
        name = f"model-{i + 1:05d}-of-00004.safetensors"
        part = {k: v for k, v in state.items() if int(k.split(".")[0]) in layers}
        save_file(part, os.path.join(folder, name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, name))
        shards.append(os.path.join(folder, name))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return folder, shards


def one_submodule_of_a_sharded_checkpoint() -> tuple[Fn, Fn]:
    from safetensors.torch import load_file

    folder, shards = _sharded()
    target = nn.Linear(2000, 2000)

    def lib() -> None:  # open the index, map the one shard, put the layer's leaves in
        # the module's slots hold the mapped tensors (no copy; return_swap=False: a loader
        # keeps nothing to restore)
        TensorDict.from_safetensors(folder, prefix="9").to_module(target, return_swap=False)

    return lib, (lambda: [load_file(s) for s in shards])


@functools.cache
def _h5() -> tuple[str, int]:
    rows = 50_000
    path = os.path.join(_ROOT, "data.h5")
    td = TensorDict(
        {
            "image": torch.randint(0, 255, (rows, 3, 32, 32), dtype=torch.uint8),
            "label": torch.randint(0, 10, (rows,)),
        },
        [rows],
    )
    td.to_h5(path).close()
    return path, rows


def persistent_rows_vs_h5py() -> tuple[Fn, Fn]:
    import h5py

    path, rows = _h5()
    ptd = PersistentTensorDict.from_h5(path)
    handle = h5py.File(path, "r")
    images, labels = handle["image"], handle["label"]
    idx = torch.from_numpy(np.random.default_rng(0).choice(rows, 256, replace=False))

    def base() -> tuple[np.ndarray, np.ndarray]:
        rows_sorted = np.sort(idx.numpy())  # h5py needs increasing indices
        return images[rows_sorted], labels[rows_sorted]

    return (lambda: ptd[idx]), base


CASES = [
    Case(
        "from_safetensors (lazy), ~400 MB",
        "safetensors load_file",
        1.0,
        from_safetensors_vs_load_file,
        rounds=7,
    ),
    Case(
        "one submodule of a 4-shard checkpoint (prefix=, to_module)",
        "load_file on every shard",
        0.5,
        one_submodule_of_a_sharded_checkpoint,
        rounds=5,
    ),
    Case(
        "PersistentTensorDict td[idx], 256 rows",
        "h5py fancy indexing, same datasets",
        1.5,
        persistent_rows_vs_h5py,
    ),
]
