"""The small protocol every operation mixin is written against, declared for type checkers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:
    from tensordict._td import TensorDict


class CollectionProtocol:
    """What the operation mixins may use of a collection: storage, shape, apply, set/get.

    Each concrete collection provides these; the mixins provide everything else, once.
    """

    __slots__ = ("_batch_size", "_device", "_is_locked", "_names", "_tensordict")

    _lazy = False  # True for LazyStackedTensorDict: the leaf walks then visit its members

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
        """The number of elements of the batch (the product of ``batch_size``)."""
        return self._batch_size.numel()

    @property
    def device(self) -> torch.device | None:
        """The device every leaf lives on, or None when leaves may live anywhere."""
        return self._device

    _tensordict: dict[str, Any]
    _batch_size: torch.Size
    _device: torch.device | None
    _names: list[str | None] | None
    _is_locked: bool

    if TYPE_CHECKING:

        @property
        def batch_size(self) -> torch.Size: ...
        @classmethod
        def _new_unsafe(
            cls,
            entries: dict[str, Any],
            batch_size: torch.Size,
            device: torch.device | None,
            names: list[str | None] | None,
        ) -> TensorDict: ...
        def _checked_from_entries(
            self,
            entries: dict[str, Any],
            batch_size: torch.Size,
            device: torch.device | None,
            names: list[str | None] | None,
            call: str,
            prefix: tuple[str, ...] = (),
        ) -> TensorDict: ...
        def _get_path_or_none(self, path: tuple[str, ...]) -> Any: ...
        def _set_path(self, path: tuple[str, ...], value: Any, call: str) -> None: ...
        def _index(self, index: Any) -> TensorDict: ...
        def get(self, key: Any, default: Any = ...) -> Any: ...
        def set(self, key: Any, value: Any, inplace: bool = False) -> Any: ...
        def set_(self, key: Any, value: Any) -> Any: ...
        def keys(self, include_nested: bool = False, leaves_only: bool = False) -> Any: ...
        def items(self, include_nested: bool = False, leaves_only: bool = False) -> Any: ...
        def update(self, other: Any, inplace: bool = False) -> Any: ...
        def update_(self, other: Any) -> Any: ...
        def apply(
            self,
            fn: Callable[..., Tensor | None],
            *others: TensorDict,
            batch_size: Any = None,
            device: Any = None,
            names: Any = None,
            inplace: bool = False,
            filter_empty: bool = True,
            call_on_nested: bool = False,
        ) -> TensorDict: ...
        def lock_(self) -> Any: ...
        def unlock_(self) -> Any: ...
