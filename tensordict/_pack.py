"""``pack``: every leaf of a collection in one feature tensor, and its ``PackLayout`` to undo it."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._keys import NestedKey, sort_key, unravel_key
from tensordict._td import TensorDict, is_tensor_collection
from tensordict._tensorclass import is_tensorclass

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase


def _size(shape: Any) -> torch.Size:
    return shape if type(shape) is torch.Size else torch.Size(shape)


def _path(key: NestedKey) -> tuple[str, ...]:
    key = unravel_key(key, "PackLayout")
    return (key,) if type(key) is str else key  # type: ignore[return-value]


@dataclass(frozen=True)
class PackLayout:
    """Where each leaf of a tensordict packed by :meth:`~tensordict.TensorDictBase.pack`
    sits in the packed tensor, and what :meth:`unpack` needs to rebuild the tensordict.

    Frozen, hashable and compared by value: a module can keep one, and ``torch.compile``
    treats it as a constant.

    Its fields: ``keys``, the leaf keys in column order; ``shapes``, the feature shape of
    each leaf (its shape after the root's batch dims); ``dim``, where the packed dimension
    sits, counted from the end (``-1``: last); ``nested``, one ``(key, batch_shape, cls)``
    per nested collection (its batch shape after the root's batch dims, and its
    tensorclass or ``None``); ``device``, the device of the packed tensordict; ``cls``, the
    tensorclass of the root or ``None``.

    Only tensorclasses come back as their class; every other collection (a lazy stack,
    ``TensorDictParams``, ...) comes back as a ``TensorDict``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(3, 2), b={"c": torch.ones(3)}, batch_size=[3])
    >>> flat, layout = td.pack()
    >>> flat.shape, layout.keys
    (torch.Size([3, 3]), ('a', ('b', 'c')))
    >>> (layout.unpack(flat) == td).all()
    True
    """

    keys: tuple[NestedKey, ...]
    shapes: tuple[torch.Size, ...]
    dim: int = -1
    nested: tuple[tuple[NestedKey, torch.Size, type | None], ...] = ()
    device: torch.device | None = None
    cls: type | None = None
    _sizes: tuple[int, ...] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        keys = tuple(unravel_key(k, "PackLayout") for k in self.keys)
        shapes = tuple(_size(s) for s in self.shapes)
        if len(keys) != len(shapes):
            raise ValueError(
                f"PackLayout: {len(keys)} keys but {len(shapes)} shapes; "
                "give one feature shape per key"
            )
        if len(set(keys)) != len(keys):
            raise ValueError(f"PackLayout: a key is listed twice in {keys}")
        if type(self.dim) is not int or self.dim >= 0:
            raise ValueError(
                f"PackLayout: dim must be a negative int (counted from the end), got {self.dim!r}"
            )
        nested = tuple((unravel_key(k, "PackLayout"), _size(s), c) for k, s, c in self.nested)
        device = None if self.device is None else torch.device(self.device)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "shapes", shapes)
        object.__setattr__(self, "nested", nested)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "_sizes", tuple(math.prod(s) for s in shapes))

    @property
    def num_features(self) -> int:
        """The size of the packed dimension: the number of features of all the leaves."""
        return sum(self._sizes)

    @property
    def numel(self) -> int:
        """The number of columns of the packed tensor (upstream's name of ``num_features``)."""
        return sum(self._sizes)

    @property
    def offsets(self) -> tuple[int, ...]:
        """The first column of each leaf, in ``keys`` order.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), batch_size=[5])
        >>> _, layout = td.pack()
        >>> layout.offsets, layout.numel
        ((0, 1), 4)
        """
        return tuple(itertools.accumulate(self._sizes[:-1], initial=0)) if self._sizes else ()

    def unpack(self, flat: Tensor) -> Any:
        """The tensordict (or tensorclass) that ``pack`` turned into ``flat``.

        ``flat`` may carry extra leading batch dimensions (rows of a replay buffer,
        a vmapped batch, ...): they become leading batch dimensions of the result.
        The leaves are views of ``flat`` where its layout allows (always for ``dim=-1``).

        ``TypeError`` if ``flat`` is not a tensor; ``ValueError`` if it has too few dims or
        its packed dim is not ``num_features`` long.
        """
        if not isinstance(flat, Tensor):
            raise TypeError(f"PackLayout.unpack: expected a tensor, got {type(flat).__name__}")
        if flat.dim() < -self.dim:
            raise ValueError(
                f"PackLayout.unpack: the packed dim is {self.dim} but the tensor has "
                f"shape {tuple(flat.shape)}"
            )
        if flat.shape[self.dim] != self.num_features:
            raise ValueError(
                f"PackLayout.unpack: the packed dim {self.dim} has size "
                f"{flat.shape[self.dim]}, expected {self.num_features} features "
                f"for keys {self.keys}"
            )
        if self.dim != -1:
            flat = flat.movedim(self.dim, -1)
        batch = flat.shape[:-1]
        # one dict of entries per level, then each nested level built, deepest first
        specs = {_path(k): (s, c) for k, s, c in self.nested}
        levels: dict[tuple[str, ...], dict[str, Any]] = {(): {}}
        levels.update((path, {}) for path in specs)
        start = 0
        for key, shape, size in zip(self.keys, self.shapes, self._sizes, strict=True):
            path = _path(key)
            for i in range(1, len(path)):  # a level the layout does not list: root batch
                if path[:i] not in levels:
                    levels[path[:i]] = {}
                    specs[path[:i]] = (torch.Size(), None)
            leaf = flat.narrow(-1, start, size).reshape((*batch, *shape))
            levels[path[:-1]][path[-1]] = leaf
            start += size
        device = None if self.device is None else flat.device
        for path in sorted(specs, key=len, reverse=True):
            shape, cls = specs[path]
            sub = _collection(levels[path], torch.Size([*batch, *shape]), device, cls)
            levels[path[:-1]][path[-1]] = sub
        return _collection(levels[()], batch, device, self.cls)


def _collection(
    entries: dict[str, Any], batch: torch.Size, device: torch.device | None, cls: type | None
) -> Any:
    """A level of an unpacked tensordict: its entries have the right shapes already."""
    td = TensorDict._new_unsafe(entries, batch, device, None)
    return td if cls is None else cls.from_tensordict(td)  # type: ignore[attr-defined]


def _pack_dim(dim: int, ndim: int) -> int:
    """``dim`` of ``pack`` (as for ``torch.stack`` over ``ndim`` batch dims), from the end."""
    if type(dim) is not int or not -(ndim + 1) <= dim <= ndim:
        raise IndexError(
            f"pack: dim {dim!r} is out of range for {ndim} batch dims "
            f"(expected an int in [{-(ndim + 1)}, {ndim}])"
        )
    return dim - (ndim + 1) if dim >= 0 else dim


def _tensorclass_of(obj: Any) -> type | None:
    cls = type(obj)
    return None if cls is TensorDict or not is_tensorclass(obj) else cls


def pack(td: TensorDictBase, dim: int = -1, layout: PackLayout | None = None) -> Any:
    """The body of :meth:`TensorDictBase.pack`."""
    batch = td.batch_size
    nb = len(batch)
    dim = _pack_dim(dim, nb)
    leaves: dict[Any, Tensor] = {}
    nested: list[tuple[NestedKey, torch.Size, type | None]] = []
    for key, value in td.items(True):  # keys come canonical: a str, or a tuple of str
        if isinstance(value, Tensor):
            leaves[key] = value
        elif is_tensor_collection(value):
            nested.append((key, value.batch_size[nb:], _tensorclass_of(value)))
        else:
            raise TypeError(
                f"pack: {key!r} holds non-tensor data, which cannot be packed; "
                "drop it first with filter_non_tensor_data()"
            )
    if layout is None:
        keys: Any = sorted(leaves, key=sort_key)
    else:
        keys = _check_layout(leaves, layout, dim)
        if tuple(nested) != layout.nested:
            raise ValueError(
                f"pack: the nested collections {tuple(nested)} (key, batch shape after the "
                f"root's, tensorclass) differ from the layout's {layout.nested}"
            )
    parts = [leaves[k] for k in keys]
    if parts:
        first = parts[0]
        dtype, device = first.dtype, first.device
        if any(p.dtype != dtype or p.device != device for p in parts):
            dtypes = sorted({str(p.dtype) for p in parts})
            devices = sorted({str(p.device) for p in parts})
            what = f"dtypes {dtypes}" if len(dtypes) > 1 else f"devices {devices}"
            raise TypeError(
                f"pack: every leaf must share one dtype and one device, got {what}; "
                "cast or move the tensordict first"
            )
    shapes = tuple(p.shape[nb:] for p in parts)
    if layout is not None:
        if shapes != layout.shapes:
            for key, have, want in zip(keys, shapes, layout.shapes, strict=True):
                if have != want:
                    raise ValueError(
                        f"pack: leaf {key!r} has feature shape {tuple(have)}, "
                        f"the layout expects {tuple(want)}"
                    )
    else:
        layout = PackLayout(tuple(keys), shapes, dim, tuple(nested), td.device, _tensorclass_of(td))
    if not parts:
        device = td.device if td.device is not None else torch.device("cpu")
        flat = torch.empty((*batch, 0), device=device)
    else:
        sizes = layout._sizes
        flat = torch.cat([p.reshape((*batch, n)) for p, n in zip(parts, sizes, strict=True)], -1)
    if dim != -1:
        flat = flat.movedim(-1, dim)
    return flat.contiguous(), layout


def _check_layout(leaves: dict[Any, Tensor], layout: PackLayout, dim: int) -> tuple[NestedKey, ...]:
    if dim != layout.dim:
        raise ValueError(f"pack: dim {dim} does not match the layout's dim {layout.dim}")
    missing = [k for k in layout.keys if k not in leaves]
    known = set(layout.keys)
    extra = [k for k in leaves if k not in known]
    if missing or extra:
        raise KeyError(
            f"pack: the leaves do not match the layout: missing {missing}, not in the "
            f"layout {extra}"
        )
    return layout.keys
