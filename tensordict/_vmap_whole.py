"""vmap batches a TensorDict argument whole, and puts the mapped dim back into a
TensorDict output whole: its leaves in one walk, without opening it into a pytree and
rebuilding (and relocking) every level, as upstream does.

A ``TensorDictParams`` is taken as the TensorDict of its leaves, as pytree opens it.
The function sees what the pytree route gives: each tensor batched at the mapped batch
dim, that dim gone from the batch size and the names, non-tensor entries kept, each
level locked as it was; an output gets the dim back at ``out_dims`` (named None). A
negative ``in_dims`` counts from the last batch dim, on either route. A TensorDict with
no mapped dim (``in_dims`` None: the function gets a rebuilt copy, so writes stay
inside), one holding anything else (a ragged lazy stack), mapped over a dim outside its
batch dims, or an output without a tensor still goes through pytree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from tensordict._modules import params_view
from tensordict._nontensor import NonTensor
from tensordict._td import TensorDict
from tensordict._torch_compat import batch_dim_steps

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


def prepare(arg: Any, in_dim: Any) -> tuple[Tensor | None, Any, Any]:
    """For a top-level argument of vmap and its ``in_dim``: a zero-strided tensor of its
    batch shape when vmap can take it whole (vmap checks ``in_dim`` and the mapped size
    on it), else None; the ``in_dim`` to use (a negative one on a TensorDict counted
    from its last batch dim); and the TensorDict to batch (for a ``TensorDictParams``
    the TensorDict of its leaves, which the function gets, as through pytree)."""
    if in_dim is None or type(in_dim) is not int:
        return None, in_dim, arg
    if not isinstance(arg, TensorDict):
        if isinstance(arg, Tensor):
            return None, in_dim, arg
        arg = params_view(arg)  # a TensorDictParams: the TensorDict of its leaves
        if arg is None:
            return None, in_dim, arg
    bs = arg._batch_size
    if -len(bs) <= in_dim < 0:
        in_dim += len(bs)
    if not 0 <= in_dim < len(bs) or not _whole(arg):
        return None, in_dim, arg
    return _ZERO.expand(bs), in_dim, arg


def batch(td: TensorDict, dim: int, level: int) -> TensorDict:
    """``td`` (from :func:`prepare`) with every tensor batched at ``dim`` (a batch dim)
    for vmap level ``level``."""
    add = batch_dim_steps()[0]
    bs = td._batch_size
    return _rebuilt(
        td,
        lambda t: add(t, dim, level),
        lambda size: torch.Size([*size[:dim], *size[dim + 1 :]]),
        lambda names: [*names[:dim], *names[dim + 1 :]],
        len(bs),
    )


def unbatch(out: Any, out_dim: Any, level: int, size: int) -> TensorDict | None:
    """A TensorDict output of vmap with the mapped dim (of ``size``) back at batch dim
    ``out_dim`` of every tensor, or None (the pytree route)."""
    if not isinstance(out, TensorDict) or type(out_dim) is not int:
        return None
    if not 0 <= out_dim <= len(out._batch_size) or not _whole(out) or not _has_tensor(out):
        return None
    remove = batch_dim_steps()[1]
    return _rebuilt(
        out,
        lambda t: remove(t, level, size, out_dim),
        lambda bs: torch.Size([*bs[:out_dim], size, *bs[out_dim:]]),
        lambda names: None,  # (the root's come back through _pytree._name_out_dim)
        len(out._batch_size),
    )


def _has_tensor(td: TensorDict) -> bool:
    return any(
        isinstance(v, Tensor) or (isinstance(v, TensorDict) and _has_tensor(v))
        for v in td._tensordict.values()
    )


def _rebuilt(
    td: TensorDict,
    leaf: Callable[[Tensor], Tensor],
    batch_size: Callable[[torch.Size], torch.Size],
    names: Callable[[list[Any]], list[Any] | None],
    ndim: int,
    under_lock: bool = False,
) -> TensorDict:
    """``td`` rebuilt level by level: ``leaf`` of each tensor, ``batch_size`` and
    ``names`` of each level's (``ndim`` batch dims of the root are mapped); each level
    locked as it was (a locked level locks its whole subtree once)."""
    new_bs = batch_size(td._batch_size)
    locked = td._is_locked
    entries: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = leaf(value)
        elif isinstance(value, NonTensor):
            entries[key] = value._with(new_bs, value.device)
        else:
            entries[key] = _rebuilt(value, leaf, batch_size, names, ndim, under_lock or locked)
    kept = None if td._names is None else names(td._names)
    out = type(td)._new_unsafe(entries, new_bs, td._device, kept)
    if locked and not under_lock:
        out.lock_()
    return out
