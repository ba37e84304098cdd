"""Cases for the printed and notebook forms (issue 18): absolute times, sizes on stderr.

The measures are absolute (a 5,000-leaf notebook tree under 50 ms and 100 KB; the repr of
a TensorDict holding a 2-million-item list under 5 ms): read the library time column. The
baselines are the plain-Python floors: a dict of the leaves' shapes as a string, and the
cut repr of the list alone.
"""

from __future__ import annotations

import reprlib
import sys

import torch

from benchmarks._harness import Case, Fn
from tensordict import NonTensorData, TensorDict


def _tree(groups: int, per: int) -> tuple[TensorDict, dict[str, dict[str, torch.Tensor]]]:
    d = {f"g{i}": {f"k{j}": torch.zeros(2, 3) for j in range(per)} for i in range(groups)}
    return TensorDict(d, [2]), d


def _shapes(d: dict[str, dict[str, torch.Tensor]]) -> str:
    return str({g: {k: tuple(v.shape) for k, v in sub.items()} for g, sub in d.items()})


def html_5000_nested() -> tuple[Fn, Fn]:
    td, d = _tree(100, 50)
    print(f"  html of 5,000 nested leaves: {len(td._repr_html_()):,} bytes", file=sys.stderr)
    return td._repr_html_, lambda: _shapes(d)


def html_5000_flat() -> tuple[Fn, Fn]:
    d = {f"k{j}": torch.zeros(2, 3) for j in range(5000)}
    td = TensorDict(d, [2])
    print(f"  html of 5,000 flat leaves: {len(td._repr_html_()):,} bytes", file=sys.stderr)
    return td._repr_html_, lambda: str({k: tuple(v.shape) for k, v in d.items()})


def repr_2m_list() -> tuple[Fn, Fn]:
    big = list(range(2_000_000))
    td = TensorDict({"big": NonTensorData(big), "x": torch.zeros(3)}, [])
    return (lambda: repr(td)), (lambda: reprlib.repr(big))


CASES = [
    Case(
        "_repr_html_, 5,000 leaves (100 x 50 nested)", "str of shapes dict", None, html_5000_nested
    ),
    Case("_repr_html_, 5,000 flat leaves", "str of shapes dict", None, html_5000_flat),
    Case("repr, TD holding a 2,000,000-item list", "reprlib.repr(list)", None, repr_2m_list),
]
