"""Small helpers upstream code imports from ``tensordict.utils``: keys, right-expansion, index
normalisation, membership and de-duplication along a batch dim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._keys import NestedKey, unravel_key

__all__ = [
    "KEY_SEPARATOR",
    "convert_ellipsis_to_idx",
    "expand_as_right",
    "expand_right",
    "infer_size_impl",
    "isin",
    "remove_duplicates",
    "unravel_key_to_tuple",
]

KEY_SEPARATOR = "<KEY_SEP>"
"""A separator that cannot clash with ordinary key names, to join nested keys in one string."""


def unravel_key_to_tuple(key: NestedKey) -> tuple[str, ...]:
    """``key`` as a flat tuple of strings; an invalid key gives ``()`` (it never raises).

    >>> from tensordict.utils import unravel_key_to_tuple
    >>> unravel_key_to_tuple(("a", ("b", ("c",))))
    ('a', 'b', 'c')
    >>> unravel_key_to_tuple("a"), unravel_key_to_tuple(0)
    (('a',), ())
    """
    try:
        out = unravel_key(key)
    except (TypeError, ValueError, KeyError):
        return ()
    return (out,) if isinstance(out, str) else out


def expand_right(tensor: Tensor, shape: Sequence[int]) -> Tensor:
    """``tensor`` with trailing singleton dims added, then expanded to ``shape``.

    >>> import torch
    >>> from tensordict.utils import expand_right
    >>> expand_right(torch.arange(3), (3, 2)).tolist()
    [[0, 0], [1, 1], [2, 2]]
    """
    if tensor.ndim > len(shape):
        raise RuntimeError(
            f"expand_right: tensor has {tensor.ndim} dims, more than the {len(shape)} of "
            f"shape {tuple(shape)}"
        )
    return tensor.reshape(*tensor.shape, *([1] * (len(shape) - tensor.ndim))).expand(*shape)


def expand_as_right(tensor: Any, dest: Any) -> Any:
    """``tensor`` expanded on the right to the shape of ``dest`` (a tensor or a TensorDict).

    >>> import torch
    >>> from tensordict.utils import expand_as_right
    >>> expand_as_right(torch.zeros(3), torch.zeros(3, 4, 5)).shape
    torch.Size([3, 4, 5])
    """
    if dest.ndim < tensor.ndim:
        raise RuntimeError(
            f"expand_as_right: dest has fewer dims ({dest.ndim}) than tensor ({tensor.ndim})"
        )
    bad = [i for i in range(tensor.ndim) if tensor.shape[i] not in (1, dest.shape[i])]
    if bad:
        raise RuntimeError(
            f"expand_as_right: tensor shape {tuple(tensor.shape)} does not fit dest shape "
            f"{tuple(dest.shape)} (dim {bad[0]})"
        )
    for _ in range(dest.ndim - tensor.ndim):
        tensor = tensor.unsqueeze(-1)
    return tensor.expand(dest.shape)


def convert_ellipsis_to_idx(idx: Any, batch_size: Sequence[int]) -> Any:
    """``idx`` with its ellipsis replaced by full slices over ``batch_size``.

    >>> from tensordict.utils import convert_ellipsis_to_idx
    >>> convert_ellipsis_to_idx((..., 0), [1, 2, 3])
    (slice(None, None, None), slice(None, None, None), 0)
    """
    if idx is Ellipsis:
        idx = (Ellipsis,)
    if not isinstance(idx, tuple) or not any(item is Ellipsis for item in idx):
        return idx
    where = [i for i, item in enumerate(idx) if item is Ellipsis]
    if len(where) > 1:
        raise RuntimeError("convert_ellipsis_to_idx: an index can hold at most one ellipsis")
    ndim = len(batch_size) + sum(item is None for item in idx)
    used = len(idx) - 1
    if used - sum(item is None for item in idx) > len(batch_size):
        raise RuntimeError(
            f"convert_ellipsis_to_idx: index {idx!r} has more entries than the "
            f"{len(batch_size)} dims of batch size {tuple(batch_size)}"
        )
    pos = where[0]
    return idx[:pos] + (slice(None),) * (ndim - used) + idx[pos + 1 :]


def infer_size_impl(shape: Sequence[int], numel: int) -> list[int]:
    """``shape`` with its one ``-1`` resolved so that it holds ``numel`` elements.

    >>> from tensordict.utils import infer_size_impl
    >>> infer_size_impl([2, -1], 6)
    [2, 3]
    """
    known = 1
    free = [i for i, s in enumerate(shape) if s == -1]
    if len(free) > 1:
        raise RuntimeError("infer_size_impl: only one dimension can be inferred (-1)")
    for s in shape:
        if s != -1:
            known *= s
    out = list(shape)
    if free:
        if known == 0 or numel % known:
            raise RuntimeError(
                f"infer_size_impl: shape {list(shape)} is invalid for {numel} elements"
            )
        out[free[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"infer_size_impl: shape {list(shape)} is invalid for {numel} elements")
    return out


def _leaf(td: Any, key: NestedKey, missing: str, not_a_tensor: str) -> Tensor:
    """The tensor at ``key``; a ``KeyError`` saying ``missing`` when nothing is there, or
    ``not_a_tensor`` (formatted with the class of what is there) otherwise."""
    value = td.get(key, None)
    if isinstance(value, Tensor):
        return value
    raise KeyError(missing if value is None else not_a_tensor.format(type(value).__name__))


def _batch_dim(call: str, td: Any, dim: int, what: str) -> int:
    n: int = td.ndim
    if n == 0 or not -n <= dim < n:
        raise ValueError(
            f"{call}: The specified dimension '{dim}' is invalid for {what} with batch "
            f"size {tuple(td.batch_size)}."
        )
    return int(dim) % n


def isin(input: Any, reference: Any, key: NestedKey, dim: int = 0) -> Tensor:
    """For each element of ``input`` along batch dim ``dim``: whether its ``key`` entry
    also occurs in ``reference``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.utils import isin
    >>> td = TensorDict({"x": torch.tensor([[1, 2], [3, 4], [1, 2]])}, [3])
    >>> ref = TensorDict({"x": torch.tensor([[1, 2], [5, 6]])}, [2])
    >>> isin(td, ref, "x").tolist()
    [True, False, True]
    """
    call = "isin"
    what = f"{call}: Key {key!r} not found in {{}} or not a tensor."  # (one text for both)
    target = _leaf(input, key, what.format("input"), what.format("input"))
    ref = _leaf(reference, key, what.format("reference"), what.format("reference"))
    if input.ndim != reference.ndim:
        raise ValueError(
            f"{call}: The number of dimensions in the batch size of the input and reference "
            f"must be the same (got {tuple(input.batch_size)} and {tuple(reference.batch_size)})."
        )
    dim = _batch_dim(call, input, dim, "an input TensorDict")
    n = ref.shape[dim]
    _, inverse = torch.unique(torch.cat([ref, target], dim=dim), dim=dim, return_inverse=True)
    return torch.isin(inverse[n:], inverse[:n])


def remove_duplicates(
    input: Any, key: NestedKey, dim: int = 0, *, return_indices: bool = False
) -> Any:
    """``input`` keeping, along batch dim ``dim``, the first element of each distinct value
    of ``key`` (sorted by value); with ``return_indices``, also the inverse indices.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.utils import remove_duplicates
    >>> td = TensorDict({"x": torch.tensor([3, 1, 3]), "y": torch.tensor([0, 1, 2])}, [3])
    >>> out = remove_duplicates(td, "x")
    >>> out["x"].tolist(), out["y"].tolist()
    ([1, 3], [1, 0])
    """
    call = "remove_duplicates"
    tensor = _leaf(
        input,
        key,
        f"{call}: The key {key!r} does not exist in the TensorDict.",
        f"{call}: The key {key!r} does not point to a tensor in the TensorDict (it holds a {{}}).",
    )
    dim = _batch_dim(call, input, dim, "a TensorDict")
    _, inverse, counts = torch.unique(tensor, dim=dim, return_inverse=True, return_counts=True)
    order = torch.sort(inverse, stable=True).indices
    starts = torch.cat([counts.new_zeros(1), counts.cumsum(0)[:-1]])
    first = order[starts]
    out = input[(slice(None),) * dim + (first,)]
    return (out, inverse) if return_indices else out
