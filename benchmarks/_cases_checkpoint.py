"""Cases for checkpoints (issue 5): a ~400 MB model of Linear layers and a 200,000-item
dataset, against raw numpy, torch.save, safetensors and plain file-backed tensors."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

import torch
from torch import nn

from benchmarks._harness import Case, Fn
from tensordict import TensorDict

_ROOT = tempfile.mkdtemp(prefix="tdbench-")
atexit.register(shutil.rmtree, _ROOT, True)  # (hundreds of MB a run: not left behind)


@functools.cache
def _model() -> nn.Module:
    """~400 MB of float32 weights: 25 Linear(2000, 2000) layers (16 MB each)."""
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(2000, 2000) for _ in range(25)])


def _params() -> TensorDict:
    # the same content TensorDict.from_module gives (issue 6): parameters by submodule
    sd = {k: v.detach() for k, v in _model().state_dict().items()}
    return TensorDict(sd, []).unflatten_keys(".")


def save_vs_tofile() -> tuple[Fn, Fn]:
    params = _params()
    flat = [v.numpy() for v in params.values(True, True)]
    raw = os.path.join(_ROOT, "raw.bin")

    def lib() -> None:
        params.memmap(os.path.join(_ROOT, "ckpt"))

    def base() -> None:
        with open(raw, "wb") as handle:
            for array in flat:
                array.tofile(handle)

    return lib, base


def save_vs_torch_save() -> tuple[Fn, Fn]:
    params = _params()
    sd = _model().state_dict()
    path = os.path.join(_ROOT, "model.pt")

    def lib() -> None:
        params.memmap(os.path.join(_ROOT, "ckpt"))

    return lib, (lambda: torch.save(sd, path))


def _saved() -> str:
    path = os.path.join(_ROOT, "loadme")
    if not os.path.exists(path):
        _params().memmap(path)
    return path


def _safetensors_file() -> str:
    from safetensors.torch import save_file

    path = os.path.join(_ROOT, "model.safetensors")
    if not os.path.exists(path):
        save_file({k: v.contiguous() for k, v in _model().state_dict().items()}, path)
    return path


def load_vs_safetensors() -> tuple[Fn, Fn]:
    from safetensors.torch import load_file

    folder, st = _saved(), _safetensors_file()
    return (lambda: TensorDict.load_memmap(folder)), (lambda: load_file(st))


def load_one_vs_safe_open() -> tuple[Fn, Fn]:
    from safetensors import safe_open

    folder, st = _saved(), _safetensors_file()

    def base() -> dict[str, torch.Tensor]:
        with safe_open(st, framework="pt") as handle:
            return {k: handle.get_tensor(k) for k in ("0.weight", "0.bias")}

    return (lambda: TensorDict.load_memmap(os.path.join(folder, "0"))), base


def load_and_sum() -> tuple[Fn, Fn]:
    folder = _saved()
    params = _params()
    raw = os.path.join(_ROOT, "one.bin")
    total = sum(v.numel() for v in params.values(True, True))
    if not os.path.exists(raw):
        with open(raw, "wb") as handle:
            for v in params.values(True, True):
                v.numpy().tofile(handle)

    def lib() -> float:
        td = TensorDict.load_memmap(folder)
        return float(sum(v.sum() for v in td.values(True, True)))

    def base() -> float:
        return float(torch.from_file(raw, shared=True, size=total, dtype=torch.float32).sum())

    return lib, base


def load_and_sum_floor() -> tuple[Fn, Fn]:
    """The floor under the load-and-sum row, without TensorDict: each leaf file mapped
    by torch and summed (50 maps, 50 reductions, a Python sum of 50 scalars), against
    the same one-file baseline."""
    _, base = load_and_sum()  # (writes both files)
    folder = _saved()
    leaves = [
        (os.path.join(folder, *key) + ".memmap", value.numel())
        for key, value in _params().items(True, True)
    ]

    def floor() -> float:
        return float(
            sum(
                torch.from_file(path, shared=True, size=n, dtype=torch.float32).sum()
                for path, n in leaves
            )
        )

    return floor, base


def _dataset() -> tuple[TensorDict, torch.Tensor, torch.Tensor]:
    path = os.path.join(_ROOT, "dataset")
    if not os.path.exists(path):
        datum = TensorDict(
            {
                "image": torch.zeros(3, 32, 32, dtype=torch.uint8),
                "label": torch.zeros((), dtype=torch.int64),
            },
            [],
        )
        data = datum.expand(200_000).memmap_like(path)
        data["image"].copy_(torch.randint(0, 255, (200_000, 3, 32, 32), dtype=torch.uint8))
        data["label"].copy_(torch.randint(0, 10, (200_000,)))
    data = TensorDict.load_memmap(path)
    return data, data["image"].as_subclass(torch.Tensor), data["label"].as_subclass(torch.Tensor)


def dataset_index() -> tuple[Fn, Fn]:
    data, images, labels = _dataset()
    idx = torch.randint(0, 200_000, (256,))
    return (
        lambda: data[idx],
        lambda: (images.index_select(0, idx), labels.index_select(0, idx)),
    )


def dataset_index_clone() -> tuple[Fn, Fn]:
    data, images, labels = _dataset()
    idx = torch.randint(0, 200_000, (256,))
    return (
        lambda: data[idx].clone(),
        lambda: (images.index_select(0, idx).clone(), labels.index_select(0, idx).clone()),
    )


CASES = [
    Case(
        "memmap ~400 MB of Linear weights", "numpy.tofile, one file", 1.5, save_vs_tofile, rounds=5
    ),
    Case(
        "memmap ~400 MB of Linear weights ",
        "torch.save(state_dict)",
        0.33,
        save_vs_torch_save,
        rounds=5,
    ),
    Case(
        "load_memmap (lazy), ~400 MB", "safetensors load_file", 1.0, load_vs_safetensors, rounds=7
    ),
    Case(
        'load_memmap(dir / "0"), one submodule',
        "safetensors safe_open, those keys",
        0.5,
        load_one_vs_safe_open,
    ),
    Case(
        "load, then read every leaf once (sum)",
        "one-file torch.from_file + sum",
        1.1,  # issue 15's target
        load_and_sum,
        rounds=7,
    ),
    Case(
        "floor of load+sum: 50 leaf files mapped by torch, summed",
        "one-file torch.from_file + sum",
        None,
        load_and_sum_floor,
        rounds=7,
    ),
    Case(
        "memmapped dataset td[idx], 256 rows",
        "index_select on file-backed tensors",
        1.5,
        dataset_index,
    ),
    Case("memmapped dataset td[idx].clone()", "same, cloned", 1.5, dataset_index_clone),
]
