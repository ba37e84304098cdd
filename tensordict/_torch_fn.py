"""``__torch_function__``: which ``torch.*`` functions accept TensorDicts, and what they do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._shape import where
from tensordict._stack import cat, stack


def _like(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def like(td: Any, *args: Any, **kwargs: Any) -> Any:
        return td.apply(lambda x: fn(x, *args, **kwargs))

    return like


def _method(name: str) -> Callable[..., Any]:
    def call(td: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(td, name)(*args, **kwargs)

    return call


HANDLED: dict[Callable[..., Any], Callable[..., Any]] = {
    torch.stack: stack,
    torch.cat: cat,
    torch.concat: cat,
    torch.concatenate: cat,
    torch.where: where,
    torch.zeros_like: _like(torch.zeros_like),
    torch.ones_like: _like(torch.ones_like),
    torch.empty_like: _like(torch.empty_like),
    torch.full_like: _like(torch.full_like),
    torch.rand_like: _like(torch.rand_like),
    torch.randn_like: _like(torch.randn_like),
    **{
        getattr(torch, name): _method(name)
        for name in (
            "unbind",
            "split",
            "chunk",
            "clone",
            "squeeze",
            "unsqueeze",
            "permute",
            "flatten",
            "unflatten",
            "transpose",
            "flip",
            "roll",
            "narrow",
            "gather",
            "reshape",
            "masked_select",
            "masked_fill",
        )
    },
}


class TorchFunctionOps:
    """Lets ``torch.stack``, ``torch.cat``, ``torch.unbind``, ... take TensorDicts."""

    __slots__ = ()

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
            return NotImplemented
        return handler(*args, **(kwargs or {}))
