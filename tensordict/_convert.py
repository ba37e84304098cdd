"""Casts and moves: dtype and device conversion, clone/detach, memory placement, gradients."""

from __future__ import annotations

import builtins
import contextlib
import operator
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
from torch import Tensor

from tensordict._batch import as_device
from tensordict._lock_keep import keeps_lock
from tensordict._nontensor import NonTensor
from tensordict._primitives import CollectionPrimitives

C = TypeVar("C", bound=CollectionPrimitives)

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import DenseTensorDictBase
    from tensordict._pack import PackLayout


def map_leaves(td: C, fn: Callable[[Tensor], Tensor], device: Any = False) -> C:
    """Same kind and structure, each tensor leaf replaced by ``fn(leaf)`` (a
    shape-preserving map).

    ``device`` (when not False) becomes the device of the result and of its nested levels.
    """
    return td._per_member(_map_dense, fn, device)


def _map_dense(
    td: DenseTensorDictBase, fn: Callable[[Tensor], Tensor], device: Any
) -> DenseTensorDictBase:
    entries: dict[str, Any] = {}
    out_device = td._device if device is False else device
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = fn(value)
        elif isinstance(value, NonTensor):
            entries[key] = value._with(value.batch_size, out_device)
        else:
            entries[key] = value._per_member(_map_dense, fn, device)
    return td._new_unsafe(entries, td._batch_size, out_device, td._names)


def _is_attrs_leaf(cls: type) -> bool:
    from tensordict._tensor_attrs import TensorAttrs

    return issubclass(cls, (Tensor, TensorAttrs))


def _is_attrs_spec(arg: Any) -> bool:
    """Whether ``to``'s first argument is a collection of TensorAttrs (``td.attrs()``)."""
    if not isinstance(arg, CollectionPrimitives) or isinstance(arg, Tensor):
        return False
    from tensordict._tensor_attrs import TensorAttrs

    if isinstance(arg, TensorAttrs):
        return False
    values = arg.values(True, True, is_leaf=_is_attrs_leaf)
    return any(isinstance(v, TensorAttrs) for v in values)


def _parse_to(call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Split ``to``'s arguments into (device or None, dtype or None)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    other = kwargs.pop("other", None)  # upstream's keyword for to(tensor) / to(collection)
    if kwargs:
        raise TypeError(f"{call}: unexpected keyword arguments {sorted(kwargs)}")
    if isinstance(other, CollectionPrimitives):  # other=td: its device, and its dtype if
        device = other._device  # its leaves share one (as upstream)
        dtype = getattr(other, "dtype", None) or dtype
    elif other is not None:
        args = (*args, other)
    for arg in args:
        if arg is None:  # to(None): nothing to move or cast (self, as upstream)
            continue
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, CollectionPrimitives):  # positional: its device only, as
            device = arg._device  # upstream (a leaf's dtype is its own business)
        elif isinstance(arg, (str, int, torch.device)):
            device = arg
        else:
            raise TypeError(f"{call}: cannot convert to {arg!r}; pass a device, a dtype or both")
    return (None if device is None else as_device(device)), dtype


def _is_collection_arg(args: tuple[Any, ...]) -> builtins.bool:
    """Whether ``to`` was given a collection to take the device of (``to(other_td)``)."""
    return builtins.bool(args) and isinstance(args[0], CollectionPrimitives)


CLASS_FILTER: Any = object()  # no cast_filter given: the class's own (a tensorclass option)


class ConvertOps(CollectionPrimitives):
    """Conversions returning a new TensorDict of the same structure (or acting in place)."""

    __slots__ = ()
    _cast_filter: ClassVar[Callable[[tuple[str, ...], Tensor], builtins.bool] | None] = None

    @keeps_lock
    def to(self, *args: Any, non_blocking: bool = False, **kwargs: Any) -> Self:
        """Move and/or cast every leaf: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``,
        ``to(tensor)`` (its device and dtype), ``to(other_td)`` (its device, as upstream)
        or ``to(other=other_td)`` (its device, and the dtype its leaves share when they
        share one); ``inplace=True`` makes this collection hold the result and returns it.
        ``cast_filter=fn`` casts only the leaves for which ``fn(key, leaf)`` is true (``key``
        a tuple of str), moving all of them; a tensorclass may declare a default one, which
        ``cast_filter=None`` turns off. A move to the device this collection already
        declares returns it unchanged (``self``), as upstream; a cast always copies.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2]).to("cpu", torch.float64)
        >>> td.device, td["a"].dtype
        (device(type='cpu'), torch.float64)
        """
        if kwargs.pop("inplace", False):
            return _to_inplace(self, self.to(*args, non_blocking=non_blocking, **kwargs))  # type: ignore[no-any-return]
        batch_size = kwargs.pop("batch_size", None)
        if batch_size is not None:
            return self._to_batch_size(batch_size, args, non_blocking, kwargs)
        if args and _is_attrs_spec(args[0]):
            return self._to_attrs(args[0], args[1:], non_blocking, kwargs)
        cast_filter = kwargs.pop("cast_filter", CLASS_FILTER)
        if cast_filter is CLASS_FILTER:
            cast_filter = type(self)._cast_filter
        fmt = kwargs.pop("memory_format", torch.preserve_format)
        device, dtype = _parse_to(self._call("to"), args, kwargs)
        if device is None and dtype is None:
            out = self
        elif dtype is None and device == self.device and not _is_collection_arg(args):
            out = self  # already there: self, as upstream (to(other_td) still copies)
        elif cast_filter is not None and dtype is not None:
            out = _filtered_to(self, device, dtype, cast_filter, non_blocking)
        elif device is None:
            out = _cast(self, dtype)
        else:
            caster = operator.methodcaller("to", device, dtype, non_blocking=non_blocking)
            out = map_leaves(self, caster, device)
        if fmt is not torch.preserve_format:  # as Tensor.to(memory_format=...), per leaf
            out = map_leaves(out, operator.methodcaller("to", memory_format=fmt))
        # ``with td.to(device) as t:`` writes ``t`` back on exit. The source is held weakly
        # (a strong reference would keep every earlier version of ``x = x.to(...)`` alive);
        # a ``to`` that returns self forgets an older record (nothing to write back).
        record: Any = None
        if out is not self:
            with contextlib.suppress(TypeError):  # (not weakly referenceable: none)
                record = ("to", (dtype is not None,), weakref.ref(self))
        out._last_op = record  # type: ignore[attr-defined]
        return out

    def _sync_all(self) -> None:
        """Wait for the non-blocking copies queued on accelerators (upstream's hook of this
        name; a no-op when no accelerator is in use)."""
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            torch.cuda.synchronize()

    def attrs(
        self,
        fields: Sequence[str] = ("device", "dtype", "shape"),
        *,
        num_threads: builtins.int | None = None,
    ) -> Any:
        """A TensorDict (empty batch) holding, for every tensor leaf, a
        :class:`~tensordict.TensorAttrs` of the ``fields`` asked for; ``to(attrs)`` moves
        and casts a collection to match it. ``num_threads`` is accepted for upstream's
        signature: reading attributes is built on the calling thread.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2), n=TensorDict(b=torch.zeros(2, dtype=torch.int32)))
        >>> spec = td.attrs()
        >>> spec["n", "b"].tgt_dtype, td.float().to(spec)["n", "b"].dtype
        (torch.int32, torch.int32)
        """
        from tensordict._td import TensorDict
        from tensordict._tensor_attrs import TensorAttrs

        out = TensorDict({}, [])
        for key, leaf in self.items(True, True):
            if isinstance(leaf, Tensor):
                out.set(key, TensorAttrs.from_tensor(leaf, fields=fields))
        return out

    def _to_attrs(
        self, spec: Any, args: tuple[Any, ...], non_blocking: bool, kwargs: dict[str, Any]
    ) -> Self:
        """``to(attrs_td)``: each leaf named in ``spec`` moved to its device and cast to its
        dtype (the attributes it records); the other leaves are kept as they are."""
        from tensordict._tensor_attrs import TensorAttrs

        call = self._call("to")
        if args:
            raise TypeError(
                f"{call}: a TensorAttrs collection does not accept additional positional "
                f"arguments, got {args!r}"
            )
        if kwargs.pop("non_blocking_pin", False):
            raise NotImplementedError(f"{call}: non_blocking_pin is not supported with TensorAttrs")
        if kwargs:
            raise TypeError(f"{call}: unexpected keyword arguments {sorted(kwargs)}")
        targets = dict(spec.items(True, True, is_leaf=_is_attrs_leaf))

        def fn(key: Any, x: Tensor) -> Tensor:
            target = targets.get(key)
            if not isinstance(target, TensorAttrs):
                return x
            return x.to(device=target.tgt_device, dtype=target.tgt_dtype, non_blocking=non_blocking)

        return self.named_apply(fn, nested_keys=True)  # type: ignore[attr-defined,no-any-return]

    def _to_batch_size(
        self, batch_size: Any, args: tuple[Any, ...], non_blocking: bool, kwargs: dict[str, Any]
    ) -> Self:
        """``to(..., batch_size=)``: the moved or cast copy, given that batch size."""
        call = self._call("to")
        if self._stack_parts() is not None:
            raise TypeError(
                f"{call}: Cannot pass batch-size to a {type(self).__name__} (its batch size "
                "comes from its members); reshape the result instead"
            )
        out = self.to(*args, non_blocking=non_blocking, **kwargs)
        if out is self:
            out = self.copy()  # type: ignore[attr-defined]
        if not out._is_locked:
            out.batch_size = batch_size  # type: ignore[misc]
            return out
        out.unlock_()  # a new collection that keeps the lock, made with its batch size
        out.batch_size = batch_size  # type: ignore[misc]
        return out.lock_()

    def cpu(self) -> Self:
        """Every leaf on the CPU, and ``device`` set to ``cpu``."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> Self:
        """Every leaf on a CUDA device (the current one by default)."""
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device))

    def float(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.float32``."""
        return self.to(torch.float32, cast_filter=cast_filter)

    def double(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.float64``."""
        return self.to(torch.float64, cast_filter=cast_filter)

    def half(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.float16``."""
        return self.to(torch.float16, cast_filter=cast_filter)

    def bfloat16(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.bfloat16``."""
        return self.to(torch.bfloat16, cast_filter=cast_filter)

    def int(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.int32``."""
        return self.to(torch.int32, cast_filter=cast_filter)

    def long(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.int64``."""
        return self.to(torch.int64, cast_filter=cast_filter)

    def bool(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Cast every leaf (those ``cast_filter`` selects) to ``torch.bool``."""
        return self.to(torch.bool, cast_filter=cast_filter)

    def clone(self, recurse: builtins.bool = True) -> Self:
        """A copy; with ``recurse=False`` only the structure is new and leaves are shared.
        The copy is unlocked (as upstream's), but for a shallow copy of a locked,
        memory-mapped or shared collection.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.clone()["a"] is td["a"], td.clone(recurse=False)["a"] is td["a"]
        (False, True)
        """
        out = map_leaves(self, Tensor.clone if recurse else _identity)
        # as upstream, a clone is not locked (one clones to modify), except a shallow one of
        # a memory-mapped or shared collection: its keys are still those files or segments
        # (inside a compiled graph a leaf's memory cannot be asked: there, memmap only)
        if (
            self._is_locked
            and not recurse
            and (
                self.is_memmap()  # type: ignore[attr-defined]
                or (not torch.compiler.is_compiling() and self.is_shared())
            )
        ):
            out.lock_()
        return out

    @keeps_lock
    def detach(self) -> Self:
        """Every leaf detached from the autograd graph."""
        return map_leaves(self, Tensor.detach)

    def detach_(self) -> Self:
        """Detach every leaf in place."""
        for leaf in self._tensor_leaves([]):
            leaf.detach_()
        return self

    def contiguous(
        self, inplace: builtins.bool = False, *, canonical: builtins.bool = False
    ) -> Self:
        """Every leaf made contiguous (leaves already contiguous are kept as they are);
        ``inplace=True`` makes this collection the result. ``canonical=True`` also copies
        the leaves that torch calls contiguous but whose strides are not the row-major
        ones (size-1 dims with other strides).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = torch.empty_strided((1, 2), (5, 1))
        >>> TensorDict(a=x).contiguous(canonical=True)["a"].stride()
        (2, 1)
        """
        from tensordict._context import adopt

        out = map_leaves(self, _canonical if canonical else Tensor.contiguous)
        return adopt(self, out, self._call("contiguous")) if inplace else out

    def is_contiguous(self) -> builtins.bool:
        """Whether every tensor leaf is contiguous; never for a lazy stack, which builds
        its leaves when they are read (as upstream: ``contiguous()`` makes it dense).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> td = TensorDict(a=torch.zeros(2, 3), batch_size=[2])
        >>> td.is_contiguous(), lazy_stack([td, td]).is_contiguous()
        (True, False)
        """
        if self._stack_parts() is not None:
            return False
        return all(leaf.is_contiguous() for leaf in self._tensor_leaves([]))

    def requires_grad_(self, requires_grad: builtins.bool = True) -> Self:
        """Set ``requires_grad`` on every floating-point or complex leaf (others are skipped)."""
        for leaf in self._tensor_leaves([]):
            if leaf.is_floating_point() or leaf.is_complex():
                leaf.requires_grad_(requires_grad)
        return self

    @property
    def requires_grad(self) -> builtins.bool:
        """Whether any leaf requires a gradient."""
        return any(leaf.requires_grad for leaf in self._tensor_leaves([]))

    def share_memory_(self) -> Self:
        """Move every CPU leaf to shared memory, in place (see :meth:`is_shared`), and
        lock the keys as upstream does: a key added afterwards would not be shared."""
        for leaf in self._tensor_leaves([]):
            leaf.share_memory_()  # type: ignore[no-untyped-call]
        return self.lock_()

    def is_shared(self) -> builtins.bool:
        """Whether the TensorDict has tensor leaves and all of them are in shared memory."""
        leaves = self._tensor_leaves([])
        return bool(leaves) and all(leaf.is_shared() for leaf in leaves)  # type: ignore[no-untyped-call]

    def pin_memory(
        self, num_threads: builtins.int | None = None, inplace: builtins.bool = False
    ) -> Self:
        """Every leaf copied to page-locked memory (needs an accelerator build of torch).

        ``num_threads`` > 0 pins the leaves on that many threads; ``inplace=True`` pins
        each leaf in place (as :meth:`pin_memory_`) and returns ``self``.
        """
        if num_threads is not None and (type(num_threads) is not builtins.int or num_threads < 0):
            raise ValueError(
                f"{self._call('pin_memory')}: num_threads must be an int >= 0, got {num_threads!r}"
            )
        if inplace:
            return self.pin_memory_(num_threads)  # type: ignore[attr-defined,no-any-return]
        if not num_threads:
            return map_leaves(self, Tensor.pin_memory)
        leaves = self._tensor_leaves([])
        with ThreadPoolExecutor(num_threads) as pool:
            pinned = dict(zip(map(id, leaves), pool.map(Tensor.pin_memory, leaves), strict=True))
        return map_leaves(self, lambda leaf: pinned[id(leaf)])

    def clear_device_(self) -> Self:
        """Let leaves live on any device: ``device`` becomes None here and below, in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(1)}, [1], device="cpu").clear_device_().device is None
        True
        """
        self._per_member(_clear_device_dense)
        self._device = None
        return self

    def clear_device(self) -> Self:
        """The seeds' spelling of :meth:`clear_device_` (acts in place, returns self)."""
        return self.clear_device_()

    def pack(
        self, dim: builtins.int = -1, *, layout: PackLayout | None = None
    ) -> tuple[Tensor, PackLayout]:
        """Every leaf flattened after the batch dims and concatenated into one contiguous
        feature tensor, with the :class:`~tensordict.PackLayout` that undoes it.

        The columns follow ``keys(True, True, sort=True)`` (or ``layout.keys`` when a
        ``layout`` is given: a missing or extra leaf then raises ``KeyError``, a
        different feature shape ``ValueError``). ``dim`` places the packed dimension
        among the batch dims as ``torch.stack`` would: the result of ``dim=-1`` has shape
        ``(*batch_size, F)``. Every leaf must share one dtype and one device; non-tensor
        entries raise ``TypeError`` (drop them with ``filter_non_tensor_data()``). A lazy
        stack packs as its dense equivalent. Gradients flow through the packed tensor.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(obs=torch.ones(4, 3), act=torch.zeros(4, 2, 1), batch_size=[4])
        >>> flat, layout = td.pack()
        >>> flat.shape, layout.keys, layout.shapes
        (torch.Size([4, 5]), ('act', 'obs'), (torch.Size([2, 1]), torch.Size([3])))
        >>> layout.unpack(flat)["obs"].shape
        torch.Size([4, 3])
        """
        from tensordict._pack import PackLayout, pack

        if layout is not None and not isinstance(layout, PackLayout):
            raise TypeError(f"pack: layout must be a PackLayout, got {type(layout).__name__}")
        return pack(self, dim, layout)  # type: ignore[arg-type,no-any-return]


def _clear_device_dense(td: DenseTensorDictBase) -> DenseTensorDictBase:
    td._device = None
    for key, value in td._tensordict.items():
        if isinstance(value, NonTensor):
            td._tensordict[key] = value._with(value.batch_size, None)
        elif not isinstance(value, Tensor):
            _clear_device_dense(value)
    return td


def _filtered_to(
    td: C, device: Any, dtype: torch.dtype, keep: Any, non_blocking: builtins.bool
) -> C:
    """``to(device, dtype)`` casting only the leaves ``keep(key_tuple, leaf)`` selects."""
    if not callable(keep):
        raise TypeError(
            f"{td._call('to')}: cast_filter must be a callable (key, value) -> bool or None, "
            f"got {type(keep).__name__}"
        )

    def move(key: Any, leaf: Tensor) -> Tensor:
        path = (key,) if type(key) is str else tuple(key)
        return leaf.to(device, dtype if keep(path, leaf) else None, non_blocking=non_blocking)

    out: C = td.named_apply(  # type: ignore[attr-defined]
        move, nested_keys=True, **({} if device is None else {"device": device})
    )
    return out


def _cast(td: C, dtype: torch.dtype) -> C:
    """Every leaf cast to ``dtype``; leaves already of that dtype are kept as they are.

    Leaves of one shape, dtype and device are cast together: stacked, cast once and unbound,
    so each result is a view of one fresh buffer per group. Three calls into torch per
    group beat one cast per leaf; a leaf alone in its group is cast by itself.
    """
    leaves = td._tensor_leaves([])
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, x in enumerate(leaves):
        if x.dtype != dtype:
            key: tuple[Any, ...]
            try:
                key = (x.shape, x.device, x.layout, x.dtype, x.requires_grad)
            except RuntimeError:  # a strided nested tensor (no shape): cast alone
                key = (i, x.device, torch.jagged, x.dtype, x.requires_grad)
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
    return td._rebuild(iter(leaves))


def _identity(x: Tensor) -> Tensor:
    return x


def _canonical(x: Tensor) -> Tensor:
    """``x`` with row-major strides (a copy only when its strides differ)."""
    expected, step = [], 1
    for size in reversed(x.shape):
        expected.append(step)
        step *= size
    if x.stride() == tuple(reversed(expected)):
        return x
    return x.clone(memory_format=torch.contiguous_format)


def _to_inplace(td: Any, out: Any) -> Any:
    """``td`` made, in place, what ``to`` returned (nested collections keep identity)."""
    from tensordict._context import adopt

    adopt(td, out, td._call("to"))
    _take_devices(td, out)
    return td


def _take_devices(td: Any, out: Any) -> None:
    td._device = out._device
    parts = td._stack_parts()
    if parts is not None:  # a lazy stack: its members too
        for member, new in zip(parts[1], out._stack_parts()[1], strict=True):
            _take_devices(member, new)
        return
    for key, value in td._tensordict.items():
        other = out._tensordict.get(key)
        if hasattr(value, "_tensordict") and hasattr(other, "_tensordict"):
            _take_devices(value, other)
