"""tensorclass: dataclass-like classes whose fields live in a TensorDict.

A tensorclass is a TensorDict with a fixed set of keys (its fields) read and written as
attributes. Every TensorDict operation is inherited as it is and returns the same class,
because the operations build their results through ``type(self)._new_unsafe``.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, dataclass_transform

import torch
from torch import Tensor

from tensordict._batch import as_batch_size, as_device
from tensordict._format import register_type
from tensordict._nontensor import NonTensor, NonTensorData
from tensordict._primitives import CollectionPrimitives
from tensordict._td import TensorDict

T = TypeVar("T", bound=type)
_MISSING: Any = dataclasses.MISSING
_RESERVED = {"batch_size", "device", "names", "lock", "shape"}
_SLOTS = frozenset((*CollectionPrimitives.__slots__, *TensorDict.__slots__))  # storage slots


class _Field:
    """A non-tensor field: reads unwrap the value. (Tensor fields need no descriptor: the
    instance ``__dict__`` *is* the storage, so ``x.image`` is a plain attribute read.)"""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            default = getattr(owner, "_defaults", {}).get(self.name, _MISSING)
            if default is _MISSING:
                raise AttributeError(f"{getattr(owner, '__name__', '')}.{self.name} has no default")
            return default
        value = obj._tensordict.get(self.name)
        if isinstance(value, NonTensor):
            return value._public()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        _set_field(obj, self.name, value)


def _set_field(obj: Any, name: str, value: Any) -> None:
    cls = type(obj)
    call = f"{cls.__name__}.{name}"
    if cls._frozen:
        raise dataclasses.FrozenInstanceError(f"{call}: cannot assign to a frozen tensorclass")
    if value is None:  # an unset optional field holds no entry
        if name in obj._tensordict:
            obj.del_(name)
        return
    obj._set_str(name, value, call)  # the tensorclass's _convert applies the casting rules


def _is_tensor_type(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, (Tensor, CollectionPrimitives))


def _hint_types(hint: Any) -> tuple[Any, ...]:
    """The classes a hint allows (``Optional[X]`` and ``X | None`` give ``(X,)``)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(a for a in typing.get_args(hint) if a is not type(None))
    return (hint,)


def _cast(cls: Any, name: str, value: Any) -> Any:
    """Prepare a field value for storage, following the class's casting rules.

    Fields annotated with tensor types take tensors, collections, mappings and anything
    ``torch.as_tensor`` accepts (unless ``nocast``); other fields keep the value as
    non-tensor data (``autocast`` first converts it to an annotated int/float/bool/str).
    """
    if value is None or isinstance(value, (Tensor, CollectionPrimitives, NonTensor)):
        return value
    hints = cls._hints.get(name, ())
    if cls._nocast:
        return value if isinstance(value, Mapping) else NonTensorData(value)
    if any(_is_tensor_type(h) for h in hints):
        if isinstance(value, Mapping):
            return value
        try:
            return torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            expected = " or ".join(getattr(h, "__name__", str(h)) for h in hints)
            raise TypeError(
                f"{cls.__name__}: field {name!r} expects {expected}, got "
                f"{type(value).__name__} {value!r}"
            ) from None
    if cls._autocast:
        for hint in hints:
            if hint in (int, float, bool, str) and not isinstance(value, hint):
                try:
                    return NonTensorData(hint(value))
                except (TypeError, ValueError):
                    break
    return NonTensorData(value)


_SLOT_SETTERS: dict[str, Any] = {
    name: klass.__dict__[name].__set__
    for klass in (CollectionPrimitives, TensorDict)
    for name in klass.__slots__
}
_SET_BS = _SLOT_SETTERS["_batch_size"]
_SET_DEVICE = _SLOT_SETTERS["_device"]
_SET_NAMES = _SLOT_SETTERS["_names"]
_SET_LOCKED = _SLOT_SETTERS["_is_locked"]
_SET_STORE = _SLOT_SETTERS["_tensordict"]


def _SET_DICT(obj: Any, store: dict[str, Any]) -> None:
    object.__setattr__(obj, "__dict__", store)


class TensorClass(TensorDict):
    """Base of every tensorclass; subclass it directly or use ``@tensorclass``.

    >>> import torch
    >>> from tensordict import TensorClass
    >>> class Point(TensorClass):
    ...     xy: torch.Tensor
    ...     label: str = "none"
    >>> p = Point(torch.zeros(4, 2), batch_size=[4])
    >>> p.xy.shape, p.label, p[1:3].batch_size
    (torch.Size([4, 2]), 'none', torch.Size([2]))
    """

    _fields: ClassVar[tuple[str, ...]] = ()
    _field_set: ClassVar[frozenset[str]] = frozenset()
    _post_init: ClassVar[Callable[[Any], None] | None] = None
    _defaults: ClassVar[dict[str, Any]] = {}
    _hints: ClassVar[dict[str, tuple[Any, ...]]] = {}
    _autocast = False
    _nocast = False
    _frozen = False

    def __init_subclass__(
        cls, autocast: bool = False, nocast: bool = False, frozen: bool = False, **kw: Any
    ) -> None:
        super().__init_subclass__(**kw)
        _setup(cls, autocast=autocast, nocast=nocast, frozen=frozen)

    def __init__(
        self,
        *args: Any,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        **kwargs: Any,
    ) -> None:
        cls = type(self)
        fields = cls._fields
        store: dict[str, Any] = {}
        # the slot descriptors directly: no per-attribute __setattr__ hop
        _SET_BS(self, as_batch_size(batch_size, f"{cls.__name__}.__init__"))
        _SET_DEVICE(self, None if device is None else as_device(device))
        _SET_NAMES(self, None)
        _SET_LOCKED(self, False)
        _SET_STORE(self, store)
        _SET_DICT(self, store)
        if kwargs or len(args) != len(fields):
            self._fill_pairs(_collect(cls, args, kwargs))
        else:  # every field given positionally: the common, fast case
            self._fill_pairs(zip(fields, args, strict=True))
        if names is not None:
            self.names = names
        if cls._post_init is not None:
            cls._post_init(self)
        if cls._frozen:
            self.lock_()

    def _fill_one(self, key: Any, value: Any) -> None:
        if value is not None:  # an unset optional field holds no entry
            super()._fill_one(key, value)

    def _convert(self, value: Any, key: str, call: str) -> Any:
        if key in type(self)._field_set:
            value = _cast(type(self), key, value)
        return super()._convert(value, key, call)

    @classmethod
    def _new_unsafe(
        cls,
        entries: dict[str, Any],
        batch_size: torch.Size,
        device: torch.device | None,
        names: list[str | None] | None,
    ) -> Any:
        td = cls.__new__(cls)
        _SET_STORE(td, entries)
        _SET_DICT(td, entries)
        _SET_BS(td, batch_size)
        _SET_DEVICE(td, device)
        _SET_NAMES(td, names)
        _SET_LOCKED(td, False)
        return td

    def __getattr__(self, name: str) -> Any:
        # reached only when a normal lookup fails: an unset optional tensor field
        if name in type(self)._field_set:
            return None
        raise AttributeError(
            f"{type(self).__name__} has no attribute {name!r}; fields are "
            f"{list(type(self)._fields)}"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        if name in _SLOTS:
            object.__setattr__(self, name, value)
        elif name in cls._field_set:
            _set_field(self, name, value)
        elif _class_attr(cls, name):
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(
                f"{cls.__name__} has no field {name!r}; fields are {list(cls._fields)}"
            )

    def __repr__(self) -> str:
        return _tc_repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        _, args = super().__reduce__()
        return (_rebuild, (type(self), args))


def _collect(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """(field, value) pairs from positional and keyword arguments and the defaults."""
    fields = cls._fields
    call = f"{cls.__name__}.__init__"
    if len(args) > len(fields):
        raise TypeError(
            f"{call}: takes {len(fields)} positional fields {list(fields)}, got {len(args)}"
        )
    values = dict(zip(fields, args, strict=False))
    for key, value in kwargs.items():
        if key not in cls._field_set:
            raise TypeError(f"{call}: unexpected field {key!r}; fields are {list(fields)}")
        if key in values:
            raise TypeError(f"{call}: field {key!r} given twice")
        values[key] = value
    missing = []
    for name in fields:
        if name not in values:
            default = cls._defaults.get(name, _MISSING)
            if default is _MISSING:
                missing.append(name)
            else:
                values[name] = default() if isinstance(default, _Factory) else default
    if missing:
        raise TypeError(f"{call}: missing required fields {missing}")
    return values.items()


def _class_attr(cls: type, name: str) -> bool:
    return any(name in klass.__dict__ for klass in cls.__mro__)


class _Factory:
    """``field(default_factory=...)`` support: a fresh default per instance."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()


def _setup(cls: Any, *, autocast: bool, nocast: bool, frozen: bool) -> None:
    """Read the annotations of ``cls`` (and its tensorclass bases) into fields."""
    if autocast and nocast:
        raise ValueError(f"tensorclass {cls.__name__}: autocast and nocast exclude each other")
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = {}
        for klass in reversed(cls.__mro__):
            hints.update(getattr(klass, "__annotations__", {}))
    fields: list[str] = []
    defaults: dict[str, Any] = {}
    field_hints: dict[str, tuple[Any, ...]] = {}
    for klass in reversed(cls.__mro__):
        if klass in (TensorClass, TensorDict) or not (
            klass is cls or issubclass(klass, TensorClass)
        ):
            continue
        for name in inspect.get_annotations(klass):
            if name.startswith("_") or typing.get_origin(hints.get(name)) is typing.ClassVar:
                continue
            if name in _RESERVED:
                raise ValueError(f"tensorclass {cls.__name__}: field name {name!r} is reserved")
            if name not in fields:
                fields.append(name)
            raw = klass.__dict__.get(name, _MISSING)
            if isinstance(raw, _Field):
                raw = klass._defaults.get(name, _MISSING)
            elif isinstance(raw, dataclasses.Field):
                if raw.default is not dataclasses.MISSING:
                    raw = raw.default
                elif raw.default_factory is not dataclasses.MISSING:
                    raw = _Factory(raw.default_factory)
                else:
                    raw = _MISSING
            if raw is not _MISSING:
                defaults[name] = raw
    for name in fields:
        hint = hints.get(name, Any)
        types = _hint_types(hint)
        field_hints[name] = tuple(cls if t == "Self" or t is typing.Self else t for t in types)
        tensor_only = not nocast and any(_is_tensor_type(t) for t in field_hints[name])
        if tensor_only:  # read straight from the instance __dict__ (the storage)
            if isinstance(cls.__dict__.get(name), _Field) or name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, _Field(name))
    cls._fields = tuple(fields)
    cls._field_set = frozenset(fields)
    cls._post_init = getattr(cls, "__post_init__", None)
    register_type(f"tensorclass:{getattr(cls, '_type_name', None) or cls.__qualname__}", cls)
    cls._defaults = defaults
    cls._hints = field_hints
    cls._autocast = autocast
    cls._nocast = nocast
    cls._frozen = frozen


def _rebuild(cls: Any, args: tuple[Any, ...]) -> Any:
    from tensordict._state import _from_plain

    td = _from_plain(TensorDict, *args[1:])  # args[0] is the class, rebuilt below
    out = cls._new_unsafe(td._tensordict, td._batch_size, td._device, td._names)
    if td._is_locked:
        out.lock_()
    return out


def _tc_repr(obj: Any) -> str:
    from tensordict._repr import _entry, _indent

    lines = []
    for name in sorted(obj._tensordict):
        value = obj._tensordict[name]
        text = repr(value.data) if type(value) is NonTensorData else _entry(value)
        lines.append(f"{name}={text}")
    lines += [
        f"batch_size={obj.batch_size}",
        f"device={obj.device}",
        f"is_shared={obj.is_shared()}",
    ]
    return f"{type(obj).__name__}(\n" + _indent(",\n".join(lines)) + ")"


@typing.overload
def tensorclass(cls: T) -> T: ...
@typing.overload
def tensorclass(
    cls: None = None, *, autocast: bool = False, nocast: bool = False, frozen: bool = False
) -> Callable[[T], T]: ...


@dataclass_transform()
def tensorclass(
    cls: Any = None, *, autocast: bool = False, nocast: bool = False, frozen: bool = False
) -> Any:
    """Turn a class with annotated fields into a tensorclass (a TensorDict with fields).

    >>> import torch
    >>> from tensordict import tensorclass
    >>> @tensorclass
    ... class Batch:
    ...     obs: torch.Tensor
    ...     reward: torch.Tensor
    ...     def total(self):
    ...         return self.reward.sum()
    >>> b = Batch(torch.zeros(5, 3), torch.ones(5), batch_size=[5])
    >>> b[:2].total(), type(b.reshape(5, 1)).__name__
    (tensor(2.), 'Batch')
    """

    def wrap(klass: Any) -> Any:
        namespace = {
            k: v for k, v in klass.__dict__.items() if k not in ("__dict__", "__weakref__")
        }
        bases = tuple(b for b in klass.__bases__ if b is not object)
        if not any(issubclass(b, TensorClass) for b in bases):
            bases = (*bases, TensorClass)
        return type(
            klass.__name__, bases, namespace, autocast=autocast, nocast=nocast, frozen=frozen
        )

    return wrap if cls is None else wrap(cls)


def is_tensorclass(obj: Any) -> bool:
    """Whether ``obj`` (an instance or a class) is a tensorclass.

    >>> from tensordict import TensorDict, is_tensorclass
    >>> is_tensorclass(TensorDict())
    False
    """
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, TensorClass)
