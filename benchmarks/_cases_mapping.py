"""Cases for the mapping paths (a TensorDict is a virtual MutableMapping): update and set."""

from __future__ import annotations

from typing import Any

import torch

from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def _leaves(n: int) -> dict[str, torch.Tensor]:
    return {f"k{i}": torch.randn(32, 8) for i in range(n)}


def update_dict() -> tuple[Fn, Fn]:
    d = _leaves(10)
    td = TensorDict(_leaves(10), [32])
    plain = dict(_leaves(10))
    return (lambda: td.update(d)), (lambda: plain.update(d))


def update_td() -> tuple[Fn, Fn]:
    other = TensorDict(_leaves(10), [32])
    td = TensorDict(_leaves(10), [32])
    d = _leaves(10)
    plain = dict(_leaves(10))
    return (lambda: td.update(other)), (lambda: plain.update(d))


def set_nested_td() -> tuple[Fn, Fn]:
    sub = TensorDict(_leaves(2), [32])
    td = TensorDict(_leaves(2), [32])
    plain: dict[str, Any] = dict(_leaves(2))
    sub_d = _leaves(2)

    def write() -> None:
        plain["sub"] = sub_d

    return (lambda: td.set("sub", sub)), write


CASES = [
    Case("update(dict), 10 leaves [32,8]", "dict.update", 70, update_dict),
    Case("update(TensorDict), 10 leaves [32,8]", "dict.update", 70, update_td),
    Case('td.set("sub", TensorDict)', 'd["sub"] = d2', 20, set_nested_td),
]
