"""The primitives every collection provides; the operation mixins are written against them.

A collection (``TensorDict``, ``LazyStackedTensorDict``, every tensorclass) implements
the abstract methods below; every operation of :class:`tensordict.TensorDictBase` is
written once, against these, and inherited. ``TensorDictBase`` refuses at class
definition a concrete subclass that leaves one of them abstract.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._keys import NO_DEFAULT

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import DenseTensorDictBase
    from tensordict._keys import NestedKey

Names = list[str | None] | None


class CollectionPrimitives:
    """What an operation may use of a collection: shape state and the abstract primitives.

    The four slots hold what every collection has: its batch size, device, dimension
    names and lock flag. Storage is the concrete class's own business.
    """

    # the last three belong to mixins (consolidation record, context-manager stack) but
    # live here: only one base of a class may lay out slots
    __slots__ = (
        "__weakref__",  # weakref.ref(td) works, as for tensors
        "_batch_size",
        "_consolidated",
        "_device",
        "_is_locked",
        "_last_op",
        "_names",
        "_op_stack",
    )

    _batch_size: torch.Size
    _device: torch.device | None
    _names: Names
    _is_locked: bool

    # ------------------------------------------------------------ derived state
    @property
    def shape(self) -> torch.Size:
        """Alias of ``batch_size``."""
        return self._batch_size

    @property
    def batch_dims(self) -> int:
        """The number of batch dimensions."""
        return len(self._batch_size)

    ndim = batch_dims

    def dim(self) -> int:
        """The number of batch dimensions."""
        return len(self._batch_size)

    def numel(self) -> int:
        """The number of elements of the batch (the product of ``batch_size``; with -1 for
        nested tensor leaves, their elements' total)."""
        bs = self._batch_size
        if -1 in bs:
            from tensordict._ragged import ragged_numel  # (above this module: it reads leaves)

            return ragged_numel(self)
        return bs.numel()

    @property
    def device(self) -> torch.device | None:
        """The device every leaf lives on, or None when leaves may live anywhere."""
        return self._device

    def _call(self, op: str) -> str:
        """The name errors give an operation: ``<real class>.<op>``."""
        return f"{type(self).__name__}.{op}"

    # --------------------------------------------------------------- primitives
    @property
    @abstractmethod
    def batch_size(self) -> torch.Size:
        """The leading shape shared by every leaf."""

    @property
    @abstractmethod
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (None for unnamed ones)."""

    @property
    @abstractmethod
    def is_locked(self) -> bool:
        """Whether keys may not be added, removed or replaced out of place."""

    @abstractmethod
    def lock_(self) -> Self:
        """Forbid adding, removing or replacing keys."""

    @abstractmethod
    def unlock_(self) -> Self:
        """Allow keys to change again."""

    # entries
    @abstractmethod
    def keys(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> Any:
        """The keys; nested ones as tuples when ``include_nested``."""

    @abstractmethod
    def values(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> Any:
        """The values, in the order of ``keys``."""

    @abstractmethod
    def items(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None
    ) -> Any:
        """``(key, value)`` pairs, in the order of ``keys``."""

    @abstractmethod
    def get(self, key: Any, default: Any = ...) -> Any:
        """The entry at ``key``, or ``default``."""

    @abstractmethod
    def _get_path_or_none(self, path: tuple[str, ...]) -> Any:
        """The entry at a key path, or None."""

    @abstractmethod
    def set(self, key: Any, value: Any, inplace: bool = False) -> Self:
        """Write ``value`` at ``key``."""

    @abstractmethod
    def set_(self, key: Any, value: Any, *, non_blocking: bool = False) -> Self:
        """Copy ``value`` into the existing entry ``key``."""

    @abstractmethod
    def del_(self, key: Any) -> Self:
        """Remove the entry at ``key``."""

    @abstractmethod
    def update(self, other: Any, inplace: bool = False) -> Self:
        """Write every entry of ``other``."""

    @abstractmethod
    def update_(self, other: Any) -> Self:
        """Copy every entry of ``other`` into the existing entries."""

    # leaves
    @abstractmethod
    def _tensor_leaves(self, out: list[Tensor]) -> list[Tensor]:
        """Append the tensor leaves to ``out``, in a fixed order, and return it."""

    @abstractmethod
    def _rebuild(self, leaves: Iterator[Tensor], check: str | None = None) -> Self:
        """A collection of the same kind and structure whose tensor leaves come from
        ``leaves`` (in the order of :meth:`_tensor_leaves`). Without ``check`` the caller
        guarantees they keep the batch shape; with it they are checked, errors naming it."""

    @abstractmethod
    def _other_leaves(
        self, call: str, other: CollectionPrimitives, extra_ok: bool = False
    ) -> list[Tensor]:
        """The tensor leaves of ``other`` paired with this collection's, in the order of
        :meth:`_tensor_leaves`; a KeyError naming ``call`` when the key sets differ (with
        ``extra_ok``, only when ``other`` lacks one of ours)."""

    @abstractmethod
    def _per_member(self, fn: Callable[..., Any], *args: Any) -> Self:
        """``fn(dense, *args)`` for each dense TensorDict this collection is made of,
        reassembled into the same kind (``self`` when every call returned its input)."""

    @abstractmethod
    def _as_dense(self, call: str) -> DenseTensorDictBase:
        """A dense TensorDict with the same content, or an error naming ``call`` when that
        cannot be (members of different structure)."""

    @abstractmethod
    def _apply_impl(
        self,
        fn: Callable[..., Any],
        others: tuple[Any, ...],
        key_fn: Callable[[tuple[str, ...]], Any] | None,
        batch_size: Any,
        device: Any,
        names: Any,
        inplace: bool,
        filter_empty: bool | None,
        call_on_nested: bool,
        default: Any = NO_DEFAULT,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> Self:
        """The engine of ``apply`` / ``named_apply`` / ``apply_`` (``default``: what a leaf
        the others lack reads as, when the caller gave one; ``is_leaf``: which entries,
        by class, ``fn`` receives whole)."""

    # batch dimensions
    @abstractmethod
    def _remap(
        self,
        call: str,
        fn: Callable[[Any], Any],
        new_bs: torch.Size,
        names: Names,
        nontensor: Callable[[Any], Any] | None = None,
    ) -> Self:
        """Apply ``fn`` to every tensor and nested collection, with a new batch size."""

    @abstractmethod
    def _remap_many(
        self,
        call: str,
        fn: Callable[[Any], Sequence[Any]],
        new_bss: Sequence[torch.Size],
        names: Names,
    ) -> tuple[Self, ...]:
        """Like :meth:`_remap` for operations with several results (split, unbind)."""

    @abstractmethod
    def _index(self, index: Any) -> Any:
        """``self[index]`` for a batch index."""

    @abstractmethod
    def _set_at_index(self, index: Any, value: Any) -> None:
        """``self[index] = value`` for a batch index."""

    @abstractmethod
    def unbind(self, dim: int = 0) -> tuple[Self, ...]:
        """The slices along a batch dim."""

    @abstractmethod
    def _stack_parts(self) -> tuple[int, list[Any]] | None:
        """``(stack_dim, members)`` for a collection stored as a stack of members (how it
        is saved and displayed), None for one stored densely."""

    @abstractmethod
    def __reduce__(self) -> tuple[Any, ...]: ...

    if TYPE_CHECKING:  # written once on TensorDictBase, used by the operation mixins

        def apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> Self: ...
        def densify(self, layout: torch.layout | None = torch.strided) -> DenseTensorDictBase: ...
        def select(self, *keys: NestedKey, inplace: bool = False, strict: bool = True) -> Self: ...


class DenseStorage(CollectionPrimitives):
    """What the mixins of dense storage only (``TensorDict``'s indexing and state loading)
    may use besides the primitives: the entries dict and its unchecked builders."""

    __slots__ = ()

    if TYPE_CHECKING:
        _tensordict: dict[str, Any]

        @classmethod
        def _new_unsafe(
            cls, entries: dict[str, Any], batch_size: torch.Size, device: Any, names: Any
        ) -> Self: ...
        def _checked_from_entries(
            self,
            entries: dict[str, Any],
            batch_size: torch.Size,
            device: torch.device | None,
            names: list[str | None] | None,
            call: str,
            prefix: tuple[str, ...] = (),
        ) -> Self: ...
        def _set_path(self, path: tuple[str, ...], value: Any, call: str) -> None: ...


def slot_setters(*classes: type) -> dict[str, Any]:
    """Each slot of ``classes`` -> its descriptor's ``__set__``: writing a slot through it
    skips the class's ``__setattr__`` (a hot constructor's shortcut)."""
    return {
        name: klass.__dict__[name].__set__ for klass in classes for name in vars(klass)["__slots__"]
    }


def as_collection(value: Any) -> Any:
    """A collection-like object (a ``tensordict.nn.TensorDictParams``: a module that
    reads as a TensorDict) as the TensorDict it reads as; anything else unchanged."""
    if isinstance(value, (CollectionPrimitives, Tensor)):
        return value
    to_td = getattr(value, "to_tensordict", None)
    return to_td() if callable(to_td) else value
