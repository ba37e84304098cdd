"""Inherited class attributes copied onto a concrete collection class, so that every
attribute lookup on its instances resolves at the first entry of its MRO.

Python caches method lookups, so this changes nothing in eager mode. ``torch.compile``
does not: for each attribute it reads on an instance, dynamo guards that no class before
the defining one in the MRO has gained that name, and re-checks those guards on every
compiled call. A collection class is built from some twenty-five small operation mixins
(one job each), so an attribute defined on the last base cost some twenty-five checks
per read name; defined on the class itself, it costs none.

Two limits follow. A subclass that adds a base overriding one of the mixins' attributes
(``class Mine(TensorDict, MyOverrides)``) gets that override back through
:func:`reresolve`, run by ``TensorDictBase.__init_subclass__``. An attribute replaced on a
mixin after import (``mock.patch.object(TensorDictBase, ...)``) is not seen through the
resolved classes: patch the concrete class instead.
"""

from __future__ import annotations

# Class-layout names that must stay where Python put them.
_KEEP = frozenset(
    {
        "__abstractmethods__",
        "__annotations__",
        "__class_getitem__",
        "__dict__",
        "__doc__",
        "__firstlineno__",
        "__init_subclass__",
        "__module__",
        "__orig_bases__",
        "__parameters__",
        "__qualname__",
        "__slots__",
        "__static_attributes__",
        "__subclasshook__",
        "__weakref__",
        "_abc_impl",
    }
)


def resolve_inherited(*classes: type) -> None:
    """Give each class its own reference to every attribute it inherits (the one its MRO
    resolves to: the first base naming it). Call it once every base is complete; an
    attribute later added to a base is not seen through the class."""
    for cls in classes:
        own = cls.__dict__  # (a live view: what is set below counts as own from then on)
        copied = []
        for base in cls.__mro__[1:-1]:  # (object's attributes are dynamo's own concern)
            for name, value in vars(base).items():
                if name not in own and name not in _KEEP:
                    setattr(cls, name, value)
                    copied.append(name)
        cls._resolved_copies = frozenset(copied)  # type: ignore[attr-defined]


def reresolve(cls: type) -> None:
    """For a subclass of a resolved class: give ``cls`` what its MRO resolves to, copies
    left aside, wherever that differs from a copy it would otherwise find first (a base
    it adds after the resolved class overrides a mixin's attribute)."""
    copies = {
        klass: klass.__dict__["_resolved_copies"]
        for klass in cls.__mro__[1:]
        if "_resolved_copies" in klass.__dict__
    }
    if not copies:
        return
    own = cls.__dict__
    recopied = []
    for resolved, names in copies.items():
        for name in names:
            if name in own:
                continue
            for klass in cls.__mro__:
                found = klass.__dict__
                if name in found and name not in copies.get(klass, ()):
                    if found[name] is not resolved.__dict__[name]:
                        setattr(cls, name, found[name])
                        recopied.append(name)
                    break
    if recopied:  # (copies too, for the subclasses of this one)
        cls._resolved_copies = frozenset(recopied)  # type: ignore[attr-defined]
