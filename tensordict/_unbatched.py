"""UnbatchedTensor: a tensor leaf exempt from the batch-size rule of its TensorDict."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tensordict._torch_compat import disable_subclass_dispatch


class UnbatchedTensor(Tensor):
    """A tensor that a TensorDict stores whatever its batch size (shared by every element).

    It marks itself with ``_pass_through = True``, the flag ``default_is_leaf`` and
    ``is_leaf_nontensor`` read; operations on it return ordinary tensors.

    >>> import torch
    >>> from tensordict import UnbatchedTensor, default_is_leaf
    >>> u = UnbatchedTensor(torch.zeros(5))
    >>> type(u).__name__, u.shape, default_is_leaf(UnbatchedTensor)
    ('UnbatchedTensor', torch.Size([5]), True)
    """

    _pass_through = True

    @staticmethod
    def __new__(cls, data: Any) -> UnbatchedTensor:
        return torch.as_tensor(data).as_subclass(cls)

    def __init__(self, data: Any) -> None:
        """Everything happens in ``__new__``."""

    @property
    def batch_size(self) -> torch.Size:
        """Always empty: the tensor belongs to no batch."""
        return torch.Size([])

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        with disable_subclass_dispatch():
            return func(*args, **(kwargs or {}))
