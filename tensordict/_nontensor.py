"""Non-tensor entries: one value for the whole batch (NonTensorData) or one per element."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from tensordict._batch import BatchSizeLike, DeviceLike, as_batch_size, as_device, permute_args


class NonTensor:
    """What TensorDict operations need of a non-tensor entry, and the shape methods a user
    calls on one.

    ``_remap(fn, new_bs)`` follows a re-arrangement of the batch: ``fn`` is the same
    function the operation applies to tensor leaves, given here a tensor of element
    positions, so per-element values stay aligned with the batch whatever the op. The
    public shape methods (``reshape``, ``view``, ``flatten``, ``squeeze``, ``unsqueeze``,
    ``permute``, ``expand``, ``repeat``, ``[index]``, ...) are written once on the same
    positions: a result with one element per batch position is a NonTensorStack, a
    0-dim one is a NonTensorData.
    """

    __slots__ = ()  # (the state lives in NonTensorEntry: UnbatchedTensor mixes this in)

    batch_size: torch.Size
    device: torch.device | None
    _is_non_tensor: ClassVar[bool] = True

    @property
    def shape(self) -> torch.Size:
        """The batch size, as ``Tensor.shape`` is a tensor's size."""
        return self.batch_size

    @property
    def dtype(self) -> None:
        """Always None: non-tensor data has no dtype (as a TensorDict without a common one)."""
        return None

    @property
    def ndim(self) -> int:
        """The number of batch dimensions."""
        return len(self.batch_size)

    def dim(self) -> int:
        """The number of batch dimensions.

        >>> from tensordict import NonTensorData
        >>> NonTensorData("x", batch_size=[2, 3]).dim()
        2
        """
        return len(self.batch_size)

    def numel(self) -> int:
        """The number of batch elements.

        >>> from tensordict import NonTensorData
        >>> NonTensorData("x", batch_size=[2, 3]).numel()
        6
        """
        return math.prod(self.batch_size)

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensor:
        raise NotImplementedError  # each subclass says how it follows a new batch size

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> NonTensor:
        raise NotImplementedError

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        raise NotImplementedError

    def contiguous(self, *, canonical: bool = False, inplace: bool = False) -> NonTensor:
        """Non-tensor data is its own contiguous form: ``self`` (so ``inplace`` changes nothing).

        >>> from tensordict import NonTensorStack
        >>> s = NonTensorStack("a", "b")
        >>> s.contiguous() is s
        True
        """
        return self

    def tolist(
        self,
        *,
        convert_nodes: bool = True,
        convert_tensors: bool | str = False,
        tolist_first: bool = False,
        as_linked_list: bool = False,
    ) -> Any:
        """The values as a nested list shaped like the batch (the value itself for a 0-dim
        batch). ``convert_tensors`` turns values that are tensors into lists (``"numpy"``:
        arrays); ``as_linked_list=True`` gives a list whose ``ll[i] = value`` also writes
        element ``i`` (see :class:`~tensordict.utils.LinkedList`); ``convert_nodes`` and
        ``tolist_first`` concern nested collections, which non-tensor data holds none of.

        >>> from tensordict import NonTensorStack
        >>> s = NonTensorStack("a", "b")
        >>> rows = s.tolist(as_linked_list=True)
        >>> rows[0] = "z"
        >>> s.tolist()
        ['z', 'b']
        """
        out = self._nested_values()
        if convert_tensors:
            out = _tensors_converted(out, convert_tensors)
        if as_linked_list and isinstance(out, list):
            from tensordict._tolist import LinkedList  # (_tolist builds on this module)

            return LinkedList(out, td=self)
        return out

    def _nested_values(self) -> Any:
        raise NotImplementedError

    def _in_place(self, out: NonTensor, call: str, inplace: bool) -> NonTensor:
        """``out``, or with ``inplace`` this entry made ``out``: a one-value entry only, as
        upstream (a stack refuses it: it may be the entry of a collection whose batch
        size it would leave behind)."""
        if not inplace:
            return out
        if isinstance(self, NonTensorStack):
            raise NotImplementedError(
                f"NonTensorStack.{call}: inplace=True is not supported on a NonTensorStack; "
                "use the result (inplace=False)"
            )
        if type(out) is not type(self):
            raise ValueError(
                f"{type(self).__name__}.{call}: inplace=True would turn this "
                f"{type(self).__name__} into a {type(out).__name__}; call it without inplace"
            )
        for name in _state_slots(type(self)):
            setattr(self, name, getattr(out, name))
        return self

    def _public(self) -> Any:
        """What ``td[key]`` returns for this entry."""
        raise NotImplementedError

    # ------------------------------------------------------------- shape methods
    def _positions(self) -> Tensor:
        raise NotImplementedError

    def _values(self) -> list[Any]:
        raise NotImplementedError

    def _op(self, fn: Callable[[Tensor], Tensor], call: str, spread: bool = True) -> NonTensor:
        """Apply a shape function to the element positions and rebuild.

        ``spread`` is False for ops that only re-view one shared value (a NonTensorData
        then stays one); expanding ones (``expand``, ``unsqueeze``, ``repeat``) spread it
        into a stack as upstream does.
        """
        try:
            positions = _apply_to(fn, self._positions())
        except (RuntimeError, IndexError, TypeError, ValueError) as err:
            raise type(err)(f"{type(self).__name__}.{call}: {err}") from None
        return _from_positions(self, self._values(), positions, spread)

    def reshape(self, *shape: Any) -> NonTensor:
        """The same values with another batch shape.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b", "c", "d").reshape(2, 2).tolist()
        [['a', 'b'], ['c', 'd']]
        """
        size = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return self._op(lambda p: p.reshape(*size), "reshape", spread=False)

    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> NonTensor:
        """Alias of :meth:`reshape` (non-tensor values have no storage to share); the
        shape may also come as ``size=`` or ``batch_size=``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b").view(2, 1).shape
        torch.Size([2, 1])
        """
        if size is None:
            size = batch_size
        if size is None:
            size = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        elif isinstance(size, int):
            size = (size,)
        return self._op(lambda p: p.reshape(*size), "view", spread=False)

    def flatten(
        self, start_dim: int | None = 0, end_dim: int | None = -1, *, inplace: bool = False
    ) -> NonTensor:
        """Merge the batch dims ``start_dim..end_dim``; a 0-dim batch becomes ``(1,)``.

        >>> from tensordict import NonTensorData
        >>> NonTensorData(0).flatten().tolist()
        [0]
        """
        s = 0 if start_dim is None else start_dim
        e = -1 if end_dim is None else end_dim
        out = self._op(lambda p: p.flatten(s, e), "flatten", spread=False)
        return self._in_place(out, "flatten", inplace)

    def unflatten(
        self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False
    ) -> NonTensor:
        """Split batch dim ``dim`` into ``unflattened_size``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b", "c", "d").unflatten(0, (2, 2)).shape
        torch.Size([2, 2])
        """
        sizes = tuple(unflattened_size)
        out = self._op(lambda p: torch.unflatten(p, dim, sizes), "unflatten", spread=False)
        return self._in_place(out, "unflatten", inplace)

    def squeeze(self, dim: int | tuple[int, ...] | None = None) -> NonTensor:
        """Drop batch dims of size 1 (or only those of ``dim``). A stack left holding one
        value everywhere (an unsqueezed ``NonTensorData``) is that ``NonTensorData`` again,
        as upstream.

        >>> from tensordict import NonTensorData, NonTensorStack
        >>> NonTensorStack("a").squeeze()
        NonTensorData(data=a, batch_size=torch.Size([]), device=None)
        >>> NonTensorData("a", batch_size=[2]).unsqueeze(0).squeeze(0)
        NonTensorData(data=a, batch_size=torch.Size([2]), device=None)
        """
        out = self._op(
            (lambda p: p.squeeze()) if dim is None else (lambda p: p.squeeze(dim)),
            "squeeze",
            spread=False,
        )
        if (
            isinstance(out, NonTensorStack)
            and len(out.batch_size) < len(self.batch_size)
            and out.positions.numel()
        ):
            positions = out.positions
            first = int(positions[(0,) * positions.ndim])
            # one value everywhere: a single value held, one zero seen through the batch
            # (a NonTensorData spread), or, last, every position compared
            if (
                len(out.values) == 1
                or not any(positions.stride())
                or bool((positions == first).all())
            ):
                return NonTensorData(out.values[first], out.batch_size, out.device)
        return out

    def unsqueeze(self, dim: int) -> NonTensor:
        """Insert a batch dim of size 1 at ``dim``.

        >>> from tensordict import NonTensorData
        >>> NonTensorData(3).unsqueeze(0)
        NonTensorStack([3], batch_size=torch.Size([1]), device=None)
        """
        return self._op(lambda p: p.unsqueeze(dim), "unsqueeze")

    def permute(self, *args: Any, dims: Any = None) -> NonTensor:
        """Reorder the batch dims.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack.from_list([["a", "b"]]).permute(1, 0).tolist()
        [['a'], ['b']]
        """
        dims = permute_args(f"{type(self).__name__}.permute", args, dims)
        order = dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims
        return self._op(lambda p: p.permute(*order), "permute", spread=False)

    def transpose(self, dim0: int, dim1: int) -> NonTensor:
        """Swap two batch dims.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack.from_list([["a", "b"]]).transpose(0, 1).shape
        torch.Size([2, 1])
        """
        return self._op(lambda p: p.transpose(dim0, dim1), "transpose", spread=False)

    def flip(self, dims: Any) -> NonTensor:
        """Reverse the order of the values along ``dims``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b").flip(0).tolist()
        ['b', 'a']
        """
        d = [dims] if isinstance(dims, int) else list(dims)
        return self._op(lambda p: p.flip(d), "flip", spread=False)

    def expand(self, *shape: Any) -> NonTensor:
        """Broadcast to a larger batch shape (one value per new element).

        >>> from tensordict import NonTensorData
        >>> NonTensorData(0, batch_size=[3]).expand(2, 3).tolist()
        [[0, 0, 0], [0, 0, 0]]
        """
        size = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return self._op(lambda p: p.expand(*size), "expand")

    def repeat(self, *repeats: Any, inplace: bool = False) -> NonTensor:
        """Tile the values along each batch dim, as ``Tensor.repeat``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b").repeat(2).tolist()
        ['a', 'b', 'a', 'b']
        """
        reps = repeats[0] if len(repeats) == 1 and not isinstance(repeats[0], int) else repeats
        return self._in_place(self._op(lambda p: p.repeat(*reps), "repeat"), "repeat", inplace)

    def repeat_interleave(
        self,
        repeats: Any,
        dim: int | None = None,
        *,
        output_size: int | None = None,
        inplace: bool = False,
    ) -> NonTensor:
        """Repeat each value ``repeats`` times along ``dim``, as ``Tensor.repeat_interleave``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b").repeat_interleave(2, dim=0).tolist()
        ['a', 'a', 'b', 'b']
        """
        out = self._op(
            lambda p: p.repeat_interleave(repeats, dim=dim, output_size=output_size),
            "repeat_interleave",
        )
        return self._in_place(out, "repeat_interleave", inplace)

    def unbind(self, dim: int = 0) -> tuple[NonTensor, ...]:
        """The entries along ``dim``, one per index.

        >>> from tensordict import NonTensorStack
        >>> [x.data for x in NonTensorStack("a", "b").unbind(0)]
        ['a', 'b']
        """
        values = self._values()
        return tuple(_from_positions(self, values, p, False) for p in self._positions().unbind(dim))

    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """``torch.stack`` and ``torch.cat`` of non-tensor entries: a NonTensorStack (a
        MetaData when every entry is a MetaData holding an equal value)."""
        kwargs = kwargs or {}
        if func not in (torch.stack, torch.cat) or not args:
            return NotImplemented
        entries = list(args[0])
        dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
        if not entries or not all(isinstance(e, NonTensor) for e in entries):
            return NotImplemented
        name = "torch.stack" if func is torch.stack else "torch.cat"
        values, positions = _join([as_stack(e) for e in entries], func, dim, name)
        first = entries[0]
        if isinstance(first, MetaData) and all(
            isinstance(e, MetaData) and same_value(e.data, first.data) for e in entries
        ):
            return first._with(positions.shape, first.device)
        return NonTensorStack._from_positions(values, positions, first.device)

    def __getitem__(self, index: Any) -> NonTensor:
        out = self._op(lambda p: p[index], "__getitem__", spread=False)
        if isinstance(self, NonTensorStack):  # a view: a write into it reaches this stack
            from tensordict._nontensor_origin import remember

            remember(out, self, index)
        return out

    def __bool__(self) -> bool:
        return True  # an entry is there, whatever its batch size

    def __len__(self) -> int:
        if not self.batch_size:
            raise TypeError(f"{type(self).__name__}: len() of a 0-dim batch")
        return self.batch_size[0]

    def where(
        self, condition: Tensor, other: Any, *, out: Any = None, pad: Any = None
    ) -> NonTensorStack:
        """This entry's values where ``condition`` holds, ``other``'s elsewhere.

        >>> import torch
        >>> from tensordict import NonTensorStack
        >>> a, b = NonTensorStack("a", "a"), NonTensorStack("b", "b")
        >>> a.where(torch.tensor([True, False]), b).tolist()
        ['a', 'b']
        """
        mine = as_stack(self)
        theirs = as_stack(other if isinstance(other, NonTensor) else NonTensorData(other))
        positions = torch.where(
            condition.expand(mine.batch_size),
            mine.positions,
            theirs.positions.expand(mine.batch_size) + len(mine.values),
        )
        return NonTensorStack._from_positions(
            [*mine.values, *theirs.values], positions, self.device
        )


def _apply_to(fn: Callable[[Tensor], Any], positions: Tensor) -> Any:
    """``fn(positions)``; positions that are a broadcast view (stride 0, as a stack of
    one value per member keeps them) are made dense first when ``fn`` cannot view them."""
    try:
        return fn(positions)
    except RuntimeError:
        if positions.is_contiguous():
            raise
        return fn(positions.contiguous())


def _from_positions(
    like: NonTensor, values: list[Any], positions: Tensor, spread: bool
) -> NonTensor:
    """A NonTensorData when ``like`` is one and the op does not spread it, or when the
    result has a 0-dim batch; otherwise a NonTensorStack."""
    if isinstance(like, NonTensorData) and (not spread or like._shared):
        return like._with(positions.shape, like.device)
    if positions.ndim == 0:
        return NonTensorData(values[int(positions)], torch.Size(), like.device)
    # (an op that adds elements, as expand does with stride-0 dims across members, loses
    # the mark: only views that keep or drop elements stay inside the members)
    members = (
        isinstance(like, NonTensorStack)
        and like._members
        and positions.numel() <= like.positions.numel()
    )
    if members and positions.numel() and not any(positions.stride()):
        # inside one member of a stack of NonTensorData (stride 0 there): that member,
        # as upstream's lazy stack hands it out (stack[i], unbind(0), iteration)
        member = NonTensorData.__new__(NonTensorData)
        member.data = values[int(positions.as_strided((), ()).item())]
        member.batch_size = positions.shape
        member.device = like.device
        return member
    # (positions an op made from valid ones are valid: no pass over every element)
    return NonTensorStack._from_valid_positions(list(values), positions, like.device, members)


class NonTensorEntry(NonTensor):
    """A non-tensor entry proper (not an UnbatchedTensor): the base that holds the batch
    size and device, and that ``_nontensor_api.install`` gives the TensorDict methods."""

    __slots__ = ("__weakref__", "batch_size", "device")  # (weakref: tolist(as_linked_list))

    def to_dict(
        self,
        *,
        retain_none: bool = True,
        convert_tensors: bool | str = False,
        tolist_first: bool = False,
    ) -> Any:
        """The value (a stack: its values nested like the batch), as upstream: a non-tensor
        entry is a leaf, not a mapping of its attributes.

        >>> from tensordict import NonTensorData, NonTensorStack
        >>> NonTensorData("x", batch_size=[2]).to_dict(), NonTensorStack("a", "b").to_dict()
        ('x', ['a', 'b'])
        """
        out = self.data if isinstance(self, NonTensorDataBase) else self._nested_values()
        return _tensors_converted(out, convert_tensors) if convert_tensors else out


class NonTensorDataBase(NonTensorEntry):
    """Base of the single-value non-tensor entries (NonTensorData and MetaData)."""

    __slots__ = ("data",)
    data: Any
    _shared: ClassVar[bool] = False  # MetaData: every op keeps the one value


class NonTensorData(NonTensorDataBase):
    """A Python object stored as one entry of a TensorDict, shared by the whole batch.

    ``td["s"] = "a string!"`` stores a ``NonTensorData``; ``td["s"]`` returns the
    object itself and ``td.get("s")`` the wrapper. Indexing or reshaping the
    TensorDict keeps the value as it is; ``tolist()`` gives it once per batch element.
    Called, it calls the value.

    >>> from tensordict import NonTensorData
    >>> nt = NonTensorData("hello", batch_size=[3])
    >>> nt.data, nt.batch_size, nt.tolist()
    ('hello', torch.Size([3]), ['hello', 'hello', 'hello'])
    """

    __slots__ = ()

    def __init__(
        self, data: Any, batch_size: BatchSizeLike = None, device: DeviceLike = None
    ) -> None:
        while isinstance(data, NonTensorDataBase):
            data = data.data
        self._check(data)
        self.data = data
        self.batch_size = as_batch_size(batch_size, type(self).__name__, True)
        self.device = as_device(device)

    def _check(self, data: Any) -> None:
        """Subclasses may refuse some values (typed MetaData)."""

    def _nested_values(self) -> Any:
        """The value once per batch element, as a nested list shaped like the batch (the
        value itself for a 0-dim batch)."""

        def build(dims: tuple[int, ...]) -> Any:
            return [build(dims[1:]) for _ in range(dims[0])] if dims else self.data

        if -1 in self.batch_size:  # (the entry of a TensorDict with nested tensor leaves)
            raise RuntimeError(
                f"{type(self).__name__}.tolist: batch_size {tuple(self.batch_size)} holds a "
                "ragged dim (-1): there is no one count of elements to give the value there"
            )
        return build(tuple(self.batch_size))

    def _public(self) -> Any:
        return self.data

    def _positions(self) -> Tensor:
        # every element holds value 0: one zero seen through the whole batch (no memory
        # per element; a write into a copy of it, as setitem makes, gets its own)
        return torch.zeros((), dtype=torch.long).expand(self.batch_size)

    def _values(self) -> list[Any]:
        return [self.data]

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensorData:
        """The same value with another batch size or device (no copy of the value)."""
        out = type(self).__new__(type(self))
        out.data = self.data
        out.batch_size = batch_size
        out.device = device
        return out

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> NonTensorData:
        return self._with(batch_size, self.device)

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        return [self._with(bs, self.device) for bs in batch_sizes]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.data(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return same_value(self.data, other.data if isinstance(other, NonTensorData) else other)

    __hash__ = None  # type: ignore[assignment]

    def _logical(self, other: object, op: Callable[[Any, Any], Any]) -> Any:
        """``op`` of two entries' values as upstream gives it: a bool tensor shaped like
        the batch (a tensor or array result is returned as a tensor)."""
        if not isinstance(other, NonTensorData):
            return NotImplemented
        out = op(self.data, other.data)
        if isinstance(out, (Tensor, np.ndarray)):
            return torch.as_tensor(out, device=self.device)
        return torch.full(self.batch_size, bool(out), device=self.device)

    def __xor__(self, other: object) -> Any:
        """``a ^ b`` of two entries: their values' xor, a bool tensor shaped like the batch.

        >>> from tensordict import NonTensorData
        >>> NonTensorData(True, batch_size=[2]) ^ NonTensorData(False, batch_size=[2])
        tensor([True, True])
        """
        return self._logical(other, operator.xor)

    def __or__(self, other: object) -> Any:
        """``a | b`` of two entries: their values' or, a bool tensor shaped like the batch."""
        return self._logical(other, operator.or_)

    def __repr__(self) -> str:
        from tensordict._repr import nontensor_repr

        return nontensor_repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.data, tuple(self.batch_size), self.device))


class MetaData(NonTensorData):
    """A NonTensorData that stays one shared value through every operation (expanding,
    unsqueezing and stacking equal values included). ``MetaData[int]`` is the subclass
    that accepts only ``int`` values.

    >>> from tensordict import MetaData
    >>> m = MetaData("cfg", batch_size=[3])
    >>> type(m.expand(2, 3)).__name__, m.expand(2, 3).data
    ('MetaData', 'cfg')
    >>> MetaData[int]("x")
    Traceback (most recent call last):
    ...
    TypeError: MetaData[int]: Expected data of type int, got str
    """

    __slots__ = ()
    _shared = True
    _data_type: ClassVar[type | None] = None
    _typed: ClassVar[dict[type, type[MetaData]]] = {}

    def __class_getitem__(cls, item: type) -> type[MetaData]:
        typed = MetaData._typed.get(item)
        if typed is None:
            name = f"MetaData[{getattr(item, '__name__', item)}]"
            typed = type(name, (MetaData,), {"__slots__": (), "_data_type": item})
            MetaData._typed[item] = typed
        return typed

    def _check(self, data: Any) -> None:
        kind = type(self)._data_type
        if kind is not None and not isinstance(data, kind):
            raise TypeError(
                f"{type(self).__name__}: Expected data of type {kind.__name__}, got "
                f"{type(data).__name__}"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        kind = type(self)._data_type
        return (_rebuild_meta, (kind, self.data, tuple(self.batch_size), self.device))


class NonTensorStack(NonTensorEntry):
    """Non-tensor values that differ along the batch: one value per batch element.

    Built like a stack: ``NonTensorStack("a", "b")`` or
    ``NonTensorStack(*entries, stack_dim=1)`` stacks values and non-tensor entries
    along ``stack_dim``; ``NonTensorStack.from_list`` takes a nested list. It keeps the
    distinct values and a tensor of positions shaped like the batch, so indexing and
    shape operations keep every value with its element.

    >>> from tensordict import NonTensorData, NonTensorStack
    >>> s = NonTensorStack.from_list(["a", "b", "c"])
    >>> s.batch_size, s.tolist(), s[1].data
    (torch.Size([3]), ['a', 'b', 'c'], 'b')
    >>> NonTensorStack(NonTensorData("x", [2]), NonTensorData("y", [2]), stack_dim=1).tolist()
    [['x', 'y'], ['x', 'y']]
    """

    # _members: built by stacking NonTensorData (one value per member, spread over the
    # member's batch; see _stack._stacked_values): a view that stays inside one member
    # reads as that member's NonTensorData, as upstream's lazy stack gives its member
    __slots__ = ("_members", "positions", "values")
    _members: bool

    def __init__(
        self,
        *items: Any,
        stack_dim: int = 0,
        batch_size: BatchSizeLike = None,
        device: DeviceLike = None,
    ) -> None:
        entries = [x if isinstance(x, NonTensor) else NonTensorData(x) for x in items]
        made = stack_of_members(entries, stack_dim, None)  # (a view inside one reads as it)
        if made is not None:
            self._init(made.values, made.positions, device)
            self._members = made._members
        else:
            stacks = [as_stack(e) for e in entries]
            values, positions = _join(stacks, torch.stack, stack_dim, "NonTensorStack")
            self._init(list(values), positions, device)
        if batch_size is not None:
            expected = as_batch_size(batch_size, "NonTensorStack")
            if expected != self.batch_size:
                raise ValueError(
                    f"NonTensorStack: batch_size {tuple(expected)} does not match the stacked "
                    f"entries' {tuple(self.batch_size)}"
                )

    def _init(self, values: list[Any], positions: Tensor, device: DeviceLike) -> None:
        if positions.dtype != torch.long:
            raise TypeError(f"NonTensorStack: positions must be int64, got {positions.dtype}")
        if positions.numel() and not 0 <= int(positions.min()) <= int(positions.max()) < len(
            values
        ):
            raise ValueError(
                f"NonTensorStack: positions must index the {len(values)} values, "
                f"got range [{int(positions.min())}, {int(positions.max())}]"
            )
        self.values = values
        self.positions = positions
        self.batch_size = positions.shape
        self.device = as_device(device)
        self._members = False

    @classmethod
    def _from_positions(
        cls, values: Sequence[Any], positions: Tensor, device: DeviceLike = None
    ) -> NonTensorStack:
        out = cls.__new__(cls)
        out._init(list(values), positions, device)
        return out

    @classmethod
    def _from_valid_positions(
        cls,
        values: list[Any],
        positions: Tensor,
        device: torch.device | None,
        members: bool = False,
    ) -> NonTensorStack:
        """``_from_positions`` for int64 positions the caller built inside ``values``'
        range (no min/max pass over every element); ``members`` marks a stack of
        NonTensorData members (see the class's slots)."""
        out = cls.__new__(cls)
        out.values = values
        out.positions = positions
        out.batch_size = positions.shape
        out.device = device
        out._members = members
        return out

    @classmethod
    def from_list(cls, non_tensors: Sequence[Any], device: DeviceLike = None) -> NonTensorStack:
        """A stack of the elements of a (nested) list; its nesting gives the batch size.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]]).shape
        torch.Size([2, 2])
        """
        return cls._from_list(non_tensors, device)

    @classmethod
    def _from_list(
        cls, non_tensors: Sequence[Any], device: DeviceLike = None, ndim: int | None = None
    ) -> NonTensorStack:
        """:meth:`from_list` going at most ``ndim`` lists deep: the lists below are values."""

        def flat(v: Any, depth: int) -> tuple[list[Any], list[int]]:
            deeper = ndim is None or depth + 1 < ndim
            if deeper and isinstance(v, list) and v and all(isinstance(x, list) for x in v):
                parts = [flat(x, depth + 1) for x in v]
                inner = {tuple(p[1]) for p in parts}
                if len(inner) != 1:
                    raise ValueError("NonTensorStack.from_list: nested lists must be regular")
                return [y for p in parts for y in p[0]], [len(v), *parts[0][1]]
            return list(v), [len(v)]

        items, shape = flat(list(non_tensors), 0)
        items = [x.data if isinstance(x, NonTensorDataBase) else x for x in items]
        return cls._from_positions(items, torch.arange(len(items)).reshape(shape), device)

    @classmethod
    def _from_batch_list(
        cls, value: list[Any], ndim: int, device: DeviceLike = None
    ) -> NonTensorStack | None:
        """The stack of a list given for a batch of ``ndim`` dims, one value per element:
        as deep as the nesting is regular (as upstream), else with the lists below the
        first ``ndim`` levels as the values; None when even those are irregular. The
        caller checks the result covers its batch."""
        try:
            return cls.from_list(value, device)
        except ValueError:
            pass
        try:
            return cls._from_list(value, device, ndim)
        except ValueError:
            return None

    def _nested_values(self) -> Any:
        """The values as a nested list shaped like the batch."""

        def fill(pos: Any) -> Any:
            return [fill(p) for p in pos] if isinstance(pos, list) else self.values[pos]

        return fill(self.positions.tolist())

    def _public(self) -> Any:
        return self.tolist()

    @property
    def data(self) -> Any:
        """The value every element holds; an AttributeError when they differ (read
        them with :meth:`tolist`).

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("x", "x").data
        'x'
        """
        value = self._shared_value()
        if value is _DIFFER:
            raise AttributeError(
                f"NonTensorStack.data: the {self.positions.numel()} elements do not all hold "
                f"one value ({len(set(self.positions.reshape(-1).tolist()))} distinct); read "
                "them with .tolist()"
            )
        return value

    def _shared_value(self) -> Any:
        """The value every element holds (None without elements), or ``_DIFFER``."""
        used = sorted(set(self.positions.reshape(-1).tolist()))
        first = self.values[used[0]] if used else None
        return first if all(same_value(self.values[i], first) for i in used) else _DIFFER

    def _positions(self) -> Tensor:
        return self.positions

    def _values(self) -> list[Any]:
        return self.values

    def _with(self, batch_size: torch.Size, device: torch.device | None) -> NonTensor:
        if self.batch_size[: len(batch_size)] == batch_size:
            # the same batch, or a longer one that starts with it (stored as it is, like a
            # tensor whose shape starts with the batch size)
            return NonTensorStack._from_valid_positions(
                self.values, self.positions, as_device(device), self._members
            )
        value = self._shared_value()
        if value is not _DIFFER:
            return NonTensorData(value, batch_size, device)
        raise ValueError(
            f"NonTensorStack: values differ along the batch, so they cannot follow a "
            f"batch size change from {tuple(self.batch_size)} to {tuple(batch_size)}"
        )

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> NonTensor:
        return _from_positions(self, self.values, _apply_to(fn, self.positions), True)

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        # one element (a 0-dim batch) is that element's NonTensorData, as upstream
        return [_from_positions(self, self.values, p, True) for p in _apply_to(fn, self.positions)]

    def _written(self, index: Any, other: NonTensor, sub_bs: torch.Size) -> NonTensorStack:
        """A new stack with ``other``'s values at ``index`` (copy on write: views of this
        stack, and TensorDicts sharing it, keep their values)."""
        values = list(self.values)
        positions = self.positions.clone()
        src = as_stack(other)
        shape = positions[index].shape  # sub_bs, and the stack's own extra dims after it
        positions[index] = src.positions.expand(shape) + len(values)
        values.extend(src.values)
        return NonTensorStack._from_positions(values, positions, self.device)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensor):
            return bool(self.tolist() == other.tolist())
        return bool(self.tolist() == other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        from tensordict._repr import nontensor_repr

        return nontensor_repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_stack, (self.values, self.positions, self.device, self._members))


_DIFFER: Any = object()  # (NonTensorStack._shared_value: the elements' values differ)


def _join(
    stacks: Sequence[NonTensorStack], join: Any, dim: int, call: str
) -> tuple[list[Any], Tensor]:
    """The pooled values and joined positions of several stacks."""
    if not stacks:
        return [], torch.zeros(0, dtype=torch.long)
    pool: list[Any] = []
    positions = []
    for s in stacks:
        positions.append(s.positions + len(pool))
        pool.extend(s.values)
    try:
        return pool, join(positions, dim)
    except RuntimeError as err:
        raise ValueError(f"{call}: the entries' batch sizes do not stack: {err}") from None


def is_non_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a non-tensor entry (NonTensorData, MetaData or NonTensorStack).

    >>> from tensordict import NonTensorData
    >>> from tensordict.tensorclass import is_non_tensor
    >>> is_non_tensor(NonTensorData("x")), is_non_tensor("x")
    (True, False)
    """
    return isinstance(obj, NonTensorEntry)


def same_value(a: Any, b: Any) -> bool:
    """Equality for arbitrary values: arrays and tensors compare whole, errors mean no."""
    if a is b:
        return True
    try:
        result = a == b
        if isinstance(result, bool):
            return result
        if getattr(a, "shape", None) != getattr(b, "shape", None):
            return False
        return bool(result.all())
    except Exception:  # a value whose == raises is simply not equal
        return False


def as_stack(value: NonTensor) -> NonTensorStack:
    """Any non-tensor entry as a NonTensorStack (one value per element)."""
    if isinstance(value, NonTensorStack):
        return value
    assert isinstance(value, NonTensorDataBase)
    return NonTensorStack._from_positions(
        [value.data], torch.zeros(value.batch_size, dtype=torch.long), value.device
    )


def _rebuild(*args: Any) -> NonTensorData:
    """Unpickle a NonTensorData: ``(cls, data, batch_size, device)``, or the first
    version's ``(data, batch_size, device)``."""
    if len(args) == 3:
        return NonTensorData(*args)
    cls, data, batch_size, device = args
    out: NonTensorData = cls(data, batch_size, device)
    return out


def _rebuild_meta(
    kind: type | None, data: Any, batch_size: tuple[int, ...], device: torch.device | None
) -> MetaData:
    cls = MetaData if kind is None else MetaData.__class_getitem__(kind)
    return cls(data, batch_size, device)


def _rebuild_stack(
    values: list[Any], positions: Tensor, device: Any, members: bool = False
) -> NonTensorStack:
    out = NonTensorStack._from_positions(values, positions, device)  # (validated: a pickle)
    out._members = members
    return out


def stacked_values(
    pool: list[Any], dim: int, new_bs: torch.Size, device: torch.device | None
) -> NonTensorStack:
    """The stack of one value per member, each spread over the member's batch: position
    ``i`` along ``dim``, built in one go (no stack per member). The positions are a
    broadcast view of ``arange``: no memory per element, stride 0 inside each member (its
    size-1 dims included), which is how a view inside one member is recognised."""
    strides = [0] * len(new_bs)
    strides[dim % len(new_bs)] = 1
    positions = torch.arange(len(pool)).as_strided(new_bs, strides)
    # (members of a 0-dim batch are not marked: a view inside one is 0-dim anyway)
    return NonTensorStack._from_valid_positions(pool, positions, device, len(new_bs) > 1)


def stack_of_members(
    entries: Sequence[NonTensor], dim: int, device: torch.device | None
) -> NonTensorStack | None:
    """``torch.stack`` of single-value entries of one batch size, as :func:`stacked_values`
    (the members kept); None for any other entries, or a ``dim`` out of range."""
    if not entries:
        return None
    bs = entries[0].batch_size
    nd = len(bs) + 1
    if not -nd <= dim < nd or not all(
        isinstance(e, NonTensorDataBase) and e.batch_size == bs for e in entries
    ):
        return None
    d = dim % nd
    new_bs = torch.Size([*bs[:d], len(entries), *bs[d:]])
    pool = [e.data for e in entries if isinstance(e, NonTensorDataBase)]
    return stacked_values(pool, d, new_bs, device)


def _state_slots(cls: type) -> list[str]:
    """The slots that hold an entry's state (what ``inplace=True`` copies over)."""
    return [
        name
        for klass in cls.__mro__
        for name in getattr(klass, "__slots__", ())
        if name != "__weakref__"
    ]


def _tensors_converted(values: Any, how: bool | str) -> Any:
    """``values`` (a nested list, or one value) with each tensor value as a list, or as a
    NumPy array for ``how="numpy"``."""
    if isinstance(values, list):
        return [_tensors_converted(v, how) for v in values]
    if isinstance(values, Tensor):
        return values.numpy() if how == "numpy" else values.tolist()
    return values
