"""``__torch_function__``: which ``torch.*`` functions accept TensorDicts, and what they do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._lock_keep import keeps_lock
from tensordict._primitives import CollectionPrimitives
from tensordict._shape import where
from tensordict._stack import cat, stack
from tensordict._torch_compat import disable_subclass_dispatch, is_higher_order_op
from tensordict._torch_fn_more import MORE


def _like(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    @keeps_lock  # as upstream
    def like(td: Any, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device")
        if device is not None:  # the result lives on that device, as its leaves do
            return td.apply(lambda x: fn(x, *args, **kwargs), device=torch.device(device))
        return td.apply(lambda x: fn(x, *args, **kwargs))

    return like


def _where(condition: torch.Tensor, input: Any, other: Any, *, out: Any = None) -> Any:
    """``torch.where`` through the collection's own ``where`` (a lazy stack's goes member
    by member, cutting the condition along its stack dim)."""
    if not isinstance(input, CollectionPrimitives):
        if isinstance(other, CollectionPrimitives):  # a value where condition holds
            result = other.where(condition.logical_not(), input)  # type: ignore[attr-defined]
            return result if out is None else out.update_(result)
        return where(condition, input, other, out=out)
    result = input.where(condition, other)  # type: ignore[attr-defined]
    return result if out is None else out.update_(result)


HANDLED: dict[Callable[..., Any], Callable[..., Any]] = {
    torch.stack: stack,
    torch.cat: cat,
    torch.concat: cat,
    torch.concatenate: cat,
    torch.where: _where,
    torch.zeros_like: _like(torch.zeros_like),
    torch.ones_like: _like(torch.ones_like),
    torch.empty_like: _like(torch.empty_like),
    torch.full_like: _like(torch.full_like),
    torch.rand_like: _like(torch.rand_like),
    torch.randn_like: _like(torch.randn_like),
    # the torch.* spellings, with torch's own parameter names
    torch.unbind: lambda input, dim=0: input.unbind(dim),
    torch.split: lambda tensor, split_size_or_sections, dim=0: tensor.split(
        split_size_or_sections, dim
    ),
    torch.chunk: lambda input, chunks, dim=0: input.chunk(chunks, dim),
    torch.clone: lambda input, **_: input.clone(),
    torch.squeeze: lambda input, dim=None: input.squeeze(dim),
    torch.unsqueeze: lambda input, dim: input.unsqueeze(dim),
    torch.permute: lambda input, dims: input.permute(dims),
    torch.flatten: lambda input, start_dim=0, end_dim=-1: input.flatten(start_dim, end_dim),
    torch.unflatten: lambda input, dim, sizes: input.unflatten(dim, sizes),
    torch.transpose: lambda input, dim0, dim1: input.transpose(dim0, dim1),
    torch.flip: lambda input, dims: input.flip(dims),
    torch.roll: lambda input, shifts, dims=None: input.roll(shifts, dims),
    torch.narrow: lambda input, dim, start, length: input.narrow(dim, start, length),
    torch.gather: lambda input, dim, index, out=None: input.gather(dim, index, out=out),
    torch.reshape: lambda input, shape: input.reshape(shape),
    torch.masked_select: lambda input, mask: input.masked_select(mask),
    torch.masked_fill: lambda input, mask, value: input.masked_fill(mask, value),
}
HANDLED.update(MORE)


class TorchFunctionOps:
    """Lets ``torch.stack``, ``torch.cat``, ``torch.unbind``, ... take TensorDicts."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # torch looks ``__torch_function__`` up on every TensorDict of a list argument
        # (torch.stack, torch.cat) under a fresh name string, which the type's attribute
        # cache never holds: a walk of the MRO, about 30 classes deep. A copy in each
        # class's own namespace ends that walk at its first entry (2x less dispatch time).
        if "__torch_function__" not in cls.__dict__:
            for base in cls.__mro__[1:]:
                if "__torch_function__" in base.__dict__:
                    cls.__torch_function__ = base.__dict__["__torch_function__"]  # type: ignore[method-assign]
                    break

    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        handler = HANDLED.get(func)
        if handler is None:
            if is_higher_order_op(func):  # (nested_compile_region): it opens the pytree
                with disable_subclass_dispatch():
                    return func(*args, **(kwargs or {}))
            return NotImplemented
        return handler(*args, **(kwargs or {}))
