"""Floor rows (issue 19): the least work a row above its target must do, with no TensorDict.

Each case times the checks or steps its library row cannot skip, written as lean plain
Python, against that row's own baseline; its ratio is the lowest the library row can reach.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def construct_checks() -> tuple[Fn, Fn]:
    """``TensorDict(d, batch_size=[32])``: a call with its keywords, a copy of the dict, and
    per entry a key test, a type test and one ``shape[0]`` read (a torch.Size built)."""
    d = {f"k{i}": torch.randn(32, 8) for i in range(10)}

    class Minimal:
        __slots__ = ("batch_size", "store")

        def __init__(self, source: dict[str, Any], batch_size: Any = None, **kw: Any) -> None:
            self.batch_size = batch_size
            self.store = store = dict(source)
            b0 = batch_size[0]
            for key, value in store.items():
                if not (type(key) is str and key and type(value) is Tensor):
                    raise TypeError(key)
                if value.shape[0] != b0:
                    raise ValueError(key)

    return (lambda: Minimal(d, batch_size=[32])), (lambda: dict(d))


def getitem_floor() -> tuple[Fn, Fn]:
    """``td["k"]``: a Python ``__getitem__`` with one dict read and one class test."""
    d = {f"k{i}": torch.randn(32, 8) for i in range(10)}

    class Minimal:
        __slots__ = ("store",)

        def __getitem__(self, key: str) -> Any:
            value = self.store[key]
            if value.__class__ is Tensor:
                return value
            return value

    m = Minimal()
    m.store = d
    return (lambda: m["k3"]), (lambda: d["k3"])


def mapped_index_floor() -> tuple[Fn, Fn]:
    """``td[3]`` of 10 mapped leaves, per leaf: one subclass-dispatch-off context, then
    ``Tensor.__getitem__`` called as a function, a ``numel`` test and the class swap (a
    view of the file stays a MemoryMappedTensor), against ``t[3]`` of each plain leaf.
    A TensorDict adds the same overhead to both sides of its row (``td[3]`` of plain
    leaves is about 1 us above its dict comprehension), so its ratio cannot go lower."""
    plain = TensorDict({f"k{i}": torch.randn(32, 8) for i in range(10)}, [32])
    leaves = list(plain.clone().memmap_().items())
    plain_leaves = list(plain.items())
    getitem = Tensor.__getitem__

    def minimal() -> dict[str, Tensor]:
        out = {}
        with torch._C.DisableTorchFunctionSubclass():
            for key, leaf in leaves:
                view = getitem(leaf, 3)
                if view.numel():
                    view.__class__ = leaf.__class__
                out[key] = view
        return out

    return minimal, (lambda: {k: t[3] for k, t in plain_leaves})


CASES = [
    Case("floor: construct 10 leaves, checks only", "dict(d)", None, construct_checks),
    Case('floor: minimal Python __getitem__ (td["k"])', 'd["k"]', None, getitem_floor),
    Case(
        "floor: memmapped td[3], per-leaf steps only",
        "dict comprehension, plain leaves",
        None,
        mapped_index_floor,
    ),
]
