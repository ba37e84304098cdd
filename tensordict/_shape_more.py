"""The rest of upstream's batch-shape operations: movedim, rot90, tile, tensor_split, atleast_*."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._keys import NestedKey
from tensordict._lock_keep import keeps_lock
from tensordict._primitives import CollectionPrimitives
from tensordict._shape import _norm, _shape_via

if TYPE_CHECKING:
    from typing import Self


class MoreShapeOps(CollectionPrimitives):
    """Batch-shape operations written on ``_remap``/``_remap_many`` and the basic ones."""

    __slots__ = ()

    if TYPE_CHECKING:  # from ShapeOps, beside this mixin on the base

        def permute(self, *args: Any, dims: Any = None) -> Self: ...
        def transpose(self, dim0: int, dim1: int) -> Self: ...
        def flip(self, *dims: Any) -> Self: ...
        def repeat(self, *repeats: Any) -> Self: ...
        def unsqueeze(self, dim: int) -> Self: ...
        def reshape(self, *shape: Any) -> Self: ...

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Self:
        """Move batch dims ``source`` to ``destination`` (as ``torch.movedim``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, 3, 4), batch_size=[2, 3, 4]).movedim(0, -1).batch_size
        torch.Size([3, 4, 2])
        """
        call = self._call("movedim")
        n = len(self._batch_size)
        if isinstance(source, int) != isinstance(destination, int) or (
            not isinstance(source, int) and len(source) != len(destination)  # type: ignore[arg-type]
        ):
            raise ValueError(
                f"{call}: source {source} and destination {destination} must have the same "
                "number of elements"
            )
        # a zero-memory dummy whose dim i has size i + 1: its moved shape spells the order
        dummy = torch.zeros(()).expand(*range(1, n + 1))
        try:
            moved = dummy.movedim(source, destination)  # type: ignore[arg-type]
        except RuntimeError as err:  # repeated dims: torch's words, without its backticks
            raise RuntimeError(f"{call}: {str(err).replace('`', '')}") from None
        return self.permute(*[s - 1 for s in moved.shape])

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Self:
        """Swap two batch dims (``transpose``)."""
        return self.transpose(axis0, axis1)

    def swapdims(self, dim0: int, dim1: int) -> Self:
        """Swap two batch dims (``transpose``)."""
        return self.transpose(dim0, dim1)

    def fliplr(self) -> Self:
        """Reverse batch dim 1 (needs at least two batch dims).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.arange(4).view(2, 2), batch_size=[2, 2]).fliplr()["a"]
        tensor([[1, 0],
                [3, 2]])
        """
        if len(self._batch_size) < 2:
            raise RuntimeError(f"{self._call('fliplr')}: requires at least 2 batch dims")
        return self.flip(1)

    def flipud(self) -> Self:
        """Reverse batch dim 0 (needs at least one batch dim)."""
        if not self._batch_size:
            raise RuntimeError(f"{self._call('flipud')}: needs at least 1 batch dim")
        return self.flip(0)

    @keeps_lock
    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Self:
        """Rotate by 90 degrees ``k`` times in the plane of batch ``dims``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.arange(4).view(2, 2), batch_size=[2, 2]).rot90()["a"]
        tensor([[1, 3],
                [0, 2]])
        """
        call = self._call("rot90")
        n = len(self._batch_size)
        if n < 2:
            raise RuntimeError(f"{call}: requires at least 2 batch dims, got {n}")
        d = tuple(_norm(call, x, n) for x in dims)
        new_bs = _shape_via(call, self._batch_size, lambda t: t.rot90(k, d).shape)
        return self._remap(call, lambda x: x.rot90(k, d), new_bs, None)

    def tile(self, dims: Sequence[int]) -> Self:
        """Repeat the batch (``torch.tile``: fewer ``dims`` than batch dims are padded
        with ones on the left).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]).tile((2,)).batch_size
        torch.Size([2, 6])
        """
        reps = tuple(dims)
        n = len(self._batch_size)
        if len(reps) < n:
            reps = (1,) * (n - len(reps)) + reps
        return self.repeat(*reps)

    @keeps_lock
    def repeat_interleave(
        self,
        repeats: int | Tensor,
        dim: int | None = None,
        *,
        output_size: int | None = None,
        inplace: bool = False,
    ) -> Self:
        """Repeat each element along batch ``dim`` (the flattened batch when None).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.arange(2), batch_size=[2]).repeat_interleave(2, 0)["a"]
        tensor([0, 0, 1, 1])
        """
        call = self._call("repeat_interleave")
        if inplace:
            from tensordict._context import adopt

            return adopt(self, self.repeat_interleave(repeats, dim, output_size=output_size), call)  # type: ignore[no-any-return]
        if dim is None:
            return self.reshape(-1).repeat_interleave(repeats, 0, output_size=output_size)
        d = _norm(call, dim, len(self._batch_size))
        new_bs = _shape_via(
            call,
            self._batch_size,
            lambda t: t.repeat_interleave(repeats, d, output_size=output_size).shape,
        )
        return self._remap(
            call,
            lambda x: x.repeat_interleave(repeats, d, output_size=output_size),
            new_bs,
            None if self._names is None else list(self._names),  # the dims keep their names
        )

    @keeps_lock
    def tensor_split(
        self, indices_or_sections: int | Sequence[int] | Tensor, dim: int = 0
    ) -> tuple[Self, ...]:
        """Split along batch ``dim`` as ``torch.tensor_split`` does.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> [t.batch_size[0] for t in TensorDict(batch_size=[5]).tensor_split(2)]
        [3, 2]
        """
        call = self._call("tensor_split")
        d = _norm(call, dim, len(self._batch_size))
        arg: Any = indices_or_sections
        if isinstance(arg, Tensor):
            arg = arg.tolist()
        sizes = _shape_via(
            call, self._batch_size, lambda t: [p.shape for p in t.tensor_split(arg, d)]
        )
        return self._remap_many(call, lambda x: x.tensor_split(arg, d), sizes, None)

    def atleast_1d(self) -> Self:
        """The collection with at least one batch dim (``torch.atleast_1d``)."""
        return self.unsqueeze(0) if not self._batch_size else self

    def atleast_2d(self) -> Self:
        """The collection with at least two batch dims (``torch.atleast_2d``).

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[3]).atleast_2d().batch_size
        torch.Size([1, 3])
        """
        out = self
        while len(out.batch_size) < 2:
            out = out.unsqueeze(0)
        return out

    def atleast_3d(self) -> Self:
        """The collection with at least three batch dims, new dims in front as upstream
        (so ``(n,)`` becomes ``(1, 1, n)`` and ``(m, n)`` becomes ``(1, m, n)``, where
        ``torch.atleast_3d`` of a tensor gives ``(1, n, 1)`` and ``(m, n, 1)``).

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3]).atleast_3d().batch_size
        torch.Size([1, 2, 3])
        """
        out = self
        while len(out.batch_size) < 3:
            out = out.unsqueeze(0)
        return out

    # -------------------------------------------- entries joined into one
    def cat_tensors(
        self, *keys: NestedKey, out_key: NestedKey, dim: int = 0, keep_entries: bool = False
    ) -> Self:
        """Write at ``out_key`` the concatenation of the entries ``keys`` along ``dim``
        (a dim of the leaves; they are removed unless ``keep_entries``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2, 1), b=torch.ones(2, 2), batch_size=[2])
        >>> td.cat_tensors("a", "b", out_key="c", dim=-1)["c"].shape
        torch.Size([2, 3])
        """
        return self._join_entries(torch.cat, keys, out_key, dim, keep_entries)

    def stack_tensors(
        self, *keys: NestedKey, out_key: NestedKey, dim: int = 0, keep_entries: bool = False
    ) -> Self:
        """Write at ``out_key`` the stack of the entries ``keys`` along a new ``dim``
        (a dim of the leaves; they are removed unless ``keep_entries``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
        >>> td.stack_tensors("a", "b", out_key="c", dim=-1)["c"].shape
        torch.Size([2, 2])
        """
        return self._join_entries(torch.stack, keys, out_key, dim, keep_entries)

    def _join_entries(
        self, fn: Any, keys: tuple[NestedKey, ...], out_key: NestedKey, dim: int, keep: bool
    ) -> Self:
        values = [self.get(k) for k in keys]
        self.set(out_key, fn(values, dim))
        if not keep:
            for k in keys:
                self.del_(k)
        return self
