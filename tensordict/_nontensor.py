"""Non-tensor entries: one value for the whole batch (NonTensorData) or one per element."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._batch import BatchSizeLike, DeviceLike, as_batch_size, as_device


class NonTensor:
    """What TensorDict operations need of a non-tensor entry.

    ``_remap(fn, new_bs)`` follows a re-arrangement of the batch: ``fn`` is the same
    function the operation applies to tensor leaves, given here a tensor of element
    positions, so per-element values stay aligned with the batch whatever the op.
    """

    __slots__ = ("batch_size", "device")

    batch_size: torch.Size
    device: torch.device | None

    @property
    def shape(self) -> torch.Size:
        """The batch size, as ``Tensor.shape`` is a tensor's size."""
        return self.batch_size

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensor:
        raise NotImplementedError  # each subclass says how it follows a new batch size

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> NonTensor:
        raise NotImplementedError

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        raise NotImplementedError

    def tolist(self) -> Any:
        raise NotImplementedError

    def _public(self) -> Any:
        """What ``td[key]`` returns for this entry."""
        raise NotImplementedError


class NonTensorData(NonTensor):
    """A Python object stored as one entry of a TensorDict, shared by the whole batch.

    ``td["s"] = "a string!"`` stores a ``NonTensorData``; ``td["s"]`` returns the
    object itself and ``td.get("s")`` the wrapper. Indexing or reshaping the
    TensorDict keeps the value as it is.

    >>> from tensordict import NonTensorData
    >>> nt = NonTensorData("hello", batch_size=[3])
    >>> nt.data, nt.batch_size
    ('hello', torch.Size([3]))
    """

    __slots__ = ("data",)

    def __init__(
        self, data: Any, batch_size: BatchSizeLike = None, device: DeviceLike = None
    ) -> None:
        self.data = data
        self.batch_size = as_batch_size(batch_size, "NonTensorData")
        self.device = as_device(device)

    def tolist(self) -> Any:
        """The stored value (one value for the whole batch)."""
        return self.data

    def _public(self) -> Any:
        return self.data

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensorData:
        """The same value with another batch size or device (no copy of the value)."""
        out = NonTensorData.__new__(NonTensorData)
        out.data = self.data
        out.batch_size = batch_size
        out.device = device
        return out

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> NonTensorData:
        return self._with(batch_size, self.device)

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        return [self._with(bs, self.device) for bs in batch_sizes]

    def __eq__(self, other: object) -> bool:
        return same_value(self.data, other.data if isinstance(other, NonTensorData) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"NonTensorData(data={self.data}, batch_size={self.batch_size}, device={self.device})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.data, tuple(self.batch_size), self.device))


class NonTensorStack(NonTensor):
    """Non-tensor values that differ along the batch: one value per batch element.

    It keeps the distinct values and a tensor of positions shaped like the batch, so
    indexing and shape operations keep every value with its element.

    >>> from tensordict import NonTensorStack
    >>> s = NonTensorStack.from_list(["a", "b", "c"])
    >>> s.batch_size, s.tolist()
    (torch.Size([3]), ['a', 'b', 'c'])
    """

    __slots__ = ("positions", "values")

    def __init__(self, values: Sequence[Any], positions: Tensor, device: DeviceLike = None) -> None:
        if positions.dtype != torch.long:
            raise TypeError(f"NonTensorStack: positions must be int64, got {positions.dtype}")
        if positions.numel() and not 0 <= int(positions.min()) <= int(positions.max()) < len(
            values
        ):
            raise ValueError(
                f"NonTensorStack: positions must index the {len(values)} values, "
                f"got range [{int(positions.min())}, {int(positions.max())}]"
            )
        self.values = list(values)
        self.positions = positions
        self.batch_size = positions.shape
        self.device = as_device(device)

    @classmethod
    def from_list(cls, values: Sequence[Any], device: DeviceLike = None) -> NonTensorStack:
        """A stack of the elements of a (nested) list; its nesting gives the batch size."""

        def flat(v: Any, depth: int) -> tuple[list[Any], list[int]]:
            if isinstance(v, list) and v and all(isinstance(x, list) for x in v):
                parts = [flat(x, depth + 1) for x in v]
                inner = {tuple(p[1]) for p in parts}
                if len(inner) != 1:
                    raise ValueError("NonTensorStack.from_list: nested lists must be regular")
                return [y for p in parts for y in p[0]], [len(v), *parts[0][1]]
            return list(v), [len(v)]

        items, shape = flat(list(values), 0)
        return cls(items, torch.arange(len(items)).reshape(shape), device)

    def tolist(self) -> Any:
        """The values as a nested list shaped like the batch."""

        def fill(pos: Any) -> Any:
            return [fill(p) for p in pos] if isinstance(pos, list) else self.values[pos]

        return fill(self.positions.tolist())

    def _public(self) -> Any:
        return self.tolist()

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensor:
        if batch_size == self.batch_size:
            return NonTensorStack(self.values, self.positions, device)
        used = sorted(set(self.positions.reshape(-1).tolist()))
        first = self.values[used[0]] if used else None
        if all(same_value(self.values[i], first) for i in used):
            return NonTensorData(first, batch_size, device)
        raise ValueError(
            f"NonTensorStack: values differ along the batch, so they cannot follow a "
            f"batch size change from {tuple(self.batch_size)} to {tuple(batch_size)}"
        )

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> NonTensorStack:
        return NonTensorStack(self.values, fn(self.positions), self.device)

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        return [NonTensorStack(self.values, p, self.device) for p in fn(self.positions)]

    def _written(self, index: Any, other: NonTensor, sub_bs: torch.Size) -> NonTensorStack:
        """A new stack with ``other``'s values at ``index`` (copy on write: views of this
        stack, and TensorDicts sharing it, keep their values)."""
        values = list(self.values)
        positions = self.positions.clone()
        src = as_stack(other)
        positions[index] = src.positions.expand(sub_bs) + len(values)
        values.extend(src.values)
        return NonTensorStack(values, positions, self.device)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensor):
            return bool(self.tolist() == other.tolist())
        return bool(self.tolist() == other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"NonTensorStack({self.tolist()!r}, batch_size={self.batch_size}, device={self.device})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (NonTensorStack, (self.values, self.positions, self.device))


def same_value(a: Any, b: Any) -> bool:
    """Equality for arbitrary values: arrays and tensors compare whole, errors mean no."""
    if a is b:
        return True
    try:
        result = a == b
        if isinstance(result, bool):
            return result
        if getattr(a, "shape", None) != getattr(b, "shape", None):
            return False
        return bool(result.all())
    except Exception:  # a value whose == raises is simply not equal
        return False


def as_stack(value: NonTensor) -> NonTensorStack:
    """Any non-tensor entry as a NonTensorStack (one value per element)."""
    if isinstance(value, NonTensorStack):
        return value
    assert isinstance(value, NonTensorData)
    return NonTensorStack(
        [value.data], torch.zeros(value.batch_size, dtype=torch.long), value.device
    )


def _rebuild(data: Any, batch_size: tuple[int, ...], device: torch.device | None) -> NonTensorData:
    return NonTensorData(data, batch_size, device)
