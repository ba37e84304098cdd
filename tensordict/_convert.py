"""Casts and moves: dtype and device conversion, clone/detach, memory placement, gradients."""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._apply import rebuild, tensor_leaves
from tensordict._batch import as_device
from tensordict._nontensor import NonTensor
from tensordict._protocol import CollectionProtocol

if TYPE_CHECKING:
    from tensordict._td import TensorDict


def map_leaves(
    td: CollectionProtocol, fn: Callable[[Tensor], Tensor], device: Any = False
) -> TensorDict:
    """Same structure, each tensor leaf replaced by ``fn(leaf)`` (a shape-preserving map).

    ``device`` (when not False) becomes the device of the result and of its nested levels.
    """
    if td._lazy:
        members = [map_leaves(m, fn, device) for m in td.tensordicts]  # type: ignore[attr-defined]
        return type(td)(members, stack_dim=td.stack_dim)  # type: ignore[attr-defined,call-arg,return-value]
    entries: dict[str, Any] = {}
    out_device = td._device if device is False else device
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = fn(value)
        elif isinstance(value, NonTensor):
            entries[key] = value._with(value.batch_size, out_device)
        else:
            entries[key] = map_leaves(value, fn, device)
    return td._new_unsafe(entries, td._batch_size, out_device, td._names)


def _parse_to(call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Split ``to``'s arguments into (device or None, dtype or None)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise TypeError(f"{call}: unexpected keyword arguments {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, CollectionProtocol):
            device = arg._device
        elif isinstance(arg, (str, int, torch.device)):
            device = arg
        else:
            raise TypeError(f"{call}: cannot convert to {arg!r}; pass a device, a dtype or both")
    return (None if device is None else as_device(device)), dtype


class ConvertOps(CollectionProtocol):
    """Conversions returning a new TensorDict of the same structure (or acting in place)."""

    __slots__ = ()

    def to(self, *args: Any, non_blocking: bool = False, **kwargs: Any) -> TensorDict:
        """Move and/or cast every leaf: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``,
        ``to(tensor)`` (its device and dtype) or ``to(other_td)`` (its device).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2]).to("cpu", torch.float64)
        >>> td.device, td["a"].dtype
        (device(type='cpu'), torch.float64)
        """
        device, dtype = _parse_to("TensorDict.to", args, kwargs)
        if device is None and dtype is None:
            return self  # type: ignore[return-value]
        if device is None:
            return _cast(self, dtype)
        caster = operator.methodcaller("to", device, dtype, non_blocking=non_blocking)
        return map_leaves(self, caster, device)

    def cpu(self) -> TensorDict:
        """Every leaf on the CPU, and ``device`` set to ``cpu``."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> TensorDict:
        """Every leaf on a CUDA device (the current one by default)."""
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device))

    def float(self) -> TensorDict:
        """Cast every leaf to ``torch.float32``."""
        return self.to(torch.float32)

    def double(self) -> TensorDict:
        """Cast every leaf to ``torch.float64``."""
        return self.to(torch.float64)

    def half(self) -> TensorDict:
        """Cast every leaf to ``torch.float16``."""
        return self.to(torch.float16)

    def bfloat16(self) -> TensorDict:
        """Cast every leaf to ``torch.bfloat16``."""
        return self.to(torch.bfloat16)

    def int(self) -> TensorDict:
        """Cast every leaf to ``torch.int32``."""
        return self.to(torch.int32)

    def long(self) -> TensorDict:
        """Cast every leaf to ``torch.int64``."""
        return self.to(torch.int64)

    def bool(self) -> TensorDict:
        """Cast every leaf to ``torch.bool``."""
        return self.to(torch.bool)

    def clone(self, recurse: builtins.bool = True) -> TensorDict:
        """A copy; with ``recurse=False`` only the structure is new and leaves are shared.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.clone()["a"] is td["a"], td.clone(recurse=False)["a"] is td["a"]
        (False, True)
        """
        out = map_leaves(self, Tensor.clone if recurse else _identity)
        if self._is_locked:
            out.lock_()
        return out

    def detach(self) -> TensorDict:
        """Every leaf detached from the autograd graph."""
        return map_leaves(self, Tensor.detach)

    def detach_(self) -> TensorDict:
        """Detach every leaf in place."""
        for leaf in tensor_leaves(self, []):
            leaf.detach_()
        return self  # type: ignore[return-value]

    def contiguous(self) -> TensorDict:
        """Every leaf made contiguous (leaves already contiguous are kept as they are)."""
        return map_leaves(self, Tensor.contiguous)

    def is_contiguous(self) -> builtins.bool:
        """Whether every tensor leaf is contiguous."""
        return all(leaf.is_contiguous() for leaf in tensor_leaves(self, []))

    def requires_grad_(self, requires_grad: builtins.bool = True) -> TensorDict:
        """Set ``requires_grad`` on every floating-point or complex leaf (others are skipped)."""
        for leaf in tensor_leaves(self, []):
            if leaf.is_floating_point() or leaf.is_complex():
                leaf.requires_grad_(requires_grad)
        return self  # type: ignore[return-value]

    @property
    def requires_grad(self) -> builtins.bool:
        """Whether any leaf requires a gradient."""
        return any(leaf.requires_grad for leaf in tensor_leaves(self, []))

    def share_memory_(self) -> TensorDict:
        """Move every CPU leaf to shared memory, in place (see :meth:`is_shared`)."""
        for leaf in tensor_leaves(self, []):
            leaf.share_memory_()  # type: ignore[no-untyped-call]
        return self  # type: ignore[return-value]

    def is_shared(self) -> builtins.bool:
        """Whether the TensorDict has tensor leaves and all of them are in shared memory."""
        leaves = tensor_leaves(self, [])
        return bool(leaves) and all(leaf.is_shared() for leaf in leaves)  # type: ignore[no-untyped-call]

    def pin_memory(self) -> TensorDict:
        """Every leaf copied to page-locked memory (needs an accelerator build of torch)."""
        return map_leaves(self, Tensor.pin_memory)

    def clear_device_(self) -> TensorDict:
        """Let leaves live on any device: ``device`` becomes None here and below, in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(1)}, [1], device="cpu").clear_device_().device is None
        True
        """
        if self._lazy:
            for member in self.tensordicts:  # type: ignore[attr-defined]
                member.clear_device_()
            return self  # type: ignore[return-value]
        self._device = None
        for key, value in self._tensordict.items():
            if isinstance(value, NonTensor):
                self._tensordict[key] = value._with(value.batch_size, None)
            elif not isinstance(value, Tensor):
                value.clear_device_()
        return self  # type: ignore[return-value]

    def clear_device(self) -> TensorDict:
        """The seeds' spelling of :meth:`clear_device_` (acts in place, returns self)."""
        return self.clear_device_()


def _cast(td: CollectionProtocol, dtype: torch.dtype) -> TensorDict:
    """Every leaf cast to ``dtype``; leaves already of that dtype are kept as they are.

    Leaves of one shape, dtype and device are cast together: stacked, cast once and unbound,
    so each result is a view of one fresh buffer per group. Three calls into torch per
    group beat one cast per leaf; a leaf alone in its group is cast by itself.
    """
    leaves = tensor_leaves(td, [])
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, x in enumerate(leaves):
        if x.dtype != dtype:
            key = (x.shape, x.device, x.layout, x.dtype, x.requires_grad)
            groups.setdefault(key, []).append(i)
    for (_, _, layout, _, grad), members in groups.items():
        # grad leaves are cast alone: views of an unbind could not be modified in place
        if len(members) == 1 or layout != torch.strided or grad:
            for i in members:
                leaves[i] = leaves[i].to(dtype)
            continue
        cast = torch.stack([leaves[i] for i in members]).to(dtype).unbind(0)
        for i, x in zip(members, cast, strict=True):
            leaves[i] = x
    return rebuild(td, iter(leaves))


def _identity(x: Tensor) -> Tensor:
    return x
