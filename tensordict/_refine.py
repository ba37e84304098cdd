"""Whether the nested TensorDicts of a TensorDict can take a longer batch size."""

from __future__ import annotations

from typing import Any

import torch

from tensordict._batch import starts_with
from tensordict._nontensor import NonTensor


def misfits(
    td: Any, size: torch.Size, prefix: tuple[str, ...]
) -> list[tuple[tuple[str, ...], Any]]:
    """The entries of ``td`` (a TensorDict) that keep it from taking batch size ``size``:
    ``(path, shape)`` for each leaf whose shape does not start with ``size``. A nested
    TensorDict whose batch size is a shorter prefix of ``size`` is looked into: it takes
    ``size`` too when its own entries allow it (upstream refines it so)."""
    bad: list[tuple[tuple[str, ...], Any]] = []
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
            bad.append((path, shape))
    return bad


def misfit_message(bad: list[tuple[tuple[str, ...], Any]], size: torch.Size) -> str:
    """The end of the error for the :func:`misfits` ``bad`` of batch size ``size``: each
    path with its shape, then upstream's sentence about the first one.

    >>> import torch
    >>> text = misfit_message([(("z", "smth"), torch.Size([1]))], torch.Size([3]))
    >>> text.startswith("shapes of ('z', 'smth') (1,) do not start with it")
    True
    >>> "the Tensor smth has shape torch.Size([1]) which is incompatible" in text
    True
    """
    listed = ", ".join(f"{p if len(p) > 1 else p[0]!r} {tuple(shape)}" for p, shape in bad)
    path, shape = bad[0]
    return (
        f"shapes of {listed} do not start with it (the Tensor {path[-1]} has shape "
        f"{torch.Size(shape)} which is incompatible with the batch-size {torch.Size(size)})"
    )


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
