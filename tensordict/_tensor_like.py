"""What a collection answers as a tensor would: data, grad, dtype, size, new_*, casts, lists."""

from __future__ import annotations

import builtins
import collections
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._convert import CLASS_FILTER
from tensordict._lock_keep import keeps_lock
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._primitives import CollectionPrimitives
from tensordict._views import with_non_tensor

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import TensorDictBase

_NO_DEVICE: Any = object()


def _size_arg(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and not isinstance(size[0], int):
        return tuple(size[0])
    return tuple(size)


def _gradients(
    call: str, td: Any, gradient: Any, leaves: list[Tensor], pick: list[int]
) -> list[Tensor]:
    """The gradient of each differentiable leaf (``pick``), looked up by its key in
    ``gradient``; the other leaves need none."""
    from tensordict._apply import tensor_leaf_paths

    paths: list[tuple[str, ...]] = []
    if td._stack_parts() is None:
        tensor_leaf_paths(td, (), paths)
    if len(paths) != len(leaves):  # lazy stacks: every leaf, in member order
        others = td._other_leaves(call, gradient)
        return [others[i] for i in pick]
    out = []
    for i in pick:
        grad = gradient._get_path_or_none(paths[i])
        if not isinstance(grad, Tensor):
            key = paths[i][0] if len(paths[i]) == 1 else paths[i]
            raise KeyError(f"{call}: Missing gradient entry for key {key!r}")
        out.append(grad)
    return out


def _dense(self: Any, call: str) -> Any:
    """``self``, or the dense form of a stack (whose ``apply`` maps member by member)."""
    return self if self._stack_parts() is None else self._as_dense(call)


def _public(value: Any) -> Any:
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value


class TensorLikeOps(CollectionPrimitives):
    """Tensor attributes and constructors, leaf by leaf."""

    __slots__ = ()

    if TYPE_CHECKING:

        def to(self, *args: Any, **kwargs: Any) -> Self: ...
        def to_dict(
            self,
            *,
            retain_none: builtins.bool = True,
            convert_tensors: builtins.bool | str = False,
            tolist_first: builtins.bool = False,
        ) -> dict[str, Any]: ...
        def _index(self, index: Any) -> Any: ...

    # ---------------------------------------------------------- autograd
    @property
    def data(self) -> Self:
        """The same collection over ``x.data`` of every leaf (detached, shared storage).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(2, requires_grad=True)).data["a"].requires_grad
        False
        """
        out = self.apply(lambda x: x.data)
        return out.lock_() if self.is_locked else out  # as upstream: the lock carries over

    @property
    def grad(self) -> Self | None:
        """The ``.grad`` of every leaf (leaves without one are left out; None when no
        leaf has one, as upstream).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.ones(2, requires_grad=True))
        >>> td.grad is None
        True
        >>> td["a"].sum().backward()
        >>> td.grad["a"]
        tensor([1., 1.])
        """
        out = self.apply(lambda x: x.grad)
        if out is None or not out._tensor_leaves([]):
            return None
        return out.lock_() if self.is_locked else out

    @grad.setter
    def grad(self, grad: Any) -> None:
        for x, g in zip(self._tensor_leaves([]), self._other_leaves("grad", grad), strict=True):
            if x.grad is None:
                x.grad = g
            else:
                x.grad.copy_(g)

    def zero_grad(self, set_to_none: builtins.bool = True) -> Self:
        """Reset the gradient of every leaf (to None, or to zeros).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.ones(2, requires_grad=True))
        >>> td["a"].sum().backward()
        >>> td.zero_grad()["a"].grad is None
        True
        """
        for x in self._tensor_leaves([]):
            if x.grad is None:
                continue
            if set_to_none:
                x.grad = None
            else:
                x.grad.zero_()
        return self

    def backward(
        self,
        gradient: Any = None,
        retain_graph: builtins.bool | None = None,
        create_graph: builtins.bool = False,
        inputs: Any = None,
    ) -> None:
        """Back-propagate from every differentiable leaf at once (``gradient``: a collection
        of the same keys; without it every differentiable leaf must hold one element).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = torch.ones(2, requires_grad=True)
        >>> TensorDict(a=(x * 3).sum(), b=(x * 2).sum()).backward()
        >>> x.grad
        tensor([5., 5.])
        """
        call = self._call("backward")
        leaves = self._tensor_leaves([])
        pick = [i for i, x in enumerate(leaves) if x.requires_grad]
        if not pick:
            raise RuntimeError(
                f"{call}: there is no leaf tensor requiring gradients to back-propagate from"
            )
        grads = None
        if gradient is not None:
            if not isinstance(gradient, CollectionPrimitives):
                raise TypeError(
                    f"{call}: gradient must be a TensorDictBase of the same keys, got "
                    f"{type(gradient).__name__}"
                )
            grads = _gradients(call, self, gradient, leaves, pick)
        if isinstance(inputs, CollectionPrimitives):
            inputs = inputs._tensor_leaves([])
        torch.autograd.backward(
            [leaves[i] for i in pick],
            grad_tensors=grads,
            retain_graph=retain_graph,
            create_graph=create_graph,
            inputs=inputs,
        )

    # ------------------------------------------------------------ counting
    def param_count(self, *, count_duplicates: builtins.bool = True) -> builtins.int:
        """The number of elements over all tensor leaves.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, 3), b=torch.zeros(4)).param_count()
        10
        """
        return sum(x.numel() for x in self._leaves_once(count_duplicates))

    def bytes(self, *, count_duplicates: builtins.bool = True) -> builtins.int:
        """The number of bytes over all tensor leaves.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, 3), b=torch.zeros(4, dtype=torch.int8)).bytes()
        28
        """
        parts: list[Tensor] = []
        for leaf in self._tensor_leaves([]):
            _byte_parts(leaf, parts)
        if not count_duplicates:  # the same tensor object counted once
            parts = list({id(x): x for x in parts}.values())
        return sum(x.numel() * x.element_size() for x in parts)

    def _leaves_once(self, count_duplicates: builtins.bool) -> list[Tensor]:
        leaves = self._tensor_leaves([])
        if count_duplicates:
            return leaves
        return list({id(x): x for x in leaves}.values())

    def data_ptr(self, *, storage: builtins.bool = False) -> Any:
        """A TensorDict of the ``data_ptr()`` of every tensor leaf (of its storage if
        ``storage``), batch size ``[]``. Non-tensor entries have no data pointer and are
        left out, and so is a level left empty; a lazy stack gives one entry per member,
        keyed ``"0"``, ``"1"``, ... (as upstream).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = torch.zeros(3)
        >>> ptrs = TensorDict(a=t, s="text").data_ptr()
        >>> ptrs["a"].item() == t.data_ptr(), list(ptrs.keys())
        (True, ['a'])
        """
        from tensordict._td import TensorDict

        entries: dict[str, Any] = {}
        parts = self._stack_parts()
        if parts is not None:  # the members' own pointers (a dense copy would have new ones)
            for i, member in enumerate(parts[1]):
                entries[str(i)] = member.data_ptr(storage=storage)
            return TensorDict(entries, batch_size=[])
        for key, value in self.items(is_leaf=with_non_tensor):
            if isinstance(value, Tensor):
                ptr = value.untyped_storage().data_ptr() if storage else value.data_ptr()
                entries[key] = torch.tensor(ptr)
            elif isinstance(value, CollectionPrimitives) and not isinstance(value, NonTensor):
                sub = value.data_ptr(storage=storage)  # type: ignore[attr-defined]
                if not sub.is_empty():
                    entries[key] = sub
        return TensorDict(entries, batch_size=[])

    def record_stream(self, stream: Any) -> Self:
        """``record_stream`` on every leaf (CUDA tensors only).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict().record_stream(None).is_empty()
        True
        """
        for x in self._tensor_leaves([]):
            x.record_stream(stream)
        return self

    # ------------------------------------------------------------- shape
    def size(self, dim: builtins.int | None = None) -> Any:
        """The batch size, or its ``dim``-th entry.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[3, 4]).size(), TensorDict(batch_size=[3, 4]).size(-1)
        (torch.Size([3, 4]), 4)
        """
        if dim is None:
            return self._batch_size
        return self._batch_size[dim]

    def ndimension(self) -> builtins.int:
        """The number of batch dimensions.

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[3, 4]).ndimension()
        2
        """
        return len(self._batch_size)

    # -------------------------------------------------------------- dtype
    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype shared by every tensor leaf, or None when they differ (or there is none).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> mixed = TensorDict(a=torch.zeros(1), b=torch.ones(1, dtype=torch.int64))
        >>> TensorDict(a=torch.zeros(1)).dtype, mixed.dtype
        (torch.float32, None)
        """
        dtypes = {x.dtype for x in self._tensor_leaves([])}
        return dtypes.pop() if len(dtypes) == 1 else None

    def is_floating_point(self) -> builtins.bool:
        """Whether every tensor leaf is floating point.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(1)).is_floating_point()
        True
        """
        return all(x.is_floating_point() for x in self._tensor_leaves([]))

    @property
    def is_cpu(self) -> builtins.bool:
        """Whether the device is the CPU (every leaf on the CPU when no device is set)."""
        if self._device is not None:
            return self._device.type == "cpu"
        return all(x.is_cpu for x in self._tensor_leaves([]))

    @property
    def is_cuda(self) -> builtins.bool:
        """Whether the device is a CUDA device."""
        return self._device is not None and self._device.type == "cuda"

    @property
    def is_meta(self) -> builtins.bool:
        """Whether the leaves live on the meta device."""
        if self._device is not None:
            return self._device.type == "meta"
        leaves = self._tensor_leaves([])
        return builtins.bool(leaves) and all(x.is_meta for x in leaves)

    def type(self, dst_type: Any, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf cast to ``dst_type`` (a dtype or a type name such as ``'torch.IntTensor'``;
        a dtype cast takes ``cast_filter`` as :meth:`to` does).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(1)).type(torch.int32)["a"].dtype
        torch.int32
        """
        if isinstance(dst_type, torch.dtype):
            return self.to(dst_type, cast_filter=cast_filter)
        return self.apply(lambda x: x.type(dst_type))

    def float16(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.float16``."""
        return self.to(torch.float16, cast_filter=cast_filter)

    def float32(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.float32``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(1, dtype=torch.int64)).float32()["a"].dtype
        torch.float32
        """
        return self.to(torch.float32, cast_filter=cast_filter)

    def float64(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.float64``."""
        return self.to(torch.float64, cast_filter=cast_filter)

    def int8(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.int8``."""
        return self.to(torch.int8, cast_filter=cast_filter)

    def int16(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.int16``."""
        return self.to(torch.int16, cast_filter=cast_filter)

    def int32(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.int32``."""
        return self.to(torch.int32, cast_filter=cast_filter)

    def int64(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.int64``."""
        return self.to(torch.int64, cast_filter=cast_filter)

    def uint8(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.uint8``."""
        return self.to(torch.uint8, cast_filter=cast_filter)

    def uint16(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.uint16``."""
        return self.to(torch.uint16, cast_filter=cast_filter)

    def uint32(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.uint32``."""
        return self.to(torch.uint32, cast_filter=cast_filter)

    def uint64(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.uint64``."""
        return self.to(torch.uint64, cast_filter=cast_filter)

    def complex32(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.complex32``."""
        return self.to(torch.complex32, cast_filter=cast_filter)

    def complex64(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.complex64``."""
        return self.to(torch.complex64, cast_filter=cast_filter)

    def complex128(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.complex128``."""
        return self.to(torch.complex128, cast_filter=cast_filter)

    def qint8(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.qint8`` (as torch allows)."""
        return self.to(torch.qint8, cast_filter=cast_filter)

    def qint32(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.qint32`` (as torch allows)."""
        return self.to(torch.qint32, cast_filter=cast_filter)

    def quint8(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.quint8`` (as torch allows)."""
        return self.to(torch.quint8, cast_filter=cast_filter)

    def quint4x2(self, *, cast_filter: Any = CLASS_FILTER) -> Self:
        """Every leaf (those ``cast_filter`` selects) cast to ``torch.quint4x2``."""
        return self.to(torch.quint4x2, cast_filter=cast_filter)

    # --------------------------------------------------------- constructors
    def _new(
        self,
        name: str,
        size: tuple[Any, ...],
        fill: tuple[Any, ...],
        kw: Any,
        empty_lazy: builtins.bool = False,
    ) -> Self:
        shape = _size_arg(size)
        if empty_lazy:
            # dense where it can be (upstream's masked writes into the result then fill
            # every row); lazy stacks with no dense form (ragged, or members of different
            # structures) become empty lazy stacks of the new batch size
            try:
                return self._new(name, size, fill, kw)
            except RuntimeError:
                from tensordict._empty_lazy import new_keeping_lazy

                return new_keeping_lazy(  # type: ignore[no-any-return]
                    self._call(name),
                    self,
                    torch.Size(shape),
                    lambda td: td._new(name, size, fill, kw),
                )
        n = len(self._batch_size)

        def fn(x: Tensor) -> Tensor:
            return getattr(x, name)((*shape, *x.shape[n:]), *fill, **kw)  # type: ignore[no-any-return]

        device = kw.get("device", _NO_DEVICE)
        src = _dense(self, self._call(name))
        if device is _NO_DEVICE:
            # non-tensor entries take the new batch: a stack repeats its first value
            def refill(v: Any) -> Any:
                new_bs = torch.Size([*shape, *v.batch_size[n:]])
                if isinstance(v, NonTensorStack):
                    first = v.values[int(v.positions.reshape(-1)[0])] if v.numel() else None
                    blank = torch.zeros(new_bs, dtype=torch.long)
                    return NonTensorStack._from_positions([first], blank, v.device)
                return v._with(new_bs, v.device)

            return src._remap(self._call(name), fn, torch.Size(shape), None, refill)  # type: ignore[no-any-return]
        return src.apply(fn, batch_size=shape, device=device)  # type: ignore[no-any-return]

    def new_zeros(
        self,
        *size: Any,
        dtype: torch.dtype | None = None,
        device: Any = _NO_DEVICE,
        requires_grad: builtins.bool = False,
        layout: torch.layout = torch.strided,
        pin_memory: builtins.bool | None = None,
        empty_lazy: builtins.bool = False,
    ) -> Self:
        """A collection of batch size ``size`` whose leaves are zeros (each leaf keeps its
        feature shape and, unless ``dtype`` is given, its dtype).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(3, 2), batch_size=[3]).new_zeros(5)["a"].shape
        torch.Size([5, 2])

        ``layout`` and ``pin_memory`` are passed to each leaf's ``new_zeros``. The result
        is dense; with ``empty_lazy=True`` a lazy stack that has no dense form (ragged,
        or members of different structures) gives an empty lazy stack of the new batch
        size along its stack dim instead (a nested one gives an empty level).

        >>> from tensordict import lazy_stack
        >>> s = lazy_stack([TensorDict(batch_size=[2]), TensorDict(batch_size=[3])], 1)
        >>> e = s.new_zeros(4, 5, empty_lazy=True)
        >>> type(e).__name__, e.batch_size, e.is_empty()
        ('LazyStackedTensorDict', torch.Size([4, 5]), True)
        """
        kw = _kw(dtype, device, requires_grad, layout, pin_memory)
        return self._new("new_zeros", size, (), kw, empty_lazy)

    def new_ones(
        self,
        *size: Any,
        dtype: torch.dtype | None = None,
        device: Any = _NO_DEVICE,
        requires_grad: builtins.bool = False,
        layout: torch.layout = torch.strided,
        pin_memory: builtins.bool | None = None,
        empty_lazy: builtins.bool = False,
    ) -> Self:
        """Like :meth:`new_zeros`, filled with ones."""
        kw = _kw(dtype, device, requires_grad, layout, pin_memory)
        return self._new("new_ones", size, (), kw, empty_lazy)

    def new_empty(
        self,
        *size: Any,
        dtype: torch.dtype | None = None,
        device: Any = _NO_DEVICE,
        requires_grad: builtins.bool = False,
        layout: torch.layout = torch.strided,
        pin_memory: builtins.bool | None = None,
        empty_lazy: builtins.bool = False,
    ) -> Self:
        """Like :meth:`new_zeros`, uninitialised."""
        kw = _kw(dtype, device, requires_grad, layout, pin_memory)
        return self._new("new_empty", size, (), kw, empty_lazy)

    def new_full(
        self,
        size: Sequence[builtins.int],
        fill_value: Any,
        *,
        dtype: torch.dtype | None = None,
        device: Any = _NO_DEVICE,
        requires_grad: builtins.bool = False,
        layout: torch.layout = torch.strided,
        pin_memory: builtins.bool | None = None,
        empty_lazy: builtins.bool = False,
    ) -> Self:
        """Like :meth:`new_zeros`, filled with ``fill_value``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(3), batch_size=[3]).new_full([2], 7)["a"]
        tensor([7., 7.])
        """
        kw = _kw(dtype, device, requires_grad, layout, pin_memory)
        return self._new("new_full", (tuple(size),), (fill_value,), kw, empty_lazy)

    def new_tensor(
        self,
        data: Any,
        *,
        dtype: torch.dtype | None = None,
        device: Any = _NO_DEVICE,
        requires_grad: builtins.bool = False,
        pin_memory: builtins.bool | None = None,
    ) -> Self:
        """A collection of the same keys whose leaves are ``data`` (a tensor, or a
        collection paired leaf by leaf), with each leaf's dtype unless ``dtype`` is given.
        A tensor or collection given as ``data`` is copied, with torch's
        :meth:`torch.Tensor.new_tensor` warning (once per call) that ``detach().clone()``
        says the same.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(1)).new_tensor([1, 2])["a"]
        tensor([1., 2.])
        """
        if isinstance(data, (Tensor, CollectionPrimitives)):
            warnings.warn(_COPY_CONSTRUCT, UserWarning, stacklevel=2)
        made = self._new_tensor(data, _kw(dtype, device, requires_grad))
        return made.pin_memory() if pin_memory else made  # type: ignore[attr-defined]

    def _new_tensor(self, data: Any, kw: dict[str, Any]) -> Self:
        """:meth:`new_tensor` without its warning, ``kw`` as :func:`_kw` makes it."""
        src = _dense(self, self._call("new_tensor"))
        if isinstance(data, CollectionPrimitives):
            others = src._other_leaves(self._call("new_tensor"), data)
            leaves = src._tensor_leaves([])
            it = iter([_copy_like(x, y, kw) for x, y in zip(leaves, others, strict=True)])
            return src.apply(lambda _: next(it), batch_size=data.batch_size)  # type: ignore[no-any-return]
        data = torch.as_tensor(data)
        return src.apply(lambda x: _copy_like(x, data, kw), batch_size=data.shape)  # type: ignore[no-any-return]

    # ---------------------------------------------------------- conversion
    @keeps_lock
    def as_tensor(self) -> Self:
        """Every leaf as a plain tensor (``as_tensor()`` of leaves that have one).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> type(TensorDict(a=torch.zeros(1)).as_tensor()["a"]).__name__
        'Tensor'
        """
        return self.apply(lambda x: x.as_tensor() if hasattr(x, "as_tensor") else x)

    def to_lazystack(self, dim: builtins.int = 0) -> TensorDictBase:
        """A lazy stack of the slices along batch ``dim``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> s = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]).to_lazystack(1)
        >>> type(s).__name__, s.stack_dim, s.batch_size
        ('LazyStackedTensorDict', 1, torch.Size([2, 3]))
        """
        from tensordict._lazy import LazyStackedTensorDict

        d = dim % len(self._batch_size) if self._batch_size else dim
        return LazyStackedTensorDict(*self.unbind(d), stack_dim=d)

    def tolist(
        self,
        *,
        convert_nodes: builtins.bool = True,
        convert_tensors: builtins.bool | str = False,
        tolist_first: builtins.bool = False,
        as_linked_list: builtins.bool = False,
    ) -> Any:
        """A nested list shaped like the batch, of plain dicts (the dict itself without
        batch dims). ``convert_nodes=False`` keeps the elements as TensorDicts;
        ``convert_tensors`` turns the tensors into lists too (``"numpy"``: arrays);
        ``tolist_first`` turns nested TensorDicts with more batch dims into lists first.
        ``as_linked_list=True`` returns a :class:`~tensordict.utils.LinkedList`, whose
        item assignments are written back into this collection.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.arange(2), batch_size=[2]).tolist()
        [{'a': tensor(0)}, {'a': tensor(1)}]
        >>> TensorDict(a=torch.arange(4).view(2, 2), batch_size=[2]).tolist(convert_tensors=True)
        [{'a': [0, 1]}, {'a': [2, 3]}]
        """
        from tensordict._tolist import LinkedList, tolist

        if as_linked_list:
            out = self.tolist(
                convert_nodes=convert_nodes,
                convert_tensors=convert_tensors,
                tolist_first=tolist_first,
            )
            return LinkedList(out, td=self) if isinstance(out, list) else out
        return tolist(
            self,
            convert_nodes=convert_nodes,
            convert_tensors=convert_tensors,
            tolist_first=tolist_first,
        )

    def numpy(self) -> dict[str, Any]:
        """A nested dict of numpy arrays (non-tensor data as it is; None entries left out).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2), b={"c": "x"}).numpy()
        {'a': array([0., 0.], dtype=float32), 'b': {'c': 'x'}}
        """
        out: dict[str, Any] = {}
        for key, value in self.items():
            if isinstance(value, Tensor):
                out[key] = value.detach().cpu().numpy()
            elif isinstance(value, NonTensor):
                public = _public(value)
                if not _all_none(public):  # (None entries are left out, as upstream)
                    out[key] = public
            else:
                out[key] = value.numpy()
        return out

    def to_namedtuple(self, dest_cls: builtins.type | None = None) -> Any:
        """A namedtuple of the entries (nested collections as nested namedtuples).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(1), b={"c": "x"}).to_namedtuple()
        GenericDict(a=tensor([0.]), b=GenericDict(c='x'))
        """
        keys = list(self.keys())
        cls = dest_cls if dest_cls is not None else collections.namedtuple("GenericDict", keys)
        values = []
        for key in keys:
            value = self.get(key)
            if isinstance(value, CollectionPrimitives):
                value = value.to_namedtuple()  # type: ignore[attr-defined]
            values.append(_public(value))
        return cls(*values)

    def _ordered_leaves(self, sorted: Any) -> list[Tensor]:
        if not sorted:
            return [v for v in self.values(True, leaves_only=True) if isinstance(v, Tensor)]
        keys = (
            builtins.sorted(self.keys(True, leaves_only=True), key=str)
            if sorted is True
            else sorted
        )
        return [self.get(k) for k in keys]

    def cat_from_tensordict(
        self, dim: builtins.int = 0, *, sorted: Any = None, out: Tensor | None = None
    ) -> Tensor:
        """All tensor leaves concatenated along ``dim`` into one tensor (in key order, or
        sorted by key with ``sorted=True``, or in the order of a list of keys).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2), b=torch.ones(2)).cat_from_tensordict()
        tensor([0., 0., 1., 1.])
        """
        leaves = self._ordered_leaves(sorted)
        return torch.cat(leaves, dim) if out is None else torch.cat(leaves, dim, out=out)

    def stack_from_tensordict(
        self, dim: builtins.int = 0, *, sorted: Any = None, out: Tensor | None = None
    ) -> Tensor:
        """All tensor leaves stacked along a new ``dim`` into one tensor (see
        :meth:`cat_from_tensordict` for the order).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2), b=torch.ones(2)).stack_from_tensordict(1).shape
        torch.Size([2, 2])
        """
        leaves = self._ordered_leaves(sorted)
        return torch.stack(leaves, dim) if out is None else torch.stack(leaves, dim, out=out)

    def pad(
        self,
        pad_size: Sequence[builtins.int],
        value: builtins.float = 0.0,
        *,
        inplace: builtins.bool = False,
        safe: builtins.bool = True,
    ) -> Any:
        """The batch padded with ``value``: ``pad_size`` holds (before, after) pairs from
        the first batch dim on (see :func:`tensordict.pad`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(2), batch_size=[2]).pad([1, 0])["a"]
        tensor([0., 1., 1.])
        """
        from tensordict._pad import pad

        return pad(self, pad_size, value, inplace=inplace, safe=safe)

    def to_padded_tensor(self, padding: builtins.float = 0.0, mask_key: Any = None) -> Any:
        """A dense TensorDict whose nested (or, for a stack, ragged) entries are padded
        with ``padding``. A ragged batch dim (-1) takes its longest size, and
        ``mask_key`` (only then) receives the mask of the batch elements that are not
        padding.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict(a=torch.ones(1)), TensorDict(a=torch.ones(2))])
        >>> s.to_padded_tensor()["a"]
        tensor([[1., 0.],
                [1., 1.]])
        """
        from tensordict._ragged_pad import pad_nested_batch, pad_stack, padding_mask

        call = self._call("to_padded_tensor")
        if mask_key is not None and -1 not in self._batch_size:
            raise RuntimeError(
                f"{call}: mask_key needs a ragged batch dim (-1 in batch_size "
                f"{tuple(self._batch_size)}): only then are batch elements padded"
            )
        if self._stack_parts() is None:
            if -1 in self._batch_size:
                out = pad_nested_batch(self, padding, call)
            else:
                return self.apply(
                    lambda x: torch.nested.to_padded_tensor(x, padding) if x.is_nested else x
                )
        else:
            out = pad_stack(self, padding, call)
        if mask_key is not None:
            out.set(mask_key, padding_mask(self, out))
        return out

    # --------------------------------------------------------- batch size
    def auto_batch_size_(
        self, batch_dims: builtins.int | None = None, keep_compliant_size: builtins.bool = False
    ) -> Self:
        """Set the batch size, in place, to the longest leading shape every leaf shares
        (at most ``batch_dims`` dims).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(3, 4), b=torch.zeros(3, 5)).auto_batch_size_().batch_size
        torch.Size([3])
        """
        if self._is_locked:  # as the batch_size setter: a locked collection keeps its own
            raise RuntimeError(
                f"{self._call('auto_batch_size_')}: cannot change the batch size of a locked "
                "TensorDict (call unlock_() first)"
            )
        if self._stack_parts() is not None:  # as upstream: a lazy stack keeps its batch size
            return self._keep_stacked_batch(batch_dims)
        nested = [
            v
            for v in self.values()
            if isinstance(v, CollectionPrimitives) and v._stack_parts() is None
        ]  # (nested lazy stacks keep theirs, as upstream)
        for v in nested:
            v.auto_batch_size_(batch_dims)  # type: ignore[attr-defined]
        # a non-tensor entry counts with its batch size, as a tensor with its shape, unless
        # that is () (it then holds one value for any batch, as upstream)
        shapes = [
            tuple(v.shape)
            for v in self.values(is_leaf=with_non_tensor)
            if (
                isinstance(v, NonTensor)
                and not isinstance(v, Tensor)  # an UnbatchedTensor has no batch dims: ignored
                and v.batch_size
            )
            or (not isinstance(v, NonTensor) and isinstance(v, (Tensor, CollectionPrimitives)))
        ]
        common: list[builtins.int] = []
        if shapes:
            for sizes in zip(*shapes, strict=False):
                if len(set(sizes)) != 1:
                    break
                common.append(sizes[0])
            common = common[: min(len(s) for s in shapes)]
        if batch_dims is not None:
            common = common[:batch_dims]
        self.batch_size = torch.Size(common)  # type: ignore[misc]
        return self

    def _keep_stacked_batch(self, batch_dims: builtins.int | None) -> Self:
        """``auto_batch_size_`` of a lazy stack: its batch size cannot change; an error
        when its leaves would give another."""
        shapes = [
            tuple(self.get_item_shape(k))  # type: ignore[attr-defined]
            for k in self.keys(True, True)
        ]
        common: list[builtins.int] = []
        for sizes in zip(*shapes, strict=False):
            if len(set(sizes)) != 1 or sizes[0] == -1:
                break
            common.append(sizes[0])
        if batch_dims is not None:
            common = common[:batch_dims]
        if shapes and torch.Size(common) != self._batch_size:
            raise RuntimeError(
                f"{self._call('auto_batch_size_')}: the leaves give batch size "
                f"{tuple(common)}, but a lazy stack keeps its batch size "
                f"{tuple(self._batch_size)}; densify it first (contiguous())"
            )
        return self

    def auto_device_(self) -> Self:
        """Set the device, in place, to the one every leaf lives on (None if they differ).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(1)).auto_device_().device
        device(type='cpu')
        """
        devices = {x.device for x in self._tensor_leaves([])}
        self._device = devices.pop() if len(devices) == 1 else None
        return self

    def pin_memory_(self, num_threads: builtins.int | None = None) -> Self:
        """Pin every leaf's memory, in place (needs an accelerator build of torch), on
        ``num_threads`` threads when that is > 0."""
        leaves = self._tensor_leaves([])
        if num_threads:
            with ThreadPoolExecutor(num_threads) as pool:
                pinned = list(pool.map(Tensor.pin_memory, leaves))
        else:
            pinned = [x.pin_memory() for x in leaves]
        for x, data in zip(leaves, pinned, strict=True):
            x.data = data
        return self


_COPY_CONSTRUCT = (  # torch's words, in Tensor.new_tensor
    "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
    "or sourceTensor.detach().clone().requires_grad_(True), rather than "
    "tensor.new_tensor(sourceTensor)."
)


def _copy_like(like: Tensor, data: Tensor, kw: dict[str, Any]) -> Tensor:
    """``like.new_tensor(data, **kw)`` without torch's copy-construct warning (given once
    per call by :meth:`~TensorLikeOps.new_tensor`)."""
    out = data.detach().to(
        dtype=kw.get("dtype", like.dtype), device=kw.get("device", like.device), copy=True
    )
    return out.requires_grad_(kw["requires_grad"])


def _kw(
    dtype: Any,
    device: Any,
    requires_grad: builtins.bool,
    layout: torch.layout = torch.strided,
    pin_memory: builtins.bool | None = None,
) -> dict[str, Any]:
    kw: dict[str, Any] = {"requires_grad": requires_grad}
    if layout is not torch.strided:
        kw["layout"] = layout
    if pin_memory:
        kw["pin_memory"] = True
    if dtype is not None:
        kw["dtype"] = dtype
    if device is not _NO_DEVICE:
        kw["device"] = device
    return kw


def _byte_parts(tensor: Tensor, out: list[Tensor]) -> None:
    """The plain tensors holding ``tensor``'s bytes, as upstream counts them: a nested
    (or other wrapper) tensor's inner tensors, and a gradient beside its tensor."""
    if type(tensor) not in (Tensor, torch.nn.Parameter) and hasattr(tensor, "__tensor_flatten__"):
        attrs, _ = tensor.__tensor_flatten__()
        for attr in attrs:
            _byte_parts(getattr(tensor, attr), out)
        return
    grad = tensor.grad if tensor.requires_grad and tensor.is_leaf else None
    if grad is not None:
        _byte_parts(grad, out)
        out.append(tensor.data)
    else:
        out.append(tensor)


def _all_none(value: Any) -> bool:
    """Whether ``value`` is None, or a non-empty (nested) list of Nones only."""
    if isinstance(value, list):
        return bool(value) and all(_all_none(v) for v in value)
    return value is None
