"""Nested (ragged) memory-mapped tensors: the elements of a strided nested tensor laid
end to end in one flat buffer (a file or shared memory), in C order, one after the other.

The shape of such a tensor is a 2-D integer tensor with one row per element, its shape
(``torch.tensor([[2, 3], [2, 4]])``: two elements of shapes ``(2, 3)`` and ``(2, 4)``), as
``Tensor._nested_tensor_size()`` reports it and upstream's ``MemoryMappedTensor`` takes it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._torch_compat import nested_view_from_buffer


def element_shapes(call: str, shape: Any) -> Tensor | None:
    """The element shapes if ``shape`` (a constructor's shape argument, or the one item
    of its ``*size``) describes a nested tensor, else None. A nested shape is a 2-D
    integer tensor of sizes >= 0."""
    if not isinstance(shape, Tensor) or shape.ndim == 0:
        return None
    if shape.ndim != 2 or shape.dtype.is_floating_point or shape.dtype.is_complex:
        raise TypeError(
            f"{call}: a nested shape is a 2-D integer tensor (one row per element), got a "
            f"{shape.ndim}-D {shape.dtype} tensor"
        )
    if shape.dtype == torch.bool:
        raise TypeError(f"{call}: a nested shape holds integers, got a bool tensor")
    if not len(shape):  # (torch crashes viewing a buffer as a nested tensor of none)
        raise ValueError(f"{call}: a nested shape needs at least one element (row)")
    if shape.numel() and int(shape.min()) < 0:
        raise ValueError(f"{call}: a nested shape must not hold negative sizes, got {shape}")
    return shape.to(device="cpu", dtype=torch.int64)


def numel(shapes: Tensor) -> int:
    """How many elements of the dtype a nested tensor of ``shapes`` holds in all."""
    return int(shapes.prod(dim=1).sum()) if len(shapes) else 0  # (a 0-d element holds 1)


def view(flat: Tensor, shapes: Tensor) -> Tensor:
    """A strided nested tensor of ``shapes`` over the 1-D plain tensor ``flat`` (its first
    ``numel(shapes)`` elements; same storage)."""
    if not len(shapes):  # (torch crashes on it: callers refuse it first)
        raise ValueError("a nested tensor needs at least one element")
    return nested_view_from_buffer(flat, shapes)


def refuse_jagged(call: str, tensor: Tensor) -> None:
    """Refuse a nested tensor that cannot be laid out as element shapes and a buffer: one
    of the jagged layout, or one with no elements."""
    if tensor.layout == torch.jagged:
        raise TypeError(
            f"{call}: nested tensors of the torch.jagged layout cannot be memory-mapped; "
            "convert it to the strided layout first: "
            "torch.nested.nested_tensor(list(t.unbind()), layout=torch.strided)"
        )
    if tensor.size(0) == 0:
        raise ValueError(f"{call}: a nested tensor with no elements cannot be memory-mapped")


def flat_values(tensor: Tensor) -> Tensor:
    """The elements of the strided nested ``tensor`` as one flat plain tensor, in the
    order :func:`view` lays them out (a copy)."""
    parts = [element.reshape(-1) for element in tensor.unbind()]
    if not parts:
        return torch.empty(0, dtype=tensor.dtype)
    return torch.cat(parts)


def zeros(shapes: Tensor, dtype: torch.dtype) -> Tensor:
    """A plain strided nested tensor of zeros with element ``shapes`` (one buffer)."""
    return view(torch.zeros(numel(shapes), dtype=dtype), shapes)
