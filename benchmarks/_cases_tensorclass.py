"""Cases for tensorclass (issue 4): construction and field reads against a TensorDict."""

from __future__ import annotations

import torch

from benchmarks._harness import Case, Fn
from tensordict import TensorDict, tensorclass


@tensorclass
class Five:
    image: torch.Tensor
    mask: torch.Tensor
    label: torch.Tensor
    reward: torch.Tensor
    done: torch.Tensor


def _values() -> dict[str, torch.Tensor]:
    return {name: torch.randn(32, 4) for name in Five._fields}


def construct() -> tuple[Fn, Fn]:
    v = _values()
    a, b, c, d, e = v.values()
    return (
        lambda: Five(a, b, c, d, e, batch_size=[32]),
        lambda: TensorDict(v, batch_size=[32]),
    )


def read_field() -> tuple[Fn, Fn]:
    v = _values()
    x = Five(**v, batch_size=[32])
    td = TensorDict(v, batch_size=[32])
    return (lambda: x.image), (lambda: td["image"])


CASES = [
    Case("tensorclass with 5 fields, batch [32]", "TensorDict, same 5 leaves", 1.5, construct),
    Case("read a field x.image", 'td["image"]', 1.5, read_field),
]
