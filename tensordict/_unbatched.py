"""UnbatchedTensor: a tensor leaf exempt from the batch-size rule of its TensorDict."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from tensordict._batch import BatchSizeLike, as_batch_size
from tensordict._nontensor import NonTensor
from tensordict._torch_compat import disable_subclass_dispatch

_EMPTY = torch.Size([])
_DYNAMO = torch.compiler.is_dynamo_compiling


# Whether this process ever made an UnbatchedTensor (``__new__``, unpickling, results of
# torch functions): the checks of the writers that refuse one cost nothing until then.
MADE = [False]


class UnbatchedTensor(Tensor, NonTensor):  # type: ignore[misc]
    """A tensor entry a TensorDict stores whatever its batch size, shared by every element.

    A plain tensor entry's shape must start with the batch size; an ``UnbatchedTensor``
    may have any shape. Shape and indexing operations of the TensorDict (``td[0]``,
    ``reshape``, ``unbind``, ``torch.stack``, ...) keep its data as it is (same storage)
    and only set its ``batch_size`` to that of the result; data operations (``to``,
    ``int()``, arithmetic, ``clone``) apply to it as to any tensor and return an
    ``UnbatchedTensor``. Python conversions (``int``, ``float``, ``str``, ``tolist``,
    ``numpy``) give what the plain tensor gives.

    ``batch_size`` is the batch size of the TensorDict holding it (a TensorDict sets it
    when it stores the tensor); it never changes the tensor's own shape.

    >>> import torch
    >>> from tensordict import TensorDict, UnbatchedTensor
    >>> td = TensorDict(table=UnbatchedTensor(torch.arange(5.0)), x=torch.zeros(3), batch_size=[3])
    >>> td[0]["table"].shape, td[0]["table"].batch_size
    (torch.Size([5]), torch.Size([]))
    >>> td.reshape(1, 3).get("table").batch_size
    torch.Size([1, 3])
    """

    _pass_through: ClassVar[bool] = True  # read by default_is_leaf and is_leaf_nontensor
    _is_non_tensor: ClassVar[bool] = False  # a tensor entry: is_non_tensor() says no
    _unbatched_bs: torch.Size = _EMPTY  # (set on each instance by the makers below)

    @staticmethod
    def __new__(cls, data: Any, batch_size: BatchSizeLike = None) -> UnbatchedTensor:
        if isinstance(data, UnbatchedTensor) and batch_size is None:
            return data
        base = data if isinstance(data, Tensor) else torch.as_tensor(data)
        MADE[0] = True
        with disable_subclass_dispatch():
            out = base.as_subclass(cls)
        out._unbatched_bs = (
            _EMPTY if batch_size is None else as_batch_size(batch_size, "UnbatchedTensor")
        )
        return out

    def __init__(self, data: Any, batch_size: BatchSizeLike = None) -> None:
        """Everything happens in ``__new__``."""

    @property
    def batch_size(self) -> torch.Size:
        """The batch size of the TensorDict that holds it (``[]`` when none set it).

        >>> import torch
        >>> from tensordict import UnbatchedTensor
        >>> UnbatchedTensor(torch.zeros(2), batch_size=[4]).batch_size
        torch.Size([4])
        """
        return self._unbatched_bs

    @batch_size.setter
    def batch_size(self, value: BatchSizeLike) -> None:
        self._unbatched_bs = as_batch_size(value, "UnbatchedTensor.batch_size")

    # ------------------------------------------------ what TensorDict ops ask of it
    def _with(self, batch_size: torch.Size, device: torch.device | None) -> UnbatchedTensor:
        """This tensor as an entry of a collection of ``batch_size`` on ``device``: itself
        when nothing changes, else an alias (moved when the device differs)."""
        moved = device is not None and self.device != device
        if not moved and self._unbatched_bs == batch_size:
            return self
        source = self.to(device) if moved else self
        with disable_subclass_dispatch():
            if _DYNAMO():  # (dynamo takes as_subclass of a plain tensor only, as here)
                source = source.view_as(source)
            out = source.as_subclass(UnbatchedTensor)
        out._unbatched_bs = batch_size
        return out

    def _remap(self, fn: Callable[[Tensor], Tensor], batch_size: torch.Size) -> UnbatchedTensor:
        return self._with(batch_size, None)

    def _remap_many(
        self, fn: Callable[[Tensor], Sequence[Tensor]], batch_sizes: Sequence[torch.Size]
    ) -> list[NonTensor]:
        return [self._with(bs, None) for bs in batch_sizes]

    def _public(self) -> UnbatchedTensor:
        return self

    # ----------------------------------------------------------- torch and Python
    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        """Run ``func`` on the plain tensors and wrap its tensor results back (keeping the
        batch size of the first unbatched argument): a multi-tensor ``_foreach`` kernel
        wraps only the results at the positions of unbatched inputs."""
        with disable_subclass_dispatch():
            result = func(*args, **(kwargs or {}))
        if func in _PLAIN_RESULT:
            return result
        if isinstance(result, Tensor):
            if type(result) is UnbatchedTensor:
                return result
            return _wrapped(result, _first_batch_size(args, kwargs))
        if isinstance(result, (list, tuple)) and result:
            if getattr(func, "__name__", "").startswith("_foreach"):
                inputs = args[0] if args else ()
                return type(result)(
                    _wrapped(r, x.batch_size)
                    if isinstance(x, UnbatchedTensor) and type(r) is Tensor
                    else r
                    for r, x in zip(result, inputs, strict=False)
                )
            bs = _first_batch_size(args, kwargs)
            return type(result)(_wrapped(r, bs) if type(r) is Tensor else r for r in result)
        return result

    def _plain(self) -> Tensor:
        with disable_subclass_dispatch():
            return self.as_subclass(Tensor)

    def __repr__(self, *, tensor_contents: Any = None) -> Any:  # type: ignore[override]
        return f"UnbatchedTensor({self._plain()!r})"

    def __str__(self) -> str:
        return str(self._plain())

    def __format__(self, format_spec: str) -> str:
        plain: Any = self._plain()
        return str(plain.__format__(format_spec))

    def __bool__(self) -> bool:
        return bool(self._plain())

    def __int__(self) -> int:
        return int(self._plain())

    def __float__(self) -> float:
        return float(self._plain())

    def __complex__(self) -> complex:
        return complex(self._plain())

    def __index__(self) -> int:
        return self._plain().__index__()

    def __round__(self, ndigits: int | None = None) -> Any:
        plain: Any = self._plain()
        return round(plain) if ndigits is None else round(plain, ndigits)

    def __trunc__(self) -> Any:
        plain: Any = self._plain()
        return math.trunc(plain)

    def __floor__(self) -> Any:
        return math.floor(self._plain())

    def __ceil__(self) -> Any:
        return math.ceil(self._plain())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        plain: Any = self._plain()
        return plain.__array__(dtype)

    def item(self) -> Any:
        """The value of a one-element tensor, as ``Tensor.item``.

        >>> import torch
        >>> from tensordict import UnbatchedTensor
        >>> UnbatchedTensor(torch.tensor(3)).item()
        3
        """
        return self._plain().item()

    def numpy(self, *, force: bool = False) -> Any:
        """The data as a NumPy array, as ``Tensor.numpy``.

        >>> import torch
        >>> from tensordict import UnbatchedTensor
        >>> UnbatchedTensor(torch.tensor([1, 2])).numpy()
        array([1, 2])
        """
        return self._plain().numpy(force=force)

    def tolist(self, **kwargs: Any) -> Any:
        """The data as (nested) Python numbers, as ``Tensor.tolist``.

        >>> import torch
        >>> from tensordict import UnbatchedTensor
        >>> UnbatchedTensor(torch.tensor([1, 2])).tolist()
        [1, 2]
        """
        return self._plain().tolist()

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (_rebuild, (self._plain(), tuple(self.batch_size)))

    def __deepcopy__(self, memo: dict[int, Any]) -> UnbatchedTensor:
        out = UnbatchedTensor(copy.deepcopy(self._plain(), memo), self.batch_size)
        memo[id(self)] = out
        return out


def _rebuild(data: Tensor, batch_size: tuple[int, ...]) -> UnbatchedTensor:
    return UnbatchedTensor(data, batch_size=batch_size)


def _wrapped(tensor: Tensor, batch_size: torch.Size) -> UnbatchedTensor:
    MADE[0] = True
    with disable_subclass_dispatch():
        out = tensor.as_subclass(UnbatchedTensor)
    out._unbatched_bs = batch_size
    return out


def _first_batch_size(args: Sequence[Any], kwargs: Any) -> torch.Size:
    """The batch size of the first unbatched tensor among the arguments (lists included)."""
    for arg in (*args, *(kwargs or {}).values()):
        if isinstance(arg, UnbatchedTensor):
            return arg.batch_size
        if isinstance(arg, (list, tuple)):
            for item in arg:
                if isinstance(item, UnbatchedTensor):
                    return item.batch_size
    return _EMPTY


# Functions whose result stays as torch gives it (the view base of an alias, raw pointers).
_BASE_GETTER: Any = Tensor._base.__get__  # type: ignore[union-attr]
_PLAIN_RESULT: frozenset[Any] = frozenset({_BASE_GETTER, Tensor.data_ptr, Tensor.untyped_storage})


def write_unbatched(td: Any, key: str, current: Any, item: Any) -> None:
    """``td[idx] = other`` where ``current`` (td's entry at ``key``) or ``item`` (other's)
    is an UnbatchedTensor: every element shares the payload, so it is written whole,
    in place, whatever the index (a missing key takes ``item`` as it is)."""
    call = "TensorDict[]="
    if current is None:
        td._set_path((key,), item, call)  # stored with td's batch size (refused if locked)
        return
    if not isinstance(current, UnbatchedTensor):
        raise TypeError(
            f"{call}: key {key!r} holds a {type(current).__name__}; cannot write an "
            "UnbatchedTensor into it at an index"
        )
    if not isinstance(item, Tensor):
        raise TypeError(
            f"{call}: key {key!r} holds an UnbatchedTensor; cannot write a "
            f"{type(item).__name__} into it"
        )
    if item.shape != current.shape:
        raise ValueError(
            f"{call}: key {key!r} holds an UnbatchedTensor of shape {tuple(current.shape)}, "
            f"shared by the whole batch, so it is written whole; got shape {tuple(item.shape)}"
        )
    with disable_subclass_dispatch():
        current.copy_(item)


def joined_unbatched(values: Sequence[Any], batch_size: torch.Size, call: str) -> UnbatchedTensor:
    """The entry of a stack or concatenation of collections at a key where they hold
    UnbatchedTensors: the first one's data, with the result's batch size. Members that
    hold other data (another storage) are dropped with a warning, as upstream."""
    first = values[0]
    if not all(isinstance(v, UnbatchedTensor) for v in values):
        kinds = sorted({type(v).__name__ for v in values})
        raise TypeError(
            f"{call}: an UnbatchedTensor can only be joined with UnbatchedTensors, got {kinds}"
        )
    ptr = first.data_ptr()
    if any(v is not first and v.data_ptr() != ptr for v in values):
        warnings.warn(
            f"{call}: stacking UnbatchedTensors with different data storage keeps only the "
            "first one's data (an UnbatchedTensor is shared by the whole batch; use a plain "
            "tensor for data that differs per element)",
            UserWarning,
            stacklevel=4,
        )
    out: UnbatchedTensor = first._with(batch_size, None)
    return out


def batch_only(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` for an ``apply`` over the batch dims (a reduction): an UnbatchedTensor has
    none, so it is kept as it is (``apply`` gives it the result's batch size)."""

    def leaf(x: Any) -> Any:
        return x if isinstance(x, UnbatchedTensor) else fn(x)

    return leaf


def refuse_unbatched(td: Any, call: str, what: str) -> None:
    """A NotImplementedError naming the first UnbatchedTensor leaf of ``td``, for the
    operations that cannot store one yet (memory-mapping, consolidation), as upstream."""
    if not MADE[0] or not any(type(x) is UnbatchedTensor for x in td._tensor_leaves([])):
        return  # (no walk at all in a process that never made an UnbatchedTensor)
    for key, value in td.items(include_nested=True, leaves_only=True):
        if isinstance(value, UnbatchedTensor):
            raise NotImplementedError(
                f"{call}: UnbatchedTensor entries cannot be {what} yet, but {key!r} is one; "
                f"exclude it first, e.g. td.exclude({key!r})"
            )


def where_keeping_unbatched(
    call: str, fn: Callable[..., Tensor]
) -> Callable[..., Tensor | UnbatchedTensor]:
    """``fn`` (a leaf-wise ``torch.where``) for ``where``: an UnbatchedTensor has no batch
    element to choose, so it is kept when the other side is not a tensor entry or holds
    the same data; different data on the two sides is refused."""

    def leaf(x: Tensor, *others: Any) -> Any:
        if not isinstance(x, UnbatchedTensor):
            if others and isinstance(others[0], UnbatchedTensor):
                raise ValueError(
                    f"{call}: one side holds an UnbatchedTensor, the other a "
                    f"{type(x).__name__}; an entry shared by the whole batch cannot be "
                    "chosen element-wise"
                )
            return fn(x, *others)
        if not others or others[0] is x:
            return x
        y = others[0]
        if isinstance(y, Tensor) and (
            (y.data_ptr() == x.data_ptr() and y.shape == x.shape) or bool(torch.equal(x, y))
        ):
            return x
        raise ValueError(
            f"{call}: an UnbatchedTensor holds one value for the whole batch, and the two "
            "sides hold different data at its key, so it cannot be chosen element-wise"
        )

    return leaf
