"""Reductions over leaves: ``all``/``any`` and ``sum``/``mean``/``std``/... per leaf or in one."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
from torch import Tensor

from tensordict._batch import BatchDimMismatchError
from tensordict._primitives import CollectionPrimitives
from tensordict._unbatched import UnbatchedTensor, batch_only

if TYPE_CHECKING:
    from typing import Self


Dim = int | Sequence[int] | str | None
_R = TypeVar("_R")


class RepeatedDimError(ValueError, RuntimeError):
    """A reduction's ``dim`` naming one dimension twice: a ValueError here, and the
    RuntimeError torch and upstream raise."""


def _batch_dims(call: str, dim: int | Sequence[int], ndim: int) -> tuple[int, ...]:
    """Normalise ``dim`` against the batch dimensions, rejecting feature dims."""
    if isinstance(dim, str):  # ('feature' reaches here only where it has no meaning)
        raise ValueError(f"{call}: dim must be a batch dim (an int), got {dim!r}")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        raise ValueError(f"{call}: dim=() names no dimension; pass None to reduce everything")
    out = []
    for d in dims:
        if not -ndim <= d < ndim:
            raise IndexError(
                f"{call}: dim {d} is out of range for a batch of {ndim} dims; "
                "reductions take batch dims (or dim='feature')"
            )
        out.append(d % ndim)
    if len(set(out)) != len(out):
        raise RepeatedDimError(f"{call}: dim {dim} repeats a dimension")
    return tuple(sorted(out))


def _features(x: Tensor, ndim: int) -> Tensor:
    """``x`` as ``[*batch, features]`` (one feature for a leaf with none; no reshape with
    ``-1``, which an empty batch leaves undetermined)."""
    return x.flatten(ndim, -1) if x.ndim > ndim else x.unsqueeze(-1)


def reduced_names(old: Sequence[str | None], dims: tuple[int, ...], keepdim: bool) -> Any:
    """The dim names left after reducing ``dims``: all kept with ``keepdim``, the reduced
    ones dropped otherwise; None when no dim was named."""
    if all(n is None for n in old):
        return None
    return list(old) if keepdim else [n for i, n in enumerate(old) if i not in dims]


def rekeyed(result: _R, key_transform: Callable[[str], Any] | None) -> _R:
    """``result`` with every key, at every level, renamed by ``key_transform`` (a
    reduction's ``key_transform=``); a tensor (``reduce=True``) is returned as is."""
    if key_transform is None or isinstance(result, Tensor):
        return result
    src: Any = result
    out = src.empty()
    for key, value in src.items():
        if hasattr(value, "_tensor_leaves"):  # a nested collection: rename its keys too
            value = rekeyed(value, key_transform)
        out.set(key_transform(key), value)
    return cast(_R, out)


def _reduce(op: str, t: Tensor, dims: tuple[int, ...] | None, keepdim: bool, **kw: Any) -> Tensor:
    fn: Callable[..., Tensor] = getattr(torch, op)
    if dims is None:
        return fn(t, **kw)
    if op == "prod":  # torch.prod takes one dim at a time
        for d in sorted(dims, reverse=True):
            t = fn(t, dim=d, keepdim=keepdim, **kw)
        return t
    return fn(t, dim=dims, keepdim=keepdim, **kw)


class ReduceOps(CollectionPrimitives):
    """Reductions: the result keeps the keys unless ``reduce=True`` asks for one tensor."""

    __slots__ = ()

    def all(self, dim: int | None = None) -> bool | Self:
        """Whether every element of every leaf is true (a TensorDict when ``dim`` is given).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.tensor([True, False])}, [2])
        >>> td.all(), td.any()
        (False, True)
        """
        if dim is None:
            return builtins.all(bool(x.all()) for x in self._tensor_leaves([]))
        return self._per_leaf("all", self._call("all"), dim, False)

    def any(self, dim: int | None = None) -> bool | Self:
        """Whether some element of some leaf is true (a TensorDict when ``dim`` is given)."""
        if dim is None:
            return builtins.any(bool(x.any()) for x in self._tensor_leaves([]))
        return self._per_leaf("any", self._call("any"), dim, False)

    def _per_leaf(self, op: str, call: str, dim: Dim, keepdim: bool, **kw: Any) -> Self:
        bs = self._batch_size
        ndim = len(bs)
        if dim is None and keepdim:  # as torch: every dim kept with size one

            def all_kept(x: Any) -> Any:
                if not isinstance(x, Tensor):
                    return x._per_leaf(op, call, None, True, **kw)
                return _reduce(op, x, tuple(range(x.ndim)), True, **kw) if x.ndim else x

            return self.apply(
                batch_only(all_kept),
                batch_size=[1] * ndim,
                names=reduced_names(self.names, (), True),
                call_on_nested=True,
            )
        if dim is None:
            return self.apply(
                batch_only(lambda x: _reduce(op, x, None, False, **kw)), batch_size=[]
            )
        if dim == "feature":
            # Each leaf over the dims past its own collection's batch dims (a nested
            # TensorDict keeps its batch size); a leaf with no feature dim counts as one.
            def per_feature(x: Any) -> Any:
                if not isinstance(x, Tensor):
                    return x._per_leaf(op, call, dim, keepdim, **kw)
                flat = _features(x, ndim)
                out = _reduce(op, flat, (ndim,), keepdim, **kw)
                return out.reshape(*x.shape[:ndim], *[1] * (x.ndim - ndim)) if keepdim else out

            return self.apply(batch_only(per_feature), call_on_nested=True)
        if isinstance(dim, str):
            raise ValueError(f"{call}: dim must be an int, a tuple of ints, 'feature' or None")
        dims = _batch_dims(call, dim, ndim)
        new_bs = (
            [1 if i in dims else s for i, s in enumerate(bs)]
            if keepdim
            else [s for i, s in enumerate(bs) if i not in dims]
        )

        # A nested collection reduces itself: it keeps its batch dims past this one's.
        def per_level(x: Any) -> Any:
            if not isinstance(x, Tensor):
                return x._per_leaf(op, call, dims, keepdim, **kw)
            return _reduce(op, x, dims, keepdim, **kw)

        return self.apply(
            batch_only(per_level),
            batch_size=new_bs,
            names=reduced_names(self.names, dims, keepdim),
            call_on_nested=True,
        )

    def _reduction(
        self, op: str, dim: Dim, keepdim: bool, reduce: bool, **kw: Any
    ) -> Self | Tensor:
        call = f"{type(self).__name__}.{op}"
        if not reduce:
            return self._per_leaf(op, call, dim, keepdim, **kw)
        leaves = [x for x in self._tensor_leaves([]) if not isinstance(x, UnbatchedTensor)]
        if not leaves:
            raise ValueError(f"{call}: reduce=True needs at least one tensor leaf")
        ndim = len(self._batch_size)
        if dim is None or dim == "feature":
            # Every leaf becomes [*batch, features]; the leaves are joined on the feature dim.
            joined = torch.cat([_features(x, ndim) for x in leaves], dim=-1)
            if dim is None:
                return _reduce(op, joined, None, False, **kw)
            return _reduce(op, joined, (ndim,), keepdim, **kw)
        if isinstance(dim, str):
            raise ValueError(f"{call}: dim must be an int, a tuple of ints, 'feature' or None")
        # Over batch dims: the leaves are joined along the (first) reduced dim and keep
        # their feature dims, which must then agree.
        dims = _batch_dims(call, dim, ndim)
        try:
            joined = torch.cat(leaves, dim=dims[0])
        except RuntimeError as err:
            raise BatchDimMismatchError(
                f"{call}: reduce=True over batch dims joins the leaves along dim {dims[0]}, "
                f"which needs them to share their other dims: {err}"
            ) from None
        return _reduce(op, joined, dims, keepdim, **kw)

    def sum(
        self,
        dim: Dim = None,
        keepdim: bool = False,
        *,
        dtype: torch.dtype | None = None,
        reduce: bool = False,
        key_transform: Callable[[str], Any] | None = None,
    ) -> Self | Tensor:
        """Sum each leaf (over everything, over batch ``dim``, or ``'feature'`` dims).

        ``reduce=True`` sums across leaves too and returns one tensor. ``key_transform``
        renames every key of the result, at every level (ignored with ``reduce=True``);
        ``mean``, ``std``, ``var``, ``quantile`` and ``norm`` take it too.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2, 3), "b": torch.ones(2)}, [2])
        >>> td.sum(dim=0)["a"]
        tensor([2., 2., 2.])
        >>> td.sum(reduce=True)
        tensor(8.)
        >>> list(td.sum(key_transform=lambda key: f"sum_{key}").keys())
        ['sum_a', 'sum_b']
        """
        kw = {} if dtype is None else {"dtype": dtype}
        return rekeyed(self._reduction("sum", dim, keepdim, reduce, **kw), key_transform)

    def mean(
        self,
        dim: Dim = None,
        keepdim: bool = False,
        *,
        dtype: torch.dtype | None = None,
        reduce: bool = False,
        key_transform: Callable[[str], Any] | None = None,
    ) -> Self | Tensor:
        """The mean of each leaf; ``reduce=True`` averages over all elements of all leaves."""
        kw = {} if dtype is None else {"dtype": dtype}
        return rekeyed(self._reduction("mean", dim, keepdim, reduce, **kw), key_transform)

    def prod(
        self,
        dim: Dim = None,
        keepdim: bool = False,
        *,
        dtype: torch.dtype | None = None,
        reduce: bool = False,
    ) -> Self | Tensor:
        """The product of each leaf's elements; ``reduce=True`` multiplies across leaves."""
        kw = {} if dtype is None else {"dtype": dtype}
        return self._reduction("prod", dim, keepdim, reduce, **kw)

    def std(
        self,
        dim: Dim = None,
        keepdim: bool = False,
        *,
        correction: int = 1,
        reduce: bool = False,
        key_transform: Callable[[str], Any] | None = None,
    ) -> Self | Tensor:
        """The standard deviation of each leaf (Bessel-corrected by default)."""
        out = self._reduction("std", dim, keepdim, reduce, correction=correction)
        return rekeyed(out, key_transform)

    def var(
        self,
        dim: Dim = None,
        keepdim: bool = False,
        *,
        correction: int = 1,
        reduce: bool = False,
        key_transform: Callable[[str], Any] | None = None,
    ) -> Self | Tensor:
        """The variance of each leaf (Bessel-corrected by default)."""
        out = self._reduction("var", dim, keepdim, reduce, correction=correction)
        return rekeyed(out, key_transform)

    def amax(self, dim: Dim = None, keepdim: bool = False, *, reduce: bool = False) -> Any:
        """The maximum of each leaf."""
        return self._reduction("amax", dim, keepdim, reduce)

    def amin(self, dim: Dim = None, keepdim: bool = False, *, reduce: bool = False) -> Any:
        """The minimum of each leaf."""
        return self._reduction("amin", dim, keepdim, reduce)
