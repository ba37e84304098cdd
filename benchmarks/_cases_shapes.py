"""Cases for shape algebra (issue 3): indexing, stack, cat and shape ops against torch."""

from __future__ import annotations

import torch

from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def _leaves(n: int, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    return {f"k{i}": torch.randn(shape) for i in range(n)}


def _index(index: object) -> tuple[Fn, Fn]:
    d = _leaves(10, (32, 8))
    td = TensorDict(d, [32])
    return (lambda: td[index]), (lambda: {k: v[index] for k, v in d.items()})


def index_int() -> tuple[Fn, Fn]:
    return _index(3)


def index_slice() -> tuple[Fn, Fn]:
    return _index(slice(2, 10))


def index_tensor() -> tuple[Fn, Fn]:
    return _index(torch.randint(0, 32, (8,)))


def stack100() -> tuple[Fn, Fn]:
    ds = [_leaves(10, (8,)) for _ in range(100)]
    tds = [TensorDict(d, [8]) for d in ds]
    keys = list(ds[0])
    return (
        lambda: torch.stack(tds, 0),
        lambda: {k: torch.stack([d[k] for d in ds], 0) for k in keys},
    )


def cat10() -> tuple[Fn, Fn]:
    ds = [_leaves(10, (32, 8)) for _ in range(10)]
    tds = [TensorDict(d, [32]) for d in ds]
    keys = list(ds[0])
    return (
        lambda: torch.cat(tds, 0),
        lambda: {k: torch.cat([d[k] for d in ds], 0) for k in keys},
    )


def _shape_op(lib: str) -> tuple[Fn, Fn]:
    d = _leaves(10, (16, 16, 4))
    td = TensorDict(d, [16, 16])
    ops = {
        "reshape": (lambda: td.reshape(256), lambda: {k: v.reshape(256, 4) for k, v in d.items()}),
        "view": (lambda: td.view(256), lambda: {k: v.view(256, 4) for k, v in d.items()}),
        "unsqueeze": (lambda: td.unsqueeze(0), lambda: {k: v.unsqueeze(0) for k, v in d.items()}),
        "permute": (
            lambda: td.permute(1, 0),
            lambda: {k: v.permute(1, 0, 2) for k, v in d.items()},
        ),
    }
    return ops[lib]


CASES = [
    Case("td[3], 10 leaves [32,8]", "dict comprehension", 1.2, index_int),
    Case("td[2:10], 10 leaves [32,8]", "dict comprehension", 1.2, index_slice),
    Case("td[index tensor of 8], 10 leaves [32,8]", "dict comprehension", 1.2, index_tensor),
    Case("torch.stack of 100 TDs (10 leaves [8])", "per-key torch.stack", 1.3, stack100),
    Case("torch.cat of 10 TDs (10 leaves [32,8])", "per-key torch.cat", 1.3, cat10),
    Case(
        "reshape(256), batch [16,16], 10 leaves",
        "dict comprehension",
        1.3,
        lambda: _shape_op("reshape"),
    ),
    Case(
        "view(256), batch [16,16], 10 leaves", "dict comprehension", 1.3, lambda: _shape_op("view")
    ),
    Case(
        "unsqueeze(0), batch [16,16], 10 leaves",
        "dict comprehension",
        1.3,
        lambda: _shape_op("unsqueeze"),
    ),
    Case(
        "permute(1, 0), batch [16,16], 10 leaves",
        "dict comprehension",
        1.3,
        lambda: _shape_op("permute"),
    ),
]
