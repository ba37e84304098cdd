"""The construction functions of ``_construct.py`` as class methods, as upstream binds them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tensordict._keys import NestedKey
from tensordict._mapping import is_plain_mapping
from tensordict._primitives import CollectionPrimitives


class ConstructOps(CollectionPrimitives):
    """``TensorDict.from_any(...)`` and friends: each builds a dense TensorDict."""

    __slots__ = ()

    @classmethod
    def from_dict(
        cls,
        d: Mapping[NestedKey, Any],
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Any = None,
        *,
        auto_batch_size: bool | None = None,
    ) -> Any:
        """A TensorDict from a (nested) dict (see :func:`tensordict.from_dict`).

        >>> import torch
        >>> from tensordict import LazyStackedTensorDict
        >>> d = {"a": torch.zeros(3)}
        >>> LazyStackedTensorDict.from_dict(d, auto_batch_size=True).batch_size
        torch.Size([3])
        """
        from tensordict._construct import from_dict

        return from_dict(
            d,
            batch_size=batch_size,
            device=device,
            batch_dims=batch_dims,
            names=names,
            auto_batch_size=auto_batch_size,
        )

    @classmethod
    def from_any(
        cls,
        obj: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> Any:
        """A TensorDict from a dict, tuple, namedtuple, dataclass or structured array
        (see :func:`tensordict.from_any`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict.from_any({"a": torch.zeros(2)}, auto_batch_size=True).batch_size
        torch.Size([2])
        """
        from tensordict._construct import from_any

        return from_any(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_tuple(
        cls,
        obj: tuple[Any, ...],
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> Any:
        """A TensorDict keyed ``"0"``, ``"1"``, ... from a tuple.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict.from_tuple((torch.zeros(1), torch.ones(1))).keys())
        ['0', '1']
        """
        from tensordict._construct import from_tuple

        return from_tuple(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_namedtuple(
        cls,
        named_tuple: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> Any:
        """A TensorDict keyed by the fields of a namedtuple (nested ones converted too).

        >>> import collections, torch
        >>> from tensordict import TensorDict
        >>> P = collections.namedtuple("P", ["x", "y"])
        >>> list(TensorDict.from_namedtuple(P(torch.zeros(1), torch.ones(1))).keys())
        ['x', 'y']
        """
        from tensordict._construct import from_namedtuple

        return from_namedtuple(
            named_tuple,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

    @classmethod
    def from_list(
        cls,
        input: Sequence[Any],
        *,
        auto_batch_size: bool | None = None,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Any = None,
        lazy: bool | None = None,
    ) -> Any:
        """A stack of the elements of ``input`` (dicts, collections or nested lists of
        them) along new leading dims: dense when they share a structure, lazy when
        ``lazy=True`` (or when they differ).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict.from_list([{"a": torch.zeros(2)}, {"a": torch.ones(2)}]).batch_size
        torch.Size([2])
        """
        from tensordict._construct import from_dict
        from tensordict._lazy import lazy_stack
        from tensordict._stack import plain_stack

        def build(item: Any) -> Any:
            if isinstance(item, (list, tuple)):
                members = [build(x) for x in item]
                return lazy_stack(members) if lazy else plain_stack(members)
            if is_plain_mapping(item):
                return from_dict(item, device=device)
            return item

        out = build(list(input))
        if batch_size is not None:
            out.batch_size = batch_size
        elif auto_batch_size or batch_dims is not None:
            out.auto_batch_size_(batch_dims)
        if names is not None:
            out.names = names
        return out

    @classmethod
    def from_pytree(
        cls,
        pytree: Any,
        *,
        batch_size: Any = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
    ) -> Any:
        """A TensorDict from nested dicts, lists, tuples and namedtuples; each level
        records its container type under ``"_pytree_type"`` so :meth:`to_pytree` can
        rebuild it (sequences are keyed ``"0"``, ``"1"``, ...). A dict key that is not a
        string is stored under ``str(key)``, and the key objects under
        ``"_pytree_keys"``, so :meth:`to_pytree` gives them back.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> tree = {"a": [torch.zeros(2), (torch.ones(2),)]}
        >>> td = TensorDict.from_pytree(tree)
        >>> back = td.to_pytree()
        >>> type(back["a"]).__name__, type(back["a"][1]).__name__
        ('list', 'tuple')
        """
        from tensordict._td import TensorDict

        td = TensorDict(_pytree_entries(pytree))
        if batch_size is not None:
            td.batch_size = batch_size
        elif auto_batch_size or batch_dims is not None:
            td.auto_batch_size_(batch_dims)
        return td

    def to_pytree(self) -> Any:
        """The pytree :meth:`from_pytree` read (the collection itself when it was not
        built by :meth:`from_pytree`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict.from_pytree((torch.zeros(1), torch.ones(1))).to_pytree()
        (tensor([0.]), tensor([1.]))
        """
        return to_pytree(self)

    @classmethod
    def fromkeys(cls, keys: Iterable[NestedKey], value: Any = 0) -> Any:
        """A TensorDict with ``value`` at every key of ``keys``.

        >>> from tensordict import TensorDict
        >>> TensorDict.fromkeys(["a", ("b", "c")], 1)["b", "c"]
        tensor(1)
        """
        from tensordict._construct import fromkeys

        return fromkeys(keys, value)

    @classmethod
    def from_dataclass(
        cls,
        dataclass: Any,
        *,
        dest_cls: type | None = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        as_tensorclass: bool = False,
        device: Any = None,
        batch_size: Any = None,
    ) -> Any:
        """A TensorDict (or, with ``as_tensorclass``, a tensorclass instance) from a
        dataclass instance.

        >>> import dataclasses, torch
        >>> from tensordict import TensorDict
        >>> @dataclasses.dataclass
        ... class D:
        ...     x: torch.Tensor
        >>> type(TensorDict.from_dataclass(D(torch.zeros(2)))).__name__
        'TensorDict'
        """
        from tensordict._construct import from_dataclass

        return from_dataclass(
            dataclass,
            dest_cls=dest_cls,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            as_tensorclass=as_tensorclass,
            device=device,
            batch_size=batch_size,
        )


_PYTREE_TYPE = "_pytree_type"
_PYTREE_KEYS = "_pytree_keys"  # {entry name: key object} for a dict's non-string keys


def from_pytree(
    pytree: Any,
    *,
    batch_size: Any = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
) -> Any:
    """A TensorDict from nested dicts, lists, tuples and namedtuples (see
    :meth:`TensorDict.from_pytree <tensordict.TensorDictBase.from_pytree>`).

    >>> import torch
    >>> from tensordict import from_pytree
    >>> from_pytree([torch.zeros(3), torch.ones(3)], auto_batch_size=True).batch_size
    torch.Size([3])
    """
    return ConstructOps.from_pytree(
        pytree, batch_size=batch_size, auto_batch_size=auto_batch_size, batch_dims=batch_dims
    )


def _pytree_entries(tree: Any) -> dict[str, Any]:
    """The entries of one pytree level, with its container type recorded."""
    from tensordict._nontensor import NonTensorData

    keys: dict[str, Any] = {}
    if is_plain_mapping(tree):
        items = {}
        for k, v in tree.items():
            name = k if type(k) is str else str(k)
            if name in items or name in (_PYTREE_TYPE, _PYTREE_KEYS):
                raise ValueError(
                    f"from_pytree: the dict keys {keys.get(name, name)!r} and {k!r} both "
                    f"become the entry name {name!r}"
                    if name in items
                    else f"from_pytree: the key {k!r} is reserved for the pytree's own records"
                )
            items[name] = v
            if type(k) is not str:
                keys[name] = k
    elif isinstance(tree, (list, tuple)):
        fields = getattr(tree, "_fields", None)
        names = list(fields) if fields is not None else [str(i) for i in range(len(tree))]
        items = dict(zip(names, tree, strict=True))
    else:
        raise TypeError(f"from_pytree: cannot convert a {type(tree).__name__}")
    out: dict[str, Any] = {
        k: _pytree_entries(v) if isinstance(v, (list, tuple)) or is_plain_mapping(v) else v
        for k, v in items.items()
    }
    out[_PYTREE_TYPE] = NonTensorData(type(tree))
    if keys:
        out[_PYTREE_KEYS] = NonTensorData(keys)
    return out


def to_pytree(td: Any) -> Any:
    """The pytree :func:`_pytree_entries` recorded, rebuilt from a TensorDict level."""
    kind = td.get(_PYTREE_TYPE, None)
    if kind is None:
        return td
    kind = kind.data
    keys = td.get(_PYTREE_KEYS, None)
    names = {} if keys is None else keys.data
    values = {
        names.get(k, k): to_pytree(v) if hasattr(v, "keys") and not is_plain_mapping(v) else v
        for k, v in (
            (k, td[k])
            for k in td.keys()  # noqa: SIM118
            if k not in (_PYTREE_TYPE, _PYTREE_KEYS)
        )
    }
    if issubclass(kind, Mapping):
        return kind(values) if kind is not dict else values
    if hasattr(kind, "_fields"):
        return kind(**values)
    ordered = [values[str(i)] for i in range(len(values))]
    return kind(ordered)
