"""vmap batches a TensorDict argument whole, and puts the mapped dim back into a
TensorDict output whole: its leaves in one walk, without opening it into a pytree and
rebuilding (and relocking) every level, as upstream does.

What comes out is what the pytree route gives: each tensor batched at the mapped batch
dim, that dim gone from the batch size and the names (and back at ``out_dims``, named
None), non-tensor entries kept, the lock kept. A TensorDict holding anything else (a
ragged lazy stack), mapped over a dim outside its batch dims, or an output without a
tensor, still goes through pytree.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._nontensor import NonTensor
from tensordict._td import TensorDict
from tensordict._torch_compat import add_batch_dim, remove_batch_dim

_ZERO = torch.zeros(())


def _whole(td: TensorDict) -> bool:
    """Whether every entry of ``td``, at every level, is a tensor, non-tensor data or a
    nested TensorDict of its kind."""
    for value in td._tensordict.values():
        if not isinstance(value, (Tensor, NonTensor)) and not (
            isinstance(value, TensorDict) and _whole(value)
        ):
            return False
    return True


def stand_in(arg: Any, in_dim: Any) -> Tensor | None:
    """A zero-strided tensor of the batch shape of a TensorDict vmap can take whole (it
    checks ``in_dim`` and the mapped size on it), or None."""
    if not isinstance(arg, TensorDict):
        return None
    bs = arg._batch_size
    if in_dim is not None and not (type(in_dim) is int and -len(bs) <= in_dim < len(bs)):
        return None
    if not _whole(arg):
        return None
    return _ZERO.expand(bs)


def batch(td: TensorDict, dim: int, level: int) -> TensorDict:
    """``td`` with every tensor batched at ``dim`` (a batch dim) for vmap level ``level``."""
    out = _batched(td, dim, level)
    if td._is_locked:
        out.lock_()
    return out


def _batched(td: TensorDict, dim: int, level: int) -> TensorDict:
    bs = td._batch_size
    new_bs = torch.Size([*bs[:dim], *bs[dim + 1 :]])
    entries: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = add_batch_dim(value, dim, level)
        elif isinstance(value, NonTensor):
            entries[key] = value._with(new_bs, value.device)
        else:
            entries[key] = _batched(value, dim, level)
    names = td._names
    if names is not None:
        names = [*names[:dim], *names[dim + 1 :]]
    return type(td)._new_unsafe(entries, new_bs, td._device, names)


def unbatch(out: Any, out_dim: Any, level: int, size: int) -> TensorDict | None:
    """A TensorDict output of vmap with the mapped dim (of ``size``) back at batch dim
    ``out_dim`` of every tensor, or None (the pytree route)."""
    if not isinstance(out, TensorDict) or type(out_dim) is not int:
        return None
    if not 0 <= out_dim <= len(out._batch_size) or not _whole(out) or not _has_tensor(out):
        return None
    whole = _unbatched(out, out_dim, level, size)
    if out._is_locked:
        whole.lock_()
    return whole


def _has_tensor(td: TensorDict) -> bool:
    return any(
        isinstance(v, Tensor) or (isinstance(v, TensorDict) and _has_tensor(v))
        for v in td._tensordict.values()
    )


def _unbatched(td: TensorDict, dim: int, level: int, size: int) -> TensorDict:
    bs = td._batch_size
    new_bs = torch.Size([*bs[:dim], size, *bs[dim:]])
    entries: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = remove_batch_dim(value, level, size, dim)
        elif isinstance(value, NonTensor):
            entries[key] = value._with(new_bs, value.device)
        else:
            entries[key] = _unbatched(value, dim, level, size)
    return type(td)._new_unsafe(entries, new_bs, td._device, None)  # (names: see _pytree)
