"""``pad`` of a collection's batch dims: checked first (``safe``), and in place on request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._nontensor import NonTensor, NonTensorStack, as_stack
from tensordict._ragged import check_not_ragged
from tensordict._shape import PadSizeError
from tensordict._shape import pad as _pad_core


def _check(call: str, batch_size: torch.Size, pad_size: Sequence[int]) -> None:
    sizes = list(pad_size)
    n = len(batch_size)
    if len(sizes) % 2 or len(sizes) // 2 > n:
        raise PadSizeError(
            f"{call}: pad_size needs (before, after) pairs for at most the {n} batch dims, "
            f"got {sizes}"
        )
    for i in range(len(sizes) // 2):
        new = batch_size[i] + sizes[2 * i] + sizes[2 * i + 1]
        if new < 0:
            raise RuntimeError(
                f"{call}: pad_size {sizes} gives batch dim {i} (of size {batch_size[i]}) a "
                f"negative output size {new}"
            )


def _pad_nontensor(value: NonTensor, pad_size: Sequence[int]) -> NonTensorStack:
    """A non-tensor entry padded with None (the pad value is for tensors)."""
    stack = as_stack(value)
    sizes = list(pad_size)
    flat = [0, 0] * (stack.positions.ndim - len(sizes) // 2)
    for i in reversed(range(0, len(sizes), 2)):
        flat += [sizes[i], sizes[i + 1]]
    positions = torch.nn.functional.pad(stack.positions, flat, value=len(stack.values))
    return NonTensorStack._from_positions([*stack.values, None], positions, stack.device)


def pad(
    td: Any,
    pad_size: Sequence[int],
    value: float = 0.0,
    *,
    inplace: bool = False,
    safe: bool = True,
) -> Any:
    """Pad the batch dims: ``pad_size`` holds (before, after) pairs from the first dim on.

    Negative sizes crop. ``safe`` (the default) checks every output size before anything
    is built; ``inplace`` makes ``td`` itself the padded collection (its identity kept).

    >>> import torch
    >>> from tensordict import TensorDict, pad
    >>> pad(TensorDict({"a": torch.ones(2, 3)}, [2]), [1, 1])["a"][:, 0]
    tensor([0., 1., 1., 0.])
    >>> td = TensorDict({"a": torch.ones(2)}, [2])
    >>> pad(td, [0, 1], inplace=True) is td, td["a"]
    (True, tensor([1., 1., 0.]))
    """
    call = "pad"
    check_not_ragged(call, td)  # (members of other sizes: no one padded size)
    if safe:
        _check(call, td.batch_size, pad_size)
    if isinstance(td, NonTensor):
        stack = _pad_nontensor(td, pad_size)
        if not inplace:
            return stack
        if not isinstance(td, NonTensorStack):
            raise RuntimeError(
                f"{call}: inplace=True cannot preserve the identity of a "
                f"{type(td).__name__}: padding makes it a NonTensorStack; use the result"
            )
        td._init(stack.values, stack.positions, stack.device)
        return td
    out = _pad_core(td, pad_size, value)
    if not inplace:
        return out
    return adopt_any(td, out, pad_size)


def adopt_any(td: Any, out: Any, pad_size: Sequence[int]) -> Any:
    """``td`` made, in place, what ``out`` is; a lazy stack takes ``out``'s members, and
    non-tensor stacks keep their identity as nested collections do."""
    from tensordict._context import adopt

    if td._stack_parts() is None:
        stacks = _stacks(td, ())
        adopt(td, out, f"{type(td).__name__}.pad")
        for path, old in stacks.items():
            parent = td
            for key in path[:-1]:
                parent = parent._tensordict[key]
            new = parent._tensordict.get(path[-1])
            if isinstance(new, NonTensorStack):
                old._init(new.values, new.positions, new.device)
                parent._tensordict[path[-1]] = old
        return td
    sd = td.stack_dim
    lazy_out = out._stack_parts() is not None and out.stack_dim == sd
    members = list(out.tensordicts if lazy_out else out.unbind(sd))
    before = pad_size[2 * sd] if 2 * sd < len(pad_size) else 0
    member_pad = [*pad_size[: 2 * sd], *pad_size[2 * sd + 2 :]]
    for j, member in enumerate(td.tensordicts):  # the members left keep their identity
        pos = j + before
        if 0 <= pos < len(members):
            members[pos] = adopt_any(member, members[pos], member_pad)
    td.tensordicts = members
    td._member_bs = members[0].batch_size
    td._batch_size = out.batch_size
    return td


def _stacks(td: Any, prefix: tuple[str, ...]) -> dict[tuple[str, ...], NonTensorStack]:
    found: dict[tuple[str, ...], NonTensorStack] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, NonTensorStack):
            found[(*prefix, key)] = value
        elif hasattr(value, "_tensordict"):
            found.update(_stacks(value, (*prefix, key)))
    return found
