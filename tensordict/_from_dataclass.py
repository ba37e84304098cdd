"""from_dataclass: a tensorclass type from a dataclass type, or an instance from an instance."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from tensordict._tensorclass import TensorClass, is_tensorclass


def _tensorclass_from(source: type, name: str, flags: dict[str, bool]) -> type[TensorClass]:
    """A TensorClass subclass with the fields (names, annotations, defaults) of ``source``."""
    try:
        hints = typing.get_type_hints(source)
    except (NameError, TypeError):  # annotations that do not resolve here: keep them raw
        hints = {}
    namespace: dict[str, Any] = {
        "__module__": source.__module__,
        "__qualname__": name,
        "__annotations__": {},
    }
    for spec in dataclasses.fields(source):
        namespace["__annotations__"][spec.name] = hints.get(spec.name, spec.type)
        if spec.default is not dataclasses.MISSING:
            namespace[spec.name] = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            namespace[spec.name] = dataclasses.field(default_factory=spec.default_factory)
    return type(name, (TensorClass,), namespace, **flags)


def from_dataclass(
    obj: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Any = None,
    frozen: bool = False,
    autocast: bool = False,
    nocast: bool = False,
    inplace: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    device: Any = None,
) -> Any:
    """A tensorclass from a dataclass: a type from a type, an instance from an instance.

    Given a dataclass type, returns a new tensorclass type with its fields (named
    ``<Name>_tc``; with ``inplace=True`` it keeps the name, but it is always a new class,
    a tensorclass being a TensorDict subclass). Given an instance, returns an instance
    of that new type (or of ``dest_cls``) holding the instance's values; ``batch_size``,
    ``device``, ``auto_batch_size`` and ``batch_dims`` set its batch. The option
    keywords are those of :func:`tensorclass`. A tensorclass type is returned as is.

    >>> import dataclasses, torch
    >>> from tensordict.tensorclass import from_dataclass
    >>> @dataclasses.dataclass
    ... class Sample:
    ...     x: torch.Tensor
    ...     label: str
    >>> tc = from_dataclass(Sample(torch.zeros(3, 2), "cat"), auto_batch_size=True)
    >>> type(tc).__name__, tc.batch_size, tc.label
    ('Sample_tc', torch.Size([3, 2]), 'cat')
    >>> from_dataclass(Sample, autocast=True)._autocast
    True
    """
    flags = {
        "frozen": frozen,
        "autocast": autocast,
        "nocast": nocast,
        "shadow": shadow,
        "tensor_only": tensor_only,
    }
    if isinstance(obj, type):
        if is_tensorclass(obj):
            return obj
        if not dataclasses.is_dataclass(obj):
            raise TypeError(f"from_dataclass: expected a dataclass or an instance, got {obj!r}")
        return _tensorclass_from(obj, obj.__name__ if inplace else obj.__name__ + "_tc", flags)
    if not dataclasses.is_dataclass(obj):
        raise TypeError(
            f"from_dataclass: expected a dataclass or an instance, got {type(obj).__name__}"
        )
    if auto_batch_size and batch_size is not None:
        raise ValueError("from_dataclass: pass batch_size or auto_batch_size, not both")
    cls: Any = dest_cls or _tensorclass_from(type(obj), type(obj).__name__ + "_tc", flags)
    # the values themselves (dataclasses.asdict would deep-copy them and unlock TensorDicts)
    values = {spec.name: getattr(obj, spec.name) for spec in dataclasses.fields(obj)}
    for key, value in values.items():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            values[key] = dataclasses.asdict(value)
    if auto_batch_size or batch_dims is not None:
        return cls.from_dict(values, device=device, auto_batch_size=True, batch_dims=batch_dims)
    return cls(**values, batch_size=batch_size, device=device)
