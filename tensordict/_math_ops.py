"""The rest of upstream's element-wise maths and reductions: trig, erf, lerp, min/max, ..."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._lock_keep import keeps_lock
from tensordict._pointwise import Operand, _is_collection
from tensordict._pointwise_extra import aligned_leaves, broadcast_all, broadcasts_with_batch
from tensordict._primitives import CollectionPrimitives
from tensordict._reduce import _batch_dims, reduced_names, rekeyed
from tensordict._unbatched import UnbatchedTensor, batch_only

if TYPE_CHECKING:
    from typing import Self

_ALL: Any = object()


def _dense(self: Any, call: str) -> Any:
    """``self``, or the dense form of a stack (whose ``apply`` maps member by member)."""
    return self if self._stack_parts() is None else self._as_dense(call)


def _tensors_only(src: Any, with_indices: bool) -> Any:
    """``src`` for a reduction giving ``(values, indices)``: with the indices, as upstream,
    both hold the tensor leaves only (a non-tensor entry has no index), and no level left
    without a leaf."""
    if not with_indices or not src._has_non_tensor:
        return src
    return src.filter_non_tensor_data().filter_empty_()


def _leaves_of(call: str, self: Any, other: Any, extra_ok: bool = False) -> list[Any]:
    """The operand for each leaf of ``self``: a paired leaf, or ``other`` itself (``extra_ok``
    lets a collection hold more keys: an in-place operation writes ``self``'s only)."""
    if _is_collection(other):
        return list(self._other_leaves(call, other, extra_ok))
    if isinstance(other, Tensor) and other.ndim and broadcasts_with_batch(self, other):
        return aligned_leaves(self, call, other)
    return [other] * len(self._tensor_leaves([]))


class MathOps(CollectionPrimitives):
    """Element-wise functions and reductions, one tensor op per leaf."""

    __slots__ = ()

    if TYPE_CHECKING:  # from PointwiseOps and ReduceOps, beside this mixin on the base

        def _unary(self, name: str, *args: Any) -> Self: ...
        def _unary_(self, name: str, *args: Any) -> Self: ...
        def _binary(self, name: str, other: Operand, **kwargs: Any) -> Self: ...
        def _reduction(
            self, op: str, dim: Any, keepdim: bool, reduce: bool, **kw: Any
        ) -> Self | Tensor: ...
        def mul(self, other: Operand) -> Self: ...
        def add(self, other: Operand, *, alpha: float | None = None) -> Self: ...
        def neg(self) -> Self: ...

    # ---------------------------------------------------------------- unary
    def acos(self) -> Self:
        """``acos`` of every leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(1)).acos()["a"]
        tensor([0.])
        """
        return self._unary("acos")

    def acos_(self) -> Self:
        """In-place :meth:`acos`."""
        return self._unary_("acos")

    def asin(self) -> Self:
        """``asin`` of every leaf."""
        return self._unary("asin")

    def asin_(self) -> Self:
        """In-place :meth:`asin`."""
        return self._unary_("asin")

    def atan(self) -> Self:
        """``atan`` of every leaf."""
        return self._unary("atan")

    def atan_(self) -> Self:
        """In-place :meth:`atan`."""
        return self._unary_("atan")

    def cosh(self) -> Self:
        """``cosh`` of every leaf."""
        return self._unary("cosh")

    def cosh_(self) -> Self:
        """In-place :meth:`cosh`."""
        return self._unary_("cosh")

    def sinh(self) -> Self:
        """``sinh`` of every leaf."""
        return self._unary("sinh")

    def sinh_(self) -> Self:
        """In-place :meth:`sinh`."""
        return self._unary_("sinh")

    def tan(self) -> Self:
        """``tan`` of every leaf."""
        return self._unary("tan")

    def tan_(self) -> Self:
        """In-place :meth:`tan`."""
        return self._unary_("tan")

    def erf(self) -> Self:
        """The error function of every leaf."""
        return self._unary("erf")

    def erf_(self) -> Self:
        """In-place :meth:`erf`."""
        return self._unary_("erf")

    def erfc(self) -> Self:
        """The complementary error function of every leaf."""
        return self._unary("erfc")

    def erfc_(self) -> Self:
        """In-place :meth:`erfc`."""
        return self._unary_("erfc")

    def lgamma(self) -> Self:
        """``log(|gamma(x)|)`` of every leaf."""
        return self._unary("lgamma")

    def lgamma_(self) -> Self:
        """In-place :meth:`lgamma`."""
        return self._unary_("lgamma")

    def isfinite(self) -> Self:
        """Boolean leaves: whether each element is finite.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.tensor([1.0, float("inf")])).isfinite()["a"]
        tensor([ True, False])
        """
        return self._unary("isfinite")

    def isnan(self) -> Self:
        """Boolean leaves: whether each element is NaN."""
        return self._unary("isnan")

    def isneginf(self) -> Self:
        """Boolean leaves: whether each element is minus infinity."""
        return self._unary("isneginf")

    def isposinf(self) -> Self:
        """Boolean leaves: whether each element is plus infinity."""
        return self._unary("isposinf")

    def isreal(self) -> Self:
        """Boolean leaves: whether each element is real (imaginary part zero)."""
        return self._unary("isreal")

    # --------------------------------------------------------------- binary
    def mod(self, other: Operand) -> Self:
        """The element-wise remainder (Python's ``%``) of each leaf by ``other``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.tensor([5, -5])).mod(3)["a"]
        tensor([2, 1])
        """
        return self._binary("remainder", other)

    def rsub(self, other: Operand, *, alpha: float | None = None) -> Self:
        """``other - alpha * self``, leaf by leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(2)).rsub(5, alpha=2)["a"]
        tensor([3., 3.])
        """
        out = self if alpha is None else self.mul(alpha)
        return out.neg().add(other)

    def logical_and(self, other: Operand) -> Self:
        """The element-wise logical AND with ``other``."""
        return self._binary("logical_and", other)

    def bitwise_and(self, other: Operand) -> Self:
        """The element-wise bitwise AND with ``other``."""
        return self._binary("bitwise_and", other)

    @keeps_lock
    def lerp(self, end: Operand, weight: Operand) -> Self:
        """``self + weight * (end - self)``, leaf by leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2)).lerp(TensorDict(a=torch.ones(2)), 0.25)["a"]
        tensor([0.2500, 0.2500])
        """
        return self._ternary("lerp", end, weight)

    def lerp_(self, end: Operand, weight: Operand) -> Self:
        """In-place :meth:`lerp`."""
        return self._ternary_("lerp_", end, weight)

    @keeps_lock
    def addcdiv(self, other1: Operand, other2: Operand, value: float = 1) -> Self:
        """``self + value * other1 / other2``, leaf by leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(2)).addcdiv(torch.ones(2), 2 * torch.ones(2), value=2)["a"]
        tensor([2., 2.])
        """
        return self._ternary("addcdiv", other1, other2, value=value)

    def addcdiv_(self, other1: Operand, other2: Operand, *, value: float = 1) -> Self:
        """In-place :meth:`addcdiv`."""
        return self._ternary_("addcdiv_", other1, other2, value=value)

    @keeps_lock
    def addcmul(self, other1: Operand, other2: Operand, *, value: float = 1) -> Self:
        """``self + value * other1 * other2``, leaf by leaf."""
        return self._ternary("addcmul", other1, other2, value=value)

    def addcmul_(self, other1: Operand, other2: Operand, *, value: float = 1) -> Self:
        """In-place :meth:`addcmul`."""
        return self._ternary_("addcmul_", other1, other2, value=value)

    def _ternary(self, name: str, first: Operand, second: Operand, **kwargs: Any) -> Self:
        """``torch.<name>(leaf, first, second)`` per leaf, the operands broadcast first."""
        call = self._call(name)
        src, first, second = broadcast_all(self, call, first, second)
        a, b = _leaves_of(call, src, first), _leaves_of(call, src, second)
        fn = getattr(torch, name)
        leaves = src._tensor_leaves([])
        out = [fn(x, y, z, **kwargs) for x, y, z in zip(leaves, a, b, strict=True)]
        return src._rebuild(iter(out), check=call)  # type: ignore[no-any-return]

    def _ternary_(self, name: str, first: Operand, second: Operand, **kwargs: Any) -> Self:
        """``leaf.<name>(first, second)`` in place, per leaf."""
        call = self._call(name)
        a, b = _leaves_of(call, self, first, True), _leaves_of(call, self, second, True)
        for x, y, z in zip(self._tensor_leaves([]), a, b, strict=True):
            getattr(x, name)(y, z, **kwargs)
        return self

    # ------------------------------------------------ per-leaf over a batch dim
    def softmax(self, dim: int, dtype: torch.dtype | None = None) -> Self:
        """Softmax of every leaf along batch dim ``dim``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, 3), batch_size=[2]).softmax(0)["a"][0]
        tensor([0.5000, 0.5000, 0.5000])
        """
        (d,) = _batch_dims(self._call("softmax"), dim, len(self._batch_size))
        parts = self._stack_parts()
        if parts is not None and d != parts[0]:  # member by member: shapes may differ
            sd, members = parts
            md = d if d < sd else d - 1
            return self._restack([m.softmax(md, dtype) for m in members])  # type: ignore[attr-defined,no-any-return]
        src = _dense(self, self._call("softmax"))
        out = [
            x if isinstance(x, UnbatchedTensor) else torch.softmax(x, d, dtype=dtype)
            for x in src._tensor_leaves([])
        ]
        return src._rebuild(iter(out))  # type: ignore[no-any-return]

    @keeps_lock
    def norm(
        self,
        *,
        dtype: torch.dtype | None = None,
        key_transform: Callable[[str], Any] | None = None,
    ) -> Self:
        """The 2-norm of each leaf (over all its elements): a TensorDict of scalars.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.full((2, 2), 2.0), batch_size=[2]).norm()["a"]
        tensor(4.)
        """
        src = _dense(self, self._call("norm"))
        out = src.apply(lambda x: torch.linalg.vector_norm(x, dtype=dtype), batch_size=[])
        return rekeyed(out, key_transform)  # type: ignore[no-any-return]

    def logsumexp(
        self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, out: Any = None
    ) -> Self:
        """``log(sum(exp(x)))`` of each leaf over batch ``dim`` (all batch dims when None).

        ``out`` (a collection with the result's batch size) receives the result and is
        returned: a leaf it already holds is written in place (``torch.logsumexp(...,
        out=leaf)``), a missing one is set.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, 3), batch_size=[2]).logsumexp()["a"].shape
        torch.Size([3])
        """
        n = len(self._batch_size)
        dims = tuple(range(n)) if dim is None else _batch_dims(self._call("logsumexp"), dim, n)
        bs = self._batch_size
        new_bs = (
            [1 if i in dims else s for i, s in enumerate(bs)]
            if keepdim
            else [s for i, s in enumerate(bs) if i not in dims]
        )
        src = _dense(self, self._call("logsumexp"))
        call = self._call("logsumexp")
        if out is None:
            return src._per_leaf("logsumexp", call, dims, keepdim)  # type: ignore[no-any-return]
        if tuple(out.batch_size) != tuple(new_bs):
            raise RuntimeError(
                f"{call}: out has batch size {tuple(out.batch_size)}, the result has "
                f"{tuple(new_bs)}"
            )
        for key, leaf in src.items(True, True):
            if not isinstance(leaf, Tensor) or isinstance(leaf, UnbatchedTensor):
                continue  # a non-tensor value, or one without batch dims, is not reduced
            target = out.get(key, None)
            if isinstance(target, Tensor):
                torch.logsumexp(leaf, dims, keepdim, out=target)
            else:
                out.set(key, torch.logsumexp(leaf, dims, keepdim))
        return out  # type: ignore[no-any-return]

    def nanmean(
        self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, reduce: bool = False
    ) -> Self | Tensor:
        """The mean of each leaf ignoring NaNs (see :meth:`mean`)."""
        kw = {} if dtype is None else {"dtype": dtype}
        return self._reduction("nanmean", dim, keepdim, reduce, **kw)

    def nansum(
        self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, reduce: bool = False
    ) -> Self | Tensor:
        """The sum of each leaf treating NaNs as zero (see :meth:`sum`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.tensor([1.0, float("nan")])).nansum()["a"]
        tensor(1.)
        """
        kw = {} if dtype is None else {"dtype": dtype}
        return self._reduction("nansum", dim, keepdim, reduce, **kw)

    def quantile(
        self,
        q: float | Tensor,
        dim: int | str | None = None,
        keepdim: bool = False,
        *,
        interpolation: str = "linear",
        reduce: bool = False,
        key_transform: Callable[[str], Any] | None = None,
    ) -> Self | Tensor:
        """The ``q``-quantile of each leaf over batch ``dim`` (everything when None).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.arange(5.0)).quantile(0.5)["a"]
        tensor(2.)
        """
        out = self._quantile(q, dim, keepdim, interpolation, reduce)
        return rekeyed(out, key_transform)

    def _quantile(
        self,
        q: float | Tensor,
        dim: int | str | None,
        keepdim: bool,
        interpolation: str,
        reduce: bool,
    ) -> Self | Tensor:
        bs = self._batch_size
        if dim == "feature":
            src = _dense(self, self._call("quantile"))
            if reduce:
                joined = torch.cat([x.reshape(*bs, -1) for x in src._tensor_leaves([])], -1)
                return torch.quantile(joined, q, -1, keepdim, interpolation=interpolation)
            n = len(bs)

            def per_feature(x: Any) -> Any:  # a nested TensorDict keeps its batch size
                if not isinstance(x, Tensor):
                    return x.quantile(q, "feature", keepdim, interpolation=interpolation)
                return torch.quantile(
                    x.reshape(*x.shape[:n], -1), q, -1, keepdim, interpolation=interpolation
                )

            return src.apply(batch_only(per_feature), call_on_nested=True)  # type: ignore[no-any-return]
        if reduce and dim is not None and not isinstance(dim, str):
            (d,) = _batch_dims(self._call("quantile"), dim, len(bs))
            joined = torch.cat(self._tensor_leaves([]), dim=d)  # feature dims kept
            return torch.quantile(joined, q, d, keepdim, interpolation=interpolation)
        if reduce:
            joined = torch.cat([x.reshape(-1) for x in self._tensor_leaves([])])
            return torch.quantile(joined, q, interpolation=interpolation)
        if dim is None:
            return _dense(self, self._call("quantile")).apply(  # type: ignore[no-any-return]
                batch_only(lambda x: torch.quantile(x.reshape(-1), q, interpolation=interpolation)),
                batch_size=[],
            )
        if isinstance(dim, str):
            raise ValueError(f"{self._call('quantile')}: dim must be an int, 'feature' or None")
        (d,) = _batch_dims(self._call("quantile"), dim, len(self._batch_size))
        new_bs = (
            [1 if i == d else s for i, s in enumerate(bs)]
            if keepdim
            else [s for i, s in enumerate(bs) if i != d]
        )

        def per_level(x: Any) -> Any:  # a nested collection keeps its batch dims past this one's
            if not isinstance(x, Tensor):
                return x.quantile(q, d, keepdim, interpolation=interpolation)
            return torch.quantile(x, q, d, keepdim, interpolation=interpolation)

        several = isinstance(q, Tensor) and q.ndim > 0  # (a leading dim of quantiles)
        return _dense(self, self._call("quantile")).apply(  # type: ignore[no-any-return]
            batch_only(per_level), batch_size=new_bs, call_on_nested=not several
        )

    # ----------------------------------------------------- values and indices
    def _extreme(
        self, op: str, dim: Any, keepdim: bool, reduce: bool | None, return_indices: bool
    ) -> Any:
        if dim is _ALL or dim is None:
            return self._reduction("a" + op, None, keepdim, bool(reduce))
        if reduce:
            return self._reduction("a" + op, dim, keepdim, True)
        call = self._call(op)
        n = len(self._batch_size)
        if not isinstance(dim, int):
            if dim == "feature":
                return self._reduction("a" + op, dim, keepdim, False)
            raise TypeError(f"{call}: dim must be an int or 'feature', got {dim!r}")
        (d,) = _batch_dims(call, dim, n)
        bs = self._batch_size
        new_bs = (
            [1 if i == d else s for i, s in enumerate(bs)]
            if keepdim
            else [s for i, s in enumerate(bs) if i != d]
        )
        fn = getattr(torch, op)
        src = _tensors_only(_dense(self, call), return_indices)
        found: dict[int, Tensor] = {}  # each leaf's indices, from the one call per leaf

        def values_of(x: Tensor) -> Tensor:
            result = fn(x, d, keepdim)
            found[id(x)] = result.indices
            return result.values  # type: ignore[no-any-return]

        names = reduced_names(self.names, (d,), keepdim)
        values = src.apply(batch_only(values_of), batch_size=new_bs, names=names)
        if not return_indices:
            return values
        indices = src.apply(batch_only(lambda x: found[id(x)]), batch_size=new_bs, names=names)
        return getattr(torch.return_types, op)((values, indices))

    def min(
        self,
        dim: Any = _ALL,
        keepdim: bool = False,
        *,
        reduce: bool | None = None,
        return_indices: bool = True,
    ) -> Any:
        """The minimum of each leaf: over everything, or along batch ``dim`` as
        ``torch.min`` does, giving ``(values, indices)`` TensorDicts.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.tensor([[3.0, 1.0], [0.0, 4.0]]), batch_size=[2, 2])
        >>> td.min()["a"], td.min(dim=1).indices["a"]
        (tensor(0.), tensor([1, 0]))
        """
        return self._extreme("min", dim, keepdim, reduce, return_indices)

    def max(
        self,
        dim: Any = _ALL,
        keepdim: bool = False,
        *,
        reduce: bool | None = None,
        return_indices: bool = True,
    ) -> Any:
        """The maximum of each leaf (see :meth:`min`)."""
        return self._extreme("max", dim, keepdim, reduce, return_indices)

    def _cumulative(self, op: str, dim: int, reduce: bool | None, return_indices: bool) -> Any:
        (d,) = _batch_dims(self._call(op), dim, len(self._batch_size))
        fn = getattr(torch, op)
        if reduce:
            raise ValueError(f"{self._call(op)}: reduce=True is not supported")
        src = _tensors_only(_dense(self, self._call(op)), return_indices)
        values = src.apply(batch_only(lambda x: fn(x, d).values))
        if not return_indices:
            return values
        indices = src.apply(batch_only(lambda x: fn(x, d).indices))
        return getattr(torch.return_types, op)((values, indices))

    def cummin(self, dim: int, *, reduce: bool | None = None, return_indices: bool = True) -> Any:
        """The running minimum of each leaf along batch ``dim``: ``(values, indices)``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.tensor([2.0, 1.0, 3.0]), batch_size=[3]).cummin(0).values["a"]
        tensor([2., 1., 1.])
        """
        return self._cumulative("cummin", dim, reduce, return_indices)

    def cummax(self, dim: int, *, reduce: bool | None = None, return_indices: bool = True) -> Any:
        """The running maximum of each leaf along batch ``dim`` (see :meth:`cummin`)."""
        return self._cumulative("cummax", dim, reduce, return_indices)
