"""TensorDictBase: the public abstract base of every collection, carrying each operation once."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from tensordict._apply import WrittenWatch, dropped
from tensordict._consolidate import ConsolidateOps
from tensordict._construct_ops import ConstructOps
from tensordict._context import ContextOps
from tensordict._convert import ConvertOps
from tensordict._distributed import DistributedOps
from tensordict._entry_ops import EntryOps
from tensordict._html import HtmlRepr
from tensordict._io import InteropOps
from tensordict._keys import NO_DEFAULT, NestedKey, key_path
from tensordict._map import MapOps
from tensordict._math_ops import MathOps
from tensordict._memmap_ops import MemmapOps
from tensordict._modules import ModuleOps
from tensordict._mro import reresolve
from tensordict._pointwise import PointwiseOps
from tensordict._primitives import CollectionPrimitives, DenseStorage
from tensordict._reduce import ReduceOps
from tensordict._shape import ShapeOps
from tensordict._shape_more import MoreShapeOps
from tensordict._state import StateOps
from tensordict._structure import StructureOps
from tensordict._tensor_like import TensorLikeOps
from tensordict._torch_fn import TorchFunctionOps
from tensordict._upstream_private import UpstreamPrivateOps

if TYPE_CHECKING:
    from typing import Self


_NO_DEFAULT: Any = NO_DEFAULT  # one sentinel for every get(key, default)

#: The abstract methods a concrete collection must implement (see ``_primitives.py``).
PRIMITIVES: tuple[str, ...] = tuple(
    sorted(
        name
        for name, attr in vars(CollectionPrimitives).items()
        if getattr(attr, "__isabstractmethod__", False)
    )
)


class TensorDictBase(
    ConsolidateOps,
    StructureOps,
    PointwiseOps,
    ReduceOps,
    ConvertOps,
    StateOps,
    ShapeOps,
    TorchFunctionOps,
    MemmapOps,
    ModuleOps,
    DistributedOps,
    HtmlRepr,
    MapOps,
    ContextOps,
    EntryOps,
    MathOps,
    TensorLikeOps,
    MoreShapeOps,
    ConstructOps,
    InteropOps,
    UpstreamPrivateOps,
):
    """The abstract base of every tensor collection: ``TensorDict``, ``LazyStackedTensorDict``
    and every tensorclass.

    A collection implements a small set of primitives (its entries, getting and setting
    one entry, its batch size, names and lock, its tensor leaves and how to rebuild
    itself from new ones, how to map an operation over the dense TensorDicts it is made
    of, and the batch-dimension engine); every operation is written once, here, against
    them. A subclass that leaves a primitive abstract is refused when it is defined,
    unless it says ``_abstract = True`` in its body.

    >>> import torch
    >>> from tensordict import TensorDict, TensorDictBase, lazy_stack
    >>> td = TensorDict({"a": torch.zeros(3)}, [3])
    >>> isinstance(td, TensorDictBase), isinstance(lazy_stack([td, td]), TensorDictBase)
    (True, True)
    >>> class Broken(TensorDictBase):
    ...     pass
    Traceback (most recent call last):
    ...
    TypeError: Broken: a TensorDictBase subclass must implement the primitives [...] (or set ...)
    """

    __slots__ = ()
    _abstract: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        reresolve(cls)  # (a base it adds may override what TensorDict holds a copy of)
        if cls.__dict__.get("_abstract", False):
            return
        missing = [
            name
            for name in PRIMITIVES
            if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
        ]
        if missing:
            raise TypeError(
                f"{cls.__name__}: a TensorDictBase subclass must implement the primitives "
                f"{missing} (or set `_abstract = True` in its body)"
            )

    # ------------------------------------------------------------------ apply
    def apply(
        self,
        fn: Callable[..., Tensor | None],
        *others: TensorDictBase,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        inplace: bool = False,
        filter_empty: bool | None = None,
        call_on_nested: bool = False,
        default: Any = _NO_DEFAULT,
        out: Any = None,
        propagate_lock: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new collection with ``fn`` applied to every tensor leaf (``fn`` -> None drops it).

        ``filter_empty`` (None by default) drops the nested levels left empty by dropped
        leaves, and gives None when nothing is left at all; True drops every empty level
        (None for an empty result); False keeps them.

        ``default`` stands in for the leaves ``others`` lack; ``out`` receives the result
        in place (and is returned); ``propagate_lock`` locks a new result when this
        collection is locked.

        ``is_leaf(cls)`` decides, by its class, which entry ``fn`` receives whole: a nested
        collection it accepts (a ``TensorDict``, a lazy stack) or a non-tensor entry
        (``is_leaf=tensordict.is_leaf_nontensor``) is passed to ``fn`` instead of being
        walked into or carried over; tensors are always leaves. As upstream, ``named``,
        ``nested_keys`` and ``prefix`` make this call :meth:`named_apply`, and ``checked``
        is accepted (results are always checked here).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2), "b": torch.ones(2, dtype=torch.int64)}, [2])
        >>> list(td.apply(lambda x: x * 2 if x.is_floating_point() else None).keys())
        ['a']
        >>> td = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2)}}, [2])
        >>> td.apply(lambda x: x.apply(torch.neg) if isinstance(x, TensorDict) else x,
        ...          is_leaf=lambda cls: issubclass(cls, TensorDict))["n", "b"]
        tensor([-1., -1.])
        """
        key_fn = _apply_key_fn(self._call("apply"), kwargs) if kwargs else None
        args = (batch_size, device, names, inplace, filter_empty, call_on_nested, default, is_leaf)
        return self._apply_with(fn, others, key_fn, args, out, propagate_lock)  # type: ignore[no-any-return]

    def _apply_with(
        self,
        fn: Callable[..., Any],
        others: tuple[Any, ...],
        key_fn: Callable[[tuple[str, ...]], Any] | None,
        args: tuple[Any, ...],
        out: Any,
        propagate_lock: bool,
    ) -> Any:
        """``apply``/``named_apply``: the engine with ``args`` (batch size through default,
        in ``_apply_impl``'s order), then ``out`` updated with the result, or a new result
        locked when this collection is and ``propagate_lock`` asks."""
        inplace, filter_empty = args[3], args[4]
        # (in place, the answer is None when no leaf was written, as upstream)
        watch = WrittenWatch(fn) if inplace and filter_empty is not False else None
        result = self._apply_impl(fn if watch is None else watch, others, key_fn, *args)
        if watch is not None:
            if watch.wrote_nothing(self, filter_empty):
                return None
        elif filter_empty is not False and not inplace and dropped(self, result, filter_empty):
            return None
        if out is not None:  # the results replace out's entries (set, not copied in), as upstream
            call = self._call("named_apply" if key_fn else "apply")
            if args[0] is not None and tuple(result.batch_size) != tuple(out.batch_size):
                raise RuntimeError(
                    f"{call}: batch_size {tuple(result.batch_size)} and out.batch_size "
                    f"{tuple(out.batch_size)} must be equal when both are given"
                )
            if out.is_locked:
                raise RuntimeError(
                    f"{call}: out is locked; its entries cannot be replaced "
                    f"(unlock it, or write into it with apply_/update_)"
                )
            return out.update(result)
        if propagate_lock and not inplace and self.is_locked:
            result.lock_()
        return result

    def named_apply(
        self,
        fn: Callable[..., Tensor | None],
        *others: TensorDictBase,
        nested_keys: bool = False,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        inplace: bool = False,
        filter_empty: bool | None = None,
        call_on_nested: bool = False,
        default: Any = _NO_DEFAULT,
        out: Any = None,
        propagate_lock: bool = False,
        prefix: tuple[str, ...] = (),
        is_leaf: Callable[[type], bool] | None = None,
        checked: bool = False,
    ) -> Self:
        """Like :meth:`apply`, with the key as first argument (a full tuple if ``nested_keys``,
        led by ``prefix``); ``default``, ``out``, ``propagate_lock``, ``is_leaf`` and
        ``checked`` as for :meth:`apply`.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.zeros(1)}}, [1])
        >>> seen = []
        >>> _ = td.named_apply(lambda k, x: seen.append(k), nested_keys=True)
        >>> seen
        ['a', ('b', 'c')]
        """
        key_fn = _named_key_fn(nested_keys, prefix)
        args = (batch_size, device, names, inplace, filter_empty, call_on_nested, default, is_leaf)
        return self._apply_with(fn, others, key_fn, args, out, propagate_lock)  # type: ignore[no-any-return]

    def apply_(self, fn: Callable[..., Tensor], *others: TensorDictBase, **kwargs: Any) -> Self:
        """Apply ``fn`` to every tensor leaf and copy the result back into the leaf; keyword
        arguments are those of :meth:`apply` (``default``, ``is_leaf``, ...).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2)}, [2]).apply_(lambda x: x * 3)
        >>> td["a"]
        tensor([3., 3.])
        """
        if kwargs:
            if "inplace" in kwargs:
                raise TypeError(f"{self._call('apply_')}: inplace is always True here")
            self.apply(fn, *others, inplace=True, **kwargs)
            return self
        return self._apply_impl(fn, others, None, None, None, None, True, True, False)

    # --------------------------------------------------------------- entries
    def pop(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """Remove the entry at ``key`` and return it, or return ``default`` when missing.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1)}, [1])
        >>> td.pop("a").shape, list(td.keys()), td.pop("a", None)
        (torch.Size([1]), [], None)
        """
        call = self._call("pop")
        path = key_path(key, call)
        try:
            value = self._get_path_or_none(path)
            if value is None:  # missing: the KeyError names what the level holds
                value = self.get(path)
                if value is None:  # get answers None when set_get_defaults_to_none is on
                    raise KeyError(f"{call}: key {path!r} was not found")
        except KeyError as err:
            if default is not _NO_DEFAULT:
                return default
            reason = str(err.args[0]).split(": ", 1)[-1] if err.args else ""
            raise type(err)(  # (a KeyThroughLeafError stays one)
                f"{call}: You are trying to pop key {key!r} which is not in dict "
                f"without providing default value: {reason}"
            ) from None
        self.del_(path)
        return value

    def setdefault(self, key: NestedKey, default: Any, inplace: bool = False) -> Any:
        """Return the entry at ``key``, writing ``default`` there first when it is missing
        (with ``set(..., inplace=inplace)``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2])
        >>> td.setdefault("a", torch.ones(2))
        tensor([1., 1.])
        """
        path = key_path(key, self._call("setdefault"))
        if self._get_path_or_none(path) is None:
            self.set(path, default, inplace=inplace)
        return self.get(path)

    def __delitem__(self, key: NestedKey) -> None:
        self.del_(key)

    def __getitems__(self, indices: list[int]) -> Any:
        """A batch of items at once, as ``torch.utils.data.DataLoader`` asks for it."""
        return self._index(torch.as_tensor(indices, dtype=torch.long))

    def __len__(self) -> int:
        return self._batch_size[0] if self._batch_size else 0

    def __iter__(self) -> Iterator[Self]:
        if not self._batch_size:
            raise TypeError(
                f"{type(self).__name__}: iteration over a collection with batch_size=[]"
            )
        return (self._index(i) for i in range(len(self)))

    if TYPE_CHECKING:  # each concrete class has its own, over its storage

        def __getitem__(self, key: Any) -> Any: ...
        def __setitem__(self, key: Any, value: Any) -> None: ...

    def __bool__(self) -> bool:
        raise RuntimeError(
            f"{type(self).__name__}: Converting a tensordict to boolean value is not "
            "permitted: the truth value of a TensorDict is ambiguous; "
            "use td.is_empty(), (td == x).all() or .any()"
        )

    def densify(self, layout: torch.layout | None = torch.strided) -> DenseTensorDictBase:
        """A dense TensorDict with the same content: every lazy stack, at any level, made
        dense (a collection holding none is returned as it is).

        Members' leaves of one shape are stacked; leaves that differ in shape become
        nested tensors of ``layout`` (``torch.strided``, the default, or ``torch.jagged``)
        along the stack dim, a key some members lack has no rows there (None for a
        non-tensor entry), as upstream; non-tensor entries are stacked, names and empty
        nested levels kept.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2])] * 3)
        >>> type(s.densify()).__name__, s.densify().batch_size
        ('TensorDict', torch.Size([3, 2]))
        >>> r = lazy_stack([TensorDict(a=torch.ones(1)), TensorDict(a=torch.ones(2))])
        >>> d = r.densify(layout=torch.jagged)
        >>> d["a"].is_nested, d[1]["a"].shape
        (True, torch.Size([2]))
        """
        from tensordict._densify import densify

        return densify(self, layout or torch.strided, self._call("densify"))  # type: ignore[no-any-return]

    # -------------------------------------------------------------- stacking
    @classmethod
    def stack(cls, tds: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
        """Same as ``torch.stack(tds, dim)``: dense when the members share a structure,
        a lazy stack otherwise (see :meth:`lazy_stack`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict.stack([TensorDict({"a": torch.zeros(2)}, [2])] * 3, 1).batch_size
        torch.Size([2, 3])
        """
        from tensordict._stack import stack

        return stack(tds, dim, out=out)

    @classmethod
    def maybe_dense_stack(cls, tds: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
        """Stack densely when the members share one structure, lazily otherwise (members
        of different batch sizes too: the ragged dims hold -1).

        >>> from tensordict import TensorDict
        >>> tds = [TensorDict(batch_size=[2]), TensorDict(batch_size=[3])]
        >>> TensorDict.maybe_dense_stack(tds).shape
        torch.Size([2, -1])
        """
        from tensordict._functional import maybe_dense_stack

        if out is not None:
            return cls.stack(tds, dim, out=out)
        return maybe_dense_stack(tds, dim)

    @classmethod
    def cat(cls, tds: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
        """Same as ``torch.cat(tds, dim)``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict.cat([TensorDict({"a": torch.zeros(2)}, [2])] * 3).batch_size
        torch.Size([6])
        """
        from tensordict._stack import cat

        return cat(tds, dim, out=out)

    @classmethod
    def lazy_stack(cls, items: Sequence[Any], dim: int = 0, **kwargs: Any) -> Any:
        """A :class:`~tensordict.LazyStackedTensorDict` of ``items`` along a new batch dim,
        whatever their structures (``kwargs`` go to its constructor).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> s = TensorDict.lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(b=torch.ones(1))])
        >>> type(s).__name__, s.batch_size
        ('LazyStackedTensorDict', torch.Size([2]))
        """
        from tensordict._lazy import LazyStackedTensorDict

        out = kwargs.pop("out", None)
        name = kwargs.pop("stack_dim_name", None)
        strict = kwargs.pop("strict_shape", False)
        if strict and items and not isinstance(items[0], torch.Tensor):
            first = items[0].batch_size
            ragged = [i for i, x in enumerate(items) if x.batch_size != first]
            if ragged:
                i = ragged[0]
                raise RuntimeError(
                    f"{cls.__name__}.lazy_stack: strict_shape=True: stacking tensordicts "
                    f"requires them to have congruent batch sizes; got {tuple(first)} at "
                    f"position 0 and {tuple(items[i].batch_size)} at position {i}"
                )
        if items and all(isinstance(x, torch.Tensor) for x in items):
            return torch.stack(list(items), dim, out=out)  # upstream: tensors stack densely
        stacked = LazyStackedTensorDict(*items, stack_dim=dim, **kwargs)
        if name is not None:
            stacked._stack_name = name
        if out is None:
            return stacked
        if out.batch_size != stacked.batch_size:
            raise RuntimeError(
                f"{cls.__name__}.lazy_stack: out.batch_size and stacked batch size must match, "
                f"got out.batch_size={tuple(out.batch_size)} and {tuple(stacked.batch_size)}"
            )
        return out.update_(stacked)


class DenseTensorDictBase(DenseStorage, TensorDictBase):
    """The abstract base of the collections that hold their entries in one dict
    (``TensorDict``): the type the dense-only helpers of the operation modules are
    written against, so that none of them names the concrete class.

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> from tensordict._base import DenseTensorDictBase
    >>> td = TensorDict({"a": torch.zeros(3)}, [3])
    >>> isinstance(td, DenseTensorDictBase), isinstance(lazy_stack([td, td]), DenseTensorDictBase)
    (True, False)
    """

    __slots__ = ()
    _abstract: ClassVar[bool] = True


#: Upstream's name for the root of the tensor collections. Every collection here (a
#: tensorclass included) derives from :class:`TensorDictBase`, so it is that class.
TensorCollection = TensorDictBase


def _named_key_fn(nested_keys: bool, prefix: tuple[str, ...]) -> Callable[[tuple[str, ...]], Any]:
    """The key ``named_apply`` passes ``fn``: the last name, or the full key led by
    ``prefix`` when ``nested_keys``."""
    from tensordict._keys import join_path

    if not nested_keys:
        return lambda path: path[-1]
    if prefix:
        return lambda path: join_path((*prefix, *path))
    return join_path


def _apply_key_fn(call: str, kwargs: dict[str, Any]) -> Callable[[tuple[str, ...]], Any] | None:
    """The keyword arguments upstream's ``apply`` passes on to its engine: ``named`` (with
    ``nested_keys`` and ``prefix``) gives the key function of :meth:`named_apply`;
    ``checked`` is accepted and has no effect. Anything else is a TypeError."""
    extra = sorted(set(kwargs) - {"named", "nested_keys", "prefix", "checked"})
    if extra:
        raise TypeError(f"{call}: unexpected keyword argument(s) {extra}")
    if not kwargs.get("named", False):
        if "nested_keys" in kwargs or "prefix" in kwargs:
            raise TypeError(f"{call}: nested_keys and prefix need named=True")
        return None
    return _named_key_fn(kwargs.get("nested_keys", False), tuple(kwargs.get("prefix", ())))
