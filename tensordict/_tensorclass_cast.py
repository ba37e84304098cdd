"""tensorclass field rules: annotation resolution and the casting of values set into fields."""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tensordict._mapping import is_plain_mapping
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._primitives import CollectionPrimitives
from tensordict._switches import list_to_stack

_LEGACY_TENSOR_TYPE = type(torch.IntTensor)
_CASTABLE = (int, float, bool, np.ndarray, np.number, np.bool_)
_SCALARS = (int, float, bool, str)


def hint_types(hint: Any) -> tuple[Any, ...]:
    """The classes a hint allows (``Optional[X]`` and ``X | None`` give ``(X,)``)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(a for a in typing.get_args(hint) if a is not type(None))
    if origin is not None and isinstance(origin, type):
        return (origin,)  # list[int] -> list
    return (hint,)


class Unresolved:
    """The stand-in for an annotation that does not resolve: any value is taken as it is."""


def _resolve(ann: Any, globalns: dict[str, Any], localns: dict[str, Any]) -> Any:
    for _ in range(3):  # a quoted name under `from __future__ import annotations` is twice a str
        if isinstance(ann, typing.ForwardRef):
            ann = ann.__forward_arg__
        if not isinstance(ann, str):
            return ann
        try:
            ann = eval(ann, globalns, localns)
        except Exception:  # unresolvable: the field takes values as they come
            return Unresolved
    return Unresolved


def resolve_hints(
    cls: Any, annotations: Mapping[str, Any]
) -> tuple[dict[str, tuple[Any, ...]], frozenset[str]]:
    """Each field's allowed classes (a name that does not resolve allows anything), and
    the fields annotated with a union (``X | None``, ``Optional[X]``, ``Union[...]``).

    Run on first use rather than at class creation, so a field may name its own class or
    a class defined later in the module (``child: "Node"``).
    """
    module = sys.modules.get(cls.__module__)
    globalns = dict(vars(module)) if module is not None else {}
    localns = {cls.__name__: cls, "Self": cls}
    out: dict[str, tuple[Any, ...]] = {}
    unions = set()
    for name, ann in annotations.items():
        ann = _resolve(ann, globalns, localns)
        if typing.get_origin(ann) in (typing.Union, types.UnionType):
            unions.add(name)
        out[name] = tuple(cls if t is typing.Self else t for t in _flat_types(ann))
    return out, frozenset(unions)


def _flat_types(hint: Any) -> tuple[Any, ...]:
    out: list[Any] = []
    for t in hint_types(hint):
        out.extend(
            _flat_types(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else [t]
        )
    return tuple(out)


def check_tensor_only(cls: Any, hints: Mapping[str, tuple[Any, ...]]) -> None:
    """``tensor_only`` classes take tensors, collections and None only."""
    for name, types_ in hints.items():
        for t in types_:
            if t is Unresolved:
                continue
            if not (
                isinstance(t, _LEGACY_TENSOR_TYPE)  # torch.IntTensor, torch.LongTensor, ...
                or (
                    isinstance(t, type) and issubclass(t, (Tensor, CollectionPrimitives, NonTensor))
                )
            ):
                raise TypeError(
                    f"tensorclass {cls.__name__}: field {name!r} is annotated "
                    f"{getattr(t, '__name__', t)!s}; tensor_only requires types to be Tensor, "
                    "Tensor-subtrypes or None (or tensor collections)"
                )


def _is_tensor_type(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Tensor)


def _collection_type(hints: tuple[Any, ...]) -> Any:
    from tensordict._td import is_tensor_collection

    for hint in hints:
        if isinstance(hint, type) and is_tensor_collection(hint):
            return hint
    return None


def _wants_nontensor(hints: tuple[Any, ...]) -> bool:
    return any(isinstance(h, type) and issubclass(h, NonTensor) for h in hints)


def cast_value(cls: Any, name: str, value: Any, batch_size: torch.Size, device: Any) -> Any:
    """Prepare a value for the field ``name`` following the class's casting rules.

    The result is something a TensorDict stores (a tensor, a collection, a number it turns
    into a tensor, or a non-tensor wrapper). ``value`` is never None here.
    """
    hints: tuple[Any, ...] = cls._field_hints()[name]
    in_union = name in cls._hint_unions
    if isinstance(value, NonTensor):
        return value
    if cls._nocast:
        if isinstance(value, (Tensor, CollectionPrimitives)):
            return value
        if type(value) is list and (not batch_size or len(value) == batch_size[0]):
            return _nocast_list(value, batch_size, device)
        return NonTensorData(value)
    if cls._autocast:
        return _autocast(cls, name, value, hints, in_union, batch_size, device)
    if isinstance(value, (Tensor, CollectionPrimitives)):
        return value
    if is_plain_mapping(value):
        target = _collection_type(hints)
        if target is None and (not cls._tensor_only or _wants_nontensor(hints)):
            return NonTensorData(value)
        return _from_mapping(target, value, batch_size, device)
    if isinstance(value, _CASTABLE):
        if batch_size and type(value) in _PY_NUMBERS and _scalar_field(hints, value):
            return NonTensorData(value)  # a 0-d tensor would not fit the batch
        return value  # the TensorDict turns numbers and arrays into tensors
    if cls._tensor_only:
        return _as_tensor(cls, name, value, hints)
    if isinstance(value, list):
        return value  # the TensorDict's list rule: a batch-shaped list is a stack
    return NonTensorData(value)


_PY_NUMBERS = (int, float, bool)
_SCALAR_ACCEPTS = {bool: (bool,), int: (int,), float: (int, float)}  # an int is a float


def _scalar_field(hints: tuple[Any, ...], value: Any) -> bool:
    """Whether ``value`` fits a field annotated ``int``, ``float`` or ``bool`` (or a union
    of these): with batch dims it is kept as the Python value, as upstream does, where a
    0-d tensor would not match the batch size."""
    if not hints or any(h not in _SCALAR_ACCEPTS for h in hints):
        return False
    return any(isinstance(value, _SCALAR_ACCEPTS[h]) for h in hints)


def _nocast_list(value: list[Any], batch_size: torch.Size, device: Any) -> NonTensor:
    """A list shaped like the batch (any list for a 0-dim batch), under ``nocast``: one
    value per element, numbers kept as they are (a NonTensorStack, as the TensorDict's
    list rule builds for other values); any other list is one value."""
    if list_to_stack():
        stack = NonTensorStack._from_batch_list(value, max(len(batch_size), 1), device)
        if stack is not None and stack.batch_size[: len(batch_size)] == batch_size:
            return stack
    return NonTensorData(value)


def _autocast(
    cls: Any,
    name: str,
    value: Any,
    hints: tuple[Any, ...],
    in_union: bool,
    batch_size: torch.Size,
    device: Any,
) -> Any:
    target = hints[0] if len(hints) == 1 else None
    if is_plain_mapping(value):
        coll = _collection_type(hints)
        # a union never builds a tensorclass (only a TensorDict), as upstream
        if coll is not None and not (in_union and getattr(coll, "_is_tensorclass", False)):
            return _from_mapping(coll, value, batch_size, device)
        return NonTensorData(value)
    if isinstance(target, type) and issubclass(target, Tensor):
        return _as_tensor(cls, name, value, hints)
    if isinstance(value, (Tensor, CollectionPrimitives)) and not (
        target in _SCALARS or target is np.ndarray
    ):
        return value
    if target in _SCALARS:
        if isinstance(value, Tensor):
            value = value.item() if value.numel() == 1 else value.tolist()
        try:
            return NonTensorData(target(value))
        except (TypeError, ValueError):
            raise TypeError(
                f"{cls.__name__}.{name}: cannot cast {type(value).__name__} {value!r} to "
                f"the annotation {target.__name__}"
            ) from None
    if target is np.ndarray:
        if isinstance(value, Tensor):
            value = value.numpy()
        return NonTensorData(np.asarray(value))
    if isinstance(value, _CASTABLE):
        return value
    return NonTensorData(value)


def _as_tensor(cls: Any, name: str, value: Any, hints: tuple[Any, ...]) -> Tensor:
    if isinstance(value, Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        expected = " or ".join(getattr(h, "__name__", str(h)) for h in hints) or "a tensor"
        raise TypeError(
            f"{cls.__name__}.{name}: expects {expected}, got {type(value).__name__} {value!r}"
        ) from None


def _from_mapping(
    target: Any, value: Mapping[str, Any], batch_size: torch.Size, device: Any
) -> Any:
    from tensordict._td import TensorDict

    if target is None or not getattr(target, "_is_tensorclass", False):
        return TensorDict(dict(value), batch_size=batch_size, device=device)
    return target.from_dict(dict(value), batch_size=batch_size, device=device)
