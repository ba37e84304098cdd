"""The one place that touches torch's private APIs (``torch._foreach_*``, ``torch._C._nn``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def foreach(name: str) -> Callable[..., Any] | None:
    """The multi-tensor kernel ``torch._foreach_<name>``, or None where torch lacks it."""
    return getattr(torch, f"_foreach_{name}", None)


def register_pytree_node(
    cls: type,
    flatten: Callable[[Any], tuple[list[Any], Any]],
    unflatten: Callable[[Any, Any], Any],
    flatten_with_keys: Callable[[Any], tuple[list[tuple[Any, Any]], Any]],
    name: str,
) -> None:
    """Teach ``torch.utils._pytree`` (vmap, torch.func, compile) to open ``cls``."""
    from torch.utils import _pytree

    if cls in _pytree.SUPPORTED_NODES:
        return
    _pytree.register_pytree_node(
        cls,
        flatten,
        unflatten,
        serialized_type_name=name,
        flatten_with_keys_fn=flatten_with_keys,
    )


def mapping_key(key: str) -> Any:
    """The pytree path entry for a mapping key."""
    from torch.utils import _pytree

    return _pytree.MappingKey(key)


def disable_subclass_dispatch() -> Any:
    """A context in which tensor-subclass ``__torch_function__`` overrides are skipped."""
    return torch._C.DisableTorchFunctionSubclass()


def flatten_dense(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One contiguous 1-D copy of ``tensors`` (same dtype) in order, built in one C++ call."""
    return torch._C._nn.flatten_dense_tensors(tensors)


def is_batched(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a functorch batched tensor (seen inside ``vmap``)."""
    return bool(torch._C._functorch.is_batchedtensor(tensor))


def is_functorch_wrapped(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a functorch (vmap/grad) wrapper, whose ``requires_grad`` does
    not report the autograd state of the tensor it wraps."""
    return bool(torch._C._functorch.is_functorch_wrapped_tensor(tensor))


def let_vmap_take_one_out_dim(is_collection: Callable[[Any], bool]) -> None:
    """Let ``vmap(f, ..., out_dims=(d,))`` return one TensorDict, as it already lets
    ``f`` return one tensor: torch special-cases a tensor output only, and a TensorDict
    opens into a pytree that ``(d,)`` does not match (idempotent)."""
    from torch._functorch import vmap as _vmap

    original = _vmap._unwrap_batched
    if getattr(original, "_tensordict_one_out_dim", False):
        return

    def unwrap_batched(
        batched_outputs: Any,
        out_dims: int | tuple[int, ...] | None,
        vmap_level: int,
        batch_size: int,
        func: Callable[..., Any],
    ) -> tuple[Any, ...]:
        if isinstance(out_dims, tuple) and len(out_dims) == 1 and is_collection(batched_outputs):
            out_dims = out_dims[0]
        return original(batched_outputs, out_dims, vmap_level, batch_size, func)

    unwrap_batched._tensordict_one_out_dim = True  # type: ignore[attr-defined]
    _vmap._unwrap_batched = unwrap_batched
