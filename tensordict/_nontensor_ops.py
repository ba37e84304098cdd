"""Comparisons and logical operators on the non-tensor entries of two collections."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tensordict._nontensor import NonTensor, NonTensorData

# comparisons give a bool tensor shaped like the batch; logical ops a new non-tensor value
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {"eq": operator.eq, "ne": operator.ne}
_LOGICAL: dict[str, Callable[[Any, Any], Any]] = {
    "bitwise_or": operator.or_,
    "bitwise_and": operator.and_,
    "bitwise_xor": operator.xor,
}
OPS = frozenset(_COMPARE) | frozenset(_LOGICAL)


def _flat(values: Any, depth: int) -> list[Any]:
    if depth == 0:
        return [values]
    return [x for v in values for x in _flat(v, depth - 1)]


def _compare(fn: Callable[[Any, Any], Any], a: NonTensor, b: NonTensor) -> torch.Tensor:
    shape = a.batch_size
    if isinstance(a, NonTensorData) and isinstance(b, NonTensorData):
        return torch.full(shape, bool(fn(a.data, b.data)), dtype=torch.bool)
    mine, theirs = _flat(a.tolist(), len(shape)), _flat(b.tolist(), len(shape))
    return torch.tensor([bool(fn(x, y)) for x, y in zip(mine, theirs, strict=True)]).reshape(shape)


def _nontensors(td: Any, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], NonTensor]]:
    """The non-tensor entries of a dense collection by key path (lazy stacks skipped)."""
    for key, value in td._tensordict.items():
        if isinstance(value, torch.Tensor):  # (an UnbatchedTensor too: a tensor leaf)
            continue
        if isinstance(value, NonTensor):
            yield (*prefix, key), value
        elif hasattr(value, "_tensordict"):
            yield from _nontensors(value, (*prefix, key))


def apply_nontensor(name: str, td: Any, other: Any, out: Any) -> Any:
    """``out`` (the tensor result of ``td <name> other``) with the non-tensor entries that
    both hold combined too: equal or not as bool tensors, or'ed/and'ed/xor'ed as values.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(2), "s": "x"}, [2])
    >>> (td == td.clone())["s"]
    tensor([True, True])
    """
    if td._stack_parts() is not None or other._stack_parts() is not None:
        return out  # lazy stacks: their members answer (non-tensors carried over)
    for key, mine in _nontensors(td, ()):
        theirs = other._get_path_or_none(key)
        if not isinstance(theirs, NonTensor) or theirs.batch_size != mine.batch_size:
            continue
        if name in _COMPARE:
            out.set(key, _compare(_COMPARE[name], mine, theirs))
        elif isinstance(mine, NonTensorData) and isinstance(theirs, NonTensorData):
            try:
                value = _LOGICAL[name](mine.data, theirs.data)
            except TypeError:
                continue
            out.set(key, NonTensorData(value, mine.batch_size, mine.device))
    return out
