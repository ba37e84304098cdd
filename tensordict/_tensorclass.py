"""tensorclass: dataclass-like classes whose fields live in a TensorDict.

A tensorclass is a TensorDict with a fixed set of keys (its fields) read and written as
attributes. Every TensorDict operation is inherited as it is and returns the same class,
because the operations build their results through ``type(self)._new_unsafe``.

Storage: the entries live in the ``_tensordict`` slot, as in any TensorDict. Each field
is a property on the class reading that dict, so only fields reach the data; any other
attribute a method sets is an ordinary instance attribute in ``__dict__``.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, dataclass_transform

import torch
from torch import Tensor

from tensordict._batch import as_batch_size, as_device
from tensordict._format import register_type
from tensordict._keys import key_path
from tensordict._nontensor import NonTensor
from tensordict._primitives import CollectionPrimitives, slot_setters
from tensordict._repr import tc_repr
from tensordict._td import _SIZES, TensorDict
from tensordict._tensorclass_cast import cast_value, check_tensor_only, resolve_hints

T = TypeVar("T", bound=type)
_MISSING: Any = dataclasses.MISSING
_INHERIT: Any = object()  # a class keyword not given: the base's value stays
_FLAGS = ("autocast", "nocast", "frozen", "shadow", "tensor_only", "skip_post_init_on_rebuild")


class NotAFieldError(AttributeError, ValueError):
    """A key that is not a field of the tensorclass: an ``AttributeError`` as for an
    attribute, and the ``ValueError`` upstream's ``update`` raises."""


class UnexpectedFieldError(TypeError, AttributeError):
    """A keyword argument that is not a field: the ``TypeError`` a dataclass raises, and
    the ``AttributeError`` upstream's tensorclass raises, so code catching either works."""


_SLOTS = frozenset((*CollectionPrimitives.__slots__, *TensorDict.__slots__))  # storage slots
_SHADOWABLE = ("batch_size", "device", "names")  # constructor keywords a field may take over

_SLOT_SETTERS = slot_setters(CollectionPrimitives, TensorDict)
_SET_BS = _SLOT_SETTERS["_batch_size"]
_SET_DEVICE = _SLOT_SETTERS["_device"]
_SET_NAMES = _SLOT_SETTERS["_names"]
_SET_LOCKED = _SLOT_SETTERS["_is_locked"]
_SET_STORE = _SLOT_SETTERS["_tensordict"]
# dynamo traces object.__setattr__, not a slot descriptor's __set__; is_dynamo_compiling
# answers in ~15 ns (is_compiling: ~42 ns), and _new_unsafe asks it for every op's result
_DYNAMO = torch.compiler.is_dynamo_compiling


def _field_property(name: str) -> property:
    """The attribute of one field: reads its entry (None when unset), writes through set."""

    def get(self: Any) -> Any:
        try:
            value = self._tensordict[name]
        except KeyError:  # an unset optional field (None), or one deleted with del
            if name in vars(self).get("_deleted", ()):
                raise AttributeError(
                    f"{type(self).__name__}.{name}: the field was deleted (assign it again)"
                ) from None
            return None
        if value.__class__ is Tensor:
            return value
        if isinstance(value, NonTensor):  # the value, unless the field asks for the wrapper
            return value if _wants_wrapper(type(self), name) else value._public()
        return value

    def set_(self: Any, value: Any) -> None:
        _set_field(self, name, value)
        vars(self).get("_deleted", set()).discard(name)

    def del_(self: Any) -> None:
        _set_field(self, name, None)
        vars(self).setdefault("_deleted", set()).add(name)

    return property(get, set_, del_, doc=f"The field {name!r}.")


def _wants_wrapper(cls: Any, name: str) -> bool:
    hints = cls._field_hints()[name]
    return any(isinstance(h, type) and issubclass(h, NonTensor) for h in hints)


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


class TensorClass(TensorDict):
    """Base of every tensorclass; subclass it directly or use ``@tensorclass``.

    Options are given as class keywords (``class P(TensorClass, autocast=True)``) or by
    subscription (``TensorClass["autocast"]``, ``TensorClass["nocast", "frozen"]``):
    ``autocast``, ``nocast``, ``frozen``, ``shadow`` and ``tensor_only``, as for
    :func:`tensorclass`. A subclass inherits the options it does not set.

    >>> import torch
    >>> from tensordict import TensorClass
    >>> class Point(TensorClass):
    ...     xy: torch.Tensor
    ...     label: str = "none"
    >>> p = Point(torch.zeros(4, 2), batch_size=[4])
    >>> p.xy.shape, p.label, p[1:3].batch_size
    (torch.Size([4, 2]), 'none', torch.Size([2]))
    >>> class Raw(TensorClass["nocast"]):
    ...     n: int
    >>> Raw(3).n
    3
    """

    _fields: ClassVar[tuple[str, ...]] = ()
    _field_set: ClassVar[frozenset[str]] = frozenset()
    _post_init: ClassVar[Callable[[Any], None] | None] = None
    _defaults: ClassVar[dict[str, Any]] = {}
    _annotations: ClassVar[dict[str, Any]] = {}
    _hints: ClassVar[dict[str, tuple[Any, ...]] | None] = None
    _hint_unions: ClassVar[frozenset[str]] = frozenset()
    _custom_setattr: ClassVar[bool] = False
    _plain_init: ClassVar[bool] = False  # __init__ may store plain tensors as they come
    _init_tail: ClassVar[bool] = False  # __init__ ends with __post_init__ or a lock
    _pack: ClassVar[Callable[..., dict[str, Any]]]  # one value per field -> {field: value}
    _shadowed: ClassVar[tuple[str, ...]] = ()
    _autocast = False
    _nocast = False
    _frozen = False
    _shadow = False
    _tensor_only = False
    _kw_only = False  # this class's own fields only (not inherited, as dataclasses)
    _keyword_fields: ClassVar[frozenset[str]] = frozenset()  # keyword-only, bases' included
    _positional: ClassVar[tuple[str, ...]] = ()  # the fields positional arguments fill
    _n_fast_args: ClassVar[int] = 0
    _skip_post_init_on_rebuild = False
    _is_tensorclass = True
    _is_non_tensor = False

    def __init_subclass__(
        cls,
        autocast: bool | None = None,
        nocast: bool | None = None,
        frozen: bool | None = None,
        shadow: bool | None = None,
        tensor_only: bool | None = None,
        kw_only: bool = False,
        skip_post_init_on_rebuild: bool | None = None,
        cast_filter: Callable[[tuple[str, ...], Tensor], bool] | None = _INHERIT,
        **kw: Any,
    ) -> None:
        super().__init_subclass__(**kw)
        given = {
            "autocast": autocast,
            "nocast": nocast,
            "frozen": frozen,
            "shadow": shadow,
            "tensor_only": tensor_only,
            "skip_post_init_on_rebuild": skip_post_init_on_rebuild,
        }
        flags = {k: bool(getattr(cls, f"_{k}")) if v is None else bool(v) for k, v in given.items()}
        if cast_filter is not _INHERIT:
            if cast_filter is not None and not callable(cast_filter):
                raise TypeError(
                    f"tensorclass {cls.__name__}: cast_filter must be a callable "
                    f"(key, value) -> bool or None, got {type(cast_filter).__name__}"
                )
            cls._cast_filter = None if cast_filter is None else staticmethod(cast_filter)
        _setup(cls, kw_only=bool(kw_only), **flags)

    def __class_getitem__(cls, item: str | tuple[str, ...]) -> Any:
        """A subclass with the named options on: ``TensorClass["autocast", "frozen"]``."""
        items = item if isinstance(item, tuple) else (item,)
        for flag in items:
            if flag not in _FLAGS:
                raise TypeError(
                    f"{cls.__name__}[...]: unknown option {flag!r}; options are {list(_FLAGS)}"
                )
        key = (cls, tuple(sorted(set(items))))
        base = _PARAMETRIZED.get(key)
        if base is None:
            name = f"{cls.__name__}_{'_'.join(key[1])}"
            base = type(cls)(  # type: ignore[misc]
                name, (cls,), {"__module__": cls.__module__}, **dict.fromkeys(key[1], True)
            )
            _PARAMETRIZED[key] = base
        return base

    def __init__(
        self,
        *args: Any,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        lock: bool | None = None,
        **kwargs: Any,
    ) -> None:
        cls = type(self)
        # the common call: every field given (all positionally or all by keyword), as a
        # plain tensor that starts with the batch size, and nothing else: stored as given,
        # as _fill_pairs would store it; anything else takes the general path, _init
        if cls._plain_init and device is None and names is None and not lock:
            values: Any
            if not kwargs and len(args) == cls._n_fast_args:
                values = args
            elif not args and kwargs.keys() == cls._field_set:
                values = kwargs.values()  # and kwargs, a fresh dict, becomes the store
            else:
                values = None
            if values is not None:
                plain = False
                if (  # [N]: checked here, no call
                    (type(batch_size) is list or type(batch_size) is torch.Size)
                    and len(batch_size) == 1
                    and type(b0 := batch_size[0]) is int
                    and b0 >= 0
                ):
                    size = batch_size if type(batch_size) is torch.Size else _SIZES.get(b0)
                    size = size or torch.Size(batch_size)
                    for value in values:
                        if type(value) is not Tensor:
                            break
                        try:
                            if value.shape[0] != b0:
                                break
                        except (IndexError, RuntimeError):  # 0-dim or nested: for _init
                            break
                    else:
                        plain = True
                else:  # the error for a bad batch_size is _init's own
                    size = as_batch_size(batch_size, f"{cls.__name__}.__init__")
                    n = len(size)
                    for value in values:
                        try:
                            if type(value) is not Tensor or value.shape[:n] != size:
                                break
                        except RuntimeError:  # a nested tensor: checked by _init
                            break
                    else:
                        plain = True
                if plain:
                    store = cls._pack(*args) if values is args else kwargs
                    if _DYNAMO():  # traced: object.__setattr__, as in _new_unsafe
                        _set_slots_traced(self, store, size, None, None)
                    else:  # the slot descriptors directly: no __setattr__ hop
                        _SET_BS(self, size)
                        _SET_DEVICE(self, None)
                        _SET_NAMES(self, None)
                        _SET_LOCKED(self, False)
                        _SET_STORE(self, store)
                    if cls._init_tail:  # as _init ends: __post_init__, then the lock
                        if cls._post_init is not None:
                            cls._post_init(self)
                        if cls._frozen and lock is None:
                            self.lock_()
                    return
        self._init(args, kwargs, batch_size, device, names, lock)

    def _init(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        batch_size: Any,
        device: Any,
        names: Any,
        lock: bool | None,
    ) -> None:
        """``__init__``'s general path: keywords, defaults, casting, shadowed keywords."""
        cls = type(self)
        if cls._shadowed:  # fields named batch_size/device/names take those keywords
            given = {"batch_size": batch_size, "device": device, "names": names}
            for name in cls._shadowed:
                if given[name] is not None:
                    kwargs[name] = given[name]
            batch_size = None if "batch_size" in cls._shadowed else batch_size
            device = None if "device" in cls._shadowed else device
            names = None if "names" in cls._shadowed else names
        fields = cls._fields
        if (  # the common [N], checked here: no call, no message built
            type(batch_size) is list
            and len(batch_size) == 1
            and type(b0 := batch_size[0]) is int
            and b0 >= 0
        ):
            size = _SIZES.get(b0) or torch.Size(batch_size)
        else:
            size = as_batch_size(batch_size, f"{cls.__name__}.__init__")
        dev = None if device is None else as_device(device)
        if _DYNAMO():  # traced: object.__setattr__, as in _new_unsafe
            _set_slots_traced(self, {}, size, dev, None)
        else:  # the slot descriptors directly: no per-attribute __setattr__ hop
            _SET_BS(self, size)
            _SET_DEVICE(self, dev)
            _SET_NAMES(self, None)
            _SET_LOCKED(self, False)
            _SET_STORE(self, {})
        if cls._custom_setattr:  # the class's own __setattr__ sees every field
            for key, value in _collect(cls, args, kwargs):
                setattr(self, key, value)
        elif kwargs or len(args) != cls._n_fast_args:
            self._fill_pairs(_collect(cls, args, kwargs))
        else:  # every field given positionally (plain leaves took __init__'s lean path)
            self._fill_pairs(zip(fields, args, strict=True))
        if names is not None:
            TensorDict.names.__set__(self, names)  # type: ignore[attr-defined]
        if cls._post_init is not None:
            cls._post_init(self)
        if cls._frozen if lock is None else lock:
            self.lock_()

    def _fill_one(self, key: Any, value: Any) -> None:
        if value is None:  # an unset optional field holds no entry
            return
        if type(value) is torch.Tensor and not type(self)._autocast:
            super()._fill_one(key, value)
        else:  # the casting rules, through _convert
            self._set_str(key, value, f"{type(self).__name__}.__init__")

    def _set_str(self, key: str, value: Any, call: str) -> None:
        # TensorDict._set_str, where None unsets a field (set, update, x[key] = None), as
        # assigning the attribute does and upstream (it was stored as NonTensorData(None))
        if self._is_locked:
            self._check_unlocked(call, key)
        if value is None and key in type(self)._field_set:
            self._tensordict.pop(key, None)
            return
        self._tensordict[key] = self._convert(value, key, call)

    def _unset_field(self, key: str) -> bool:
        return key in type(self)._field_set  # reads as None, as the attribute does

    def _convert(self, value: Any, key: str, call: str) -> Any:
        cls = type(self)
        if key not in cls._field_set:
            raise NotAFieldError(
                f"{call}: {key!r} is not a field of {cls.__name__}; fields are "
                f"{list(cls._fields)} (Cannot set the attribute {key!r})"
            )
        if type(value) is not torch.Tensor or cls._autocast:
            value = cast_value(cls, key, value, self._batch_size, self._device)
        return super()._convert(value, key, call)

    @classmethod
    def _field_hints(cls) -> dict[str, tuple[Any, ...]]:
        hints = cls.__dict__.get("_hints")
        if hints is None:  # resolved on first use: fields may name classes defined later
            hints, cls._hint_unions = resolve_hints(cls, cls._annotations)
            cls._hints = hints
        return hints

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The dataclass fields of this class, as ``dataclasses.fields`` gives them.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class P(TensorClass):
        ...     x: torch.Tensor
        ...     tag: str = "a"
        >>> [f.name for f in P.fields()]
        ['x', 'tag']
        """
        return dataclasses.fields(cls)  # type: ignore[arg-type]

    @classmethod
    def from_dict(  # type: ignore[override]
        cls,
        input_dict: Mapping[str, Any],
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        *,
        auto_batch_size: bool | None = None,
        names: Any = None,
    ) -> Any:
        """An instance from a mapping of field names to values (nested dicts follow the
        fields' annotations). Without ``batch_size``, ``auto_batch_size=True`` or
        ``batch_dims`` infer the common leading shape; otherwise the batch is empty.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class P(TensorClass):
        ...     x: torch.Tensor
        >>> P.from_dict({"x": torch.zeros(3, 2)}, auto_batch_size=True).batch_size
        torch.Size([3, 2])
        """
        call = f"{cls.__name__}.from_dict"
        if not isinstance(input_dict, Mapping):
            raise TypeError(f"{call}: expected a mapping, got {type(input_dict).__name__}")
        if batch_size is not None and (auto_batch_size or batch_dims is not None):
            raise ValueError(f"{call}: pass batch_size or auto_batch_size/batch_dims, not both")
        infer = batch_size is None and (auto_batch_size or batch_dims is not None)
        unknown = [k for k in input_dict.keys() if k not in cls._field_set]  # noqa: SIM118
        if unknown:  # (as from_tensordict, and upstream)
            raise ValueError(
                f"{call}: keys {unknown} are not fields of {cls.__name__}; fields are "
                f"{list(cls._fields)}"
            )
        values = {name: None for name in cls._fields if name not in cls._defaults}
        values.update(input_dict)  # absent fields without a default stay unset (None)
        for key, value in input_dict.items():  # as from_tensordict
            if type(value) is TensorDict and key in cls._field_set:
                values[key] = _as_field_class(cls, key, value)
        out = cls(**values, batch_size=None if infer else batch_size, device=device)
        if infer:
            plain: dict[Any, Any] = out.to_dict()
            inferred = TensorDict.from_dict(plain, batch_dims=batch_dims, auto_batch_size=True)
            _adopt_batch_sizes(out, inferred)
        if names is not None:
            TensorDict.names.__set__(out, names)  # type: ignore[attr-defined]
        return out

    @classmethod
    def from_tensordict(
        cls, tensordict: Any, non_tensordict: Mapping[str, Any] | None = None
    ) -> Any:
        """An instance over the entries of ``tensordict`` (shared, not copied); runs
        ``__post_init__``, as any construction from outside data.

        >>> import torch
        >>> from tensordict import TensorClass, TensorDict
        >>> class P(TensorClass):
        ...     x: torch.Tensor
        >>> P.from_tensordict(TensorDict({"x": torch.zeros(2)}, [2])).x
        tensor([0., 0.])
        """
        return cls._over_tensordict(tensordict, non_tensordict, "from_tensordict", True)

    @classmethod
    def _from_tensordict(
        cls,
        tensordict: Any,
        non_tensordict: Mapping[str, Any] | None = None,
        safe: bool = True,
        *,
        rebuild: bool = True,
    ) -> Any:
        """Upstream's private spelling of :meth:`from_tensordict`, which code written for
        upstream calls. ``safe`` is accepted (the input is checked either way);
        ``__post_init__`` runs, except for a class made with
        ``skip_post_init_on_rebuild=True`` when ``rebuild`` is true, as upstream.

        >>> import torch
        >>> from tensordict import TensorClass, TensorDict
        >>> class P(TensorClass):
        ...     x: torch.Tensor
        ...     def __post_init__(self):
        ...         self.x = self.x + 1
        >>> P._from_tensordict(TensorDict({"x": torch.zeros(2)}, [2])).x
        tensor([1., 1.])
        """
        post_init = not (rebuild and cls._skip_post_init_on_rebuild)
        return cls._over_tensordict(tensordict, non_tensordict, "_from_tensordict", post_init)

    @classmethod
    def _over_tensordict(
        cls,
        tensordict: Any,
        non_tensordict: Mapping[str, Any] | None,
        name: str,
        post_init: bool,
    ) -> Any:
        """:meth:`from_tensordict`, called ``name`` in errors, with or without
        ``__post_init__``."""
        call = f"{cls.__name__}.{name}"
        if not isinstance(tensordict, TensorDict):
            parts = (
                tensordict._stack_parts() if isinstance(tensordict, CollectionPrimitives) else None
            )
            if parts is None:  # (a mapping, a PersistentTensorDict: nothing to share)
                raise TypeError(
                    f"{call}: expected a TensorDict or a lazy stack of them (shared without "
                    f"a copy), got {type(tensordict).__name__}; densify it first "
                    "(td.to_tensordict()), which copies"
                )
            # a lazy stack: a lazy stack of instances, one per member
            members = [cls._over_tensordict(m, non_tensordict, name, post_init) for m in parts[1]]
            return type(tensordict)(*members, stack_dim=parts[0])
        entries = dict(tensordict._tensordict)
        unknown = [k for k in (*entries, *(non_tensordict or ())) if k not in cls._field_set]
        if unknown:  # (they would be entries no field reads)
            raise ValueError(
                f"{call}: keys {unknown} are not fields of {cls.__name__}; fields are "
                f"{list(cls._fields)}"
            )
        for key, value in entries.items():
            if type(value) is TensorDict:
                entries[key] = _as_field_class(cls, key, value)
        out = cls._new_unsafe(
            entries,
            tensordict._batch_size,
            tensordict._device,
            tensordict._names,
        )
        for key, value in (non_tensordict or {}).items():
            setattr(out, key, value)
        if post_init and cls._post_init is not None:  # (outside data, not a rebuild)
            cls._post_init(out)
        return out

    @classmethod
    def _new_unsafe(
        cls,
        entries: dict[str, Any],
        batch_size: torch.Size,
        device: torch.device | None,
        names: list[str | None] | None,
    ) -> Any:
        td = cls.__new__(cls)
        if _DYNAMO():  # dynamo traces object.__setattr__, not a slot's __set__
            _set_slots_traced(td, entries, batch_size, device, names)
            return td
        _SET_STORE(td, entries)
        _SET_BS(td, batch_size)
        _SET_DEVICE(td, device)
        _SET_NAMES(td, names)
        _SET_LOCKED(td, False)
        return td

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        if name in cls._field_set:
            _set_field(self, name, value)
        elif name == "device":
            raise RuntimeError(
                f"{cls.__name__}.device: device cannot be set using tensorclass.device = device; "
                "use .to(device) (or clear_device_())"
            )
        elif cls._frozen and not name.startswith("_"):  # batch_size, names, ... (as upstream)
            raise dataclasses.FrozenInstanceError(
                f"{cls.__name__}.{name}: cannot assign to a frozen tensorclass"
            )
        elif name in _SLOTS or name.startswith("_") or _class_attr(cls, name):
            # storage slots, properties such as batch_size, and ordinary attributes
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(
                f"{cls.__name__} has no field {name!r}; fields are {list(cls._fields)} "
                f"(Cannot set the attribute {name!r})"
            )

    def __setitem__(self, index: Any, value: Any) -> None:
        if (
            isinstance(value, TensorClass)
            and type(value) is not type(self)
            and value._field_set != type(self)._field_set
        ):
            raise ValueError(
                f"{type(self).__name__}.__setitem__: __setitem__ is only allowed for same-class "
                f"or compatible class (same fields) assignment; got {type(value).__name__} with "
                f"fields {list(value._fields)}, expected {list(type(self)._fields)}"
            )
        if isinstance(index, str) or (
            type(index) is tuple and index and isinstance(index[0], str)
        ):  # a key: written as set() writes it (a field, cast by the annotation)
            call = f"{type(self).__name__}[]="
            self._set_path(key_path(index, call), value, call)
            return
        super().__setitem__(index, value)

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> Any:
        """``TensorDict.flatten_keys``, refused when a field holds a nested collection:
        ``"pose.q"`` would not be a field (as upstream). Flatten ``x.to_tensordict()``."""
        nested = [k for k, v in self._tensordict.items() if isinstance(v, CollectionPrimitives)]
        if nested:
            inner = next(iter(self._tensordict[nested[0]].keys()), "...")
            raise ValueError(
                f"{type(self).__name__}.flatten_keys: the fields {nested} hold nested "
                f"collections, whose flattened keys (such as "
                f"{nested[0] + separator + str(inner)!r}) are not fields of "
                f"{type(self).__name__}; flatten x.to_tensordict() instead"
            )
        return super().flatten_keys(separator, inplace, is_leaf)

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Any:
        """``TensorDict.unflatten_keys``, refused for a field whose name holds
        ``separator``: its parts would not be fields (as upstream)."""
        split = [k for k in self._tensordict if separator in k]
        if split:
            raise ValueError(
                f"{type(self).__name__}.unflatten_keys: the fields {split} hold the separator "
                f"{separator!r}; their parts would not be fields of {type(self).__name__}"
            )
        return super().unflatten_keys(separator, inplace)

    def __repr__(self) -> str:
        return tc_repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        _, args = super().__reduce__()
        return (_rebuild, (type(self), args))


_PARAMETRIZED: dict[tuple[type, tuple[str, ...]], type] = {}

# TensorDict's alternative constructors, which on a tensorclass give an instance of it (as
# upstream): the TensorDict they build becomes the instance's store. (``stack``, ``cat``
# and ``from_dict`` already build the class; a lazy stack of instances stays a lazy stack.)
_CONSTRUCTORS = (
    "from_any",
    "from_arrow",
    "from_consolidated",
    "from_csv",
    "from_h5",
    "from_json",
    "from_list",
    "from_module",
    "from_modules",
    "from_namedtuple",
    "from_pandas",
    "from_parquet",
    "from_pytree",
    "from_remote_init",
    "from_safetensors",
    "from_struct_array",
    "from_tuple",
    "from_zarr",
    "fromkeys",
    "load",
    "load_memmap",
)


def _constructor(name: str) -> Any:
    build = getattr(TensorDict, name)

    def construct(cls: Any, *args: Any, **kwargs: Any) -> Any:
        out = build(*args, **kwargs)
        return cls.from_tensordict(out) if type(out) is TensorDict else out

    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"``TensorDict.{name}``, giving an instance of this tensorclass."
    return classmethod(construct)


for _name in _CONSTRUCTORS:
    setattr(TensorClass, _name, _constructor(_name))


def _as_field_class(cls: Any, key: str, value: TensorDict) -> Any:
    """``value`` (a plain TensorDict) as an instance of the tensorclass that field ``key``
    is annotated with (``X`` or ``Optional[X]``), sharing its entries, when its keys are
    fields of that class (as upstream's ``from_tensordict``/``from_dict``); else itself."""
    hints = cls._field_hints()[key]
    nested: Any = hints[0] if len(hints) == 1 else None
    if getattr(nested, "_is_tensorclass", False) and nested._field_set.issuperset(
        value._tensordict
    ):
        return nested.from_tensordict(value)
    return value


def _adopt_batch_sizes(target: Any, source: Any) -> None:
    """Give ``target`` and its nested levels the batch sizes of ``source``'s, deepest first."""
    for key, value in target._tensordict.items():
        theirs = source._tensordict.get(key)
        if hasattr(value, "_tensordict") and hasattr(theirs, "_tensordict"):
            _adopt_batch_sizes(value, theirs)
    TensorDict.batch_size.__set__(target, source._batch_size)  # type: ignore[attr-defined]


def _collect(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """(field, value) pairs from positional and keyword arguments and the defaults."""
    fields, positional = cls._fields, cls._positional
    call = f"{cls.__name__}.__init__"
    if len(args) > len(positional):
        raise TypeError(
            f"{call}: takes {len(positional) + 1} positional arguments but {len(args) + 1} "
            f"were given (self and the fields {list(positional)}; the others are keyword-only)"
            if len(positional) < len(fields)
            else f"{call}: takes {len(fields) + 1} positional arguments but {len(args) + 1} "
            f"were given (self and the fields {list(fields)})"
        )
    values = dict(zip(positional, args, strict=False))
    for key, value in kwargs.items():
        if key not in cls._field_set:
            raise UnexpectedFieldError(
                f"{call}: unexpected field {key!r}; fields are {list(fields)}"
            )
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
        n = len(missing)
        raise TypeError(
            f"{call}: missing {n} required positional argument{'s' if n > 1 else ''}: "
            + ", ".join(repr(m) for m in missing)
        )
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


def _set_slots_traced(
    td: Any, entries: dict[str, Any], batch_size: torch.Size, device: Any, names: Any
) -> None:
    """An instance's storage slots set as dynamo can trace it (``object.__setattr__``)."""
    for name, value in (
        ("_tensordict", entries),
        ("_batch_size", batch_size),
        ("_device", device),
        ("_names", names),
        ("_is_locked", False),
    ):
        object.__setattr__(td, name, value)


def _reserved() -> frozenset[str]:
    return frozenset(dir(TensorClass)) - {"data"}


def _setup(
    cls: Any,
    *,
    autocast: bool,
    nocast: bool,
    frozen: bool,
    shadow: bool,
    tensor_only: bool,
    kw_only: bool = False,
    skip_post_init_on_rebuild: bool = False,
) -> None:
    """Make ``cls`` a dataclass (for its fields) and give each field its property."""
    if autocast and nocast:
        raise TypeError(f"tensorclass {cls.__name__}: autocast and nocast exclude each other")
    if tensor_only and (autocast or nocast):
        raise TypeError(f"tensorclass {cls.__name__}: tensor_only excludes autocast and nocast")
    # a field redeclared without a value keeps the base's default, as in dataclasses
    own = inspect.get_annotations(cls)
    for name in own:
        if name not in cls.__dict__:
            for base in cls.__mro__[1:]:
                spec = getattr(base, "__dataclass_fields__", {}).get(name)
                if spec is not None:
                    setattr(cls, name, copy.copy(spec))
                    break
    dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)(cls)
    specs = dataclasses.fields(cls)
    fields = tuple(f.name for f in specs)
    if not shadow:
        clash = sorted(set(fields) & _reserved())
        if clash:
            raise AttributeError(
                f"tensorclass {cls.__name__}: Attribute name {clash[0]} can't be used with "
                f"@tensorclass: field name(s) {clash} are TensorDict attributes; pass "
                "shadow=True (@tensorclass(shadow=True) or TensorClass['shadow']) to allow them"
            )
    defaults: dict[str, Any] = {}
    annotations: dict[str, Any] = {}
    for spec in specs:
        if spec.default is not _MISSING:
            defaults[spec.name] = spec.default
        elif spec.default_factory is not _MISSING:
            defaults[spec.name] = _Factory(spec.default_factory)  # type: ignore[arg-type]
        annotations[spec.name] = spec.type
        setattr(cls, spec.name, _field_property(spec.name))
    cls._fields = fields
    cls._pack = _packer(fields)
    cls._field_set = frozenset(fields)
    cls.__expected_keys__ = set(fields)
    cls._defaults = defaults
    cls._annotations = annotations
    cls._hints = None
    cls._post_init = getattr(cls, "__post_init__", None)
    cls._custom_setattr = cls.__setattr__ is not TensorClass.__setattr__
    cls._shadowed = tuple(n for n in _SHADOWABLE if n in fields)
    cls._autocast = autocast
    cls._nocast = nocast
    cls._frozen = frozen
    # autocast casts tensors too (to int, float, ... fields): the general path
    cls._plain_init = not cls._shadowed and not cls._custom_setattr and not autocast
    cls._init_tail = cls._post_init is not None or frozen
    cls._shadow = shadow
    cls._tensor_only = tensor_only
    cls._kw_only = kw_only
    cls._skip_post_init_on_rebuild = skip_post_init_on_rebuild
    own_fields = set(own)
    keyword = {f for f in fields if f in own_fields} if kw_only else set()
    keyword |= {f for f in fields if f in getattr(cls, "_keyword_fields", ()) and f not in own}
    cls._keyword_fields = frozenset(keyword)
    cls._positional = tuple(f for f in fields if f not in keyword)
    cls._n_fast_args = len(fields) if not keyword else -1  # positional fast path: all fields
    params = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY
            if f.name in keyword
            else inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=defaults.get(f.name, inspect.Parameter.empty),
            annotation=f.type,
        )
        for f in sorted(specs, key=lambda f: f.name in keyword)  # keyword-only ones last
    ]
    params += [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None)
        for n in _SHADOWABLE
        if n not in fields
    ]
    cls.__signature__ = inspect.Signature(params, __validate_parameters__=False)
    # frozen instances hash by identity (dict keys, sets); others are unhashable
    cls.__hash__ = object.__hash__ if frozen else None
    if tensor_only:
        check_tensor_only(cls, cls._field_hints())
        cls._hints = None  # resolved again on first use, when later names exist
    register_type(f"tensorclass:{getattr(cls, '_type_name', None) or cls.__qualname__}", cls)


def _packer(fields: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function of one positional value per field returning ``{field: value}``.

    Written as a dict display (as dataclasses write their ``__init__``): 2x faster than
    ``dict(zip(fields, values))`` on the constructor's hot path. The field names enter the
    source only as string literals (``repr``), the parameters are ``_0``, ``_1``, ...
    """
    params = [f"_{i}" for i in range(len(fields))]
    items = ", ".join(f"{name!r}: {p}" for name, p in zip(fields, params, strict=True))
    namespace: dict[str, Any] = {}
    exec(f"def pack({', '.join(params)}):\n    return {{{items}}}\n", namespace)
    pack: Callable[..., dict[str, Any]] = namespace["pack"]
    return pack


def _rebuild(cls: Any, args: tuple[Any, ...]) -> Any:
    from tensordict._state import _from_plain

    td = _from_plain(TensorDict, *args[1:])  # args[0] is the class, rebuilt below
    out = cls._new_unsafe(td._tensordict, td._batch_size, td._device, td._names)
    if td._is_locked:
        out.lock_()
    return out


@typing.overload
def tensorclass(cls: T, /) -> T: ...
@typing.overload
def tensorclass(
    cls: None = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    skip_post_init_on_rebuild: bool = False,
    cast_filter: Callable[[tuple[str, ...], Tensor], bool] | None = None,
    kw_only: bool = False,
) -> Callable[[T], T]: ...


@dataclass_transform()
def tensorclass(
    cls: Any = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    skip_post_init_on_rebuild: bool = False,
    cast_filter: Callable[[tuple[str, ...], Tensor], bool] | None = None,
    kw_only: bool = False,
) -> Any:
    """Turn a class with annotated fields into a tensorclass (a TensorDict with fields).

    Options: ``autocast`` casts values to the field's annotation (``int``, ``float``,
    ``bool``, ``str``, ``np.ndarray``, tensors, tensorclasses from dicts); ``nocast``
    stores numbers and arrays as they are instead of as tensors; ``frozen`` refuses
    assignments and locks the data; ``shadow`` allows field names that are TensorDict
    attributes (``batch_size``, ``device``, ...); ``tensor_only`` casts every value to a
    tensor. ``autocast`` and ``nocast`` exclude each other and ``tensor_only``.
    ``kw_only`` makes the class's own fields keyword-only (as dataclasses'); ``cast_filter``
    (``fn(key_tuple, tensor) -> bool``, inherited) is the default filter of ``to(dtype)``
    and the dtype shorthands on instances. ``__post_init__`` runs when an instance is
    constructed (``__init__``, ``from_dict``, ``from_tensordict``, loading), never when an
    operation rebuilds one (indexing, ``clone``, ``to``, ``stack``, ...), which is what
    upstream's ``skip_post_init_on_rebuild=True`` does; that flag is accepted, and its
    default (upstream runs ``__post_init__`` on rebuilds) is not followed: see
    docs/tensorclass.md.

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
        if issubclass(klass, TensorClass):  # a tensorclass's subclass: _setup ran on it
            # its fields are properties now; their declarations (defaults) come back
            specs = klass.__dict__.get("__dataclass_fields__", {})
            for name in inspect.get_annotations(klass):
                if name in specs and isinstance(namespace.get(name), property):
                    namespace[name] = copy.copy(specs[name])
        namespace["__qualname__"] = klass.__qualname__  # pickle finds nested classes by it
        bases = tuple(b for b in klass.__bases__ if b is not object)
        if not any(issubclass(b, TensorClass) for b in bases):
            bases = (*bases, TensorClass)
        return type(
            klass.__name__,
            bases,
            namespace,
            autocast=autocast,
            nocast=nocast,
            frozen=frozen,
            shadow=shadow,
            tensor_only=tensor_only,
            kw_only=kw_only,
            skip_post_init_on_rebuild=skip_post_init_on_rebuild,
            **({} if cast_filter is None else {"cast_filter": cast_filter}),
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
