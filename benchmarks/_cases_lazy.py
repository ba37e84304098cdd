"""Cases for lazy stacks whose members agree (the paths ragged batch sizes must not slow):
construction, indexing the stack dim and inside the members, reading a stacked leaf."""

from __future__ import annotations

import torch

from benchmarks._harness import Case, Fn
from tensordict import LazyStackedTensorDict, TensorDict


def _members() -> list[TensorDict]:
    return [
        TensorDict({f"k{j}": torch.zeros(4, 8) for j in range(10)}, batch_size=[4])
        for _ in range(10)
    ]


def construct() -> tuple[Fn, Fn]:
    tds = _members()
    return (lambda: LazyStackedTensorDict(*tds, stack_dim=0)), (lambda: list(tds))


def index_member() -> tuple[Fn, Fn]:
    tds = _members()
    s = LazyStackedTensorDict(*tds, stack_dim=0)
    return (lambda: s[3]), (lambda: tds[3])


def index_inside() -> tuple[Fn, Fn]:
    tds = _members()
    s = LazyStackedTensorDict(*tds, stack_dim=0)
    return (lambda: s[:, 2]), (lambda: [m[2] for m in tds])


def get_leaf() -> tuple[Fn, Fn]:
    tds = _members()
    s = LazyStackedTensorDict(*tds, stack_dim=0)
    return (lambda: s.get("k3")), (lambda: torch.stack([m["k3"] for m in tds]))


_OF = "lazy stack of 10 TDs (10 leaves [4,8])"

# no targets: these rows watch that a stack of agreeing members keeps its cost
CASES = [
    Case(f"{_OF}: construct", "list of the members", None, construct),
    Case(f"{_OF}: s[3]", "members[3]", None, index_member),
    Case(f"{_OF}: s[:, 2]", "[m[2] for m in members]", None, index_inside),
    Case(f'{_OF}: s.get("k3")', "torch.stack of the members' leaves", None, get_leaf),
]
