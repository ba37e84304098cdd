"""``python -m tensordict diff``: the keys, shapes, dtypes and values two checkpoints differ in."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from tensordict._cli_inspect import short, show_key
from tensordict._survey import TENSOR_KINDS, Collection, Leaf

_CHUNK = 1 << 22  # elements compared at a time, so a large leaf never needs a large buffer
Path = tuple[str | int, ...]  # keys, and member numbers of lazy stacks


def show_path(path: Path) -> str:
    """A nested key as a user writes it: ``'a'``, ``('a', 'b')``; ``(root)`` for the top.

    >>> show_path(()), show_path(("a",)), show_path(("a", "b")), show_path((0, "x"))
    ('(root)', "'a'", "('a', 'b')", "(0, 'x')")
    """
    if not path:
        return "(root)"
    return repr(path[0]) if len(path) == 1 else repr(path)


def _kind(node: Collection | Leaf) -> str:
    return node.type if isinstance(node, Collection) else node.kind


def differences(a: Collection, b: Collection, path: Path = ()) -> Iterator[str]:
    """One line per difference between two surveyed checkpoints (none when identical).

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> from tensordict._survey import survey
    >>> base = tempfile.mkdtemp()
    >>> _ = TensorDict({"x": torch.zeros(3), "y": torch.ones(3)}, [3]).memmap(base + "/a")
    >>> _ = TensorDict({"x": torch.tensor([0.0, 2.0, 0.0]), "z": 1}, []).memmap(base + "/b")
    >>> for line in differences(survey(base + "/a", "demo").root, survey(base + "/b", "demo").root):
    ...     print(line)
    (root): batch_size [3] != []
    only in A: 'y'
    only in B: 'z'
    'x': 1 of 3 values differ (largest absolute difference 2)
    """
    where = show_path(path)
    if a.type != b.type:
        yield f"{where}: type {show_key(a.type)} != {show_key(b.type)}"
    both_lazy = a.lazy and b.lazy
    for member in ("batch_size", "device", "names", "stack_dim")[: 4 if both_lazy else 3]:
        va, vb = a.meta.get(member), b.meta.get(member)
        if va != vb:
            yield f"{where}: {member} {_show(va)} != {_show(vb)}"
    if both_lazy:
        for i in range(len(a.members), len(b.members)):
            yield f"only in B: {show_path((*path, i))}"
        for i in range(len(b.members), len(a.members)):
            yield f"only in A: {show_path((*path, i))}"
        for i, (ma, mb) in enumerate(zip(a.members, b.members, strict=False)):
            yield from differences(ma, mb, (*path, i))
        return
    if a.lazy or b.lazy:
        return  # a lazy stack against one collection: the type line says it all
    for key in a.entries:
        if key not in b.entries:
            yield f"only in A: {show_path((*path, key))}"
    for key in b.entries:
        if key not in a.entries:
            yield f"only in B: {show_path((*path, key))}"
    for key, ea in a.entries.items():
        eb = b.entries.get(key)
        if eb is None:
            continue
        sub = (*path, key)
        if isinstance(ea, Collection) and isinstance(eb, Collection):
            yield from differences(ea, eb, sub)
        elif isinstance(ea, Leaf) and isinstance(eb, Leaf) and ea.kind == eb.kind:
            yield from _leaf_differences(ea, eb, show_path(sub))
        else:
            yield f"{show_path(sub)}: {_kind(ea)} != {_kind(eb)}"


def _show(value: Any) -> str:
    return "null" if value is None else str(value)


def _leaf_differences(a: Leaf, b: Leaf, where: str) -> Iterator[str]:
    if a.kind in TENSOR_KINDS:
        if a.dtype != b.dtype:
            yield f"{where}: dtype {a.dtype} != {b.dtype}"
        if a.shape != b.shape:
            yield f"{where}: shape {a.shape} != {b.shape}"
        if a.dtype == b.dtype and a.shape == b.shape:
            line = _value_difference(a, b)
            if line:
                yield f"{where}: {line}"
    elif a.kind == "pickle":
        if a.read() != b.read():
            yield f"{where}: pickled data differs (compared as bytes, not unpickled)"
    else:
        va, vb = a.json_elements(), b.json_elements()
        if _strict(va) != _strict(vb):  # True == 1 == 1.0 in Python, not in the files
            yield f"{where}: value {short(va)} != {short(vb)}"


def _strict(value: Any) -> str:
    """A JSON value as text, so that values of other JSON types never compare equal."""
    return json.dumps(value, sort_keys=True)


def _value_difference(a: Leaf, b: Leaf) -> str | None:
    """How many elements of two same-shape, same-dtype tensor files differ, bit for bit.

    The files are mapped read-only as bytes, one row of ``itemsize`` bytes per element.
    """
    assert a.path is not None
    assert b.path is not None
    if a.nbytes == 0 or (a.offset == b.offset and os.path.samefile(a.path, b.path)):
        return None
    dtype = a.torch_dtype
    size, numel = dtype.itemsize, a.nbytes // dtype.itemsize
    xa = np.memmap(a.path, dtype=np.uint8, mode="r", offset=a.offset, shape=(numel, size))
    xb = np.memmap(b.path, dtype=np.uint8, mode="r", offset=b.offset, shape=(numel, size))
    count, largest = 0, None
    for start in range(0, numel, _CHUNK):
        ca, cb = xa[start : start + _CHUNK], xb[start : start + _CHUNK]
        differ = (ca != cb).any(axis=1)
        n = int(differ.sum())
        if n:
            count += n
            gap = _largest_gap(*(_elements(c[differ], dtype) for c in (ca, cb)))
            if gap is not None:
                largest = gap if largest is None else max(largest, gap)
    if not count:
        return None
    text = f"{count} of {numel} values differ"
    return text + (f" (largest absolute difference {largest:g})" if largest is not None else "")


def _elements(rows: np.ndarray[Any, Any], dtype: torch.dtype) -> torch.Tensor:
    """Rows of little-endian bytes as a 1-d tensor of ``dtype``."""
    return torch.from_numpy(np.ascontiguousarray(rows)).view(dtype).reshape(-1)


def _largest_gap(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """The largest ``|a - b|`` over elements that differ; None for bool and where
    torch cannot compute it for the dtype. NaN when a NaN is involved."""
    if a.dtype == torch.bool:
        return None
    try:
        wide = torch.complex128 if a.is_complex() else torch.float64
        return float((a.to(wide) - b.to(wide)).abs().max())
    except (RuntimeError, TypeError):
        return None
