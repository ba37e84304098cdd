"""``TypedTensorDict``: a TensorDict whose subclasses declare their entries as annotations.

A subclass is a ``TensorDict`` subclass: every operation is inherited and builds its
result through ``type(self)._new_unsafe``, so ``clone``, ``to``, indexing, reshaping,
``torch.stack`` ... all return the subclass. This module only adds what the declaration
gives: the fields collected from the annotations (merged along the class's bases), the
checked keyword constructor, one property per field, and ``from_tensordict``.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from tensordict._base import TensorDictBase
from tensordict._batch import as_batch_size
from tensordict._format import register_type
from tensordict._lazy_fields import TypedMeta
from tensordict._mapping import is_plain_mapping
from tensordict._state import _from_plain
from tensordict._td import TensorDict

if typing.TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

# a string annotation (``from __future__ import annotations``) wrapped in one of these
_STRING_WRAPPER = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*(NotRequired|Required|ClassVar)\s*\[")


# frozen: locked once built; shadow: fields may hide TensorDict attributes; the last three
# are recorded on the class and change nothing (as upstream's TypedTensorDict)
_OPTIONS = ("frozen", "shadow", "autocast", "nocast", "tensor_only")
_PARAMETRIZED: dict[tuple[type, tuple[str, ...]], type] = {}


def _kind(annotation: Any) -> str:
    """``"required"``, ``"optional"`` (``NotRequired[...]``) or ``"classvar"``."""
    if isinstance(annotation, str):
        match = _STRING_WRAPPER.match(annotation)
        wrapper = match.group(1) if match else None
    else:
        origin = typing.get_origin(annotation)
        wrapper = None if origin is None else getattr(origin, "_name", None)
        if annotation is ClassVar:
            wrapper = "ClassVar"
    if wrapper == "NotRequired":
        return "optional"
    if wrapper == "ClassVar":
        return "classvar"
    return "required"


def _field_property(name: str) -> property:
    """``obj.name`` reads the entry; ``obj.name = v`` sets it like ``obj[name] = v``."""

    def getter(self: TypedTensorDict) -> Any:
        try:
            value = self._tensordict[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__}.{name}: the field {name!r} is declared but not set"
            ) from None
        return value if type(value) is Tensor else self[name]  # a non-tensor: its value

    def setter(self: TypedTensorDict, value: Any) -> None:
        if type(value) is Tensor and self._device is None and not self._is_locked:
            bs = self._batch_size  # the common case, checked inline as TensorDict[]= does
            if value.shape[: len(bs)] == bs:
                self._tensordict[name] = value
                return
        self._set_str(name, value, f"{type(self).__name__}.{name}")

    def deleter(self: TypedTensorDict) -> None:
        del self[name]

    return property(getter, setter, deleter, doc=f"The entry {name!r}.")


def _unpickle(cls: type[TypedTensorDict], args: tuple[Any, ...]) -> TypedTensorDict:
    """Rebuild a pickled TypedTensorDict: the entries as a TensorDict, then retyped."""
    td = _from_plain(TensorDict, *args[1:])  # args[0] is the class, retyped below
    return cls.from_tensordict(td, check=False)


def _merge_source(
    cls: type[TypedTensorDict], source: Any, fields: dict[str, Any]
) -> dict[str, Any]:
    """The fields given as a mapping and by keyword, together."""
    call = f"{cls.__name__}.__init__"
    if not isinstance(source, Mapping):
        raise TypeError(f"{call}: source must be a mapping of fields, got {type(source).__name__}")
    twice = [key for key in fields if key in source]
    if twice:
        raise TypeError(f"{call}: field(s) {twice} given both in source and by keyword")
    return {**source, **fields}


def _field_error(cls: type[TypedTensorDict], keys: typing.KeysView[str]) -> typing.NoReturn:
    """The TypeError for missing required fields, or else for undeclared ones."""
    call = f"{cls.__name__}.__init__"
    missing = [name for name in cls._required if name not in keys]
    if missing:
        raise TypeError(
            f"{call}: missing required field(s) {missing}; required: {list(cls._required)}"
        )
    unknown = [key for key in keys if key not in cls.__expected_keys__]
    raise TypeError(f"{call}: unexpected field(s) {unknown}; fields are {list(cls._fields)}")


def _check_required(cls: type[TypedTensorDict], call: str, keys: list[str]) -> None:
    """The TypeError of ``from_tensordict`` for a source lacking required fields."""
    missing = [name for name in cls._required if name not in keys]
    if missing:
        raise TypeError(
            f"{call}: missing required field(s) {missing}; the TensorDict has keys {keys}"
        )


class TypedTensorDict(TensorDict, metaclass=TypedMeta):
    """A TensorDict whose subclasses declare their entries as class annotations.

    ``eta: Tensor`` declares a required field, ``noise: NotRequired[Tensor]`` an optional
    one; a subclass inherits its parents' fields. Construction takes the fields by keyword
    (with ``batch_size``, ``device``, ``names``, ``lock``) and refuses a missing required
    field or an undeclared one; ``obj.eta`` reads the entry and ``obj.eta = t`` sets it as
    ``obj["eta"] = t`` does. Every TensorDict operation works and returns the subclass.

    >>> import torch
    >>> from torch import Tensor
    >>> from tensordict import TypedTensorDict
    >>> class State(TypedTensorDict):
    ...     eta: Tensor
    ...     X: Tensor
    >>> state = State(eta=torch.zeros(5, 3), X=torch.ones(5, 4), batch_size=[5])
    >>> state.eta.shape, type(state[:2]).__name__
    (torch.Size([5, 3]), 'State')
    """

    __slots__ = ()
    _abstract = False

    __expected_keys__: ClassVar[frozenset[str]] = frozenset()
    __required_keys__: ClassVar[frozenset[str]] = frozenset()
    __optional_keys__: ClassVar[frozenset[str]] = frozenset()
    _fields: ClassVar[tuple[str, ...]] = ()
    _required: ClassVar[tuple[str, ...]] = ()
    _frozen: ClassVar[bool] = False
    _shadow: ClassVar[bool] = False
    _autocast: ClassVar[bool] = False
    _nocast: ClassVar[bool] = False
    _tensor_only: ClassVar[bool] = False

    def __class_getitem__(cls, item: str | tuple[str, ...]) -> Any:
        """A subclass with the named options on, inherited by its subclasses.

        ``"frozen"``: every instance is locked once built. ``"shadow"``: fields may take
        the name of a TensorDict attribute (``data``, ``clone``, ...), which the field then
        hides on that class, so operations needing that attribute no longer work there.
        ``"autocast"``, ``"nocast"``, ``"tensor_only"`` are recorded and change nothing, as
        upstream. ``class C(Base, frozen=False)`` turns an inherited option off.

        >>> import torch
        >>> from torch import Tensor
        >>> from tensordict import TypedTensorDict
        >>> class Fixed(TypedTensorDict["frozen"]):
        ...     x: Tensor
        >>> Fixed(x=torch.zeros(2), batch_size=[2]).is_locked
        True
        """
        items = item if isinstance(item, tuple) else (item,)
        for option in items:
            if option not in _OPTIONS:
                raise ValueError(
                    f"{cls.__name__}[...]: Unknown TypedTensorDict option {option!r}; options "
                    f"are {list(_OPTIONS)}"
                )
        key = (cls, tuple(sorted(set(items))))
        base = _PARAMETRIZED.get(key)
        if base is None:
            name = f"{cls.__name__}_{'_'.join(key[1])}"
            namespace = {"__module__": cls.__module__, "__qualname__": name}
            base = _PARAMETRIZED[key] = type(cls)(  # type: ignore[misc]
                name, (cls,), namespace, **dict.fromkeys(key[1], True)
            )
        return base

    def __init_subclass__(
        cls,
        frozen: bool | None = None,
        shadow: bool | None = None,
        autocast: bool | None = None,
        nocast: bool | None = None,
        tensor_only: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        options = (frozen, shadow, autocast, nocast, tensor_only)
        for option, value in zip(_OPTIONS, options, strict=True):
            if value is not None:
                setattr(cls, f"_{option}", bool(value))
        kinds: dict[str, str] = {}
        for base in reversed(cls.__mro__):
            if base is TypedTensorDict or not issubclass(base, TypedTensorDict):
                continue
            for name, annotation in inspect.get_annotations(base).items():
                if not name.startswith("_"):
                    kinds[name] = _kind(annotation)
        fields = tuple(name for name, kind in kinds.items() if kind != "classvar")
        shadowing = [name for name in fields if hasattr(TensorDict, name)]
        if shadowing and not cls._shadow:
            raise AttributeError(
                f"{cls.__name__}: field(s) {shadowing}: each shadows a TensorDictBase attribute "
                "of the same name; rename them, or derive from TypedTensorDict['shadow'] to "
                "let the fields hide those attributes"
            )
        cls._fields = fields
        cls._required = tuple(name for name in fields if kinds[name] == "required")
        cls.__expected_keys__ = frozenset(fields)
        cls.__required_keys__ = frozenset(cls._required)
        cls.__optional_keys__ = frozenset(n for n in fields if kinds[n] == "optional")
        for name in fields:
            if not isinstance(cls.__dict__.get(name), property):
                setattr(cls, name, _field_property(name))
        register_type(f"typed:{cls.__module__}.{cls.__qualname__}", cls)

    def __init__(
        self,
        source: Mapping[str, Any] | None = None,
        *,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        lock: bool = False,
        **fields: Any,
    ) -> None:
        cls = type(self)
        if source is not None:
            fields = _merge_source(cls, source, fields)
        keys = fields.keys()
        if not (keys >= cls.__required_keys__ and keys <= cls.__expected_keys__):
            _field_error(cls, keys)
        if type(batch_size) is not torch.Size and not (  # [N]: checked by TensorDict inline
            type(batch_size) is list
            and len(batch_size) == 1
            and type(batch_size[0]) is int
            and batch_size[0] >= 0
        ):
            batch_size = as_batch_size(batch_size, f"{cls.__name__}.__init__")
        super().__init__(
            fields, batch_size=batch_size, device=device, names=names, lock=lock or cls._frozen
        )

    @classmethod
    def from_tensordict(cls, td: TensorDictBase, *, check: bool = True) -> Self:
        """``td`` seen as this class, without copying: both share one dict of entries.

        Setting or deleting an entry through either is seen by the other; the batch size,
        names and lock are copied (a later change of one does not reach the other). With
        ``check`` (the default) every required field must be an entry of ``td``; keys that
        are not fields are kept.

        >>> import torch
        >>> from torch import Tensor
        >>> from tensordict import TensorDict, TypedTensorDict
        >>> class State(TypedTensorDict):
        ...     eta: Tensor
        >>> td = TensorDict(eta=torch.zeros(3), batch_size=[3])
        >>> state = State.from_tensordict(td)
        >>> state.eta = torch.ones(3)
        >>> td["eta"]
        tensor([1., 1., 1.])
        """
        call = f"{cls.__name__}.from_tensordict"
        parts = td._stack_parts() if isinstance(td, TensorDictBase) else None
        if parts is not None:  # a lazy stack: a lazy stack of instances, one per member
            if check:
                _check_required(cls, call, list(td.keys()))
            members = [cls.from_tensordict(m, check=False) for m in parts[1]]
            stack_cls: Any = type(td)
            return typing.cast("Self", stack_cls(*members, stack_dim=parts[0]))
        if not isinstance(td, TensorDict):
            raise TypeError(
                f"{call}: expected a TensorDict or a lazy stack of them (shared without a "
                f"copy), got {type(td).__name__}; densify it first (td.to_tensordict()), "
                "which copies"
            )
        if check:
            _check_required(cls, call, list(td._tensordict))
        out = typing.cast(
            "Self", cls._new_unsafe(td._tensordict, td._batch_size, td._device, td._names)
        )
        if td._is_locked:
            out.lock_()
        return out

    def _fill_one(self, key: Any, value: Any) -> None:
        # the entries TensorDict.__init__ does not store itself: checked under our name
        self._set_str(key, value, f"{type(self).__name__}.__init__")

    # nested mappings are stored as plain TensorDicts, not as this class

    def _convert(self, value: Any, key: str, call: str) -> Any:
        if is_plain_mapping(value):
            value = TensorDict(
                value, batch_size=self._batch_size, device=self._device, names=self._names
            )
        return super()._convert(value, key, call)

    def _subtd(self, part: str, call: str, create: bool) -> TensorDict:
        if create and part not in self._tensordict:
            self._check_unlocked(call, part)
            node = TensorDict._new_unsafe({}, self._batch_size, self._device, self._names)
            self._tensordict[part] = node
            return node
        return super()._subtd(part, call, create)

    def __reduce__(self) -> tuple[Any, ...]:
        _, args = super().__reduce__()
        return (_unpickle, (type(self), args))
