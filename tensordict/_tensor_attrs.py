"""TensorAttrs: a tensorclass describing one tensor's device, dtype and shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._tensorclass import TensorClass

_ATTRS = ("device", "dtype", "shape")


class TensorAttrs(TensorClass):
    """One tensor's attributes as a tensorclass with an empty batch: ``tgt_device``,
    ``tgt_dtype`` and ``tgt_shape`` (prefixed so they do not shadow the collection's own
    ``device``/``dtype``/``shape``). An attribute not recorded is None.

    >>> import torch
    >>> from tensordict import TensorAttrs
    >>> a = TensorAttrs.from_tensor(torch.zeros(2, 3, dtype=torch.int32))
    >>> a.tgt_dtype, a.tgt_shape, a.tgt_device
    (torch.int32, torch.Size([2, 3]), device(type='cpu'))
    >>> TensorAttrs.from_tensor(torch.zeros(1), fields=("dtype",)).tgt_shape is None
    True
    """

    tgt_device: Any = None
    tgt_dtype: Any = None
    tgt_shape: Any = None

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, *, fields: Sequence[str] = _ATTRS) -> TensorAttrs:
        """The attributes of ``tensor`` named in ``fields`` (``"device"``, ``"dtype"``,
        ``"shape"``); the others stay None.

        >>> import torch
        >>> from tensordict import TensorAttrs
        >>> TensorAttrs.from_tensor(torch.zeros(1), fields=["device"]).tgt_device
        device(type='cpu')
        """
        unknown = sorted(set(fields) - set(_ATTRS))
        if unknown:
            raise ValueError(
                f"TensorAttrs.from_tensor: unknown field(s) {unknown}; expected some of "
                f"{list(_ATTRS)}"
            )
        out = cls(batch_size=())
        if "device" in fields:
            out.tgt_device = tensor.device
        if "dtype" in fields:
            out.tgt_dtype = tensor.dtype
        if "shape" in fields:
            out.tgt_shape = torch.Size(tensor.shape)
        return out
