"""Element-wise arithmetic, comparisons and math functions, over every tensor leaf at once."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._lock_keep import keeps_lock
from tensordict._nontensor_ops import OPS as NONTENSOR_OPS
from tensordict._nontensor_ops import apply_nontensor
from tensordict._pointwise_extra import (
    aligned_leaves,
    batch_aligned,
    binary_with_default,
    broadcast_operands,
    broadcasts_with_batch,
)
from tensordict._primitives import CollectionPrimitives
from tensordict._torch_compat import foreach

if TYPE_CHECKING:
    from typing import Self


Operand = Any  # a TensorDict, a tensor or a Python number
_ALL_LEAVES: Any = object()
_COMMUTATIVE = ("add", "mul", "bitwise_and", "bitwise_or", "bitwise_xor")
_NO_TENSOR_METHOD = frozenset(("maximum", "minimum"))  # in-place ops that Tensor lacks
_COMPARISONS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))


def _is_collection(obj: object) -> bool:
    return isinstance(obj, CollectionPrimitives)


def _run(name: str, leaves: list[Tensor], *args: Any, **kwargs: Any) -> list[Tensor]:
    """``torch.<name>`` over all leaves: the multi-tensor kernel when it applies, else a loop."""
    if not leaves:
        return []
    kernel = foreach(name)
    if kernel is not None:
        try:
            return list(kernel(leaves, *args, **kwargs))
        except (RuntimeError, TypeError):
            pass  # a dtype or argument the kernel lacks: the loop gives torch's own answer
    fn = getattr(torch, name)
    if args and isinstance(args[0], list):
        rest = args[1:]
        return [fn(x, y, *rest, **kwargs) for x, y in zip(leaves, args[0], strict=True)]
    return [fn(x, *args, **kwargs) for x in leaves]


def _run_(name: str, leaves: list[Tensor], *args: Any, **kwargs: Any) -> None:
    """The in-place twin of :func:`_run`."""
    if not leaves:
        return
    kernel = foreach(f"{name}_")
    if kernel is not None and all(x.is_floating_point() for x in leaves):
        # no fallback after a kernel error: the kernel may have written some leaves already;
        # but a nested leaf has no foreach kernel, refused at dispatch before any write
        try:
            kernel(leaves, *args, **kwargs)
            return
        except NotImplementedError:
            if not any(x.is_nested for x in leaves):
                raise
    if name in _NO_TENSOR_METHOD:  # no Tensor.maximum_: torch's out= writes in place
        fn = getattr(torch, name)
        others = args[0] if args and isinstance(args[0], list) else [args[0]] * len(leaves)
        for x, y in zip(leaves, others, strict=True):
            fn(x, y, out=x)
    elif args and isinstance(args[0], list):
        rest = args[1:]
        for x, y in zip(leaves, args[0], strict=True):
            getattr(x, f"{name}_")(y, *rest, **kwargs)
    else:
        for x in leaves:
            getattr(x, f"{name}_")(*args, **kwargs)


def _from_mapping(like: Any, other: dict[Any, Any]) -> Any:
    """A dict compared with a collection, as a TensorDict of its batch size."""
    from tensordict._td import TensorDict

    return TensorDict(other, batch_size=like.batch_size)


class PointwiseOps(CollectionPrimitives):
    """Operators and element-wise methods; each result is a new collection of the same keys."""

    __slots__ = ()
    __hash__ = object.__hash__  # identity, as for tensors: == is element-wise

    # ----------------------------------------------------------------- engine
    def _unary(self, name: str, *args: Any) -> Self:
        out = self._rebuild(iter(_run(name, self._tensor_leaves([]), *args)))
        return out.lock_() if self.is_locked else out

    def _unary_(self, name: str, *args: Any) -> Self:
        _run_(name, self._tensor_leaves([]), *args)
        return self

    def _binary(self, name: str, other: Operand, default: Any = None, **kwargs: Any) -> Self:
        out = self._binary_impl(name, other, default, **kwargs)
        # as upstream: the lock carries over, but for the masks comparisons give
        return out.lock_() if self.is_locked and name not in _COMPARISONS else out

    def _binary_impl(self, name: str, other: Operand, default: Any, **kwargs: Any) -> Self:
        call = f"{type(self).__name__}.{name}"
        if _is_collection(other):
            if default is not None:
                return binary_with_default(  # type: ignore[no-any-return]
                    self, call, name, other, default, **kwargs
                )
            src = self
            if other.shape != self.shape and other.batch_size:
                src, other = broadcast_operands(self, call, other)
            # (an other without batch dims pairs leaf by leaf, broadcast by torch: as
            # upstream, and as a tensor operand when the batch size is empty)
            out = _run(name, src._tensor_leaves([]), src._other_leaves(call, other), **kwargs)
            result = src._rebuild(iter(out), check=call)
            if name in NONTENSOR_OPS:
                return apply_nontensor(name, src, other, result)  # type: ignore[no-any-return]
            return result
        if isinstance(other, numbers.Number):  # (first: a number never needs Tensor)
            return self._rebuild(iter(_run(name, self._tensor_leaves([]), other, **kwargs)))
        if isinstance(other, Tensor):
            fn = getattr(torch, name)
            if other.ndim and broadcasts_with_batch(self, other):
                # its dims line up with the batch dims, as upstream
                return batch_aligned(  # type: ignore[no-any-return]
                    self, call, lambda x, y: fn(x, y, **kwargs), other, False
                )
            # a number-like tensor, or one that only broadcasts with each leaf (torch)
            out = [fn(x, other, **kwargs) for x in self._tensor_leaves([])]
            return self._rebuild(iter(out), check=call)
        raise TypeError(
            f"{call}: the other operand must be a TensorDict, a tensor or a number, "
            f"got {type(other).__name__}"
        )

    def _binary_(self, name: str, other: Operand, **kwargs: Any) -> Self:
        call = f"{type(self).__name__}.{name}_"
        leaves = self._tensor_leaves([])
        if _is_collection(other):
            _run_(name, leaves, self._other_leaves(call, other, extra_ok=True), **kwargs)
        elif isinstance(other, Tensor):
            if name in _NO_TENSOR_METHOD:  # no Tensor.maximum_: torch's out= writes in place
                fn = getattr(torch, name)

                def fn_(x: Tensor, y: Tensor) -> None:
                    fn(x, y, out=x)

            else:

                def fn_(x: Tensor, y: Tensor) -> None:
                    getattr(x, f"{name}_")(y, **kwargs)

            if other.ndim and broadcasts_with_batch(self, other):  # lined up with the batch
                for x, y in zip(leaves, aligned_leaves(self, call, other), strict=True):
                    fn_(x, y)
            else:
                for x in leaves:
                    fn_(x, other)
        elif isinstance(other, numbers.Number):
            _run_(name, leaves, other, **kwargs)
        else:
            raise TypeError(
                f"{call}: the other operand must be a TensorDict, a tensor or a number, "
                f"got {type(other).__name__}"
            )
        return self

    @keeps_lock
    def _reflected(self, name: str, other: Operand) -> Self:
        """``other <op> self`` for a tensor or number on the left."""
        if isinstance(other, numbers.Number) and name in _COMMUTATIVE:
            return self._binary(name, other)
        fn: Callable[..., Tensor] = getattr(torch, name)
        if not isinstance(other, (Tensor, numbers.Number)):
            return NotImplemented  # type: ignore[no-any-return]
        leaves = self._tensor_leaves([])
        if name == "pow" and isinstance(other, numbers.Number):
            kernel = foreach("pow")
            if kernel is not None and leaves:
                return self._rebuild(iter(kernel(other, leaves)))
        call = f"{type(self).__name__}.r{name}"
        if isinstance(other, Tensor) and other.ndim and broadcasts_with_batch(self, other):
            return batch_aligned(self, call, fn, other, True)  # type: ignore[no-any-return]
        out = [fn(other, x) for x in leaves]
        return self._rebuild(iter(out), check=call)

    # ------------------------------------------------------------- operators
    def __add__(self, other: Operand) -> Self:
        return self._binary("add", other)

    def __radd__(self, other: Operand) -> Self:
        return self._reflected("add", other)

    def __iadd__(self, other: Operand) -> Self:
        return self._binary_("add", other)

    def __sub__(self, other: Operand) -> Self:
        return self._binary("sub", other)

    def __rsub__(self, other: Operand) -> Self:
        return self._reflected("sub", other)

    def __isub__(self, other: Operand) -> Self:
        return self._binary_("sub", other)

    def __mul__(self, other: Operand) -> Self:
        return self._binary("mul", other)

    def __rmul__(self, other: Operand) -> Self:
        return self._reflected("mul", other)

    def __imul__(self, other: Operand) -> Self:
        return self._binary_("mul", other)

    def __truediv__(self, other: Operand) -> Self:
        return self._binary("div", other)

    def __rtruediv__(self, other: Operand) -> Self:
        return self._reflected("div", other)

    def __itruediv__(self, other: Operand) -> Self:
        return self._binary_("div", other)

    def __floordiv__(self, other: Operand) -> Self:
        return self._binary("floor_divide", other)

    def __mod__(self, other: Operand) -> Self:
        return self._binary("remainder", other)

    def __pow__(self, other: Operand) -> Self:
        return self._binary("pow", other)

    def __rpow__(self, other: Operand) -> Self:
        return self._reflected("pow", other)

    def __ipow__(self, other: Operand) -> Self:
        return self._binary_("pow", other)

    def __neg__(self) -> Self:
        return self._unary("neg")

    def __abs__(self) -> Self:
        return self._unary("abs")

    def __invert__(self) -> Self:
        return self._unary("bitwise_not")

    def __and__(self, other: Operand) -> Self:
        return self._binary("bitwise_and", other)

    def __or__(self, other: Operand) -> Self:
        return self._binary("bitwise_or", other)

    def __rand__(self, other: Operand) -> Self:
        return self._reflected("bitwise_and", other)

    def __ror__(self, other: Operand) -> Self:
        return self._reflected("bitwise_or", other)

    def __rxor__(self, other: Operand) -> Self:
        return self._reflected("bitwise_xor", other)

    def __xor__(self, other: Operand) -> Self:
        return self._binary("bitwise_xor", other)

    def __eq__(self, other: object) -> Self:  # type: ignore[override]
        if isinstance(other, dict):
            other = _from_mapping(self, other)
        if not isinstance(other, (Tensor, numbers.Number)) and not _is_collection(other):
            return NotImplemented
        return self._binary("eq", other)

    def __ne__(self, other: object) -> Self:  # type: ignore[override]
        if isinstance(other, dict):
            other = _from_mapping(self, other)
        if not isinstance(other, (Tensor, numbers.Number)) and not _is_collection(other):
            return NotImplemented
        return self._binary("ne", other)

    def __lt__(self, other: Operand) -> Self:
        return self._binary("lt", other)

    def __le__(self, other: Operand) -> Self:
        return self._binary("le", other)

    def __gt__(self, other: Operand) -> Self:
        return self._binary("gt", other)

    def __ge__(self, other: Operand) -> Self:
        return self._binary("ge", other)

    # --------------------------------------------------------------- methods
    def add(self, other: Operand, *, alpha: float | None = None, default: Any = None) -> Self:
        """``self + alpha * other``, leaf by leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.ones(2)}, [2]).add(1, alpha=2)["a"]
        tensor([3., 3.])
        """
        if alpha is None:
            return self._binary("add", other, default)
        return self._binary("add", other, default, alpha=alpha)

    def add_(self, other: Operand, *, alpha: float | None = None) -> Self:
        """In-place :meth:`add`."""
        if alpha is None:
            return self._binary_("add", other)
        return self._binary_("add", other, alpha=alpha)

    def sub(self, other: Operand, *, alpha: float | None = None, default: Any = None) -> Self:
        """``self - alpha * other``, leaf by leaf."""
        if alpha is None:
            return self._binary("sub", other, default)
        return self._binary("sub", other, default, alpha=alpha)

    def sub_(self, other: Operand, *, alpha: float | None = None) -> Self:
        """In-place :meth:`sub`."""
        if alpha is None:
            return self._binary_("sub", other)
        return self._binary_("sub", other, alpha=alpha)

    def mul(self, other: Operand, *, default: Any = None) -> Self:
        """``self * other``, leaf by leaf."""
        return self._binary("mul", other, default)

    def mul_(self, other: Operand) -> Self:
        """In-place :meth:`mul`."""
        return self._binary_("mul", other)

    def div(self, other: Operand, *, default: Any = None) -> Self:
        """``self / other``, leaf by leaf."""
        return self._binary("div", other, default)

    def div_(self, other: Operand) -> Self:
        """In-place :meth:`div`."""
        return self._binary_("div", other)

    def pow(self, other: Operand, *, default: Any = None) -> Self:
        """``self ** other``, leaf by leaf."""
        return self._binary("pow", other, default)

    def pow_(self, other: Operand) -> Self:
        """In-place :meth:`pow`."""
        return self._binary_("pow", other)

    def maximum(self, other: Operand, *, default: Any = None) -> Self:
        """The element-wise maximum with ``other``."""
        return self._binary("maximum", other, default)

    def maximum_(self, other: Operand) -> Self:
        """In-place :meth:`maximum`."""
        return self._binary_("maximum", other)

    def minimum(self, other: Operand, *, default: Any = None) -> Self:
        """The element-wise minimum with ``other``."""
        return self._binary("minimum", other, default)

    def minimum_(self, other: Operand) -> Self:
        """In-place :meth:`minimum`."""
        return self._binary_("minimum", other)

    def clamp(self, min: float | None = None, max: float | None = None) -> Self:
        """Clamp every leaf into ``[min, max]``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.tensor([-2.0, 0.5, 2.0])}, [3]).clamp(-1, 1)["a"]
        tensor([-1.0000,  0.5000,  1.0000])
        """
        if min is None and max is None:
            raise ValueError(
                f"{type(self).__name__}.clamp: at least one of min and max must be given"
            )
        out = self
        if min is not None:
            out = out._binary("clamp_min", min)
        if max is not None:
            out = out._binary("clamp_max", max)
        return out

    def clamp_(self, min: float | None = None, max: float | None = None) -> Self:
        """In-place :meth:`clamp`."""
        if min is None and max is None:
            raise ValueError(
                f"{type(self).__name__}.clamp_: at least one of min and max must be given"
            )
        if min is not None:
            self._binary_("clamp_min", min)
        if max is not None:
            self._binary_("clamp_max", max)
        return self

    def clamp_min(self, min: Operand, *, default: Any = None) -> Self:
        """Clamp every leaf from below."""
        return self._binary("clamp_min", min, default)

    def clamp_min_(self, min: float) -> Self:
        """In-place :meth:`clamp_min`."""
        return self._binary_("clamp_min", min)

    def clamp_max(self, max: Operand, *, default: Any = None) -> Self:
        """Clamp every leaf from above."""
        return self._binary("clamp_max", max, default)

    def clamp_max_(self, max: float) -> Self:
        """In-place :meth:`clamp_max`."""
        return self._binary_("clamp_max", max)

    def abs(self) -> Self:
        """The absolute value of every leaf."""
        return self._unary("abs")

    def abs_(self) -> Self:
        """In-place :meth:`abs`."""
        return self._unary_("abs")

    def neg(self) -> Self:
        """The negation of every leaf."""
        return self._unary("neg")

    def neg_(self) -> Self:
        """In-place :meth:`neg`."""
        return self._unary_("neg")

    def exp(self) -> Self:
        """``exp`` of every leaf."""
        return self._unary("exp")

    def exp_(self) -> Self:
        """In-place :meth:`exp`."""
        return self._unary_("exp")

    def expm1(self) -> Self:
        """``exp(x) - 1`` of every leaf."""
        return self._unary("expm1")

    def expm1_(self) -> Self:
        """In-place :meth:`expm1`."""
        return self._unary_("expm1")

    def log(self) -> Self:
        """The natural logarithm of every leaf."""
        return self._unary("log")

    def log_(self) -> Self:
        """In-place :meth:`log`."""
        return self._unary_("log")

    def log1p(self) -> Self:
        """``log(1 + x)`` of every leaf."""
        return self._unary("log1p")

    def log1p_(self) -> Self:
        """In-place :meth:`log1p`."""
        return self._unary_("log1p")

    def log2(self) -> Self:
        """The base-2 logarithm of every leaf."""
        return self._unary("log2")

    def log2_(self) -> Self:
        """In-place :meth:`log2`."""
        return self._unary_("log2")

    def log10(self) -> Self:
        """The base-10 logarithm of every leaf."""
        return self._unary("log10")

    def log10_(self) -> Self:
        """In-place :meth:`log10`."""
        return self._unary_("log10")

    def sqrt(self) -> Self:
        """The square root of every leaf."""
        return self._unary("sqrt")

    def sqrt_(self) -> Self:
        """In-place :meth:`sqrt`."""
        return self._unary_("sqrt")

    def rsqrt(self) -> Self:
        """``1 / sqrt(x)`` of every leaf."""
        return self._unary("rsqrt")

    def rsqrt_(self) -> Self:
        """In-place :meth:`rsqrt`."""
        return self._unary_("rsqrt")

    def reciprocal(self) -> Self:
        """``1 / x`` of every leaf."""
        return self._unary("reciprocal")

    def reciprocal_(self) -> Self:
        """In-place :meth:`reciprocal`."""
        return self._unary_("reciprocal")

    def sigmoid(self) -> Self:
        """The logistic sigmoid of every leaf."""
        return self._unary("sigmoid")

    def sigmoid_(self) -> Self:
        """In-place :meth:`sigmoid`."""
        return self._unary_("sigmoid")

    def tanh(self) -> Self:
        """``tanh`` of every leaf."""
        return self._unary("tanh")

    def tanh_(self) -> Self:
        """In-place :meth:`tanh`."""
        return self._unary_("tanh")

    def sin(self) -> Self:
        """``sin`` of every leaf."""
        return self._unary("sin")

    def sin_(self) -> Self:
        """In-place :meth:`sin`."""
        return self._unary_("sin")

    def cos(self) -> Self:
        """``cos`` of every leaf."""
        return self._unary("cos")

    def cos_(self) -> Self:
        """In-place :meth:`cos`."""
        return self._unary_("cos")

    def floor(self) -> Self:
        """``floor`` of every leaf."""
        return self._unary("floor")

    def floor_(self) -> Self:
        """In-place :meth:`floor`."""
        return self._unary_("floor")

    def ceil(self) -> Self:
        """``ceil`` of every leaf."""
        return self._unary("ceil")

    def ceil_(self) -> Self:
        """In-place :meth:`ceil`."""
        return self._unary_("ceil")

    def round(self) -> Self:
        """Round every leaf to the nearest integer."""
        return self._unary("round")

    def round_(self) -> Self:
        """In-place :meth:`round`."""
        return self._unary_("round")

    def trunc(self) -> Self:
        """Truncate every leaf towards zero."""
        return self._unary("trunc")

    def trunc_(self) -> Self:
        """In-place :meth:`trunc`."""
        return self._unary_("trunc")

    def frac(self) -> Self:
        """The fractional part of every leaf."""
        return self._unary("frac")

    def frac_(self) -> Self:
        """In-place :meth:`frac`."""
        return self._unary_("frac")

    def sign(self) -> Self:
        """The sign of every leaf."""
        return self._unary("sign")

    def sign_(self) -> Self:
        """In-place :meth:`sign`."""
        return self._unary_("sign")

    def zero_(self) -> Self:
        """Set every tensor leaf to zero, in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.ones(2)}, [2]).zero_()["a"]
        tensor([0., 0.])
        """
        _run_("zero", self._tensor_leaves([]))
        return self

    def fill_(self, key: Any, value: Any = _ALL_LEAVES) -> Self:
        """Fill the entry at ``key`` with ``value``, in place, as upstream's
        ``fill_(key, value)``; ``fill_(value)`` fills every tensor leaf.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2), b=torch.zeros(2))
        >>> td.fill_("a", 1.0)["a"]
        tensor([1., 1.])
        >>> td.fill_(2.0)["b"]
        tensor([2., 2.])
        """
        if value is _ALL_LEAVES:
            leaves = self._tensor_leaves([])
            value = key
        else:
            # select shares the stored tensors (a lazy stack's members' own), where get of a
            # lazy stack's leaf would build a new stacked tensor
            leaves = self.select(key)._tensor_leaves([])
        for leaf in leaves:
            leaf.fill_(value)
        return self
