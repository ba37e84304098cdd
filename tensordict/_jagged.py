"""Jagged nested tensor leaves in flat storage: a leaf as its parts, and the leaf rebuilt.

A jagged nested tensor (``layout=torch.jagged``) is a dense ``values`` tensor, whose
dim ``ragged - 1`` packs the rows one after the other, with a 1-d ``offsets`` tensor
(where each row starts, plus the end) and, when built so, a 1-d ``lengths`` tensor. A
consolidated storage holds those *parts* as it holds any leaf (see ``_consolidate``):
a plan lists the jagged leaves as :data:`Jag` entries, expands the leaves into parts
to fill the storage, and collapses the parts' views back into one jagged tensor per
entry. A rebuilt leaf reads and writes the storage through its parts; torch gives it a
new ragged size (``j2``...), as any jagged tensor built from other offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._torch_compat import forget_seqlens, ragged_dim

# a jagged leaf: its index among the leaves (walk order), its ragged dim, and its number
# of parts (2: values and offsets; 3: values, offsets and lengths)
Jag = tuple[int, int, int]
_INDEX_DTYPES = (torch.int64, torch.int32)


def jag_of(index: int, leaf: Any) -> Jag:
    """The :data:`Jag` entry of ``leaf`` (a jagged nested tensor) at ``index``."""
    return (index, ragged_dim(leaf), 2 if leaf.lengths() is None else 3)


def jag_of_nested(leaf: Tensor, call: str, where: object, index: int = 0) -> Jag:
    """:func:`jag_of` for a nested tensor of any layout: a strided one is refused."""
    if leaf.layout is not torch.jagged:
        raise strided_refusal(call, where)
    return jag_of(index, leaf)


def strided_refusal(call: str, where: object) -> NotImplementedError:
    """The error for a strided nested tensor leaf at ``where``: upstream's type, refused."""
    return NotImplementedError(
        f"{call}: the entry {where!r} is a nested tensor of layout torch.strided, which "
        "consolidated storage and transfers do not hold (as upstream); build it with "
        "layout=torch.jagged (torch.nested.nested_tensor(list(value.unbind()), "
        "layout=torch.jagged)) or pad it (torch.nested.to_padded_tensor(value, 0.0))"
    )


def jagged_parts(leaf: Any, nparts: int) -> list[Tensor]:
    """The parts of a jagged ``leaf``: values, offsets and (``nparts`` 3) lengths."""
    parts = [leaf.values(), leaf.offsets()]
    if nparts == 3:
        parts.append(leaf.lengths())
    return parts


def expand(leaves: Sequence[Tensor], jags: Sequence[Jag]) -> list[Tensor]:
    """``leaves`` with each jagged leaf of ``jags`` replaced by its parts, in place."""
    out: list[Tensor] = []
    prev = 0
    for index, _, nparts in jags:
        out.extend(leaves[prev:index])
        out.extend(jagged_parts(leaves[index], nparts))
        prev = index + 1
    out.extend(leaves[prev:])
    return out


def collapse(parts: Sequence[Tensor], jags: Sequence[Jag], check: str | None = None) -> list[Any]:
    """The leaves whose parts are ``parts`` (the inverse of :func:`expand`): each jagged
    leaf a jagged tensor over its parts' views. ``check`` (the call's name) validates
    untrusted parts first, raising :class:`JaggedError`."""
    out: list[Any] = []
    prev = 0
    for index, ragged, nparts in jags:
        first = prev + index - len(out)  # the parts so far, then the plain leaves before it
        out.extend(parts[prev:first])
        values, offsets = parts[first], parts[first + 1]
        lengths = parts[first + 2] if nparts == 3 else None
        if check is not None:
            _check(index, values, offsets, lengths, ragged)
        out.append(
            torch.nested.nested_tensor_from_jagged(values, offsets, lengths, jagged_dim=ragged)
        )
        prev = first + nparts
    out.extend(parts[prev:])
    return out


def overwritten(leaves: Sequence[Tensor], jags: Sequence[Jag], check: bool = False) -> None:
    """After the parts of the jagged ``leaves`` were overwritten in place: forget the
    sequence lengths each caches and, with ``check`` (untrusted bytes), validate them
    (raising :class:`JaggedError`)."""
    for index, ragged, _ in jags:
        leaf: Any = leaves[index]
        forget_seqlens(leaf)
        if check:
            _check(index, leaf.values(), leaf.offsets(), leaf.lengths(), ragged)


class JaggedError(ValueError):
    """Parts of a jagged leaf that do not make one; ``leaf`` is its index (walk order)."""

    def __init__(self, leaf: int, message: str) -> None:
        super().__init__(message)
        self.leaf = leaf


def _check(
    index: int, values: Tensor, offsets: Tensor, lengths: Tensor | None, ragged: int
) -> None:
    """Raise :class:`JaggedError` unless the parts make a jagged tensor whose rows all lie
    inside ``values`` (shapes, dtypes, then the offsets and lengths themselves)."""
    if not 1 <= ragged <= values.dim():
        raise JaggedError(index, f"ragged dim {ragged} with values of shape {tuple(values.shape)}")
    for name, part in (("offsets", offsets), ("lengths", lengths)):
        if part is not None and (part.dim() != 1 or part.dtype not in _INDEX_DTYPES):
            raise JaggedError(
                index, f"{name} must be 1-d int64 or int32, got {part.dtype} {tuple(part.shape)}"
            )
    rows = offsets.numel() - 1
    if rows < 0 or (lengths is not None and lengths.numel() != rows):
        raise JaggedError(
            index,
            f"{offsets.numel()} offsets and {None if lengths is None else lengths.numel()} "
            "lengths do not describe the same rows",
        )
    packed = values.shape[ragged - 1]
    if rows < 1:  # (torch's jagged ops split the values by the rows: none cannot cover them)
        raise JaggedError(index, "no rows: a jagged tensor has at least one")
    starts = offsets[:-1].long()
    if lengths is None:  # the rows tile the values exactly, as torch's ops take them
        ends = offsets[1:].long()
        bad = bool((starts > ends).any()) or int(offsets[0]) != 0 or int(offsets[-1]) != packed
    else:
        ends = starts + lengths.long()
        bad = bool((lengths < 0).any()) or int(ends.max()) > packed or int(offsets[-1]) > packed
    if bad or int(starts.min()) < 0:
        raise JaggedError(
            index, f"rows outside the {packed} packed rows of the values, or not covering them"
        )
