"""The construction functions of ``_construct.py`` as class methods, as upstream binds them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tensordict._keys import NestedKey
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
    def from_struct_array(
        cls,
        struct_array: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> Any:
        """A TensorDict keyed by the fields of a numpy structured array.

        >>> import numpy as np
        >>> from tensordict import TensorDict
        >>> arr = np.zeros(2, dtype=[("a", "i8")])
        >>> TensorDict.from_struct_array(arr, auto_batch_size=True).batch_size
        torch.Size([2])
        """
        from tensordict._construct import from_struct_array

        return from_struct_array(
            struct_array,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )

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
