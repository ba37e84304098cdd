"""Cases for checkpoint format version 2 (issue 15): the ~400 MB model of
``_cases_checkpoint`` as one ``.tdz`` archive, against safetensors."""

from __future__ import annotations

import os

from benchmarks._cases_checkpoint import _ROOT, _params, _safetensors_file
from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def _archive() -> str:
    path = os.path.join(_ROOT, "model.tdz")
    if not os.path.exists(path):
        _params().memmap(path)
    return path


def load_archive_vs_safetensors() -> tuple[Fn, Fn]:
    from safetensors.torch import load_file

    archive, st = _archive(), _safetensors_file()
    return (lambda: TensorDict.load(archive)), (lambda: load_file(st))


def load_archive_one_vs_safe_open() -> tuple[Fn, Fn]:
    from safetensors import safe_open

    archive, st = _archive(), _safetensors_file()

    def base() -> dict[str, object]:
        with safe_open(st, framework="pt") as handle:
            return {k: handle.get_tensor(k) for k in ("0.weight", "0.bias")}

    return (lambda: TensorDict.load_memmap(archive, subpath="0")), base


CASES = [
    Case(
        'TensorDict.load("x.tdz") (lazy), ~400 MB',
        "safetensors load_file",
        1.0,
        load_archive_vs_safetensors,
        rounds=7,
    ),
    Case(
        'load_memmap("x.tdz", subpath="0"), one submodule',
        "safetensors safe_open, those keys",
        0.5,
        load_archive_one_vs_safe_open,
    ),
]
