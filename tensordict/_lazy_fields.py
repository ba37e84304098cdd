"""A lazy stack of tensorclass or TypedTensorDict instances, used as one instance of their class.

Upstream wraps such a stack in the class; here the stack keeps the instances as its
members. This module gives the stack what the wrapper would: ``stack.x`` reads the
field ``x`` stacked, ``stack.x = v`` sets it (each member gets its slice), the methods,
properties and class attributes the user's class defines work on the stack, and
``isinstance(stack, C)`` holds for a TypedTensorDict class ``C`` when every member is
one (see :class:`TypedMeta`).
"""

from __future__ import annotations

from typing import Any

from tensordict._nontensor import NonTensor


def member_class(stack: Any) -> type | None:
    """The class of the stack's first leaf member (through stacks of stacks); None for an
    empty stack."""
    members = stack.tensordicts
    while members:
        parts = members[0]._stack_parts()
        if parts is None:
            return type(members[0])
        members = parts[1]
    return None


def is_field(stack: Any, name: str) -> bool:
    """Whether ``name`` is a declared field of the class of the stack's members."""
    return name in getattr(member_class(stack), "_fields", ())


MISSING: Any = object()  # class_attribute's answer for a name the class does not define


def class_attribute(stack: Any, name: str) -> Any:
    """``name`` as the user's class of the members defines it (a method, a property, a
    class attribute), bound to the stack: ``stack.total()`` runs ``total`` with the stack
    as ``self``; :data:`MISSING` when the class defines no such name (the library's own
    classes are not looked at: the stack has their operations already)."""
    cls = member_class(stack)
    if cls is None:
        return MISSING
    for klass in cls.__mro__:
        if klass.__module__.partition(".")[0] in _LIBRARY:
            break
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            getter = getattr(type(attr), "__get__", None)
            return attr if getter is None else getter(attr, stack, cls)
    return MISSING


_LIBRARY = frozenset({"tensordict", "tdnn", "builtins"})


def read_field(stack: Any, name: str) -> Any:
    """The field ``name`` of every member, stacked; a non-tensor field as its values."""
    value = stack.get(name)
    return value.tolist() if isinstance(value, NonTensor) else value


def _leaf_members(obj: Any) -> list[Any] | None:
    """The leaf members of a stack (through stacks of stacks); None for a collection
    that is not a stack, or an empty stack."""
    stack_parts = getattr(obj, "_stack_parts", None)
    parts = stack_parts() if stack_parts is not None else None
    if parts is None or not parts[1]:
        return None
    leaves: list[Any] = []
    for member in parts[1]:
        inner = _leaf_members(member)
        leaves.extend([member] if inner is None else inner)
    return leaves


class TypedMeta(type):
    """The metaclass of ``TypedTensorDict``: a non-empty lazy stack whose members are all
    instances of a class counts as an instance of it too (upstream's stack of them is
    one, wrapping the stack)."""

    def __instancecheck__(cls, obj: Any) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        leaves = _leaf_members(obj)
        return leaves is not None and all(type.__instancecheck__(cls, m) for m in leaves)
