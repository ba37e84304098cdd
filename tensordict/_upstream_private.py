"""Private methods of upstream's TensorDictBase that code outside upstream calls.

Libraries built on upstream (torchrl first) and upstream's own test suite call
``td._fast_apply(...)``, ``td._check_batch_size()``, ``td._check_device()`` and
``td._has_non_tensor`` as if they were public. Each is a thin spelling of an operation
written elsewhere in this package; nothing here adds behaviour of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch import Tensor

from tensordict._batch import _nested_size
from tensordict._keys import NO_DEFAULT
from tensordict._primitives import CollectionPrimitives

if TYPE_CHECKING:
    from typing_extensions import Self


class UpstreamPrivateOps(CollectionPrimitives):
    """``_fast_apply``, ``_check_batch_size``, ``_check_device`` and ``_has_non_tensor``,
    as upstream's."""

    __slots__ = ()

    def _fast_apply(
        self,
        fn: Callable[..., Any],
        *others: Any,
        filter_empty: bool | None = False,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        num_threads: int = 0,
        **kwargs: Any,
    ) -> Self | None:
        """:meth:`apply` (``named=True`` for :meth:`named_apply`) with upstream's defaults
        for this spelling: empty nested levels are kept (``filter_empty=False``),
        ``num_threads`` is accepted (leaves are visited in this thread), and
        ``nested_keys``/``prefix`` without ``named`` are ignored.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2), "n": {}}, [2])
        >>> sorted(td._fast_apply(lambda x: x + 1).keys())
        ['a', 'n']
        """
        if not kwargs.get("named"):  # (upstream passes them along unused when not named)
            kwargs.pop("nested_keys", None)
            kwargs.pop("prefix", None)
        if device is not NO_DEFAULT:
            kwargs["device"] = device
        if names is not NO_DEFAULT:
            kwargs["names"] = names
        return self.apply(fn, *others, filter_empty=filter_empty, **kwargs)

    def _check_batch_size(self, *, raise_exception: bool = True) -> bool:
        """Whether every entry's shape starts with this collection's batch size, at every
        level; a ``RuntimeError`` naming the first entry that does not, unless
        ``raise_exception=False``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2, 3)}, [2])._check_batch_size()
        True
        """
        from tensordict._unbatched import UnbatchedTensor

        bs = tuple(self.batch_size)
        n = len(bs)
        for key, value in self.items(include_nested=True):
            if isinstance(value, UnbatchedTensor):  # (free of the batch by definition)
                continue
            if hasattr(value, "batch_size"):
                shape = tuple(value.batch_size)
            elif value.is_nested:  # (its shape cannot be read: the sizes of its leading dims)
                shape = tuple(_nested_size(value, dim) for dim in range(min(n, value.dim())))
            else:
                shape = tuple(value.shape)
            if shape[:n] != bs:
                if raise_exception:
                    raise RuntimeError(
                        f"{type(self).__name__}._check_batch_size: entry {key!r} has shape "
                        f"{shape}, which does not start with batch_size {bs}"
                    )
                return False
        return True

    def _check_device(self, *, raise_exception: bool = True) -> bool:
        """Whether every tensor leaf is on this collection's device (any device when it
        has none), at every level; a ``RuntimeError`` naming the first leaf that is not,
        unless ``raise_exception=False``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2)}, [2], device="cpu")._check_device()
        True
        """
        device = self.device
        if device is None:
            return True
        for key, value in self.items(include_nested=True, leaves_only=True):
            if isinstance(value, Tensor) and value.device != device:
                if raise_exception:
                    raise RuntimeError(
                        f"{type(self).__name__}._check_device: leaf {key!r} is on "
                        f"{value.device}, expected {device}"
                    )
                return False
        return True

    @property
    def _has_non_tensor(self) -> bool:
        """Whether a non-tensor entry is held at any level.

        >>> from tensordict import TensorDict
        >>> TensorDict({"n": {"s": "text"}}, [])._has_non_tensor
        True
        """
        from tensordict._nontensor import is_non_tensor
        from tensordict._td import is_tensor_collection

        parts = self._stack_parts()
        if parts is not None:  # (member by member: a ragged stack's leaves do not stack)
            return any(member._has_non_tensor for member in parts[1])
        for key in self.keys():
            value = self.get(key)
            if is_non_tensor(value) or (is_tensor_collection(value) and value._has_non_tensor):
                return True
        return False
