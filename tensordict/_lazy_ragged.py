"""Shape operations of lazy stacks with ragged dims (-1 in the batch size) done member by
member where the dims they touch are neither ragged nor the stack dim (a mixin of
``LazyStackedTensorDict``; stacks whose members agree take the dense paths)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._ragged import check_not_ragged
from tensordict._shape import _dims_arg, _norm


class RaggedShapeOps:
    """``repeat``, ``unflatten`` and ``roll`` of a lazy stack whose batch size holds -1."""

    __slots__ = ()

    if TYPE_CHECKING:
        _batch_size: torch.Size
        stack_dim: int
        tensordicts: list[Any]

        def _call(self, op: str) -> str: ...

        def _restack(self, members: Sequence[Any], stack_dim: int | None = None) -> Any: ...

    def _member_dim(self, d: int) -> int:
        """The members' dim for the stack's batch dim ``d`` (not the stack dim)."""
        return d if d < self.stack_dim else d - 1

    def _repeat(self, *repeats: Any) -> Any:
        """Each member repeated along its own dims (a ragged one too: each member tiles its
        own size), the members tiled along the stack dim, as upstream."""
        if -1 not in self._batch_size:
            return super()._repeat(*repeats)  # type: ignore[misc]
        call = self._call("repeat")
        reps = _dims_arg(call, repeats)
        n, sd = len(self._batch_size), self.stack_dim
        extra = len(reps) - n
        if extra < 0:
            raise RuntimeError(
                f"{call}: {len(reps)} repeats for a batch of {n} dims: repeats can not be "
                "fewer than the batch dims"
            )
        own = (*reps[: extra + sd], *reps[extra + sd + 1 :])
        tiles = reps[extra + sd]
        members = [m.repeat(*own) for _ in range(tiles) for m in self.tensordicts]
        return self._restack(members, sd + extra)

    def _unflatten(self, dim: int, unflattened_size: Sequence[int]) -> Any:
        """Split a batch dim other than the stack dim: each member splits its own (refused
        on a ragged dim: the members' sizes differ there)."""
        call = self._call("unflatten")
        d = _norm(call, dim, len(self._batch_size))
        if -1 not in self._batch_size:
            return super()._unflatten(dim, unflattened_size)  # type: ignore[misc]
        check_not_ragged(call, self, range(len(self._batch_size)) if d == self.stack_dim else (d,))
        sizes = tuple(unflattened_size)
        members = [m.unflatten(self._member_dim(d), sizes) for m in self.tensordicts]
        sd = self.stack_dim
        return self._restack(members, sd if d > sd else sd + len(sizes) - 1)

    def _roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Any:
        """Roll along batch dims that are not ragged: the stack dim rotates the members,
        any other dim rolls inside each member."""
        if -1 not in self._batch_size or dims is None:
            return super()._roll(shifts, dims)  # type: ignore[misc]
        call = self._call("roll")
        n, sd = len(self._batch_size), self.stack_dim
        dim_t = (dims,) if isinstance(dims, int) else tuple(dims)
        shift_t = (shifts,) * len(dim_t) if isinstance(shifts, int) else tuple(shifts)
        if len(shift_t) != len(dim_t):
            raise RuntimeError(
                f"{call}: shifts {shift_t} and dims {dim_t} must have the same length"
            )
        norm = [_norm(call, d, n) for d in dim_t]
        check_not_ragged(call, self, norm)
        members = list(self.tensordicts)
        own: list[tuple[int, int]] = []
        for d, k in zip(norm, shift_t, strict=True):
            if d == sd:
                cut = -k % len(members) if members else 0
                members = members[cut:] + members[:cut]
            else:
                own.append((self._member_dim(d), k))
        if own:
            ks, ds = [k for _, k in own], [d for d, _ in own]
            members = [m.roll(ks, ds) for m in members]
        else:
            members = [m.clone() for m in members]  # (a copy, as any roll)
        return self._restack(members)
