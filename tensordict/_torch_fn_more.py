"""More ``torch.*`` functions taking TensorDicts: reductions, losses, ``autograd.grad``, shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

_REDUCTIONS = ("none", "mean", "sum")


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
    torch.autograd.grad: _grad,
    F.l1_loss: _loss(F.l1_loss),
    F.mse_loss: _loss(F.mse_loss),
    F.smooth_l1_loss: _loss(F.smooth_l1_loss),
}
