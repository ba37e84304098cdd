"""The batch-size rule: normalising batch sizes and devices, and checking leaves against them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import torch

from tensordict._torch_compat import nested_sizes

BatchSizeLike: TypeAlias = int | Sequence[int] | torch.Size | None
DeviceLike: TypeAlias = torch.device | str | int | None

_EMPTY = torch.Size([])


def as_batch_size(batch_size: BatchSizeLike, call: str, ragged: bool = False) -> torch.Size:
    """Normalise ``batch_size`` (int, list, tuple, torch.Size or None) to a torch.Size;
    ``ragged`` takes -1 (past dim 0) for a dim whose size differs across the elements of
    nested tensor leaves (checked against the leaves by :func:`check_unreadable_shape`)."""
    if batch_size is None:
        return _EMPTY
    kind = type(batch_size)
    if kind is list or kind is tuple:
        try:
            size = torch.Size(batch_size)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"{call}: batch_size must be an int or a sequence of ints, got {batch_size!r}"
            ) from None
    elif kind is torch.Size:
        size = batch_size  # type: ignore[assignment]
    # (a SymInt: a traced size, as in export with dynamic shapes)
    elif (isinstance(batch_size, int) and not isinstance(batch_size, bool)) or isinstance(
        batch_size, torch.SymInt
    ):
        size = torch.Size([batch_size])  # type: ignore[list-item]
    else:
        try:
            size = torch.Size(batch_size)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"{call}: batch_size must be an int or a sequence of ints, got {batch_size!r}"
            ) from None
    for dim in size:  # (a loop: cheaper than min() for the usual one or two dims)
        # (-1 for a ragged dim: never dim 0, a nested tensor's count of elements)
        if dim < 0 and not (ragged and dim == -1 and size[0] != -1):
            raise ValueError(f"{call}: batch_size must not hold negative sizes, got {tuple(size)}")
    return size


def as_device(device: DeviceLike) -> torch.device | None:
    """Normalise a device spelling; an index alone means a CUDA device as in torch."""
    if device is None:
        return None
    if type(device) is torch.device:
        return device
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


class BatchDimMismatchError(ValueError, RuntimeError):
    """A leaf's shape does not start with the batch size (or operands' batch shapes do not
    broadcast): a ValueError here, and the RuntimeError that upstream's users catch."""


class KeysMismatchError(KeyError, RuntimeError):
    """A strict ``load_state_dict`` whose keys differ: a ``KeyError`` here, and the
    ``RuntimeError`` that ``nn.Module`` and upstream raise for it."""


class DimOutOfRangeError(IndexError, ValueError):
    """A batch dim out of range: an ``IndexError`` as in torch, and the ``ValueError``
    upstream raises for it."""


class StackDimError(DimOutOfRangeError, RuntimeError):
    """A lazy stack's ``stack_dim`` out of range: a :class:`DimOutOfRangeError` here, and
    the ``RuntimeError`` upstream raises for it."""


def permute_args(call: str, args: tuple[Any, ...], dims: Any) -> tuple[Any, ...]:
    """The dims of ``permute(*args)`` or ``permute(dims=...)`` (torch takes both)."""
    if dims is None:
        return args
    if args:
        raise TypeError(f"{call}: pass the dims positionally or as dims=, not both")
    return (dims,)


def dim_error(call: str, dim: int, ndim: int) -> DimOutOfRangeError:
    """The error for ``dim`` outside a batch of ``ndim`` dims."""
    also = (
        "; dim0 and dim1 must be within the range of the number of dimensions"
        if call.endswith("transpose")
        else ""
    )
    return DimOutOfRangeError(
        f"{call}: dim {dim} is out of range for a batch of {ndim} dims "
        f"(expected one of [{-ndim}, {ndim - 1}]){also}"
    )


def leaf_shape_error(
    call: str, key: object, shape: torch.Size, batch_size: torch.Size
) -> BatchDimMismatchError:
    """The error for a leaf whose shape does not start with the batch size."""
    return BatchDimMismatchError(
        f"{call}: shape {tuple(shape)} of key {key!r} does not start with "
        f"batch_size {tuple(batch_size)} (batch dimension mismatch)"
    )


def check_unreadable_shape(
    call: str, key: object, value: object, batch_size: torch.Size, err: RuntimeError
) -> None:
    """Check a leaf whose ``shape`` torch cannot report against ``batch_size``: a nested
    tensor of the strided layout fits when the sizes of its leading dims (the number of
    elements, then each dim all elements share, -1 for one where they differ) are the
    batch size. Re-raises ``err`` for any other value. Called only once a shape read has
    failed, so the construction path pays nothing for it."""
    if not (isinstance(value, torch.Tensor) and value.is_nested):
        raise err
    n = len(batch_size)
    if n > value.dim():
        raise leaf_shape_error(call, key, nested_shape(value), batch_size)
    lead = torch.Size([_nested_size(value, dim) for dim in range(n)])
    if -1 in lead and -1 not in batch_size:  # a ragged dim among the batch dims
        raise TypeError(
            f"{call}: key {key!r} holds a nested tensor whose elements differ in a batch "
            f"dim: element shapes {nested_shape(value)}, batch_size {tuple(batch_size)} "
            "(a TensorDict takes -1 in batch_size for that dim)"
        ) from err
    if lead != batch_size:
        raise leaf_shape_error(call, key, nested_shape(value), batch_size)


def _nested_size(value: torch.Tensor, dim: int) -> int:
    """The size of ``dim`` of a strided nested tensor, -1 where its elements differ."""
    try:
        return value.size(dim)
    except RuntimeError:
        return -1


def nested_shape(value: torch.Tensor) -> Any:
    """A printable shape of a nested tensor: its element count and each element's shape."""
    if value.layout != torch.strided:
        return tuple(value.shape)
    return (value.size(0), [tuple(row) for row in nested_sizes(value).tolist()])


def broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether a value of ``shape`` broadcasts to ``target`` (as ``Tensor.copy_`` and
    ``expand`` take it): no more dims, and each of its dims 1 or ``target``'s."""
    return len(shape) <= len(target) and all(
        size in (1, want) for size, want in zip(reversed(shape), reversed(target), strict=False)
    )


class InPlaceShapeError(ValueError, RuntimeError):
    """A value written into an existing leaf whose shape does not broadcast to the leaf's
    (a ValueError, and the RuntimeError ``Tensor.copy_`` raises upstream)."""


def check_copy_broadcast(
    shape: Sequence[int], target: Sequence[int], key: object, call: str
) -> None:
    """Refuse, before anything is written, a value of ``shape`` that ``copy_`` into a leaf
    (or a leaf's indexed part) of shape ``target`` cannot broadcast."""
    if not broadcasts_to(shape, target):
        raise InPlaceShapeError(
            f"{call}: shape {tuple(shape)} does not broadcast to the shape "
            f"{tuple(target)} of key {key!r} (Failed to update {key!r} in place)"
        )


def starts_with(shape: torch.Size, batch_size: torch.Size) -> bool:
    """Whether ``shape`` begins with ``batch_size``."""
    n = len(batch_size)
    return shape[:n] == batch_size if n else True
