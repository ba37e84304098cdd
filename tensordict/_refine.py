"""Whether the nested TensorDicts of a TensorDict can take a longer batch size."""

from __future__ import annotations

from typing import Any

import torch

from tensordict._batch import starts_with
from tensordict._nontensor import NonTensor


def misfits(td: Any, size: torch.Size, prefix: tuple[str, ...]) -> list[str]:
    """The entries of ``td`` (a TensorDict) that keep it from taking batch size ``size``:
    ``"key shape"`` for each leaf whose shape does not start with ``size``. A nested
    TensorDict whose batch size is a shorter prefix of ``size`` is looked into: it takes
    ``size`` too when its own entries allow it (upstream refines it so)."""
    bad: list[str] = []
    for key, value in td._tensordict.items():
        if isinstance(value, NonTensor):
            continue
        path = (*prefix, key)
        if hasattr(value, "_tensordict"):  # a dense nested level
            shape = value._batch_size
            if starts_with(shape, size):
                continue
            if len(shape) < len(size) and size[: len(shape)] == shape:
                bad.extend(misfits(value, size, path))
                continue
        else:
            shape = value.shape
            if starts_with(shape, size):
                continue
        bad.append(f"{path if len(path) > 1 else path[0]!r} {tuple(shape)}")
    return bad


def grow_nested(td: Any, size: torch.Size) -> None:
    """Give every nested TensorDict of ``td`` whose batch size is a shorter prefix of
    ``size`` the batch size ``size`` (after :func:`misfits` found none in the way)."""
    for value in td._tensordict.values():
        if hasattr(value, "_tensordict") and not isinstance(value, NonTensor):
            shape = value._batch_size
            if len(shape) < len(size) and size[: len(shape)] == shape:
                value.batch_size = size
