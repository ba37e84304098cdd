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
        nested = hasattr(value, "_tensordict")  # a dense nested level
        shape = value._batch_size if nested else value.shape
        if starts_with(shape, size):
            continue
        path = (*prefix, key)
        if nested and _refinable(shape, size):
            bad.extend(misfits(value, size, path))
        else:
            bad.append(f"{path if len(path) > 1 else path[0]!r} {tuple(shape)}")
    return bad


def _refinable(batch_size: torch.Size, size: torch.Size) -> bool:
    """Whether ``batch_size`` is a shorter prefix of ``size``."""
    return len(batch_size) < len(size) and starts_with(size, batch_size)


def grow_nested(td: Any, size: torch.Size) -> None:
    """Give every nested TensorDict of ``td`` whose batch size is a shorter prefix of
    ``size`` the batch size ``size`` (after :func:`misfits` found none in the way)."""
    for value in td._tensordict.values():
        nested = hasattr(value, "_tensordict") and not isinstance(value, NonTensor)
        if nested and _refinable(value._batch_size, size):
            value.batch_size = size
