"""The TensorDict API on ``NonTensorData`` and ``NonTensorStack``, written once by delegation.

Upstream's ``NonTensorData`` is a tensorclass with one field, ``data``; code written for it
calls TensorDict methods on one (``nt.clone()``, ``nt.to("cuda")``, ``nt.unbind(0)``,
``nt.apply(fn)``, ``nt.memmap(path)``, ``NonTensorData.stack([...])``, ...). Ours stays a
light leaf (cheap to carry through every operation of its parent), and each TensorDict
method it lacks is installed here as one generic call: the entry goes into a temporary
``TensorDict({"data": entry})`` of its batch size and device, the method runs on that
collection (where a non-tensor entry already follows every batch operation and is left
alone by element-wise maths), and a result that is such a one-entry collection is handed
back as the entry it holds. A method that acts in place updates the entry from the
collection afterwards, and refuses to leave anything but one non-tensor entry at ``"data"``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, NoReturn

from tensordict._future import TensorDictFuture
from tensordict._nontensor import (
    NonTensor,
    NonTensorData,
    NonTensorEntry,
    NonTensorStack,
    same_value,
)
from tensordict._nontensor_origin import write_back
from tensordict._nontensor_root import as_root
from tensordict._views import with_non_tensor

_FIELD = "data"

# ``data`` is the value itself on a NonTensorData (upstream's one field), not the
# TensorDict property of that name.
_SKIP = frozenset({"data"})


@dataclasses.dataclass
class _Fields:
    data: Any


def _as_td(entry: NonTensor) -> Any:
    from tensordict._td import TensorDict

    return TensorDict({_FIELD: entry}, batch_size=entry.batch_size, device=entry.device)


def _convert(arg: Any) -> Any:
    """A non-tensor entry among the arguments becomes its one-entry TensorDict."""
    if isinstance(arg, NonTensor):
        return _as_td(arg)
    if isinstance(arg, (list, tuple)) and any(isinstance(a, NonTensor) for a in arg):
        return type(arg)(_as_td(a) if isinstance(a, NonTensor) else a for a in arg)
    return arg


def _same(arg: Any) -> Any:
    return arg


def _held(out: Any) -> NonTensor | None:
    """The entry a one-entry (``"data"``) collection holds, or None for anything else."""
    from tensordict._td import is_tensor_collection

    if not is_tensor_collection(out) or out.__class__.__name__ == "TensorDictFuture":
        return None
    keys = list(out.keys())
    if keys != [_FIELD]:
        return None
    for _, value in out.items(leaves_only=True, is_leaf=with_non_tensor):
        return value if isinstance(value, NonTensor) else None
    return None


class _EntryFuture(TensorDictFuture):
    """The future of a background call (``memmap(..., return_early=True)``), whose result
    is handed back as the entry it holds."""

    def __init__(self, inner: TensorDictFuture) -> None:
        super().__init__(inner.futures, None)
        self.inner = inner

    def result(self, timeout: float | None = None) -> Any:
        """The call's result, a one-entry collection given as its entry."""
        return _back(self.inner.result(timeout))


def _back(out: Any) -> Any:
    entry = _held(out)
    if entry is not None:
        return entry
    if isinstance(out, TensorDictFuture):
        return _EntryFuture(out)
    if isinstance(out, (tuple, list)) and out and all(_held(o) is not None for o in out):
        return type(out)(_held(o) for o in out)
    return out


def _refuse(entry: NonTensor, td: Any, call: str, new: NonTensor | None) -> NoReturn:
    left = list(td.keys())
    kind = type(new).__name__ if new is not None else None
    raise TypeError(
        f"{call}: a {type(entry).__name__} holds one value under {_FIELD!r}; the call "
        f"would leave keys {left}" + (f" holding a {kind}" if kind else "")
    )


def _sync(entry: NonTensor, td: Any, call: str) -> None:
    """Write what an in-place method did to ``td`` back into ``entry``."""
    assert isinstance(entry, NonTensorEntry)  # (the methods are installed there only)
    new = _held(td)
    if new is None or type(new) is not type(entry):
        _refuse(entry, td, call, new)
    entry.batch_size = new.batch_size
    entry.device = new.device
    if isinstance(entry, NonTensorData):
        entry.data = new.data  # type: ignore[attr-defined]
    elif isinstance(entry, NonTensorStack):
        entry.positions = new.positions  # type: ignore[attr-defined]
        entry.values = new.values  # type: ignore[attr-defined]
        entry._members = new._members  # type: ignore[attr-defined]


# methods whose arguments are values to store, not collections to combine with
_TAKES_VALUES = frozenset({"set", "set_", "set_at_", "setdefault", "set_non_tensor", "fill_"})


# methods that write the collection where a load finds it: they run on the collection that
# names a non-tensor entry on disk, so that the load gives the entry back (_nontensor_root)
_SAVES = frozenset({"memmap", "memmap_", "memmap_like", "save", "dumps", "consolidate"})


def _method(name: str) -> Callable[..., Any]:
    convert = _convert if name not in _TAKES_VALUES else _same
    wrap = as_root if name in _SAVES else _as_td

    def method(self: NonTensor, *args: Any, **kwargs: Any) -> Any:
        call = f"{type(self).__name__}.{name}"
        td = wrap(self)
        out = getattr(td, name)(*map(convert, args), **{k: convert(v) for k, v in kwargs.items()})
        if out is td:  # acted in place (lock_, update, set_, zero_, ...): follow it
            _sync(self, td, call)
            return self
        if name.endswith("_") and _held(td) is not None:
            _sync(self, td, call)
        elif list(td.keys()) != [_FIELD]:
            # a call that added or took entries (pop, setdefault, make_memmap, ...): the
            # entry holds one value, so the change would be dropped without a word
            _refuse(self, td, call, None)
        return _back(out)

    method.__name__ = name
    method.__doc__ = (
        f"As :meth:`TensorDict.{name} <tensordict.TensorDict.{name}>`, on the one value."
    )
    return method


def _property(name: str) -> property:
    def getter(self: NonTensor) -> Any:
        return _back(getattr(_as_td(self), name))

    return property(getter, doc=f"As ``TensorDict.{name}``, on the one value.")


def _classmethod(name: str) -> classmethod[Any, Any, Any]:
    def method(cls: type, *args: Any, **kwargs: Any) -> Any:
        from tensordict._td import TensorDict

        fn = getattr(TensorDict, name)
        return _back(fn(*map(_convert, args), **{k: _convert(v) for k, v in kwargs.items()}))

    method.__name__ = name
    method.__doc__ = f"As ``TensorDict.{name}``; a one-value result comes back as that value."
    return classmethod(method)


def fields(self: NonTensor) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of upstream's ``NonTensorData`` tensorclass: one, ``data``."""
    return dataclasses.fields(_Fields)


def from_tensordict(
    cls: type, tensordict: Any, non_tensordict: dict[str, Any] | None = None
) -> NonTensor:
    """The entry a TensorDict holds at ``"data"`` (or the value ``non_tensordict["data"]``
    over the TensorDict's batch size and device)."""
    if non_tensordict is not None and _FIELD in non_tensordict:
        return NonTensorData(
            non_tensordict[_FIELD], batch_size=tensordict.batch_size, device=tensordict.device
        )
    entry = _held(tensordict)
    if entry is None:
        raise KeyError(
            f"{cls.__name__}.from_tensordict: expected a TensorDict holding one non-tensor "
            f"entry at {_FIELD!r}, got keys {list(tensordict.keys())}"
        )
    return entry


def maybe_to_stack(self: NonTensor) -> NonTensor:
    """A NonTensorData with batch dims as the NonTensorStack of its value repeated (so code
    can treat both alike); a 0-dim one, or a stack, as it is."""
    if isinstance(self, NonTensorData) and self.batch_size:
        return NonTensorStack.from_list(self.tolist(), device=self.device)
    return self


def setitem(self: NonTensor, index: Any, value: Any) -> None:
    """``entry[index] = value``, written through the entry's one-entry TensorDict.

    ``value`` is a non-tensor entry, a nested list shaped like ``entry[index]`` (one value
    per element) or any other object (one value for every element at ``index``). A
    ``NonTensorData`` holds one value for all its elements, so it takes a write that
    leaves one value everywhere (the whole batch, or the value it already holds);
    another raises, as upstream (``maybe_to_stack()`` gives a stack that can take it).
    """
    call = f"{type(self).__name__}.__setitem__"
    shape = self._positions()[index].shape
    if not isinstance(value, NonTensor):
        stack = None
        if isinstance(value, list) and shape:
            try:
                stack = NonTensorStack.from_list(value, self.device)
            except ValueError:  # irregular nesting: one value
                stack = None
        if stack is not None and stack.batch_size == shape:
            value = stack
        else:
            value = NonTensorData(value, shape, self.device)
    td = _as_td(self)
    td[index] = _as_td(value)
    if not isinstance(self, NonTensorData):
        _sync(self, td, call)
        write_back(self, index, value)
        return
    new = _held(td)
    assert new is not None
    used = [new._values()[i] for i in sorted(set(new._positions().reshape(-1).tolist()))]
    if not all(same_value(v, used[0]) for v in used):
        raise ValueError(
            f"{call}: a {type(self).__name__} holds one value for all its elements, so it "
            f"cannot take another value at index {index!r}; call maybe_to_stack() to get a "
            "NonTensorStack, which holds a value per element"
        )
    self._check(used[0])  # a typed MetaData refuses another type
    self.data = used[0]
    write_back(self)  # an element read from a stack: the stack takes the new value


def install() -> None:
    """Add each public TensorDict method a non-tensor entry lacks (called once, at import)."""
    from tensordict._td import TensorDict

    for name in dir(TensorDict):
        if name.startswith("_") or name in _SKIP or hasattr(NonTensorEntry, name):
            continue
        attr = inspect.getattr_static(TensorDict, name)
        if isinstance(attr, property):
            setattr(NonTensorEntry, name, _property(name))
        elif isinstance(attr, (classmethod, staticmethod)):
            setattr(NonTensorEntry, name, _classmethod(name))
        elif callable(attr):
            setattr(NonTensorEntry, name, _method(name))
    NonTensorEntry.fields = fields  # type: ignore[attr-defined]
    NonTensorEntry.__setitem__ = setitem  # type: ignore[index]
    NonTensorEntry.maybe_to_stack = maybe_to_stack  # type: ignore[attr-defined]
    NonTensorEntry.from_tensordict = classmethod(from_tensordict)  # type: ignore[attr-defined]
