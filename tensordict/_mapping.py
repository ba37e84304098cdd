"""Collections as virtual ``MutableMapping``s (as upstream), and the plain-mapping test."""

from __future__ import annotations

import sys
from abc import ABC
from collections.abc import Mapping, MutableMapping
from typing import Any, TypeGuard


class _MappingCollection(ABC):  # noqa: B024  (an ABC only for its registry and hook)
    """The collections that read as a ``MutableMapping``: every ``TensorDictBase`` but a
    tensorclass (upstream's tensorclass is not a mapping), and the types given to
    :func:`register_mapping_collection` (``TensorDictParams``).

    A virtual base, registered with ``MutableMapping``: no mixin method is inherited, so
    the collections keep their own ``__eq__``, ``get``, ``update``, ``__iter__``, ...
    """

    __slots__ = ()

    @classmethod
    def __subclasshook__(cls, sub: type) -> Any:
        # consulted once per type (ABCMeta caches the answer); TensorDictBase is looked up
        # lazily, as this module sits below it (before it exists no subclass can either)
        base = getattr(sys.modules.get("tensordict._base"), "TensorDictBase", None)
        if base is not None and issubclass(sub, base):
            return not getattr(sub, "_is_tensorclass", False)
        return NotImplemented


MutableMapping.register(_MappingCollection)


def register_mapping_collection(cls: type) -> None:
    """Make ``cls`` (a collection that is no ``TensorDictBase``) a virtual ``MutableMapping``
    that :func:`is_plain_mapping` tells apart from a plain dict-like."""
    _MappingCollection.register(cls)


def is_plain_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """Whether ``value`` is a dict-like that is not one of our collections (a ``dict``, an
    ``OrderedDict``, a ``MappingProxyType``, a user mapping): what ``isinstance(value,
    Mapping)`` meant before the collections became mappings themselves.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(1))
    >>> is_plain_mapping({"a": 1}), is_plain_mapping(td), isinstance(td, Mapping)
    (True, False, True)
    """
    if type(value) is dict:  # the common case, without the two ABC checks
        return True
    return isinstance(value, Mapping) and not isinstance(value, _MappingCollection)
