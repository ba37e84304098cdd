"""Build a TensorDict from other containers: dicts, tuples, namedtuples, dataclasses, arrays."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tensordict._keys import NestedKey
from tensordict._mapping import is_plain_mapping
from tensordict._td import TensorDict, is_tensor_collection

__all__ = [
    "from_any",
    "from_dataclass",
    "from_dict",
    "from_namedtuple",
    "from_struct_array",
    "from_tuple",
    "fromkeys",
]


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _is_struct_array(obj: Any) -> bool:
    return isinstance(obj, np.ndarray) and obj.dtype.names is not None


def _tree(obj: Any) -> Any:
    """``obj`` as nested dicts of leaves (tensors, tensor collections, other values)."""
    if isinstance(obj, Tensor) or is_tensor_collection(obj):
        return obj
    if is_plain_mapping(obj):
        return {str(k) if not isinstance(k, tuple) else k: _tree(v) for k, v in obj.items()}
    if _is_namedtuple(obj):
        return {name: _tree(getattr(obj, name)) for name in type(obj)._fields}
    if type(obj).__module__ == "torch.return_types":
        return {"values": obj.values, "indices": obj.indices}
    if isinstance(obj, tuple):
        return {str(i): _tree(v) for i, v in enumerate(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _tree(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if _is_struct_array(obj):
        names = obj.dtype.names or ()
        return {name: _tree(obj[name]) for name in names}
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, (bool, int, float)) and not isinstance(obj, np.generic):
        return torch.tensor(obj)
    if isinstance(obj, np.generic):
        return torch.as_tensor(obj)
    return obj


def _build(
    call: str,
    tree: Mapping[Any, Any],
    auto_batch_size: bool | None,
    batch_dims: int | None,
    device: Any,
    batch_size: Any,
) -> TensorDict:
    if auto_batch_size is None:
        auto_batch_size = batch_dims is not None
    if auto_batch_size and batch_size is not None:
        raise TypeError(f"{call}: pass batch_size or auto_batch_size=True, not both")
    if auto_batch_size:
        return TensorDict.from_dict(
            dict(tree), device=device, batch_dims=batch_dims, auto_batch_size=True
        )
    return TensorDict(
        dict(tree), batch_size=[] if batch_size is None else batch_size, device=device
    )


def from_dict(
    d: Mapping[NestedKey, Any],
    *,
    auto_batch_size: bool | None = None,
    batch_size: Any = None,
    device: Any = None,
    batch_dims: int | None = None,
    names: Any = None,
) -> Any:
    """A TensorDict from a (nested) dict. The batch size is ``batch_size``, or, with
    ``auto_batch_size=True`` (implied by ``batch_dims``), the leading shape the entries share
    (at most ``batch_dims`` dims); by default it is empty. A tensor collection is returned
    as is.

    >>> import torch
    >>> from tensordict import from_dict
    >>> from_dict({"a": torch.zeros(3, 4)}).batch_size
    torch.Size([])
    >>> from_dict({"a": torch.zeros(3, 4)}, auto_batch_size=True).batch_size
    torch.Size([3, 4])
    >>> from_dict({"a": torch.zeros(3, 4)}, batch_dims=1).batch_size
    torch.Size([3])
    """
    call = "from_dict"
    if is_tensor_collection(d):
        return d
    if batch_size is not None and batch_dims is not None:
        raise ValueError(f"{call}: pass batch_size or batch_dims, not both")
    if auto_batch_size is None:
        auto_batch_size = batch_dims is not None
    if auto_batch_size and batch_size is None:
        return TensorDict.from_dict(
            d, device=device, batch_dims=batch_dims, names=names, auto_batch_size=True
        )
    return TensorDict.from_dict(
        d, batch_size=[] if batch_size is None else batch_size, device=device, names=names
    )


def from_any(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """A TensorDict from a dict, tuple, namedtuple, dataclass, structured array or pandas
    DataFrame, converted recursively (numbers become tensors); a PersistentTensorDict from
    an open h5py File. A tensor, a tensor collection, or any other object is returned as
    it is.

    >>> import torch
    >>> from tensordict import from_any
    >>> td = from_any({"a": (torch.zeros(2), 1.0)}, auto_batch_size=True)
    >>> sorted(td.keys(include_nested=True, leaves_only=True))
    [('a', '0'), ('a', '1')]
    """
    if isinstance(obj, Tensor) or is_tensor_collection(obj):
        return obj
    if type(obj) is list:  # as upstream: a tensor if it is one, else a non-tensor stack
        try:
            return torch.tensor(obj, device=device)
        except (TypeError, ValueError, RuntimeError):
            from tensordict._nontensor import NonTensorStack

            return NonTensorStack.from_list(obj, device) if _regular(obj) else NonTensorStack(*obj)
    if type(obj).__module__.split(".", 1)[0] in ("pandas", "h5py"):
        return _from_other(obj, auto_batch_size, batch_dims, device, batch_size)
    if is_plain_mapping(obj):
        return from_dict(
            _tree(obj),
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    if _is_struct_array(obj):  # batch size = the array's shape, as upstream
        return from_struct_array(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    if not isinstance(obj, tuple) and not (
        dataclasses.is_dataclass(obj) and not isinstance(obj, type)
    ):
        return obj  # (upstream: any other object is returned as it is)
    return _build("from_any", _tree(obj), auto_batch_size, batch_dims, device, batch_size)


def _from_other(
    obj: Any, auto_batch_size: bool, batch_dims: int | None, device: Any, batch_size: Any
) -> Any:
    """``from_any`` of a pandas DataFrame or an open h5py File (told by the type's module,
    so neither library is imported for other objects); any other object as it is."""
    name = type(obj).__name__
    if name == "DataFrame":
        return TensorDict.from_pandas(
            obj,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    if name == "File":
        from tensordict._io_persistent import PersistentTensorDict

        return PersistentTensorDict.from_h5(
            obj, auto_batch_size=auto_batch_size, batch_dims=batch_dims, batch_size=batch_size
        )
    return obj


def _regular(obj: Any) -> bool:
    """Whether a nested list has the same length at every level (a batch shape)."""
    if not isinstance(obj, list) or not obj or not all(isinstance(x, list) for x in obj):
        return True
    return len({len(x) for x in obj}) == 1 and all(_regular(x) for x in obj)


def from_tuple(
    obj: tuple[Any, ...],
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> TensorDict:
    """A TensorDict with the keys ``"0"``, ``"1"``, ... of the tuple's elements (converted
    recursively, as ``from_any``).

    >>> import torch
    >>> from tensordict import from_tuple
    >>> td = from_tuple((torch.zeros(3), torch.ones(3, 2)), auto_batch_size=True)
    >>> sorted(td.keys()), td.batch_size
    (['0', '1'], torch.Size([3]))
    """
    if not isinstance(obj, tuple):
        raise TypeError(f"from_tuple: expected a tuple, got {type(obj).__name__}")
    tree = {str(i): _tree(v) for i, v in enumerate(obj)}
    return _build("from_tuple", tree, auto_batch_size, batch_dims, device, batch_size)


def from_namedtuple(
    named_tuple: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> TensorDict:
    """A TensorDict keyed by the fields of a namedtuple (or ``values``/``indices`` of a
    ``torch.max``-style result), converted recursively.

    >>> import collections, torch
    >>> from tensordict import from_namedtuple
    >>> Point = collections.namedtuple("Point", ["x", "y"])
    >>> sorted(from_namedtuple(Point(torch.zeros(2), torch.ones(2))).keys())
    ['x', 'y']
    >>> sorted(from_namedtuple(torch.zeros(2, 3).max(1)).keys())
    ['indices', 'values']
    """
    if not (_is_namedtuple(named_tuple) or type(named_tuple).__module__ == "torch.return_types"):
        raise TypeError(f"from_namedtuple: expected a namedtuple, got {type(named_tuple).__name__}")
    tree = _tree(named_tuple)
    return _build("from_namedtuple", tree, auto_batch_size, batch_dims, device, batch_size)


def from_dataclass(
    dataclass: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    as_tensorclass: bool = False,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """A TensorDict keyed by the fields of a dataclass instance, converted recursively.

    ``dest_cls``, when given, is a TensorDict subclass (or tensorclass) built from the
    fields instead. With ``as_tensorclass=True`` the result is an instance of a new
    tensorclass with the dataclass's fields, and a dataclass type gives that tensorclass
    type (:func:`tensordict.tensorclass.from_dataclass`).

    >>> import dataclasses, torch
    >>> from tensordict import from_dataclass
    >>> @dataclasses.dataclass
    ... class Obs:
    ...     pixels: torch.Tensor
    ...     reward: torch.Tensor
    >>> td = from_dataclass(Obs(torch.zeros(4, 3), torch.zeros(4)), auto_batch_size=True)
    >>> sorted(td.keys()), td.batch_size
    (['pixels', 'reward'], torch.Size([4]))
    """
    call = "from_dataclass"
    if as_tensorclass:  # a tensorclass type from a type, an instance from an instance
        from tensordict._from_dataclass import from_dataclass as to_tensorclass

        return to_tensorclass(
            dataclass,
            dest_cls=dest_cls,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            batch_size=batch_size,
            device=device,
        )
    if not dataclasses.is_dataclass(dataclass) or isinstance(dataclass, type):
        raise TypeError(f"{call}: expected a dataclass instance, got {type(dataclass).__name__}")
    tree = _tree(dataclass)
    td = _build(call, tree, auto_batch_size, batch_dims, device, batch_size)
    if dest_cls is None:
        return td
    fields = {str(k): td.get(k) for k in td.keys()}  # noqa: SIM118
    return dest_cls(**fields, batch_size=td.batch_size)


def from_struct_array(
    struct_array: np.ndarray,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    """A TensorDict of the fields of a numpy structured array, batch size = the array's
    shape (as :meth:`TensorDict.from_struct_array`), sharing its memory where the fields
    allow it (nested structured fields become nested TensorDicts).

    >>> import numpy as np
    >>> from tensordict import from_struct_array
    >>> arr = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i8"), ("b", "f4")])
    >>> td = from_struct_array(arr)
    >>> td["a"].tolist(), td.batch_size
    ([1, 3], torch.Size([2]))
    """
    from tensordict._io_tabular import from_struct_array as tabular

    return tabular(
        "from_struct_array",
        struct_array,
        batch_size=batch_size,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
    )


def fromkeys(keys: Iterable[NestedKey], value: Any = 0) -> TensorDict:
    """A TensorDict (empty batch size) holding ``value`` under every key of ``keys``.

    >>> from tensordict import fromkeys
    >>> td = fromkeys(["a", ("n", "b")], 1)
    >>> sorted(td.keys(include_nested=True, leaves_only=True), key=str), td["n", "b"].item()
    ([('n', 'b'), 'a'], 1)
    """
    leaf = _tree(value)
    td = TensorDict({}, batch_size=[])
    for key in keys:
        td.set(key, leaf.clone() if isinstance(leaf, Tensor) else leaf)
    return td


def from_module(module: Any, *args: Any, **kwargs: Any) -> Any:
    """Function form of :meth:`TensorDict.from_module`: the parameters and buffers of
    ``module`` as a nested TensorDict (the module's own tensors, not copies).

    >>> import torch
    >>> from tensordict import from_module
    >>> params = from_module(torch.nn.Linear(3, 2))
    >>> sorted(params.keys()), params["weight"].shape
    (['bias', 'weight'], torch.Size([2, 3]))
    """
    return TensorDict.from_module(module, *args, **kwargs)


def from_modules(*modules: Any, **kwargs: Any) -> Any:
    """Function form of :meth:`TensorDict.from_modules`: the parameters of same-structure
    ``modules`` stacked along a new first dim.

    >>> import torch
    >>> from tensordict import from_modules
    >>> from_modules(torch.nn.Linear(3, 2), torch.nn.Linear(3, 2))["weight"].shape
    torch.Size([2, 2, 3])
    """
    return TensorDict.from_modules(*modules, **kwargs)
