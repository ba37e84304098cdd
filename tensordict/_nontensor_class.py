"""The class of a one-value non-tensor entry, as a name written beside its JSON value.

A checkpoint (docs/format.md, section 5) or a consolidated file stores a non-tensor value
as JSON; the entry's class, when it is not ``NonTensorData``, is written as a short tag so
that it loads back as the same class: ``"MetaData"``, or ``"MetaData[int]"`` for a typed
``MetaData`` of a JSON type. Nothing is imported to find a class: the tags are a table.
"""

from __future__ import annotations

from typing import Any

from tensordict._nontensor import MetaData, NonTensorData

# the value types a typed MetaData may name in a tag (the JSON types)
_JSON_TYPES: dict[str, type] = {t.__name__: t for t in (str, int, float, bool, list, dict)}


class UnnamedClass(Exception):
    """A non-tensor entry whose class has no tag (it is kept only by pickling)."""


def class_tag(entry: NonTensorData) -> str | None:
    """The tag of ``entry``'s class: None for ``NonTensorData`` itself, ``"MetaData"``,
    ``"MetaData[<type>]"``; :class:`UnnamedClass` for any other class.

    >>> from tensordict import MetaData, NonTensorData
    >>> class_tag(NonTensorData(1)), class_tag(MetaData(1)), class_tag(MetaData[int](1))
    (None, 'MetaData', 'MetaData[int]')
    """
    cls = type(entry)
    if cls is NonTensorData:
        return None
    if cls is MetaData:
        return "MetaData"
    kind = cls._data_type if issubclass(cls, MetaData) else None
    if kind is not None and _JSON_TYPES.get(kind.__name__) is kind and cls is _typed(kind):
        return f"MetaData[{kind.__name__}]"
    raise UnnamedClass(cls.__qualname__)


def _typed(kind: type) -> type[MetaData]:
    """``MetaData[kind]`` (the one class of that name)."""
    return MetaData.__class_getitem__(kind)


def entry_of(tag: Any, value: Any, batch_size: Any, call: str, where: str) -> NonTensorData:
    """The entry of class ``tag`` (:func:`class_tag`; None: ``NonTensorData``) holding
    ``value``; a ``ValueError`` naming ``where`` for an unknown tag or a value the class
    refuses.

    >>> entry_of("MetaData[int]", 3, [2], "load", "key 'x'")
    MetaData[int](data=3, batch_size=torch.Size([2]), device=None)
    """
    if tag is None:
        return NonTensorData(value, batch_size)
    cls: type[NonTensorData] | None = None
    if tag == "MetaData":
        cls = MetaData
    elif type(tag) is str and tag.startswith("MetaData[") and tag.endswith("]"):
        kind = _JSON_TYPES.get(tag[len("MetaData[") : -1])
        cls = None if kind is None else _typed(kind)
    if cls is None:
        raise ValueError(
            f"{call}: {where} names the non-tensor class {tag!r}; known: None, 'MetaData', "
            f"'MetaData[<type>]' with <type> one of {sorted(_JSON_TYPES)}"
        )
    try:
        return cls(value, batch_size)
    except TypeError as err:
        raise ValueError(f"{call}: {where}: {err}") from None
