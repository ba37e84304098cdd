"""The one place that touches torch's private APIs (``torch._foreach_*``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def foreach(name: str) -> Callable[..., Any] | None:
    """The multi-tensor kernel ``torch._foreach_<name>``, or None where torch lacks it."""
    return getattr(torch, f"_foreach_{name}", None)


def cast_together(tensors: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    """Cast dense tensors of one device to ``dtype`` with one copy into one fresh buffer.

    The results are contiguous views of that buffer, shaped like the inputs.
    """
    flat = _flatten_dense_tensors(tensors).to(dtype)  # type: ignore[no-untyped-call]
    return list(_unflatten_dense_tensors(flat, tensors))  # type: ignore[no-untyped-call]
