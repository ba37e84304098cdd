"""dispatch: call a ``forward(self, tensordict)`` with keyword tensors instead of a TensorDict."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from tensordict import TensorDict, is_tensor_collection


class dispatch:
    """Decorate ``forward(self, tensordict, *extra)`` so that it can also be called with
    tensors: positionally in ``in_keys`` order, or by keyword, a nested key's parts
    joined with ``separator`` (``a_c`` for ``("a", "c")``). The TensorDict is built from
    them and the ``out_keys`` entries of the result are returned (one tensor, or a tuple).

    ``source``/``dest`` name the attributes holding the keys read and returned (or are the
    key lists themselves); ``auto_batch_size`` gives the TensorDict the common leading
    dims of its tensors.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict.nn import dispatch
    >>> class Add(nn.Module):
    ...     in_keys, out_keys = [("a", "c"), "d"], ["b"]
    ...
    ...     @dispatch
    ...     def forward(self, tensordict):
    ...         return tensordict.set("b", tensordict["a", "c"] + tensordict["d"])
    >>> Add()(a_c=torch.zeros(2), d=torch.ones(2))
    tensor([1., 1.])
    """

    DEFAULT_SEPARATOR = "_"
    DEFAULT_SOURCE = "in_keys"
    DEFAULT_DEST = "out_keys"

    def __new__(
        cls,
        separator: Any = "_",
        source: str | Sequence[Any] = "in_keys",
        dest: str | Sequence[Any] = "out_keys",
        auto_batch_size: bool = True,
    ) -> Any:
        if callable(separator):  # used bare: @dispatch
            self = super().__new__(cls)
            self.__init__()  # type: ignore[misc]
            return self(separator)
        return super().__new__(cls)

    def __init__(
        self,
        separator: str = "_",
        source: str | Sequence[Any] = "in_keys",
        dest: str | Sequence[Any] = "out_keys",
        auto_batch_size: bool = True,
    ) -> None:
        self.separator = separator
        self.source = source
        self.dest = dest
        self.auto_batch_size = auto_batch_size

    def get_source(self, func: Any, self_func: Any) -> Any:
        """The keys ``source`` names: an attribute of ``self_func`` if ``source`` is a
        string, else ``source`` itself (``func`` is unused; deprecated, as upstream).

        >>> import warnings
        >>> from tensordict.nn import dispatch
        >>> class M:
        ...     in_keys = ["a"]
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     dispatch().get_source(None, M())
        ['a']
        """
        warnings.warn(
            "dispatch.get_source() is deprecated and will be removed in TensorDict 0.17",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self_func, self.source) if isinstance(self.source, str) else self.source

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        names = list(inspect.signature(func).parameters)
        is_method = bool(names) and names[0] == "self"
        first = names[1:2] if is_method else names[:1]
        if first != ["tensordict"]:
            raise RuntimeError(
                f"dispatch: the first argument of the wrapped function must be named "
                f"'tensordict', got {first}"
            )
        sep, auto = self.separator, self.auto_batch_size

        def keys_of(spec: Any, owner: Any, what: str) -> list[Any]:
            if isinstance(spec, str):
                if owner is None:
                    raise RuntimeError(
                        f"dispatch: {what}={spec!r} names an attribute, and the wrapped "
                        "function is not a method: pass the keys themselves"
                    )
                return list(getattr(owner, spec))
            return list(spec)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            owner = args[0] if is_method else None
            rest = args[1:] if is_method else args
            lead = (owner,) if is_method else ()
            if (rest and is_tensor_collection(rest[0])) or "tensordict" in kwargs:
                return func(*lead, *rest, **kwargs)
            values: dict[Any, Any] = {}
            for key in keys_of(self.source, owner, "source"):
                name = key if isinstance(key, str) else sep.join(key)
                if rest:
                    if name in kwargs:
                        raise RuntimeError(
                            f"dispatch: Duplicated argument in args and kwargs: {name!r}"
                        )
                    values[key], rest = rest[0], rest[1:]
                elif name in kwargs:
                    values[key] = kwargs.pop(name)
            td = TensorDict(values, _common_dims(values.values()) if auto else [])
            out = func(*lead, td, *rest, **kwargs)
            results = tuple(out.get(k) for k in keys_of(self.dest, owner, "dest"))
            return results[0] if len(results) == 1 else results

        return wrapper


def _common_dims(values: Any) -> torch.Size:
    """The longest leading shape every tensor shares."""
    shapes = [v.shape for v in values if isinstance(v, torch.Tensor)]
    if not shapes:
        return torch.Size([])
    dims: list[int] = []
    for sizes in zip(*shapes, strict=False):
        if len(set(sizes)) != 1:
            break
        dims.append(sizes[0])
    return torch.Size(dims[: min(len(s) for s in shapes)])
