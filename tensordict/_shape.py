"""Shape operations over the batch dimensions: every leaf keeps its trailing feature dims."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._batch import dim_error, permute_args
from tensordict._context import adopt, record
from tensordict._lock_keep import keep_lock, keeps_lock
from tensordict._nontensor import (
    NonTensor,
    NonTensorDataBase,
    NonTensorEntry,
    NonTensorStack,
    as_stack,
)
from tensordict._primitives import CollectionPrimitives, as_collection
from tensordict._ragged import check_not_ragged, minus_one_error
from tensordict._switches import set_lazy_legacy
from tensordict._torch_compat import split_with_sizes
from tensordict._unbatched import where_keeping_unbatched
from tensordict._views import with_non_tensor

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import TensorDictBase

Names = list[str | None] | None


def _dims_arg(call: str, dims: tuple[Any, ...]) -> tuple[int, ...]:
    """``f(1, 0)`` and ``f((1, 0))`` both mean dims (1, 0)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list, torch.Size)):
        dims = tuple(dims[0])
    for d in dims:
        if not isinstance(d, int):
            raise TypeError(f"{call}: dims must be ints, got {dims!r}")
    return dims


def _made_by(td: Any, op: str) -> tuple[tuple[Any, ...], Any] | None:
    """``(args, source)`` when ``td`` is ``source.<op>(*args)`` (as recorded), else None:
    upstream's legacy views give the source back when undone."""
    last = getattr(td, "_last_op", None)
    if last is None or last[0] != op or last[2] is None:
        return None
    return last[1], last[2]


def _lazy_legacy() -> bool:
    """The ``set_lazy_legacy`` flag (read directly: shape methods ask on every call)."""
    return set_lazy_legacy._state is True


class GatherIndexError(ValueError, NotImplementedError):
    """A gather index whose dims are not the batch dims (upstream: NotImplementedError)."""


class PermuteError(ValueError, RuntimeError):
    """Dims that are not a permutation of the batch dims (either type catches it)."""


class PermuteIndexError(ValueError, IndexError):
    """A permute dim out of range (either type catches it)."""


def _norm(call: str, dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise dim_error(call, dim, ndim)
    return dim % ndim


_PERMUTE_PLANS: dict[tuple[int, tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]] = {}


def _permute_plan(
    call: str, dims: tuple[Any, ...], n: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``permute(*dims)`` of ``n`` batch dims checked: the normalised order and the positions
    it moves; remembered for plain int arguments, which the next call then skips checking."""
    order = _dims_arg(call, dims)
    if len(order) != n:
        raise PermuteError(f"{call}: dims {order} name {len(order)} dims, the batch has {n}")
    try:
        norm = tuple(_norm(call, d, n) for d in order)
    except IndexError as err:
        raise PermuteIndexError(str(err)) from None
    if sorted(norm) != list(range(n)):
        raise PermuteError(f"{call}: dims {order} are not a permutation of the {n} batch dims")
    plan = norm, tuple(i for i, d in enumerate(norm) if i != d)
    if all(d.__class__ is int for d in dims) and len(_PERMUTE_PLANS) < 4096:
        _PERMUTE_PLANS[n, dims] = plan
    return plan


def _split_check(call: str, bs: torch.Size, split_size: Any, dim: int) -> int:
    """The normalised dim of ``split``, after upstream's checks (and their words)."""
    n = len(bs)
    if not -n <= dim < n:
        raise IndexError(f"{call}: Incompatible dim {dim} for a batch of {n} dims")
    d = dim % n
    if isinstance(split_size, int) and not isinstance(split_size, bool):
        if split_size <= 0:
            raise ValueError(f"{call}: split_size must be positive, got {split_size}.")
        return d
    if not isinstance(split_size, (list, tuple)) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in split_size
    ):
        raise TypeError(f"{call}: split_size must be int or list of ints, got {split_size!r}")
    if not split_size:
        raise RuntimeError(f"{call}: Insufficient number of elements in split_size []")
    if min(split_size) < 0:
        raise RuntimeError(
            f"{call}: split_size entries must be non-negative, got {list(split_size)}"
        )
    if sum(split_size) != bs[d]:
        raise RuntimeError(
            f"{call}: split_with_sizes expects split_size to sum exactly to {bs[d]} (the "
            f"size of batch dim {d}), got {list(split_size)}"
        )
    return d


def _split_lengths(n: int, split_size: int | Sequence[int]) -> list[int]:
    """The lengths ``split`` cuts a dim of size ``n`` into (checked by ``_split_check``):
    pieces of ``split_size`` and a shorter last one, or the sizes given; as torch, a dim
    of size 0 gives one empty piece."""
    if isinstance(split_size, int):
        return [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
    return list(split_size)


def _dummy(bs: torch.Size) -> Tensor:
    """A zero-strided tensor of shape ``bs``: torch's shape rules, no memory."""
    return torch.zeros(()).expand(bs)


def _shape_via(call: str, bs: torch.Size, fn: Callable[[Tensor], Any]) -> Any:
    """Apply ``fn`` to a dummy of the batch shape, re-raising torch's error with context
    (a ragged dim, -1, has no dummy: refused first)."""
    if -1 in bs:
        raise minus_one_error(call, bs)
    try:
        return fn(_dummy(bs))
    except (RuntimeError, IndexError, ValueError, TypeError) as err:
        raise type(err)(f"{call}: not valid for batch_size {tuple(bs)}: {err}") from None


def _shallow(x: Any) -> Any:
    """Tensors as they are; nested collections as new structures over the same leaves."""
    return x if isinstance(x, Tensor) else x.clone(recurse=False)


def _infer_shape(call: str, dims: tuple[int, ...], bs: torch.Size) -> torch.Size:
    """``dims`` with one ``-1`` resolved so that it holds as many elements as ``bs``."""
    numel = bs.numel()
    known = 1
    free = None
    for i, d in enumerate(dims):
        if d == -1 and free is None:
            free = i
        elif d < 0:
            raise RuntimeError(f"{call}: invalid shape {tuple(dims)} for batch_size {tuple(bs)}")
        else:
            known *= d
    if free is not None:
        if known == 0 or numel % known:
            raise RuntimeError(
                f"{call}: not valid for batch_size {tuple(bs)}: shape {list(dims)} is invalid "
                f"for input of size {numel}"
            )
        dims = (*dims[:free], numel // known, *dims[free + 1 :])
    elif known != numel:
        raise RuntimeError(
            f"{call}: not valid for batch_size {tuple(bs)}: shape {list(dims)} is invalid for "
            f"input of size {numel}"
        )
    return torch.Size(dims)


class PadSizeError(ValueError, RuntimeError):
    """A ``pad_size`` that does not fit the batch dims (a ValueError here, and the
    RuntimeError upstream raises)."""


class RefineNamesError(ValueError, RuntimeError):
    """``refine_names`` asked to rename a named dim: a ``ValueError`` here, and the
    ``RuntimeError`` upstream raises."""


def _trail(mask: Tensor, x_ndim: int, ndim: int) -> Tensor:
    """``mask`` (batch-shaped) viewed with singleton dims for ``x``'s trailing dims."""
    return mask.reshape((*mask.shape, *([1] * (x_ndim - ndim))))


class ShapeOps(CollectionPrimitives):
    """reshape, view, permute, expand, split, ... acting on the batch dimensions only."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def names(self) -> list[str | None]: ...

    def _names_kept(self) -> Names:
        return None if self._names is None else list(self._names)

    # ------------------------------------------------------------- reshaping
    def reshape(self, *shape: Any, size: Any = None, inplace: bool = False) -> Self:
        """Reshape the batch dims (``-1`` infers one size); trailing dims are kept.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3, 4, 5)}, [3, 4])
        >>> td.reshape(-1)["a"].shape
        torch.Size([12, 5])
        """
        out = self._reshape("reshape", shape if size is None else (size,))
        if inplace:
            return adopt(self, out, self._call("reshape"))  # type: ignore[no-any-return]
        return keep_lock(self, out)

    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Self:
        """Like :meth:`reshape`, but every leaf must be viewable (no copy); given a dtype,
        every leaf is viewed as that dtype (``batch_size`` then names the result's)."""
        if len(shape) == 1 and type(shape[0]) is torch.dtype:  # (dtype takes no subclass)
            dtype = shape[0]
            if batch_size is None:  # (a lazy stack stays one, viewed member by member)
                return keep_lock(self, self.apply(lambda x: x.view(dtype)))
            return keep_lock(self, self.apply(lambda x: x.view(dtype), batch_size=batch_size))
        given = size if size is not None else batch_size
        if given is not None:
            shape = (given,)
        if set_lazy_legacy._state is True:  # upstream's legacy views: undoing a view gives
            call = self._call("view")  # its source back (the flag read inline: a hot path)
            new_bs = _infer_shape(call, _dims_arg(call, shape), self._batch_size)
            if new_bs == self._batch_size:
                return self
            made = _made_by(self, "view")
            if made is not None and made[1].batch_size == new_bs:
                return made[1]  # type: ignore[no-any-return]
        return record(keep_lock(self, self._reshape("view", shape)), "view", (), self)

    def _reshape(self, method: str, shape: tuple[Any, ...]) -> Self:
        call = self._call(method)
        bs = self._batch_size
        if -1 in bs:  # a ragged dim has no one size to regroup
            check_not_ragged(call, self)
        if len(shape) == 1 and type(shape[0]) is int and shape[0] == bs.numel():
            new_bs = torch.Size(shape)  # one dim holding every element: nothing to infer
        else:
            new_bs = _infer_shape(call, _dims_arg(call, shape), bs)
        n = len(bs)
        if len(new_bs) == 1 and n > 1:  # (so new_bs differs from bs: tested first)
            # merging every batch dim: flatten needs no per-leaf target shape
            if method == "reshape":
                return self._remap(call, lambda x: x.flatten(0, n - 1), new_bs, None)
            b0, n1 = new_bs[0], n + 1

            def merged(x: Any) -> Any:
                if x.__class__ is Tensor or isinstance(x, Tensor):  # (the first test: cheaper)
                    try:  # the common leaves: no feature dim, or one (then -1 is that dim)
                        nd = x.ndim
                        if nd == n1:
                            return x.view(b0, -1)
                        if nd == n:
                            return x.view(b0)
                    except RuntimeError:  # no elements (-1 is ambiguous), or not viewable
                        pass
                    out = x.flatten(0, n - 1)
                    if out._is_view() or not out.numel():
                        return out
                # a nested collection, or flatten copied (then view raises torch's error)
                return x.view(*new_bs, *x.shape[n:])

            return self._remap(call, merged, new_bs, None)
        if new_bs == bs:
            return self._remap(call, _shallow, bs, self._names_kept())
        targets: dict[torch.Size, tuple[int, ...]] = {}  # leaves of one shape share a target
        as_view = method == "view"

        def fn(x: Any) -> Any:
            shape = x.shape
            target = targets.get(shape)
            if target is None:
                target = targets[shape] = (*new_bs, *shape[n:])
            if not target:
                return x.view(()) if as_view else x.reshape(())
            return x.view(*target) if as_view else x.reshape(*target)

        return self._remap(call, fn, new_bs, None)

    @keeps_lock
    def flatten(self, start_dim: int = 0, end_dim: int = -1, inplace: bool = False) -> Self:
        """Merge batch dims ``start_dim..end_dim`` into one.

        ``inplace=True`` makes this collection the result.
        """
        out = self._flatten(start_dim, end_dim)
        return adopt(self, out, self._call("flatten")) if inplace else out

    def _flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
        """The engine of :meth:`flatten`."""
        n = len(self._batch_size)
        if n == 0:
            return self.unsqueeze(0)
        s = _norm(self._call("flatten"), start_dim, n)
        e = _norm(self._call("flatten"), end_dim, n)
        if s > e:
            raise ValueError(
                f"{self._call('flatten')}: start_dim {start_dim} comes after end_dim {end_dim}"
            )
        if s == e:  # nothing merged: the same entries (a lazy stack keeps its members)
            return record(_shallow(self), "flatten", (s, e), self)  # type: ignore[no-any-return]
        bs = self._batch_size
        check_not_ragged(self._call("flatten"), self, range(s, e + 1))
        new_bs = torch.Size([*bs[:s], bs[s : e + 1].numel(), *bs[e + 1 :]])
        names = None
        if self._names is not None:
            names = [*self._names[:s], None, *self._names[e + 1 :]]
        out = self._remap(self._call("flatten"), lambda x: x.flatten(s, e), new_bs, names)
        return record(out, "flatten", (s, e), self)

    @keeps_lock
    def unflatten(self, dim: int, unflattened_size: Sequence[int], inplace: bool = False) -> Self:
        """Split batch dim ``dim`` into ``unflattened_size``.

        ``inplace=True`` makes this collection the result.
        """
        out = self._unflatten(dim, unflattened_size)
        return adopt(self, out, self._call("unflatten")) if inplace else out

    def _unflatten(self, dim: int, unflattened_size: Sequence[int]) -> Self:
        """The engine of :meth:`unflatten`."""
        n = len(self._batch_size)
        d = _norm(self._call("unflatten"), dim, n)
        sizes = tuple(unflattened_size)
        new_bs = _shape_via(
            self._call("unflatten"),
            self._batch_size,
            lambda t: t.unflatten(d, sizes).shape,  # type: ignore[no-untyped-call]
        )
        names = None
        if self._names is not None:
            names = [*self._names[:d], *([None] * len(sizes)), *self._names[d + 1 :]]
        out = self._remap(self._call("unflatten"), lambda x: x.unflatten(d, sizes), new_bs, names)
        return record(out, "unflatten", (d, sizes), self)

    def squeeze(self, dim: int | tuple[int, ...] | None = None) -> Self:
        """Drop batch dims of size one (all of them, or those of ``dim`` that have size one)."""
        bs = self._batch_size
        n = len(bs)
        if dim is None:
            dims = tuple(i for i, s in enumerate(bs) if s == 1)
        else:
            asked = (dim,) if isinstance(dim, int) else tuple(dim)
            norm = (_norm(self._call("squeeze"), d, n) for d in asked)
            dims = tuple(d for d in norm if bs[d] == 1)
        if not dims:
            out = self._remap(self._call("squeeze"), _shallow, bs, self._names_kept())
            return keep_lock(self, out)
        new_bs = torch.Size([s for i, s in enumerate(bs) if i not in dims])
        names = None
        if self._names is not None:
            names = [nm for i, nm in enumerate(self._names) if i not in dims]

        def fn(x: Any) -> Any:  # non-tensor entries too: an unsqueezed value is one again
            return x.squeeze(dims)

        out = self._remap(self._call("squeeze"), fn, new_bs, names, fn)
        return record(keep_lock(self, out), "squeeze", (), self)

    def unsqueeze(self, dim: int) -> Self:
        """Insert a batch dim of size one at ``dim``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(3, 4)}, [3, 4]).unsqueeze(-1).batch_size
        torch.Size([3, 4, 1])
        """
        bs = self._batch_size
        d = _norm(self._call("unsqueeze"), dim, len(bs) + 1)
        new_bs = torch.Size([*bs[:d], 1, *bs[d:]])
        names = None if self._names is None else [*self._names[:d], None, *self._names[d:]]

        def fn(x: Any) -> Any:  # non-tensor entries too: one value per element (a stack)
            return x.unsqueeze(d)

        out = self._remap(self._call("unsqueeze"), fn, new_bs, names, fn)
        return record(keep_lock(self, out), "unsqueeze", (d,), self)

    def permute(self, *args: Any, dims: Any = None) -> Self:
        """Reorder the batch dims: ``permute(1, 0)``, ``permute((1, 0))``, ``permute(dims=...)``."""
        dims = args if dims is None else permute_args(self._call("permute"), args, dims)
        n = len(self._batch_size)
        try:
            plan = _PERMUTE_PLANS.get((n, dims))
        except TypeError:  # (an unhashable argument: a list of dims)
            plan = None
        if plan is None or not all(d.__class__ is int for d in dims):
            plan = _permute_plan(self._call("permute"), dims, n)
        norm, swapped = plan
        if not swapped:  # the identity, as upstream: the collection itself
            return self
        call = self._call("permute")
        made = _made_by(self, "permute") if _lazy_legacy() else None
        if made is not None and all(made[0][0][d] == i for i, d in enumerate(norm)):
            return made[1]  # type: ignore[no-any-return]  # legacy: undone, the source
        bs = self._batch_size
        new_bs = torch.Size([bs[d] for d in norm])
        names = None if self._names is None else [self._names[d] for d in norm]
        if len(swapped) == 2:  # a single swap: transpose needs no per-leaf order
            a, b = swapped
            out = self._remap(call, lambda x: x.transpose(a, b), new_bs, names)
            return record(keep_lock(self, out), "permute", (norm,), self)
        orders: dict[int, tuple[int, ...]] = {}  # leaves of one ndim share one order

        def fn(x: Any) -> Any:
            order = orders.get(x.ndim)
            if order is None:
                order = orders[x.ndim] = (*norm, *range(n, x.ndim))
            return x.permute(*order)

        out = self._remap(call, fn, new_bs, names)
        return record(keep_lock(self, out), "permute", (norm,), self)

    def transpose(self, dim0: int, dim1: int) -> Self:
        """Swap two batch dims."""
        n = len(self._batch_size)
        a = _norm(self._call("transpose"), dim0, n)
        b = _norm(self._call("transpose"), dim1, n)
        order = list(range(n))
        order[a], order[b] = order[b], order[a]
        return record(self.permute(*order), "transpose", (a, b), self)

    @keeps_lock
    def expand(self, *shape: Any) -> Self:
        """Broadcast the batch to ``shape`` (new leading dims allowed); a view, no copy.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> big = TensorDict({"a": torch.zeros(3)}, []).expand(1000)
        >>> big["a"].shape, big["a"].stride()
        (torch.Size([1000, 3]), (0, 1))
        """
        dims = _dims_arg(self._call("expand"), shape)
        bs = self._batch_size
        new_bs = _shape_via(self._call("expand"), bs, lambda d: d.expand(dims).shape)
        n = len(bs)
        names = None
        if self._names is not None:
            names = [*([None] * (len(new_bs) - n)), *self._names]
        return self._remap(
            self._call("expand"),
            lambda x: x.expand((*new_bs, *x.shape[n:])),
            new_bs,
            names,
            # non-tensor entries as their own expand: one value per element (a stack)
            lambda v: v.expand((*new_bs, *v.batch_size[n:])),
        )

    @keeps_lock
    def expand_as(self, other: Tensor | CollectionPrimitives) -> Self:
        """Expand to the shape of ``other``: a tensor's shape as batch size, or, for a
        TensorDict, each leaf to the shape of ``other``'s leaf at the same key (upstream).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.ones(3, 1), batch_size=[3])
        >>> td.expand_as(TensorDict(a=torch.zeros(2, 3, 5), batch_size=[2, 3]))["a"].shape
        torch.Size([2, 3, 5])
        """
        if isinstance(other, Tensor):
            return self.expand(other.shape)
        return self.apply(lambda x, y: x.expand_as(y), other, batch_size=other.batch_size)

    def broadcast_to(self, shape: Sequence[int]) -> Self:
        """Alias of :meth:`expand` with one shape argument."""
        return self.expand(tuple(shape))

    @keeps_lock
    def repeat(self, *repeats: Any, inplace: bool = False) -> Self:
        """Tile the batch dims (``repeats`` per batch dim, extra ones add leading dims).

        ``inplace=True`` makes this collection the result.
        """
        out = self._repeat(*repeats)
        return adopt(self, out, self._call("repeat")) if inplace else out

    def _repeat(self, *repeats: Any) -> Self:
        """The engine of :meth:`repeat`."""
        reps = _dims_arg(self._call("repeat"), repeats)
        bs = self._batch_size
        n = len(bs)
        new_bs = _shape_via(self._call("repeat"), bs, lambda d: d.repeat(reps).shape)
        names = None
        if self._names is not None:  # the dims keep their names; new leading dims have none
            names = [None] * (len(new_bs) - n) + list(self._names)
        return self._remap(
            self._call("repeat"), lambda x: x.repeat((*reps, *([1] * (x.ndim - n)))), new_bs, names
        )

    # --------------------------------------------------------- slicing kinds
    @keeps_lock
    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Self, ...]:
        """Split along batch dim ``dim`` into pieces of ``split_size`` (or the given sizes)."""
        bs = self._batch_size
        d = _split_check(self._call("split"), bs, split_size, dim)
        lengths = _split_lengths(bs[d], split_size)
        sizes = [torch.Size([*bs[:d], n, *bs[d + 1 :]]) for n in lengths]

        def pieces(x: Any) -> Any:  # a plain tensor skips Tensor.split's Python wrapper
            if x.__class__ is Tensor:
                return split_with_sizes(x, lengths, d)
            return x.split(split_size, d)

        return self._remap_many(self._call("split"), pieces, sizes, self._names_kept())

    @keeps_lock
    def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]:
        """Split along batch dim ``dim`` into ``chunks`` nearly equal pieces."""
        d = _norm(self._call("chunk"), dim, len(self._batch_size))
        sizes = _shape_via(
            self._call("chunk"),
            self._batch_size,
            lambda t: [p.shape for p in t.chunk(chunks, d)],
        )
        return self._remap_many(
            self._call("chunk"), lambda x: x.chunk(chunks, d), sizes, self._names_kept()
        )

    def unbind(self, dim: int = 0) -> tuple[Self, ...]:
        """The slices along batch dim ``dim``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> [t["a"].tolist() for t in TensorDict({"a": torch.arange(3)}, [3]).unbind(0)]
        [0, 1, 2]
        """
        bs = self._batch_size
        d = _norm(self._call("unbind"), dim, len(bs))
        if bs[d] < 0:  # -1: no one count of slices
            check_not_ragged(self._call("unbind"), self, (d,))
        new_bs = torch.Size([*bs[:d], *bs[d + 1 :]])
        names = None
        if self._names is not None:
            names = [*self._names[:d], *self._names[d + 1 :]]
        return self._remap_many(
            self._call("unbind"), lambda x: x.unbind(d), [new_bs] * bs[d], names
        )

    @keeps_lock
    def narrow(self, dim: int, start: int, length: int) -> Self:
        """``length`` elements of batch dim ``dim`` from ``start`` (a view)."""
        d = _norm(self._call("narrow"), dim, len(self._batch_size))
        new_bs = _shape_via(
            self._call("narrow"),
            self._batch_size,
            lambda t: t.narrow(d, start, length).shape,
        )
        return self._remap(
            self._call("narrow"), lambda x: x.narrow(d, start, length), new_bs, self._names_kept()
        )

    @keeps_lock
    def flip(self, *dims: Any) -> Self:
        """Reverse the order of elements along batch ``dims``."""
        n = len(self._batch_size)
        norm = tuple(_norm(self._call("flip"), d, n) for d in _dims_arg(self._call("flip"), dims))
        return self._remap(
            self._call("flip"), lambda x: x.flip(norm), self._batch_size, self._names_kept()
        )

    @keeps_lock
    def roll(
        self,
        shifts: int | Sequence[int],
        dims: int | Sequence[int] | None = None,
        inplace: bool = False,
    ) -> Self:
        """Roll elements along batch ``dims`` (over the flattened batch when ``dims`` is None).

        ``inplace=True`` makes this collection the result.
        """
        out = self._roll(shifts, dims)
        return adopt(self, out, self._call("roll")) if inplace else out

    def _roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Self:
        """The engine of :meth:`roll`."""
        bs = self._batch_size
        if dims is None:
            if isinstance(shifts, Sequence):
                raise TypeError(f"{type(self).__name__}.roll: without dims, shifts must be one int")
            return self.reshape(-1).roll(shifts, 0).reshape(bs)
        n = len(bs)
        dim_t = (dims,) if isinstance(dims, int) else tuple(dims)
        norm = tuple(_norm(self._call("roll"), d, n) for d in dim_t)
        return self._remap(
            self._call("roll"), lambda x: x.roll(shifts, norm), bs, self._names_kept()
        )

    def gather(self, dim: int, index: Tensor, out: Any = None, inplace: bool = False) -> Self:
        """Gather along batch dim ``dim`` with a batch-shaped ``index`` (as ``torch.gather``);
        the result is written into ``out``, or into this collection with ``inplace``."""
        if inplace and out is not None:
            raise ValueError(f"{self._call('gather')}: out and inplace are mutually exclusive")
        result = self._gather(dim, index, out)
        return adopt(self, result, self._call("gather")) if inplace else result

    def _gather(self, dim: int, index: Tensor, out: Any = None) -> Self:
        """The engine of :meth:`gather`."""
        n = len(self._batch_size)
        d = _norm(self._call("gather"), dim, n)
        if index.ndim != n:
            raise GatherIndexError(
                f"{type(self).__name__}.gather: index must have {n} dims (the batch dims), got "
                f"shape {tuple(index.shape)} (index.ndim={index.ndim})"
            )
        new_bs = _shape_via(
            self._call("gather"), self._batch_size, lambda t: t.gather(d, index).shape
        )

        def fn(x: Any) -> Any:
            idx = _trail(index, x.ndim, n).expand(*index.shape, *x.shape[n:])
            return x.gather(d, idx)

        result = self._remap(self._call("gather"), fn, new_bs, self._names_kept())
        if out is None:
            return result
        if torch.is_grad_enabled() and any(x.requires_grad for x in result._tensor_leaves([])):
            raise RuntimeError(  # as torch.gather(..., out=) says for a tensor
                f"{self._call('gather')}: functions with out=... arguments don't support "
                "automatic differentiation, but one of the arguments requires grad"
            )
        return out.update_(result)  # type: ignore[no-any-return]

    def masked_fill(self, mask: Tensor, value: float | bool) -> Self:
        """Fill the batch elements where ``mask`` is true with ``value``; a mask over the
        leading batch dims covers the dims after them too (upstream).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
        >>> td.masked_fill(torch.tensor([True, False]), 1.0)["a"]
        tensor([[1., 1., 1.],
                [0., 0., 0.]])
        """
        n = len(self._batch_size)
        if mask.ndim < n and mask.shape == self._batch_size[: mask.ndim]:
            n = mask.ndim  # left-aligned: viewed with singleton dims for the rest
        self._check_mask(self._call("masked_fill"), mask)
        return self._remap(
            self._call("masked_fill"),
            lambda x: x.masked_fill(_trail(mask, x.ndim, n), value),
            self._batch_size,
            self._names_kept(),
            nontensor=lambda v: v,  # the fill value is for tensors: non-tensors stay
        )

    def masked_fill_(self, mask: Tensor, value: float | bool) -> Self:
        """In-place :meth:`masked_fill`."""
        n = len(self._batch_size)
        if mask.ndim < n and mask.shape == self._batch_size[: mask.ndim]:
            n = mask.ndim
        self._check_mask(self._call("masked_fill_"), mask)
        for leaf in self._tensor_leaves([]):
            if isinstance(leaf, NonTensor):
                continue  # an UnbatchedTensor: no batch element to fill (as masked_fill)
            leaf.masked_fill_(_trail(mask, leaf.ndim, n), value)
        return self

    def masked_select(self, mask: Tensor, *, inplace: bool = False) -> Self:
        """The batch elements where ``mask`` (of the batch shape, or of its leading dims) is
        true, as one batch dim; ``inplace=True`` makes this collection hold them (as
        ``to(..., inplace=True)``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(6).reshape(2, 3), batch_size=[2, 3])
        >>> td.masked_select(torch.tensor([False, True]))["a"]
        tensor([[3, 4, 5]])
        """
        if mask.dtype != torch.bool:  # (an integer tensor would index rows instead)
            raise TypeError(
                f"{self._call('masked_select')}: mask must be a bool tensor, got {mask.dtype}"
            )
        if not mask.ndim or mask.shape != self._batch_size[: mask.ndim]:
            raise ValueError(
                f"{type(self).__name__}.masked_select: mask shape {tuple(mask.shape)} must equal "
                f"batch_size {tuple(self._batch_size)} or its leading dims"
            )
        out = self._index(mask)
        if inplace:
            return adopt(self, out, self._call("masked_select"))  # type: ignore[no-any-return]
        return out  # type: ignore[no-any-return]

    def _check_mask(self, call: str, mask: Tensor) -> None:
        if mask.dtype != torch.bool:
            raise TypeError(f"{call}: mask must be a bool tensor, got {mask.dtype}")
        if mask.shape == self._batch_size[: mask.ndim]:
            return
        try:
            torch.broadcast_shapes(mask.shape, self._batch_size)  # type: ignore[no-untyped-call]
        except RuntimeError:
            raise ValueError(
                f"{call}: mask shape {tuple(mask.shape)} does not broadcast to batch_size "
                f"{tuple(self._batch_size)}"
            ) from None
        if mask.ndim > len(self._batch_size):
            raise ValueError(
                f"{call}: mask has {mask.ndim} dims, more than the "
                f"{len(self._batch_size)} batch dims"
            )

    def where(self, condition: Tensor, other: Any, *, out: Any = None, pad: Any = None) -> Self:
        """``self`` where ``condition`` (batch-shaped) holds, else ``other``; ``pad`` stands
        in for the leaves only one side has, ``out`` receives the result in place."""
        result = where(condition, self, other, out=out, pad=pad)
        return result if out is not None else keep_lock(self, result)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ names
    def refine_names(self, *names: Any) -> Self:
        """Name the unnamed batch dims; named ones must keep their name. Acts in place.
        One ``...`` stands for the dims in between, left as they are.

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[3, 4, 5])
        >>> td.refine_names(..., "c").refine_names("a", ...).names
        ['a', None, 'c']
        """
        current = self.names
        if names.count(...) == 1:
            at = names.index(...)
            fill = len(current) - len(names) + 1
            names = (*names[:at], *current[at : at + fill], *names[at + 1 :])
        if len(names) != len(current):
            raise ValueError(
                f"{self._call('refine_names')}: got {len(names)} names for "
                f"{len(current)} batch dims"
            )
        for i, (old, new) in enumerate(zip(current, names, strict=True)):
            if old is not None and new is not None and old != new:
                raise RefineNamesError(
                    f"{self._call('refine_names')}: cannot coerce TensorDict names: dim {i} "
                    f"is named {old!r}; cannot refine to {new!r}"
                )
        _assign_names(
            self, [old if new is None else new for old, new in zip(current, names, strict=True)]
        )
        return self

    def rename(self, *names: str | None, **rename_map: str | None) -> Self:
        """A shallow copy with batch dims renamed (positionally, or ``old=new``); unlocked
        at every level, as upstream's (a shallow copy of a memory-mapped level is locked)."""
        out = self._remap(self._call("rename"), _shallow, self._batch_size, self._names_kept())
        if not out._is_locked:
            out.unlock_()
        return out.rename_(*names, **rename_map)

    def rename_(self, *names: str | None, **rename_map: str | None) -> Self:
        """Rename batch dims in place (positionally, or ``old=new``); a single ``None``
        clears every name.

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[1, 2], names=["a", "b"])
        >>> td.rename_(None).names
        [None, None]
        """
        if names and rename_map:
            raise ValueError(
                f"{type(self).__name__}.rename_: pass names positionally or as old=new, not both"
            )
        if names:
            _assign_names(self, None if names == (None,) else list(names))
            return self
        current = self.names
        unknown = sorted(set(rename_map) - {n for n in current if n is not None})
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.rename_: no batch dims named {unknown}; names are {current}"
            )
        _assign_names(self, [rename_map.get(n, n) if n is not None else None for n in current])
        return self


def where(condition: Tensor, input: Any, other: Any, *, out: Any = None, pad: Any = None) -> Any:
    """``torch.where`` over the batch: ``input`` where ``condition`` holds, else ``other``
    (written into ``out`` in place when given). With ``pad``, a tensor leaf only one of
    ``input``/``other`` holds meets a tensor of ``pad`` values on the other side."""
    if out is not None:
        if isinstance(input, CollectionPrimitives):  # a lazy stack's where goes by member
            result = input.where(condition, other, pad=pad)  # type: ignore[attr-defined]
        else:
            result = where(condition, input, other, pad=pad)
        if isinstance(out, CollectionPrimitives) and out.is_empty():  # type: ignore[attr-defined]
            return out.update(result)
        return out.update_(result)
    if not isinstance(input, CollectionPrimitives):
        raise TypeError("tensordict where: input must be a TensorDict")
    other = as_collection(other)
    if isinstance(other, CollectionPrimitives):
        if pad is not None:
            input, other = _padded(input, other, pad), _padded(other, input, pad)
        else:
            mine = set(input.keys(True, True, is_leaf=with_non_tensor))
            theirs = set(other.keys(True, True, is_leaf=with_non_tensor))
            if mine != theirs:
                raise KeyError(
                    f"{input._call('where')}: keys {sorted(mine ^ theirs, key=str)} of one side "
                    "not found and no pad value provided (pass pad=)"
                )
    n = len(input._batch_size)
    if condition.dtype != torch.bool:
        raise TypeError(
            f"{input._call('where')}: condition must be a bool tensor, got {condition.dtype}"
        )
    call = input._call("where")
    if isinstance(other, CollectionPrimitives):
        tensors = where_keeping_unbatched(
            call, lambda x, y: torch.where(_trail(condition, x.ndim, n), x, y)
        )

        def leaf(x: Any, y: Any) -> Any:
            if isinstance(x, NonTensorEntry) or isinstance(y, NonTensorEntry):
                return _where_non_tensor(call, condition, n, x, y)
            return tensors(x, y)

        return input.apply(leaf, other, is_leaf=with_non_tensor)
    return input.apply(
        where_keeping_unbatched(call, lambda x: torch.where(_trail(condition, x.ndim, n), x, other))
    )


def _where_non_tensor(call: str, condition: Tensor, n: int, x: Any, y: Any) -> Any:
    """``where`` of a non-tensor entry: its values where ``condition`` holds, ``y``'s
    elsewhere (one value where both sides hold the same one), as upstream."""
    if not (isinstance(x, NonTensorEntry) and isinstance(y, NonTensorEntry)):
        raise TypeError(
            f"{call}: one side holds a {type(x).__name__} and the other a {type(y).__name__} "
            "at the same key; both must be tensors or both non-tensor data"
        )
    if isinstance(x, NonTensorDataBase) and isinstance(y, NonTensorDataBase):
        try:
            if x.data is y.data or bool(x.data == y.data):
                return x
        except (TypeError, ValueError, RuntimeError):  # (values without a plain ==)
            pass
    return x.where(_trail(condition, len(x.batch_size), n), y)


def _padded(td: Any, like: Any, value: Any) -> Any:
    """``td``, given a leaf of ``value`` for every tensor leaf only ``like`` holds."""
    missing = [
        (key, leaf)
        for key, leaf in like.items(True, True, is_leaf=with_non_tensor)
        if td.get(key, None) is None
    ]
    if not missing:
        return td
    td = td.copy()
    for key, leaf in missing:
        td.set(key, torch.full_like(leaf, value) if isinstance(leaf, Tensor) else leaf)
    return td


def pad(td: Any, pad_size: Sequence[int], value: float = 0.0) -> TensorDictBase:
    """Pad the batch dims: ``pad_size`` holds (before, after) pairs from the first dim on.

    >>> import torch
    >>> from tensordict import TensorDict, pad
    >>> pad(TensorDict({"a": torch.ones(2, 3)}, [2]), [1, 1])["a"][:, 0]
    tensor([0., 1., 1., 0.])
    """
    sizes = list(pad_size)
    n = len(td.batch_size)
    if len(sizes) % 2 or len(sizes) // 2 > n:
        raise PadSizeError(
            f"pad: pad_size needs (before, after) pairs for at most the {n} batch dims, got {sizes}"
        )
    pairs = [(sizes[i], sizes[i + 1]) for i in range(0, len(sizes), 2)]
    new_bs = torch.Size(
        [
            s + (pairs[i][0] + pairs[i][1] if i < len(pairs) else 0)
            for i, s in enumerate(td.batch_size)
        ]
    )

    def flat_pad(x: Tensor, fill: float) -> Tensor:
        flat = [0, 0] * (x.ndim - len(pairs))
        for before, after in reversed(pairs):
            flat += [before, after]
        return torch.nn.functional.pad(x, flat, value=fill)

    def fn(x: Any) -> Any:
        return flat_pad(x, value) if isinstance(x, Tensor) else pad(x, sizes, value)

    def nontensor(v: NonTensor) -> NonTensor:
        """Padded elements hold None: the pad value is for tensors."""
        stack = as_stack(v)
        positions = flat_pad(stack.positions, len(stack.values))
        return NonTensorStack._from_positions([*stack.values, None], positions, stack.device)

    return td._remap("pad", fn, new_bs, td._names_kept(), nontensor)  # type: ignore[no-any-return]


def _assign_names(td: Any, names: list[str | None] | None) -> None:
    """Set ``td.names`` through the property itself: a rename is an operation, not an
    attribute write, so a frozen tensorclass (which refuses ``x.names = ...``) takes it."""
    type(td).names.fset(td, names)
