"""NonTensorData: a non-tensor value carried by a TensorDict with the batch size of its parent."""

from __future__ import annotations

from typing import Any

import torch

from tensordict._batch import BatchSizeLike, DeviceLike, as_batch_size, as_device


class NonTensorData:
    """A Python object stored as one entry of a TensorDict.

    ``td["s"] = "a string!"`` stores a ``NonTensorData``; ``td["s"]`` returns the
    object itself and ``td.get("s")`` the wrapper. The value is shared by every
    element of the batch: indexing or reshaping the TensorDict keeps it as it is.

    >>> from tensordict import NonTensorData
    >>> nt = NonTensorData("hello", batch_size=[3])
    >>> nt.data, nt.batch_size
    ('hello', torch.Size([3]))
    """

    __slots__ = ("batch_size", "data", "device")

    def __init__(
        self, data: Any, batch_size: BatchSizeLike = None, device: DeviceLike = None
    ) -> None:
        self.data = data
        self.batch_size = as_batch_size(batch_size, "NonTensorData")
        self.device = as_device(device)

    @property
    def shape(self) -> torch.Size:
        """The batch size, as ``Tensor.shape`` is a tensor's size."""
        return self.batch_size

    def tolist(self) -> Any:
        """The stored value (one value for the whole batch)."""
        return self.data

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensorData:
        """The same value with another batch size or device (no copy of the value)."""
        out = NonTensorData.__new__(NonTensorData)
        out.data = self.data
        out.batch_size = batch_size
        out.device = device
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensorData):
            return bool(self.data == other.data)
        return bool(self.data == other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"NonTensorData(data={self.data}, batch_size={self.batch_size}, device={self.device})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.data, tuple(self.batch_size), self.device))


def _rebuild(data: Any, batch_size: tuple[int, ...], device: torch.device | None) -> NonTensorData:
    return NonTensorData(data, batch_size, device)
