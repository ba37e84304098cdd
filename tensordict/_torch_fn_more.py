"""More ``torch.*`` functions taking TensorDicts: reductions, losses, ``autograd.grad``, shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from tensordict._primitives import CollectionPrimitives

_REDUCTIONS = ("none", "mean", "sum")
# element-wise functions that ``torch.<name>(td, ...)`` sends to the method of that name,
# whose arguments and result are the torch function's (as upstream)
_POINTWISE = (
    *("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1"),
    *("floor", "frac", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round"),
    *("rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh", "trunc"),
)
_POINTWISE_ONLY = (  # no in-place twin among torch's functions, or a binary/ternary one
    *("add", "addcdiv", "addcmul", "bitwise_and", "clamp", "clamp_max", "clamp_min", "div"),
    *("isfinite", "isnan", "isneginf", "isposinf", "isreal", "lerp", "lgamma"),
    *("logical_and", "mul", "pow", "rsub", "sign", "sub"),
)


def _loss(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    """``fn(input, target)`` leaf by leaf; a reduced loss gives a TensorDict of scalars."""
    name = f"torch.nn.functional.{fn.__name__}"

    def loss(input: Any, target: Any, *args: Any, reduction: str = "mean", **kwargs: Any) -> Any:
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"{name}: reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}"
            )
        batch_size: list[int] | None = None if reduction == "none" else []
        if batch_size is not None and input._stack_parts() is not None:
            input = input._as_dense(name)  # a stack maps member by member: reduce densely
        return input.apply(
            lambda x, y: fn(x, y, *args, reduction=reduction, **kwargs),
            target,
            batch_size=batch_size,
        )

    return loss


def _grad(outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> Any:
    """``torch.autograd.grad`` from a TensorDict of outputs to a TensorDict of inputs: a
    TensorDict shaped like ``inputs`` holding the gradients."""
    one = {"outputs": outputs, "inputs": inputs, "grad_outputs": grad_outputs}
    for what, value in one.items():
        if isinstance(value, tuple):
            if len(value) != 1:
                raise ValueError(
                    f"torch.autograd.grad: a TensorDict call takes a single {what}, "
                    f"got {len(value)}"
                )
            one[what] = value[0]
    outs = one["outputs"]._tensor_leaves([])
    ins = one["inputs"]._tensor_leaves([])
    grads_out = None if one["grad_outputs"] is None else one["grad_outputs"]._tensor_leaves([])
    grads = iter(torch.autograd.grad(outs, ins, grads_out, **kwargs))
    return one["inputs"].apply(lambda _: next(grads))


def _method(name: str) -> Callable[..., Any]:
    """``torch.<name>(td, *args)`` as ``td.<name>(*args)``."""

    def method(input: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(input, CollectionPrimitives):
            raise TypeError(
                f"torch.{name}: takes the TensorDict as its first argument, got "
                f"{type(input).__name__}; write the operator instead (tensor + td)"
            )
        return getattr(input, name)(*args, **kwargs)

    return method


MORE: dict[Callable[..., Any], Callable[..., Any]] = {
    torch.mean: lambda input, *a, **k: input.mean(*a, **k),
    torch.sum: lambda input, *a, **k: input.sum(*a, **k),
    torch.std: lambda input, *a, **k: input.std(*a, **k),
    torch.var: lambda input, *a, **k: input.var(*a, **k),
    torch.prod: lambda input, *a, **k: input.prod(*a, **k),
    torch.maximum: lambda input, other: input.maximum(other),
    torch.minimum: lambda input, other: input.minimum(other),
    torch.fliplr: lambda input: input.fliplr(),
    torch.flipud: lambda input: input.flipud(),
    torch.rot90: lambda input, k=1, dims=(0, 1): input.rot90(k, dims),
    torch.tile: lambda input, dims: input.tile(dims),
    torch.broadcast_to: lambda input, size: input.broadcast_to(size),
    torch.atleast_1d: lambda input: input.atleast_1d(),
    torch.atleast_2d: lambda input: input.atleast_2d(),
    torch.atleast_3d: lambda input: input.atleast_3d(),
    torch.swapaxes: lambda input, axis0, axis1: input.swapaxes(axis0, axis1),
    torch.swapdims: lambda input, dim0, dim1: input.swapdims(dim0, dim1),
    torch.movedim: lambda input, source, destination: input.movedim(source, destination),
    torch.moveaxis: lambda input, source, destination: input.moveaxis(source, destination),
    torch.repeat_interleave: _method("repeat_interleave"),
    torch.tensor_split: _method("tensor_split"),
    torch.autograd.grad: _grad,
    F.l1_loss: _loss(F.l1_loss),
    F.mse_loss: _loss(F.mse_loss),
    F.smooth_l1_loss: _loss(F.smooth_l1_loss),
}
MORE.update({getattr(torch, name): _method(name) for name in _POINTWISE_ONLY})
MORE.update({getattr(torch, name): _method(name) for name in _POINTWISE})
MORE.update({getattr(torch, f"{name}_"): _method(f"{name}_") for name in _POINTWISE})
MORE.update(
    {getattr(torch, f"{name}_"): _method(f"{name}_") for name in ("clamp_max", "clamp_min")}
)
