"""Cases for ``pack`` / ``PackLayout.unpack`` against the same few lines of torch."""

from __future__ import annotations

import math

import torch

from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def _tree() -> tuple[TensorDict, list[torch.Tensor]]:
    leaves = {f"k{i}": torch.randn(32, 4, 2) for i in range(5)}
    leaves.update({f"n{i}": {"x": torch.randn(32, 8)} for i in range(5)})
    td = TensorDict(leaves, [32])
    return td, [td.get(k) for k in td.keys(True, True, sort=True)]


def pack() -> tuple[Fn, Fn]:
    td, tensors = _tree()
    return (lambda: td.pack()), (lambda: torch.cat([t.reshape(32, -1) for t in tensors], -1))


def pack_layout() -> tuple[Fn, Fn]:
    td, tensors = _tree()
    _, layout = td.pack()
    return (
        (lambda: td.pack(layout=layout)),
        (lambda: torch.cat([t.reshape(32, -1) for t in tensors], -1)),
    )


def unpack() -> tuple[Fn, Fn]:
    td, tensors = _tree()
    flat, layout = td.pack()
    shapes = [t.shape[1:] for t in tensors]
    sizes = [math.prod(s) for s in shapes]

    def torch_version() -> list[torch.Tensor]:
        out, start = [], 0
        for shape, size in zip(shapes, sizes, strict=True):
            out.append(flat.narrow(-1, start, size).reshape(32, *shape))
            start += size
        return out

    return (lambda: layout.unpack(flat)), torch_version


CASES = [
    Case(
        "td.pack(), 10 leaves in 6 levels, batch [32]",
        "torch.cat of reshaped leaves",
        None,
        pack,
    ),
    Case(
        "td.pack(layout=), 10 leaves in 6 levels, batch [32]",
        "torch.cat of reshaped leaves",
        None,
        pack_layout,
    ),
    Case(
        "layout.unpack(flat), 10 leaves in 6 levels, batch [32]",
        "narrow + reshape per leaf (a list)",
        None,
        unpack,
    ),
]
